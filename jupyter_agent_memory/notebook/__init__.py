"""Jupyter surfaces: IPython magics, the ipywidgets panel and the views they display.

- :mod:`.magics`: ``%agent_memory``, ``%fact``, ``%%fact_update``, ``%journal``,
  ``%memprompt``, ``%forget`` (``%load_ext jupyter_agent_memory`` registers them);
- :mod:`.panel`: :class:`~.panel.MemoryPanel`, the tabbed widget;
- :mod:`.display`: the rich and plain views both show (tables, diffs, the prompt).

Importing this package imports nothing heavy: IPython loads with the magics, ipywidgets
only with the panel.
"""
