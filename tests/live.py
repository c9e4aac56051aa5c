"""The live session a parsed ``gputriage POD ...`` command line opens, for the tests.

Goes through the command layer's real conversion (argparse namespace -> typed options), so the
tests that build sessions from command lines cover that path too.
"""

from __future__ import annotations

import argparse

from gputriage.commands.options import cluster_access_from_args, node_access_from_args
from gputriage.evidence.live import LiveSession


def open_live(args: argparse.Namespace) -> LiveSession:
    return LiveSession.open(
        str(args.pod), cluster_access_from_args(args), node_access_from_args(args)
    )
