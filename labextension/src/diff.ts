/**
 * A line diff for the sidebar (conflicts, FACT.md history, sessions), shown as text; the
 * alignment is jsdiff's (Myers' O(ND) algorithm).
 */

import { diffArrays } from 'diff';

/** One line of a diff: kept (' '), removed ('-'), added ('+'), or a gap of hidden lines. */
export interface IDiffLine {
  kind: ' ' | '-' | '+' | '…';
  text: string;
}

/**
 * Past this many edits the diff is given up, and the two texts are shown as all removed then
 * all added (still correct): Myers' algorithm takes time proportional to the edits times the
 * length, and a diff nobody can read is not worth a frozen sidebar.
 */
const MAX_EDITS = 5000;

/**
 * The lines that changed from `before` to `after`, with `context` unchanged lines around
 * each change; longer unchanged runs become one '…' line saying how many were hidden.
 */
export function diffLines(before: string, after: string, context = 2): IDiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const changes = diffArrays(a, b, { maxEditLength: MAX_EDITS });
  const all: IDiffLine[] = [];
  const add = (kind: IDiffLine['kind'], lines: string[]): void => {
    for (const text of lines) {
      all.push({ kind, text }); // one by one: a spread of 100k lines overflows the stack
    }
  };
  if (changes === undefined) {
    add('-', a);
    add('+', b);
  } else {
    for (const change of changes) {
      add(change.added ? '+' : change.removed ? '-' : ' ', change.value);
    }
  }
  return collapse(all, context);
}

function collapse(lines: IDiffLine[], context: number): IDiffLine[] {
  const near = new Array<boolean>(lines.length).fill(false);
  lines.forEach((line, index) => {
    if (line.kind !== ' ') {
      for (let k = Math.max(0, index - context); k <= index + context && k < lines.length; k++) {
        near[k] = true;
      }
    }
  });
  const out: IDiffLine[] = [];
  let hidden = 0;
  lines.forEach((line, index) => {
    if (near[index]) {
      if (hidden) {
        out.push({ kind: '…', text: `${hidden} unchanged line${hidden === 1 ? '' : 's'}` });
        hidden = 0;
      }
      out.push(line);
    } else {
      hidden++;
    }
  });
  if (hidden && out.length) {
    out.push({ kind: '…', text: `${hidden} unchanged line${hidden === 1 ? '' : 's'}` });
  }
  return out;
}

/** Counts of added and removed lines. */
export function diffSummary(lines: IDiffLine[]): string {
  const added = lines.filter(l => l.kind === '+').length;
  const removed = lines.filter(l => l.kind === '-').length;
  return added || removed ? `+${added} −${removed} lines` : 'No differences.';
}
