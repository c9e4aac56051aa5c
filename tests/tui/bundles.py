"""Small, realistic evidence bundles and a hand-written walker for the TUI tests.

The walker stands in for the playbook engine with a fixed three-step tree, so the TUI's own
behaviour (cursor, overrides, answers, rendering) is tested independently of the shipped
playbooks. Its citations point at real lines of the bundle written here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputriage.evidence.model import LineRef
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import (
    Choice,
    Finding,
    Fix,
    Outcome,
    Question,
    Transcript,
    Visit,
)

BUNDLE_NAME = "trainer-bundle"
NS, POD, UID, NODE = "ml", "trainer-0", "6f1c2b9e-7d3a-4c55-9a0e-1b2c3d4e5f60", "gpu-node-7"

SCHED_MSG = (
    "0/4 nodes are available: 1 node(s) had untolerated taint "
    "{node-role.kubernetes.io/control-plane: }, 3 Insufficient nvidia.com/gpu. "
    "preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
    "3 No preemption victims found for incoming pod."
)
#: An event message carrying Rich markup and an ANSI escape: both must show up inert.
HOSTILE_MSG = "[bold red]boom[/] \x1b[31mred alert\x1b[0m \x1b]0;pwned\x07done"


def pod_object() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "namespace": NS,
            "uid": UID,
            "creationTimestamp": "2026-03-05T10:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "trainer",
                    "controller": True,
                    "uid": "0b7e2a4c-1111-2222-3333-444455556666",
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "2"},
                        "requests": {"nvidia.com/gpu": "2"},
                    },
                }
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
        "status": {
            "phase": "Pending",
            "qosClass": "BestEffort",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": SCHED_MSG,
                }
            ],
        },
    }


def event(
    name: str, reason: str, message: str, kind: str = "Warning", count: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{POD}.{name}", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": POD, "namespace": NS, "uid": UID},
        "type": kind,
        "reason": reason,
        "message": message,
        "count": count,
        "firstTimestamp": "2026-03-05T10:00:05Z",
        "lastTimestamp": "2026-03-05T10:04:05Z",
        "source": {"component": "default-scheduler"},
    }


def write_bundle(root: Path, *, hostile: bool = True) -> Path:
    """A Pending pod that asks for 2 GPUs on a cluster with none free."""
    bundle = root / BUNDLE_NAME
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "pod.json").write_text(json.dumps(pod_object(), indent=2))
    events = [event("a1", "FailedScheduling", SCHED_MSG, count=5)]
    if hostile:
        events.append(event("b2", "BackOff", HOSTILE_MSG))
    (bundle / "events.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "EventList", "items": events}, indent=2)
    )
    (bundle / "kubelet.log").write_text(
        "Mar 05 10:00:01 gpu-node-7 kubelet[1234]: I0305 10:00:01.000001 1234 "
        'manager.go:229] "Got registration request from device plugin with resource name" '
        'resourceName="nvidia.com/gpu"\n'
        f"Mar 05 10:00:06 gpu-node-7 kubelet[1234]: E0305 10:00:06.000002 1234 "
        f'pod_workers.go:1298] "Error syncing pod, skipping" pod="{NS}/{POD}" '
        f'podUID="{UID}"\n'
        "Mar 05 10:00:07 gpu-node-7 kubelet[1234]: I0305 10:00:07.000003 1234 "
        'kubelet.go:2400] "SyncLoop ADD" source="api" pods=["other/pod-1"]\n'
    )
    return bundle


def line_of(bundle: Path, name: str, needle: str) -> LineRef:
    """Cite the line of ``name`` holding ``needle``, as facts would."""
    for i, text in enumerate((bundle / name).read_text().splitlines(), 1):
        if needle in text:
            return LineRef(name.split(".")[0], f"{bundle.name}/{name}", i, text.strip())
    raise AssertionError(f"{needle!r} not in {name}")


INSUFFICIENT = Finding(
    id="pending.insufficient-gpu",
    severity="high",
    title="No schedulable node has 2 free nvidia.com/gpu",
    summary="Every GPU node is full or repels the pod.",
    fix=Fix(
        "Free GPUs or add capacity.",
        (
            f"kubectl -n {NS} describe pod {POD}",
            "kubectl get pods -A --field-selector spec.nodeName=gpu-node-7",
        ),
    ),
    playbook="pending",
    step="scheduler",
)
TAINT_INTENDED = Finding(
    id="pending.taint-intended",
    severity="info",
    title="The taint keeps the pod off on purpose",
    summary="Nothing to fix.",
    fix=Fix("Schedule elsewhere.", ()),
)
TOLERATION_MISSING = Finding(
    id="pending.toleration-missing",
    severity="medium",
    title="The pod lacks a toleration",
    summary="Add the toleration.",
    fix=Fix("Add a toleration.", (f"kubectl -n {NS} edit job trainer",)),
)


class HandWalker:
    """A fixed tree: phase -> scheduler -> (finding | taints ask-step)."""

    def __init__(self, bundle: Path) -> None:
        self.bundle = bundle
        self.calls = 0

    def __call__(
        self, facts: FactSet, answers: Mapping[str, str], overrides: Mapping[str, str]
    ) -> Transcript:
        self.calls += 1
        pod_cite = line_of(self.bundle, "pod.json", '"phase": "Pending"')
        sched_cite = line_of(self.bundle, "events.json", "0/4 nodes are available")
        phase_choices = (
            Choice("pending", "Pending", "pending/scheduler"),
            Choice("running", "Running", "oom/start"),
        )
        visits = [
            Visit(
                "triage/phase",
                "triage",
                "phase",
                "Which phase is the pod in?",
                Outcome.CONDITION,
                "pending/scheduler",
                because="the pod is Pending",
                condition='pod.phase == "Pending"',
                citations=(pod_cite,),
                choices=phase_choices,
            )
        ]
        sched_choices = (
            Choice("insufficient", "No free GPU", "finding:" + INSUFFICIENT.id),
            Choice("taints", "A taint repels the pod", "pending/taints"),
        )
        ref = "pending/scheduler"
        proposed = sched_choices[0]
        chosen = next((c for c in sched_choices if c.value == overrides.get(ref)), proposed)
        if chosen is proposed:
            visits.append(
                Visit(
                    ref,
                    "pending",
                    "scheduler",
                    "Does the scheduler say there is no free GPU?",
                    Outcome.CONDITION,
                    proposed.target,
                    because="3 of 4 nodes lack a free nvidia.com/gpu",
                    condition="scheduler.insufficient_gpu > 0",
                    citations=(sched_cite,),
                    choices=sched_choices,
                )
            )
            return Transcript("triage", tuple(visits), (INSUFFICIENT,))
        visits.append(
            Visit(
                ref,
                "pending",
                "scheduler",
                "Does the scheduler say there is no free GPU?",
                Outcome.OVERRIDE,
                chosen.target,
                because="you chose another branch",
                proposed=proposed.target,
                citations=(sched_cite,),
                choices=sched_choices,
            )
        )
        ask_ref = "pending/taints"
        ask_choices = (
            Choice("intended", "Yes, on purpose", "finding:" + TAINT_INTENDED.id),
            Choice("not-intended", "No", "finding:" + TOLERATION_MISSING.id),
        )
        prompt = "Is the control-plane taint meant to keep this pod away?"
        answer = next((c for c in ask_choices if c.value == answers.get(ask_ref)), None)
        if answer is None:
            visits.append(
                Visit(
                    ask_ref, "pending", "taints", prompt, Outcome.WAITING, "", choices=ask_choices
                )
            )
            question = Question(ask_ref, prompt, ask_choices, help="Ask the cluster owner.")
            return Transcript("triage", tuple(visits), (), question)
        visits.append(
            Visit(
                ask_ref,
                "pending",
                "taints",
                prompt,
                Outcome.ANSWER,
                answer.target,
                because=f"you answered {answer.label}",
                choices=ask_choices,
            )
        )
        finding = TAINT_INTENDED if answer.value == "intended" else TOLERATION_MISSING
        return Transcript("triage", tuple(visits), (finding,))
