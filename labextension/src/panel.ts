/**
 * The Agent Memory sidebar: a plain Lumino widget built from DOM elements.
 *
 * Sections: agent picker (agents under the agents root, and folders opened by path), FACT.md
 * (rendered through JupyterLab's sanitising Markdown renderer, a compare-and-swap editor,
 * history with diff and restore), SOUL.md and USER.md, journal (search and append), prompt
 * preview (section sizes) and recorded sessions (exact prompt, diff of two, why a line is
 * there). Everything it shows comes from the REST API; it holds no memory rules of its own, and
 * memory text reaches the page only as text or through that renderer.
 */

import { Dialog, InputDialog, showDialog } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  AgentMemoryClient,
  ConflictError,
  ApiError,
  IHistoryVersion,
  IPromptResponse,
  ISessionReceipt,
  PersonaName,
  ViewBound
} from './api';
import { diffLines, diffSummary, IDiffLine } from './diff';
import { MemoryMarkdown } from './markdown';

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
  className: string,
  open = true
): { root: HTMLDetailsElement; body: HTMLDivElement } {
  const root = el('details', `jp-AgentMemory-section ${className}`);
  root.open = open;
  root.appendChild(el('summary', 'jp-AgentMemory-sectionTitle', title));
  const body = el('div', 'jp-AgentMemory-sectionBody');
  root.appendChild(body);
  return { root, body };
}

/** Describe an error for the status line. */
function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The form of a sha256 shown to people. */
export function shortSha(sha: string): string {
  return sha.slice(0, 12);
}

/** How long ago an ISO-8601 time was ("just now", "5 min ago", "3 days ago"). */
export function relativeTime(ts: unknown, now: number = Date.now()): string {
  if (typeof ts !== 'string') {
    return '';
  }
  const when = Date.parse(ts);
  if (Number.isNaN(when)) {
    return '';
  }
  let seconds = (now - when) / 1000;
  const future = seconds < 0;
  seconds = Math.abs(seconds);
  const units: [number, string][] = [
    [86400 * 365, 'year'],
    [86400 * 30, 'month'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'min']
  ];
  for (const [size, unit] of units) {
    if (seconds >= size) {
      const n = Math.floor(seconds / size);
      const label = unit === 'min' || n === 1 ? unit : `${unit}s`;
      return future ? `in ${n} ${label}` : `${n} ${label} ago`;
    }
  }
  return 'just now';
}

/** A time element: the stored time, and how long ago it was. */
function timeLabel(ts: unknown, className: string): HTMLElement {
  const node = el('span', className);
  const text = asText(ts);
  node.title = text;
  node.textContent = text.length > MAX_SHOWN_CHARS ? text.slice(0, MAX_SHOWN_CHARS) + '…' : text;
  const ago = relativeTime(ts);
  if (ago) {
    node.appendChild(el('span', 'jp-AgentMemory-ago', ` · ${ago}`));
  }
  return node;
}

/**
 * Longest part of one journal value shown before a "Show all" button: a single huge entry
 * must not make the sidebar lay out megabytes of text on every search.
 */
export const MAX_SHOWN_CHARS = 2000;

/** Longest part of a prompt or file shown as text before "Show all". */
export const MAX_SHOWN_TEXT = 20000;

/** Keys every entry written by this package has; others are shown as extra fields. */
const ENTRY_KEYS = ['ts', 'tags', 'text'];

/** The engine's empty-state texts, so every surface says the same. */
export const EMPTY = {
  facts: 'FACT.md is empty.',
  history: 'No earlier FACT.md versions yet.',
  journal: 'No matching journal entries found.',
  sessions:
    'No sessions on record yet: one is recorded when a client really starts a session ' +
    '(an MCP client connecting, the evaluation runner, or PromptBuilder.start_session); ' +
    'previews such as %memprompt never record.'
};

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
 * An element showing `text` as text (never as HTML), cut at `limit` with a button that shows
 * all of it in a read-only text box. A text box, because laying out a megabyte of wrapped
 * inline text in the sidebar's flex layout takes Chromium minutes.
 */
