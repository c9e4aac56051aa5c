"""``python -m gputriage``."""

from gputriage.cli import main

raise SystemExit(main())
