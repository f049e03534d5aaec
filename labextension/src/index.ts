/**
 * JupyterLab plugin: the "Agent Memory" sidebar and its command palette entry.
 */

import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';

import { AgentMemoryClient } from './api';
import { AgentMemoryPanel } from './panel';

/** Command ids. */
export namespace CommandIDs {
  export const open = 'agent-memory:open';
}

/** A notebook page with a bookmark, drawn with the theme's icon colour. */
const agentMemoryIcon = new LabIcon({
  name: 'jupyter-agent-memory:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M6 2h12a2 2 0 0 1 2 2v16a2 2 0 0 1-2 2H6a2 2 0 0 1-2-2V4' +
    'a2 2 0 0 1 2-2zm0 2v16h12V4h-3v7l-2.5-1.5L10 11V4H6zm2 10h8v2H8v-2z"/></svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-agent-memory:plugin',
  description: 'Read and safely edit an agent\'s memory (FACT.md, journal, prompt) in a sidebar.',
  autoStart: true,
  requires: [ILabShell],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    shell: ILabShell,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const panel = new AgentMemoryPanel(new AgentMemoryClient());
    panel.title.icon = agentMemoryIcon;
    shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, 'jupyter-agent-memory');
    }

    app.commands.addCommand(CommandIDs.open, {
      label: 'Open Agent Memory',
      caption: 'Show the Agent Memory sidebar',
      icon: agentMemoryIcon,
      execute: () => {
        shell.activateById(panel.id);
      }
    });
    if (palette) {
      palette.addItem({ command: CommandIDs.open, category: 'Agent Memory' });
    }
  }
};

export default plugin;
