"""Turning memory text into HTML that cannot run anything.

Memory files and journal entries are written by a language model, and a model can be
prompt-injected. Notebook front ends trust the outputs of a live kernel (and an HTML export
copies them verbatim), so any HTML we emit is executed with the page's rights. Every surface
that renders memory text goes through this module:

* :func:`escape_html` for text shown as text (journal entries, prompts, diffs, paths).
* :func:`markdown_html` for text shown as Markdown (FACT.md). Raw HTML in the source is not
  interpreted but shown as text, link targets with a script-capable scheme are not linked,
  images become plain links (so nothing is fetched by merely displaying a memory), and the
  produced HTML passes an allowlist sanitiser as a second, independent layer.

The Markdown parser and the sanitiser are imported on first use only, so importing this
module (and ``%load_ext jupyter_agent_memory``) stays cheap.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

__all__ = ["NO_MATH_CLASS", "escape_html", "markdown_html", "no_math_block"]

#: Classes that stop a notebook's MathJax from typesetting ``$...$`` inside an element.
#: JupyterLab typesets the text of every HTML output: memory text between dollar signs would
#: be replaced by typeset math (no longer reading as written) and its TeX macros run.
NO_MATH_CLASS = "mathjax_ignore tex2jax_ignore"

# What Markdown can produce, and nothing else. No <img>: see _image_as_link.
_TAGS = frozenset({
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
})  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "td": {"style"},
    "th": {"style"},
}
# Table alignment is the only style Markdown produces.
_STYLE_PROPERTIES = frozenset({"text-align"})
_URL_SCHEMES = frozenset({"http", "https", "mailto"})
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_html(value: object) -> str:
    """``str(value)`` with ``& < > " '`` escaped: safe as element text and inside attributes."""
    return html.escape(str(value), quote=True)


def no_math_block(fragment: str, css_class: str = "") -> str:
    """Wrap an HTML fragment in a ``<div>`` that MathJax leaves alone (see NO_MATH_CLASS)."""
    classes = f"{css_class} {NO_MATH_CLASS}".strip()
    return f'<div class="{classes}">{fragment}</div>'


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """Render ``![alt](url)`` as a link to the image instead of loading it.

    A displayed image is a request the page makes on its own: a prompt-injected model could
    put data in the URL and learn it the moment someone looks at its memory.
    """
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    label = escape_html(f"image: {alt}")
    if not src:
        return label
    return f'<a href="{escape_html(src)}">{label}</a>'


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # "commonmark" with html=False shows raw HTML as text; its link validation refuses
    # javascript:, vbscript:, file: and data: (except a few image types) targets.
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    parser.add_render_rule("image", _image_as_link)
    return parser


def _sanitise(fragment: str) -> str:
    import nh3

    return nh3.clean(
        fragment,
        tags=set(_TAGS),
        attributes={tag: set(names) for tag, names in _ATTRIBUTES.items()},
        url_schemes=set(_URL_SCHEMES),
        filter_style_properties=set(_STYLE_PROPERTIES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def markdown_html(text: str) -> str:
    """Markdown ``text`` as sanitised HTML in a ``jp-AgentMemory-markdown`` no-math block.

    Raw HTML in ``text`` appears as visible, escaped text; no element, attribute or URL that
    can run script or load a resource survives, and no TeX is typeset. A lone surrogate (half
    of an emoji, which no wire format carries) shows as U+FFFD instead of failing the display.
    """
    text = _LONE_SURROGATE.sub("\ufffd", text)
    return no_math_block(_sanitise(_markdown().render(text)), "jp-AgentMemory-markdown")
