"""Rebuild a public incident case (``corpus/k8s/cases/*.yaml``) as an evidence bundle.

The bundle holds only what the case quotes, turned into the files ``kubectl``/``journalctl``
would have produced (DESIGN 3.1): events, the pod status as stated, kubelet and device-plugin
logs, container logs, node capacity/allocatable/taints/labels, and nvidia-smi or kernel lines
found among the case's other logs. The answer fields (``id``, ``family``, ``subfamily``,
``root_cause``, ``fix``, ``notes``, ``source``) are never read, and nothing is inferred: a
phase the case does not state stays absent, and a node's pod list is never made up (a partial
list would claim the device plugin is absent), so ``Allocated resources`` prose stays out.

Bundles are written at test time into a temporary directory; corpus text never enters the repo.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

#: The only keys of a case file the converter reads.
EVIDENCE_KEYS = (
    "pod_status",
    "events",
    "kubelet_journal",
    "device_plugin_log",
    "container_log",
    "node_state",
    "other_log",
    "dmesg",
    "nvidia_smi",
)
#: Keys that hold the diagnosis; reading them would make the bundle a hint.
ANSWER_KEYS = frozenset(
    {
        "id",
        "family",
        "subfamily",
        "root_cause",
        "root_cause_confidence",
        "fix",
        "notes",
        "source",
        "related_sources",
    }
)

POD_NAME = "case-pod"
NAMESPACE = "default"
NODE_NAME = "case-node"
CONTAINER = "app"

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
WAITING_REASONS = (
    "ContainerCreating",
    "CrashLoopBackOff",
    "CreateContainerError",
    "CreateContainerConfigError",
    "RunContainerError",
    "ImagePullBackOff",
    "ErrImagePull",
    "PodInitializing",
    "InvalidImageName",
)
OWNER_KINDS = {
    "replicaset": "ReplicaSet",
    "deployment": "Deployment",
    "job": "Job",
    "statefulset": "StatefulSet",
    "daemonset": "DaemonSet",
    "cronjob": "CronJob",
}

_EVENT_TEXT = re.compile(
    r"^(?P<type>Normal|Warning)\s+(?P<reason>\S+)\s+"
    r"(?:(?P<age><unknown>|\d+[smhd]\S*(?: \(x(?P<count>\d+) over \S+\))?)\s+)?"
    r"(?:(?P<src>[a-z][\w.-]*(?:/[\w.-]+)?)\s{2,}|(?P<src2>default-scheduler|kubelet|"
    r"[a-z-]+-controller(?:-manager)?)\s+)?(?P<msg>.*)$"
)
#: A label an issue writer put in front of pasted output ("nvidia-smi -a (host): ...").
_LABEL = re.compile(
    r"^(?P<label>(?:nvidia-smi|dmesg|journalctl|kernel)[\w .()/-]{0,30}?):\s+"
    r"(?P<text>.+)$"
)
_SMI_OUTPUT = re.compile(
    r"Unable to determine the device handle|NVIDIA-SMI has failed|"
    r"No devices were found|Failed to initialize NVML|^\+-{5,}|"
    r"^\| NVIDIA-SMI|^GPU \d+: .+\(UUID: "
)
_KERNEL_OUTPUT = re.compile(r"\bNVRM: |\bS?Xid \(|nvidia-nvswitch\d*: ")


def load_case(path: Path) -> dict[str, Any]:
    """The evidence part of a case file (answer keys dropped before anything looks at it)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a case file is a YAML mapping")
    return {k: v for k, v in data.items() if k in EVIDENCE_KEYS and k not in ANSWER_KEYS}


def case_to_bundle(case_yaml_path: str | Path, out_dir: str | Path) -> Path:
    """Write the bundle for one case into ``out_dir`` (created) and return its path."""
    case = load_case(Path(case_yaml_path))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pod_events, owner_events, owner = _events(case.get("events"))
    pod = _pod(case.get("pod_status"), owner)
    name = pod["metadata"]["name"]
    _write_json(out / "pod.json", pod)
    if pod_events:
        _write_json(out / "events.json", _event_list(pod_events, name))
    if owner_events and owner:
        _write_json(
            out / "owner-events.json", _event_list(owner_events, owner["name"], owner["kind"])
        )
    _write_lines(out / "kubelet.log", _strings(case.get("kubelet_journal")))
    _write_lines(out / "device-plugin.log", _strings(case.get("device_plugin_log")))
    _write_lines(out / "container.log", _strings(case.get("container_log")))
    node = _node(case.get("node_state"))
    if node:
        _write_json(out / "node.json", node)
        _write_json(out / "nodes.json", {"apiVersion": "v1", "kind": "NodeList", "items": [node]})
    smi, kernel = _other_logs(case)
    _write_lines(out / "nvidia-smi.txt", smi)
    _write_lines(out / "dmesg.log", kernel)
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return []


