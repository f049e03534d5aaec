/** The SOUL.md and USER.md section: one text view and editor per persona file. */

import { PersonaName } from './api';
import { el } from './dom';
import { FileSection } from './fileEditor';
import { AgentMemoryModel, FILE_LABELS } from './model';
import { MemorySection } from './section';

/** SOUL.md and USER.md, loaded when the section is expanded. */
export class PersonaSection extends MemorySection {
  constructor(model: AgentMemoryModel) {
    super(model, 'SOUL.md and USER.md', 'jp-AgentMemory-persona', false);
    this.parts = (['soul', 'user'] as PersonaName[]).map(name => {
      const part = new FileSection(
        model,
        name,
        null,
        action => `jp-AgentMemory-${name}${action[0].toUpperCase()}${action.slice(1)}`
      );
      this.body.append(el('div', 'jp-AgentMemory-fileTitle', FILE_LABELS[name]), ...part.body);
      return part;
    });
  }

  /** The SOUL.md and USER.md editors (for the application's key bindings). */
  get editors(): FileSection[] {
    return this.parts;
  }

  protected clear(): void {
    for (const part of this.parts) {
      part.clear();
    }
  }

  protected reload(): Promise<void> | null {
    return this.isOpen ? this.opened() : null;
  }

  protected async opened(): Promise<void> {
    await Promise.all(this.parts.map(part => part.load()));
  }

  private readonly parts: FileSection[];
}
