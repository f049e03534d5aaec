/**
 * The base of the sidebar's collapsible sections: a Lumino widget whose node is the section's
 * `<details>` element, subscribed to the shared model for as long as it exists.
 */

import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { section } from './dom';
import { AgentMemoryModel, IReload } from './model';

/** One section of the sidebar over the shared model. */
export abstract class MemorySection extends Widget {
  constructor(model: AgentMemoryModel, title: string, className: string, open = true) {
    const parts = section(title, className, open);
    super({ node: parts.root });
    this.model = model;
    this.details = parts.root;
    this.body = parts.body;
    // From the start, not from attachment: a load the shell starts before it attaches the
    // sidebar (Notebook 7 can) must still fill the sections.
    model.agentShown.connect(this.onAgentShown);
    model.reloadRequested.connect(this.onReload);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.reloadRequested.disconnect(this.onReload);
    this.model.agentShown.disconnect(this.onAgentShown);
    super.dispose();
  }

  /** Whether the section is expanded. */
  get isOpen(): boolean {
    return this.details.open;
  }

  /** Handle the DOM events the section listens to while attached. */
  handleEvent(event: Event): void {
    if (event.type === 'toggle' && event.target === this.details && this.details.open) {
      void this.opened();
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.details.addEventListener('toggle', this);
  }

  protected onBeforeDetach(msg: Message): void {
    this.details.removeEventListener('toggle', this);
    super.onBeforeDetach(msg);
  }

  /** Forget everything shown for the previous agent. */
  protected abstract clear(): void;

  /** Load what the section shows for the current agent, or null when it loads nothing now. */
  protected abstract reload(): Promise<void> | null;

  /** The section was expanded (by default nothing loads). */
  protected opened(): Promise<void> {
    return Promise.resolve();
  }

  protected readonly model: AgentMemoryModel;
  protected readonly details: HTMLDetailsElement;
  protected readonly body: HTMLDivElement;

  private readonly onAgentShown = (): void => this.clear();

  private readonly onReload = (_: AgentMemoryModel, request: IReload): void => {
    const work = this.reload();
    if (work !== null) {
      request.work.push(work);
    }
  };
}
