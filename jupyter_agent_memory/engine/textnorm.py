"""One rule for when two texts say the same thing, whatever way they were typed or pasted.

Forgetting and ``lint`` compare text under :func:`normalize`, so a copy of a forgotten text
cannot survive by being spelt with other code points than the ones the user typed:

1. Unicode NFKC: composed and decomposed accents are one (``"é"`` typed on Linux and
   ``"e"`` + U+0301 pasted on macOS), and compatibility forms become their plain letters
   and digits (full-width ``４４１７`` is ``4417``, ``ﬁ`` is ``fi``, no-break and other
   typographic spaces are spaces);
2. case folded (``str.casefold``: ``"ß"`` is ``"ss"``), then NFKC again, because folding
   can leave a sequence NFKC would compose; skipped with ``fold_case=False``, for rules
   (credential formats) where case is part of what they recognise;
3. invisible format characters removed: zero-width space, zero-width (non-)joiner, word
   joiner, soft hyphen, byte-order mark, bidirectional controls and the rest of Unicode's
   category ``Cf``;
4. every run of white space other than a line break becomes one space.

Line breaks (``\\n``) are kept, so a file's lines stay lines. The work is linear in the text.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

__all__ = ["contains", "normalize"]

# Runs of white space but line feeds; \s covers Unicode spaces as str.isspace does.
_SPACES = re.compile(r"[^\S\n]+")


@functools.cache
def _invisible() -> dict[int, None]:
    """A translation table deleting every format character (category ``Cf``)."""
    return {
        code: None
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) == "Cf"
    }


def normalize(text: str, *, fold_case: bool = True) -> str:
    """``text`` in the form forgetting and ``lint`` compare (see the module docstring)."""
    if text.isascii():
        # The common case: ASCII has no compatibility forms and no format characters.
        folded = text.lower() if fold_case else text
        return _SPACES.sub(" ", folded)
    text = unicodedata.normalize("NFKC", text)
    if fold_case:
        text = unicodedata.normalize("NFKC", text.casefold())
    text = text.translate(_invisible())
    return _SPACES.sub(" ", text)


def contains(haystack: str, needle: str, *, fold_case: bool = True) -> bool:
    """Whether ``needle`` occurs in ``haystack`` once both are normalized."""
    return normalize(needle, fold_case=fold_case) in normalize(haystack, fold_case=fold_case)