def _write_lines(path: Path, lines: list[str]) -> None:
    if lines:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _pod(status: Any, owner: dict[str, str] | None) -> dict[str, Any]:
    """A Pod object with exactly the status the case states."""
    name = POD_NAME
    phase = reason = message = waiting = ""
    if isinstance(status, dict):
        if isinstance(status.get("pod"), str) and status["pod"].strip():
            name = status["pod"].strip()
        phase = _first_word(status.get("phase"), PHASES)
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or "")
        waiting = _first_word(status.get("status"), WAITING_REASONS)
        table = _kubectl_get_row(status.get("kubectl_get_po"))
        if table:
            name = table.get("NAME", name)
            phase = phase or _first_word(table.get("STATUS"), PHASES)
            waiting = waiting or _first_word(table.get("STATUS"), WAITING_REASONS)
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if owner:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1" if owner["kind"] != "Job" else "batch/v1",
                "kind": owner["kind"],
                "name": owner["name"],
                "controller": True,
            }
        ]
    pod_status: dict[str, Any] = {}
    if phase:
        pod_status["phase"] = phase
    if reason:
        pod_status["reason"] = reason
    if message:
        pod_status["message"] = message
    if waiting:
        pod_status["containerStatuses"] = [
            {
                "name": CONTAINER,
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": waiting}},
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": CONTAINER}]},
        "status": pod_status,
    }


def _first_word(value: Any, words: tuple[str, ...]) -> str:
    """The first of ``words`` that appears in ``value`` as a word (case kept as in words)."""
    if not isinstance(value, str):
        return ""
    hits = [
        (m.start(), w)
        for w in words
        if (m := re.search(rf"(?<![\w:]){re.escape(w)}(?![\w])", value))
    ]
    return min(hits)[1] if hits else ""


def _kubectl_get_row(rows: Any) -> dict[str, str]:
    """The first data row of a pasted ``kubectl get po`` table, keyed by header."""
    lines = _strings(rows)
    if len(lines) < 2:
        return {}
    header = lines[0].split()
    values = lines[1].split()
    return dict(zip(header, values, strict=False)) if header and header[0] == "NAME" else {}


def _events(value: Any) -> tuple[list[dict[str, str]], list[dict[str, str]], dict[str, str] | None]:
    """Split the case's events into pod events and owner events (by their stated source)."""
    pod_events: list[dict[str, str]] = []
    owner_events: list[dict[str, str]] = []
    owner: dict[str, str] | None = None
    for item in value if isinstance(value, list) else []:
        event = _event_fields(item)
        if event is None:
            continue
        kind, _, obj = event.get("from", "").partition("/")
        if obj and kind.lower() in OWNER_KINDS:
            owner = owner or {"kind": OWNER_KINDS[kind.lower()], "name": obj}
            owner_events.append(event)
        else:
            pod_events.append(event)
    return pod_events, owner_events, owner


def _event_fields(item: Any) -> dict[str, str] | None:
    if isinstance(item, dict):
        return {
            k: str(item[k])
            for k in ("type", "reason", "message", "from", "count")
            if item.get(k) is not None
        }
    if isinstance(item, str):
        m = _EVENT_TEXT.match(item.strip())
        if not m:
            return {"type": "Warning", "reason": "", "message": item.strip()}
        event = {"type": m["type"], "reason": m["reason"], "message": m["msg"].strip()}
        if m["src"] or m["src2"]:
            event["from"] = m["src"] or m["src2"]
        if m["count"]:
            event["count"] = m["count"]
        return event
    return None


def _event_list(events: list[dict[str, str]], name: str, kind: str = "Pod") -> dict[str, Any]:
    items = []
    for i, e in enumerate(events):
        source = e.get("from", "")
        component = "" if "/" in source else source
        count = int(e["count"]) if e.get("count", "").isdigit() else 1
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{i:016x}", "namespace": NAMESPACE},
                "involvedObject": {"kind": kind, "name": name, "namespace": NAMESPACE},
                "type": e.get("type", "Warning"),
                "reason": e.get("reason", ""),
                "message": e.get("message", ""),
                "count": count,
                "source": {"component": component} if component else {},
            }
        )
    return {"apiVersion": "v1", "kind": "EventList", "items": items}


def _node(state: Any) -> dict[str, Any] | None:
    if not isinstance(state, dict):
        return None
    capacity = _quantities(state.get("capacity"))
    allocatable = _quantities(state.get("allocatable"))
    labels = _quantities(state.get("labels"))
    taints = [t for t in state.get("taints") or [] if isinstance(t, dict)]
    if not (capacity or allocatable or labels or taints):
        return None
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": labels},
        "spec": {"taints": taints} if taints else {},
        "status": {},
    }
    if capacity:
        node["status"]["capacity"] = capacity
    if allocatable:
        node["status"]["allocatable"] = allocatable
    return node


def _quantities(value: Any) -> dict[str, str]:
    """A mapping of strings (capacity, allocatable, labels) from whatever the case holds."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _other_logs(case: dict[str, Any]) -> tuple[list[str], list[str]]:
    """nvidia-smi and kernel lines among the case's logs, with any pasted label removed."""
    smi = _strings(case.get("nvidia_smi"))
    kernel = _strings(case.get("dmesg"))
    for line in _strings(case.get("other_log")):
        text = line.strip()
        m = _LABEL.match(text)
        body = m["text"] if m else text
        if _SMI_OUTPUT.search(body):
            smi.append(body)
        elif _KERNEL_OUTPUT.search(body):
            kernel.append(body)
    return smi, kernel