function longText(
  tag: 'div' | 'span' | 'pre',
  className: string,
  text: string,
  limit = MAX_SHOWN_CHARS,
  query = ''
): HTMLElement {
  const node = el(tag, className);
  if (text.length <= limit) {
    node.append(...highlighted(text, query));
    return node;
  }
  const shown = el('span', '');
  shown.append(...highlighted(text.slice(0, limit), query), '…');
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

/**
 * A long text the server may have cut (`truncated`): the first `MAX_SHOWN_TEXT` characters,
 * and a Show all that shows the whole of it, fetched with `fetchAll` only when the server's
 * view was cut (the whole text is never sent unless the reader asks for it).
 */
function cutText(
  tag: 'div' | 'pre',
  className: string,
  view: { text: string; chars: number; truncated: boolean },
  fetchAll: () => Promise<string>
): HTMLElement {
  if (!view.truncated) {
    return longText(tag, className, view.text, MAX_SHOWN_TEXT);
  }
  const node = el(tag, className);
  const more = button(
    `Show all (${view.chars.toLocaleString('en-US')} characters)`,
    'jp-AgentMemory-showAll',
    async () => {
      more.disabled = true;
      try {
        const all = el('textarea', 'jp-mod-styled jp-AgentMemory-fullText');
        all.readOnly = true;
        all.rows = 8;
        all.value = await fetchAll();
        node.replaceChildren(all);
      } catch (error) {
        more.disabled = false;
        node.appendChild(el('div', 'jp-AgentMemory-note jp-mod-error', `Could not load it all: ${describe(error)}`));
      }
    }
  );
  node.append(view.text.slice(0, MAX_SHOWN_TEXT), '…', more);
  return node;
}

/**
 * `text` as text nodes, with each case-insensitive occurrence of `query` in a `<mark>`
 * (elements made here, text set as text: nothing in `text` or `query` is parsed).
 */
export function highlighted(text: string, query: string): (Node | string)[] {
  if (!query) {
    return [text];
  }
  const haystack = text.toLowerCase();
  const needle = query.toLowerCase();
  // Lower-casing can change lengths outside ASCII; then positions would not line up.
  if (haystack.length !== text.length || needle.length !== query.length) {
    return [text];
  }
  const parts: (Node | string)[] = [];
  let start = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, start)) {
    if (at > start) {
      parts.push(text.slice(start, at));
    }
    parts.push(el('mark', 'jp-AgentMemory-match', text.slice(at, at + needle.length)));
    start = at + needle.length;
  }
  parts.push(text.slice(start));
  return parts;
}

/** A diff as text lines, each marked by its kind for colour. */
function diffView(lines: IDiffLine[], className: string): HTMLElement {
  const node = el('pre', `jp-AgentMemory-diff ${className}`);
  if (!lines.length) {
    node.textContent = 'No differences.';
    return node;
  }
  const kinds: Record<string, string> = {
    '+': 'jp-mod-added',
    '-': 'jp-mod-removed',
    ' ': '',
    '…': 'jp-mod-gap'
  };
  for (const line of lines.slice(0, 2000)) {
    const text = line.text.length > MAX_SHOWN_CHARS ? line.text.slice(0, MAX_SHOWN_CHARS) + '…' : line.text;
    node.appendChild(el('div', `jp-AgentMemory-diffLine ${kinds[line.kind]}`, `${line.kind === '…' ? '…' : line.kind} ${text}`));
  }
  if (lines.length > 2000) {
    node.appendChild(el('div', 'jp-AgentMemory-diffLine jp-mod-gap', `… ${lines.length - 2000} more diff lines`));
  }
  return node;
}

/** What the sidebar needs from the application around it. */
export interface IPanelOptions {
  client?: AgentMemoryClient;
  /** JupyterLab's Markdown renderer for FACT.md (null: FACT.md is shown as text). */
  markdown?: MemoryMarkdown | null;
  /** Absolute path of the server's root, with '/' separators ('' when unknown). */
  serverRoot?: string;
  /** Opens a path relative to the server's root in JupyterLab's editor. */
  openInEditor?: (path: string) => void;
}

/** One memory file as the REST API sends it: maybe cut to the view bound (`truncated`). */
interface ILoadedFile {
  path: string;
  content: string;
  sha256: string;
  chars: number;
  truncated: boolean;
}

/** One memory file as the REST API reads and writes it. */
interface IFileSource {
  label: string;
  /** The server's bounded view by default; `'all'` for the whole text (editing, Show all). */
  load(agent: string, bound?: ViewBound): Promise<ILoadedFile>;
  save(agent: string, content: string, expected: string): Promise<{ sha256: string }>;
}

/**
 * The view and compare-and-swap editor of one memory file (FACT.md, SOUL.md or USER.md).
 *
 * A save sends the sha256 of the version shown; when the file changed meanwhile nothing is
 * written and the conflict shows both 12-digit hashes, a diff from the file as it is now to
 * the edit, and Reload / Keep editing / Overwrite anyway (which is again a compare-and-swap,
 * against the version the diff showed). Ctrl+S saves and Escape cancels while editing (the
 * application's key bindings call `save` and `escape`).
 */
