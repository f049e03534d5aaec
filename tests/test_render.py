"""The sanitising Markdown renderer every surface shares: nothing runs, nothing is hidden.

The rule under test: every line the model receives is visible in the rendered view. A line is
visible when its letters and digits appear in the text a browser shows (markup is punctuation),
in the order of the source. The check here is written independently of the renderer's own.
"""

from __future__ import annotations

import re
import time

import pytest
from hostile import HOSTILE_FACTS, assert_inert
from hypothesis import given
from hypothesis import strategies as st
from markdown_cases import HIDING_CASES

from jupyter_agent_memory.render import (
    PLAIN_TEXT_NOTE,
    markdown_html,
    sanitised_html,
    visible_text,
)

WORD = re.compile(r"[^\W_]+")


def hidden_lines(source: str) -> list[str]:
    """The source lines whose letters and digits the rendered text does not show, in order."""
    shown = "".join(WORD.findall(visible_text(markdown_html(source))))
    missing, at = [], 0
    for line in source.splitlines():
        needed = "".join(WORD.findall(line))
        found = shown.find(needed, at)
        if found < 0:
            missing.append(line)
        else:
            at = found + len(needed)
    return missing


@pytest.mark.parametrize("name", sorted(HIDING_CASES))
def test_every_line_of_a_hiding_case_is_visible(name: str) -> None:
    source, line = HIDING_CASES[name]
    assert line in source.splitlines()
    assert hidden_lines(source) == []
    assert "".join(WORD.findall(line)) in "".join(WORD.findall(visible_text(markdown_html(source))))
    assert_inert(markdown_html(source))


# Constructs that render as Markdown (no fallback) and still show every line.
RENDERED = {
    "[//]: # (a note)\n": "<p>[//]: # (a note)</p>",
    "[a]: <https://example.org/x> 'a title'\n": (
        '<p>[a]: <a href="https://example.org/x" rel="noopener noreferrer nofollow">'
        "https://example.org/x</a> 'a title'</p>"
    ),
    "- [docs](https://example.org/a \"t\")\n": (
        '<li><a href="https://example.org/a" title="t" rel="noopener noreferrer nofollow">docs</a>'
        ' (https://example.org/a "t")</li>'
    ),
    "1. one\n7. seven\n": '<li>one</li>\n<li value="7">seven</li>',
    "```python run this\nx = 1\n```\n": (
        "<p><code>```python run this</code></p>\n<pre><code>x = 1\n</code></pre>"
    ),
    "- &amp; &lt;b&gt;\n": "<li>&amp;amp; &amp;lt;b&amp;gt;</li>",
    "- ![alt](https://example.org/i.png)\n": (
        '<li><a href="https://example.org/i.png" rel="noopener noreferrer nofollow">image: alt</a>'
        " (https://example.org/i.png)</li>"
    ),
    "- <https://example.org/%41>\n": (
        '<li><a href="https://example.org/%41" rel="noopener noreferrer nofollow">'
        "https://example.org/%41</a></li>"
    ),
    "- ``<h1>x</h1>`` then <h2>y</h2>\n": (
        "<li><code>&lt;h1&gt;x&lt;/h1&gt;</code> then &lt;h2&gt;y&lt;/h2&gt;</li>"
    ),
}


@pytest.mark.parametrize("source", sorted(RENDERED))
def test_markdown_renders_and_shows_what_it_used_to_hide(source: str) -> None:
    rendered = markdown_html(source)
    assert RENDERED[source] in rendered
    assert PLAIN_TEXT_NOTE not in rendered
    assert hidden_lines(source) == []


def test_a_line_markdown_would_still_hide_turns_the_whole_text_plain() -> None:
    # GFM drops a row's cells beyond the header's: no rule can show them inside the table.
    source, line = HIDING_CASES["table-extra-cell"]
    rendered = markdown_html(source)
    assert PLAIN_TEXT_NOTE in rendered
    assert "<table>" not in rendered
    assert "<pre><code>| fact | source |\n|---|---|\n" in rendered
    assert line in visible_text(rendered)
    assert_inert(rendered)


def test_ordinary_facts_render_as_markdown() -> None:
    source = (
        "# Facts\n\n- The user prefers **metric** units.\n- Costs $5 and $6 today.\n\n"
        "| key | value |\n|---|---|\n| a | 1 |\n\n> quoted\n\n`code`\n"
    )
    rendered = markdown_html(source)
    assert PLAIN_TEXT_NOTE not in rendered
    for piece in ("<h1>Facts</h1>", "<strong>metric</strong>", "<th>key</th>", "<td>1</td>",
                  "<blockquote>", "<code>code</code>"):
        assert piece in rendered
    assert hidden_lines(source) == []


def test_hostile_facts_stay_inert_and_visible() -> None:
    rendered = markdown_html(HOSTILE_FACTS)
    assert_inert(rendered)
    assert hidden_lines(HOSTILE_FACTS) == []


def test_lone_surrogates_nul_and_carriage_returns() -> None:
    source = "- half \ud83d of an emoji\r\n- a NUL \x00 here\r- end\n"
    rendered = markdown_html(source)
    assert "half \ufffd of an emoji" in rendered
    assert PLAIN_TEXT_NOTE not in rendered
    assert visible_text(rendered).count("- ") == 0  # list markers are markup


