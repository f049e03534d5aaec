"""What memory text cannot do inside its prompt block: end the block, or open a section.

SOUL.md, USER.md and FACT.md reach the prompt inside ``<soul>``, ``<user>`` and ``<facts>``
blocks. A model (or a person reading the prompt) must never mistake a line of memory for the
end of its block or for one of the builder's own headings, so :func:`guard_block_text` escapes
what a reader would take for either, not only its exact spelling:

- a closing tag of any block: any case, spaces or zero-width characters around or inside the
  name, anything after the name (``</facts x="1">``, ``</facts/>``, ``</FACTS >``,
  ``</fa\u00adcts>``), full-width ``＜`` and ``／`` too. The slash gets a backslash:
  ``<\\/facts>``.
- a heading line naming ``Memories``, ``Bootstrap Mode`` or ``Agent Knowledge``: one to six
  ``#`` (or ``＃``) at any indentation, followed by any space (a no-break space too), the name
  in any case with invisible characters anywhere, and trailing punctuation or ``#``
  (``## Memories:``). The first ``#`` gets a backslash: ``\\## Memories``.
- the same names underlined (``Memories`` followed by ``===`` or ``---``): the underline gets
  a backslash, so it is text, not a heading rule.

Everything else is left byte for byte, so well-formed memory reads exactly as written. The
work is one pass over the text (and one over its lines), linear in its length.
"""

from __future__ import annotations

import re

__all__ = ["BLOCK_NAMES", "HEADING_NAMES", "guard_block_text"]

BLOCK_NAMES = ("soul", "user", "facts")
HEADING_NAMES = ("memories", "bootstrap mode", "agent knowledge")

# Characters that render as nothing: a reader sees through them.
_INVISIBLE = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff"
_GAP = f"[{_INVISIBLE}]*"
_SPACE = f"[\\s{_INVISIBLE}]"


def _letters(word: str) -> str:
    """A pattern for ``word`` in any case, in ASCII or full width, with invisible characters
    between its letters and any space between its words."""
    parts = []
    for char in word:
        if char == " ":
            parts.append(f"{_SPACE}+")
        else:
            wide_lower = chr(ord(char) - ord("a") + ord("ａ"))
            wide_upper = chr(ord(char) - ord("a") + ord("Ａ"))
            parts.append(f"[{char}{char.upper()}{wide_lower}{wide_upper}]{_GAP}")
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
    """``text`` made safe to place inside a ``<soul>``/``<user>``/``<facts>`` block.

    See the module docstring for what is escaped; text holding none of it is returned
    unchanged, so well-formed memory is placed byte for byte.
    """
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
