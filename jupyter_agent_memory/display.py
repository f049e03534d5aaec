"""Rich output objects shared by the IPython magics and the ipywidgets panel.

Every object here renders twice: as HTML in a notebook (``_repr_html_``) and as plain text in
a terminal IPython (``_repr_pretty_`` / ``__repr__``); the ``text/plain`` form is the raw text.
They only format what the engine returns; no rule about memory lives here.

Journal text, tags and FACT.md are written by a language model and must be treated as untrusted:
notebook front ends run the HTML of live outputs as it is. Every value that goes into HTML is
escaped, and FACT.md's Markdown is converted by :mod:`jupyter_agent_memory.render` (raw HTML
shown as text, unsafe links dropped, the result sanitised). Nothing here emits ``text/markdown``,
which front ends would render with raw HTML enabled.

This module deliberately imports nothing from ipywidgets, so the magics can use it while
``%load_ext jupyter_agent_memory`` stays light.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .render import escape_html, markdown_html, no_math_block

__all__ = [
    "AgentSummary",
    "DiffView",
    "FactsView",
    "HistoryView",
    "JournalResult",
    "PromptView",
    "format_size",
    "short_sha",
]

# Keys every journal entry has; anything else was written by another tool and is shown as-is.
_ENTRY_KEYS = ("ts", "tags", "text")


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


_esc = escape_html


def _no_math(method: Callable[[Any], str]) -> Callable[[Any], str]:
    """Make a ``_repr_html_`` return its HTML inside a block MathJax does not typeset."""

    @functools.wraps(method)
    def wrapper(self: Any) -> str:
        return no_math_block(method(self))

    return wrapper


def _indent_continuation(text: str, width: int) -> str:
    """Indent every line after the first so multi-line values stay inside their column."""
    return text.replace("\n", "\n" + " " * width)


# --------------------------------------------------------------------------------------------
# FACT.md
# --------------------------------------------------------------------------------------------


class FactsView:
    """FACT.md content: safely rendered Markdown in a notebook, the raw text in a terminal.

    The notebook form is ``text/html`` from :func:`~jupyter_agent_memory.render.markdown_html`
    (raw HTML in FACT.md shows as text); ``text/plain`` is FACT.md exactly as stored.
    """

    empty_text = "(FACT.md is empty)"

    def __init__(self, text: str, path: Path | str | None = None, sha256: str | None = None):
        self.text = text
        self.path = Path(path) if path is not None else None
        self.sha256 = sha256

    def _repr_html_(self) -> str:
        if not self.text.strip():
            return "<p><em>FACT.md is empty.</em></p>"
        return markdown_html(self.text)

    def __str__(self) -> str:
        return self.text if self.text.strip() else self.empty_text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"FactsView({len(self.text)} chars)"


# --------------------------------------------------------------------------------------------
# Journal
# --------------------------------------------------------------------------------------------


# IPython's pretty printer uses ``_repr_pretty_`` only when the class itself defines it (a
# ``__repr__`` found first in the MRO wins), so every class below defines its own.
class JournalResult(list):
    """Journal entries (dicts with ``ts``, ``tags``, ``text``), newest first.

    In code it is a normal ``list`` of entry dicts (index it, loop over it, compare it with a
    list). In a notebook it renders as an HTML table with every value escaped; in a terminal
    as aligned plain text.

    ``skipped`` counts corrupted journal lines the engine skipped while reading, ``scanned``
    the lines it read (``None`` when unknown). ``empty_message`` is shown when there are no
    entries.
    """

    def __init__(
        self,
        entries: Iterable[Mapping[str, Any]] = (),
        *,
        skipped: int = 0,
        scanned: int | None = None,
        empty_message: str = "No matching journal entries found.",
    ):
        super().__init__(entries)
        self.skipped = skipped
        self.scanned = scanned
        self.empty_message = empty_message

    @classmethod
    def from_search(cls, result: Sequence[Mapping[str, Any]], **kwargs: Any) -> JournalResult:
        """Wrap the engine's ``SearchResult`` (a list with ``skipped`` / ``scanned``)."""
        return cls(
            result,
            skipped=getattr(result, "skipped", 0) or 0,
            scanned=getattr(result, "scanned", None),
            **kwargs,
        )

    # Extra keys written by other tools, in first-seen order, so the table can show them.
    def extra_keys(self) -> list[str]:
        """Keys beyond ts/tags/text present in any entry, in first-seen order."""
        seen: dict[str, None] = {}
        for entry in self:
            for key in entry:
                if key not in _ENTRY_KEYS:
                    seen.setdefault(key, None)
        return list(seen)

    def _footer(self) -> str:
        parts = [f"{len(self)} entr{'y' if len(self) == 1 else 'ies'}, newest first"]
        if self.skipped:
            parts.append(
                f"{self.skipped} corrupted line{'' if self.skipped == 1 else 's'} skipped"
            )
        return "; ".join(parts)

    @_no_math
    def _repr_html_(self) -> str:
        if not self:
            return f"<p><em>{_esc(self.empty_message)}</em>{self._skipped_html()}</p>"
        extras = self.extra_keys()
        head = "".join(f"<th>{_esc(name)}</th>" for name in ("ts", "tags", "text", *extras))
        rows = []
        for entry in self:
            tags = entry.get("tags") or []
            tag_cells = ", ".join(_esc(t) for t in tags) if isinstance(tags, list) else _esc(tags)
            cells = [
                f'<td style="white-space:nowrap"><code>{_esc(entry.get("ts", ""))}</code></td>',
                f"<td>{tag_cells}</td>",
                f'<td style="white-space:pre-wrap;text-align:left">'
                f"{_esc(entry.get('text', ''))}</td>",
            ]
            for key in extras:
                value = entry.get(key, "")
                if not isinstance(value, str):
                    value = json.dumps(value, ensure_ascii=False)
                cells.append(f"<td>{_esc(value)}</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return (
            '<table class="jp-AgentMemory-journal">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p><small>{_esc(self._footer())}</small></p>"
        )

    def _skipped_html(self) -> str:
        if not self.skipped:
            return ""
        return f" <small>({_esc(self.skipped)} corrupted lines skipped)</small>"

    def __str__(self) -> str:
        if not self:
            text = self.empty_message
            if self.skipped:
                text += f" ({self.skipped} corrupted lines skipped)"
            return text
        lines = []
        for entry in self:
            tags = entry.get("tags") or []
            if not isinstance(tags, list):  # written by another tool: shown as it is
                tags = [tags]
            tag_text = "[" + ", ".join(str(t) for t in tags) + "]" if tags else ""
            prefix = f"{entry.get('ts', '')}  "
            if tag_text:
                prefix += tag_text + " "
            extras = {k: v for k, v in entry.items() if k not in _ENTRY_KEYS}
            text = str(entry.get("text", ""))
            if extras:
                text += "  " + json.dumps(extras, ensure_ascii=False)
            lines.append(prefix + _indent_continuation(text, len(prefix)))
        lines.append(f"({self._footer()})")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"JournalResult({list.__repr__(self)})"


