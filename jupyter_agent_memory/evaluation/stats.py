"""Question-level statistics: bootstrap intervals and paired comparisons of policies.

Every interval resamples **questions**, never seeds (each question's value is first averaged
over its seeds): a percentile bootstrap. Two policies are compared **paired** per question: a
bootstrap interval of the mean difference and a sign-flip permutation test (exact up to
``EXACT_LIMIT`` non-zero differences). All draws come from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .models import import_extra

__all__ = ["EXACT_LIMIT", "Comparison", "Interval", "bootstrap_interval", "paired_comparison"]

EXACT_LIMIT = 16
"""Up to this many non-zero differences the permutation test enumerates every sign pattern."""

_CHUNK = 2_000


def _check(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a whole number, at least 1, got {resamples!r}")


@dataclass(frozen=True)
class Interval:
    """A mean over questions and its bootstrap interval."""

    mean: float
    low: float
    high: float
    questions: int
    confidence: float


@dataclass(frozen=True)
class Comparison:
    """Policy ``a`` against policy ``b`` on the questions both answered: ``difference`` is
    ``mean_a - mean_b``, ``p_value`` the two-sided sign-flip test's, ``wins`` the questions
    where ``a`` scored higher, ``exact`` whether the test enumerated every sign pattern."""

    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float
    p_value: float
    questions: int
    wins: int
    losses: int
    ties: int
    confidence: float
    exact: bool


def _chunks(resamples: int) -> list[int]:
    """``resamples`` split into draws of at most ``_CHUNK`` (bounded memory)."""
    return [min(_CHUNK, resamples - start) for start in range(0, resamples, _CHUNK)]


def _percentiles(np: Any, values: Any, resamples: int, seed: int, confidence: float) -> Any:
    """The percentile bootstrap interval of the mean of ``values``, resampled with replacement."""
    rng = np.random.default_rng(seed)
    count = len(values)
    means = [values[rng.integers(0, count, size=(size, count))].mean(axis=1)
             for size in _chunks(resamples)]
    tail = (1 - confidence) / 2
    return np.quantile(np.concatenate(means), [tail, 1 - tail])


def bootstrap_interval(values: Sequence[float], *, confidence: float = 0.95,
                       resamples: int = 10_000, seed: int = 0) -> Interval:
    """The mean of ``values`` (one per question) and its percentile bootstrap interval; NaN
    values are left out, and no value at all gives NaNs."""
    _check(confidence, resamples)
    np = import_extra("numpy", "bootstrap_interval")
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if not len(data):
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    low, high = _percentiles(np, data, resamples, seed, confidence)
    return Interval(float(data.mean()), float(low), float(high), len(data), confidence)


def _sign_flip_p(np: Any, differences: Any, resamples: int, seed: int) -> tuple[float, bool]:
    nonzero = differences[differences != 0]
    count = len(nonzero)
    if not count:
        return 1.0, True
    observed = abs(nonzero.mean())
    # A tolerance, so a pattern equal to the observed mean up to rounding counts as extreme.
    bound = observed - 1e-12
    if count <= EXACT_LIMIT:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=count)))
        means = np.abs((signs * nonzero).mean(axis=1))
        return float((means >= bound).mean()), True
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in _chunks(resamples):
        signs = rng.choice((1.0, -1.0), size=(size, count))
        extreme += int((np.abs((signs * nonzero).mean(axis=1)) >= bound).sum())
    # The observed assignment is one of the possible ones (a valid Monte Carlo p-value).
    return (extreme + 1) / (resamples + 1), False


def paired_comparison(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95,
                      resamples: int = 10_000, seed: int = 0) -> Comparison:
    """Compare per-question values ``a[i]`` and ``b[i]`` of two policies (see the module doc);
    questions where either value is NaN are left out."""
    _check(confidence, resamples)
    if len(a) != len(b):
        raise ValueError(f"paired values need one pair per question: {len(a)} and {len(b)}")
    np = import_extra("numpy", "paired_comparison")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (math.isnan(x) or math.isnan(y))]
    if not pairs:
        nan = math.nan
        return Comparison(nan, nan, nan, nan, nan, nan, 0, 0, 0, 0, confidence, True)
    left, right = np.asarray(pairs, dtype=float).T
    differences = left - right
    low, high = _percentiles(np, differences, resamples, seed, confidence)
    p_value, exact = _sign_flip_p(np, differences, resamples, seed)
    return Comparison(
        mean_a=float(left.mean()), mean_b=float(right.mean()),
        difference=float(differences.mean()), low=float(low), high=float(high),
        p_value=p_value, questions=len(pairs), wins=int((differences > 0).sum()),
        losses=int((differences < 0).sum()), ties=int((differences == 0).sum()),
        confidence=confidence, exact=exact,
    )
