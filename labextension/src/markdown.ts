/**
 * FACT.md as the server renders it, inserted through JupyterLab's sanitiser.
 *
 * The sidebar has no Markdown rules of its own: the server renders FACT.md with the renderer
 * `%fact` and the panel use (`jupyter_agent_memory/render.py`), so every view follows one rule
 * (nothing runs or loads, every line the model receives is visible). Two layers still stand
 * between that HTML and the page here:
 *
 * 1. It is rendered as an untrusted `text/html` model, so JupyterLab's sanitiser cleans it,
 *    with its allowlist narrowed to what the server's renderer produces (no images, no forms,
 *    no styles but table alignment).
 * 2. No math typesetting: a registry of our own without a LaTeX typesetter, so text between
 *    dollar signs reads as written and no TeX macro runs.
 */

import {
  htmlRendererFactory,
  IRenderMimeRegistry,
  MimeModel,
  RenderMimeRegistry
} from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

/** What the server's renderer produces, and nothing else. */
const MARKDOWN_TAGS = [
  'a',
  'blockquote',
  'br',
  'code',
  'del',
  'em',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'hr',
  'li',
  'ol',
  'p',
  'pre',
  's',
  'strong',
  'table',
  'tbody',
  'td',
  'th',
  'thead',
  'tr',
  'ul'
];
const MARKDOWN_ATTRIBUTES: { [tag: string]: string[] } = {
  a: ['href', 'title'],
  ol: ['start'],
  li: ['value'],
  td: ['style'],
  th: ['style']
};
const ALIGNMENT = { 'text-align': [/^(left|right|center)$/] };

/** JupyterLab's sanitiser, with its allowlist narrowed to the server renderer's output. */
export class MarkdownOnlySanitizer implements IRenderMime.ISanitizer {
  constructor(private readonly base: IRenderMime.ISanitizer) {}

  sanitize(dirty: string, options?: IRenderMime.ISanitizerOptions): string {
    const narrowed = {
      ...(options ?? {}),
      allowedTags: MARKDOWN_TAGS,
      allowedAttributes: MARKDOWN_ATTRIBUTES,
      allowedStyles: { td: ALIGNMENT, th: ALIGNMENT },
      allowedSchemes: ['http', 'https', 'mailto']
    } as IRenderMime.ISanitizerOptions;
    return this.base.sanitize(dirty, narrowed);
  }

  getAutolink(): boolean {
    return false;
  }

  readonly allowNamedProperties = false;
  readonly allowCommandLinker = false;
}

/** Shows server-rendered memory Markdown safely with the application's sanitiser. */
export class MemoryMarkdown {
  constructor(app: IRenderMimeRegistry) {
    this.registry = new RenderMimeRegistry({
      initialFactories: [htmlRendererFactory],
      sanitizer: new MarkdownOnlySanitizer(app.sanitizer)
      // No latexTypesetter (see the module comment) and no link handler: links open as links.
    });
  }

  /** A new element holding the server's `html`; never trusted. */
  async render(html: string): Promise<HTMLElement> {
    const renderer = this.registry.createRenderer('text/html');
    const model = new MimeModel({
      data: { 'text/html': html },
      trusted: false
    });
    await renderer.renderModel(model);
    renderer.addClass('jp-AgentMemory-rendered');
    return renderer.node;
  }

  private readonly registry: RenderMimeRegistry;
}
