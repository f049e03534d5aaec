/** The sessions section: recorded sessions, the exact prompt of one, a diff of two, and why. */

import { Message } from '@lumino/messaging';

import { ISessionReceipt } from './api';
import { diffLines, diffSummary } from './diff';
import {
  asText,
  button,
  cutText,
  describe,
  diffView,
  el,
  EMPTY,
  longText,
  relativeTime,
  scrollable,
  shortSha,
  timeLabel
} from './dom';
import { AgentMemoryModel } from './model';
import { sectionRows } from './promptSection';
import { MemorySection } from './section';

/** The current agent's recorded sessions, loaded when the section is expanded. */
export class SessionsSection extends MemorySection {
  constructor(model: AgentMemoryModel) {
    super(model, 'Sessions', 'jp-AgentMemory-sessions', false);
    this.sessionsNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-sessionsNote');
    this.sessionsList = el('ol', 'jp-AgentMemory-sessionList');
    const pick = el('div', 'jp-AgentMemory-buttons');
    this.sessionPick = el('select', 'jp-mod-styled jp-AgentMemory-sessionPick');
    this.sessionPick.setAttribute('aria-label', 'Recorded session to show');
    this.sessionOther = el('select', 'jp-mod-styled jp-AgentMemory-sessionOther');
    this.sessionOther.setAttribute('aria-label', 'Recorded session to diff with');
    pick.append(
      this.sessionPick,
      button('Prompt', 'jp-AgentMemory-sessionShow', () => void this.showSession()),
      this.sessionOther,
      button('Diff', 'jp-AgentMemory-sessionDiff', () => void this.diffSessions())
    );
    this.whyForm = el('form', 'jp-AgentMemory-searchForm jp-AgentMemory-whyForm');
    this.whyInput = el('input', 'jp-mod-styled jp-AgentMemory-whyText');
    this.whyInput.placeholder = 'Why is this line in the prompt?';
    this.whyInput.setAttribute('aria-label', 'Text of a prompt line to explain');
    const whyButton = button('Why', 'jp-AgentMemory-why', () => {
      /* submitted through the form */
    });
    whyButton.type = 'submit';
    this.whyForm.append(this.whyInput, whyButton);
    this.sessionOutput = el('div', 'jp-AgentMemory-sessionOutput');
    this.body.append(this.sessionsNote, this.sessionsList, pick, this.whyForm, this.sessionOutput);
  }

