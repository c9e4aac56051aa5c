"""``gputriage node <node>``: lost-card and onboarding triage for a node, without a pod.

Evidence is the node's: its object and events, the pods on it, the device-plugin log and
RuntimeClasses from the API; kernel log, nvidia-smi, modules, device nodes, containerd config
and the kubelet journal from the node itself (SSH or ``--local``, with the API's node log query
as a fallback for the journal). ``--from DIR`` replays a node bundle (``node.json`` plus any of
the other bundle files). The walk enters ``lost-card`` when the facts show a lost or failing
GPU, else ``node-onboarding`` (the playbooks' routes). The walk runs through the same pipeline
as a pod walk (:mod:`gputriage.pipeline`); exit codes as for a pod walk: 0 finding,
3 undetermined, 4 waiting for an answer, 2 bad input.
"""

from __future__ import annotations

import argparse

from gputriage.commands.options import (
    add_cluster_arguments,
    add_node_access_arguments,
    add_playbook_arguments,
    add_report_arguments,
    triage_options_from_args,
)

HELP = "lost-card and onboarding triage for a node, without a pod (`gputriage node NODE`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("node", help="node name (kubectl get nodes)")
    p.add_argument(
        "--from",
        dest="from_bundle",
        metavar="DIR",
        help="replay a node bundle (node.json plus any of node-events.json, "
        "node-pods.json, device-plugin.log, dmesg.log, nvidia-smi.xml, "
        "lsmod.txt, kubelet.log...) instead of reading the live cluster",
    )
    add_report_arguments(p)
    p.add_argument("--notes", metavar="FILE", help="notes file to include in the summary")
    add_cluster_arguments(p)
    add_node_access_arguments(p)
    add_playbook_arguments(p)


def run(args: argparse.Namespace) -> int:
    from gputriage.pipeline import node_triage

    options = triage_options_from_args(args)
    triage = node_triage(str(args.node), options)
    if options.report is not None:
        from gputriage.pipeline import run_headless

        return run_headless(triage, options, options.report)
    from gputriage.tui.launch import run_triage

    return run_triage(triage, options)
