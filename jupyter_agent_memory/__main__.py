"""``python -m jupyter_agent_memory`` runs the command line."""

from .cli import main

raise SystemExit(main())
