/**
 * JupyterLab plugin: the "Agent Memory" sidebar and its commands.
 *
 * Key bindings, the file browser's context menu item and the settings are declared in
 * `schema/plugin.json`, so users rebind and change them in JupyterLab's Settings Editor.
 *
 * Works in JupyterLab and in Notebook 7 (whose shell has a left area too): every token it uses
 * is optional, so an application without one of them loses that part, quietly.
 */

import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ISessionContext } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { AgentMemoryClient } from './api';
import { MemoryMarkdown } from './markdown';
import { AgentMemoryPanel } from './panel';

/** The plugin's id (also its settings' id). */
const PLUGIN_ID = 'jupyter-agent-memory:plugin';

/** Command ids. */
export namespace CommandIDs {
  export const open = 'agent-memory:open';
  export const openFolder = 'agent-memory:open-folder';
  export const openNotebookAgent = 'agent-memory:open-notebook-agent';
  export const save = 'agent-memory:save';
  export const escape = 'agent-memory:escape';
  export const append = 'agent-memory:append';
}

/** A notebook page with a bookmark, drawn with the theme's icon colour. */
const agentMemoryIcon = new LabIcon({
  name: 'jupyter-agent-memory:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M6 2h12a2 2 0 0 1 2 2v16a2 2 0 0 1-2 2H6a2 2 0 0 1-2-2V4' +
    'a2 2 0 0 1 2-2zm0 2v16h12V4h-3v7l-2.5-1.5L10 11V4H6zm2 10h8v2H8v-2z"/></svg>'
});

/** The session of the current notebook or console, if the current widget has one. */
function sessionOf(widget: Widget | null): ISessionContext | null {
  const context = (widget as unknown as { sessionContext?: ISessionContext } | null)
    ?.sessionContext;
  return context ?? null;
}

/** `%agent_memory` (or `%agent_memory?`) in code a kernel is about to run. */
const SELECTS_AGENT = /agent_memory/;

/**
 * Follows the agent of the current notebook: when a notebook becomes current, and after it
 * runs a cell that mentions `%agent_memory`, the sidebar asks the server to ask that kernel
 * (the `followNotebook` setting turns this off).
 */
class NotebookFollower {
  constructor(
    private readonly panel: AgentMemoryPanel,
    private readonly isOn: () => boolean
  ) {}

  /** The current widget changed. */
  currentChanged(widget: Widget | null): void {
    const session = sessionOf(widget);
    if (session === this.session) {
      return;
    }
    this.session?.iopubMessage.disconnect(this.onMessage, this);
    this.session = session;
    this.pending = false;
    session?.iopubMessage.connect(this.onMessage, this);
    void this.follow();
  }

  /** Follow the current notebook now, if the setting says so and the sidebar is visible. */
  async follow(): Promise<void> {
    const kernel = this.session?.session?.kernel;
    if (!kernel || !this.isOn() || !this.panel.isVisible) {
      return;
    }
    await this.panel.followKernel(kernel.id, true);
  }

  private onMessage(
    _: ISessionContext,
    message: { header: { msg_type: string }; content: unknown }
  ): void {
    const content = message.content as { code?: string; execution_state?: string };
    if (message.header.msg_type === 'execute_input' && SELECTS_AGENT.test(content.code ?? '')) {
      this.pending = true;
    } else if (
      message.header.msg_type === 'status' &&
      content.execution_state === 'idle' &&
      this.pending
    ) {
      this.pending = false;
      void this.follow();
    }
  }

