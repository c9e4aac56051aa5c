"""Options shared by the commands that look at a live cluster or a bundle."""

from __future__ import annotations

import argparse


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("-n", "--namespace", help="namespace (default: the context's, else 'default')")
    g.add_argument("--context", help="kubeconfig context to use (default: current-context)")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument("--request-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="timeout for each API call (default: 10)")


def add_node_access_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node access (kubelet journal, kernel log, nvidia-smi over SSH)")
    g.add_argument("--ssh", choices=["auto", "off"], default="auto",
                   help="read node evidence over SSH (default: auto, when the node is reachable)")
    g.add_argument("--ssh-config", metavar="FILE",
                   help="ssh_config file (default: ~/.ssh/config); Host, User, Port, "
                        "IdentityFile, ProxyJump are honoured")
    g.add_argument("--ssh-user", help="user for node SSH (default: from ssh_config, else $USER)")
    g.add_argument("--node-address", action="append", default=[], metavar="NODE=HOST",
                   help="connect to HOST for NODE instead of its InternalIP (repeatable)")
    g.add_argument("--known-hosts", metavar="FILE",
                   help="known_hosts file (default: ~/.ssh/known_hosts)")
    g.add_argument("--accept-new-host-key", action="store_true",
                   help="trust a node's host key that is not in known_hosts yet (never a "
                        "changed one)")
    g.add_argument("--sudo", action="store_true",
                   help="run node commands with `sudo -n` (non-interactive)")
    g.add_argument("--since", default="2h", metavar="DURATION",
                   help="time window for journals and kernel logs (default: 2h)")
    g.add_argument("--local", action="store_true",
                   help="gputriage runs on the node itself: read NVML and logs locally")


def add_playbook_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--playbooks", action="append", default=[], metavar="DIR",
                   help="extra playbook directory; adds or overrides shipped playbooks by id "
                        "(repeatable)")


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """``--report``, ``-o``, ``--answer``, ``--override``: the headless walk."""
    p.add_argument("--report", choices=["md", "text", "json"],
                   help="no TUI: walk the playbooks and print the incident summary (md: "
                        "Markdown for tickets; text: plain, for chat and fields that do not "
                        "render Markdown; json: for bots)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="with --report: write the summary to FILE (atomically) instead of stdout")
    p.add_argument("--answer", action="append", default=[], metavar="STEP=CHOICE",
                   help="with --report: answer an ask step (repeatable)")
    p.add_argument("--override", action="append", default=[], metavar="STEP=TARGET",
                   help="with --report: take another branch at STEP (repeatable)")
