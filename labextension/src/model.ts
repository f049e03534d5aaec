/**
 * The sidebar's shared state: which agent is shown, the agents and folders the picker offers,
 * the memory files on screen with the sha256 a save compares with, and the one place that
 * talks to the REST client. Sections hold their own DOM and subscribe to its signals; none
 * of them knows another.
 */

import { ISignal, Signal } from '@lumino/signaling';

import {
  AgentMemoryClient,
  ApiError,
  IAgentsResponse,
  IHandoverResponse,
  IHistoryResponse,
  IJournalAppendedResponse,
  IJournalQuery,
  IJournalResponse,
  IPromptResponse,
  ISessionResponse,
  ISessionsResponse,
  ISessionWhyResponse,
  IVersionResponse,
  PersonaName,
  ViewBound
} from './api';
import { describe } from './dom';

/** The memory files the sidebar shows and edits. */
export type MemoryFile = 'facts' | PersonaName;

/** Human names of the memory files. */
export const FILE_LABELS: Record<MemoryFile, string> = {
  facts: 'FACT.md',
  soul: 'SOUL.md',
  user: 'USER.md'
};

/** One memory file as the REST API sends it: maybe cut to the view bound (`truncated`). */
export interface ILoadedFile {
  path: string;
  content: string;
  sha256: string;
  chars: number;
  truncated: boolean;
  /** The server's rendering of `content` (FACT.md only). */
  html?: string;
}

/** A status line message. */
export interface IStatus {
  text: string;
  isError: boolean;
}

/**
 * A request to show the current agent again: each open section adds the promise of its load
 * to `work`, so whoever asked can wait for all of them.
 */
export interface IReload {
  agent: string;
  work: Promise<void>[];
}

/** An agent the picker offers besides the agents root's: a folder, or a notebook's agent. */
export interface IExtraAgent {
  /** `@relative/path` (a folder below the server's root) or `~handle` (handed over). */
  id: string;
  label: string;
}

/** What the picker lists. */
export interface IAgentListing {
  agents: string[];
  extras: IExtraAgent[];
  agent: string;
}

/** What `checkAgentId` found: a usable new id, an existing agent, or the server's refusal. */
export type AgentIdCheck =
  { kind: 'new' } | { kind: 'exists' } | { kind: 'invalid'; message: string };

/** What the model needs from the application around it. */
export interface IModelOptions {
  client?: AgentMemoryClient;
  /** Absolute path of the server's root, with '/' separators ('' when unknown). */
  serverRoot?: string;
  /** Opens a path relative to the server's root in JupyterLab's editor. */
  openInEditor?: (path: string) => void;
}

/** The sidebar's shared model. */
export class AgentMemoryModel {
  constructor(options: IModelOptions = {}) {
    this.client = options.client ?? new AgentMemoryClient();
    this.serverRoot = (options.serverRoot ?? '').replace(/\/+$/, '');
    this.openPath = options.openInEditor ?? null;
  }

  /** The agent on screen changed: everything shown for the previous one must go. */
  get agentShown(): ISignal<this, string> {
    return this._agentShown;
  }
  /** Show the current agent again (each section loads what it shows). */
  get reloadRequested(): ISignal<this, IReload> {
    return this._reloadRequested;
  }
  /** The agent list loaded: the agent ids, then the folders and notebooks' agents. */
  get agentsListed(): ISignal<this, IAgentListing> {
    return this._agentsListed;
  }
  /** The status line's text. */
  get statusChanged(): ISignal<this, IStatus> {
    return this._statusChanged;
  }
  /** Whether any memory file is being edited. */
  get editingChanged(): ISignal<this, boolean> {
    return this._editingChanged;
  }
  /** A memory file was written from the sidebar (by an edit or a restore). */
  get fileSaved(): ISignal<this, MemoryFile> {
    return this._fileSaved;
  }

  /** The agent currently shown ('' until the agent list has loaded). */
  get agent(): string {
    return this.current;
  }

  /** True while any memory file is being edited. */
  get editing(): boolean {
    return this.editors.size > 0;
  }

  /** The path and sha256 of each memory file on screen (absent when none is). */
  get files(): ReadonlyMap<MemoryFile, { path: string; sha256: string }> {
    return this.shown;
  }

  /** Record (or with null, forget) the version of `file` on screen. */
  setShownFile(file: MemoryFile, version: { path: string; sha256: string } | null): void {
    if (version === null) {
      this.shown.delete(file);
    } else {
      this.shown.set(file, version);
    }
  }

