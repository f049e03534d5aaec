"""A one-line progress display for long runs: updated in place in a notebook or a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress", "make_progress"]


class Progress:
    """Shows ``<label>: <done>/<total> <unit> · <text>`` and updates it in place: in a notebook
    through an IPython display handle, elsewhere by rewriting one line of ``stream`` (standard
    error by default), ended on ``close``."""

    def __init__(self, total: int, label: str, unit: str, stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream
        self._handle: Any = None
        self._width = 0
        shell = sys.modules.get("IPython")  # a kernel's shell: a notebook, not a terminal
        ipython = shell.get_ipython() if shell is not None and stream is None else None
        if ipython is not None and hasattr(ipython, "kernel"):
            from IPython.display import display

            self._handle = display(self._line(0, "starting"), display_id=True)

    def _line(self, done: int, text: str) -> str:
        return f"{self.label}: {done}/{self.total} {self.unit}" + (f" · {text}" if text else "")

    def update(self, done: int, text: str = "") -> None:
        """Show that ``done`` of ``total`` are finished; ``text`` says what is going on."""
        line = self._line(done, text)
        if self._handle is not None:
            self._handle.update(line)
            return
        stream = self.stream or sys.stderr
        stream.write("\r" + line.ljust(self._width))
        stream.flush()
        self._width = len(line)

    def close(self) -> None:
        """End the line (terminal only; the notebook output stays as it is)."""
        if self._handle is None and self._width:
            stream = self.stream or sys.stderr
            stream.write("\n")
            stream.flush()


def make_progress(progress: Any, total: int, label: str, unit: str) -> Progress:
    """``progress`` (``True``, a ``Progress``, a function, or ``None``) as a ``Progress``."""
    if progress is True:
        return Progress(total, label, unit)
    if isinstance(progress, Progress):
        return progress
    if progress is None or progress is False or callable(progress):
        return _HookProgress(progress or None, total)
    raise TypeError(f"progress must be True, a Progress or a function, got {progress!r}")


class _HookProgress(Progress):
    def __init__(self, hook: Callable[[int, int, str], None] | None, total: int) -> None:
        self.hook = hook
        self.total = total

    def update(self, done: int, text: str = "") -> None:
        if self.hook is not None:
            self.hook(done, self.total, text)

    def close(self) -> None:
        pass
