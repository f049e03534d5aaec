"""Rich output objects of the magics and the panel: HTML in a notebook, plain text in a terminal.

Memory text is untrusted: every value put into HTML is escaped, FACT.md goes through
:mod:`jupyter_agent_memory.render`, and nothing emits ``text/markdown`` (front ends render it
with raw HTML on). No ipywidgets import here, so ``%load_ext`` stays light.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ..engine.forgetting import RECEIPTS
from ..engine.sessions import find
from ..engine.tool import NO_JOURNAL, NO_MATCHES
from ..render import escape_html, markdown_html, no_math_block

__all__ = [
    "VIEW_LIMIT", "AgentSummary", "DiffView", "FactsView", "ForgetReceipt", "HistoryView",
    "JournalResult", "PromptView", "RawText", "SessionsView", "WhyView", "forget_report",
    "format_size", "format_when", "highlight_html", "scroll_box", "short_sha", "status_style",
]

#: About how many characters of memory text a view sends to the front end (notebooks stay fast).
VIEW_LIMIT = 100_000
#: Longest value one table cell shows; the entry in code keeps all of it.
CELL_LIMIT = 5_000

# Keys every journal entry has; anything else was written by another tool and is shown as-is.
_ENTRY_KEYS = ("ts", "tags", "text")
V = TypeVar("V", bound=type)
_esc = escape_html

# Inline styles (an output's <style> applies to the whole page), with theme-variable fallbacks.
TABLE_STYLE = ("border-collapse:collapse;width:100%;font-size:var(--jp-ui-font-size1,13px);"
               "color:var(--jp-content-font-color1,inherit)")
TH_STYLE = ("text-align:left;padding:3px 10px;position:sticky;top:0;"
            "background:var(--jp-layout-color2,#eee);color:var(--jp-ui-font-color1,inherit);"
            "border-bottom:1px solid var(--jp-border-color1,#bbb);white-space:nowrap")
TD_STYLE = ("text-align:left;vertical-align:top;padding:3px 10px;"
            "border-bottom:1px solid var(--jp-border-color2,#ddd)")
#: Wrap at spaces; break a word only when it alone is wider than the line.
TEXT_WRAP = "white-space:pre-wrap;overflow-wrap:break-word;word-break:normal"
#: A box of bounded height that scrolls, for long tables and texts.
SCROLL_STYLE = "max-height:32em;overflow:auto;border:1px solid var(--jp-border-color2,#ddd)"
#: Search matches: text colour on orange and background mixed (plain colours for old browsers).
MARK_STYLE = ("background:#ffe08a;color:#000;"
              "background:color-mix(in srgb,var(--jp-warn-color2,#ffb74d) 45%,"
              "var(--jp-layout-color0,#fff));color:var(--jp-ui-font-color0,#000);"
              "padding:0 1px;border-radius:2px")
#: Status text colours per kind: ``(plain fallback, theme colour)``.
_STATUS = {
    "ok": ("#1a7f37", "var(--jp-success-color1,#388e3c)"),
    "error": ("#b42318", "var(--jp-error-color1,#d32f2f)"),
    "warning": ("#8a5a00", "var(--jp-warn-color1,#f57c00)"),
}

#: Unicode categories never written raw to a terminal (controls, bidi, separators, surrogates).
_NOT_RAW = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))

#: What one count of each kind of place in a forget receipt is: ``(singular, plural)``.
FORGET_UNITS = {
    "profile": ("line of SOUL.md or USER.md", "lines of SOUL.md or USER.md"),
    "facts": ("line of FACT.md", "lines of FACT.md"),
    "journal": ("journal entry (a tombstone keeps its time)",
                "journal entries (tombstones keep their times)"),
    "history": ("earlier FACT.md version", "earlier FACT.md versions"),
    "sessions": ("stored session text (a prompt or a file version, shared by every session "
                 "that used it)",
                 "stored session texts (prompts and file versions, shared by every session "
                 "that used them)"),
    "caches": ("search index file", "search index files"),
}


def short_sha(sha256: str, length: int = 12) -> str:
    """Return the first ``length`` hex digits of a sha256, the form shown to people."""
    return sha256[:length]


def format_size(n_bytes: int) -> str:
    """Format a byte count for people: ``512 B``, ``1.5 KB``, ``2.0 MB``."""
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.1f} KB"
    return f"{n_bytes / (1024 * 1024):.1f} MB"


def _on_theme(colour: str, share: int) -> str:
    """``colour`` moved ``share``% towards the theme's text colour (WCAG AA in any theme)."""
    return f"color-mix(in srgb,{colour} {100 - share}%,var(--jp-ui-font-color0,#000))"


