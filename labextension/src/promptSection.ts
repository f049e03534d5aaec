/** The prompt preview: size, budget, sections and warnings, and the prompt text itself. */

import { Message } from '@lumino/messaging';

import { IPromptResponse } from './api';
import { cutText, describe, el, scrollable } from './dom';
import { AgentMemoryModel } from './model';
import { MemorySection } from './section';

/** One row per prompt section: its name (the source file as a tooltip), chars and tokens. */
export function sectionRows(
  sections: { name: string; source: string | null; chars: number; tokens: number }[]
): HTMLTableRowElement[] {
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

/** The prompt the current agent's memory builds, shown again after every save. */
export class PromptSection extends MemorySection {
  constructor(model: AgentMemoryModel) {
    super(model, 'Prompt preview', 'jp-AgentMemory-prompt');
    this.promptSummary = el('div', 'jp-AgentMemory-promptSummary');
    this.promptSections = el('table', 'jp-AgentMemory-promptSections');
    this.promptWarnings = el('ul', 'jp-AgentMemory-promptWarnings');
    this.promptText = el('div', 'jp-AgentMemory-promptBox');
    this.body.append(this.promptSummary, this.promptSections, this.promptWarnings, this.promptText);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.model.fileSaved.connect(this.onSaved);
  }

  protected onBeforeDetach(msg: Message): void {
    this.model.fileSaved.disconnect(this.onSaved);
    super.onBeforeDetach(msg);
  }

  protected clear(): void {
    this.promptSummary.textContent = '';
    this.promptSummary.classList.remove('jp-mod-error');
    this.promptSections.replaceChildren();
    this.promptWarnings.replaceChildren();
    this.promptText.replaceChildren();
  }

  protected reload(): Promise<void> {
    return this.loadPrompt();
  }

  private readonly onSaved = (): void => {
    void this.loadPrompt();
  };

  private async loadPrompt(): Promise<void> {
    const agent = this.model.agent;
    try {
      const prompt = await this.model.getPrompt(agent);
      if (agent === this.model.agent) {
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
    this.promptSections.replaceChildren(...sectionRows(prompt.sections));
    this.promptWarnings.replaceChildren(
      ...prompt.warnings.map(text => el('li', 'jp-mod-error', text))
    );
    const agent = prompt.agent;
    this.promptText.replaceChildren(
      scrollable(
        cutText(
          'pre',
          'jp-AgentMemory-promptText',
          prompt,
          async () => (await this.model.getPrompt(agent, 'all')).text
        ),
        'Prompt text'
      )
    );
  }

  private readonly promptSummary: HTMLDivElement;
  private readonly promptSections: HTMLTableElement;
  private readonly promptWarnings: HTMLUListElement;
  private readonly promptText: HTMLDivElement;
}
