/**
 * The view and compare-and-swap editor of one memory file, shared by the FACT.md section and
 * the SOUL.md and USER.md section.
 */

import { ConflictError } from './api';
import { diffLines, diffSummary } from './diff';
import { button, describe, diffView, el, pathText, scrollable, shortSha } from './dom';
import { MemoryMarkdown } from './markdown';
import { AgentMemoryModel, FILE_LABELS, MemoryFile } from './model';

/**
 * The view and compare-and-swap editor of one memory file (FACT.md, SOUL.md or USER.md).
 *
 * A save sends the sha256 of the version shown; when the file changed meanwhile nothing is
 * written and the conflict shows both 12-digit hashes, a diff from the file as it is now to
 * the edit, and Reload / Keep editing / Overwrite anyway (which is again a compare-and-swap,
 * against the version the diff showed). Ctrl+S saves and Escape cancels while editing (the
 * application's key bindings call `save` and `escape`).
 */
export class FileSection {
  constructor(
    readonly model: AgentMemoryModel,
    /** Which file; also the prefix of its elements' class names. */
    readonly file: MemoryFile,
    readonly markdown: MemoryMarkdown | null,
    /** Class names of the Edit/Save/Cancel buttons (FACT.md keeps the historical ones). */
    buttonClass: (name: string) => string
  ) {
    const prefix = file;
    this.label = FILE_LABELS[file];
    const cls = (name: string) => `jp-AgentMemory-${prefix}${name}`;
    this.path = el('div', `jp-AgentMemory-filePath ${cls('Path')}`);
    this.rendered = scrollable(
      el('div', `jp-AgentMemory-rendered ${cls('Rendered')}`),
      `${this.label}, rendered`
    );
    this.view = scrollable(el('pre', `jp-AgentMemory-fileView ${cls('View')}`), this.label);
    this.editor = el('textarea', `jp-mod-styled jp-AgentMemory-editor ${cls('Editor')}`);
    this.editor.setAttribute('aria-label', `Edit ${this.label}`);
    this.editor.rows = 12;
    this.editor.spellcheck = false;
    this.editor.hidden = true;
    this.editor.addEventListener('input', () => {
      this.escapeArmed = false;
    });
    this.note = el('div', `jp-AgentMemory-note ${cls('Note')}`);
    this.note.setAttribute('role', 'status');
    this.openNote = el('div', `jp-AgentMemory-note ${cls('OpenNote')}`);
    this.editButton = button('Edit', buttonClass('edit'), () => void this.startEditing());
    this.saveButton = button('Save', buttonClass('save'), () => void this.save());
    this.cancelButton = button('Cancel', buttonClass('cancel'), () => this.stopEditing());
    this.textToggle = button('Text', `jp-AgentMemory-textToggle ${cls('TextToggle')}`, () =>
      this.toggleText()
    );
    this.openButton = button(
      'Open in editor',
      `jp-AgentMemory-openEditor ${cls('OpenEditor')}`,
      () => this.openInEditor()
    );
    this.saveButton.hidden = true;
    this.cancelButton.hidden = true;
    this.editButton.disabled = true; // until the file and its hash have loaded
    this.openButton.hidden = true;
    this.textToggle.hidden = markdown === null;
    this.view.hidden = markdown !== null;
    this.rendered.hidden = markdown === null;

    this.conflict = el('div', `jp-AgentMemory-conflict ${cls('Conflict')}`);
    this.conflict.hidden = true;
    this.conflictMessage = el('div', 'jp-AgentMemory-conflictDetail jp-mod-error');
    this.conflictDiff = el('div', 'jp-AgentMemory-conflictDiff');
    const choices = el('div', 'jp-AgentMemory-buttons');
    choices.append(
      button('Reload', 'jp-AgentMemory-conflictReload', () =>
        this.stopEditing(`Reloaded the current ${this.label}; your edit was discarded.`)
      ),
      button('Keep editing', 'jp-AgentMemory-conflictKeep', () => this.keepEditing()),
      button(
        'Overwrite anyway',
        'jp-AgentMemory-conflictOverwrite jp-mod-warn',
        () => void this.overwrite()
      )
    );
    this.conflict.append(this.conflictMessage, this.conflictDiff, choices);

    const buttons = el('div', 'jp-AgentMemory-buttons');
    buttons.append(
      this.editButton,
      this.saveButton,
      this.cancelButton,
      this.textToggle,
      this.openButton
    );
    this.body = [
      this.path,
      this.rendered,
      this.view,
      this.editor,
      buttons,
      this.openNote,
      this.note,
      this.conflict
    ];
  }