  handleEvent(event: Event): void {
    if (event.type === 'submit') {
      event.preventDefault();
      void this.why();
    } else {
      super.handleEvent(event);
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.whyForm.addEventListener('submit', this);
  }

  protected onBeforeDetach(msg: Message): void {
    this.whyForm.removeEventListener('submit', this);
    super.onBeforeDetach(msg);
  }

  protected clear(): void {
    this.sessionsList.replaceChildren();
    this.sessionPick.replaceChildren();
    this.sessionOther.replaceChildren();
    this.sessionOutput.replaceChildren();
    this.sessionsNote.textContent = '';
  }

  protected reload(): Promise<void> | null {
    return this.isOpen ? this.loadSessions() : null;
  }

  protected opened(): Promise<void> {
    return this.loadSessions();
  }

  private async loadSessions(): Promise<void> {
    const agent = this.model.agent;
    try {
      const { sessions } = await this.model.listSessions(agent);
      if (agent !== this.model.agent) {
        return;
      }
      this.sessionsNote.textContent = sessions.length
        ? `${sessions.length} session${sessions.length === 1 ? '' : 's'} on record, newest first.`
        : EMPTY.sessions;
      this.sessionsNote.classList.remove('jp-mod-error');
      this.sessionsList.replaceChildren(...sessions.map(s => this.renderSession(s)));
      const options = (first: string | null) => {
        const list = sessions.map(s => {
          const option = el(
            'option',
            '',
            `${s.session_id.slice(0, 8)} · ${relativeTime(s.ts) || asText(s.ts)}`
          );
          option.value = s.session_id;
          return option;
        });
        if (first !== null) {
          const none = el('option', '', first);
          none.value = '';
          list.unshift(none);
        }
        return list;
      };
      const picked = this.sessionPick.value;
      const other = this.sessionOther.value;
      this.sessionPick.replaceChildren(...options(null));
      this.sessionOther.replaceChildren(...options('diff with…'));
      if (sessions.some(s => s.session_id === picked)) {
        this.sessionPick.value = picked;
      }
      if (sessions.some(s => s.session_id === other)) {
        this.sessionOther.value = other;
      }
    } catch (error) {
      if (agent === this.model.agent) {
        this.sessionsList.replaceChildren();
        this.sessionsNote.textContent = `Could not list sessions: ${describe(error)}`;
        this.sessionsNote.classList.add('jp-mod-error');
      }
    }
  }

  private renderSession(receipt: ISessionReceipt): HTMLLIElement {
    const item = el('li', 'jp-AgentMemory-session');
    item.dataset.sid = receipt.session_id;
    const client =
      receipt.client && receipt.client.name
        ? `${receipt.client.name}${receipt.client.version ? ' ' + receipt.client.version : ''}`
        : '(unknown client)';
    const meta = el('div', 'jp-AgentMemory-entryMeta');
    meta.append(
      timeLabel(receipt.ts, 'jp-AgentMemory-sessionTs'),
      el('code', 'jp-AgentMemory-sessionId', receipt.session_id),
      el('span', 'jp-AgentMemory-sessionClient', client),
      el('span', '', `~${receipt.tokens} tokens`),
      el('code', 'jp-AgentMemory-sessionSha', shortSha(asText(receipt.prompt_sha256)))
    );
    meta.addEventListener('click', () => {
      this.sessionPick.value = receipt.session_id;
      void this.showSession();
    });
    item.appendChild(meta);
    return item;
  }

  private async showSession(): Promise<void> {
    const sid = this.sessionPick.value;
    if (!sid) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note', EMPTY.sessions));
      return;
    }
    try {
      const agent = this.model.agent;
      const session = await this.model.getSession(agent, sid);
      const { receipt } = session;
      const table = el('table', 'jp-AgentMemory-promptSections');
      table.replaceChildren(...sectionRows(receipt.sections ?? []));
      this.sessionOutput.replaceChildren(
        el(
          'div',
          'jp-AgentMemory-note',
          `The exact prompt session ${receipt.session_id} started with (${asText(receipt.ts)}), ${session.chars.toLocaleString('en-US')} characters:`
        ),
        table,
        scrollable(
          cutText(
            'pre',
            'jp-AgentMemory-promptText jp-AgentMemory-sessionPrompt',
            session,
            async () => (await this.model.getSession(agent, sid, 'all')).text
          ),
          'Recorded prompt text'
        )
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', describe(error))
      );
    }
  }

  private async diffSessions(): Promise<void> {
    const first = this.sessionPick.value;
    const second = this.sessionOther.value;
    if (!first || !second) {
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', 'Pick two sessions to diff.')
      );
      return;
    }
    try {
      const [a, b] = await Promise.all([
        this.model.getSession(this.model.agent, first, 'all'),
        this.model.getSession(this.model.agent, second, 'all')
      ]);
      const lines = diffLines(a.text, b.text);
      this.sessionOutput.replaceChildren(
        el(
          'div',
          'jp-AgentMemory-note',
          `From session ${a.receipt.session_id} to ${b.receipt.session_id}: ${diffSummary(lines)}`
        ),
        diffView(lines, 'jp-AgentMemory-sessionLines')
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', describe(error))
      );
    }
  }

  private async why(): Promise<void> {
    const sid = this.sessionPick.value;
    const text = this.whyInput.value;
    if (!sid) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note', EMPTY.sessions));
      return;
    }
    try {
      const result = await this.model.why(this.model.agent, sid, text);
      const list = el('ol', 'jp-AgentMemory-origins');
      list.replaceChildren(
        ...result.origins.map(origin => {
          const item = el('li', 'jp-AgentMemory-origin');
          const where =
            origin.source === null
              ? `text the prompt builder wrote (${origin.section} section)`
              : `${origin.source} @ ${shortSha(origin.version ?? '')} line ${origin.line}`;
          item.append(
            el('div', 'jp-AgentMemory-originWhere', where),
            longText('div', 'jp-AgentMemory-originText', origin.text)
          );
          return item;
        })
      );
      this.sessionOutput.replaceChildren(
        el(
          'div',
          'jp-AgentMemory-note',
          result.origins.length
            ? `${result.origins.length} line${result.origins.length === 1 ? '' : 's'} of session ${result.session_id}'s prompt hold this text:`
            : `No line of session ${result.session_id}'s prompt contains "${text}".`
        ),
        list
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', describe(error))
      );
    }
  }

  private readonly sessionsNote: HTMLDivElement;
  private readonly sessionsList: HTMLOListElement;
  private readonly sessionPick: HTMLSelectElement;
  private readonly sessionOther: HTMLSelectElement;
  private readonly whyForm: HTMLFormElement;
  private readonly whyInput: HTMLInputElement;
  private readonly sessionOutput: HTMLDivElement;
}
