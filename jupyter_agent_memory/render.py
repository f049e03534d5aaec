"""Turning memory text into HTML that cannot run anything and hides nothing.

Memory text may come from a prompt-injected model and front ends run output HTML, so every
surface renders it here: :func:`escape_html` for text, :func:`markdown_html` for Markdown
(nothing runs or loads, every line stays visible). Both run in linear time; the Markdown
parser is imported on first use. Details: docs/guarantees.md.
"""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser
from typing import Any

__all__ = [
    "NO_MATH_CLASS",
    "PLAIN_TEXT_NOTE",
    "escape_html",
    "markdown_html",
    "no_math_block",
    "sanitised_html",
    "visible_text",
]

#: Classes that stop a notebook's MathJax from typesetting ``$...$`` (and running TeX macros)
#: in memory text inside an element.
NO_MATH_CLASS = "mathjax_ignore tex2jax_ignore"

#: Shown above a text rendered as plain text because Markdown would have hidden part of it.
PLAIN_TEXT_NOTE = (
    "Shown as plain text: rendered as Markdown, part of this text would not be visible."
)

# What Markdown can produce, and nothing else. No <img>: see _image_as_link.
_TAGS = frozenset({
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
})  # fmt: skip
# An ordered item's ``value`` keeps its number as written.
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "li": {"value"}, "td": {"style"},
               "th": {"style"}}
_VOID_TAGS = frozenset({"br", "hr"})
_LINK_REL = "noopener noreferrer nofollow"
# Table alignment is the only style Markdown produces.
_TABLE_ALIGN = re.compile(r"text-align:\s*(?:left|right|center);?")
_URL_SCHEMES = frozenset({"http", "https", "mailto"})
# What a browser strips from both ends of a URL, and removes anywhere in it.
_URL_EDGE = "".join(map(chr, range(0x21)))
_URL_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Letters and digits: what must stay visible of a line (markup is punctuation and spaces).
_WORD = re.compile(r"[^\W_]+")


def escape_html(value: object) -> str:
    """``str(value)`` with ``& < > " '`` escaped: safe as element text and inside attributes."""
    return html.escape(str(value), quote=True)


def no_math_block(fragment: str, css_class: str = "") -> str:
    """Wrap an HTML fragment in a ``<div>`` that MathJax leaves alone (see NO_MATH_CLASS)."""
    classes = f"{css_class} {NO_MATH_CLASS}".strip()
    return f'<div class="{classes}">{fragment}</div>'


