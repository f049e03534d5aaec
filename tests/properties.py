"""How many examples a property test draws: its own count in the full run, and no more than
the loaded profile's in the quick lane (``--hypothesis-profile=dev``)."""

from __future__ import annotations

from hypothesis import settings

#: The ``ci`` profile keeps Hypothesis's default of 100 examples; ``dev`` draws 10.
FULL_RUN_EXAMPLES = 100


def examples(full: int) -> int:
    """``full`` under the full profile; the profile's own (smaller) count otherwise."""
    current = settings.default.max_examples
    return full if current >= FULL_RUN_EXAMPLES else min(full, current)
