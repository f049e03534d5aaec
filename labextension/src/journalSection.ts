/** The journal section: search (on every change of its fields) and append. */

import { Message } from '@lumino/messaging';

import {
  asText,
  button,
  describe,
  el,
  EMPTY,
  ENTRY_KEYS,
  isObject,
  longText,
  MAX_SHOWN_CHARS,
  shortTime,
  timeLabel
} from './dom';
import { AgentMemoryModel } from './model';
import { MemorySection } from './section';

/** The current agent's journal: matching entries, newest first, and a form to add one. */
export class JournalSection extends MemorySection {
  constructor(model: AgentMemoryModel) {
    super(model, 'Journal', 'jp-AgentMemory-journal');
    this.form = el('form', 'jp-AgentMemory-searchForm');
    this.queryInput = el('input', 'jp-mod-styled jp-AgentMemory-query');
    this.queryInput.placeholder = 'Search text';
    this.queryInput.setAttribute('aria-label', 'Search the journal for text');
    this.tagInput = el('input', 'jp-mod-styled jp-AgentMemory-tag');
    this.tagInput.placeholder = 'Tag';
    this.tagInput.setAttribute('aria-label', 'Only entries with this tag');
    this.limitInput = el('input', 'jp-mod-styled jp-AgentMemory-limit');
    this.limitInput.type = 'number';
    this.limitInput.min = '1';
    this.limitInput.value = `${this.defaultLimit}`;
    this.limitInput.title = 'Most recent matches to show';
    this.limitInput.setAttribute('aria-label', 'Most recent matches to show');
    const searchButton = button('Search', 'jp-AgentMemory-search', () => {
      /* submitted through the form */
    });
    searchButton.type = 'submit';
    this.form.append(this.queryInput, this.tagInput, this.limitInput, searchButton);
    this.journalNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-journalNote');
    this.journalList = el('ol', 'jp-AgentMemory-entries');
    const append = el('div', 'jp-AgentMemory-appendForm');
    this.appendText = el('textarea', 'jp-mod-styled jp-AgentMemory-appendText');
    this.appendText.rows = 2;
    this.appendText.placeholder = 'New journal entry (Ctrl+Enter appends)';
    this.appendText.setAttribute('aria-label', 'New journal entry');
    this.appendTags = el('input', 'jp-mod-styled jp-AgentMemory-appendTags');
    this.appendTags.placeholder = 'Tags, comma separated';
    this.appendTags.setAttribute('aria-label', 'Tags of the new entry, comma separated');
    append.append(
      this.appendText,
      this.appendTags,
      button('Append', 'jp-AgentMemory-append', () => void this.model.track(this.appendEntry()))
    );
    this.body.append(this.form, this.journalNote, this.journalList, append);
  }

