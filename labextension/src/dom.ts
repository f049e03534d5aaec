/**
 * DOM helpers every sidebar section shares: elements made with text set as text (never as
 * HTML), buttons, collapsible sections, cut long texts, highlighted matches, diffs and the
 * engine's empty-state texts.
 */

import { IDiffLine } from './diff';

/** Create an element with a class name and optional text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A button with the JupyterLab look. */
export function button(label: string, className: string, onClick: () => void): HTMLButtonElement {
  const node = el('button', `jp-Button jp-mod-styled ${className}`, label);
  node.type = 'button';
  node.addEventListener('click', onClick);
  return node;
}

/** A collapsible section with a title. */
export function section(
  title: string,
  className: string,
  open = true
): { root: HTMLDetailsElement; body: HTMLDivElement } {
  const root = el('details', `jp-AgentMemory-section ${className}`);
  root.open = open;
  root.appendChild(el('summary', 'jp-AgentMemory-sectionTitle', title));
  const body = el('div', 'jp-AgentMemory-sectionBody');
  root.appendChild(body);
  return { root, body };
}

/** Describe an error for the status line. */
export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The form of a sha256 shown to people. */
export function shortSha(sha: string): string {
  return sha.slice(0, 12);
}

/** How long ago an ISO-8601 time was ("just now", "5 min ago", "3 days ago"). */
export function relativeTime(ts: unknown, now: number = Date.now()): string {
  if (typeof ts !== 'string') {
    return '';
  }
  const when = Date.parse(ts);
  if (Number.isNaN(when)) {
    return '';
  }
  let seconds = (now - when) / 1000;
  const future = seconds < 0;
  seconds = Math.abs(seconds);
  const units: [number, string][] = [
    [86400 * 365, 'year'],
    [86400 * 30, 'month'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'min']
  ];
  for (const [size, unit] of units) {
    if (seconds >= size) {
      const n = Math.floor(seconds / size);
      const label = unit === 'min' || n === 1 ? unit : `${unit}s`;
      return future ? `in ${n} ${label}` : `${n} ${label} ago`;
    }
  }
  return 'just now';
}

/**
 * An ISO-8601 time as people read it, in local time to the minute ("2026-11-30 10:00"); ''
 * when `ts` is not a time.
 */