# --------------------------------------------------------------------------------------------
# FACT.md history
# --------------------------------------------------------------------------------------------


class HistoryView(list):
    """FACT.md versions (dicts with ``ts``, ``sha256``, ``size``), newest first.

    A normal ``list`` in code; a table in a notebook; aligned text in a terminal. Pass a version's
    sha256 (or a unique prefix of 7+ hex digits) to ``%fact --diff`` or ``%fact --restore``.
    """

    empty_message = "No earlier FACT.md versions yet."

    @_no_math
    def _repr_html_(self) -> str:
        if not self:
            return f"<p><em>{_esc(self.empty_message)}</em></p>"
        rows = "".join(
            "<tr>"
            f"<td><code>{_esc(v.get('ts', ''))}</code></td>"
            f'<td><code title="{_esc(v.get("sha256", ""))}">'
            f"{_esc(short_sha(str(v.get('sha256', ''))))}</code></td>"
            f"<td>{_esc(format_size(int(v.get('size', 0))))}</td>"
            "</tr>"
            for v in self
        )
        return (
            '<table class="jp-AgentMemory-history"><thead><tr><th>saved (UTC)</th>'
            f"<th>sha256</th><th>size</th></tr></thead><tbody>{rows}</tbody></table>"
        )

    def __str__(self) -> str:
        if not self:
            return self.empty_message
        return "\n".join(
            f"{v.get('ts', '')}  {short_sha(str(v.get('sha256', '')))}  "
            f"{format_size(int(v.get('size', 0)))}"
            for v in self
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"HistoryView({list.__repr__(self)})"


# --------------------------------------------------------------------------------------------
# Diffs
# --------------------------------------------------------------------------------------------


class DiffView:
    """A unified diff between two texts, coloured in a notebook and plain in a terminal."""

    no_changes = "No differences."

    def __init__(
        self,
        old: str,
        new: str,
        fromfile: str = "before",
        tofile: str = "after",
        context: int = 3,
    ):
        self.old = old
        self.new = new
        self.fromfile = fromfile
        self.tofile = tofile
        self.lines = list(
            difflib.unified_diff(
                old.splitlines(),
                new.splitlines(),
                fromfile=fromfile,
                tofile=tofile,
                n=context,
                lineterm="",
            )
        )

    @property
    def changed(self) -> bool:
        """True when the texts differ (line endings at the very end are ignored)."""
        return bool(self.lines)

    @property
    def added(self) -> int:
        """Number of added lines."""
        return sum(1 for ln in self.lines if ln.startswith("+") and not ln.startswith("+++"))

    @property
    def removed(self) -> int:
        """Number of removed lines."""
        return sum(1 for ln in self.lines if ln.startswith("-") and not ln.startswith("---"))

    @property
    def text(self) -> str:
        """The unified diff as text ('' when nothing changed)."""
        return "\n".join(self.lines)

    def summary(self) -> str:
        """One line: ``+2 -1 lines`` or ``No differences.``."""
        if not self.changed:
            return self.no_changes
        return f"+{self.added} -{self.removed} lines"

    @_no_math
    def _repr_html_(self) -> str:
        if not self.changed:
            return f"<p><em>{_esc(self.no_changes)}</em></p>"
        out = []
        for line in self.lines:
            style = ""
            if line.startswith(("+++", "---")):
                style = "font-weight:bold"
            elif line.startswith("@@"):
                style = "color:#6f42c1"
            elif line.startswith("+"):
                style = "background:rgba(40,167,69,0.18)"
            elif line.startswith("-"):
                style = "background:rgba(215,58,73,0.18)"
            # display:block keeps one line per span even without newlines inside <pre>.
            out.append(f'<span style="display:block;{style}">{_esc(line) or " "}</span>')
        return (
            '<pre class="jp-AgentMemory-diff" style="line-height:1.3">'
            + "".join(out)
            + f"</pre><p><small>{_esc(self.summary())}</small></p>"
        )

    def __str__(self) -> str:
        return self.text if self.changed else self.no_changes

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"DiffView({self.fromfile!r} -> {self.tofile!r}: {self.summary()})"


# --------------------------------------------------------------------------------------------
# Prompt
# --------------------------------------------------------------------------------------------


class PromptView:
    """A built system prompt with per-section sizes and any budget warning.

    ``sections`` are objects with ``name``, ``source`` (a path or ``None``), ``chars`` and
    ``tokens`` (the engine's ``Section``); ``tokens`` is the approximate total.
    """

    def __init__(
        self,
        text: str,
        *,
        title: str = "System prompt",
        sections: Sequence[Any] = (),
        tokens: int | None = None,
        budget_tokens: int | None = None,
        warnings: Sequence[str] = (),
        memory_tokens: int | None = None,
        base_from_file: bool | None = None,
        bootstrap: bool | None = None,
    ):
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
        return cls(
            prompt.text,
            title=title,
            sections=prompt.sections,
            tokens=prompt.tokens,
            budget_tokens=prompt.budget_tokens,
            warnings=prompt.warnings,
            memory_tokens=prompt.memory_tokens,
            base_from_file=prompt.base is not None,
            bootstrap=prompt.bootstrap,
        )

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

    @_no_math
    def _repr_html_(self) -> str:
        parts = [f"<p><strong>{_esc(self.title)}</strong> — {_esc(self.summary())}</p>"]
        for warning in self.warnings:
            parts.append(
                '<div class="jp-AgentMemory-warning" style="border-left:4px solid #d9822b;'
                'background:rgba(217,130,43,0.12);padding:4px 8px;margin:4px 0">'
                f"⚠ {_esc(warning)}</div>"
            )
        if self.sections:
            rows = "".join(
                f"<tr><td>{_esc(s.name)}</td><td><code>{_esc(self._source(s))}</code></td>"
                f"<td>{_esc(s.chars)}</td><td>{_esc(s.tokens)}</td></tr>"
                for s in self.sections
            )
            parts.append(
                '<table class="jp-AgentMemory-sections"><thead><tr><th>section</th>'
                "<th>source</th><th>chars</th><th>~tokens</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
            )
        parts.append(
            '<pre class="jp-AgentMemory-prompt" style="white-space:pre-wrap">'
            f"{_esc(self.text)}</pre>"
        )
        return "".join(parts)

    def __str__(self) -> str:
        lines = [f"{self.title}: {self.summary()}"]
        lines.extend(f"WARNING: {w}" for w in self.warnings)
        if self.sections:
            width = max(len(s.name) for s in self.sections)
            for s in self.sections:
                source = self._source(s)
                lines.append(
                    f"  {s.name:<{width}}  {s.chars} chars, ~{s.tokens} tokens"
                    + (f"  {source}" if source else "")
                )
        rule = "-" * 72
        lines.extend([rule, self.text, rule])
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"PromptView({self.title!r}: {self.summary()})"


# --------------------------------------------------------------------------------------------
# Agent summary (``%agent_memory`` in a terminal)
# --------------------------------------------------------------------------------------------


class AgentSummary:
    """A short description of an agent folder: where it is and how big each part is."""

    def __init__(
        self,
        *,
        agent_id: str | None,
        path: Path | str,
        sizes: Mapping[str, int],
        facts_sha256: str = "",
        history_versions: int = 0,
        template: str | None = None,
    ):
        self.agent_id = agent_id
        self.path = Path(path)
        self.sizes = dict(sizes)
        self.facts_sha256 = facts_sha256
        self.history_versions = history_versions
        self.template = template

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("agent", self.agent_id if self.agent_id is not None else "(folder path)"),
            ("folder", str(self.path)),
        ]
        for name, size in self.sizes.items():
            value = format_size(size) if size >= 0 else "missing"
            if name == "FACT.md" and self.facts_sha256 and size >= 0:
                value += f" (sha256 {short_sha(self.facts_sha256)}, "
                value += f"{self.history_versions} earlier versions)"
            rows.append((name, value))
        if self.template:
            rows.append(("template", self.template))
        return rows

    @_no_math
    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{_esc(k)}</th><td><code>{_esc(v)}</code></td></tr>"
            for k, v in self._rows()
        )
        return f'<table class="jp-AgentMemory-summary">{body}</table>'

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Plain-text form for IPython (terminal output and ``text/plain``)."""
        p.text(str(self))

    def __repr__(self) -> str:
        return f"AgentSummary({self.agent_id!r}, {str(self.path)!r})"
