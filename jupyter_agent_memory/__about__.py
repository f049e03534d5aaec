"""Version of the jupyter-agent-memory package."""

__version__ = "0.1.0"