  private session: ISessionContext | null = null;
  private pending = false;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "Read and safely edit an agent's memory (FACT.md, journal, prompt) in a sidebar.",
  autoStart: true,
  optional: [
    ILabShell,
    ICommandPalette,
    ILayoutRestorer,
    IRenderMimeRegistry,
    IDefaultFileBrowser,
    ISettingRegistry
  ],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    rendermime: IRenderMimeRegistry | null,
    fileBrowser: IDefaultFileBrowser | null,
    settingRegistry: ISettingRegistry | null
  ) => {
    const panel = new AgentMemoryPanel({
      client: new AgentMemoryClient(),
      markdown: rendermime ? new MemoryMarkdown(rendermime) : null,
      serverRoot: PageConfig.getOption('serverRoot'),
      openInEditor: path => void app.commands.execute('docmanager:open', { path })
    });
    panel.title.icon = agentMemoryIcon;
    // JupyterLab's shell, or Notebook 7's (which has a left area on its pages too).
    const shell = labShell ?? app.shell;
    try {
      shell.add(panel as Widget, 'left', { rank: 600 });
    } catch {
      return; // an application without a left area: nothing to add to, quietly
    }
    if (restorer) {
      restorer.add(panel, 'jupyter-agent-memory');
    }
    const show = () => {
      // The modal command palette hands the focus back to the main area's widget as soon as
      // a command it ran returns; activating one microtask later comes after that hand-back,
      // so the keyboard lands in the sidebar whichever way it was opened.
      void Promise.resolve().then(() => {
        shell.activateById(panel.id);
        // Notebook 7's side panel can show the widget without a show message: load it here.
        if (!panel.currentAgent) {
          void panel.refresh();
        }
      });
    };

    let followNotebook = true;
    const follower = new NotebookFollower(panel, () => followNotebook);
    const current = shell as unknown as {
      currentWidget: Widget | null;
      currentChanged?: { connect(slot: (sender: unknown, args: unknown) => void): void };
    };
    current.currentChanged?.connect(() => follower.currentChanged(current.currentWidget));
    follower.currentChanged(current.currentWidget);
    panel.shown.connect(() => void follower.follow());

    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () => {
            followNotebook = settings.get('followNotebook').composite !== false;
            const limit = Number(settings.get('journalLimit').composite);
            panel.setJournalLimit(Number.isInteger(limit) && limit > 0 ? limit : 20);
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('jupyter-agent-memory: settings not loaded', reason));
    }

    app.commands.addCommand(CommandIDs.open, {
      label: 'Open Agent Memory',
      caption: 'Show the Agent Memory sidebar',
      icon: agentMemoryIcon,
      execute: show
    });
    app.commands.addCommand(CommandIDs.openFolder, {
      label: 'Open as Agent Memory',
      caption: 'Show this folder as an agent in the Agent Memory sidebar',
      icon: agentMemoryIcon,
      isVisible: () => {
        const item = fileBrowser?.selectedItems().next();
        return !!item && !item.done && item.value.type === 'directory';
      },
      execute: async args => {
        let path = typeof args.path === 'string' ? args.path : '';
        if (!path && fileBrowser) {
          const item = fileBrowser.selectedItems().next();
          path = !item.done && item.value.type === 'directory' ? item.value.path : '';
        }
        show();
        if (path) {
          await panel.openFolder(path);
        }
      }
    });
    app.commands.addCommand(CommandIDs.openNotebookAgent, {
      label: "Show the Notebook's Agent Memory",
      caption: 'Show the agent %agent_memory selected in the current notebook',
      icon: agentMemoryIcon,
      execute: async () => {
        const kernel = sessionOf(current.currentWidget)?.session?.kernel;
        show();
        if (!kernel) {
          panel.showError('Open a notebook with a running kernel first.');
          return;
        }
        await panel.followKernel(kernel.id);
      }
    });
    app.commands.addCommand(CommandIDs.save, {
      label: 'Save the Agent Memory Edit',
      execute: () => void panel.focusedSection()?.save()
    });
    app.commands.addCommand(CommandIDs.escape, {
      label: 'Cancel the Agent Memory Edit',
      execute: () => panel.focusedSection()?.escape()
    });
    app.commands.addCommand(CommandIDs.append, {
      label: 'Append the Agent Memory Journal Entry',
      execute: () => panel.appendEntry()
    });

    if (palette) {
      palette.addItem({ command: CommandIDs.open, category: 'Agent Memory' });
      palette.addItem({ command: CommandIDs.openNotebookAgent, category: 'Agent Memory' });
    }
  }
};

export default plugin;
