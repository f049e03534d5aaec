/**
 * The Agent Memory sidebar: one Lumino widget per section over a shared model.
 *
 * Sections: agent picker (agents under the agents root, and folders opened by path), FACT.md
 * (rendered through JupyterLab's sanitising Markdown renderer, a compare-and-swap editor,
 * history with diff and restore), SOUL.md and USER.md, journal (search and append), prompt
 * preview (section sizes) and recorded sessions (exact prompt, diff of two, why a line is
 * there). Everything it shows comes from the REST API through the model; it holds no memory
 * rules of its own, and memory text reaches the page only as text or through that renderer.
 */

import { Message } from '@lumino/messaging';
import { ISignal, Signal } from '@lumino/signaling';
import { PanelLayout, Widget } from '@lumino/widgets';

import { AgentMemoryClient } from './api';
import { AgentPicker } from './agentPicker';
import { FactsSection } from './factsSection';
import { FileSection } from './fileEditor';
import { JournalSection } from './journalSection';
import { MemoryMarkdown } from './markdown';
import { AgentMemoryModel } from './model';
import { PersonaSection } from './personaSection';
import { PromptSection } from './promptSection';
import { SessionsSection } from './sessionsSection';

export { EMPTY, highlighted, MAX_SHOWN_CHARS, MAX_SHOWN_TEXT, relativeTime, shortSha } from './dom';

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

/** The sidebar widget: the sections, in order, over one model. */
export class AgentMemoryPanel extends Widget {
  constructor(options: IPanelOptions | AgentMemoryClient = {}) {
    super();
    const opts: IPanelOptions =
      options instanceof AgentMemoryClient ? { client: options } : options;
    this.model = new AgentMemoryModel(opts);
    this.id = 'jp-agent-memory';
    this.addClass('jp-AgentMemory');
    this.title.caption = 'Agent Memory';
    this.facts = new FactsSection(this.model, opts.markdown ?? null);
    this.persona = new PersonaSection(this.model);
    this.picker = new AgentPicker(this.model);
    this.journal = new JournalSection(this.model);
    const layout = new PanelLayout();
    for (const part of [
      this.picker,
      this.facts,
      this.persona,
      this.journal,
      new PromptSection(this.model),
      new SessionsSection(this.model)
    ]) {
      layout.addWidget(part);
    }
    this.layout = layout;
    // Busy while loading: assistive technology (and tests) wait for the settled state.
    this.node.setAttribute('aria-busy', 'false');
    this.model.loadingChanged.connect((_, loading) => {
      this.node.setAttribute('aria-busy', loading ? 'true' : 'false');
    });
  }

  /** The model the sections share. */
  readonly model: AgentMemoryModel;

  /** The agent currently shown ('' until the agent list has loaded). */
  get currentAgent(): string {
    return this.model.agent;
  }

  /** The FACT.md, SOUL.md and USER.md editors (for the application's key bindings). */
  get fileSections(): FileSection[] {
    return [this.facts.editor, ...this.persona.editors];
  }

  /** The file section whose editor holds the keyboard focus, if any. */
  focusedSection(): FileSection | null {
    return this.fileSections.find(part => part.editor === document.activeElement) ?? null;
  }

  /** Reload the agent list and everything shown for the current agent. */
  refresh(): Promise<void> {
    return this.model.refresh();
  }

  /**
   * Show the agent in `folder` (a path relative to the server's root). Nothing is created: a
   * folder that does not exist is reported.
   */
  openFolder(folder: string): Promise<boolean> {
    return this.model.openFolder(folder);
  }

  /**
   * Show the agent of the notebook running in kernel `kernelId` (the server asks the kernel;
   * see `AgentMemoryModel.followKernel`).
   */
  followKernel(kernelId: string, quiet = false): Promise<boolean> {
    return this.model.followKernel(kernelId, quiet);
  }

  /** Say on the status line why the notebook's agent cannot be shown. */
  showError(message: string): void {
    this.model.setStatus(message, true);
  }

  /** The journal's default number of entries shown (the `journalLimit` setting). */
  setJournalLimit(limit: number): void {
    this.journal.setDefaultLimit(limit);
  }

  /** Append the journal entry in the form (the append shortcut). */
  appendEntry(): Promise<void> {
    return this.model.track(this.journal.appendEntry());
  }

  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    // Opened from the command palette, a shortcut or the tab: the keyboard comes along.
    if (!this.node.contains(document.activeElement)) {
      this.picker.focus();
    }
  }

  /** The sidebar was shown (its tab opened, or the left area expanded). */
  get shown(): ISignal<this, void> {
    return this._shown;
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    // Memory changes behind our back (agents, magics, the CLI): show the current state.
    void this.refresh();
    this._shown.emit();
  }

  private readonly facts: FactsSection;
  private readonly persona: PersonaSection;
  private readonly picker: AgentPicker;
  private readonly _shown = new Signal<this, void>(this);
  private readonly journal: JournalSection;
}
