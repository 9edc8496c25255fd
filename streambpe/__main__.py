"""``python -m streambpe``: the command line."""

from streambpe.cli import main

raise SystemExit(main())
