/**
 * The sidebar's header: the agent picker (agents under the agents root, and folders opened
 * by path), New…, Open folder…, Refresh, and the status line under them.
 */

import { InputDialog } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { button, describe, el } from './dom';
import { AgentMemoryModel, IAgentListing, IStatus } from './model';

/** The agent picker and the status line. */
export class AgentPicker extends Widget {
  constructor(model: AgentMemoryModel) {
    super();
    this.model = model;
    // Laid out as if the header and the status line were the sidebar's own children.
    this.addClass('jp-AgentMemory-agentBar');
    const header = el('div', 'jp-AgentMemory-header');
    header.appendChild(el('span', 'jp-AgentMemory-heading', 'Agent Memory'));
    const pickerLabel = el('label', 'jp-AgentMemory-pickerLabel', 'Agent ');
    this.picker = el('select', 'jp-mod-styled jp-AgentMemory-agentPicker');
    pickerLabel.appendChild(this.picker);
    header.appendChild(pickerLabel);
    header.append(
      button('New…', 'jp-AgentMemory-newAgent', () => void this.newAgent()),
      button('Open folder…', 'jp-AgentMemory-openFolder', () => void this.askFolder()),
      button('Refresh', 'jp-AgentMemory-refresh', () => void this.model.refresh())
    );
    this.status = el('div', 'jp-AgentMemory-status');
    // Status changes are announced to screen readers without moving the focus.
    this.status.setAttribute('role', 'status');
    this.node.append(header, this.status);
    // From the start, not from attachment: a listing sent before the shell attaches the
    // sidebar (Notebook 7 can) must still fill the picker.
    this.model.agentsListed.connect(this.onAgentsListed);
    this.model.statusChanged.connect(this.onStatus);
    this.model.editingChanged.connect(this.onEditing);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.editingChanged.disconnect(this.onEditing);
    this.model.statusChanged.disconnect(this.onStatus);
    this.model.agentsListed.disconnect(this.onAgentsListed);
    super.dispose();
  }

  /** Give the keyboard focus to the agent picker. */
  focus(): void {
    this.picker.focus();
  }

  /** A new agent was picked. */
  handleEvent(event: Event): void {
    if (event.type === 'change') {
      void this.model.select(this.picker.value);
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.picker.addEventListener('change', this);
  }

  protected onBeforeDetach(msg: Message): void {
    this.picker.removeEventListener('change', this);
    super.onBeforeDetach(msg);
  }

  private readonly onAgentsListed = (_: AgentMemoryModel, listing: IAgentListing): void => {
    const options = listing.agents.map(id => {
      const option = el('option', '', id);
      option.value = id;
      return option;
    });
    for (const extra of listing.extras) {
      const option = el('option', 'jp-AgentMemory-folderOption', extra.label);
      option.value = extra.id;
      options.push(option);
    }
    this.picker.replaceChildren(...options);
    this.picker.value = listing.agent;
  };

  private readonly onStatus = (_: AgentMemoryModel, status: IStatus): void => {
    this.status.textContent = status.text;
    this.status.classList.toggle('jp-mod-error', status.isError);
  };

  /** No switching agents while a file is being edited. */
  private readonly onEditing = (_: AgentMemoryModel, editing: boolean): void => {
    this.picker.disabled = editing;
  };

  private async askFolder(): Promise<void> {
    const named = await InputDialog.getText({
      title: 'Open an agent folder',
      label: "Folder path relative to the server's root (for example demo-agent)",
      placeholder: 'demo-agent'
    });
    if (named.button.accept && named.value) {
      await this.model.openFolder(named.value);
    }
  }

  /**
   * Ask for an id; check it with the server before anything else (a refused id is said at
   * once, an existing agent is shown); then ask for a template when there are any, create
   * the agent and show it.
   */
  private async newAgent(): Promise<void> {
    const named = await InputDialog.getText({
      title: 'New agent',
      label: 'Agent id (a folder name under the agents root)',
      placeholder: 'my-agent'
    });
    if (!named.button.accept || !named.value) {
      return;
    }
    let check;
    try {
      check = await this.model.checkAgentId(named.value);
    } catch (error) {
      this.model.setStatus(`Could not check the agent id: ${describe(error)}`, true);
      return;
    }
    if (check.kind === 'invalid') {
      this.model.setStatus(`Not created: ${check.message}`, true);
      this.picker.focus();
      return;
    }
    if (check.kind === 'exists') {
      await this.model.createAgent(named.value, null); // idempotent: shows it
      return;
    }
    let template: string | null = null;
    const listing = await this.model.listAgents().catch(() => null);
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
    await this.model.createAgent(named.value, template);
  }

  private readonly model: AgentMemoryModel;
  private readonly picker: HTMLSelectElement;
  private readonly status: HTMLDivElement;
}