class FileSection {
  constructor(
    readonly owner: AgentMemoryPanel,
    readonly source: IFileSource,
    readonly prefix: string,
    readonly markdown: MemoryMarkdown | null,
    /** Class names of the Edit/Save/Cancel buttons (FACT.md keeps the historical ones). */
    buttonClass: (name: string) => string
  ) {
    const cls = (name: string) => `jp-AgentMemory-${prefix}${name}`;
    this.path = el('div', `jp-AgentMemory-filePath ${cls('Path')}`);
    this.rendered = el('div', `jp-AgentMemory-rendered ${cls('Rendered')}`);
    this.view = el('pre', `jp-AgentMemory-fileView ${cls('View')}`);
    this.editor = el('textarea', `jp-mod-styled jp-AgentMemory-editor ${cls('Editor')}`);
    this.editor.rows = 12;
    this.editor.spellcheck = false;
    this.editor.hidden = true;
    this.editor.addEventListener('input', () => {
      this.escapeArmed = false;
    });
    this.note = el('div', `jp-AgentMemory-note ${cls('Note')}`);
    this.editButton = button('Edit', buttonClass('edit'), () => void this.startEditing());
    this.saveButton = button('Save', buttonClass('save'), () => void this.save());
    this.cancelButton = button('Cancel', buttonClass('cancel'), () => this.stopEditing());
    this.textToggle = button('Text', `jp-AgentMemory-textToggle ${cls('TextToggle')}`, () =>
      this.toggleText()
    );
    this.openButton = button('Open in editor', `jp-AgentMemory-openEditor ${cls('OpenEditor')}`, () =>
      this.openInEditor()
    );
    this.saveButton.hidden = true;
    this.cancelButton.hidden = true;
    this.editButton.disabled = true; // until the file and its hash have loaded
    this.openButton.disabled = true;
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
        this.stopEditing(`Reloaded the current ${source.label}; your edit was discarded.`)
      ),
      button('Keep editing', 'jp-AgentMemory-conflictKeep', () => this.keepEditing()),
      button('Overwrite anyway', 'jp-AgentMemory-conflictOverwrite jp-mod-warn', () => void this.overwrite())
    );
    this.conflict.append(this.conflictMessage, this.conflictDiff, choices);

    const buttons = el('div', 'jp-AgentMemory-buttons');
    buttons.append(this.editButton, this.saveButton, this.cancelButton, this.textToggle, this.openButton);
    this.body = [this.path, this.rendered, this.view, this.editor, buttons, this.note, this.conflict];
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
    const agent = this.owner.currentAgent;
    try {
      const file = await this.source.load(agent, this.showAll ? 'all' : undefined);
      if (agent !== this.owner.currentAgent) {
        return;
      }
      this.path.textContent = file.path;
      this.filePath = file.path;
      this.openButton.disabled = this.owner.relativeToServer(file.path) === null;
      this.openButton.title = this.openButton.disabled
        ? `${file.path} is outside the server's root: open the agent by its folder to edit it in JupyterLab`
        : `Open ${this.source.label} in JupyterLab's editor`;
      if (this.editing) {
        // Never replace what the user is typing; tell them if the file moved on.
        if (file.sha256 !== this.sha) {
          this.setNote(
            `${this.source.label} changed on disk since you started editing; saving will show what changed.`
          );
        }
        return;
      }
      this.shown = file.content;
      this.sha = file.sha256;
      this.truncated = file.truncated;
      this.view.textContent = file.content;
      this.view.classList.toggle('jp-mod-empty', !file.content);
      if (file.truncated) {
        this.view.append('…', this.showAllButton(file.chars));
      }
      await this.render(file.content, file.truncated ? file.chars : null);
      this.editButton.disabled = false;
      this.setNote(note ?? (file.content ? '' : this.emptyText()));
    } catch (error) {
      if (agent !== this.owner.currentAgent) {
        return;
      }
      if (!this.editing) {
        // What is on screen may no longer be on disk: show nothing, and offer no Edit
        // (a save needs the hash of a version we showed).
        this.clear();
      }
      this.setNote(`Could not load ${this.source.label}: ${describe(error)}`, true);
    }
  }

  private emptyText(): string {
    return `${this.source.label} is empty.`;
  }

  /** A button that fetches and shows the whole file (`chars` characters). */
  private showAllButton(chars: number): HTMLButtonElement {
    return button(
      `Show all (${chars.toLocaleString('en-US')} characters)`,
      'jp-AgentMemory-showAll',
      () => {
        this.showAll = true;
        this.renderAll = true;
        void this.load();
      }
    );
  }

  /** Render `content`; `wholeChars` is the whole file's length when the server cut it. */
  private async render(content: string, wholeChars: number | null = null): Promise<void> {
    if (this.markdown === null) {
      return;
    }
    if (!content) {
      this.rendered.replaceChildren();
      return;
    }
    if (wholeChars !== null) {
      const node = await this.markdown.render(content);
      this.rendered.replaceChildren(node, this.showAllButton(wholeChars));
      return;
    }
    const shown = content.length > MAX_SHOWN_TEXT * 5 && !this.renderAll
      ? content.slice(0, MAX_SHOWN_TEXT * 5)
      : content;
    const node = await this.markdown.render(shown);
    this.rendered.replaceChildren(node);
    if (shown !== content) {
      this.rendered.appendChild(
        button(
          `Show all (${content.length.toLocaleString('en-US')} characters)`,
          'jp-AgentMemory-showAll',
          () => {
            this.renderAll = true;
            void this.render(content);
          }
        )
      );
    }
  }

  /** Show no file and forget its hash; Edit waits for the next successful load. */
  clear(): void {
    this.sha = null;
    this.shown = '';
    this.filePath = '';
    this.renderAll = false;
    this.showAll = false;
    this.truncated = false;
    this.path.textContent = '';
    this.view.textContent = '';
    this.view.classList.remove('jp-mod-empty');
    this.rendered.replaceChildren();
    this.editButton.disabled = true;
    this.openButton.disabled = true;
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
    const relative = this.owner.relativeToServer(this.filePath);
    if (relative !== null) {
      this.owner.openInEditor(relative);
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
      const agent = this.owner.currentAgent;
      this.fetchingAll = true;
      this.setNote(`Loading all of ${this.source.label} to edit it…`);
      try {
        const file = await this.source.load(agent, 'all');
        if (agent !== this.owner.currentAgent) {
          return;
        }
        this.shown = file.content;
        this.sha = file.sha256;
        this.truncated = file.truncated;
      } catch (error) {
        this.setNote(`Could not load all of ${this.source.label} to edit it: ${describe(error)}`, true);
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
    this.owner.editingChanged();
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
    this.owner.editingChanged();
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
        `Not saved: the ${this.source.label} this edit started from is unknown. Copy your text, Cancel and try again.`,
        true
      );
      return false;
    }
    return this.write(expected);
  }

  private async write(expected: string): Promise<boolean> {
    const agent = this.owner.currentAgent;
    const content = this.editor.value;
    try {
      const saved = await this.source.save(agent, content, expected);
      this.sha = saved.sha256;
      this.stopEditing(`Saved (sha256 ${shortSha(saved.sha256)}).`);
      this.owner.afterSave(this);
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
      current = await this.source.load(this.owner.currentAgent, 'all');
    } catch (loadError) {
      this.setNote(`Not saved: ${error.message}. ${describe(loadError)}`, true);
      return;
    }
    this.conflictSha = current.sha256;
    this.conflictMessage.textContent =
      `Not saved: ${this.source.label} changed on disk since you opened it (an agent, a ` +
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
      `Still editing; not saved. ${this.source.label} on disk is ${now}: saving will show what changed again.`,
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

  readonly path: HTMLDivElement;
  readonly rendered: HTMLDivElement;
  readonly view: HTMLPreElement;
  readonly editor: HTMLTextAreaElement;
  readonly note: HTMLDivElement;
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
  private renderAll = false;
  /** The reader asked for the whole file (Show all): loads fetch it all from then on. */
  private showAll = false;
  /** The text on screen is the server's cut of a longer file. */
  private truncated = false;
  private fetchingAll = false;
}