  /** The elements to put into a section body. */
  readonly body: HTMLElement[];

  get isEditing(): boolean {
    return this.editing;
  }

  /** The text the file has on screen ('' before a load). */
  get shownText(): string {
    return this.shown;
  }

  /** The sha256 of the version on screen (null before a load). */
  get shownSha(): string | null {
    return this.sha;
  }

  /**
   * Show the file as it is now; `note` replaces the default note under it. Only the server's
   * bounded view is fetched unless the reader asked for all of it (Show all).
   */
  async load(note?: string): Promise<void> {
    const agent = this.model.agent;
    try {
      const file = await this.model.loadFile(this.file, agent, this.showAll ? 'all' : undefined);
      if (agent !== this.model.agent) {
        return;
      }
      pathText(this.path, file.path);
      this.filePath = file.path;
      // Outside the server's root JupyterLab's editor cannot open the file: say so in the
      // sidebar itself rather than offering a button that does nothing.
      const reachable = this.model.relativeToServer(file.path) !== null;
      this.openButton.hidden = !reachable;
      this.openButton.title = `Open ${this.label} in JupyterLab's editor`;
      this.openNote.textContent = reachable
        ? ''
        : `JupyterLab's editor cannot open ${this.label} here: it is outside the server's ` +
          'root. Edit it with Edit above, or start JupyterLab in a folder above it.';
      if (this.editing) {
        // Never replace what the user is typing; tell them if the file moved on.
        if (file.sha256 !== this.sha) {
          this.setNote(
            `${this.label} changed on disk since you started editing; saving will show what changed.`
          );
        }
        return;
      }
      this.shown = file.content;
      this.sha = file.sha256;
      this.truncated = file.truncated;
      this.model.setShownFile(this.file, { path: file.path, sha256: file.sha256 });
      this.view.textContent = file.content;
      this.view.classList.toggle('jp-mod-empty', !file.content);
      if (file.truncated) {
        this.view.append('…', this.showAllButton(file.chars));
      }
      await this.render(file.html ?? null, file.truncated ? file.chars : null);
      this.editButton.disabled = false;
      this.setNote(note ?? (file.content ? '' : this.emptyText()));
    } catch (error) {
      if (agent !== this.model.agent) {
        return;
      }
      if (!this.editing) {
        // What is on screen may no longer be on disk: show nothing, and offer no Edit
        // (a save needs the hash of a version we showed).
        this.clear();
      }
      this.setNote(`Could not load ${this.label}: ${describe(error)}`, true);
    }
  }

  private emptyText(): string {
    return `${this.label} is empty.`;
  }

  /** A button that fetches and shows the whole file (`chars` characters). */
  private showAllButton(chars: number): HTMLButtonElement {
    return button(
      `Show all (${chars.toLocaleString('en-US')} characters)`,
      'jp-AgentMemory-showAll',
      () => {
        this.showAll = true;
        void this.load();
      }
    );
  }

  /**
   * Show the server's rendering `html` (null: nothing to render); `wholeChars` is the whole
   * file's length when the server cut it, so a Show all button fetches the rest.
   */
  private async render(html: string | null, wholeChars: number | null = null): Promise<void> {
    if (this.markdown === null) {
      return;
    }
    if (!html || !this.shown) {
      this.rendered.replaceChildren();
      return;
    }
    const node = await this.markdown.render(html);
    this.rendered.replaceChildren(node);
    if (wholeChars !== null) {
      this.rendered.appendChild(this.showAllButton(wholeChars));
    }
  }

