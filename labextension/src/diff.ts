/**
 * A line diff for the sidebar (conflicts and FACT.md history), shown as text.
 */

/** One line of a diff: kept (' '), removed ('-'), added ('+'), or a gap of hidden lines. */
export interface IDiffLine {
  kind: ' ' | '-' | '+' | '…';
  text: string;
}

/** Above this many cells the middle is shown as all removed then all added (still correct). */
const MAX_TABLE = 4_000_000;

/**
 * The lines that changed from `before` to `after`, with `context` unchanged lines around
 * each change; longer unchanged runs become one '…' line saying how many were hidden.
 */
export function diffLines(before: string, after: string, context = 2): IDiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const middle = align(a.slice(start, endA), b.slice(start, endB));
  const all: IDiffLine[] = [
    ...a.slice(0, start).map(text => ({ kind: ' ' as const, text })),
    ...middle,
    ...a.slice(endA).map(text => ({ kind: ' ' as const, text }))
  ];
  return collapse(all, context);
}

/** Longest-common-subsequence alignment of two line lists. */
function align(a: string[], b: string[]): IDiffLine[] {
  if (a.length * b.length > MAX_TABLE) {
    return [
      ...a.map(text => ({ kind: '-' as const, text })),
      ...b.map(text => ({ kind: '+' as const, text }))
    ];
  }
  const width = b.length + 1;
  const table = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i * width + j] =
        a[i] === b[j]
          ? table[(i + 1) * width + j + 1] + 1
          : Math.max(table[(i + 1) * width + j], table[i * width + j + 1]);
    }
  }
  const out: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: ' ', text: a[i] });
      i++;
      j++;
    } else if (table[(i + 1) * width + j] >= table[i * width + j + 1]) {
      out.push({ kind: '-', text: a[i++] });
    } else {
      out.push({ kind: '+', text: b[j++] });
    }
  }
  while (i < a.length) {
    out.push({ kind: '-', text: a[i++] });
  }
  while (j < b.length) {
    out.push({ kind: '+', text: b[j++] });
  }
  return out;
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