/** The sidebar widget. */
export class AgentMemoryPanel extends Widget {
  constructor(options: IPanelOptions | AgentMemoryClient = {}) {
    super();
    const opts: IPanelOptions = options instanceof AgentMemoryClient ? { client: options } : options;
    this.client = opts.client ?? new AgentMemoryClient();
    this.serverRoot = (opts.serverRoot ?? '').replace(/\/+$/, '');
    this.openPath = opts.openInEditor ?? null;
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
      button('Open folder…', 'jp-AgentMemory-openFolder', () => void this.askFolder()),
      button('Refresh', 'jp-AgentMemory-refresh', () => void this.refresh())
    );
    node.appendChild(header);
    this.status = el('div', 'jp-AgentMemory-status');
    node.appendChild(this.status);

    // FACT.md, with its history.
    const facts = section('FACT.md', 'jp-AgentMemory-facts');
    this.facts = new FileSection(
      this,
      {
        label: 'FACT.md',
        load: (agent, bound) => this.client.getFacts(agent, bound),
        save: (agent, content, expected) => this.client.saveFacts(agent, content, expected)
      },
      'facts',
      opts.markdown ?? null,
      name => `jp-AgentMemory-${name}`
    );
    // The historical name of FACT.md's path line.
    this.facts.path.classList.add('jp-AgentMemory-path');
    facts.body.append(...this.facts.body);
    const history = el('details', 'jp-AgentMemory-history');
    history.appendChild(el('summary', 'jp-AgentMemory-historyTitle', 'History'));
    this.historyList = el('ol', 'jp-AgentMemory-versions');
    this.historyNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-historyNote');
    this.historyDiff = el('div', 'jp-AgentMemory-historyDiff');
    history.append(this.historyNote, this.historyList, this.historyDiff);
    history.addEventListener('toggle', () => {
      if (history.open) {
        void this.loadHistory();
      }
    });
    this.history = history;
    facts.body.appendChild(history);
    node.appendChild(facts.root);