  /** Show no file and forget its hash; Edit waits for the next successful load. */
  clear(): void {
    this.sha = null;
    this.shown = '';
    this.filePath = '';
    this.model.setShownFile(this.file, null);
    this.showAll = false;
    this.truncated = false;
    this.path.replaceChildren();
    this.view.textContent = '';
    this.view.classList.remove('jp-mod-empty');
    this.rendered.replaceChildren();
    this.editButton.disabled = true;
    this.openButton.hidden = true;
    this.openNote.textContent = '';
    this.conflict.hidden = true;
    this.setNote('');
  }

  setNote(text: string, isError = false): void {
    this.note.textContent = text;
    this.note.classList.toggle('jp-mod-error', isError);
  }

  private toggleText(): void {
    const showText = this.view.hidden;
    this.view.hidden = !showText;
    this.rendered.hidden = showText;
    this.textToggle.textContent = showText ? 'Rendered' : 'Text';
  }

  private openInEditor(): void {
    const relative = this.model.relativeToServer(this.filePath);
    if (relative !== null) {
      this.model.openInEditor(relative);
    }
  }

  /**
   * Edit the whole file: when the view is cut, the full text (and its hash, the version the
   * save compares with) is fetched first, so a save never writes back only the part shown.
   */
  async startEditing(): Promise<void> {
    if (this.sha === null || this.editing || this.fetchingAll) {
      return; // nothing loaded (nothing to compare a save with), or already under way
    }
    if (this.truncated) {
      const agent = this.model.agent;
      this.fetchingAll = true;
      this.setNote(`Loading all of ${this.label} to edit it…`);
      try {
        const file = await this.model.loadFile(this.file, agent, 'all');
        if (agent !== this.model.agent) {
          return;
        }
        this.shown = file.content;
        this.sha = file.sha256;
        this.truncated = file.truncated;
        this.model.setShownFile(this.file, { path: file.path, sha256: file.sha256 });
      } catch (error) {
        this.setNote(`Could not load all of ${this.label} to edit it: ${describe(error)}`, true);
        return;
      } finally {
        this.fetchingAll = false;
      }
    }
    this.editing = true;
    this.escapeArmed = false;
    this.editor.value = this.shown;
    this.editor.hidden = false;
    this.view.hidden = true;
    this.rendered.hidden = true;
    this.editButton.hidden = true;
    this.textToggle.hidden = true;
    this.saveButton.hidden = false;
    this.cancelButton.hidden = false;
    this.model.setEditing(this, this.editing);
    this.setNote('Ctrl+S saves, Escape cancels.');
    this.editor.focus();
  }

  stopEditing(note?: string): void {
    this.editing = false;
    this.conflict.hidden = true;
    this.conflictSha = null;
    this.editor.hidden = true;
    this.view.hidden = this.markdown !== null && this.textToggle.textContent === 'Text';
    this.rendered.hidden = !this.view.hidden;
    this.editButton.hidden = false;
    this.textToggle.hidden = this.markdown === null;
    this.saveButton.hidden = true;
    this.cancelButton.hidden = true;
    this.model.setEditing(this, this.editing);
    // The editor that had the focus is hidden now: give it to Edit, not to the page.
    this.editButton.focus();
    void this.load(note);
  }

  /** Escape while editing: cancel, or with unsaved changes ask for a second Escape. */
  escape(): void {
    if (!this.editing) {
      return;
    }
    if (this.editor.value === this.shown || this.escapeArmed) {
      this.stopEditing(this.editor.value === this.shown ? undefined : 'Edit discarded.');
      return;
    }
    this.escapeArmed = true;
    this.setNote('Press Escape again to discard your edit (Ctrl+S saves it).');
  }

