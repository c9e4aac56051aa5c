"""Quota and DRA facts, and the Kubernetes groups through the registry and CEL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Key
from gputriage.facts.build import build_facts
from gputriage.facts.registry import builders, specs
from tests.unit.k8s_evidence import K8S, MODULES, fixture, groups, text

# -- quota ----------------------------------------------------------------------------------


def test_namespace_quota_against_the_pods_request() -> None:
    quota = groups(fixture(Key.POD, "pending/pod.json"), fixture(Key.QUOTA, "pending/quota.json"))[
        "quota"
    ]
    v = quota.values
    assert quota.known and v["quotas_known"]
    assert len(v["quotas"]) == 4
    assert v["gpu_quotas"] == [
        {
            "name": "gpu-quota",
            "resource": "requests.nvidia.com/gpu",
            "hard": "8",
            "used": "6",
            "hard_value": 8,
            "used_value": 6,
            "gpu": True,
        }
    ]
    cpu = next(q for q in v["quotas"] if q["resource"] == "requests.cpu")
    assert (cpu["used"], cpu["used_value"]) == ("12500m", 13)
    memory = next(q for q in v["quotas"] if q["resource"] == "limits.memory")
    assert memory["hard_value"] == 2**40
    assert v["gpu_headroom"] == {"nvidia.com/gpu": 2}
    assert (v["gpu_quota_full"], v["gpu_quota_exceeded"]) == (False, True)  # 6 + 4 > 8
    assert quota.cites["gpu_quota_exceeded"][0].text == '"requests.nvidia.com/gpu": "8"'
    assert v["exceeded_messages"] == []


def test_quota_fits_a_small_request() -> None:
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
    }
    quota = groups(text(Key.POD, json.dumps(pod)), fixture(Key.QUOTA, "pending/quota.json"))
    assert quota["quota"].values["gpu_quota_exceeded"] is False  # 6 + 2 == 8


def test_owner_quota_rejection() -> None:
    quota = groups(fixture(Key.OWNER_EVENTS, "owner/owner-events.json"))["quota"]
    v = quota.values
    assert quota.known
    assert v["quotas_known"] is False
    assert len(v["exceeded_messages"]) == 2
    assert v["exceeded"] == [
        {
            "quota": "inference-gpu-quota",
            "resource": "requests.nvidia.com/gpu",
            "requested": 2,
            "used": 3,
            "limited": 4,
            "gpu": True,
        }
    ]  # retries collapse
    assert v["gpu_quota_exceeded"] is True
    assert len(quota.cites["gpu_quota_exceeded"]) == 2


def test_quota_unknown_without_evidence() -> None:
    quota = groups()["quota"]
    assert not quota.known
    assert "resource quotas in the namespace: unavailable" in quota.reason
    truncated = groups(text(Key.QUOTA, b'{"kind": "ResourceQuotaList", "items": [{"a"'))
    assert "truncated JSON" in truncated["quota"].reason


# -- DRA ------------------------------------------------------------------------------------


def test_dra_claims_classes_and_slices() -> None:
    dra = groups(
        fixture(Key.POD, "dra/pod.json"),
        fixture(Key.RESOURCE_CLAIMS, "dra/resourceclaims.json"),
        fixture(Key.RESOURCE_SLICES, "dra/resourceslices.json"),
        fixture(Key.DEVICE_CLASSES, "dra/deviceclasses.json"),
    )["dra"]
    v = dra.values
    assert dra.known and v["pod_uses_dra"]
    assert v["pod_claims"] == [
        {"name": "gpu", "claim": "shared-gpu", "template": ""},
        {"name": "mig", "claim": "dra-pod-mig-x7k2p", "template": "mig-1g"},  # from status
        {"name": "gone", "claim": "deleted-claim", "template": ""},
    ]
    assert [c["name"] for c in v["claims"]] == ["shared-gpu", "dra-pod-mig-x7k2p"]
    mig = v["claims"][1]
    assert (mig["allocated"], mig["reserved_for"], mig["deleting"]) == (True, ["dra-pod"], False)
    assert mig["device_classes"] == ["gpu.nvidia.com", "mig.nvidia.com"]  # firstAvailable
    assert mig["devices"] == ["gpu.nvidia.com/gpu-node-9/gpu-0-mig-1g-10gb-0"]
    assert v["missing_claims"] == ["deleted-claim"]
    assert v["unallocated_claims"] == ["shared-gpu"]
    assert v["device_classes"] == ["mig.nvidia.com"]
    assert v["missing_device_classes"] == ["gpu.nvidia.com"]
    assert (v["slices_count"], v["drivers"], v["devices_total"], v["devices_on_node"]) == (
        2,
        ["gpu.nvidia.com"],
        5,
        3,
    )
    assert (v["devices_allocated"], v["devices_available"]) == (2, 3)
    assert v["tainted_devices"] == [
        {
            "device": "gpu-2",
            "driver": "gpu.nvidia.com",
            "key": "gpu.nvidia.com/xid",
            "value": "79",
            "effect": "NoSchedule",
        }
    ]
    assert dra.cites["missing_device_classes"][0].text == ('"deviceClassName": "gpu.nvidia.com",')


def test_classic_dra_claim_and_pre_131_pod_spec() -> None:
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "pod0"},
        "spec": {
            "containers": [],
            "resourceClaims": [
                {"name": "gpu", "source": {"resourceClaimTemplateName": "gpu-template"}}
            ],
        },
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod0-gpu"}]},
    }
    claims = {
        "kind": "ResourceClaimList",
        "apiVersion": "resource.k8s.io/v1alpha2",
        "items": [
            {
                "apiVersion": "resource.k8s.io/v1alpha2",
                "kind": "ResourceClaim",
                "metadata": {"name": "pod0-gpu", "deletionTimestamp": "2024-06-10T10:00:00Z"},
                "spec": {"resourceClassName": "gpu.nvidia.com"},
                "status": {},
            }
        ],
    }
    classes = {"kind": "DeviceClassList", "apiVersion": "resource.k8s.io/v1beta1", "items": []}
    dra = groups(
        text(Key.POD, json.dumps(pod)),
        text(Key.RESOURCE_CLAIMS, json.dumps(claims)),
        text(Key.DEVICE_CLASSES, json.dumps(classes)),
    )["dra"]
    v = dra.values
    assert v["pod_claims"] == [{"name": "gpu", "claim": "pod0-gpu", "template": "gpu-template"}]
    assert v["claims"][0]["device_classes"] == ["gpu.nvidia.com"]
    assert (v["deleting_claims"], v["unallocated_claims"]) == (["pod0-gpu"], ["pod0-gpu"])
    assert v["missing_device_classes"] == ["gpu.nvidia.com"]
    assert v["slices_known"] is False


def test_pod_without_claims_and_no_dra_objects() -> None:
    dra = groups(fixture(Key.POD, "running/pod.yaml"))["dra"]
    assert dra.known
    assert (dra.values["pod_uses_dra"], dra.values["claims_known"]) == (False, False)
    assert not groups()["dra"].known


# -- through the registry, the bundle reader and CEL -----------------------------------------


def test_groups_are_registered_in_order() -> None:
    names = [m.__name__ for m in MODULES]
    registered = [getattr(b, "__name__", "") for b in builders().values()]
    assert [n for n in registered if n in names] == names
    # each group is listed under its own name, and builds after the groups it reads
    assert all(name == b.SPEC.name for name, b in builders().items())
    assert list(builders())[:2] == ["pod", "events"]
    declared = specs()
    for module in MODULES:
        spec = declared[module.SPEC.name]
        assert all(f.doc for f in spec.fields.values()), spec.name


def test_bundle_to_facts_to_cel(tmp_path: Path) -> None:
    import cel

    for name in (
        "pod.json",
        "events.json",
        "nodes.json",
        "node-pods.json",
        "quota.json",
        "runtimeclasses.json",
    ):
        shutil.copy(K8S / "pending" / name, tmp_path / name)
    shutil.copy(K8S / "owner" / "owner-events.json", tmp_path / "owner-events.json")
    facts = build_facts(read_bundle(tmp_path))
    for name in ("pod", "events", "owner_events", "scheduler", "cluster", "quota"):
        assert facts[name].known, (name, facts[name].reason)
    assert not facts["node"].known
    assert facts.value("scheduler.insufficient_gpu") == 3
    assert facts.citations("scheduler.insufficient")[0].source == f"{tmp_path.name}/pod.json"
    context = cel.Context(facts.to_context())
    checks = {
        "scheduler.insufficient_gpu > 0 && scheduler.preemption_helpful == true": True,
        'scheduler.reasons.exists(r, r.kind == "taint" && r.taint_key == "dedicated")': True,
        "pod.containers.filter(c, !c.init).size() == 2": True,
        'pod.gpu_resources["nvidia.com/gpu"] == 4': True,
        'cluster.gpu_nodes.exists(n, n.free != null && n.free["nvidia.com/gpu"] >= '
        "pod.gpu_total)": False,
        "cluster.gpu_nodes.filter(n, n.requested == null).size() == 3": True,
        "cluster.holders.exists(h, h.terminating && h.gpus == 2)": True,
        "quota.gpu_quota_exceeded && owner_events.failed_create_quota": True,
        "!node.known && node.capacity_gt_allocatable.size() == 0": True,
        "dra.known && !dra.pod_uses_dra": True,
    }
    for expression, expected in checks.items():
        assert cel.compile(expression).execute(context) is expected, expression