    // SOUL.md and USER.md
    const persona = section('SOUL.md and USER.md', 'jp-AgentMemory-persona', false);
    this.persona = (['soul', 'user'] as PersonaName[]).map(name => {
      const label = name === 'soul' ? 'SOUL.md' : 'USER.md';
      const part = new FileSection(
        this,
        {
          label,
          load: (agent, bound) => this.client.getPersona(agent, name, bound),
          save: (agent, content, expected) => this.client.savePersona(agent, name, content, expected)
        },
        name,
        null,
        action => `jp-AgentMemory-${name}${action[0].toUpperCase()}${action.slice(1)}`
      );
      persona.body.append(el('div', 'jp-AgentMemory-fileTitle', label), ...part.body);
      return part;
    });
    persona.root.addEventListener('toggle', () => {
      if (persona.root.open) {
        void this.loadPersona();
      }
    });
    this.personaSection = persona.root;
    node.appendChild(persona.root);

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
    // Every control searches when its value changes (Enter, or leaving the field).
    for (const input of [this.queryInput, this.tagInput, this.limitInput]) {
      input.addEventListener('change', () => void this.search());
    }
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
    this.promptText = el('div', 'jp-AgentMemory-promptBox');
    prompt.body.append(
      this.promptSummary,
      this.promptSections,
      this.promptWarnings,
      this.promptText
    );
    node.appendChild(prompt.root);

