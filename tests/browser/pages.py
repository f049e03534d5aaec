"""Helpers the browser tests share: notebooks to open, waiting for a kernel, themes, and where
screenshots go."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

#: True once the current notebook's kernel is connected and idle (needs expose_app_in_browser).
KERNEL_IDLE = """
() => {
  const widget = window.jupyterapp.shell.currentWidget;
  const kernel = widget && widget.sessionContext && widget.sessionContext.session &&
    widget.sessionContext.session.kernel;
  return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}
"""

#: True once the main area's current widget (the Launcher, on a reset layout) holds the focus.
LAUNCHER_HAS_FOCUS = """
() => {
  const widget = window.jupyterapp.shell.currentWidget;
  return !!widget && widget.node.contains(document.activeElement);
}
"""

THEMES = (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark"))

#: How long an ``expect`` waits for a state. Playwright's 5 s default is too short on a busy
#: 2-core machine, where a widget panel may take several seconds to render; waiting longer
#: for the state costs nothing when it comes sooner.
PATIENCE_MS = 30_000


def write_notebook(path: Path, sources: list[str]) -> Path:
    """A Python 3 notebook at ``path`` with one code cell per source; returns ``path``."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, path)
    return path


def screenshot_dir(tmp_path: Path) -> Path:
    """``$AGENT_MEMORY_SCREENSHOTS`` when set (to look at them), else the test's temp folder."""
    folder = Path(os.environ.get("AGENT_MEMORY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def set_theme(page: Page, theme: str) -> None:
    """Switch JupyterLab's theme and wait until its CSS has loaded."""
    page.evaluate(
        "theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme
    )
    light = "true" if "Light" in theme else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    # JupyterLab shows its splash screen while the theme's CSS loads.
    expect(page.locator("#jupyterlab-splash")).to_have_count(0)


def in_both_themes(page: Page, shoot: Callable[[str], None]) -> None:
    """Call ``shoot("light")`` and ``shoot("dark")`` in those themes, then go back to light."""
    for theme, label in THEMES:
        set_theme(page, theme)
        shoot(label)
    set_theme(page, "JupyterLab Light")