export function shortTime(ts: unknown): string {
  if (typeof ts !== 'string') {
    return '';
  }
  const when = Date.parse(ts);
  if (Number.isNaN(when)) {
    return '';
  }
  const d = new Date(when);
  const two = (n: number) => `${n}`.padStart(2, '0');
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}`
  );
}

/**
 * A time element: the stored time to the minute (the exact stored value in its tooltip and
 * `datetime`), and how long ago it was. A value that is no time is shown as it is.
 */
export function timeLabel(ts: unknown, className: string): HTMLElement {
  const node = el('time', className);
  const text = asText(ts);
  const short = shortTime(ts);
  node.title = text;
  if (short) {
    node.dateTime = text;
    node.textContent = short;
  } else {
    node.textContent = text.length > MAX_SHOWN_CHARS ? text.slice(0, MAX_SHOWN_CHARS) + '…' : text;
  }
  const ago = relativeTime(ts);
  if (ago) {
    node.appendChild(el('span', 'jp-AgentMemory-ago', ` · ${ago}`));
  }
  return node;
}

/**
 * A file path as text that wraps after a path separator rather than inside a name: a
 * `<wbr>` (an element made here, never parsed from the path) follows each '/' or '\\'.
 */
export function pathText(node: HTMLElement, path: string): void {
  const parts: (Node | string)[] = [];
  for (const piece of path.split(/(?<=[\\/])/)) {
    parts.push(piece, document.createElement('wbr'));
  }
  node.replaceChildren(...parts);
}

/**
 * Make a box that may scroll reachable by keyboard: focusable, with a role and a name, so
 * keyboard users can scroll it with the arrow keys and screen readers can tell what it is.
 */
export function scrollable<T extends HTMLElement>(node: T, label: string): T {
  node.tabIndex = 0;
  node.setAttribute('role', 'region');
  node.setAttribute('aria-label', label);
  return node;
}

/**
 * Longest part of one journal value shown before a "Show all" button: a single huge entry
 * must not make the sidebar lay out megabytes of text on every search.
 */
export const MAX_SHOWN_CHARS = 2000;

/** Longest part of a prompt or file shown as text before "Show all". */
export const MAX_SHOWN_TEXT = 20000;

/** Keys every entry written by this package has; others are shown as extra fields. */
export const ENTRY_KEYS = ['ts', 'tags', 'text'];

/** The engine's empty-state texts, so every surface says the same. */
export const EMPTY = {
  facts: 'FACT.md is empty.',
  history: 'No earlier FACT.md versions yet.',
  journal: 'No matching journal entries found.',
  emptyJournal: 'The journal is empty: nothing has been appended yet.',
  sessions:
    'No sessions on record yet: one is recorded when a client really starts a session ' +
    '(an MCP client connecting, the evaluation runner, or PromptBuilder.start_session); ' +
    'previews such as %memprompt never record.'
};

/** Any JSON value as text: strings as they are, anything else as compact JSON. */
export function asText(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (value === undefined) {
    return '';
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** True for a JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * An element showing `text` as text (never as HTML), cut at `limit` with a button that shows
 * all of it in a read-only text box. A text box, because laying out a megabyte of wrapped
 * inline text in the sidebar's flex layout takes Chromium minutes.
 */
export function longText(
  tag: 'div' | 'span' | 'pre',
  className: string,
  text: string,
  limit = MAX_SHOWN_CHARS,
  query = ''
): HTMLElement {
  const node = el(tag, className);
  if (text.length <= limit) {
    node.append(...highlighted(text, query));
    return node;
  }
  const shown = el('span', '');
  shown.append(...highlighted(text.slice(0, limit), query), '…');
  const more = button(
    `Show all (${text.length.toLocaleString('en-US')} characters)`,
    'jp-AgentMemory-showAll',
    () => {
      const all = el('textarea', 'jp-mod-styled jp-AgentMemory-fullText');
      all.setAttribute('aria-label', 'The whole text');
      all.readOnly = true;
      all.rows = 8;
      all.value = text;
      node.replaceChildren(all);
    }
  );
  node.append(shown, more);
  return node;
}

/**
 * A long text the server may have cut (`truncated`): the first `MAX_SHOWN_TEXT` characters,
 * and a Show all that shows the whole of it, fetched with `fetchAll` only when the server's
 * view was cut (the whole text is never sent unless the reader asks for it).
 */
export function cutText(
  tag: 'div' | 'pre',
  className: string,
  view: { text: string; chars: number; truncated: boolean },
  fetchAll: () => Promise<string>
): HTMLElement {
  if (!view.truncated) {
    return longText(tag, className, view.text, MAX_SHOWN_TEXT);
  }
  const node = el(tag, className);
  const more = button(
    `Show all (${view.chars.toLocaleString('en-US')} characters)`,
    'jp-AgentMemory-showAll',
    async () => {
      more.disabled = true;
      try {
        const all = el('textarea', 'jp-mod-styled jp-AgentMemory-fullText');
        all.setAttribute('aria-label', 'The whole text');
        all.readOnly = true;
        all.rows = 8;
        all.value = await fetchAll();
        node.replaceChildren(all);
      } catch (error) {
        more.disabled = false;
        node.appendChild(
          el('div', 'jp-AgentMemory-note jp-mod-error', `Could not load it all: ${describe(error)}`)
        );
      }
    }
  );
  node.append(view.text.slice(0, MAX_SHOWN_TEXT), '…', more);
  return node;
}

/**
 * `text` as text nodes, with each case-insensitive occurrence of `query` in a `<mark>`
 * (elements made here, text set as text: nothing in `text` or `query` is parsed).
 */
export function highlighted(text: string, query: string): (Node | string)[] {
  if (!query) {
    return [text];
  }
  const haystack = text.toLowerCase();
  const needle = query.toLowerCase();
  // Lower-casing can change lengths outside ASCII; then positions would not line up.
  if (haystack.length !== text.length || needle.length !== query.length) {
    return [text];
  }
  const parts: (Node | string)[] = [];
  let start = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, start)) {
    if (at > start) {
      parts.push(text.slice(start, at));
    }
    parts.push(el('mark', 'jp-AgentMemory-match', text.slice(at, at + needle.length)));
    start = at + needle.length;
  }
  parts.push(text.slice(start));
  return parts;
}

/** A diff as text lines, each marked by its kind for colour. */
export function diffView(lines: IDiffLine[], className: string): HTMLElement {
  const node = scrollable(el('pre', `jp-AgentMemory-diff ${className}`), 'Diff');
  if (!lines.length) {
    node.textContent = 'No differences.';
    return node;
  }
  const kinds: Record<string, string> = {
    '+': 'jp-mod-added',
    '-': 'jp-mod-removed',
    ' ': '',
    '…': 'jp-mod-gap'
  };
  for (const line of lines.slice(0, 2000)) {
    const text =
      line.text.length > MAX_SHOWN_CHARS ? line.text.slice(0, MAX_SHOWN_CHARS) + '…' : line.text;
    node.appendChild(
      el(
        'div',
        `jp-AgentMemory-diffLine ${kinds[line.kind]}`,
        `${line.kind === '…' ? '…' : line.kind} ${text}`
      )
    );
  }
  if (lines.length > 2000) {
    node.appendChild(
      el('div', 'jp-AgentMemory-diffLine jp-mod-gap', `… ${lines.length - 2000} more diff lines`)
    );
  }
  return node;
}
