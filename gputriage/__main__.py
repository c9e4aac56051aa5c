"""``python -m gputriage``."""

from gputriage.cli import entry

entry()
