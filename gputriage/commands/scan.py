"""``gputriage scan [-n NS | -A] [-l SELECTOR]``: GPU pods and GPU nodes in trouble.

In the TUI the rows stream in as list pages arrive; ``enter`` on a row triages that pod
(``gputriage POD -n NS``) or node (``gputriage node NODE``), and ``q`` in the triage comes back
to the scan. ``--report md|json`` prints the result instead. Exit codes:

* 0: nothing in trouble (and every list was read);
* 3: pods or nodes in trouble were found;
* 2: a list could not be read (the message names the verb and resource to grant) and nothing
  was found in the rest, or bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gputriage.commands.options import (
    add_cluster_arguments,
    add_node_access_arguments,
    add_playbook_arguments,
    cluster_access_from_args,
    triage_options_from_args,
)
from gputriage.errors import GputriageError
from gputriage.options import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    from gputriage.evidence.kube_client import KubeClient
    from gputriage.scan.collect import Listing, Scope
    from gputriage.scan.fleet import Fleet

HELP = "find GPU pods and GPU nodes in trouble (a namespace or -A), and pick one to triage"

EXIT_CLEAN = 0
EXIT_TROUBLE = 3
EXIT_INCOMPLETE = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="scan pods in every namespace (nodes are always scanned)",
    )
    p.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="only pods matching this label selector (e.g. team=llm)",
    )
    p.add_argument(
        "--stuck-after",
        default="10m",
        metavar="DURATION",
        help="how long a pod may be ContainerCreating (or Pending without a "
        "scheduler verdict) before it counts as stuck (default: 10m)",
    )
    p.add_argument(
        "--report",
        choices=["md", "json"],
        help="no TUI: print the pods and nodes in trouble (exit 3 when any)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="with --report: write to FILE (atomically) instead of stdout",
    )
    add_cluster_arguments(p)
    add_node_access_arguments(p)
    add_playbook_arguments(p)


def scope_from_args(args: argparse.Namespace, context_namespace: str) -> Scope:
    from gputriage.scan.collect import Scope
    from gputriage.scan.model import parse_duration

    stuck = parse_duration(str(args.stuck_after))
    if stuck is None:
        raise GputriageError(
            f"--stuck-after wants a duration such as 10m, 90s or 1h30m, got {args.stuck_after!r}",
            title="bad argument",
        )
    if args.all_namespaces and args.namespace:
        raise GputriageError("use either -n NAMESPACE or -A, not both", title="bad argument")
    namespace = (
        "" if args.all_namespaces else (args.namespace or context_namespace or DEFAULT_NAMESPACE)
    )
    return Scope(namespace=namespace, selector=args.selector or "", stuck_after=stuck)


def connect(args: argparse.Namespace) -> KubeClient:
    """The kube source's client, configured the same way (kubeconfig, context, timeout)."""
    from gputriage.evidence.kube_client import KubeClient, load_config

    access = cluster_access_from_args(args)
    config = load_config(access.kubeconfig, access.context)
    return KubeClient(config, timeout=access.request_timeout)


def run(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        scope = scope_from_args(args, client.config.namespace)
        if args.report:
            return run_headless(args, client, scope)
        from gputriage.tui.scan_app import run_scan_tui

        return run_scan_tui(client, scope, triage_options_from_args(args))
    finally:
        client.close()


def collect(client: KubeClient, scope: Scope) -> tuple[Fleet, tuple[Listing, ...]]:
    """Run the whole scan (blocking). Raises when no list could be read at all."""
    from gputriage.evidence.model import Status
    from gputriage.scan.collect import scan
    from gputriage.scan.fleet import Fleet

    fleet = Fleet(_now(), scope.stuck_after)
    listings: tuple[Listing, ...] = ()
    for update in scan(client, scope, fleet=fleet):
        if update.done:
            listings = update.listings
    if listings and all(ls.status is not Status.OK for ls in listings):
        first = next(ls for ls in listings if ls.what == "pods")
        raise GputriageError(f"cannot list {first.what}: {first.detail}", title="scan failed")
    return fleet, listings


def run_headless(args: argparse.Namespace, client: KubeClient, scope: Scope) -> int:
    from gputriage.evidence.model import Status
    from gputriage.report.write import atomic_write
    from gputriage.scan.report import build_report, render_json, render_markdown

    fleet, listings = collect(client, scope)
    report = build_report(fleet, listings, scope, context=client.config.context)
    text = render_json(report) if args.report == "json" else render_markdown(report)
    if args.output and args.output != "-":  # "-": stdout
        print(f"gputriage: wrote {atomic_write(args.output, text)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for ls in listings:
        if ls.status is not Status.OK:
            print(f"gputriage: warning: could not list {ls.what}: {ls.detail}", file=sys.stderr)
    if report["troubles"]:
        return EXIT_TROUBLE
    return EXIT_CLEAN if report["complete"] else EXIT_INCOMPLETE


def _now() -> float:
    import time

    return time.time()
