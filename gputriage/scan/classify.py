"""Pure classification: a pod or node object in, a small record and its troubles out.

``pod_info`` / ``node_info`` keep only the fields a scan needs (a few hundred bytes instead of
the object's kilobytes) and return None for objects a scan does not care about (pods that
neither request GPUs nor run the device plugin, nodes without GPUs), so a listing of 100,000
pods can be dropped page by page. ``pod_row`` / ``node_row`` / ``plugin_row`` turn records into
trouble rows. Nothing here raises on odd objects: missing fields read as empty.

GPU resources, device-plugin pods and quantities are recognised by the same helpers the fact
groups use (:mod:`gputriage.facts.gpu_resources`, :mod:`gputriage.facts.device_plugin`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputriage.facts.device_plugin import find_plugin_pod
from gputriage.facts.gpu_resources import NVIDIA_GPU, gpu_quantities, pod_gpu_request
from gputriage.facts.kube_objects import dict_list, integer, mapping, text
from gputriage.facts.tolerations import HARD_EFFECTS
from gputriage.scan.model import NODE, POD, RANK, Row, Trouble, parse_time

#: Waiting reasons of a container that was told to start and could not.
CREATE_ERRORS = frozenset(
    {
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
        "StartError",
        "PreStartHookError",
        "PostStartHookError",
        "ContainerCannotRun",
    }
)
#: Device-plugin container restarts from which the plugin counts as restarting.
PLUGIN_RESTARTS = 3
#: GPU labels a node record keeps (GPU feature discovery, NFD, device plugin, GPU Operator).
NODE_LABELS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.family",
    "nvidia.com/mig.strategy",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/mig.capable",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver-version.full",
    "feature.node.kubernetes.io/pci-10de.present",
)
#: The taint GKE and AKS put on every GPU node so only GPU pods land there: not a trouble.
DEDICATION_TAINT = NVIDIA_GPU


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    name: str
    init: bool
    waiting: str  # waiting reason ("" when not waiting)
    waiting_message: str
    terminated: str  # current termination reason
    exit_code: int  # -1 when not terminated
    finished: str
    last_terminated: str  # lastState.terminated reason
    last_exit_code: int  # -1 when none
    last_finished: str
    restarts: int


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What a scan keeps of a GPU pod or a device-plugin pod."""

    namespace: str
    name: str
    node: str
    phase: str
    reason: str
    message: str
    created: str
    started: str  # status.startTime
    scheduled_at: str  # PodScheduled=True transition
    unscheduled_reason: str  # PodScheduled=False reason ("" otherwise)
    unscheduled_message: str
    unscheduled_since: str
    gpu: Mapping[str, int]
    containers: tuple[ContainerInfo, ...]
    plugin: bool  # this is an NVIDIA device-plugin pod
    ready: bool
    deleting: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What a scan keeps of a GPU node."""

    name: str
    created: str
    ready: str  # Ready condition status: True | False | Unknown | "" (no condition)
    ready_reason: str
    ready_message: str
    ready_since: str
    unschedulable: bool
    taints: tuple[tuple[str, str, str, str], ...]  # (key, value, effect, timeAdded)
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    labels: Mapping[str, str]
    mig_labels: Mapping[str, int]  # nvidia.com/mig-<profile>.count labels -> count


# ---------------------------------------------------------------------------------------------
# Records


def pod_info(obj: Any) -> PodInfo | None:
    """The record of a GPU pod or a device-plugin pod; None for any other pod."""
    if not isinstance(obj, dict):
        return None
    spec, status, meta = (
        mapping(obj.get("spec")),
        mapping(obj.get("status")),
        mapping(obj.get("metadata")),
    )
    gpu = pod_gpu_request(spec)
    plugin = not gpu and find_plugin_pod([obj]) is not None
    if not gpu and not plugin:
        return None
    conditions = dict_list(status.get("conditions"))
    scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    unscheduled = scheduled.get("status") == "False"
    containers = tuple(
        _container(s, init)
        for init, field_name in ((True, "initContainerStatuses"), (False, "containerStatuses"))
        for s in dict_list(status.get(field_name))
    )
    return PodInfo(
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        node=text(spec.get("nodeName")),
        phase=text(status.get("phase")),
        reason=text(status.get("reason")),
        message=text(status.get("message")),
        created=text(meta.get("creationTimestamp")),
        started=text(status.get("startTime")),
        scheduled_at=text(scheduled.get("lastTransitionTime")) if not unscheduled else "",
        unscheduled_reason=text(scheduled.get("reason")) if unscheduled else "",
        unscheduled_message=text(scheduled.get("message")) if unscheduled else "",
        unscheduled_since=text(scheduled.get("lastTransitionTime")) if unscheduled else "",
        gpu=gpu,
        containers=containers,
        plugin=plugin,
        ready=ready,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _container(status: dict[str, Any], init: bool) -> ContainerInfo:
    state, last = mapping(status.get("state")), mapping(status.get("lastState"))
    waiting, term = mapping(state.get("waiting")), mapping(state.get("terminated"))
    last_term = mapping(last.get("terminated"))
    return ContainerInfo(
        name=text(status.get("name")),
        init=init,
        waiting=text(waiting.get("reason")),
        waiting_message=text(waiting.get("message")),
        terminated=text(term.get("reason")),
        exit_code=integer(term.get("exitCode"), -1) if term else -1,
        finished=text(term.get("finishedAt")),
        last_terminated=text(last_term.get("reason")),
        last_exit_code=integer(last_term.get("exitCode"), -1) if last_term else -1,
        last_finished=text(last_term.get("finishedAt")),
        restarts=integer(status.get("restartCount")),
    )


def node_info(obj: Any) -> NodeInfo | None:
    """The record of a GPU node (GPU resources, or GPU hardware labels); None otherwise."""
    if not isinstance(obj, dict):
        return None
    meta, spec, status = (mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
    all_labels = mapping(meta.get("labels"))
    labels = {k: text(all_labels[k]) for k in NODE_LABELS if k in all_labels}
    capacity = gpu_quantities(status.get("capacity"))
    allocatable = gpu_quantities(status.get("allocatable"))
    hardware = "true" in (
        labels.get("nvidia.com/gpu.present"),
        labels.get("feature.node.kubernetes.io/pci-10de.present"),
    )
    if (
        not capacity
        and not allocatable
        and not hardware
        and (integer(labels.get("nvidia.com/gpu.count")) <= 0)
    ):
        return None
    ready = next((c for c in dict_list(status.get("conditions")) if c.get("type") == "Ready"), {})
    taints = tuple(
        (text(t.get("key")), text(t.get("value")), text(t.get("effect")), text(t.get("timeAdded")))
        for t in dict_list(spec.get("taints"))
    )
    mig_labels = {
        k[len("nvidia.com/") : -len(".count")]: integer(v)
        for k, v in all_labels.items()
        if isinstance(k, str) and k.startswith("nvidia.com/mig-") and k.endswith(".count")
    }
    return NodeInfo(
        name=text(meta.get("name")),
        created=text(meta.get("creationTimestamp")),
        ready=text(ready.get("status")),
        ready_reason=text(ready.get("reason")),
        ready_message=text(ready.get("message")),
        ready_since=text(ready.get("lastTransitionTime")),
        unschedulable=spec.get("unschedulable") is True,
        taints=taints,
        capacity=capacity,
        allocatable=allocatable,
        labels=labels,
        mig_labels=mig_labels,
    )


# ---------------------------------------------------------------------------------------------
# Pods


def _age(since: str, now: float) -> float | None:
    when = parse_time(since)
    return None if when is None else now - when


def pod_row(pod: PodInfo, now: float, stuck_after: int) -> Row | None:
    """The trouble row of a GPU pod, or None when it looks fine (or is a plugin pod)."""
    if pod.plugin or not pod.gpu or pod.phase == "Succeeded":
        return None
    found: list[tuple[Trouble, str, str]] = []  # (trouble, words, since)
    if pod.phase == "Failed" and (
        pod.reason == "UnexpectedAdmissionError"
        or pod.reason.startswith("OutOf")
        or pod.message.startswith(("Pod was rejected", "Pod Allocate failed"))
    ):
        found.append(
            (
                Trouble.ADMISSION_REJECTED,
                f"{pod.reason}: {pod.message}".strip(": "),
                pod.started or pod.created,
            )
        )
    if not pod.node and pod.phase in ("Pending", ""):
        since = pod.unscheduled_since or pod.created
        age = _age(pod.created, now)
        if pod.unscheduled_reason == "Unschedulable" or (age is not None and age >= stuck_after):
            words = pod.unscheduled_message or pod.unscheduled_reason or "not scheduled yet"
            found.append((Trouble.PENDING, f"Pending: {words}", since))
    if pod.node:
        found += _container_troubles(pod, now, stuck_after)
    if not found:
        return None
    found.sort(key=lambda f: RANK[f[0]])
    troubles = tuple(dict.fromkeys(f[0] for f in found))
    reason = "; ".join(dict.fromkeys(f[1] for f in found))
    since = min((f[2] for f in found if f[2]), default="")
    return Row(
        POD, pod.namespace, pod.name, pod.node, troubles, reason, since, gpu_request=dict(pod.gpu)
    )


def _container_troubles(
    pod: PodInfo, now: float, stuck_after: int
) -> list[tuple[Trouble, str, str]]:
    found: list[tuple[Trouble, str, str]] = []
    started = pod.scheduled_at or pod.started or pod.created
    age = _age(started, now)
    stuck = age is not None and age >= stuck_after and not pod.terminal
    if not pod.containers and pod.phase == "Pending" and stuck:
        found.append((Trouble.CREATING, "scheduled, no container status yet", started))
    for c in pod.containers:
        if c.waiting == "CrashLoopBackOff":
            last = (
                f", last exit {c.last_exit_code} ({c.last_terminated})"
                if c.last_exit_code >= 0
                else ""
            )
            found.append(
                (
                    Trouble.CRASH_LOOP,
                    f"{c.name}: CrashLoopBackOff, {c.restarts} restarts{last}",
                    c.last_finished or started,
                )
            )
        elif c.waiting in CREATE_ERRORS and stuck:
            found.append(
                (
                    Trouble.CREATE_ERROR,
                    f"{c.name}: {c.waiting}: {c.waiting_message}".rstrip(": "),
                    started,
                )
            )
        elif c.waiting == "ContainerCreating" and stuck:
            found.append((Trouble.CREATING, f"{c.name}: ContainerCreating", started))
        for reason, code, finished, when in (
            (c.terminated, c.exit_code, c.finished, ""),
            (c.last_terminated, c.last_exit_code, c.last_finished, "last "),
        ):
            if reason == "OOMKilled":
                found.append(
                    (Trouble.OOM_KILLED, f"{c.name}: {when}OOMKilled (exit {code})", finished)
                )
            elif code == 137:
                found.append(
                    (
                        Trouble.EXIT_137,
                        f"{c.name}: {when}exit 137 ({reason or '?'}), not OOMKilled",
                        finished,
                    )
                )
    return found


# ---------------------------------------------------------------------------------------------
# Nodes


def advertised_gpus(node: NodeInfo) -> int:
    """Whole GPUs the node advertises: ``nvidia.com/gpu`` (or ``.shared``) over the
    time-slicing replicas."""
    replicas = max(1, integer(node.labels.get("nvidia.com/gpu.replicas"), 1))
    shared = node.capacity.get(f"{NVIDIA_GPU}.shared", 0)
    return (node.capacity.get(NVIDIA_GPU, 0) + shared) // replicas


def gpu_taints(node: NodeInfo) -> list[tuple[str, str, str, str]]:
    """NoSchedule/NoExecute taints about GPUs (``nvidia.com/*`` keys or keys naming a GPU),
    except the plain ``nvidia.com/gpu`` taint that dedicates a node pool to GPU pods."""
    return [
        t
        for t in node.taints
        if t[2] in HARD_EFFECTS
        and t[0] != DEDICATION_TAINT
        and (t[0].startswith("nvidia.com/") or "gpu" in t[0].lower())
    ]


def node_row(node: NodeInfo) -> Row | None:
    """The trouble row of a GPU node as its object alone tells, or None when it looks fine."""
    found: list[tuple[Trouble, str, str]] = []
    for resource in sorted(node.capacity):
        cap, alloc = node.capacity[resource], node.allocatable.get(resource, 0)
        if alloc < cap:
            found.append(
                (
                    Trouble.ALLOCATABLE_BELOW_CAPACITY,
                    f"{resource}: allocatable {alloc} of capacity {cap}",
                    "",
                )
            )
    labelled = integer(node.labels.get("nvidia.com/gpu.count"))
    mixed = node.labels.get("nvidia.com/mig.strategy") == "mixed"
    has_gpu_resource = any(n > 0 for n in node.capacity.values())
    if not has_gpu_resource:
        shown = ("nvidia.com/gpu.count=" + str(labelled)) if labelled else "GPU hardware labels"
        found.append(
            (
                Trouble.GPU_RESOURCE_MISSING,
                f"no GPU resource advertised ({shown}): no device plugin registered or "
                "its endpoint is gone",
                "",
            )
        )
    elif labelled and not mixed and advertised_gpus(node) < labelled:
        found.append(
            (
                Trouble.GPUS_BELOW_LABEL,
                f"advertises {advertised_gpus(node)} GPUs, label nvidia.com/gpu.count={labelled}",
                "",
            )
        )
    if node.ready and node.ready != "True":  # a node object without conditions says nothing
        words = f"Ready={node.ready}"
        if node.ready_reason:
            words += f" ({node.ready_reason})"
        if node.ready_message:
            words += f": {node.ready_message}"
        found.append((Trouble.NOT_READY, words, node.ready_since))
    if node.unschedulable:
        added = next((t[3] for t in node.taints if t[0] == "node.kubernetes.io/unschedulable"), "")
        found.append((Trouble.CORDONED, "cordoned (spec.unschedulable)", added))
    for key, value, effect, added in gpu_taints(node):
        shown = f"{key}={value}" if value else key
        found.append((Trouble.GPU_TAINT, f"taint {shown}:{effect}", added))
    return _node_row(node.name, found, node)


def plugin_row(node: str, plugins: Sequence[PodInfo], *, expected: bool) -> Row | None:
    """The device-plugin trouble of ``node``: none of ``plugins`` (the plugin pods bound to
    it) runs, one is failing or restarting; missing only counts when ``expected``."""
    if not plugins:
        if not expected:
            return None
        return _node_row(
            node,
            [(Trouble.DEVICE_PLUGIN_MISSING, "no NVIDIA device-plugin pod runs on the node", "")],
        )
    best = sorted(
        plugins,
        key=lambda p: (
            p.deleting,
            p.phase != "Running",
            not p.ready,
            any(c.waiting for c in p.containers),
        ),
    )[0]
    found: list[tuple[Trouble, str, str]] = []
    waiting = next(
        (c for c in best.containers if c.waiting and c.waiting != "PodInitializing"), None
    )
    if best.phase != "Running" or not best.ready or best.deleting or waiting is not None:
        state = waiting.waiting if waiting is not None else best.phase or "unknown"
        if best.deleting:
            state += ", terminating"
        found.append(
            (
                Trouble.DEVICE_PLUGIN_DOWN,
                f"device-plugin pod {best.key} is {state}" + ("" if best.ready else ", not ready"),
                best.started or best.created,
            )
        )
    restarts = max((c.restarts for c in best.containers), default=0)
    if restarts >= PLUGIN_RESTARTS:
        last = next((c for c in best.containers if c.restarts == restarts), None)
        why = f" (last: {last.last_terminated})" if last and last.last_terminated else ""
        found.append(
            (
                Trouble.DEVICE_PLUGIN_RESTARTING,
                f"device-plugin pod {best.key} restarted {restarts} times{why}",
                last.last_finished if last else "",
            )
        )
    return _node_row(node, found)


def _node_row(
    name: str, found: list[tuple[Trouble, str, str]], node: NodeInfo | None = None
) -> Row | None:
    if not found:
        return None
    found.sort(key=lambda f: RANK[f[0]])
    return Row(
        NODE,
        "",
        name,
        name,
        tuple(dict.fromkeys(f[0] for f in found)),
        "; ".join(f[1] for f in found),
        min((f[2] for f in found if f[2]), default=""),
        gpu_capacity=dict(node.capacity) if node else {},
        gpu_allocatable=dict(node.allocatable) if node else {},
    )


def plugin_expected(node: NodeInfo) -> bool:
    """Whether a device-plugin pod should run on ``node`` (the GPU Operator labels nodes
    where it deploys none with ``nvidia.com/gpu.deploy.device-plugin=false``)."""
    return node.labels.get("nvidia.com/gpu.deploy.device-plugin") != "false"