  /** Save through compare-and-swap against the version shown. */
  async save(): Promise<boolean> {
    if (!this.editing) {
      return false;
    }
    const expected = this.conflictSha ?? this.sha;
    if (this.conflictSha !== null) {
      // A conflict is showing: Save means the user decided, so ask which way.
      this.setNote('Choose Reload, Keep editing or Overwrite anyway below.', true);
      return false;
    }
    if (expected === null) {
      // Never an unconditional write: it could replace a version nobody has seen.
      this.setNote(
        `Not saved: the ${this.label} this edit started from is unknown. Copy your text, Cancel and try again.`,
        true
      );
      return false;
    }
    return this.write(expected);
  }

  private async write(expected: string): Promise<boolean> {
    const agent = this.model.agent;
    const content = this.editor.value;
    try {
      const saved = await this.model.saveFile(this.file, agent, content, expected);
      this.sha = saved.sha256;
      this.model.setShownFile(this.file, { path: this.filePath, sha256: saved.sha256 });
      this.stopEditing(`Saved (sha256 ${shortSha(saved.sha256)}).`);
      this.model.notifySaved(this.file);
      return true;
    } catch (error) {
      if (error instanceof ConflictError) {
        await this.showConflict(error, content);
      } else {
        this.setNote(`Not saved: ${describe(error)}`, true);
      }
      return false;
    }
  }

  private async showConflict(error: ConflictError, content: string): Promise<void> {
    let current: { content: string; sha256: string };
    try {
      current = await this.model.loadFile(this.file, this.model.agent, 'all');
    } catch (loadError) {
      this.setNote(`Not saved: ${error.message}. ${describe(loadError)}`, true);
      return;
    }
    this.conflictSha = current.sha256;
    this.conflictMessage.textContent =
      `Not saved: ${this.label} changed on disk since you opened it (an agent, a ` +
      `notebook or another editor wrote it). You started from ${shortSha(error.expected)}; ` +
      `it is now ${shortSha(current.sha256)}. Nothing was written. What your edit changes in ` +
      'the file as it is now:';
    const lines = diffLines(current.content, content);
    this.conflictDiff.replaceChildren(
      diffView(lines, 'jp-AgentMemory-conflictLines'),
      el('div', 'jp-AgentMemory-note', diffSummary(lines))
    );
    this.conflict.hidden = false;
    this.setNote('');
  }

  private keepEditing(): void {
    this.conflict.hidden = true;
    const now = this.conflictSha ? shortSha(this.conflictSha) : '?';
    this.conflictSha = null;
    this.setNote(
      `Still editing; not saved. ${this.label} on disk is ${now}: saving will show what changed again.`,
      true
    );
    this.editor.focus();
  }

  private async overwrite(): Promise<void> {
    const shown = this.conflictSha;
    if (shown === null) {
      return;
    }
    this.conflictSha = null;
    this.conflict.hidden = true;
    await this.write(shown);
  }

  /** The file's name as people see it ('FACT.md'). */
  readonly label: string;
  readonly path: HTMLDivElement;
  readonly rendered: HTMLDivElement;
  readonly view: HTMLPreElement;
  readonly editor: HTMLTextAreaElement;
  readonly note: HTMLDivElement;
  /** Why JupyterLab's editor cannot open the file, when it cannot. */
  readonly openNote: HTMLDivElement;
  readonly editButton: HTMLButtonElement;
  readonly saveButton: HTMLButtonElement;
  readonly cancelButton: HTMLButtonElement;
  readonly textToggle: HTMLButtonElement;
  readonly openButton: HTMLButtonElement;
  readonly conflict: HTMLDivElement;
  private readonly conflictMessage: HTMLDivElement;
  private readonly conflictDiff: HTMLDivElement;
  private editing = false;
  private escapeArmed = false;
  private sha: string | null = null;
  private conflictSha: string | null = null;
  private shown = '';
  private filePath = '';
  /** The reader asked for the whole file (Show all): loads fetch it all from then on. */
  private showAll = false;
  /** The text on screen is the server's cut of a longer file. */
  private truncated = false;
  private fetchingAll = false;
}
