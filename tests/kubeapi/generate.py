"""A generated GPU cluster of any size for the fake API: healthy bulk, decoys, planted troubles.

``generate(nodes, pods, seed=..., now=...)`` returns a :class:`Cluster` and the
:class:`Planted` troubles: exactly which pods and nodes a correct ``gputriage scan`` must report,
and with which trouble classes. Everything is deterministic for a seed and a ``now`` (times that
matter for ``--stuck-after`` are relative to ``now``).

The bulk is healthy: GPU nodes (H100 and A100, a MIG-mixed pool, a time-sliced pool, a pool
tainted ``nvidia.com/gpu=present`` as GKE does), CPU nodes, a device-plugin pod per GPU node,
running GPU and CPU pods, finished pods. Decoys look like trouble but are not (CPU pods
crash-looping or OOM-killed, GPU pods pending or creating for less than the threshold, a device
plugin that restarted once, a NotReady or cordoned CPU node). Planted troubles cover every class.

Healthy pods of one shape on one node share their ``spec`` and ``status`` dicts (only
``metadata`` is per pod): the server serialises them per request anyway, and 100,000 pods then
cost a fraction of the memory of 100,000 separate objects.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi import cluster as c
from tests.kubeapi.cluster import Cluster, Obj

#: The node planted with a lost card (Xid 79 in its device-plugin log, 7 of 8 allocatable).
LOST_NODE = "gpu-node-1"
PLUGIN_NS = "gpu-operator"
STUCK = 30 * 60  # planted stuck objects are this old; the scan threshold in tests is 10 min
RECENT = 2 * 60  # decoys this young must not be reported with a 10 min threshold
UNSCHEDULABLE = (
    "0/{n} nodes are available: {k} Insufficient nvidia.com/gpu, 3 node(s) had "
    "untolerated taint {{nvidia.com/gpu.health: unhealthy}}. preemption: 0/{n} "
    "nodes are available: {n} No preemption victims found for incoming pod."
)


@dataclass
class Planted:
    """What a scan must find: trouble classes per pod ``(namespace, name)`` and per node."""

    pods: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    lost_node: str = LOST_NODE

    def pod(self, namespace: str, name: str, *troubles: str) -> None:
        self.pods[(namespace, name)] = frozenset(troubles)

    def node(self, name: str, *troubles: str) -> None:
        self.nodes[name] = self.nodes.get(name, frozenset()) | frozenset(troubles)


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Gen:
    def __init__(self, n_nodes: int, n_pods: int, seed: int, now: float) -> None:
        self.rng = random.Random(seed)
        self.now = now
        self.cluster = Cluster(dra_version=None)
        self.planted = Planted()
        self.n_gpu = max(40, n_nodes * 7 // 10)
        self.n_cpu = max(4, n_nodes - self.n_gpu)
        self.n_pods = n_pods
        self.namespaces = [f"team-{i:02d}" for i in range(20)]
        self.gpu_nodes = [f"gpu-node-{i}" for i in range(self.n_gpu)]
        self.cpu_nodes = [f"cpu-node-{i}" for i in range(self.n_cpu)]
        self.serial = 0

    def ago(self, seconds: float) -> str:
        return _iso(self.now - seconds)

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial:06d}"

    # -- nodes -------------------------------------------------------------------------------

    def node_kinds(self) -> dict[str, str]:
        """Which planted trouble (or special pool) each GPU node gets."""
        kinds: dict[str, str] = {LOST_NODE: "lost"}
        plan = (
            ["allocatable"] * 2
            + ["below-label"] * 2
            + ["no-resource"]
            + ["not-ready"] * 2
            + ["cordoned"] * 2
            + ["plugin-missing"] * 2
            + ["plugin-crash"] * 2
            + ["plugin-restarting"]
            + ["gpu-taint"] * 2
        )
        free = [n for n in self.gpu_nodes if n != LOST_NODE]
        chosen = self.rng.sample(free, len(plan) + 3 * max(4, self.n_gpu // 20))
        for name, kind in zip(chosen, plan, strict=False):
            kinds[name] = kind
        pools = chosen[len(plan) :]
        third = len(pools) // 3
        for name in pools[:third]:
            kinds[name] = "mig-mixed"
        for name in pools[third : 2 * third]:
            kinds[name] = "time-sliced"
        for name in pools[2 * third :]:
            kinds[name] = "dedicated"
        return kinds

    def add_nodes(self, kinds: Mapping[str, str]) -> None:
        for i, name in enumerate(self.gpu_nodes):
            kind = kinds.get(name, "")
            a100 = i % 3 == 0
            labels = {
                "nvidia.com/gpu.memory": "81920" if not a100 else "40960",
                "nvidia.com/gpu.family": "hopper" if not a100 else "ampere",
                "nvidia.com/mig.strategy": "single",
            }
            product = "NVIDIA-A100-SXM4-40GB" if a100 else "NVIDIA-H100-80GB-HBM3"
            kw: dict[str, Any] = {}
            if kind == "lost":
                kw["allocatable"] = 7
            elif kind == "allocatable":
                kw["allocatable"] = 6
            elif kind == "below-label":
                kw.update(gpus=6, labels={"nvidia.com/gpu.count": "8"})
            elif kind == "no-resource":
                kw["gpus"] = 0
                labels["nvidia.com/gpu.count"] = "8"
            elif kind == "not-ready":
                kw["ready"] = False
            elif kind == "cordoned":
                kw["unschedulable"] = True
            elif kind == "gpu-taint":
                kw["taints"] = [
                    {
                        "key": "nvidia.com/gpu.health",
                        "value": "unhealthy",
                        "effect": "NoExecute",
                        "timeAdded": self.ago(STUCK),
                    }
                ]
            elif kind == "dedicated":
                kw["taints"] = [c.taint("nvidia.com/gpu", value="present")]
            elif kind == "mig-mixed":
                labels.update(
                    {
                        "nvidia.com/mig.strategy": "mixed",
                        "nvidia.com/mig.config": "all-1g.10gb",
                        "nvidia.com/mig.config.state": "success",
                        "nvidia.com/mig-1g.10gb.count": "56",
                    }
                )
            elif kind == "time-sliced":
                labels.update(
                    {
                        "nvidia.com/gpu.replicas": "4",
                        "nvidia.com/gpu.sharing-strategy": "time-slicing",
                    }
                )
            node = c.gpu_node(
                name,
                address=f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",
                product=product,
                annotations=False,
                labels={**labels, **kw.pop("labels", {})},
                **kw,
            )
            if kind == "mig-mixed":
                for status_key in ("capacity", "allocatable"):
                    res = node["status"][status_key]
                    res["nvidia.com/gpu"] = "0"
                    res["nvidia.com/mig-1g.10gb"] = "56"
            elif kind == "time-sliced":
                for status_key in ("capacity", "allocatable"):
                    node["status"][status_key]["nvidia.com/gpu"] = "32"
            if kind == "not-ready":
                ready = node["status"]["conditions"][-1]
                ready["lastTransitionTime"] = self.ago(STUCK)
            self.cluster.add(node)
        for i, name in enumerate(self.cpu_nodes):
            # decoys: CPU nodes NotReady or cordoned are not GPU trouble
            node = c.cpu_node(name, address=f"10.200.{(i >> 8) & 255}.{i & 255}", ready=i != 1)
            if i == 2:
                node["spec"]["unschedulable"] = True
            self.cluster.add(node)
        for name, kind in kinds.items():
            planted = {
                "lost": ["allocatable-below-capacity"],
                "allocatable": ["allocatable-below-capacity"],
                "below-label": ["gpus-below-label"],
                "no-resource": ["gpu-resource-missing"],
                "not-ready": ["not-ready"],
                "cordoned": ["cordoned"],
                "plugin-missing": ["device-plugin-missing"],
                "plugin-crash": ["device-plugin-not-running", "device-plugin-restarting"],
                "plugin-restarting": ["device-plugin-restarting"],
                "gpu-taint": ["gpu-taint"],
            }.get(kind)
            if planted:
                self.planted.node(name, *planted)

    def add_plugins(self, kinds: Mapping[str, str]) -> None:
        ds = c.daemonset(
            "nvidia-device-plugin-daemonset",
            PLUGIN_NS,
            labels={"app": "nvidia-device-plugin-daemonset"},
        )
        self.cluster.add(c.namespace(PLUGIN_NS), ds)
        for i, name in enumerate(self.gpu_nodes):
            kind = kinds.get(name, "")
            if kind == "plugin-missing":
                continue
            plugin = c.device_plugin_pod(name, owner=ds, name=f"nvidia-device-plugin-{i:05d}")
            statuses = plugin["status"]["containerStatuses"]
            if kind == "plugin-crash":
                statuses[0] = c.waiting(
                    "nvidia-device-plugin",
                    "CrashLoopBackOff",
                    "back-off 5m0s restarting failed container",
                    restarts=7,
                    last=c.terminated("Error", 1),
                )
                _not_ready(plugin)
            elif kind == "plugin-restarting":
                statuses[0] = c.running(
                    "nvidia-device-plugin", restarts=5, last=c.terminated("Error", 1)
                )
            elif i % 50 == 7:  # decoy: one restart is not "restarting"
                statuses[0] = c.running(
                    "nvidia-device-plugin", restarts=1, last=c.terminated("Error", 1)
                )
            self.cluster.add(plugin)
            if kind == "lost":
                self.cluster.add_log(plugin, c.XID_PLUGIN_LOG, container="nvidia-device-plugin")
                self.cluster.add_node_log(name, "kubelet", c.KUBELET_JOURNAL)
        lost = self.cluster.get("", "nodes", "", LOST_NODE)
        assert lost is not None
        self.cluster.add(
            c.event(
                lost,
                "NodeAllocatableEnforced",
                "Updated Node Allocatable limit across pods",
                type="Normal",
                component="kubelet",
                host=LOST_NODE,
            )
        )

    # -- pods --------------------------------------------------------------------------------

    def add_pods(self, kinds: Mapping[str, str]) -> None:
        healthy_gpu_nodes = [
            n for n in self.gpu_nodes if kinds.get(n, "") in ("", "dedicated", "time-sliced")
        ]
        for ns in self.namespaces:
            self.cluster.add(c.namespace(ns))
        self.plant_pods(healthy_gpu_nodes)
        templates: dict[tuple[str, str], tuple[Obj, Obj]] = {}
        for i in range(self.n_pods):
            ns = self.namespaces[i % len(self.namespaces)]
            roll = self.rng.random()
            if roll < 0.45:
                node, shape = healthy_gpu_nodes[i % len(healthy_gpu_nodes)], "gpu"
            elif roll < 0.85:
                node, shape = self.cpu_nodes[i % len(self.cpu_nodes)], "cpu"
            else:
                node, shape = healthy_gpu_nodes[i % len(healthy_gpu_nodes)], "done"
            key = (node, shape)
            if key not in templates:
                templates[key] = self.template(node, shape)
            spec, status = templates[key]
            name = self.name(f"{shape}-job")
            self.cluster.add(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": {"app": f"{shape}-job"},
                        "creationTimestamp": self.ago(86400),
                    },
                    "spec": spec,
                    "status": status,
                }
            )

    def template(self, node: str, shape: str) -> tuple[Obj, Obj]:
        if shape == "cpu":
            p = c.pod("t", node=node, gpus=0, statuses=[c.running("main")])
        elif shape == "gpu":
            p = c.pod("t", node=node, gpus=self.rng.choice((1, 2, 4)), statuses=[c.running("main")])
        else:
            p = c.pod(
                "t",
                node=node,
                gpus=1,
                phase="Succeeded",
                statuses=[_terminated_status("main", "Completed", 0)],
            )
        return p["spec"], p["status"]

    def plant_pods(self, nodes: list[str]) -> None:
        rng = self.rng
        ns = self.namespaces

        def add(p: Obj, *troubles: str) -> None:
            self.cluster.add(p)
            if troubles:
                self.planted.pod(p["metadata"]["namespace"], p["metadata"]["name"], *troubles)

        def on(node_pick: int) -> str:
            return nodes[node_pick % len(nodes)]

        n = len(self.gpu_nodes) + len(self.cpu_nodes)
        for k in range(3):  # the scheduler said no
            p = c.pod(
                self.name("trainer"),
                rng.choice(ns),
                gpus=8,
                unschedulable=UNSCHEDULABLE.format(n=n, k=n - 3),
            )
            _times(p, created=self.ago(STUCK + k), scheduled=self.ago(STUCK))
            add(p, "pending")
        p = c.pod(self.name("queued"), rng.choice(ns), gpus=1)  # old, no condition
        _times(p, created=self.ago(STUCK))
        add(p, "pending")
        p = c.pod(self.name("fresh"), rng.choice(ns), gpus=1)  # decoy: just created
        _times(p, created=self.ago(RECENT))
        add(p)
        for k in range(3):
            p = c.pod(self.name("creating"), rng.choice(ns), node=on(k * 7 + 1), gpus=2)
            _times(p, created=self.ago(STUCK + 60), scheduled=self.ago(STUCK))
            add(p, "creating")
        p = c.pod(self.name("starting"), rng.choice(ns), node=on(3), gpus=1)  # decoy: young
        _times(p, created=self.ago(RECENT), scheduled=self.ago(RECENT))
        add(p)
        for k in range(2):
            p = c.pod(
                self.name("toolkit"),
                rng.choice(ns),
                node=on(k * 11 + 5),
                gpus=1,
                statuses=[
                    c.waiting(
                        "main",
                        "CreateContainerError",
                        "failed to create containerd task: failed to create "
                        "shim task: OCI runtime create failed: "
                        "nvidia-container-cli: initialization error: nvml "
                        "error: driver not loaded",
                    )
                ],
            )
            _times(p, created=self.ago(STUCK + 60), scheduled=self.ago(STUCK))
            add(p, "create-error")
        for k in range(2):
            p = c.pod(
                self.name("crashing"),
                rng.choice(ns),
                node=on(k * 13 + 2),
                gpus=1,
                statuses=[
                    c.waiting(
                        "main",
                        "CrashLoopBackOff",
                        "back-off 5m0s",
                        restarts=9,
                        last=c.terminated("Error", 1),
                    )
                ],
            )
            add(p, "crash-loop")
        for k in range(2):
            p = c.pod(
                self.name("llm"),
                rng.choice(ns),
                node=on(k * 17 + 3),
                gpus=1,
                statuses=[
                    c.waiting(
                        "main",
                        "CrashLoopBackOff",
                        "back-off 5m0s",
                        restarts=4,
                        last=c.terminated("OOMKilled", 137),
                    )
                ],
            )
            add(p, "oom-killed", "crash-loop")
        p = c.pod(
            self.name("batch"),
            rng.choice(ns),
            node=on(19),
            gpus=4,
            statuses=[c.running("main", restarts=1, last=c.terminated("OOMKilled", 137))],
        )
        add(p, "oom-killed")
        for k in range(2):
            p = c.pod(
                self.name("k3s"),
                rng.choice(ns),
                node=on(k * 23 + 4),
                gpus=1,
                statuses=[c.running("main", restarts=3, last=c.terminated("Error", 137))],
            )
            add(p, "exit-137")
        for k, (reason, message) in enumerate(
            (
                (
                    "UnexpectedAdmissionError",
                    "Pod was rejected: Allocate failed due to no "
                    "healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, "
                    "which is unexpected",
                ),
                (
                    "UnexpectedAdmissionError",
                    "Pod was rejected: Allocate failed due to device "
                    "plugin GetPreferredAllocation rpc failed with err: rpc error: code = Unknown "
                    "desc = error getting list of preferred allocation devices: unable to retrieve"
                    " list of available devices: error creating nvml.Device 3: nvml: GPU is lost, "
                    "which is unexpected",
                ),
                (
                    "OutOfnvidia.com/gpu",
                    "Pod was rejected: Node didn't have enough resource: "
                    "nvidia.com/gpu, requested: 8, used: 0, capacity: 7",
                ),
            )
        ):
            p = c.pod(
                self.name("rejected"),
                rng.choice(ns),
                node=LOST_NODE if k else on(29),
                gpus=8,
                phase="Failed",
                statuses=[],
            )
            p["status"].update(reason=reason, message=message)
            p["status"].pop("containerStatuses", None)
            add(p, "admission-rejected")
        # decoys: CPU pods in trouble, a GPU pod that restarted once after a clean exit
        for k, last in enumerate((c.terminated("OOMKilled", 137), c.terminated("Error", 1))):
            p = c.pod(
                self.name("web"),
                rng.choice(ns),
                node=self.cpu_nodes[k],
                gpus=0,
                statuses=[c.waiting("main", "CrashLoopBackOff", restarts=6, last=last)],
            )
            add(p)
        p = c.pod(
            self.name("notebook"),
            rng.choice(ns),
            node=on(31),
            gpus=1,
            statuses=[c.running("main", restarts=1, last=c.terminated("Completed", 0))],
        )
        add(p)


def _times(p: Obj, *, created: str, scheduled: str = "") -> None:
    p["metadata"]["creationTimestamp"] = created
    status = p["status"]
    for cond in status.get("conditions") or []:
        cond["lastTransitionTime"] = scheduled or created
    if "startTime" in status:
        status["startTime"] = scheduled or created


def _not_ready(p: Obj) -> None:
    for cond in p["status"]["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond["status"] = "False"


def _terminated_status(name: str, reason: str, code: int) -> Obj:
    status = copy.deepcopy(c.running(name))
    status.update(state=c.terminated(reason, code), ready=False, started=False)
    return status


def generate(
    nodes: int = 2000, pods: int = 20000, *, seed: int = 7, now: float | None = None
) -> tuple[Cluster, Planted]:
    """A cluster of about ``nodes`` nodes (70% GPU) and ``pods`` workload pods, plus a
    device-plugin pod per GPU node, with the troubles in :class:`Planted`."""
    import time

    gen = _Gen(nodes, pods, seed, time.time() if now is None else now)
    kinds = gen.node_kinds()
    gen.add_nodes(kinds)
    gen.add_plugins(kinds)
    gen.add_pods(kinds)
    return gen.cluster, gen.planted
