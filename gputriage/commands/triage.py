"""``gputriage <pod>``: the guided walk, in the TUI or headless (``--report``)."""

from __future__ import annotations

import argparse

from gputriage.commands.options import (
    add_cluster_arguments,
    add_node_access_arguments,
    add_playbook_arguments,
    add_report_arguments,
    triage_options_from_args,
)

HELP = "triage a GPU pod (the default command: `gputriage <pod>`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "pod",
        help="pod name, or KIND/NAME for a Deployment, Job, StatefulSet, "
        "ReplicaSet or DaemonSet (its pods are listed to pick from)",
    )
    p.add_argument(
        "--from",
        dest="from_bundle",
        metavar="DIR",
        help="replay an evidence bundle instead of reading the live cluster",
    )
    add_report_arguments(p)
    p.add_argument("--notes", metavar="FILE", help="notes file to include in the summary")
    add_cluster_arguments(p)
    add_node_access_arguments(p)
    add_playbook_arguments(p)


def run(args: argparse.Namespace) -> int:
    from gputriage.pipeline import pod_triage

    options = triage_options_from_args(args)
    triage = pod_triage(str(args.pod), options)
    if options.report is not None:
        from gputriage.pipeline import run_headless

        return run_headless(triage, options, options.report)
    from gputriage.tui.launch import run_triage

    return run_triage(triage, options)
