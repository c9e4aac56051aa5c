"""``gputriage playbooks``: placeholder until its issue lands (replaced, not extended)."""

from __future__ import annotations

import argparse

from gputriage.errors import GputriageError

HELP = "playbooks (not available in this build yet)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs="*")


def run(args: argparse.Namespace) -> int:
    raise GputriageError("this command is not available in this build yet", title="playbooks")
