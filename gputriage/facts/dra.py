"""Dynamic Resource Allocation facts: the pod's ResourceClaims, their classes and devices.

Reads every API generation seen in the field: classic DRA (``resource.k8s.io/v1alpha2``,
``spec.resourceClassName``, k8s 1.26-1.30), structured parameters in ``v1alpha3``/``v1beta1``
(``requests[].deviceClassName``) and ``v1beta2``/``v1`` (``requests[].exactly`` /
``firstAvailable``). Pod claims are ``spec.resourceClaims`` (``source:`` wrapper before 1.31)
resolved through ``status.resourceClaimStatuses`` for claims generated from templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.kube_objects import cite_text, dict_list, items, mapping, obj, text
from gputriage.facts.model import FactGroup, FieldSpec, GroupSpec, Target, known, unknown

SPEC = GroupSpec(
    name="dra",
    doc="DRA: the ResourceClaims the pod uses, whether they are allocated and reserved, the "
    "DeviceClasses they name, and the devices ResourceSlices publish.",
    sources=(Key.POD, Key.RESOURCE_CLAIMS, Key.RESOURCE_SLICES, Key.DEVICE_CLASSES),
    fields={
        "pod_uses_dra": FieldSpec("bool", False, "The pod spec has resourceClaims."),
        "pod_claims": FieldSpec(
            "list<map>",
            [],
            "spec.resourceClaims as maps: name (in the "
            "pod), claim (ResourceClaim name, '' until "
            "generated), template.",
        ),
        "claims_known": FieldSpec("bool", False, "resourceclaims.json was read."),
        "claims": FieldSpec(
            "list<map>",
            [],
            "The pod's ResourceClaims as maps: name, "
            "allocated, reserved_for (pod names), deleting, "
            "device_classes (list), devices "
            "(driver/pool/device), api_version.",
        ),
        "missing_claims": FieldSpec("list", [], "Claims the pod names that do not exist."),
        "unallocated_claims": FieldSpec("list", [], "The pod's claims without an allocation."),
        "deleting_claims": FieldSpec("list", [], "The pod's claims being deleted."),
        "device_classes_known": FieldSpec("bool", False, "deviceclasses.json was read."),
        "device_classes": FieldSpec("list", [], "DeviceClass names that exist."),
        "missing_device_classes": FieldSpec(
            "list", [], "Classes the pod's claims name that do not exist."
        ),
        "slices_known": FieldSpec("bool", False, "resourceslices.json was read."),
        "slices_count": FieldSpec("int", 0, "ResourceSlices."),
        "drivers": FieldSpec("list", [], "Drivers publishing slices (gpu.nvidia.com...)."),
        "devices_total": FieldSpec("int", 0, "Devices published in all slices."),
        "devices_on_node": FieldSpec("int", 0, "Devices in slices of the pod's node."),
        "devices_allocated": FieldSpec(
            "int", 0, "Devices allocated to any claim in resourceclaims.json."
        ),
        "devices_available": FieldSpec(
            "int", 0, "devices_total - devices_allocated (never below 0)."
        ),
        "tainted_devices": FieldSpec(
            "list<map>",
            [],
            "Device taints in slices (how DRA drivers "
            "mark unhealthy GPUs): device, driver, "
            "key, value, effect.",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    pod_ev = evidence.get_or_missing(Key.POD)
    claims_ev = evidence.get_or_missing(Key.RESOURCE_CLAIMS)
    slices_ev = evidence.get_or_missing(Key.RESOURCE_SLICES)
    classes_ev = evidence.get_or_missing(Key.DEVICE_CLASSES)
    pod = obj(pod_ev)
    if not (pod or claims_ev.ok or slices_ev.ok or classes_ev.ok):
        return unknown(SPEC, "neither the pod nor any DRA object was read")
    cites: dict[str, list[LineRef]] = {}
    pod_claims = _pod_claims(pod)
    values: dict[str, Any] = {"pod_uses_dra": bool(pod_claims), "pod_claims": pod_claims}
    for c in pod_claims:
        _cite(cites, "pod_claims", cite_text(pod_ev, c["claim"] or c["template"] or c["name"]))
    all_claims = items(claims_ev)
    if claims_ev.ok:
        values.update(_claims(claims_ev, all_claims, pod_claims, target, cites))
    if classes_ev.ok:
        names = sorted(
            filter(None, (text(mapping(c.get("metadata")).get("name")) for c in items(classes_ev)))
        )
        wanted = sorted({k for c in values.get("claims", []) for k in c["device_classes"]})
        missing = [k for k in wanted if k not in names]
        values.update(
            device_classes_known=True, device_classes=names, missing_device_classes=missing
        )
        for k in missing:
            _cite(cites, "missing_device_classes", cite_text(claims_ev, k))
    if slices_ev.ok:
        values.update(_slices(slices_ev, target, cites))
        allocated = sum(len(_claim_devices(c)) for c in all_claims)
        values.update(
            devices_allocated=allocated,
            devices_available=max(0, values["devices_total"] - allocated),
        )
    return known(SPEC, values, {k: v for k, v in cites.items() if v})


def _pod_claims(pod: dict[str, Any]) -> list[dict[str, str]]:
    spec, status = mapping(pod.get("spec")), mapping(pod.get("status"))
    generated = {
        text(s.get("name")): text(s.get("resourceClaimName"))
        for s in dict_list(status.get("resourceClaimStatuses"))
    }
    out = []
    for c in dict_list(spec.get("resourceClaims")):
        source = mapping(c.get("source")) or c  # the `source:` wrapper was dropped in 1.31
        name = text(c.get("name"))
        template = text(source.get("resourceClaimTemplateName"))
        claim = text(source.get("resourceClaimName")) or generated.get(name, "")
        out.append({"name": name, "claim": claim, "template": template})
    return out


def _claims(
    ev: Evidence,
    all_claims: list[dict[str, Any]],
    pod_claims: list[dict[str, str]],
    target: Target,
    cites: dict[str, list[LineRef]],
) -> dict[str, Any]:
    wanted = {c["claim"] for c in pod_claims if c["claim"]}
    records = []
    for claim in all_claims:
        meta, status = mapping(claim.get("metadata")), mapping(claim.get("status"))
        name = text(meta.get("name"))
        reserved = [text(r.get("name")) for r in dict_list(status.get("reservedFor"))]
        owners = [
            text(o.get("name"))
            for o in dict_list(meta.get("ownerReferences"))
            if text(o.get("kind")) == "Pod"
        ]
        if name not in wanted and target.pod not in reserved + owners:
            continue
        records.append(
            {
                "name": name,
                "allocated": bool(status.get("allocation")),
                "reserved_for": reserved,
                "deleting": bool(meta.get("deletionTimestamp")),
                "device_classes": _claim_classes(claim),
                "devices": _claim_devices(claim),
                "api_version": text(claim.get("apiVersion")),
            }
        )
        _cite(cites, "claims", cite_text(ev, name))
    found = {r["name"] for r in records}
    missing = sorted(wanted - found)
    return {
        "claims_known": True,
        "claims": records,
        "missing_claims": missing,
        "unallocated_claims": [r["name"] for r in records if not r["allocated"]],
        "deleting_claims": [r["name"] for r in records if r["deleting"]],
    }


def _claim_classes(claim: dict[str, Any]) -> list[str]:
    spec = mapping(claim.get("spec"))
    classes = [text(spec.get("resourceClassName"))]  # classic DRA
    for request in dict_list(mapping(spec.get("devices")).get("requests")):
        classes.append(text(request.get("deviceClassName")))
        classes.append(text(mapping(request.get("exactly")).get("deviceClassName")))
        classes.extend(
            text(s.get("deviceClassName")) for s in dict_list(request.get("firstAvailable"))
        )
    return sorted({c for c in classes if c})


def _claim_devices(claim: dict[str, Any]) -> list[str]:
    allocation = mapping(mapping(claim.get("status")).get("allocation"))
    results = dict_list(mapping(allocation.get("devices")).get("results"))
    return [
        f"{text(r.get('driver'))}/{text(r.get('pool'))}/{text(r.get('device'))}" for r in results
    ]


def _slices(ev: Evidence, target: Target, cites: dict[str, list[LineRef]]) -> dict[str, Any]:
    slices = items(ev)
    drivers: set[str] = set()
    total = on_node = 0
    tainted = []
    for s in slices:
        spec = mapping(s.get("spec"))
        driver = text(spec.get("driver"))
        drivers.add(driver)
        devices = dict_list(spec.get("devices"))
        total += len(devices)
        if target.node and text(spec.get("nodeName")) == target.node:
            on_node += len(devices)
        for d in devices:
            taints = dict_list(d.get("taints")) or dict_list(mapping(d.get("basic")).get("taints"))
            for t in taints:
                tainted.append(
                    {
                        "device": text(d.get("name")),
                        "driver": driver,
                        "key": text(t.get("key")),
                        "value": text(t.get("value")),
                        "effect": text(t.get("effect")),
                    }
                )
                _cite(cites, "tainted_devices", cite_text(ev, text(t.get("key"))))
    return {
        "slices_known": True,
        "slices_count": len(slices),
        "drivers": sorted(d for d in drivers if d),
        "devices_total": total,
        "devices_on_node": on_node,
        "tainted_devices": tainted,
    }


def _cite(cites: dict[str, list[LineRef]], name: str, ref: LineRef) -> None:
    if ref.line:
        cites.setdefault(name, []).append(ref)