  /** A file editor started (`true`) or stopped editing: no switching agents meanwhile. */
  setEditing(editor: object, editing: boolean): void {
    if (editing) {
      this.editors.add(editor);
    } else {
      this.editors.delete(editor);
    }
    this._editingChanged.emit(this.editing);
  }

  setStatus(text: string, isError = false): void {
    this._statusChanged.emit({ text, isError });
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

  /** Show the agent the picker selected. */
  select(agent: string): Promise<void> {
    this.current = agent;
    this.setStatus('');
    this.showAgent();
    return this.track(this.reload());
  }

  /** True while the agent list or a section is loading (the panel says so as `aria-busy`). */
  get loading(): boolean {
    return this.loads > 0;
  }

  /** Whether anything is loading changed. */
  get loadingChanged(): ISignal<this, boolean> {
    return this._loadingChanged;
  }

  /** Reload the agent list and everything shown for the current agent. */
  refresh(): Promise<void> {
    return this.track(this.load());
  }

  /** Count `work` as loading until it settles (sections wrap the loads people start). */
  async track<T>(work: Promise<T>): Promise<T> {
    if (this.loads++ === 0) {
      this._loadingChanged.emit(true);
    }
    try {
      return await work;
    } finally {
      if (--this.loads === 0) {
        this._loadingChanged.emit(false);
      }
    }
  }

  private async load(): Promise<void> {
    try {
      const listing = await this.client.listAgents();
      let agents = listing.agents;
      let status = '';
      const extra = this.extras.get(this.current);
      if (extra !== undefined) {
        if (!(await this.folderExists(this.current)) && !this.editing) {
          status = `The folder "${extra.path}" is gone (deleted or moved); nothing was recreated. Showing the default agent.`;
          this.extras.delete(this.current);
          this.current = '';
        }
      } else if (this.current && !agents.includes(this.current) && !this.editing) {
        // Removed behind our back: never re-create it, go back to the default agent.
        status = `Agent "${this.current}" no longer exists; showing the default agent.`;
        this.current = '';
      }
      if (!this.current) {
        this.current = listing.default_agent;
      }
      this.showAgent();
      if (!this.extras.has(this.current) && !agents.includes(this.current)) {
        // Every surface starts on the default agent; create it like the others do.
        await this.client.createAgent(this.current);
        agents = [...agents, this.current].sort();
      }
      this._agentsListed.emit({
        agents,
        extras: [...this.extras].map(([id, extra]) => ({ id, label: extra.label })),
        agent: this.current
      });
      this.setStatus(status);
    } catch (error) {
      this.setStatus(`Could not list agents: ${describe(error)}`, true);
      return;
    }
    await this.reload();
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
    this.extras.set(agent, { path: relative, label: `${relative} (folder)` });
    this.current = agent;
    await this.refresh();
    this.setStatus(`Showing the agent folder "${relative}".`);
    return true;
  }

  /**
   * Show the agent the notebook running in kernel `kernelId` uses. The server asks the kernel
   * itself (it takes no path from us): an agent outside both roots comes back as a handle.
   * With `quiet`, a notebook that has no agent to show changes nothing and says nothing.
   */
  async followKernel(kernelId: string, quiet = false): Promise<boolean> {
    let found: IHandoverResponse;
    try {
      found = await this.client.handover(kernelId);
    } catch (error) {
      if (!quiet) {
        this.setStatus(`Could not show the notebook's agent: ${describe(error)}`, true);
      }
      return false;
    }
    if (found.agent === this.current) {
      return true;
    }
    if (this.editing) {
      if (!quiet) {
        this.setStatus('Save or cancel the edit first.', true);
      }
      return false;
    }
    if (found.how !== 'agents-root') {
      const where = found.how === 'server-root' ? found.agent.slice(1) : found.path;
      const kind = found.how === 'server-root' ? 'folder' : "notebook's agent";
      this.extras.set(found.agent, { path: where, label: `${where} (${kind})` });
    }
    this.current = found.agent;
    await this.refresh();
    this.setStatus(`Showing the notebook's agent (${found.path}).`);
    return true;
  }

  /** Whether `id` can name a new agent, names one already, or is refused (the server's rule). */
  async checkAgentId(id: string): Promise<AgentIdCheck> {
    try {
      await this.client.getFacts(id, 1); // only whether it exists
      return { kind: 'exists' };
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        return { kind: 'new' };
      }
      if (error instanceof ApiError && error.status === 400) {
        return { kind: 'invalid', message: error.message };
      }
      throw error;
    }
  }

