"""Options shared by the commands that look at a live cluster or a bundle.

``add_*_arguments`` declare them on a parser; ``*_from_args`` turn the parsed namespace into
the typed options of :mod:`gputriage.options` (the only place argparse meets the rest).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gputriage.options import (
    DEFAULT_CANDIDATE_NODES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SINCE,
    ClusterAccess,
    MetricsAccess,
    NodeAccess,
    ReportOptions,
    TriageOptions,
    TuiOptions,
    WalkOptions,
)


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("-n", "--namespace", help="namespace (default: the context's, else 'default')")
    g.add_argument("--context", help="kubeconfig context to use (default: current-context)")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="SECONDS",
        help=f"timeout for each API call (default: {DEFAULT_REQUEST_TIMEOUT:g})",
    )


def add_node_access_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node access (kubelet journal, kernel log, nvidia-smi over SSH)")
    g.add_argument(
        "--ssh",
        choices=["auto", "off"],
        default="auto",
        help="read node evidence over SSH (default: auto, when the node is reachable)",
    )
    g.add_argument(
        "--ssh-config",
        metavar="FILE",
        help="ssh_config file (default: ~/.ssh/config); Host, User, Port, "
        "IdentityFile, ProxyJump are honoured",
    )
    g.add_argument("--ssh-user", help="user for node SSH (default: from ssh_config, else $USER)")
    g.add_argument(
        "--node-address",
        action="append",
        default=[],
        metavar="NODE=HOST",
        help="connect to HOST for NODE instead of its InternalIP (repeatable)",
    )
    g.add_argument(
        "--known-hosts", metavar="FILE", help="known_hosts file (default: ~/.ssh/known_hosts)"
    )
    g.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="trust a node's host key that is not in known_hosts yet (never a changed one)",
    )
    g.add_argument(
        "--sudo", action="store_true", help="run node commands with `sudo -n` (non-interactive)"
    )
    g.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="DURATION",
        help=f"time window for journals and kernel logs (default: {DEFAULT_SINCE})",
    )
    g.add_argument(
        "--local",
        action="store_true",
        help="gputriage runs on the node itself: read NVML and logs locally",
    )
    g.add_argument(
        "--nodes",
        type=_node_limit,
        default=DEFAULT_CANDIDATE_NODES,
        metavar="K",
        help="for a Pending pod: read node evidence from at most K of the GPU nodes "
        "it could land on, the troubled ones first (default: 3; 0: none)",
    )
    add_prometheus_arguments(p)


def _node_limit(value: str) -> int:
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nodes wants a whole number, got {value!r}") from None
    if not 0 <= k <= 64:
        raise argparse.ArgumentTypeError(f"--nodes wants 0 to 64, got {k}")
    return k


def add_prometheus_arguments(p: argparse.ArgumentParser) -> None:
    """GPU metrics history (DCGM exporter) from Prometheus: optional, read-only."""
    g = p.add_argument_group("GPU metrics history from Prometheus (DCGM exporter)")
    g.add_argument(
        "--prometheus",
        metavar="URL",
        help="Prometheus base URL, e.g. https://prom.example:9090, or "
        "svc:NAMESPACE/NAME:PORT through the API server's service proxy "
        "(default: $GPUTRIAGE_PROMETHEUS_URL; none: metrics are not asked for)",
    )
    g.add_argument(
        "--prometheus-token-file",
        metavar="FILE",
        help="file holding a bearer token (default: $GPUTRIAGE_PROMETHEUS_TOKEN)",
    )
    g.add_argument("--prometheus-user", metavar="USER", help="basic-auth user")
    g.add_argument(
        "--prometheus-password-file", metavar="FILE", help="file holding the basic-auth password"
    )
    g.add_argument("--prometheus-ca", metavar="FILE", help="CA bundle to verify its TLS cert")
    g.add_argument(
        "--prometheus-insecure", action="store_true", help="do not verify its TLS certificate"
    )
    g.add_argument(
        "--metrics-window",
        default="7d",
        metavar="DURATION",
        help="how far back to read GPU metrics (default: 7d; s/m/h/d)",
    )


def add_playbook_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--playbooks",
        action="append",
        default=[],
        metavar="DIR",
        help="extra playbook directory; adds or overrides shipped playbooks by id (repeatable)",
    )


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """``--report``, ``-o``, ``--answer``, ``--override``: the headless walk."""
    p.add_argument(
        "--report",
        choices=["md", "text", "json"],
        help="no TUI: walk the playbooks and print the incident summary (md: "
        "Markdown for tickets; text: plain, for chat and fields that do not "
        "render Markdown; json: for bots)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="with --report: write the summary to FILE (atomically) instead of stdout",
    )
    p.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="STEP=CHOICE",
        help="with --report: answer an ask step (repeatable)",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="STEP=TARGET",
        help="with --report: take another branch at STEP (repeatable)",
    )


# ---------------------------------------------------------------------------------------------
# The parsed command line -> typed options (missing attributes take the options' defaults, so
# a command that declares only some groups still gets a whole TriageOptions).


def _opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    value = vars(args).get(name)
    return default if value is None else value


def parse_pairs(values: list[str], flag: str) -> dict[str, str]:
    """``["a/b=c", ...]`` -> ``{"a/b": "c"}`` with a clear error for a malformed pair."""
    from gputriage.errors import GputriageError

    pairs: dict[str, str] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise GputriageError(
                f"{flag} expects STEP=VALUE (e.g. {flag} oom-cuda/params=7e9), got {raw!r}",
                title="bad argument",
            )
        pairs[key.strip()] = value.strip()
    return pairs


def cluster_access_from_args(args: argparse.Namespace) -> ClusterAccess:
    return ClusterAccess(
        namespace=_opt(args, "namespace") or None,
        context=_opt(args, "context") or None,
        kubeconfig=_opt(args, "kubeconfig") or None,
        request_timeout=float(_opt(args, "request_timeout") or DEFAULT_REQUEST_TIMEOUT),
        metrics=MetricsAccess(
            url=_opt(args, "prometheus") or "",
            token_file=_opt(args, "prometheus_token_file") or "",
            user=_opt(args, "prometheus_user") or "",
            password_file=_opt(args, "prometheus_password_file") or "",
            ca_file=_opt(args, "prometheus_ca") or "",
            insecure=bool(_opt(args, "prometheus_insecure")),
            window=str(_opt(args, "metrics_window") or "7d"),
        ),
    )


def node_access_from_args(args: argparse.Namespace) -> NodeAccess:
    from gputriage.evidence.nodes import parse_node_addresses

    return NodeAccess(
        ssh=_opt(args, "ssh", "auto") != "off",
        ssh_config=_opt(args, "ssh_config"),
        ssh_user=_opt(args, "ssh_user"),
        node_addresses=parse_node_addresses(_opt(args, "node_address", [])),
        known_hosts=_opt(args, "known_hosts"),
        accept_new_host_key=bool(_opt(args, "accept_new_host_key", False)),
        sudo=bool(_opt(args, "sudo", False)),
        candidate_nodes=int(_opt(args, "nodes", DEFAULT_CANDIDATE_NODES)),
        since=str(_opt(args, "since") or DEFAULT_SINCE),
        local=bool(_opt(args, "local", False)),
    )


def walk_options_from_args(args: argparse.Namespace) -> WalkOptions:
    notes = _opt(args, "notes")
    return WalkOptions(
        playbook_dirs=tuple(Path(p) for p in _opt(args, "playbooks", [])),
        notes_file=Path(notes) if notes else None,
    )


def report_options_from_args(args: argparse.Namespace) -> ReportOptions | None:
    """``--report`` and its companions; None when no report was asked for (the TUI)."""
    fmt = _opt(args, "report")
    if not fmt:
        return None
    output = _opt(args, "output")
    return ReportOptions(
        format=fmt,
        output=Path(output) if output not in (None, "", "-") else None,
        answers=parse_pairs(_opt(args, "answer", []), "--answer"),
        overrides=parse_pairs(_opt(args, "override", []), "--override"),
    )


def triage_options_from_args(args: argparse.Namespace) -> TriageOptions:
    """Every option of a triage command (``gputriage POD``, ``node``, ``demo``, ``scan``)."""
    bundle = _opt(args, "from_bundle")
    export_dir = _opt(args, "export_dir")
    return TriageOptions(
        cluster=cluster_access_from_args(args),
        node=node_access_from_args(args),
        walk=walk_options_from_args(args),
        report=report_options_from_args(args),
        tui=TuiOptions(export_dir=Path(export_dir)) if export_dir else TuiOptions(),
        bundle=Path(bundle) if bundle else None,
    )