  handleEvent(event: Event): void {
    if (event.type === 'submit') {
      event.preventDefault();
      void this.model.track(this.search());
    } else if (event.type === 'change') {
      // Every search field searches when its value changes (Enter, or leaving the field).
      void this.model.track(this.search());
    } else {
      super.handleEvent(event);
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.form.addEventListener('submit', this);
    for (const input of this.searchFields) {
      input.addEventListener('change', this);
    }
  }

  protected onBeforeDetach(msg: Message): void {
    for (const input of this.searchFields) {
      input.removeEventListener('change', this);
    }
    this.form.removeEventListener('submit', this);
    super.onBeforeDetach(msg);
  }

  protected clear(): void {
    this.shownEntries = '';
    this.journalList.replaceChildren();
    this.setJournalNote('');
  }

  protected reload(): Promise<void> {
    return this.search();
  }

  private get searchFields(): HTMLInputElement[] {
    return [this.queryInput, this.tagInput, this.limitInput];
  }

  private async search(): Promise<void> {
    const agent = this.model.agent;
    try {
      const result = await this.model.searchJournal(agent, {
        query: this.queryInput.value,
        tag: this.tagInput.value.trim(),
        limit: this.limitInput.value
      });
      if (agent !== this.model.agent) {
        return;
      }
      if (!Array.isArray(result.entries)) {
        throw new Error('The server sent no list of journal entries.');
      }
      // The same matches for the same query keep their nodes: a refresh that finds nothing new
      // must not close an opened entry, move the scroll or pull a node from under a click.
      const shown = JSON.stringify([this.queryInput.value, result.entries]);
      if (shown !== this.shownEntries) {
        this.shownEntries = shown;
        this.shownQuery = this.queryInput.value;
        this.journalList.replaceChildren(...result.entries.map(entry => this.renderEntry(entry)));
      }
      const count = result.entries.length;
      const filtered = !!(this.queryInput.value || this.tagInput.value.trim());
      let note =
        count === 0
          ? filtered || result.scanned
            ? EMPTY.journal
            : EMPTY.emptyJournal
          : `${count} entr${count === 1 ? 'y' : 'ies'}, newest first.`;
      if (result.skipped) {
        note += ` ${result.skipped} corrupted line(s) skipped.`;
      }
      this.setJournalNote(note);
    } catch (error) {
      if (agent !== this.model.agent) {
        return;
      }
      // Entries still on screen would not match this search (or this agent).
      this.shownEntries = '';
      this.journalList.replaceChildren();
      this.setJournalNote(describe(error), true);
    }
  }

  /**
   * One entry, whatever JSON object it is: values that are not strings show as JSON, tags
   * that are not a list show as one value, extra keys show as fields, long values are cut.
   * Everything is set as text, never as HTML.
   */
  private renderEntry(raw: unknown): HTMLLIElement {
    const entry: Record<string, unknown> = isObject(raw) ? raw : { text: raw };
    const item = el('li', 'jp-AgentMemory-entry');
    const meta = el('div', 'jp-AgentMemory-entryMeta');
    meta.appendChild(timeLabel(entry.ts, 'jp-AgentMemory-entryTs'));
    // The engine's rule: only string items of a `tags` list are tags a search can match.
    const searchable = Array.isArray(entry.tags);
    const tags = searchable
      ? (entry.tags as unknown[])
      : entry.tags === undefined || entry.tags === null
        ? []
        : [entry.tags];
    for (const tag of tags) {
      if (!searchable || typeof tag !== 'string') {
        // Not a tag a search could match: shown, not clickable.
        meta.appendChild(longText('span', 'jp-AgentMemory-entryTag jp-mod-odd', asText(tag)));
        continue;
      }
      const label = tag.length > MAX_SHOWN_CHARS ? tag.slice(0, MAX_SHOWN_CHARS) + '…' : tag;
      const chip = el('button', 'jp-AgentMemory-entryTag', label);
      chip.type = 'button';
      chip.title = `Show entries tagged "${label}"`;
      chip.addEventListener('click', () => {
        this.tagInput.value = tag;
        void this.model.track(this.search());
      });
      meta.appendChild(chip);
    }
    item.append(
      meta,
      longText(
        'div',
        'jp-AgentMemory-entryText',
        asText(entry.text),
        MAX_SHOWN_CHARS,
        this.shownQuery
      )
    );
    for (const [key, value] of Object.entries(entry)) {
      if (ENTRY_KEYS.includes(key)) {
        continue;
      }
      const extra = el('div', 'jp-AgentMemory-entryExtra');
      extra.append(
        longText('span', 'jp-AgentMemory-entryExtraKey', key),
        longText('span', 'jp-AgentMemory-entryExtraValue', asText(value))
      );
      item.appendChild(extra);
    }
    return item;
  }

  private setJournalNote(text: string, isError = false): void {
    this.journalNote.textContent = text;
    this.journalNote.classList.toggle('jp-mod-error', isError);
  }

  /** Append the entry in the form (the Append button, or Ctrl+Enter in the form). */
  async appendEntry(): Promise<void> {
    const tags = this.appendTags.value
      .split(',')
      .map(tag => tag.trim())
      .filter(tag => tag);
    try {
      const result = await this.model.appendJournal(this.model.agent, this.appendText.value, tags);
      this.appendText.value = '';
      this.appendTags.value = '';
      await this.search();
      const when = shortTime(result.entry.ts);
      this.setJournalNote(`Journal entry added${when ? ` at ${when}` : ''}.`);
      this.appendText.focus();
    } catch (error) {
      this.setJournalNote(`Not added: ${describe(error)}`, true);
    }
  }

  /**
   * How many entries a search shows unless the limit field says otherwise (the
   * `journalLimit` setting); a field still at the old default follows the new one.
   */
  setDefaultLimit(limit: number): void {
    if (this.limitInput.value === `${this.defaultLimit}`) {
      this.limitInput.value = `${limit}`;
    }
    this.defaultLimit = limit;
  }

  private defaultLimit = 20;

  /** The query whose matches the journal list highlights. */
  private shownQuery = '';
  /** The query and entries the list shows, as JSON ('' when it shows none). */
  private shownEntries = '';
  private readonly form: HTMLFormElement;
  private readonly queryInput: HTMLInputElement;
  private readonly tagInput: HTMLInputElement;
  private readonly limitInput: HTMLInputElement;
  private readonly journalNote: HTMLDivElement;
  private readonly journalList: HTMLOListElement;
  private readonly appendText: HTMLTextAreaElement;
  private readonly appendTags: HTMLInputElement;
}