  /** Create agent `id` (from `template` when given) and show it. */
  async createAgent(id: string, template: string | null): Promise<void> {
    try {
      const created = await this.client.createAgent(id, template);
      this.current = created.id;
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

  /** The agents listing (the New… dialog offers its templates). */
  listAgents(): Promise<IAgentsResponse> {
    return this.client.listAgents();
  }

  // -- what the sections read and write, for the agent they name ----------------

  /** Read `file` (FACT.md comes with its rendering as `html`). */
  loadFile(file: MemoryFile, agent: string, bound?: ViewBound): Promise<ILoadedFile> {
    return file === 'facts'
      ? this.client.getFacts(agent, bound, true)
      : this.client.getPersona(agent, file, bound);
  }

  /** Compare-and-swap write of `file`; on success the sections that depend on it reload. */
  async saveFile(
    file: MemoryFile,
    agent: string,
    content: string,
    expected: string
  ): Promise<{ sha256: string }> {
    const saved =
      file === 'facts'
        ? await this.client.saveFacts(agent, content, expected)
        : await this.client.savePersona(agent, file, content, expected);
    return saved;
  }

  /** Tell the sections that depend on `file` that it was written. */
  notifySaved(file: MemoryFile): void {
    this._fileSaved.emit(file);
  }

  getHistory(agent: string): Promise<IHistoryResponse> {
    return this.client.getHistory(agent);
  }

  getVersion(agent: string, sha256: string): Promise<IVersionResponse> {
    return this.client.getVersion(agent, sha256);
  }

  searchJournal(agent: string, search: IJournalQuery): Promise<IJournalResponse> {
    return this.client.searchJournal(agent, search);
  }

  appendJournal(agent: string, text: string, tags: string[]): Promise<IJournalAppendedResponse> {
    return this.client.appendJournal(agent, text, tags);
  }

  getPrompt(agent: string, bound?: ViewBound): Promise<IPromptResponse> {
    return this.client.getPrompt(agent, bound);
  }

  listSessions(agent: string): Promise<ISessionsResponse> {
    return this.client.listSessions(agent);
  }

  getSession(agent: string, sessionId: string, bound?: ViewBound): Promise<ISessionResponse> {
    return this.client.getSession(agent, sessionId, bound);
  }

  why(agent: string, sessionId: string, text: string): Promise<ISessionWhyResponse> {
    return this.client.why(agent, sessionId, text);
  }

  /** Ask every section to load the current agent, and wait for all of them. */
  async reload(): Promise<void> {
    const request: IReload = { agent: this.current, work: [] };
    this._reloadRequested.emit(request);
    await Promise.all(request.work);
  }

  private async folderExists(agent: string): Promise<boolean> {
    try {
      await this.client.getFacts(agent, 1); // only whether it exists
      return true;
    } catch (error) {
      return !(error instanceof ApiError && error.status === 404);
    }
  }

  /**
   * When the agent to show is not the one on screen, every section clears what it shows for
   * the previous one first, so a load that fails can never leave another agent's memory on
   * screen (or its hashes behind for Save).
   */
  private showAgent(): void {
    if (this.current === this.shownAgent) {
      return;
    }
    this.shownAgent = this.current;
    this._agentShown.emit(this.current);
  }

  private readonly client: AgentMemoryClient;
  private readonly serverRoot: string;
  private readonly openPath: ((path: string) => void) | null;
  private current = '';
  /** Agents opened by folder ('@relative/path') or handed over by a notebook ('~handle'). */
  private readonly extras = new Map<string, { path: string; label: string }>();
  private readonly _agentShown = new Signal<this, string>(this);
  private readonly _reloadRequested = new Signal<this, IReload>(this);
  private readonly _agentsListed = new Signal<this, IAgentListing>(this);
  private readonly _statusChanged = new Signal<this, IStatus>(this);
  private readonly _editingChanged = new Signal<this, boolean>(this);
  private readonly _fileSaved = new Signal<this, MemoryFile>(this);
  private readonly _loadingChanged = new Signal<this, boolean>(this);
  private loads = 0;
  /** The agent whose memory is on screen (cleared before another one is shown). */
  private shownAgent = '';
  private readonly editors = new Set<object>();
  private readonly shown = new Map<MemoryFile, { path: string; sha256: string }>();
}
