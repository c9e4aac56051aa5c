"""What the step panel, the status bar and the header say, for every kind of step."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef, Status
from gputriage.facts.model import FactGroup, FactSet, Target
from gputriage.playbook.transcript import Finding, Fix, Outcome, Transcript, Visit
from gputriage.tui.view import TriageView, gpu_request, pod_state_words
from gputriage.tui.widgets.source_status import SPINNER, status_content
from gputriage.tui.widgets.step_panel import panel_content
from gputriage.tui.widgets.target_header import header_content
from tests.tui.bundles import HandWalker

FACTS = FactSet(
    Target(namespace="ml", pod="trainer-0", node=""),
    {
        "kernel": FactGroup(
            "kernel",
            False,
            "the node's kernel log (dmesg / journalctl -k): "
            "timeout: ssh gpu-7 did not answer in 10 s",
            {},
        ),
        "pod": FactGroup(
            "pod",
            True,
            "",
            {
                "phase": "Pending",
                "node": "",
                "reason": "",
                "gpu_resources": {"nvidia.com/gpu": 2},
                "containers": [{"waiting_reason": "ContainerCreating"}],
            },
        ),
    },
)


def view(transcript: Transcript | None, cursor: int = 0, **kw: object) -> TriageView:
    return TriageView(
        session="bundle demo",
        facts=FACTS,
        transcript=transcript,
        cursor=cursor,
        walk_status="",
        **kw,
    )  # type: ignore[arg-type]


def test_a_condition_step_shows_why_and_the_cited_line(bundle: Path) -> None:
    t = HandWalker(bundle)(FACTS, {}, {})
    text = panel_content(view(t, 1)).plain
    assert text.splitlines()[:2] == [
        "Step 2 of 2 · pending/scheduler · a condition fired",
        "Does the scheduler say there is no free GPU?",
    ]
    assert "Next       finding pending.insufficient-gpu: No schedulable node has 2 free" in text
    assert "Because    3 of 4 nodes lack a free nvidia.com/gpu" in text
    assert "Condition  scheduler.insufficient_gpu > 0" in text
    assert "trainer-bundle/events.json:" in text and "0/4 nodes are available" in text
    assert text.endswith("2 branches: o takes another.")


def test_an_unknown_step_names_the_missing_evidence_and_why() -> None:
    visit = Visit(
        "lost/xids",
        "lost",
        "xids",
        "Did the GPU report an Xid?",
        Outcome.UNKNOWN,
        "finding:undetermined",
        unknown_facts=("kernel",),
    )
    undetermined = Finding(
        "undetermined",
        "info",
        "Undetermined",
        "Not enough evidence.",
        Fix("Collect the kernel log."),
        undetermined=True,
        collect_next=("the node's kernel log (dmesg / journalctl -k)",),
    )
    t = Transcript("lost", (visit,), (undetermined,), entry_reason="the pod lost its GPU")
    text = panel_content(view(t, 0)).plain
    assert "Entered    lost, because the pod lost its GPU" in text
    assert "evidence to decide is missing" in text
    assert "Unknown    kernel" in text and "timeout: ssh gpu-7 did not answer in 10 s" in text
    verdict = panel_content(view(t, 1)).plain
    assert verdict.startswith("Undetermined")
    assert "Collect next" in verdict
    assert "• the node's kernel log (dmesg / journalctl -k)" in verdict


def test_the_verdict_shows_severity_summary_and_evidence() -> None:
    ref = LineRef("dmesg", "b/dmesg.log", 3, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen")
    finding = Finding(
        "lost.xid79",
        "critical",
        "GPU 0000:3B:00 fell off the bus",
        "Drain and power-cycle.",
        Fix("Drain the node."),
        evidence=(ref,),
        references=("https://docs.nvidia.com/deploy/xid-errors/",),
        playbook="lost",
        step="xids",
    )
    t = Transcript("lost", (), (finding,))
    text = panel_content(view(t, 0)).plain
    assert " CRITICAL   GPU 0000:3B:00 fell off the bus" in text
    assert "lost.xid79  (from lost/xids)" in text
    assert "b/dmesg.log:3  NVRM: Xid (PCI:0000:3b:00): 79" in text
    assert "https://docs.nvidia.com/deploy/xid-errors/" in text


def test_without_a_walk_the_panel_says_why() -> None:
    # Before any walk the panel is the verdict's skeleton: what it will hold, what it awaits.
    assert panel_content(TriageView(session="s")).plain == (
        "Verdict  ·  not yet\nloading playbooks…"
    )
    empty = Transcript("", warnings=("no playbook routes a Succeeded pod",))
    assert panel_content(view(empty)).plain == "Walk\nno playbook routes a Succeeded pod"


def test_status_bar_spins_per_pending_key_then_names_failures() -> None:
    evidence = EvidenceSet(
        [
            Evidence(Key.POD, Status.OK),
            Evidence(Key.DMESG, Status.TIMEOUT, "ssh gpu-7: journalctl -k did not answer in 10 s"),
            Evidence(Key.NVIDIA_SMI, Status.FORBIDDEN, "sudo: a password is required " * 4),
            Evidence(Key.LSMOD, Status.UNAVAILABLE, "no SSH"),
        ]
    )
    busy = status_content(
        TriageView(session="s", evidence=evidence, pending=frozenset({Key.KUBELET_LOG})), 3
    ).plain
    assert busy.startswith("Sources 1/5 ok")
    assert f"{SPINNER[3]} kubelet" in busy and "r retries" not in busy
    assert "⏱ dmesg (failed: timeout: ssh gpu-7: journalctl -k did not answer in 10 s)" in busy
    # Long reasons are cut to MAX_REASON characters (the Sources tab has them whole).
    assert (
        "⊘ nvidia-smi (failed: forbidden: sudo: a password is required sudo: a password i…)" in busy
    )
    assert "– not collected: lsmod" in busy
    done = status_content(TriageView(session="s", evidence=evidence), 0).plain
    assert done.startswith("Sources 1/4 ok") and done.endswith("r (or a click here) retries")
    assert not any(frame in done for frame in SPINNER)


def test_many_uncollected_sources_are_counted_not_listed() -> None:
    evidence = EvidenceSet([Evidence.missing(k) for k in Key])
    text = status_content(TriageView(session="s", evidence=evidence), 0).plain
    assert text == f"Sources 0/{len(Key)} ok  – not collected: {len(Key)} sources"


def test_header_shows_pod_state_node_and_gpu_request_first_then_the_session() -> None:
    text = header_content(view(None)).plain
    assert text == (
        "ml/trainer-0  │  Pending · ContainerCreating  │  node not scheduled  │  "
        "nvidia.com/gpu×2  │  gputriage bundle demo"
    )
    assert gpu_request({}) == "no GPU request"
    assert gpu_request({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2}) == (
        "nvidia.com/gpu×2, nvidia.com/mig-1g.10gb×1"
    )


def _c(**kw: object) -> dict[str, object]:
    return {
        "init": False,
        "sidecar": False,
        "waiting_reason": "",
        "terminated_reason": "",
        "exit_code": -1,
        **kw,
    }


@pytest.mark.parametrize(
    ("phase", "reason", "containers", "deleting", "state"),
    [
        (
            "Pending",
            "",
            [_c(waiting_reason="ContainerCreating")],
            False,
            "Pending · ContainerCreating",
        ),
        (
            "Running",
            "",
            [_c(waiting_reason="CrashLoopBackOff")],
            False,
            "Running · CrashLoopBackOff",
        ),
        # The pod's own reason wins over its containers' (kubectl's STATUS does the same).
        (
            "Failed",
            "UnexpectedAdmissionError",
            [_c(waiting_reason="ContainerCreating")],
            False,
            "Failed · UnexpectedAdmissionError",
        ),
        (
            "Pending",
            "",
            [_c(init=True, waiting_reason="CrashLoopBackOff"), _c()],
            False,
            "Pending · Init:CrashLoopBackOff",
        ),
        ("Pending", "", [_c(init=True, waiting_reason="PodInitializing")], False, "Pending"),
        ("Failed", "", [_c(terminated_reason="Error", exit_code=1)], False, "Failed · Error"),
        ("Failed", "", [_c(terminated_reason="", exit_code=137)], False, "Failed · ExitCode:137"),
        ("Succeeded", "", [_c(terminated_reason="Completed", exit_code=0)], False, "Succeeded"),
        ("Running", "", [_c()], True, "Running · Terminating"),
        ("Pending", "", [], False, "Pending"),
        # Not scheduled, no container reason: the PodScheduled condition says why.
        ("Pending", "", [_c()], False, "Pending · Unschedulable"),
        ("", "", None, False, "…"),
        (
            "Running",
            "",
            [
                _c(waiting_reason=r)
                for r in (
                    "ErrImagePull",
                    "CrashLoopBackOff",
                    "ErrImagePull",
                    "CreateContainerError",
                )
            ],
            False,
            "Running · ErrImagePull · CrashLoopBackOff · +1 more",
        ),
    ],
)
def test_pod_state_reads_like_kubectl(
    phase: str, reason: str, containers: object, deleting: bool, state: str
) -> None:
    unscheduled = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    conditions = unscheduled if state.endswith("Unschedulable") else []
    assert pod_state_words(phase, reason, containers, deleting, conditions) == state
    # A container's reason says more than the condition.
    assert (
        pod_state_words("Pending", "", [_c(waiting_reason="ContainerCreating")], False, unscheduled)
        == "Pending · ContainerCreating"
    )


async def test_the_header_shows_the_real_state_of_every_demo(tmp_path: Path) -> None:
    """In every demo the state is whole on the header's first line, even at 80 columns."""
    from gputriage.scenarios import scenario_path
    from gputriage.session import BundleSession
    from gputriage.tui.app import TriageApp
    from tests.tui.harness import screen_text, settle

    expected = {
        "create-nvidia-uvm-missing": "Pending · RunContainerError",
        "lost-xid79": "Failed · Error",
        "oom-time-sliced": "Running · CrashLoopBackOff",
        "pending-insufficient-gpu": "Pending · Unschedulable",
    }
    for name, state in expected.items():
        app = TriageApp(
            BundleSession(scenario_path(name), description=f"demo {name}"),
            notes_path=tmp_path / "n.json",
            export_dir=tmp_path,
            clipboard_file=tmp_path / "clip.txt",
        )
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            first = screen_text(app).splitlines()[0]
            assert f"│  {state}  │" in first, first
