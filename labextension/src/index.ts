/**
 * JupyterLab plugin: the "Agent Memory" sidebar, its commands and key bindings.
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
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { AgentMemoryClient } from './api';
import { MemoryMarkdown } from './markdown';
import { AgentMemoryPanel } from './panel';

/** Command ids. */
export namespace CommandIDs {
  export const open = 'agent-memory:open';
  export const openFolder = 'agent-memory:open-folder';
  export const openNotebookAgent = 'agent-memory:open-notebook-agent';
  export const save = 'agent-memory:save';
  export const escape = 'agent-memory:escape';
}

/** Where the sidebar's editors are, for key bindings that act only there. */
const EDITOR_SELECTOR = '.jp-AgentMemory .jp-AgentMemory-editor';

/** A notebook page with a bookmark, drawn with the theme's icon colour. */
const agentMemoryIcon = new LabIcon({
  name: 'jupyter-agent-memory:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M6 2h12a2 2 0 0 1 2 2v16a2 2 0 0 1-2 2H6a2 2 0 0 1-2-2V4' +
    'a2 2 0 0 1 2-2zm0 2v16h12V4h-3v7l-2.5-1.5L10 11V4H6zm2 10h8v2H8v-2z"/></svg>'
});

/** What the kernel's `active_agent_location` reports. */
interface IKernelAgent {
  loaded: boolean;
  path?: string;
  agent_id?: string | null;
  exists?: boolean;
  error?: string;
}

/** The kernel of the current notebook or console, if the current widget has one. */
interface IKernelLike {
  requestExecute(content: {
    code: string;
    silent: boolean;
    store_history: boolean;
    user_expressions: Record<string, string>;
  }): { done: Promise<{ content: Record<string, unknown> }> };
}

function currentKernel(app: JupyterFrontEnd): IKernelLike | null {
  const widget = app.shell.currentWidget as unknown as {
    sessionContext?: { session?: { kernel?: IKernelLike | null } | null };
  } | null;
  return widget?.sessionContext?.session?.kernel ?? null;
}

/** Ask a kernel where its active agent is (silently: no history, no output). */
async function kernelAgent(kernel: IKernelLike): Promise<IKernelAgent> {
  const expression =
    "__import__('jupyter_agent_memory.notebook.magics', fromlist=['active_agent_location'])" +
    '.active_agent_location(get_ipython())';
  const reply = await kernel.requestExecute({
    code: '',
    silent: true,
    store_history: false,
    user_expressions: { agent: expression }
  }).done;
  const result = (reply.content.user_expressions as Record<string, any> | undefined)?.agent;
  if (!result || result.status !== 'ok') {
    const reason = result?.evalue ?? 'the kernel did not answer';
    throw new Error(`The kernel could not tell (${reason}); is jupyter-agent-memory installed there?`);
  }
  return JSON.parse(result.data['text/plain']) as IKernelAgent;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-agent-memory:plugin',
  description: 'Read and safely edit an agent\'s memory (FACT.md, journal, prompt) in a sidebar.',
  autoStart: true,
  optional: [ILabShell, ICommandPalette, ILayoutRestorer, IRenderMimeRegistry, IDefaultFileBrowser],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    rendermime: IRenderMimeRegistry | null,
    fileBrowser: IDefaultFileBrowser | null
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
    const show = () => shell.activateById(panel.id);

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
        show();
        const kernel = currentKernel(app);
        if (!kernel) {
          await panel.openLocationError('Open a notebook with a running kernel first.');
          return;
        }
        try {
          const where = await kernelAgent(kernel);
          if (!where.loaded) {
            await panel.openLocationError(
              'The notebook has not loaded the extension (%load_ext jupyter_agent_memory).'
            );
          } else if (where.error || !where.path) {
            await panel.openLocationError(where.error ?? 'The notebook has no active agent.');
          } else {
            await panel.openLocation(where.path, where.agent_id ?? null);
          }
        } catch (error) {
          await panel.openLocationError(error instanceof Error ? error.message : String(error));
        }
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
    // Within the sidebar's editors these win over the document's own Ctrl+S.
    app.commands.addKeyBinding({ command: CommandIDs.save, keys: ['Accel S'], selector: EDITOR_SELECTOR });
    app.commands.addKeyBinding({ command: CommandIDs.escape, keys: ['Escape'], selector: EDITOR_SELECTOR });

    app.contextMenu.addItem({
      command: CommandIDs.openFolder,
      selector: '.jp-DirListing-item[data-isdir="true"]',
      rank: 60
    });
    if (palette) {
      palette.addItem({ command: CommandIDs.open, category: 'Agent Memory' });
      palette.addItem({ command: CommandIDs.openNotebookAgent, category: 'Agent Memory' });
    }
  }
};

export default plugin;