# The second layer on its own: HTML the Markdown parser never produces, as an attacker
# would write it, comes out as text or goes.
SANITISED = {
    "<script>alert(1)</script>": "alert(1)",
    "<img src=x onerror=alert(1)>": "",
    '<p onclick="alert(1)" class="x">t</p>': "<p>t</p>",
    '<a href="javascript:alert(1)">x</a>': '<a rel="noopener noreferrer nofollow">x</a>',
    '<a href=" \x01JaVa\tScRiPt:alert(1)">x</a>': '<a rel="noopener noreferrer nofollow">x</a>',
    '<a href="java&#x09;script&colon;alert(1)">x</a>': (
        '<a rel="noopener noreferrer nofollow">x</a>'
    ),
    '<a href="data:text/html,x" rel="opener">x</a>': '<a rel="noopener noreferrer nofollow">x</a>',
    '<a href="/api/x?a=1&amp;b=&quot;2">x</a>': (
        '<a href="/api/x?a=1&amp;b=&quot;2" rel="noopener noreferrer nofollow">x</a>'
    ),
    '<a href="MAILTO:a@example.org" title="&lt;t&gt;">m</a>': (
        '<a href="MAILTO:a@example.org" title="&lt;t&gt;" rel="noopener noreferrer nofollow">'
        "m</a>"
    ),
    '<ol start="3x"><li value="7">a</li><li value="-1">b</li></ol>': (
        '<ol><li value="7">a</li><li>b</li></ol>'
    ),
    '<td style="text-align:right">a</td><td style="background:url(x)">b</td>': (
        '<td style="text-align:right">a</td><td>b</td>'
    ),
    "<!-- hidden --><br/><hr><svg><use href=x></svg>&lt;b&gt;": "<br><hr>&lt;b&gt;",
    "<style>p{}</style><textarea><p>x</textarea>": "p{}<p>x",
}


@pytest.mark.parametrize("fragment", sorted(SANITISED))
def test_the_allowlist_rewrites_any_html_into_what_markdown_produces(fragment: str) -> None:
    assert sanitised_html(fragment) == SANITISED[fragment]
    assert_inert(sanitised_html(fragment))


# Pieces an attacker combines into HTML that parsers disagree on.
_HTML_PIECES = st.sampled_from([
    "<", ">", "</", "/>", "&", "&amp;", "&#x09;", "&colon;", "&#0;", '"', "'", "=", " ", "\t",
    "\n", "\x00", "<!--", "-->", "<!", "<?", "]]>", "a", "p", "br", "script", "style",
    "img", "svg", "textarea", "title", "href", "src", "onerror", "style", "value", "start",
    "javascript:", "JaVaScRiPt:", "data:", "http://x", "text-align:right", "7",
])  # fmt: skip


@given(st.lists(_HTML_PIECES, max_size=40).map("".join))
def test_the_allowlist_output_is_inert_and_stable(fragment: str) -> None:
    cleaned = sanitised_html(fragment)
    assert_inert(cleaned)
    # Written anew from its tokens: reading it again changes nothing.
    assert sanitised_html(cleaned) == cleaned


# Inputs that make naive Markdown parsers (and naive checks) superlinear.
ADVERSARIAL = {
    "backticks": lambda n: "`" * n,
    "backtick runs": lambda n: "".join("`" * k + "a" for k in range(1, 2 * int(n**0.5)))[:n],
    "open brackets": lambda n: "[" * n,
    "close brackets": lambda n: "]" * n,
    "unclosed links": lambda n: ("[a](" * n)[:n],
    "nested brackets": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "image openers": lambda n: ("![" * n)[: n // 2] + ("](" * n)[: n // 2],
    "definitions": lambda n: ("[a]: <b> 'c'\n" * n)[:n],
    "emphasis": lambda n: ("*a_" * n)[:n],
    "less-than": lambda n: "<" * n,
    "unclosed tags": lambda n: ("<a " * n)[:n],
    "entities": lambda n: ("&amp;" * n)[:n],
    "ampersands": lambda n: "&" * n,
    "ampersands in a link target": lambda n: "[a](http://x/?" + "&" * (n - 20) + ")",
    "ampersands in a link title": lambda n: '[a](http://x "' + "&" * (n - 20) + '")',
    "quotes in a link title": lambda n: '[a](http://x "' + "'" * (n - 20) + '")',
    "backslashes": lambda n: "\\" * n,
    "table": lambda n: "|a" * (n // 6) + "\n" + "|-" * (n // 6) + "\n" + "|a" * (n // 6),
    "quotes and lists": lambda n: ("> - " * n)[:n],
    "one long word": lambda n: "a" * n,
}


def _seconds(text: str) -> float:
    start = time.perf_counter()
    markdown_html(text)
    return time.perf_counter() - start


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_rendering_is_linear_in_the_text(name: str) -> None:
    """64 KiB and 1 MiB of the same shape, timed in one run: 16 times the text may take at
    most 64 times as long (quadratic work would take 256 times)."""
    make = ADVERSARIAL[name]
    small, large = make(64 * 1024), make(1024 * 1024)
    assert len(large) >= 15 * len(small)
    small_time = min(_seconds(small) for _ in range(3))
    large_time = _seconds(large)
    assert large_time <= 64 * max(small_time, 0.005), (small_time, large_time)
    assert hidden_lines(small[:4096]) == []
