/**
 * The Agent Memory sidebar: a plain Lumino widget built from DOM elements.
 *
 * Sections: agent picker, FACT.md (view and compare-and-swap editor), journal (search and
 * append) and prompt preview (section sizes). Everything it shows comes from the REST API;
 * it holds no memory rules of its own.
 */

import { Dialog, InputDialog, showDialog } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  AgentMemoryClient,
  ConflictError,
  IPromptResponse
} from './api';

/** Create an element with a class name and optional text. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A button with the JupyterLab look. */
function button(
  label: string,
  className: string,
  onClick: () => void
): HTMLButtonElement {
  const node = el('button', `jp-Button jp-mod-styled ${className}`, label);
  node.type = 'button';
  node.addEventListener('click', onClick);
  return node;
}

/** A collapsible section with a title. */
function section(
  title: string,
  className: string
): { root: HTMLDetailsElement; body: HTMLDivElement } {
  const root = el('details', `jp-AgentMemory-section ${className}`);
  root.open = true;
  root.appendChild(el('summary', 'jp-AgentMemory-sectionTitle', title));
  const body = el('div', 'jp-AgentMemory-sectionBody');
  root.appendChild(body);
  return { root, body };
}

/** Describe an error for the status line. */
function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Longest part of one journal value shown before a "Show all" button: a single huge entry
 * must not make the sidebar lay out megabytes of text on every search.
 */
export const MAX_SHOWN_CHARS = 2000;

/** Keys every entry written by this package has; others are shown as extra fields. */
const ENTRY_KEYS = ['ts', 'tags', 'text'];