    // Recorded sessions
    const sessions = section('Sessions', 'jp-AgentMemory-sessions', false);
    this.sessionsNote = el('div', 'jp-AgentMemory-note jp-AgentMemory-sessionsNote');
    this.sessionsList = el('ol', 'jp-AgentMemory-sessionList');
    const pick = el('div', 'jp-AgentMemory-buttons');
    this.sessionPick = el('select', 'jp-mod-styled jp-AgentMemory-sessionPick');
    this.sessionOther = el('select', 'jp-mod-styled jp-AgentMemory-sessionOther');
    pick.append(
      this.sessionPick,
      button('Prompt', 'jp-AgentMemory-sessionShow', () => void this.showSession()),
      this.sessionOther,
      button('Diff', 'jp-AgentMemory-sessionDiff', () => void this.diffSessions())
    );
    const why = el('form', 'jp-AgentMemory-searchForm jp-AgentMemory-whyForm');
    this.whyInput = el('input', 'jp-mod-styled jp-AgentMemory-whyText');
    this.whyInput.placeholder = 'Why is this line in the prompt?';
    const whyButton = button('Why', 'jp-AgentMemory-why', () => {
      /* submitted through the form */
    });
    whyButton.type = 'submit';
    why.append(this.whyInput, whyButton);
    why.addEventListener('submit', event => {
      event.preventDefault();
      void this.why();
    });
    this.sessionOutput = el('div', 'jp-AgentMemory-sessionOutput');
    sessions.body.append(this.sessionsNote, this.sessionsList, pick, why, this.sessionOutput);
    sessions.root.addEventListener('toggle', () => {
      if (sessions.root.open) {
        void this.loadSessions();
      }
    });
    this.sessionsSection = sessions.root;
    node.appendChild(sessions.root);
  }

  /** The agent currently shown ('' until the agent list has loaded). */
  get currentAgent(): string {
    return this.agent;
  }

  /** The FACT.md, SOUL.md and USER.md editors (for the application's key bindings). */
  get fileSections(): FileSection[] {
    return [this.facts, ...this.persona];
  }

  /** The file section whose editor holds the keyboard focus, if any. */
  focusedSection(): FileSection | null {
    return this.fileSections.find(part => part.editor === document.activeElement) ?? null;
  }

  /** `path` relative to the server's root, or null when it is not below it. */
  relativeToServer(path: string): string | null {
    if (!this.serverRoot || !path) {
      return null;
    }
    const normal = path.replace(/\\/g, '/');
    const root = this.serverRoot;
    return normal.startsWith(root + '/') ? normal.slice(root.length + 1) : null;
  }

  /** Open a path relative to the server's root in JupyterLab's editor. */
  openInEditor(relative: string): void {
    if (this.openPath) {
      this.openPath(relative);
    }
  }

  /** Reload the agent list and everything shown for the current agent. */
  async refresh(): Promise<void> {
    try {
      const listing = await this.client.listAgents();
      this.agentsRoot = listing.root;
      let agents = listing.agents;
      let status = '';
      if (this.agent.startsWith('@')) {
        if (!(await this.folderExists(this.agent)) && !this.editing) {
          status = `The folder "${this.agent.slice(1)}" is gone (deleted or moved); nothing was recreated. Showing the default agent.`;
          this.folders = this.folders.filter(f => f !== this.agent);
          this.agent = '';
        }
      } else if (this.agent && !agents.includes(this.agent) && !this.editing) {
        // Removed behind our back: never re-create it, go back to the default agent.
        status = `Agent "${this.agent}" no longer exists; showing the default agent.`;
        this.agent = '';
      }
      if (!this.agent) {
        this.agent = listing.default_agent;
      }
      this.showAgent();
      if (!this.agent.startsWith('@') && !agents.includes(this.agent)) {
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

  private async folderExists(agent: string): Promise<boolean> {
    try {
      await this.client.getFacts(agent, 1); // only whether it exists
      return true;
    } catch (error) {
      return !(error instanceof ApiError && error.status === 404);
    }
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    // Memory changes behind our back (agents, magics, the CLI): show the current state.
    void this.refresh();
  }

  /**
   * Show the agent in `folder` (a path relative to the server's root). Nothing is created: a
   * folder that does not exist is reported.
   */
  async openFolder(folder: string): Promise<boolean> {
    const relative = folder.replace(/\\/g, '/').replace(/^\/+|\/+$/g, '');
    if (!relative) {
      this.setStatus('The server root itself cannot be an agent: pick a folder below it.', true);
      return false;
    }
    const agent = `@${relative}`;
    try {
      await this.client.getFacts(agent, 1); // only whether it exists
    } catch (error) {
      this.setStatus(`Could not open "${relative}" as an agent: ${describe(error)}`, true);
      return false;
    }
    if (this.editing) {
      this.setStatus('Save or cancel the edit first.', true);
      return false;
    }
    if (!this.folders.includes(agent)) {
      this.folders = [...this.folders, agent];
    }
    this.agent = agent;
    await this.refresh();
    this.setStatus(`Showing the agent folder "${relative}".`);
    return true;
  }

  /**
   * Show the agent at absolute `path` (what a notebook's kernel reports): by id when it is in
   * the agents root, by folder when it is below the server's root.
   */
  async openLocation(path: string, agentId: string | null): Promise<boolean> {
    if (!this.agentsRoot) {
      await this.refresh();
    }
    const normal = path.replace(/\\/g, '/');
    const root = this.agentsRoot.replace(/\\/g, '/').replace(/\/+$/, '');
    if (agentId && root && normal === `${root}/${agentId}`) {
      if (this.editing) {
        this.setStatus('Save or cancel the edit first.', true);
        return false;
      }
      this.agent = agentId;
      await this.refresh();
      this.setStatus(`Showing the notebook's agent "${agentId}".`);
      return true;
    }
    const relative = this.relativeToServer(normal);
    if (relative === null) {
      this.setStatus(
        `The notebook's agent is at ${path}, outside the server's root and the agents root, ` +
          'so the sidebar cannot reach it: start JupyterLab in a folder above it.',
        true
      );
      return false;
    }
    return this.openFolder(relative);
  }

  /** Show why the notebook's agent could not be shown. */
  async openLocationError(message: string): Promise<void> {
    this.setStatus(message, true);
  }

  private async askFolder(): Promise<void> {
    const named = await InputDialog.getText({
      title: 'Open an agent folder',
      label: "Folder path relative to the server's root (for example demo-agent)",
      placeholder: 'demo-agent'
    });
    if (named.button.accept && named.value) {
      await this.openFolder(named.value);
    }
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
    const options = agents.map(id => {
      const option = el('option', '', id);
      option.value = id;
      return option;
    });
    for (const folder of this.folders) {
      const option = el('option', 'jp-AgentMemory-folderOption', `${folder.slice(1)} (folder)`);
      option.value = folder;
      options.push(option);
    }
    this.picker.replaceChildren(...options);
    this.picker.value = this.agent;
  }

  /** True while any file is being edited. */
  get editing(): boolean {
    return this.fileSections.some(part => part.isEditing);
  }

  /** A file section started or stopped editing: no switching agents meanwhile. */
  editingChanged(): void {
    this.picker.disabled = this.editing;
  }

  /** A file was saved: what depends on it is shown again. */
  afterSave(part: FileSection): void {
    void this.loadPrompt();
    if (part === this.facts && this.history.open) {
      void this.loadHistory();
    }
  }

  /**
   * When the agent to show is not the one on screen, clear everything shown for the previous
   * one first, so a load that fails can never leave another agent's memory on screen (or its
   * hashes behind for Save).
   */
  private showAgent(): void {
    if (this.agent === this.shownAgent) {
      return;
    }
    this.shownAgent = this.agent;
    for (const part of this.fileSections) {
      part.clear();
    }
    this.historyList.replaceChildren();
    this.historyDiff.replaceChildren();
    this.historyNote.textContent = '';
    this.journalList.replaceChildren();
    this.setJournalNote('');
    this.promptSummary.textContent = '';
    this.promptSummary.classList.remove('jp-mod-error');
    this.promptSections.replaceChildren();
    this.promptWarnings.replaceChildren();
    this.promptText.replaceChildren();
    this.sessionsList.replaceChildren();
    this.sessionPick.replaceChildren();
    this.sessionOther.replaceChildren();
    this.sessionOutput.replaceChildren();
    this.sessionsNote.textContent = '';
  }

  private async refreshAgent(): Promise<void> {
    const work: Promise<void>[] = [this.facts.load(), this.search(), this.loadPrompt()];
    if (this.history.open) {
      work.push(this.loadHistory());
    }
    if (this.personaSection.open) {
      work.push(this.loadPersona());
    }
    if (this.sessionsSection.open) {
      work.push(this.loadSessions());
    }
    await Promise.all(work);
  }

  private setStatus(text: string, isError = false): void {
    this.status.textContent = text;
    this.status.classList.toggle('jp-mod-error', isError);
  }

  private async loadPersona(): Promise<void> {
    await Promise.all(this.persona.map(part => part.load()));
  }

  // -- FACT.md history -------------------------------------------------------

  private async loadHistory(): Promise<void> {
    const agent = this.agent;
    try {
      const { versions } = await this.client.getHistory(agent);
      if (agent !== this.agent) {
        return;
      }
      this.historyNote.textContent = versions.length
        ? `${versions.length} earlier version${versions.length === 1 ? '' : 's'}, newest first.`
        : EMPTY.history;
      this.historyNote.classList.remove('jp-mod-error');
      this.historyList.replaceChildren(...versions.map(v => this.renderVersion(v)));
    } catch (error) {
      if (agent === this.agent) {
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
      const old = await this.client.getVersion(this.agent, version.sha256);
      const current = await this.client.getFacts(this.agent, 'all');
      const lines = diffLines(old.content, current.content);
      this.historyDiff.replaceChildren(
        el('div', 'jp-AgentMemory-note', `From ${shortSha(version.sha256)} to the current FACT.md (${shortSha(current.sha256)}): ${diffSummary(lines)}`),
        diffView(lines, 'jp-AgentMemory-versionLines')
      );
    } catch (error) {
      this.historyDiff.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', describe(error)));
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
      const old = await this.client.getVersion(this.agent, version.sha256);
      const expected = this.facts.shownSha;
      if (expected === null) {
        throw new Error('FACT.md has not loaded; refresh and try again.');
      }
      const saved = await this.client.saveFacts(this.agent, old.content, expected);
      await this.facts.load(`Restored version ${shortSha(version.sha256)}; FACT.md is now ${shortSha(saved.sha256)}.`);
      this.historyDiff.replaceChildren();
      void this.loadHistory();
      void this.loadPrompt();
    } catch (error) {
      const message = error instanceof ConflictError
        ? `Not restored: FACT.md changed since it was shown (it is now ${shortSha(error.actual)}); nothing was written. Look at it again and retry.`
        : `Not restored: ${describe(error)}`;
      this.historyDiff.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', message));
      void this.facts.load();
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
      this.shownQuery = this.queryInput.value;
      this.journalList.replaceChildren(
        ...result.entries.map(entry => this.renderEntry(entry))
      );
      const count = result.entries.length;
      let note =
        count === 0
          ? EMPTY.journal
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
    item.append(
      meta,
      longText('div', 'jp-AgentMemory-entryText', asText(entry.text), MAX_SHOWN_CHARS, this.shownQuery)
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
    let summary = `~${prompt.tokens} tokens, ${prompt.chars} characters`;
    if (prompt.budget_tokens !== null) {
      summary += ` (budget ${prompt.budget_tokens}${prompt.over_budget ? ', over budget' : ''})`;
    }
    if (prompt.bootstrap) {
      summary += '; bootstrap mode';
    }
    this.promptSummary.textContent = summary;
    this.promptSummary.classList.toggle('jp-mod-error', prompt.over_budget);
    this.promptSections.replaceChildren(...this.sectionRows(prompt.sections));
    this.promptWarnings.replaceChildren(
      ...prompt.warnings.map(text => el('li', 'jp-mod-error', text))
    );
    const agent = prompt.agent;
    this.promptText.replaceChildren(
      cutText('pre', 'jp-AgentMemory-promptText', prompt, async () =>
        (await this.client.getPrompt(agent, 'all')).text
      )
    );
  }

  private sectionRows(sections: { name: string; source: string | null; chars: number; tokens: number }[]): HTMLTableRowElement[] {
    const head = el('tr', '');
    head.append(el('th', '', 'Section'), el('th', '', 'Chars'), el('th', '', 'Tokens'));
    const rows = sections.map(part => {
      const row = el('tr', 'jp-AgentMemory-promptSection');
      const name = el('td', '', part.name);
      name.title = part.source ?? 'text the prompt builder writes';
      row.append(name, el('td', '', `${part.chars}`), el('td', '', `${part.tokens}`));
      return row;
    });
    return [head, ...rows];
  }

  // -- sessions ----------------------------------------------------------------

  private async loadSessions(): Promise<void> {
    const agent = this.agent;
    try {
      const { sessions } = await this.client.listSessions(agent);
      if (agent !== this.agent) {
        return;
      }
      this.sessionsNote.textContent = sessions.length
        ? `${sessions.length} session${sessions.length === 1 ? '' : 's'} on record, newest first.`
        : EMPTY.sessions;
      this.sessionsNote.classList.remove('jp-mod-error');
      this.sessionsList.replaceChildren(...sessions.map(s => this.renderSession(s)));
      const options = (first: string | null) => {
        const list = sessions.map(s => {
          const option = el('option', '', `${s.session_id.slice(0, 8)} · ${relativeTime(s.ts) || asText(s.ts)}`);
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
      if (agent === this.agent) {
        this.sessionsList.replaceChildren();
        this.sessionsNote.textContent = `Could not list sessions: ${describe(error)}`;
        this.sessionsNote.classList.add('jp-mod-error');
      }
    }
  }

  private renderSession(receipt: ISessionReceipt): HTMLLIElement {
    const item = el('li', 'jp-AgentMemory-session');
    item.dataset.sid = receipt.session_id;
    const client = receipt.client && receipt.client.name
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
      const agent = this.agent;
      const session = await this.client.getSession(agent, sid);
      const { receipt } = session;
      const table = el('table', 'jp-AgentMemory-promptSections');
      table.replaceChildren(...this.sectionRows(receipt.sections ?? []));
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note', `The exact prompt session ${receipt.session_id} started with (${asText(receipt.ts)}), ${session.chars.toLocaleString('en-US')} characters:`),
        table,
        cutText('pre', 'jp-AgentMemory-promptText jp-AgentMemory-sessionPrompt', session, async () =>
          (await this.client.getSession(agent, sid, 'all')).text
        )
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', describe(error)));
    }
  }

  private async diffSessions(): Promise<void> {
    const first = this.sessionPick.value;
    const second = this.sessionOther.value;
    if (!first || !second) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', 'Pick two sessions to diff.'));
      return;
    }
    try {
      const [a, b] = await Promise.all([
        this.client.getSession(this.agent, first, 'all'),
        this.client.getSession(this.agent, second, 'all')
      ]);
      const lines = diffLines(a.text, b.text);
      this.sessionOutput.replaceChildren(
        el('div', 'jp-AgentMemory-note', `From session ${a.receipt.session_id} to ${b.receipt.session_id}: ${diffSummary(lines)}`),
        diffView(lines, 'jp-AgentMemory-sessionLines')
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', describe(error)));
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
      const result = await this.client.why(this.agent, sid, text);
      const list = el('ol', 'jp-AgentMemory-origins');
      list.replaceChildren(
        ...result.origins.map(origin => {
          const item = el('li', 'jp-AgentMemory-origin');
          const where = origin.source === null
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
        el('div', 'jp-AgentMemory-note', result.origins.length
          ? `${result.origins.length} line${result.origins.length === 1 ? '' : 's'} of session ${result.session_id}'s prompt hold this text:`
          : `No line of session ${result.session_id}'s prompt contains "${text}".`),
        list
      );
    } catch (error) {
      this.sessionOutput.replaceChildren(el('div', 'jp-AgentMemory-note jp-mod-error', describe(error)));
    }
  }

  private readonly client: AgentMemoryClient;
  private readonly serverRoot: string;
  private readonly openPath: ((path: string) => void) | null;
  private agent = '';
  private agentsRoot = '';
  /** The query whose matches the journal list highlights. */
  private shownQuery = '';
  /** Agent folders opened by path this session ('@relative/path'). */
  private folders: string[] = [];
  /** The agent whose memory is on screen (cleared before another one is shown). */
  private shownAgent = '';
  private readonly facts: FileSection;
  private readonly persona: FileSection[];
  private readonly personaSection: HTMLDetailsElement;
  private readonly history: HTMLDetailsElement;
  private readonly historyList: HTMLOListElement;
  private readonly historyNote: HTMLDivElement;
  private readonly historyDiff: HTMLDivElement;
  private readonly picker: HTMLSelectElement;
  private readonly status: HTMLDivElement;
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
  private readonly promptText: HTMLDivElement;
  private readonly sessionsSection: HTMLDetailsElement;
  private readonly sessionsNote: HTMLDivElement;
  private readonly sessionsList: HTMLOListElement;
  private readonly sessionPick: HTMLSelectElement;
  private readonly sessionOther: HTMLSelectElement;
  private readonly whyInput: HTMLInputElement;
  private readonly sessionOutput: HTMLDivElement;
}
