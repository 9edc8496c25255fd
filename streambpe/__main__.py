"""``python -m streambpe``: the command line."""

from .cli import main

raise SystemExit(main())
