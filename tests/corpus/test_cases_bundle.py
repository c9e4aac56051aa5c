"""Every public incident case rebuilt as a bundle reads, builds facts, and says what it quotes.

Bundles are written into a temporary directory by ``tests/casebundle.py`` from the case's
verbatim text only; nothing here is committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.build import build_facts
from gputriage.facts.model import FactSet
from tests.casebundle import ANSWER_KEYS, case_to_bundle

pytestmark = pytest.mark.corpus


@dataclass
class Built:
    case: Path
    bundle: Path
    evidence: EvidenceSet
    facts: FactSet

    def json(self, name: str) -> Any:
        return json.loads((self.bundle / name).read_text(encoding="utf-8"))

    def text(self, name: str) -> str:
        return (self.bundle / name).read_text(encoding="utf-8")

    def files(self) -> list[str]:
        return sorted(p.name for p in self.bundle.iterdir())


@pytest.fixture(scope="module")
def cases(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    root = tmp_path_factory.mktemp("case-bundles")
    built = {}
    for case in sorted((corpus_dir / "k8s" / "cases").glob("*.yaml")):
        key = "-".join(case.stem.split("-")[:2])  # "lost-001"
        bundle = case_to_bundle(case, root / case.stem)
        evidence = read_bundle(bundle)
        built[key] = Built(case, bundle, evidence, build_facts(evidence))
    return built


def test_every_case_converts_reads_and_builds_facts(cases: dict[str, Built]) -> None:
    assert len(cases) == 19
    for key, b in cases.items():
        assert b.evidence[Key.POD].ok, key
        internal = {n: g.reason for n, g in b.facts.groups.items() if "internal error" in g.reason}
        assert internal == {}, key
        assert {"device_plugin", "kubelet"} <= set(b.facts.groups), key


def test_no_answer_text_reaches_a_bundle(cases: dict[str, Built]) -> None:
    for key, b in cases.items():
        case = yaml.safe_load(b.case.read_text(encoding="utf-8"))
        blob = "\n".join(b.text(name) for name in b.files())
        for field in ("root_cause", "fix", "notes", "subfamily", "id"):
            answer = case.get(field)
            if isinstance(answer, str) and len(answer) > 12:
                assert answer not in blob, (key, field)


def test_answer_fields_do_not_change_the_bundle(corpus_dir: Path, tmp_path: Path) -> None:
    case = corpus_dir / "k8s" / "cases" / "lost-004-k8sdp-231-gpu-is-lost-blocks-whole-node.yaml"
    data = yaml.safe_load(case.read_text(encoding="utf-8"))
    blanked = dict(data, **{k: "REDACTED" for k in ANSWER_KEYS if k in data})
    (tmp_path / "blanked.yaml").write_text(yaml.safe_dump(blanked), encoding="utf-8")
    a = case_to_bundle(case, tmp_path / "a")
    b = case_to_bundle(tmp_path / "blanked.yaml", tmp_path / "b")
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) == ["nvidia-smi.txt", "pod.json"]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes()


# --- the device plugin's own words ----------------------------------------------------------


def test_lost_001_xid_69_marks_the_device_unhealthy(cases: dict[str, Built]) -> None:
    dp = cases["lost-001"].facts["device_plugin"]
    assert dp.known and dp.values["log_known"] and not dp.values["pod_known"]
    assert dp.values["unhealthy_devices"] == [
        {
            "uuid": "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8",
            "xid": 69,
            "resource": "nvidia.com/gpu",
            "reason": "xid",
            "line": 1,
            "xid_klass": "application",
            "xid_immediate_action": "RESTART_APP",
        }
    ]
    assert dp.values["unhealthy_xids"] == [69] and not dp.values["registered"]
    assert [r.line for r in dp.cites["unhealthy_devices"]] == [1, 2]


def test_lost_003_prose_only_log_yields_no_signal(cases: dict[str, Built]) -> None:
    dp = cases["lost-003"].facts["device_plugin"].values
    assert dp["log_known"] and dp["unhealthy_devices"] == [] and dp["errors"] == []


def test_pending_010_nvml_not_loadable(cases: dict[str, Built]) -> None:
    dp = cases["pending-010"].facts["device_plugin"].values
    assert dp["nvml_init_failed"] and dp["nvml_error"] == "could not load NVML library"
    assert not dp["registered"] and dp["starts"] == 1


def test_pending_016_too_old_for_health_checks(cases: dict[str, Built]) -> None:
    b = cases["pending-016"]
    dp = b.facts["device_plugin"].values
    assert dp["unhealthy_devices"] == [
        {
            "uuid": "GPU-edae6d5d-6698-fb8d-2c6b-2a791224f089",
            "xid": 0,
            "resource": "",
            "reason": "too_old",
            "line": 1,
            "xid_klass": "",
            "xid_immediate_action": "",
        }
    ]
    [event] = b.json("events.json")["items"]
    assert (event["reason"], event["message"]) == (
        "FailedScheduling",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )


def test_cases_without_node_logs_leave_those_groups_unknown(cases: dict[str, Built]) -> None:
    for key in ("create-001", "create-013", "pending-007", "oom-001"):
        kubelet = cases[key].facts["kubelet"]
        assert not kubelet.known, key
        assert kubelet.reason == (
            "the kubelet journal on the node: unavailable: kubelet.log is not in the bundle"
        )
    dp = cases["create-001"].facts["device_plugin"]
    assert not dp.known and "device-plugin.log is not in the bundle" in dp.reason


# --- what the converter wrote -----------------------------------------------------------------


def test_pod_status_only_as_stated(cases: dict[str, Built]) -> None:
    assert cases["lost-001"].json("pod.json")["status"] == {}
    status = cases["create-013"].json("pod.json")["status"]
    assert status == {"phase": "Failed", "reason": "UnexpectedAdmissionError"}
    status = cases["lost-004"].json("pod.json")["status"]
    assert status["phase"] == "Failed" and status["message"].startswith(
        "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed"
    )
    pod = cases["create-009"].json("pod.json")
    assert pod["metadata"]["name"] == "nvidia-container-toolkit-daemonset"
    assert pod["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "CrashLoopBackOff"}
    }
    assert "phase" not in pod["status"]
    pod = cases["pending-018"].json("pod.json")
    assert (pod["metadata"]["name"], pod["status"]) == ("pod1", {"phase": "Pending"})
    assert cases["oom-001"].json("pod.json")["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "CrashLoopBackOff"}
    }


def test_events_and_owner_events(cases: dict[str, Built]) -> None:
    [event] = cases["create-001"].json("events.json")["items"]
    assert (event["type"], event["reason"], event["involvedObject"]["name"]) == (
        "Warning",
        "FailedCreatePodSandBox",
        "case-pod",
    )
    assert event["message"].endswith('no runtime for "nvidia" is configured')
    b = cases["pending-021"]
    assert "events.json" not in b.files()
    owner = b.json("owner-events.json")["items"]
    assert [
        (e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in owner
    ] == [("FailedCreate", "ReplicaSet", "quota-exceed-inference-demo-654649bb45")] * 2
    assert b.json("pod.json")["metadata"]["ownerReferences"][0]["name"] == (
        "quota-exceed-inference-demo-654649bb45"
    )
    assert b.evidence[Key.OWNER_EVENTS].ok and b.evidence[Key.OWNER_EVENTS].detail.startswith(
        "2 items"
    )


def test_node_state(cases: dict[str, Built]) -> None:
    node = cases["pending-008"].json("node.json")
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert (node["status"]["capacity"]["cpu"], node["status"]["allocatable"]["cpu"]) == (
        "16",
        "15890m",
    )
    assert cases["pending-003"].json("node.json")["status"]["capacity"] == {
        "alpha.kubernetes.io/nvidia-gpu": "1"
    }
    b = cases["pending-007"]
    assert b.json("nodes.json")["items"][0]["status"]["allocatable"] == {"nvidia.com/gpu": "1"}
    assert "node-pods.json" not in b.files()  # "Allocated resources" prose is not a pod list


def test_logs_and_nvidia_smi_lines(cases: dict[str, Built]) -> None:
    assert cases["lost-004"].text("nvidia-smi.txt") == (
        "Unable to determine the device handle for GPU 0000:C1:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU\n"
    )
    assert "nvidia-smi.txt" not in cases["oom-001"].files()  # paraphrase, not tool output
    assert cases["create-009"].text("container.log") == (
        "unresolvable CDI devices management.nvidia.com/gpu=all: unknown\n"
    )
    assert len(cases["oom-003"].text("container.log").splitlines()) == 3


def test_cross_group_facts_of_other_owners(cases: dict[str, Built]) -> None:
    """Groups written by other engineers, read through the same bundles (cross-group)."""
    assert cases["lost-004"].facts.value("gpus.lost_pci_ids") == ["0000:C1:00.0"]
    assert cases["oom-001"].facts.value("container_log.cuda_oom") is True
    assert cases["pending-007"].facts.value("scheduler.insufficient_gpu") == 6


def test_string_events_and_labelled_tool_output(tmp_path: Path) -> None:
    """Converter behaviour on the shapes a case may quote (no corpus needed)."""
    case = {
        "id": "x-001",
        "root_cause": "the answer",
        "pod_status": {"phase": "Running", "status": "CrashLoopBackOff (restarting)"},
        "events": [
            "Warning FailedScheduling 3m default-scheduler 0/3 nodes are available: 3 "
            "Insufficient nvidia.com/gpu.",
            "Warning  BackOff  2m (x12 over 7m)  kubelet  Back-off restarting failed container",
            "Normal Scheduled <unknown> Successfully assigned default/x to n1",
        ],
        "other_log": [
            "dmesg -T: [Tue Aug 13 10:41:07 2024] NVRM: Xid (PCI:0000:3b:00): 79, "
            "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "nvidia-smi: No devices were found",
            "the other pod used 9GiB",
        ],
    }
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(case), encoding="utf-8")
    out = case_to_bundle(tmp_path / "case.yaml", tmp_path / "bundle")
    items = json.loads((out / "events.json").read_text(encoding="utf-8"))["items"]
    assert [(e["type"], e["reason"], e["count"], e["source"], e["message"]) for e in items] == [
        (
            "Warning",
            "FailedScheduling",
            1,
            {"component": "default-scheduler"},
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        ),
        (
            "Warning",
            "BackOff",
            12,
            {"component": "kubelet"},
            "Back-off restarting failed container",
        ),
        ("Normal", "Scheduled", 1, {}, "Successfully assigned default/x to n1"),
    ]
    status = json.loads((out / "pod.json").read_text(encoding="utf-8"))["status"]
    assert status["phase"] == "Running"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert (
        (out / "dmesg.log")
        .read_text(encoding="utf-8")
        .startswith("[Tue Aug 13 10:41:07 2024] NVRM: Xid (PCI:0000:3b:00): 79,")
    )
    assert (out / "nvidia-smi.txt").read_text(encoding="utf-8") == "No devices were found\n"
    assert "the answer" not in "".join(p.read_text(encoding="utf-8") for p in out.iterdir())
