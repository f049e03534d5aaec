/**
 * The FACT.md section: the file rendered through JupyterLab's Markdown renderer (or as text),
 * its compare-and-swap editor, and its history with diff and restore.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';

import { ConflictError, IHistoryVersion } from './api';
import { diffLines, diffSummary } from './diff';
import { button, describe, diffView, el, EMPTY, shortSha, timeLabel } from './dom';
import { FileSection } from './fileEditor';
import { MemoryMarkdown } from './markdown';
import { AgentMemoryModel, MemoryFile } from './model';
import { MemorySection } from './section';

/** FACT.md with its history. */
export class FactsSection extends MemorySection {
  constructor(model: AgentMemoryModel, markdown: MemoryMarkdown | null) {
    super(model, 'FACT.md', 'jp-AgentMemory-facts');
    this.facts = new FileSection(model, 'facts', markdown, name => `jp-AgentMemory-${name}`);
    // The historical name of FACT.md's path line.
    this.facts.path.classList.add('jp-AgentMemory-path');
    this.body.append(...this.facts.body);
    this.history = el('details', 'jp-AgentMemory-history');
    this.history.appendChild(el('summary', 'jp-AgentMemory-historyTitle', 'History'));
    this.historyList = el('ol', 'jp-AgentMemory-versions');
    this.historyNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-historyNote');
    this.historyDiff = el('div', 'jp-AgentMemory-historyDiff');
    this.history.append(this.historyNote, this.historyList, this.historyDiff);
    this.body.appendChild(this.history);
  }

  /** The FACT.md editor (for the application's key bindings). */
  get editor(): FileSection {
    return this.facts;
  }

  handleEvent(event: Event): void {
    if (event.type === 'toggle' && event.target === this.history) {
      if (this.history.open) {
        void this.loadHistory();
      }
      return;
    }
    super.handleEvent(event);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.history.addEventListener('toggle', this);
    this.model.fileSaved.connect(this.onSaved);
  }

  protected onBeforeDetach(msg: Message): void {
    this.model.fileSaved.disconnect(this.onSaved);
    this.history.removeEventListener('toggle', this);
    super.onBeforeDetach(msg);
  }

  protected clear(): void {
    this.facts.clear();
    this.historyList.replaceChildren();
    this.historyDiff.replaceChildren();
    this.historyNote.textContent = '';
  }

  protected reload(): Promise<void> {
    const work = [this.facts.load()];
    if (this.history.open) {
      work.push(this.loadHistory());
    }
    return Promise.all(work).then(() => undefined);
  }

  private readonly onSaved = (_: AgentMemoryModel, file: MemoryFile): void => {
    if (file === 'facts' && this.history.open) {
      void this.loadHistory();
    }
  };

  private async loadHistory(): Promise<void> {
    const agent = this.model.agent;
    try {
      const { versions } = await this.model.getHistory(agent);
      if (agent !== this.model.agent) {
        return;
      }
      this.historyNote.textContent = versions.length
        ? `${versions.length} earlier version${versions.length === 1 ? '' : 's'}, newest first.`
        : EMPTY.history;
      this.historyNote.classList.remove('jp-mod-error');
      this.historyList.replaceChildren(...versions.map(v => this.renderVersion(v)));
    } catch (error) {
      if (agent === this.model.agent) {
        this.historyList.replaceChildren();
        this.historyNote.textContent = `Could not list the history: ${describe(error)}`;
        this.historyNote.classList.add('jp-mod-error');
      }
    }
  }

  private renderVersion(version: IHistoryVersion): HTMLLIElement {
    const item = el('li', 'jp-AgentMemory-version');
    item.dataset.sha = version.sha256;
    const label = el('span', 'jp-AgentMemory-versionLabel');
    label.append(
      timeLabel(version.ts, 'jp-AgentMemory-versionTs'),
      el('code', 'jp-AgentMemory-versionSha', ` ${shortSha(version.sha256)} `),
      el('span', 'jp-AgentMemory-versionSize', `${version.size.toLocaleString('en-US')} B`)
    );
    item.append(
      label,
      button('Diff', 'jp-AgentMemory-versionDiff', () => void this.diffVersion(version)),
      button('Restore', 'jp-AgentMemory-versionRestore', () => void this.restoreVersion(version))
    );
    return item;
  }

  private async diffVersion(version: IHistoryVersion): Promise<void> {
    try {
      const old = await this.model.getVersion(this.model.agent, version.sha256);
      const current = await this.model.loadFile('facts', this.model.agent, 'all');
      const lines = diffLines(old.content, current.content);
      this.historyDiff.replaceChildren(
        el(
          'div',
          'jp-AgentMemory-note',
          `From ${shortSha(version.sha256)} to the current FACT.md (${shortSha(current.sha256)}): ${diffSummary(lines)}`
        ),
        diffView(lines, 'jp-AgentMemory-versionLines')
      );
    } catch (error) {
      this.historyDiff.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', describe(error))
      );
    }
  }

  private async restoreVersion(version: IHistoryVersion): Promise<void> {
    if (this.facts.isEditing) {
      this.historyDiff.replaceChildren(
        el('div', 'jp-AgentMemory-note jp-mod-error', 'Save or cancel the edit before restoring.')
      );
      return;
    }
    const confirm = await showDialog({
      title: `Restore FACT.md ${shortSha(version.sha256)}?`,
      body: 'It becomes the current FACT.md; the version it replaces is kept in the history.',
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Restore' })],
      defaultButton: 0
    });
    if (!confirm.button.accept) {
      return;
    }
    try {
      const old = await this.model.getVersion(this.model.agent, version.sha256);
      const expected = this.model.files.get('facts')?.sha256 ?? null;
      if (expected === null) {
        throw new Error('FACT.md has not loaded; refresh and try again.');
      }
      const saved = await this.model.saveFile('facts', this.model.agent, old.content, expected);
      await this.facts.load(
        `Restored version ${shortSha(version.sha256)}; FACT.md is now ${shortSha(saved.sha256)}.`
      );
      this.historyDiff.replaceChildren();
      // The history and the prompt show it again.
      this.model.notifySaved('facts');
    } catch (error) {
      const message =
        error instanceof ConflictError
          ? `Not restored: FACT.md changed since it was shown (it is now ${shortSha(error.actual)}); nothing was written. Look at it again and retry.`
          : `Not restored: ${describe(error)}`;
      this.historyDiff.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', message));
      void this.facts.load();
    }
  }

  private readonly facts: FileSection;
  private readonly history: HTMLDetailsElement;
  private readonly historyList: HTMLOListElement;
  private readonly historyNote: HTMLDivElement;
  private readonly historyDiff: HTMLDivElement;
}
