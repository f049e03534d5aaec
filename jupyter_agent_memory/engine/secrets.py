"""Credentials have no place in memory: a write matching a prefix-marked credential format
(:data:`FORMATS`; invisible characters ignored) is refused with -32602 naming its kind, and
:func:`find` is what ``lint`` reports with. Placeholders and prose do not match.

Every check is linear: candidates are found by their literal prefix and matched once, and after
a failure the search skips the run of key characters the candidate started.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import MemoryToolError

#: Characters that render as nothing; ignored while looking for credentials.
INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u2060\ufeff"
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
#: The characters most keys and tokens are made of.
_KEY_RUN = re.compile(r"[A-Za-z0-9_\-]*")

# A password that only stands for one: a variable, a template slot, or a documented word.
_PLACEHOLDER = re.compile(
    r"(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{?[^{}]*\}?\}|%\([^)]*\)s|\[[^\]]*\]|\*+|x+|\.\.\.|…"
    r"|(?:your|my|the)?[_\-]?(?:pass(?:word|wd)?|pwd|secret|token|changeme|example|placeholder))",
    re.IGNORECASE,
)


class Format(NamedTuple):
    """A credential format: ``kind`` as people read it, the literal ``start`` of a match, the
    whole ``pattern``, and lower-case ``hints`` (a text holding none is skipped at once)."""

    kind: str
    start: re.Pattern[str]
    pattern: re.Pattern[str]
    hints: tuple[str, ...]


def _format(kind: str, start: str, rest: str, *hints: str, word_start: bool = True) -> Format:
    return Format(
        kind,
        re.compile(("(?<!\\w)" if word_start else "") + f"(?:{start})"),
        re.compile(f"(?:{start}){rest}"),
        hints,
    )


#: Every format refused on write and reported by ``lint``. ``(?!...)`` keeps a longer run
#: of key characters from counting as a key of a fixed length.
FORMATS: tuple[Format, ...] = (
    _format("a private key block", "-----BEGIN ",
            r"(?:[A-Z0-9]{1,12} ){0,4}PRIVATE KEY(?: BLOCK)?-----",
            "-----begin ", word_start=False),
    _format("an AWS access key", "A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)",
            r"[A-Z0-9]{16}(?![A-Za-z0-9_])",
            "akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    # A label, as a variable or prose ("my AWS secret access key is"), then 40 base64 chars.
    _format("an AWS secret access key", "(?i:aws)",
            r"[\s_\-]{0,3}(?i:secret)(?:[\s_\-]{0,3}(?i:access))?[\s_\-]{0,3}(?i:key)"
            r"[\s\"'`:=]{0,6}(?:(?i:is|was|=>|->)[\s\"'`:=]{1,6})?"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", "aws", word_start=False),
    _format("a Google API key", "AIza", r"[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", "aiza"),
    _format("a Google OAuth client secret", "GOCSPX-",
            r"[A-Za-z0-9_\-]{28}(?![A-Za-z0-9_\-])", "gocspx-"),
    _format("an Anthropic API key", "sk-ant-", r"[a-z]{3,6}\d{2}-[A-Za-z0-9_\-]{20,}", "sk-ant-"),
    _format("an OpenAI API key", "sk-(?!ant-)",
            r"(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])"
            r"[A-Za-z0-9_\-]{32,}", "sk-"),
    _format("a Groq API key", "gsk_", r"[A-Za-z0-9]{52}(?![A-Za-z0-9_])", "gsk_"),
    _format("a GitHub token", "gh[pousr]_", r"[A-Za-z0-9]{36,}(?![A-Za-z0-9_])",
            "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _format("a GitHub token", "github_pat_", r"[A-Za-z0-9_]{22,}", "github_pat_"),
    _format("a GitLab token", "glpat-", r"[A-Za-z0-9_\-]{20,}", "glpat-"),
    _format("a Hugging Face token", "hf_", r"[A-Za-z0-9]{30,}(?![A-Za-z0-9_])", "hf_"),
    _format("an npm token", "npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9_])", "npm_"),
    _format("a PyPI token", "pypi-AgEIcHlwaS5vcmc", r"[A-Za-z0-9_\-]{50,}", "pypi-ageichlwas5vcmc"),
    _format("a Slack token", "xox[abprs]-", r"[A-Za-z0-9\-]{10,}",
            "xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
    _format("a Slack webhook URL", r"https://hooks\.slack\.com/",
            r"(?:services|workflows|triggers)/T[A-Z0-9]{6,12}/[A-Z0-9]{6,12}/[A-Za-z0-9]{16,48}",
            "hooks.slack.com/", word_start=False),
    _format("a SendGrid API key", r"SG\.",
            r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])", "sg."),
    _format("a Stripe secret key", "[sr]k_(?:live|test)_", r"[A-Za-z0-9]{16,}(?![A-Za-z0-9_])",
            "k_live_", "k_test_"),
    _format("a JSON Web Token", "eyJ",
            r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", "eyj"),
    # A token has a digit and a letter: "Bearer authentication" is prose, not a token.
    _format("a bearer token", "(?i:bearer)",
            r"[\t :]{1,4}(?=[A-Za-z0-9\-._~+/]{0,4096}\d)(?=[A-Za-z0-9\-._~+/]{0,4096}[A-Za-z])"
            r"[A-Za-z0-9\-._~+/]{20,4096}=*", "bearer"),
    _format("a password in a URL", "://",
            r"[^\s/:@'\"<>]{1,256}:(?P<password>[^\s/@'\"<>]{1,256})@[^\s/'\"<>@]{1,256}",
            "://", word_start=False),
)


class Secret(NamedTuple):
    """One credential found in a text: its kind and where it is (never its value)."""

    kind: str
    start: int
    end: int


def find(text: str) -> list[Secret]:
    """Every credential-shaped span of ``text``, by position (invisible characters counted)."""
    visible, positions = _without_invisible(text)
    lowered = visible.lower()
    found: list[Secret] = []
    for fmt in FORMATS:
        if not any(hint in lowered for hint in fmt.hints):
            continue
        for start, end in _matches(visible, fmt):
            if positions is not None:
                start, end = positions[start], positions[end - 1] + 1
            found.append(Secret(fmt.kind, start, end))
    return sorted(found, key=lambda secret: secret.start)


def _matches(text: str, fmt: Format) -> list[tuple[int, int]]:
    """Spans of ``fmt`` in ``text``, tried once per candidate start (see the module docstring)."""
    spans = []
    pos = 0
    while (candidate := fmt.start.search(text, pos)) is not None:
        start = candidate.start()
        match = fmt.pattern.match(text, start)
        if match is not None and _accepted(match):
            spans.append((start, match.end()))
            pos = match.end()
        else:
            run = _KEY_RUN.match(text, start)  # never None: the pattern matches "" too
            pos = max(candidate.end(), run.end() if run else start)
    return spans


def _accepted(match: re.Match[str]) -> bool:
    """Whether a match is a real credential: a URL whose password is a placeholder is not."""
    password = match.groupdict().get("password")
    return password is None or _PLACEHOLDER.fullmatch(password) is None


def _without_invisible(text: str) -> tuple[str, list[int] | None]:
    """``text`` without invisible characters, and each kept one's position (None: none gone)."""
    if _INVISIBLE.search(text) is None:
        return text, None
    positions = [i for i, char in enumerate(text) if char not in INVISIBLE]
    return "".join(text[i] for i in positions), positions


def refuse(text: str, field: str) -> None:
    """Raise -32602 when ``text`` holds a credential, naming its kind and ``field``."""
    if found := find(text):
        raise MemoryToolError(
            f"Refusing to store '{field}': it contains what looks like {found[0].kind}. "
            "Do not store credentials in memory (it is loaded into every future session "
            "and kept in history); keep them in the environment or a secret manager and "
            "note only where they live"
        )