def status_style(kind: str) -> str:
    """The inline ``color`` of an ``info``, ``ok``, ``warning`` or ``error`` line, in any theme."""
    if kind == "info":
        return "color:inherit"
    plain, themed = _STATUS[kind]
    return f"color:{plain};color:{_on_theme(themed, 35)}"


def scroll_box(label: str) -> str:
    """Attributes of a scrolling box that the keyboard reaches and screen readers announce."""
    return f'tabindex="0" role="region" aria-label="{_esc(label)}"'


def _up_to(pieces: Iterable[str], limit: int | None) -> tuple[str, int]:
    """``pieces`` joined until about ``limit`` characters are reached, and how many are left."""
    kept, sent = [], 0
    rest = iter(pieces)
    for piece in rest:
        kept.append(piece)
        sent += len(piece)
        if limit is not None and sent > limit:
            break
    return "".join(kept), sum(1 for _ in rest)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], css_class: str, label: str,
           limit: int | None = VIEW_LIMIT) -> str:
    """A themed, scrollable table of HTML ``rows``, cut after about ``limit`` characters."""
    header = "".join(f'<th style="{TH_STYLE}">{_esc(name)}</th>' for name in head)
    body, left = _up_to(("<tr>" + "".join(f'<td style="{TD_STYLE}">{cell}</td>' for cell in row)
                         + "</tr>" for row in rows), limit)
    if left:
        body += (f'<tr><td colspan="{len(head)}" style="{TD_STYLE};{status_style("warning")}">'
                 f"… {left:,} more row{'' if left == 1 else 's'} not shown here, so the notebook "
                 "stays small (the list in code has all of them)</td></tr>")
    return (
        f'<div {scroll_box(label)} style="{SCROLL_STYLE}">'
        f'<table class="{css_class}" style="{TABLE_STYLE}">'
        f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _cell_text(text: str, query: str = "") -> str:
    """A cell's text, escaped and highlighted, cut at ``CELL_LIMIT`` characters."""
    shown, left_out = _cut(text, CELL_LIMIT)
    html_text = highlight_html(shown, query)
    if left_out:
        html_text += (f' <small style="{status_style("warning")}">… {left_out:,} '
                      "more characters</small>")
    return html_text


def highlight_html(text: str, query: str) -> str:
    """``text`` escaped, with every case-insensitive occurrence of ``query`` in ``<mark>``."""
    if not query:
        return _esc(text)
    parts = re.split(f"({re.escape(query)})", text, flags=re.IGNORECASE)
    return "".join(f'<mark style="{MARK_STYLE}">{_esc(part)}</mark>' if i % 2 else _esc(part)
                   for i, part in enumerate(parts))


def _parse_ts(ts: object) -> datetime | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def relative_time(ts: object, now: datetime | None = None) -> str:
    """How long ago an ISO-8601 time was: ``just now``, ``5 min ago``, ``3 days ago``."""
    moment = _parse_ts(ts)
    if moment is None:
        return ""
    now = now or datetime.now(timezone.utc)
    seconds = (now - moment).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    for size, unit in ((86400 * 365, "year"), (86400 * 30, "month"), (86400, "day"),
                       (3600, "hour"), (60, "min")):
        if seconds >= size:
            n = int(seconds // size)
            label = unit if unit == "min" or n == 1 else unit + "s"
            return f"in {n} {label}" if future else f"{n} {label} ago"
    return "just now"


def format_when(ts: object, now: datetime | None = None) -> str:
    """An entry time for people: absolute (UTC, to the second) and relative."""
    moment = _parse_ts(ts)
    if moment is None:
        return str(ts or "")
    absolute = moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{absolute} ({relative_time(ts, now)})"


def _when_html(ts: object, now: datetime | None = None) -> str:
    """The time cell: relative time shown, the exact stored value as its tooltip."""
    moment = _parse_ts(ts)
    if moment is None:
        return f"<code>{_esc(ts or '')}</code>"
    absolute = moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return (f'<span title="{_esc(ts)}" style="white-space:nowrap"><code>{_esc(absolute)}</code>'
            f" <small>{_esc(relative_time(ts, now))}</small></span>")


def _cut(text: str, limit: int | None) -> tuple[str, int]:
    """``text`` cut to about ``limit`` characters at a line end, and how many were left out."""
    if limit is None or len(text) <= limit:
        return text, 0
    end = text.rfind("\n", 0, limit)
    end = limit if end < limit // 2 else end + 1
    return text[:end], len(text) - end


def _left_out_html(left_out: int, how: str, unit: str = "characters") -> str:
    return (f'<p style="{status_style("warning")}"><small>… {left_out:,} more {unit} '
            f"not shown here, so the notebook stays small: {_esc(how)}.</small></p>")


def _bounded_plain(text: str, limit: int | None) -> str:
    shown, left_out = _cut(text, limit)
    more = f"\n… {left_out:,} more characters not shown (str() of the view has all)"
    return shown + more if left_out else text


class RawText(str):
    """Memory text returned to code (``facts = %fact --raw``): a ``str`` displayed exactly."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython: the text as it is."""
        p.text(str(self)[:-1] if self.endswith("\n") else str(self))


def _view(cls: V) -> V:
    """Put ``cls``'s HTML in a no-MathJax block; its IPython plain text is ``str(self)`` unless
    the class defines ``_repr_pretty_`` itself (IPython prefers a ``__repr__`` found first)."""
    view: Any = cls
    html = view._repr_html_

    def _repr_html_(self: Any) -> str:
        return no_math_block(html(self))

    def _repr_pretty_(self: Any, p: Any, cycle: bool) -> None:
        p.text(str(self))

    view._repr_html_ = _repr_html_
    if "_repr_pretty_" not in vars(cls):
        view._repr_pretty_ = _repr_pretty_
    return cls


def inert_line(value: object) -> str:
    """``value`` as one line with control, format and line-separator characters escaped."""
    return "".join(ch.encode("unicode_escape", "backslashreplace").decode("ascii")
                   if unicodedata.category(ch) in _NOT_RAW else ch for ch in str(value))


class FactsView:
    """FACT.md: safe HTML (:func:`.render.markdown_html`) in a notebook, as stored elsewhere."""

    empty_text = "(FACT.md is empty)"

    def __init__(self, text: str, path: Path | str | None = None, sha256: str | None = None,
                 *, limit: int | None = VIEW_LIMIT):
        self.text = text
        self.path = Path(path) if path is not None else None
        self.sha256 = sha256
        self.limit = limit

    def _repr_html_(self) -> str:
        if not self.text.strip():
            return "<p><em>FACT.md is empty.</em></p>"
        shown, left_out = _cut(self.text, self.limit)
        how = "facts = %fact --raw gives all of it, FactsView(text, limit=None) shows it"
        return markdown_html(shown) + (_left_out_html(left_out, how) if left_out else "")

    def __str__(self) -> str:
        return self.text if self.text.strip() else self.empty_text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython: the text, bounded like the HTML (``str`` has all)."""
        p.text(_bounded_plain(str(self), self.limit))

    def __repr__(self) -> str:
        return f"FactsView({len(self.text)} chars)"


@_view
class JournalResult(list):
    """Journal entries (dicts with ``ts``, ``tags``, ``text``), newest first; ``skipped``
    corrupted lines, ``scanned`` lines read, ``indexed``: the index narrowed the search."""

    def __init__(self, entries: Iterable[Mapping[str, Any]] = (), *, skipped: int = 0,
                 scanned: int | None = None, empty_message: str = NO_MATCHES,
                 highlight: str = "", now: datetime | None = None, indexed: bool = False):
        super().__init__(entries)
        self.skipped = skipped
        self.scanned = scanned
        self.indexed = indexed
        self.empty_message = empty_message
        self.highlight = highlight
        self.now = now

    @classmethod
    def from_search(cls, result: Sequence[Mapping[str, Any]] | None,
                    **kwargs: Any) -> JournalResult:
        """Wrap the engine's ``SearchResult``; None (no journal) says so."""
        if result is None:
            return cls(empty_message=NO_JOURNAL)
        return cls(result, skipped=getattr(result, "skipped", 0) or 0,
                   scanned=getattr(result, "scanned", None),
                   indexed=bool(getattr(result, "indexed", False)), **kwargs)

    def extra_keys(self) -> list[str]:
        """Keys beyond ts/tags/text present in any entry, in first-seen order."""
        return list(dict.fromkeys(key for entry in self for key in entry if key not in _ENTRY_KEYS))

    def _footer(self) -> str:
        parts = [f"{len(self)} entr{'y' if len(self) == 1 else 'ies'}, newest first"]
        if self.skipped:
            parts.append(f"{self.skipped} corrupted line{'' if self.skipped == 1 else 's'} skipped")
        if self.indexed:
            parts.append("narrowed by the journal's index")
        return "; ".join(parts)

    def _repr_html_(self) -> str:
        if not self:
            skipped = (f" <small>({_esc(self.skipped)} corrupted lines skipped)</small>"
                       if self.skipped else "")
            return f"<p><em>{_esc(self.empty_message)}</em>{skipped}</p>"
        extras = self.extra_keys()
        rows = []
        for entry in self:
            tags = entry.get("tags") or []
            tag_text = ", ".join(str(t) for t in tags) if isinstance(tags, list) else str(tags)
            cells = [_when_html(entry.get("ts", ""), self.now), _cell_text(tag_text),
                     f'<div style="{TEXT_WRAP};min-width:16em">'
                     f"{_cell_text(str(entry.get('text', '')), self.highlight)}</div>"]
            for key in extras:
                value = entry.get(key, "")
                value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                cells.append(f'<div style="{TEXT_WRAP}">{_cell_text(value)}</div>')
            rows.append(cells)
        table = _table(("time (UTC)", "tags", "text", *extras), rows,
                       "jp-AgentMemory-journal", "Journal entries")
        return table + f"<p><small>{_esc(self._footer())}</small></p>"

    def __str__(self) -> str:
        if not self:
            skipped = f" ({self.skipped} corrupted lines skipped)" if self.skipped else ""
            return self.empty_message + skipped
        lines = []
        for entry in self:
            tags = entry.get("tags") or []
            if not isinstance(tags, list):  # written by another tool: shown as it is
                tags = [tags]
            # Model-written, so inert: lines stay lines, nothing else reaches a terminal raw.
            prefix = f"{inert_line(entry.get('ts', ''))}  "
            if tags:
                prefix += "[" + ", ".join(inert_line(t) for t in tags) + "] "
            extras = {k: v for k, v in entry.items() if k not in _ENTRY_KEYS}
            text = "\n".join(inert_line(line) for line in str(entry.get("text", "")).split("\n"))
            if extras:
                text += "  " + inert_line(json.dumps(extras, ensure_ascii=False))
            # Lines after the first are indented so they stay inside the text column.
            lines.append(prefix + text.replace("\n", "\n" + " " * len(prefix)))
        lines.append(f"({self._footer()})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"JournalResult({list.__repr__(self)})"


@_view
class HistoryView(list):
    """FACT.md versions (dicts with ``ts``, ``sha256``, ``size``), newest first."""

    empty_message = "No earlier FACT.md versions yet."

    def _repr_html_(self) -> str:
        if not self:
            return f"<p><em>{_esc(self.empty_message)}</em></p>"
        rows = [[_when_html(v.get("ts", "")), f'<code title="{_esc(v.get("sha256", ""))}">'
                 f"{_esc(short_sha(str(v.get('sha256', ''))))}</code>",
                 _esc(format_size(int(v.get("size", 0))))] for v in self]
        return _table(("saved (UTC)", "sha256", "size"), rows, "jp-AgentMemory-history",
                      "Earlier FACT.md versions")

    def __str__(self) -> str:
        if not self:
            return self.empty_message
        return "\n".join(f"{v.get('ts', '')}  {short_sha(str(v.get('sha256', '')))}  "
                         f"{format_size(int(v.get('size', 0)))}" for v in self)

    def __repr__(self) -> str:
        return f"HistoryView({list.__repr__(self)})"


#: Diff line styles by prefix, the first match wins (the two header lines are bold).
_DIFF_STYLES = (
    ("@@", f"color:#6f42c1;color:{_on_theme('var(--jp-info-color1,#0097a7)', 35)}"),
    ("+", "background:rgba(76,175,80,0.22)"),
    ("-", "background:rgba(244,67,54,0.22)"),
)


def _diff_line(line: str, header: bool = False) -> str:
    style = "font-weight:bold" if header else next(
        (style for prefix, style in _DIFF_STYLES if line.startswith(prefix)), "")
    # display:block keeps one line per span even without newlines inside <pre>.
    return f'<span style="display:block;{style}">{_esc(line) or " "}</span>'


@_view
class DiffView:
    """A unified diff between two texts, coloured in a notebook and plain in a terminal."""

    no_changes = "No differences."

    def __init__(self, old: str, new: str, fromfile: str = "before", tofile: str = "after",
                 context: int = 3, *, limit: int | None = VIEW_LIMIT):
        self.limit = limit
        self.old = old
        self.new = new
        self.fromfile = fromfile
        self.tofile = tofile
        self.lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(),
                                               fromfile=fromfile, tofile=tofile, n=context,
                                               lineterm=""))

    @classmethod
    def between_sessions(cls, mem: Any, first: str, second: str) -> DiffView:
        """How the prompts of two recorded sessions (ids or unique prefixes) differ."""
        a, b = find(mem, first), find(mem, second)
        return cls(mem.session_prompt(a["session_id"]), mem.session_prompt(b["session_id"]),
                   f"session {a['session_id']} ({a.get('ts', '?')})",
                   f"session {b['session_id']} ({b.get('ts', '?')})")

    @property
    def label(self) -> str:
        """What the diff box is called for screen readers: from what to what."""
        return f"Differences from {self.fromfile} to {self.tofile}"

    @property
    def changed(self) -> bool:
        """True when the texts differ (line endings at the very end are ignored)."""
        return bool(self.lines)

    @property
    def added(self) -> int:
        """Number of added lines (an added line may itself start with ``++``)."""
        return sum(1 for ln in self.lines[2:] if ln.startswith("+"))

    @property
    def removed(self) -> int:
        """Number of removed lines (a removed line may itself start with ``--``)."""
        return sum(1 for ln in self.lines[2:] if ln.startswith("-"))

    @property
    def text(self) -> str:
        """The unified diff as text ('' when nothing changed)."""
        return "\n".join(self.lines)

    def summary(self) -> str:
        """One line: ``+2 -1 lines`` or ``No differences.``."""
        if not self.changed:
            return self.no_changes
        return f"+{self.added} -{self.removed} lines"

    def _repr_html_(self) -> str:
        if not self.changed:
            return f"<p><em>{_esc(self.no_changes)}</em></p>"
        styled = (_diff_line(line, n < 2) for n, line in enumerate(self.lines))
        out, left_out = _up_to(styled, self.limit)
        return (
            f'<pre class="jp-AgentMemory-diff" {scroll_box(self.label)} '
            f'style="line-height:1.3;{TEXT_WRAP};{SCROLL_STYLE};padding:4px">'
            + out
            + f"</pre><p><small>{_esc(self.summary())}</small></p>"
            + (_left_out_html(left_out, "str(view) has all of it", "diff lines")
               if left_out else "")
        )

    def __str__(self) -> str:
        return self.text if self.changed else self.no_changes

    def __repr__(self) -> str:
        return f"DiffView({self.fromfile!r} -> {self.tofile!r}: {self.summary()})"


class _RecordedSection:
    """A section of a session receipt, shaped like the prompt builder's ``Section``."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.name = str(data.get("name", ""))
        self.source = data.get("source")
        self.chars = int(data.get("chars") or 0)
        self.tokens = int(data.get("tokens") or 0)


@_view
class PromptView:
    """A built system prompt with per-section sizes and any budget warning."""

    def __init__(self, text: str, *, title: str = "System prompt", sections: Sequence[Any] = (),
                 tokens: int | None = None, budget_tokens: int | None = None,
                 warnings: Sequence[str] = (), memory_tokens: int | None = None,
                 base_from_file: bool | None = None, bootstrap: bool | None = None,
                 limit: int | None = VIEW_LIMIT):
        self.limit = limit
        self.text = text
        self.title = title
        self.sections = list(sections)
        self.tokens = tokens
        self.budget_tokens = budget_tokens
        self.warnings = list(warnings)
        self.memory_tokens = memory_tokens
        self.base_from_file = base_from_file
        self.bootstrap = bootstrap

    @classmethod
    def from_prompt(cls, prompt: Any, title: str = "System prompt") -> PromptView:
        """Build the view from the engine's ``Prompt``."""
        return cls(prompt.text, title=title, sections=prompt.sections, tokens=prompt.tokens,
                   budget_tokens=prompt.budget_tokens, warnings=prompt.warnings,
                   memory_tokens=prompt.memory_tokens, base_from_file=prompt.base is not None,
                   bootstrap=prompt.bootstrap)

    @classmethod
    def from_receipt(cls, receipt: Mapping[str, Any], text: str) -> PromptView:
        """A recorded session's prompt ``text`` with the sizes and warnings its receipt kept."""
        return cls(text, title=f"Session {receipt.get('session_id')} "
                   f"({format_when(receipt.get('ts'))}), as recorded",
                   sections=[_RecordedSection(s) for s in receipt.get("sections") or ()
                             if isinstance(s, Mapping)],
                   tokens=receipt.get("tokens"), budget_tokens=receipt.get("budget_tokens"),
                   warnings=receipt.get("warnings") or ())

    @classmethod
    def from_session(cls, mem: Any, session_id: str) -> PromptView:
        """The view of the prompt a recorded session (id or unique prefix) started with."""
        receipt = find(mem, session_id)
        return cls.from_receipt(receipt, mem.session_prompt(receipt["session_id"]))

    @property
    def over_budget(self) -> bool:
        """True when a budget is set and the memory part (or, if unknown, the whole) exceeds it."""
        used = self.memory_tokens if self.memory_tokens is not None else self.tokens
        return self.budget_tokens is not None and used is not None and used > self.budget_tokens

    def summary(self) -> str:
        """One line: size, memory size against the budget, base and bootstrap state."""
        parts = [f"{len(self.text)} chars"]
        if self.tokens is not None:
            parts.append(f"~{self.tokens} tokens")
        if self.memory_tokens is not None:
            memory = f"memory ~{self.memory_tokens} tokens"
            if self.budget_tokens is not None:
                memory += f" of a {self.budget_tokens}-token budget"
            parts.append(memory)
        elif self.budget_tokens is not None:
            parts.append(f"budget {self.budget_tokens} tokens")
        if self.base_from_file is not None:
            parts.append("base: system.md" if self.base_from_file else "base: client default")
        if self.bootstrap is not None:
            parts.append("bootstrap: on" if self.bootstrap else "bootstrap: off")
        return " · ".join(parts)

    @staticmethod
    def _source(section: Any) -> str:
        source = getattr(section, "source", None)
        return "" if source is None else str(source)

    def _repr_html_(self) -> str:
        parts = [f"<p><strong>{_esc(self.title)}</strong> — {_esc(self.summary())}</p>"]
        parts.extend('<div class="jp-AgentMemory-warning" style="border-left:4px solid '
                     "var(--jp-warn-color1,#d9822b);background:rgba(245,124,0,0.12);"
                     f'padding:4px 8px;margin:4px 0">⚠ {_esc(warning)}</div>'
                     for warning in self.warnings)
        if self.sections:
            # A long path breaks anywhere rather than run over the next column.
            rows = [[_esc(s.name),
                     f'<code style="overflow-wrap:anywhere">{_esc(self._source(s))}</code>'
                     if self._source(s) else "<em>builder text</em>",
                     _esc(f"{s.chars:,}"), _esc(f"{s.tokens:,}")] for s in self.sections]
            parts.append(_table(("section", "source", "chars", "~tokens"), rows,
                                "jp-AgentMemory-sections", "Prompt sections"))
        shown, left_out = _cut(self.text, self.limit)
        parts.append(
            f'<pre class="jp-AgentMemory-prompt" {scroll_box(self.title + ", text")} '
            f'style="{TEXT_WRAP};{SCROLL_STYLE};padding:6px;margin-top:6px">{_esc(shown)}</pre>'
        )
        if left_out:
            parts.append(_left_out_html(
                left_out, "text = %memprompt --raw gives all of it, and the panel has Show all"))
        return "".join(parts)

    def __str__(self) -> str:
        return self._plain(self.text)

    def _plain(self, text: str) -> str:
        lines = [f"{self.title}: {self.summary()}"]
        lines.extend(f"WARNING: {w}" for w in self.warnings)
        if self.sections:
            width = max(len(s.name) for s in self.sections)
            for s in self.sections:
                source = self._source(s)
                lines.append(f"  {s.name:<{width}}  {s.chars} chars, ~{s.tokens} tokens"
                             + (f"  {source}" if source else ""))
        rule = "-" * 72
        lines.extend([rule, text, rule])
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython: bounded like the HTML (``str`` has all of it)."""
        p.text(self._plain(_bounded_plain(self.text, self.limit)))

    def __repr__(self) -> str:
        return f"PromptView({self.title!r}: {self.summary()})"


@_view
class AgentSummary:
    """A short description of an agent folder: where it is and how big each part is."""

    def __init__(self, *, agent_id: str | None, path: Path | str, sizes: Mapping[str, int],
                 facts_sha256: str = "", history_versions: int = 0, template: str | None = None):
        self.agent_id = agent_id
        self.path = Path(path)
        self.sizes = dict(sizes)
        self.facts_sha256 = facts_sha256
        self.history_versions = history_versions
        self.template = template

    def _rows(self) -> list[tuple[str, str]]:
        rows = [("agent", self.agent_id if self.agent_id is not None else "(folder path)"),
                ("folder", str(self.path))]
        for name, size in self.sizes.items():
            value = format_size(size) if size >= 0 else "missing"
            if name == "FACT.md" and self.facts_sha256 and size >= 0:
                value += (f" (sha256 {short_sha(self.facts_sha256)}, "
                          f"{self.history_versions} earlier versions)")
            rows.append((name, value))
        if self.template:
            rows.append(("template", self.template))
        return rows

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{_esc(k)}</th><td><code>{_esc(v)}"
                       "</code></td></tr>" for k, v in self._rows())
        return f'<table class="jp-AgentMemory-summary">{body}</table>'

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def __repr__(self) -> str:
        return f"AgentSummary({self.agent_id!r}, {str(self.path)!r})"


def _client_label(receipt: Mapping[str, Any]) -> str:
    client = receipt.get("client")
    if not isinstance(client, Mapping) or not client.get("name"):
        return "(unknown client)"
    version = client.get("version")
    return f"{client['name']} {version}" if version else str(client["name"])


@_view
class SessionsView(list):
    """Receipts of recorded session starts (``AgentMemory.sessions()``), newest first."""

    empty_message = (
        "No sessions on record yet: one is recorded when a client really starts a session "
        "(an MCP client connecting, the evaluation runner, or PromptBuilder.start_session); "
        "previews such as %memprompt never record."
    )

    def __init__(self, receipts: Iterable[Mapping[str, Any]] = (), *, now: datetime | None = None):
        super().__init__(receipts)
        self.now = now

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        return [(str(r.get("ts", "")), str(r.get("session_id", "")), _client_label(r),
                 f"{r.get('tokens', '?')}", short_sha(str(r.get("prompt_sha256", ""))))
                for r in self]

    def _repr_html_(self) -> str:
        if not self:
            return f"<p><em>{_esc(self.empty_message)}</em></p>"
        rows = [[_when_html(ts, self.now), f"<code>{_esc(sid)}</code>", _esc(client),
                 _esc(tokens), f"<code>{_esc(sha)}</code>"]
                for ts, sid, client, tokens, sha in self._rows()]
        count = f"{len(self)} session{'' if len(self) == 1 else 's'}, newest first"
        table = _table(("time (UTC)", "id", "client", "~tokens", "prompt sha256"), rows,
                       "jp-AgentMemory-sessions", "Recorded sessions")
        return table + f"<p><small>{_esc(count)}</small></p>"

    def __str__(self) -> str:
        if not self:
            return self.empty_message
        # Every field may come from a client (its self-chosen name) or a hand-edited log.
        rows = [("time (UTC)", "id", "client", "~tokens", "prompt"),
                *(tuple(inert_line(cell) for cell in row) for row in self._rows())]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join("  ".join(cell.ljust(widths[i]) if i < 4 else cell
                                   for i, cell in enumerate(row)).rstrip() for row in rows)

    def __repr__(self) -> str:
        return f"SessionsView({len(self)} sessions)"


@_view
class WhyView(list):
    """Where lines of a recorded prompt came from: a list of the engine's ``Origin``s."""

    def __init__(self, origins: Iterable[Any] = (), *, session_id: str = "", needle: str = ""):
        super().__init__(origins)
        self.session_id = session_id
        self.needle = needle

    @property
    def empty_message(self) -> str:
        """What is shown when no line of the prompt holds the text."""
        return f"No line of session {self.session_id}'s prompt contains {self.needle!r}."

    @staticmethod
    def _place(origin: Any) -> tuple[str, str, str]:
        if origin.source is None:
            return (f"builder text ({origin.section})", "", "")
        return (str(origin.source), short_sha(origin.version or ""), str(origin.line))

    def _repr_html_(self) -> str:
        if not self:
            return f"<p><em>{_esc(self.empty_message)}</em></p>"
        rows = []
        for origin in self:
            source, version, line = self._place(origin)
            rows.append([
                _esc(origin.section), f"<code>{_esc(source)}</code>",
                f"<code>{_esc(version)}</code>", _esc(line),
                f'<div style="{TEXT_WRAP};min-width:16em">'
                f"{highlight_html(origin.text, self.needle)}</div>",
            ])
        return _table(("section", "source", "version", "line", "text"), rows,
                      "jp-AgentMemory-why", "Where the prompt lines came from")

    def __str__(self) -> str:
        if not self:
            return self.empty_message
        return "\n".join(str(origin) for origin in self)

    def __repr__(self) -> str:
        return f"WhyView({len(self)} origins)"


def _receipt_counts(receipt: Mapping[str, Any]) -> dict[str, int]:
    """A receipt's ``changed`` as counts per kind (a list of places counts its length)."""
    changed = receipt.get("changed") or {}
    if not isinstance(changed, Mapping):
        return {}
    return {str(kind): int(value) if isinstance(value, int)
            else len(value) if isinstance(value, (list, tuple, dict, set)) else 0
            for kind, value in changed.items()}


def forget_report(receipt: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What people read about a forget or dry run, as ``(status, text)`` pairs (never the text)."""
    counts = _receipt_counts(receipt)
    dry = bool(receipt.get("dry_run"))
    places = [str(place) for place in receipt.get("places") or ()]
    lines: list[tuple[str, str]] = []
    if not any(counts.values()) and not places:
        lines.append(("info", "Nothing to forget: no stored place holds it."))
    else:
        lines.append(("info", "Dry run, nothing changed. Forgetting would change:" if dry
                      else "Forgotten. Changed:"))
        for kind, n in counts.items():
            unit = FORGET_UNITS.get(kind)
            lines.append(("info", f"  {kind}: {n}" + (f" {unit[n != 1]}" if unit else "")))
        lines.extend(("info", f"  - {place}") for place in places)
    digest = short_sha(str(receipt.get("forgotten_sha256") or ""))
    when = receipt.get("ts", "?")
    if dry:
        lines.append(("info", f"Dry run at {when}, no receipt written; keyed sha256 of what "
                      f"would be forgotten {digest}."))
        return lines
    lines.append(("info", f"Receipt {when} (in memory/{RECEIPTS}), keyed sha256 of what was "
                  f"forgotten {digest}."))
    if receipt.get("verified"):
        lines.append(("ok", "Verified: found in no form (raw, case-folded, JSON-escaped) in "
                      "the agent's files."))
    else:
        remaining = ", ".join(str(p) for p in receipt.get("remaining") or ()) or "?"
        lines.append(("error", f"Verification FAILED: still found in {remaining}"))
    return lines


@_view
class ForgetReceipt(dict):
    """The engine's receipt of a forget or dry run (never the text), shown as its report."""

    def counts(self) -> dict[str, int]:
        """Places changed (or that would change), per kind."""
        return _receipt_counts(self)

    def _repr_html_(self) -> str:
        return "".join(f'<div style="{status_style(kind)};{TEXT_WRAP}">{_esc(text)}</div>'
                       for kind, text in forget_report(self))

    def __str__(self) -> str:
        return "\n".join(text for _kind, text in forget_report(self))

    def __repr__(self) -> str:
        return f"ForgetReceipt({dict.__repr__(self)})"
