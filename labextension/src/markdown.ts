/**
 * FACT.md rendered through JupyterLab's own Markdown renderer, as untrusted content.
 *
 * FACT.md is written by a language model that can be prompt-injected, so three layers stand
 * between it and the page, as in the engine's own rendering:
 *
 * 1. Raw HTML in the source is shown as text (its `<` is written as `&lt;` outside code), and
 *    an image becomes a link, so merely looking at memory fetches nothing.
 * 2. The model is rendered untrusted, so JupyterLab's sanitiser cleans the produced HTML,
 *    here with an allowlist narrowed to what Markdown itself produces (no images, no forms,
 *    no styles).
 * 3. No math typesetting: a registry of our own without a LaTeX typesetter, so text between
 *    dollar signs reads as written and no TeX macro runs.
 */

import { IRenderMimeRegistry, MimeModel, RenderMimeRegistry, markdownRendererFactory } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

/** What Markdown produces, and nothing else. */
const MARKDOWN_TAGS = [
  'a', 'blockquote', 'br', 'code', 'del', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr',
  'li', 'ol', 'p', 'pre', 's', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'
];
const MARKDOWN_ATTRIBUTES: { [tag: string]: string[] } = {
  a: ['href', 'title'],
  ol: ['start'],
  td: ['align'],
  th: ['align'],
  h1: ['id'],
  h2: ['id'],
  h3: ['id'],
  h4: ['id'],
  h5: ['id'],
  h6: ['id']
};

/** JupyterLab's sanitiser, with its allowlist narrowed to Markdown's own output. */
export class MarkdownOnlySanitizer implements IRenderMime.ISanitizer {
  constructor(private readonly base: IRenderMime.ISanitizer) {}

  sanitize(dirty: string, options?: IRenderMime.ISanitizerOptions): string {
    const narrowed = {
      ...(options ?? {}),
      allowedTags: MARKDOWN_TAGS,
      allowedAttributes: MARKDOWN_ATTRIBUTES,
      allowedStyles: {},
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

/** A fenced code block's opening line: three or more backticks or tildes. */
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/**
 * `source` with raw HTML made visible as text and images turned into links, code untouched.
 *
 * Outside fenced blocks and inline code spans, `<` becomes `&lt;` (CommonMark shows it as
 * `<`, never as a tag) and `![` becomes `\![` (a literal "!" before an ordinary link).
 */
export function inertMarkdown(source: string): string {
  const out: string[] = [];
  let fence: string | null = null;
  for (const line of source.split('\n')) {
    const opening = FENCE.exec(line);
    if (fence !== null) {
      out.push(line);
      if (opening && opening[1][0] === fence[0] && opening[1].length >= fence.length) {
        fence = null;
      }
      continue;
    }
    if (opening) {
      fence = opening[1];
      out.push(line);
      continue;
    }
    out.push(inertLine(line));
  }
  return out.join('\n');
}

/** One line outside fenced code: inline code spans (matching backtick runs) kept as they are. */
function inertLine(line: string): string {
  let result = '';
  let i = 0;
  while (i < line.length) {
    if (line[i] === '`') {
      let run = 1;
      while (line[i + run] === '`') {
        run++;
      }
      const ticks = '`'.repeat(run);
      const close = line.indexOf(ticks, i + run);
      if (close !== -1) {
        result += line.slice(i, close + run);
        i = close + run;
        continue;
      }
      result += ticks;
      i += run;
      continue;
    }
    if (line[i] === '<') {
      result += '&lt;';
    } else if (line[i] === '!' && line[i + 1] === '[') {
      result += '\\!';
    } else {
      result += line[i];
    }
    i++;
  }
  return result;
}

/** Renders memory Markdown safely with the application's renderer settings. */
export class MemoryMarkdown {
  constructor(app: IRenderMimeRegistry) {
    this.registry = new RenderMimeRegistry({
      initialFactories: [markdownRendererFactory],
      sanitizer: new MarkdownOnlySanitizer(app.sanitizer),
      markdownParser: app.markdownParser ?? undefined
      // No latexTypesetter (see the module comment) and no link handler: links open as links.
    });
  }

  /** A new element holding `source` rendered; never trusted. */
  async render(source: string): Promise<HTMLElement> {
    const renderer = this.registry.createRenderer('text/markdown');
    const model = new MimeModel({ data: { 'text/markdown': inertMarkdown(source) }, trusted: false });
    await renderer.renderModel(model);
    renderer.addClass('jp-AgentMemory-rendered');
    return renderer.node;
  }

  private readonly registry: RenderMimeRegistry;
}