def _target_text(href: str, title: str | None) -> str:
    """`` (href "title")``: where a link points, as visible text."""
    from markdown_it.common.normalize_url import normalizeLinkText

    # Show the target as written, not percent- and punycode-encoded as the href needs it.
    shown = normalizeLinkText(href)
    return f" ({shown} \"{title}\")" if title else f" ({shown})"


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """``![alt](url)`` as a link with its target: a loaded image would send data when seen."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    title = token.attrGet("title")
    label = escape_html(f"image: {alt}")
    if not src:
        return label
    target = escape_html(_target_text(src, str(title) if title else None))
    return f'<a href="{escape_html(src)}">{label}</a>{target}'


def _link_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """Close a link, then show its target and title (an autolink's text is its target)."""
    start = idx - 1
    while tokens[start].type != "link_open":  # links do not nest: the nearest opening
        start -= 1
    opening = tokens[start]
    closing = self.renderToken(tokens, idx, options, env)
    if opening.markup == "autolink":
        return closing
    title = opening.attrGet("title")
    target = _target_text(str(opening.attrGet("href") or ""), str(title) if title else None)
    return closing + escape_html(target)


def _fence(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A fenced block, with its info string (``python``, or anything else) shown above it."""
    token = tokens[idx]
    block = f"<pre><code>{escape_html(token.content)}</code></pre>\n"
    info = token.info.strip()
    if not info:
        return block
    return f"<p><code>{escape_html(token.markup + info)}</code></p>\n{block}"


def _ordered_list_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    env.setdefault("ordered", []).append(int(tokens[idx].attrGet("start") or 1))
    return self.renderToken(tokens, idx, options, env)


def _ordered_list_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    env["ordered"].pop()
    return self.renderToken(tokens, idx, options, env)


def _list_item_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An ordered item keeps its number as written (``value`` where a browser would differ)."""
    token = tokens[idx]
    if token.info:  # an ordered item: its number as written
        number, counters = int(token.info), env["ordered"]
        if number != counters[-1]:
            token.attrSet("value", str(number))
        counters[-1] = number + 1
    return self.renderToken(tokens, idx, options, env)


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    class AsWritten(MarkdownIt):
        def normalizeLinkText(self, link: str) -> str:
            """An autolink shows its text as written (the default decodes %41 to A)."""
            return link

    # html=False shows raw HTML as text; link validation refuses javascript:, vbscript:,
    # file: and most data: targets. Reference definitions and entities stay text.
    parser = (AsWritten("commonmark", {"html": False}).enable(["table", "strikethrough"])
              .disable(["reference", "entity"]))
    parser.add_render_rule("image", _image_as_link)
    parser.add_render_rule("link_close", _link_close)
    parser.add_render_rule("fence", _fence)
    parser.add_render_rule("ordered_list_open", _ordered_list_open)
    parser.add_render_rule("ordered_list_close", _ordered_list_close)
    parser.add_render_rule("list_item_open", _list_item_open)
    return parser


class _Allowlist(HTMLParser):
    """Re-writes an HTML fragment from its tokens, keeping only what Markdown produces: kept
    tags and attributes written anew and escaped, text escaped, the rest dropped. Linear."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TAGS:
            return
        kept = [f' {name}="{escape_html(value)}"' for name, value in attrs
                if value is not None and _attribute_allowed(tag, name, value)]
        if tag == "a":
            kept.append(f' rel="{_LINK_REL}"')
        self.out.append(f"<{tag}{''.join(kept)}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _TAGS and tag not in _VOID_TAGS:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.out.append(html.escape(data, quote=False))


def _attribute_allowed(tag: str, name: str, value: str) -> bool:
    if name not in _ATTRIBUTES.get(tag, ()):
        return False
    if name in ("start", "value"):
        return value.isascii() and value.isdigit()
    if name == "style":
        return _TABLE_ALIGN.fullmatch(value) is not None
    if name == "href":
        return _url_allowed(value)
    return True


def _url_allowed(url: str) -> bool:
    """True for a relative URL or an allowed scheme, read as a browser reads it."""
    url = _URL_TAB_OR_NEWLINE.sub("", url.strip(_URL_EDGE))
    scheme = _URL_SCHEME.match(url)
    return scheme is None or scheme.group(1).lower() in _URL_SCHEMES


def sanitised_html(fragment: str) -> str:
    """``fragment`` with only the elements and attributes Markdown produces (links: relative,
    http, https or mailto, with ``rel``); the rest dropped, its text kept."""
    parser = _Allowlist()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out)


class _Text(HTMLParser):
    """The text a browser shows for a fragment we produced, ordered items' numbers included."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        # One entry per open list: the next item's number, or None in a bullet list.
        self.lists: list[int | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "ol":
            self.lists.append(_number(found.get("start"), 1))
        elif tag == "ul":
            self.lists.append(None)
        elif tag == "li" and self.lists and self.lists[-1] is not None:
            number = _number(found.get("value"), self.lists[-1])
            self.parts.append(f"{number}. ")
            self.lists[-1] = number + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("ol", "ul") and self.lists:
            self.lists.pop()

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _number(raw: str | None, default: int) -> int:
    return int(raw) if raw and raw.isdigit() else default


def visible_text(fragment: str) -> str:
    """The text of an HTML fragment as a reader sees it, ordered items' numbers included."""
    parser = _Text()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.parts)


def _words(text: str) -> str:
    return "".join(_WORD.findall(text))


def _hides_a_line(source: str, rendered_text: str) -> bool:
    """True unless each line's letters and digits appear in ``rendered_text`` in order."""
    shown = _words(rendered_text)
    at = 0
    for line in source.split("\n"):
        needed = _words(line)
        if not needed:
            continue
        found = shown.find(needed, at)
        if found < 0:
            return True
        at = found + len(needed)
    return False


def markdown_html(text: str) -> str:
    """Markdown ``text`` as sanitised HTML in a ``jp-AgentMemory-markdown`` no-math block:
    nothing runs or loads, every line stays visible (else plain text under PLAIN_TEXT_NOTE)."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    # The parser turns NUL into U+FFFD and CR LF into LF; check against what it read.
    checked = text.replace("\r\n", "\n").replace("\r", "\n")
    fragment = sanitised_html(_markdown().render(text))
    if _hides_a_line(checked, visible_text(fragment)):
        fragment = (f"<p><em>{escape_html(PLAIN_TEXT_NOTE)}</em></p>\n"
                    f"<pre><code>{escape_html(text)}</code></pre>\n")
    return no_math_block(fragment, "jp-AgentMemory-markdown")