/** Any JSON value as text: strings as they are, anything else as compact JSON. */
function asText(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (value === undefined) {
    return '';
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** True for a JSON object (not null, not an array). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * An element showing `text` as text (never as HTML), cut at `MAX_SHOWN_CHARS` with a button
 * that shows all of it in a read-only text box. A text box, because laying out a megabyte of
 * wrapped inline text in the sidebar's flex layout takes Chromium minutes.
 */
function longText(tag: 'div' | 'span', className: string, text: string): HTMLElement {
  const node = el(tag, className);
  if (text.length <= MAX_SHOWN_CHARS) {
    node.textContent = text;
    return node;
  }
  const shown = el('span', '', text.slice(0, MAX_SHOWN_CHARS) + '…');
  const more = button(
    `Show all (${text.length.toLocaleString('en-US')} characters)`,
    'jp-AgentMemory-showAll',
    () => {
      const all = el('textarea', 'jp-mod-styled jp-AgentMemory-fullText');
      all.readOnly = true;
      all.rows = 8;
      all.value = text;
      node.replaceChildren(all);
    }
  );
  node.append(shown, more);
  return node;
}

/** The sidebar widget. */
export class AgentMemoryPanel extends Widget {
  constructor(client: AgentMemoryClient = new AgentMemoryClient()) {
    super();
    this.client = client;
    this.id = 'jp-agent-memory';
    this.addClass('jp-AgentMemory');
    this.title.caption = 'Agent Memory';

    const node = this.node;

    // Header: agent picker and refresh.
    const header = el('div', 'jp-AgentMemory-header');
    header.appendChild(el('span', 'jp-AgentMemory-heading', 'Agent Memory'));
    const pickerLabel = el('label', 'jp-AgentMemory-pickerLabel', 'Agent ');
    this.picker = el('select', 'jp-mod-styled jp-AgentMemory-agentPicker');
    this.picker.addEventListener('change', () => {
      this.agent = this.picker.value;
      this.setStatus('');
      this.showAgent();
      void this.refreshAgent();
    });
    pickerLabel.appendChild(this.picker);
    header.appendChild(pickerLabel);
    header.append(
      button('New…', 'jp-AgentMemory-newAgent', () => void this.newAgent()),
      button('Refresh', 'jp-AgentMemory-refresh', () => void this.refresh())
    );
    node.appendChild(header);
    this.status = el('div', 'jp-AgentMemory-status');
    node.appendChild(this.status);

    // FACT.md
    const facts = section('FACT.md', 'jp-AgentMemory-facts');
    this.factsPath = el('div', 'jp-AgentMemory-path');
    this.factsView = el('pre', 'jp-AgentMemory-factsView');
    this.factsEditor = el('textarea', 'jp-mod-styled jp-AgentMemory-factsEditor');
    this.factsEditor.rows = 12;
    this.factsEditor.spellcheck = false;
    this.factsEditor.hidden = true;
    this.factsNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-factsNote');
    const factsButtons = el('div', 'jp-AgentMemory-buttons');
    this.editButton = button('Edit', 'jp-AgentMemory-edit', () =>
      this.startEditing()
    );
    this.saveButton = button('Save', 'jp-AgentMemory-save', () => void this.save());
    this.cancelButton = button('Cancel', 'jp-AgentMemory-cancel', () =>
      this.stopEditing()
    );
    this.saveButton.hidden = true;
    this.cancelButton.hidden = true;
    this.editButton.disabled = true; // until FACT.md and its hash have loaded
    factsButtons.append(this.editButton, this.saveButton, this.cancelButton);
    facts.body.append(
      this.factsPath,
      this.factsView,
      this.factsEditor,
      factsButtons,
      this.factsNote
    );
    node.appendChild(facts.root);

    // Journal
    const journal = section('Journal', 'jp-AgentMemory-journal');
    const form = el('form', 'jp-AgentMemory-searchForm');
    this.queryInput = el('input', 'jp-mod-styled jp-AgentMemory-query');
    this.queryInput.placeholder = 'Search text';
    this.tagInput = el('input', 'jp-mod-styled jp-AgentMemory-tag');
    this.tagInput.placeholder = 'Tag';
    this.limitInput = el('input', 'jp-mod-styled jp-AgentMemory-limit');
    this.limitInput.type = 'number';
    this.limitInput.min = '1';
    this.limitInput.value = '20';
    this.limitInput.title = 'Most recent matches to show';
    const searchButton = button('Search', 'jp-AgentMemory-search', () => {
      /* submitted through the form */
    });
    searchButton.type = 'submit';
    form.append(this.queryInput, this.tagInput, this.limitInput, searchButton);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this.search();
    });
    this.journalNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-journalNote');
    this.journalList = el('ol', 'jp-AgentMemory-entries');
    const append = el('div', 'jp-AgentMemory-appendForm');
    this.appendText = el('textarea', 'jp-mod-styled jp-AgentMemory-appendText');
    this.appendText.rows = 2;
    this.appendText.placeholder = 'New journal entry';
    this.appendTags = el('input', 'jp-mod-styled jp-AgentMemory-appendTags');
    this.appendTags.placeholder = 'Tags, comma separated';
    append.append(
      this.appendText,
      this.appendTags,
      button('Append', 'jp-AgentMemory-append', () => void this.appendEntry())
    );
    journal.body.append(form, this.journalNote, this.journalList, append);
    node.appendChild(journal.root);

    // Prompt preview
    const prompt = section('Prompt preview', 'jp-AgentMemory-prompt');
    this.promptSummary = el('div', 'jp-AgentMemory-promptSummary');
    this.promptSections = el('table', 'jp-AgentMemory-promptSections');
    this.promptWarnings = el('ul', 'jp-AgentMemory-promptWarnings');
    this.promptText = el('pre', 'jp-AgentMemory-promptText');
    prompt.body.append(
      this.promptSummary,
      this.promptSections,
      this.promptWarnings,
      this.promptText
    );
    node.appendChild(prompt.root);
  }

  /** The agent currently shown ('' until the agent list has loaded). */
  get currentAgent(): string {
    return this.agent;
  }

  /** Reload the agent list and everything shown for the current agent. */
  async refresh(): Promise<void> {
    try {
      const listing = await this.client.listAgents();
      let agents = listing.agents;
      let status = '';
      if (this.agent && !agents.includes(this.agent) && !this.editing) {
        // Removed behind our back: never re-create it, go back to the default agent.
        status = `Agent "${this.agent}" no longer exists; showing the default agent.`;
        this.agent = '';
      }
      if (!this.agent) {
        this.agent = listing.default_agent;
      }
      this.showAgent();
      if (!agents.includes(this.agent)) {
        // Every surface starts on the default agent; create it like the others do.
        await this.client.createAgent(this.agent);
        agents = [...agents, this.agent].sort();
      }
      this.fillPicker(agents);
      this.setStatus(status);
    } catch (error) {
      this.setStatus(`Could not list agents: ${describe(error)}`, true);
      return;
    }
    await this.refreshAgent();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    // Memory changes behind our back (agents, magics, the CLI): show the current state.
    void this.refresh();
  }

  /** Ask for an id (and a template when there are any), create the agent, show it. */
  private async newAgent(): Promise<void> {
    const named = await InputDialog.getText({
      title: 'New agent',
      label: 'Agent id (a folder name under the agents root)',
      placeholder: 'my-agent'
    });
    if (!named.button.accept || !named.value) {
      return;
    }
    let template: string | null = null;
    const listing = await this.client.listAgents().catch(() => null);
    if (listing && listing.templates.length) {
      const none = '(no template)';
      const picked = await InputDialog.getItem({
        title: `Template for "${named.value}"`,
        items: [none, ...listing.templates]
      });
      if (!picked.button.accept) {
        return;
      }
      template = picked.value && picked.value !== none ? picked.value : null;
    }
    try {
      const created = await this.client.createAgent(named.value, template);
      this.agent = created.id;
      await this.refresh();
      this.setStatus(
        created.created
          ? `Created agent "${created.id}" in ${created.path}.`
          : `Agent "${created.id}" already existed; showing it.`
      );
    } catch (error) {
      this.setStatus(`Could not create the agent: ${describe(error)}`, true);
    }
  }

  private fillPicker(agents: string[]): void {
    this.picker.replaceChildren(
      ...agents.map(id => {
        const option = el('option', '', id);
        option.value = id;
        return option;
      })
    );
    this.picker.value = this.agent;
  }

  /**
   * When the agent to show is not the one on screen, clear everything shown for the previous
   * one first, so a load that fails can never leave another agent's memory on screen (or its
   * FACT.md hash behind for Save).
   */
  private showAgent(): void {
    if (this.agent === this.shownAgent) {
      return;
    }
    this.shownAgent = this.agent;
    this.clearFacts();
    this.journalList.replaceChildren();
    this.setJournalNote('');
    this.promptSummary.textContent = '';
    this.promptSummary.classList.remove('jp-mod-error');
    this.promptSections.replaceChildren();
    this.promptWarnings.replaceChildren();
    this.promptText.textContent = '';
  }

  private async refreshAgent(): Promise<void> {
    await Promise.all([this.loadFacts(), this.search(), this.loadPrompt()]);
  }

  private setStatus(text: string, isError = false): void {
    this.status.textContent = text;
    this.status.classList.toggle('jp-mod-error', isError);
  }

  // -- FACT.md ---------------------------------------------------------------

  /** Show the current FACT.md; `note` replaces the default note under it. */
  private async loadFacts(note?: string): Promise<void> {
    const agent = this.agent;
    try {
      const facts = await this.client.getFacts(agent);
      if (agent !== this.agent) {
        return;
      }
      this.factsPath.textContent = facts.path;
      this.factsView.textContent = facts.content;
      this.factsView.classList.toggle('jp-mod-empty', !facts.content);
      if (this.editing) {
        // Never replace what the user is typing; tell them if the file moved on.
        if (facts.sha256 !== this.factsSha) {
          this.setFactsNote(
            'FACT.md changed on disk since you started editing; saving will ask what to do.'
          );
        }
        return;
      }
      this.factsSha = facts.sha256;
      this.editButton.disabled = false;
      this.setFactsNote(note ?? (facts.content ? '' : 'FACT.md is empty.'));
    } catch (error) {
      if (agent !== this.agent) {
        return;
      }
      if (!this.editing) {
        // What is on screen may no longer be on disk: show nothing, and offer no Edit
        // (a save needs the hash of a version we showed).
        this.clearFacts();
      }
      this.setFactsNote(`Could not load FACT.md: ${describe(error)}`, true);
    }
  }

  /** Show no FACT.md and forget its hash; Edit waits for the next successful load. */
  private clearFacts(): void {
    this.factsSha = null;
    this.factsPath.textContent = '';
    this.factsView.textContent = '';
    this.factsView.classList.remove('jp-mod-empty');
    this.editButton.disabled = true;
    this.setFactsNote('');
  }

  private setFactsNote(text: string, isError = false): void {
    this.factsNote.textContent = text;
    this.factsNote.classList.toggle('jp-mod-error', isError);
  }

  private startEditing(): void {
    if (this.factsSha === null) {
      return; // nothing loaded, so nothing to compare a save with
    }
    this.editing = true;
    this.factsEditor.value = this.factsView.textContent ?? '';
    this.factsEditor.hidden = false;
    this.factsView.hidden = true;
    this.editButton.hidden = true;
    this.saveButton.hidden = false;
    this.cancelButton.hidden = false;
    // The edit belongs to this agent: no switching until it is saved or cancelled.
    this.picker.disabled = true;
    this.setFactsNote('');
    this.factsEditor.focus();
  }

  private stopEditing(note?: string): void {
    this.editing = false;
    this.picker.disabled = false;
    this.factsEditor.hidden = true;
    this.factsView.hidden = false;
    this.editButton.hidden = false;
    this.saveButton.hidden = true;
    this.cancelButton.hidden = true;
    void this.loadFacts(note);
  }

  private async save(): Promise<void> {
    const agent = this.agent;
    const content = this.factsEditor.value;
    const expected = this.factsSha;
    if (expected === null) {
      // Never an unconditional write: it could replace a version nobody has seen.
      this.setFactsNote(
        'Not saved: the FACT.md this edit started from is unknown. Copy your text, Cancel and try again.',
        true
      );
      return;
    }
    try {
      const saved = await this.client.saveFacts(agent, content, expected);
      this.factsSha = saved.sha256;
      this.stopEditing('Saved.');
      void this.loadPrompt();
    } catch (error) {
      if (error instanceof ConflictError) {
        await this.resolveConflict(error);
      } else {
        this.setFactsNote(`Not saved: ${describe(error)}`, true);
      }
    }
  }

  private async resolveConflict(error: ConflictError): Promise<void> {
    const body = el('div', 'jp-AgentMemory-conflict');
    body.append(
      el(
        'p',
        '',
        'FACT.md was changed by someone else (an agent, a notebook or another editor) ' +
          'after you opened it. Nothing was written.'
      ),
      el('p', 'jp-AgentMemory-conflictDetail', error.message),
      el(
        'p',
        '',
        'Reload shows the current file and discards your edit; Keep editing lets you copy it first.'
      )
    );
    const result = await showDialog({
      title: 'FACT.md changed on disk',
      body: new Widget({ node: body }),
      buttons: [
        Dialog.cancelButton({ label: 'Keep editing' }),
        Dialog.warnButton({ label: 'Reload' })
      ],
      // Enter must never throw the user's edit away.
      defaultButton: 0
    });
    if (result.button.accept) {
      this.stopEditing('Reloaded the current FACT.md; your edit was discarded.');
    } else {
      this.setFactsNote(`Not saved: ${error.message}`, true);
    }
  }

  // -- journal ---------------------------------------------------------------

  private async search(): Promise<void> {
    const agent = this.agent;
    try {
      const result = await this.client.searchJournal(agent, {
        query: this.queryInput.value,
        tag: this.tagInput.value.trim(),
        limit: this.limitInput.value
      });
      if (agent !== this.agent) {
        return;
      }
      if (!Array.isArray(result.entries)) {
        throw new Error('The server sent no list of journal entries.');
      }
      this.journalList.replaceChildren(
        ...result.entries.map(entry => this.renderEntry(entry))
      );
      const count = result.entries.length;
      let note =
        count === 0
          ? 'No matching journal entries.'
          : `${count} entr${count === 1 ? 'y' : 'ies'}, newest first.`;
      if (result.skipped) {
        note += ` ${result.skipped} corrupted line(s) skipped.`;
      }
      this.setJournalNote(note);
    } catch (error) {
      if (agent !== this.agent) {
        return;
      }
      // Entries still on screen would not match this search (or this agent).
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
    meta.appendChild(longText('span', 'jp-AgentMemory-entryTs', asText(entry.ts)));
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
        meta.appendChild(
          longText('span', 'jp-AgentMemory-entryTag jp-mod-odd', asText(tag))
        );
        continue;
      }
      const label =
        tag.length > MAX_SHOWN_CHARS ? tag.slice(0, MAX_SHOWN_CHARS) + '…' : tag;
      const chip = el('button', 'jp-AgentMemory-entryTag', label);
      chip.type = 'button';
      chip.title = `Show entries tagged "${label}"`;
      chip.addEventListener('click', () => {
        this.tagInput.value = tag;
        void this.search();
      });
      meta.appendChild(chip);
    }
    item.append(meta, longText('div', 'jp-AgentMemory-entryText', asText(entry.text)));
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

  private async appendEntry(): Promise<void> {
    const tags = this.appendTags.value
      .split(',')
      .map(tag => tag.trim())
      .filter(tag => tag);
    try {
      const result = await this.client.appendJournal(
        this.agent,
        this.appendText.value,
        tags
      );
      this.appendText.value = '';
      this.appendTags.value = '';
      await this.search();
      this.setJournalNote(`Journal entry added at ${result.entry.ts}.`);
    } catch (error) {
      this.setJournalNote(`Not added: ${describe(error)}`, true);
    }
  }

  // -- prompt ----------------------------------------------------------------

  private async loadPrompt(): Promise<void> {
    const agent = this.agent;
    try {
      const prompt = await this.client.getPrompt(agent);
      if (agent === this.agent) {
        this.renderPrompt(prompt);
      }
    } catch (error) {
      this.promptSummary.textContent = describe(error);
      this.promptSummary.classList.add('jp-mod-error');
    }
  }

  private renderPrompt(prompt: IPromptResponse): void {
    let summary = `~${prompt.tokens} tokens, ${prompt.text.length} characters`;
    if (prompt.budget_tokens !== null) {
      summary += ` (budget ${prompt.budget_tokens}${prompt.over_budget ? ', over budget' : ''})`;
    }
    if (prompt.bootstrap) {
      summary += '; bootstrap mode';
    }
    this.promptSummary.textContent = summary;
    this.promptSummary.classList.toggle('jp-mod-error', prompt.over_budget);

    const head = el('tr', '');
    head.append(el('th', '', 'Section'), el('th', '', 'Chars'), el('th', '', 'Tokens'));
    const rows = prompt.sections.map(part => {
      const row = el('tr', 'jp-AgentMemory-promptSection');
      const name = el('td', '', part.name);
      if (part.source) {
        name.title = part.source;
      }
      row.append(name, el('td', '', `${part.chars}`), el('td', '', `${part.tokens}`));
      return row;
    });
    this.promptSections.replaceChildren(head, ...rows);
    this.promptWarnings.replaceChildren(
      ...prompt.warnings.map(text => el('li', 'jp-mod-error', text))
    );
    this.promptText.textContent = prompt.text;
  }

  private readonly client: AgentMemoryClient;
  private agent = '';
  /** The agent whose memory is on screen (cleared before another one is shown). */
  private shownAgent = '';
  private editing = false;
  private factsSha: string | null = null;
  private readonly picker: HTMLSelectElement;
  private readonly status: HTMLDivElement;
  private readonly factsPath: HTMLDivElement;
  private readonly factsView: HTMLPreElement;
  private readonly factsEditor: HTMLTextAreaElement;
  private readonly factsNote: HTMLDivElement;
  private readonly editButton: HTMLButtonElement;
  private readonly saveButton: HTMLButtonElement;
  private readonly cancelButton: HTMLButtonElement;
  private readonly queryInput: HTMLInputElement;
  private readonly tagInput: HTMLInputElement;
  private readonly limitInput: HTMLInputElement;
  private readonly journalNote: HTMLDivElement;
  private readonly journalList: HTMLOListElement;
  private readonly appendText: HTMLTextAreaElement;
  private readonly appendTags: HTMLInputElement;
  private readonly promptSummary: HTMLDivElement;
  private readonly promptSections: HTMLTableElement;
  private readonly promptWarnings: HTMLUListElement;
  private readonly promptText: HTMLPreElement;
}
