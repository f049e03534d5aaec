"""When two texts say the same thing (forgetting and ``lint`` compare under :func:`normalize`):
NFKC; case folded, then NFKC again (unless ``fold_case=False``); format characters (``Cf``)
removed; each run of white space but ``\\n`` made one space. Linear in the text.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

__all__ = ["normalize"]

_SPACES = re.compile(r"[^\S\n]+")  # \s covers Unicode spaces as str.isspace does


@functools.cache
def _invisible() -> dict[int, None]:
    """A translation table deleting every format character (category ``Cf``)."""
    return {c: None for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}


def normalize(text: str, *, fold_case: bool = True) -> str:
    """``text`` in the form forgetting and ``lint`` compare (see the module docstring)."""
    if text.isascii():  # no compatibility forms and no format characters
        return _SPACES.sub(" ", text.lower() if fold_case else text)
    text = unicodedata.normalize("NFKC", text)
    if fold_case:
        text = unicodedata.normalize("NFKC", text.casefold())
    return _SPACES.sub(" ", text.translate(_invisible()))
