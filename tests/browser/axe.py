"""axe-core (from the npm registry, installed with the sidebar's dev dependencies) in a page,
and contrast computed from the colours the browser actually uses.

axe reports text over a highlight as "incomplete" (it cannot tell the background), so
:func:`low_contrast` computes those ratios itself (WCAG 2 relative luminance). Colours are
read back through a canvas, so any form the browser computes (``rgb()``, and the
``color(srgb …)`` that ``color-mix()`` gives) is measured the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

NODE_MODULES = Path(__file__).resolve().parents[2] / "labextension" / "node_modules"
AXE = Path(os.environ.get("AXE_CORE_JS") or NODE_MODULES / "axe-core" / "axe.min.js")

#: One row per violation: rule, impact, and the first offending nodes. The context is a
#: selector, so every element it matches is checked.
RUN_AXE = """
async selector => {
  const results = await axe.run(selector, {resultTypes: ['violations']});
  return results.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}
"""

#: Elements under `selector` matching `targets` whose text contrast is below `minimum`.
LOW_CONTRAST = """
([selector, targets, minimum]) => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const context = canvas.getContext('2d', {willReadFrequently: true});
  // Any CSS colour as [r, g, b, a] (0-255, alpha 0-1), as the browser paints it.
  const rgba = value => {
    context.clearRect(0, 0, 1, 1);
    context.fillStyle = 'rgba(0, 0, 0, 0)';
    context.fillStyle = value;
    context.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = context.getImageData(0, 0, 1, 1).data;
    return [r, g, b, a / 255];
  };
  const over = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  };
  const background = node => {
    const layers = [];
    for (let n = node; n; n = n.parentElement) {
      const colour = rgba(getComputedStyle(n).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    let result = [255, 255, 255, 1];
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = c => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const found = [];
  let checked = 0;
  for (const root of document.querySelectorAll(selector)) {
    for (const node of root.querySelectorAll(targets)) {
      if (!node.textContent.trim() || !node.getClientRects().length) continue;
      checked += 1;
      const bg = background(node);
      const fg = over(rgba(getComputedStyle(node).color), bg);
      const [hi, lo] = [luminance(fg), luminance(bg)].sort((x, y) => y - x);
      const ratio = (hi + 0.05) / (lo + 0.05);
      if (ratio < minimum) found.push({node: node.tagName + '.' + node.className,
                                       text: node.textContent.slice(0, 40),
                                       ratio: Math.round(ratio * 100) / 100});
    }
  }
  return {checked, found};
}
"""


def serious_violations(page: Page, selector: str) -> list[dict[str, Any]]:
    """axe's critical and serious violations inside every element ``selector`` matches."""
    if not AXE.is_file():
        raise RuntimeError(f"{AXE} is missing: run `jlpm install` in labextension/")
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(RUN_AXE, selector)
    return [v for v in found if v["impact"] in ("critical", "serious")]


def low_contrast(page: Page, selector: str, targets: str, minimum: float = 4.5) -> list[Any]:
    """Elements matching ``targets`` inside ``selector`` whose text contrast is below
    ``minimum`` (WCAG AA for normal text: 4.5)."""
    return contrast_report(page, selector, targets, minimum)["found"]


def contrast_report(page: Page, selector: str, targets: str,
                    minimum: float = 4.5) -> dict[str, Any]:
    """``{"checked": n, "found": [...]}``: how many visible text elements matching
    ``targets`` were measured, and those below ``minimum``."""
    return page.evaluate(LOW_CONTRAST, [selector, targets, minimum])
