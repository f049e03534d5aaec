"""Jupyter surfaces: the IPython magics (:mod:`.magics`), the ipywidgets panel
(:mod:`.panel`) and the rich and plain views both show (:mod:`.display`).

Importing this package imports nothing heavy: IPython loads with the magics, ipywidgets only
with the panel.
"""
