"""Credentials have no place in memory: recognising them, and refusing to store them.

Memory is injected into every future session's prompt and kept in history, so a key a model
stores once is repeated for ever. Writes whose text matches a well-known credential format
are refused with a -32602 error that names the kind of secret and tells the model not to store
credentials; :func:`find` is also what ``lint`` uses to report secrets already stored.

The patterns are the published, prefix-marked formats (cloud keys, tokens of the major model
and code hosts, private key blocks, bearer headers, passwords inside URLs): specific enough
that ordinary prose, hashes and identifiers do not match (see the corpus in the tests).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import INVALID_PARAMS, MemoryToolError

#: (kind shown to people and models, pattern, whether the match must start a word). Each
#: pattern begins with a literal, which Python's ``re`` searches for quickly; word starts are
#: checked afterwards, since a leading ``\b`` would disable that fast search.
PATTERNS: tuple[tuple[str, str, bool], ...] = (
    ("a private key block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", False),
    ("an AWS access key", r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}\b", True),
    (
        "an AWS secret access key",
        r"(?i:aws_?secret_?access_?key)\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}\b",
        False,
    ),
    ("a Google API key", r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", True),
    ("an Anthropic API key", r"sk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_\-]{20,}", True),
    (
        "an OpenAI API key",
        r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])"
        r"[A-Za-z0-9_\-]{32,}",
        True,
    ),
    ("a GitHub token", r"gh[pousr]_[A-Za-z0-9]{36,}\b", True),
    ("a GitHub token", r"github_pat_\w{22,}", True),
    ("a GitLab token", r"glpat-[A-Za-z0-9_\-]{20,}", True),
    ("a Hugging Face token", r"hf_[A-Za-z0-9]{30,}\b", True),
    ("a Slack token", r"xox[abprs]-[A-Za-z0-9\-]{10,}", True),
    ("a Stripe secret key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}\b", True),
    ("a JSON Web Token", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", True),
    ("a bearer token", r"(?i:bearer)\s+[A-Za-z0-9\-._~+/]{20,}=*", True),
    ("a password in a URL", r"://[^\s/:@'\"<>]+:[^\s/@'\"<>]+@[^\s/'\"<>]+", False),
)

#: For each pattern, lower-case strings one of which every match contains (lowered): a text
#: holding none of them is skipped without running the pattern. Every write is checked, and
#: most hold no hint at all, so this makes the check a few substring tests.
HINTS: dict[str, tuple[str, ...]] = {
    PATTERNS[0][1]: ("-----begin ",),
    PATTERNS[1][1]: ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    PATTERNS[2][1]: ("aws",),
    PATTERNS[3][1]: ("aiza",),
    PATTERNS[4][1]: ("sk-ant-",),
    PATTERNS[5][1]: ("sk-",),
    PATTERNS[6][1]: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    PATTERNS[7][1]: ("github_pat_",),
    PATTERNS[8][1]: ("glpat-",),
    PATTERNS[9][1]: ("hf_",),
    PATTERNS[10][1]: ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
    PATTERNS[11][1]: ("k_live_", "k_test_"),
    PATTERNS[12][1]: ("eyj",),
    PATTERNS[13][1]: ("bearer",),
    PATTERNS[14][1]: ("://",),
}

_COMPILED = tuple(
    (kind, re.compile(pattern), word, HINTS[pattern]) for kind, pattern, word in PATTERNS
)
_WORD = re.compile(r"\w")
# Any hint at all: one search that clears most texts at once.
_ANY_HINT = re.compile("|".join(re.escape(h) for hints in HINTS.values() for h in hints))


class Secret(NamedTuple):
    """One credential found in a text: its kind and where it is (never its value)."""

    kind: str
    start: int
    end: int


def find(text: str) -> list[Secret]:
    """Every credential-shaped span of ``text``, in order of position."""
    found: list[Secret] = []
    lowered = text.lower()
    if _ANY_HINT.search(lowered) is None:
        return found
    for kind, pattern, word, hints in _COMPILED:
        if not any(hint in lowered for hint in hints):
            continue
        for match in pattern.finditer(text):
            start = match.start()
            if word and start and _WORD.match(text, start - 1):
                continue  # inside a longer word: "mask-..." is no OpenAI key
            found.append(Secret(kind, start, match.end()))
    return sorted(found, key=lambda secret: secret.start)


def refuse(text: str, field: str) -> None:
    """Raise -32602 when ``text`` holds a credential, naming its kind and ``field``."""
    found = find(text)
    if found:
        raise MemoryToolError(
            f"Refusing to store '{field}': it contains what looks like {found[0].kind}. "
            "Do not store credentials in memory (it is loaded into every future session "
            "and kept in history); keep them in the environment or a secret manager and "
            "note only where they live",
            INVALID_PARAMS,
        )
