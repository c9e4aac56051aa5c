"""``gputriage collect <pod> -o DIR``: write an evidence bundle from the live cluster.

Progress goes to stderr as each piece lands; the summary (one line per key) to stdout. The
bundle replays with ``gputriage <pod> --from DIR`` anywhere, without cluster access.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from gputriage.commands.options import (
    add_cluster_arguments,
    add_node_access_arguments,
    cluster_access_from_args,
    node_access_from_args,
)

if TYPE_CHECKING:
    from gputriage.evidence.live import LiveSession
    from gputriage.evidence.model import EvidenceSet

HELP = "write an evidence bundle for a pod (replay it later with `gputriage POD --from DIR`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "pod",
        help="pod name, or KIND/NAME for a Deployment, Job, StatefulSet, "
        "ReplicaSet or DaemonSet (its worst pod is collected)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="bundle directory to write (created when missing)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty DIR, replacing the bundle files there",
    )
    add_cluster_arguments(p)
    add_node_access_arguments(p)


def run(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from gputriage.evidence.collect import check_destination, write_bundle
    from gputriage.evidence.live import LiveSession

    out = Path(args.output)
    check_destination(out, force=args.force)  # fail before spending minutes collecting
    session = LiveSession.open(
        str(args.pod), cluster_access_from_args(args), node_access_from_args(args)
    )
    try:
        if session.notice:
            print(f"gputriage: {session.notice}", file=sys.stderr)
        print(f"collecting from {session.description}", file=sys.stderr)
        evidence = asyncio.run(_collect(session, sys.stderr))
    finally:
        session.close()
    write_bundle(
        evidence,
        out,
        force=args.force,
        meta={"context": session.context, "command": "gputriage collect"},
    )
    ok = sum(1 for ev in evidence.values() if ev.ok)
    for ev in evidence.values():
        print(f"{ev.status.value:<12} {ev.key.value:<20} {ev.detail}")
    print(
        f"wrote {ok} of {len(evidence)} pieces of evidence to {out} "
        f"(replay: gputriage {session.pod} -n {session.namespace} --from {out})"
    )
    return 0


async def _collect(session: LiveSession, progress: TextIO) -> EvidenceSet:
    from gputriage.evidence.model import EvidenceSet

    items = []
    async for ev in session.stream():
        items.append(ev)
        print(f"  {ev.status.value:<12} {ev.key.value:<20} {ev.elapsed_s:6.2f}s", file=progress)
    return EvidenceSet(items)
