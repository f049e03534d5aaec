"""Memory text cannot end its ``<soul>``/``<user>``/``<facts>`` prompt block or open one of the
builder's sections: :func:`guard_block_text` escapes a closing tag of any block (any case,
spacing, invisible or full-width characters: ``<\\/facts>``) and a heading, ATX or underlined,
naming ``Memories``, ``Bootstrap Mode`` or ``Agent Knowledge`` (``\\## Memories``). Everything
else is left byte for byte; the work is linear in the text's length.
"""

from __future__ import annotations

import re

__all__ = ["BLOCK_NAMES", "HEADING_NAMES", "guard_block_text"]

BLOCK_NAMES = ("soul", "user", "facts")
HEADING_NAMES = ("memories", "bootstrap mode", "agent knowledge")

_INVISIBLE = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff"
_GAP = f"[{_INVISIBLE}]*"
_SPACE = f"[\\s{_INVISIBLE}]"


def _letters(word: str) -> str:
    """A pattern for ``word`` in any case, ASCII or full width, invisible characters allowed."""
    parts = []
    for char in word:
        if char == " ":
            parts.append(f"{_SPACE}+")
        else:
            wide = chr(ord(char) + 0xFEE0) + chr(ord(char.upper()) + 0xFEE0)  # "ａ", "Ａ"
            parts.append(f"[{char}{char.upper()}{wide}]{_GAP}")
    return "".join(parts)


_CLOSING_TAG = re.compile(
    f"[<＜﹤]{_SPACE}*(?P<slash>[/／⁄∕]){_SPACE}*"
    f"(?:{'|'.join(_letters(name) for name in BLOCK_NAMES)})(?![\\w-])"
)
_HEADING_NAME = f"(?:{'|'.join(_letters(name) for name in HEADING_NAMES)})"
_ATX_HEADING = re.compile(
    f"(?P<indent>{_SPACE}*)[#＃](?:{_GAP}[#＃]){{0,5}}{_SPACE}+{_HEADING_NAME}"
    f"[\\s{_INVISIBLE}#＃:：.!]*"
)
_NAME_LINE = re.compile(f"{_SPACE}*{_HEADING_NAME}[\\s{_INVISIBLE}:：.!]*")
_UNDERLINE = re.compile(f"(?P<indent>{_SPACE}*)(?:=+|-+){_SPACE}*")
# Text without any of these cannot hold a tag or a heading, whatever else it holds.
_MAY_CLOSE = re.compile("[<＜﹤]")
_MAY_HEAD = re.compile(f"[#＃]|[{_INVISIBLE}]|memories|bootstrap|knowledge", re.IGNORECASE)


def guard_block_text(text: str) -> str:
    """``text`` made safe inside a memory block (unchanged when nothing needs escaping)."""
    if _MAY_CLOSE.search(text):
        text = _CLOSING_TAG.sub(lambda m: _escape_at(m, "slash"), text)
    if _MAY_HEAD.search(text):
        text = _guard_headings(text)
    return text


def _escape_at(match: re.Match[str], group: str) -> str:
    """The matched text with a backslash before ``group``."""
    offset = match.start(group) - match.start()
    whole = match.group()
    return whole[:offset] + "\\" + whole[offset:]


def _guard_headings(text: str) -> str:
    # Lines end where str.splitlines ends them, so a lone CR or U+2028 cannot hide one.
    lines = text.splitlines(keepends=True)
    changed = False
    for index, line in enumerate(lines):
        body = _body(line)
        found = _ATX_HEADING.fullmatch(body)
        if found is None and index:
            underline = _UNDERLINE.fullmatch(body)
            if underline is not None and _NAME_LINE.fullmatch(_body(lines[index - 1])):
                found = underline
        if found is not None:
            cut = found.end("indent")
            lines[index] = line[:cut] + "\\" + line[cut:]
            changed = True
    return "".join(lines) if changed else text


def _body(line: str) -> str:
    return line.rstrip("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
