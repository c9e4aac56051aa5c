"""Fact group ``kubelet``: what the node's kubelet journal says about the pod and its GPUs.

Lines are filtered to the pod under triage (its UID, ``ns/name`` or ``name_ns(uid)``) plus the
node-wide lines about device plugins, runtime handlers, CDI and DRA that name no pod; lines
about other pods are ignored. Each signal lists distinct messages with the first line, a count
and the lines they were seen on as citations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import FactGroup, FieldSpec, GroupSpec, Target, known, unknown_from
from gputriage.parsers.journal import KubeletJournal, Signal, parse_kubelet_journal

#: How many lines one field cites at most (kubelet repeats a failing sync every few seconds).
MAX_CITES = 50

_SIGNAL_DOC = "{kind, message, line, count, resource, requested, available, devices}"
_EVICTION_DEFAULT: dict[str, Any] = {"evicted": False, "message": "", "resource": "", "line": 0}

SPEC = GroupSpec(
    name="kubelet",
    doc="The kubelet journal on the pod's node, filtered to the pod plus node-wide "
    "device-plugin / runtime / CDI / DRA lines: device-manager registration, admission "
    "failures, missing runtime handlers, sandbox and nvidia-container-cli errors, DRA "
    "prepare errors and evictions.",
    sources=(Key.KUBELET_LOG,),
    fields={
        "lines_scanned": FieldSpec("int", 0, "Journal lines read."),
        "lines_for_pod": FieldSpec(
            "int", 0, "Lines that name the pod (UID, ns/name or name_ns(uid))."
        ),
        "node_lines": FieldSpec("int", 0, "Node-wide device-plugin/runtime/CDI/DRA lines kept."),
        "device_manager_registered": FieldSpec(
            "list<string>",
            [],
            'Resources whose device plugin registered with the kubelet ("Got registration '
            'request from device plugin with resource name \\"nvidia.com/gpu\\"").',
        ),
        "plugin_endpoint_errors": FieldSpec(
            "list<map>",
            [],
            "Device-plugin endpoint trouble seen by the kubelet: " + _SIGNAL_DOC + "; kind is "
            "listandwatch_ended | dial_failed | not_in_cache | stale_socket | not_registered | "
            "unhealthy.",
        ),
        "admission_errors": FieldSpec(
            "list<map>",
            [],
            "Admission failures: " + _SIGNAL_DOC + "; kind is devices_unavailable | "
            "no_healthy_devices | previously_allocated_unhealthy | unregistered_device | "
            "preferred_allocation_failed | prestart_failed | endpoint_not_found | "
            "out_of_resource | topology_affinity (Topology Manager: 'Resources cannot be "
            "allocated with Topology locality') | allocate_failed | unexpected_admission | "
            "rejected.",
        ),
        "admission_kinds": FieldSpec(
            "list<string>", [], "Sorted unique kinds of admission_errors."
        ),
        "runtime_handler_missing": FieldSpec(
            "bool",
            False,
            "containerd/CRI-O has no handler for the pod's RuntimeClass (\"no runtime for "
            '\\"nvidia\\" is configured").',
        ),
        "runtime_handler": FieldSpec("string", "", "The missing handler's name (e.g. nvidia)."),
        "sandbox_errors": FieldSpec(
            "list<map>", [], "Pod sandbox creation failures: " + _SIGNAL_DOC + "."
        ),
        "nvidia_container_cli_errors": FieldSpec(
            "list<map>",
            [],
            "nvidia-container-cli errors relayed by the kubelet: " + _SIGNAL_DOC + "; kind is "
            "the cli's error class (initialization, detection, mount, device, requirement...) "
            'and message is "nvidia-container-cli: <kind> error: <detail>".',
        ),
        "oci_hook_errors": FieldSpec(
            "list<map>",
            [],
            "OCI hooks that failed while the runtime created a container (NVIDIA's "
            "nvidia-container-runtime-hook, nvidia-ctk / nvidia-cdi-hook create-symlinks...), "
            "in any runc wording: " + _SIGNAL_DOC + "; kind is the hook stage runc named "
            "(prestart, createContainer...; '' when not named) and message is what the hook "
            "printed (its logged msg, or its stderr).",
        ),
        "cdi_errors": FieldSpec(
            "list<map>",
            [],
            'CDI injection failures ("unresolvable CDI devices ..."): '
            + _SIGNAL_DOC
            + "; devices lists the unresolved names.",
        ),
        "dra_prepare_errors": FieldSpec(
            "list<map>",
            [],
            'DRA prepare failures ("Failed to prepare dynamic resources"): ' + _SIGNAL_DOC + ".",
        ),
        "eviction": FieldSpec(
            "map",
            dict(_EVICTION_DEFAULT),
            "{evicted, message, resource, line}: the kubelet evicted the "
            "pod (resource: memory, ephemeral-storage...).",
        ),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.KUBELET_LOG)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    journal = parse_kubelet_journal(
        ev.raw, namespace=target.namespace, pod=target.pod, uid=target.uid
    )
    return _facts(journal, ev)


def _facts(j: KubeletJournal, ev: Evidence) -> FactGroup:
    eviction = dict(_EVICTION_DEFAULT)
    if j.evictions:
        first = j.evictions[0]
        eviction = {
            "evicted": True,
            "message": first.message,
            "resource": first.resource,
            "line": first.line,
        }
    handler, handler_line = j.runtime_handler or ("", 0)
    values: dict[str, Any] = {
        "lines_scanned": j.lines_scanned,
        "lines_for_pod": len(j.pod_lines),
        "node_lines": len(j.node_lines),
        "device_manager_registered": [r for r, _ in j.registrations],
        "plugin_endpoint_errors": _signals(j.endpoint_errors),
        "admission_errors": _signals(j.admission_errors),
        "admission_kinds": sorted({s.kind for s in j.admission_errors}),
        "runtime_handler_missing": j.runtime_handler is not None,
        "runtime_handler": handler,
        "sandbox_errors": _signals(j.sandbox_errors),
        "nvidia_container_cli_errors": _signals(j.container_cli_errors),
        "oci_hook_errors": _signals(j.hook_errors),
        "cdi_errors": _signals(j.cdi_errors),
        "dra_prepare_errors": _signals(j.dra_errors),
        "eviction": eviction,
    }
    line_sets: dict[str, list[int]] = {
        "device_manager_registered": [n for _, n in j.registrations],
        "plugin_endpoint_errors": _lines(j.endpoint_errors),
        "admission_errors": _lines(j.admission_errors),
        "admission_kinds": _lines(j.admission_errors),
        "runtime_handler_missing": j.runtime_handler_lines,
        "runtime_handler": [handler_line] if handler_line else [],
        "sandbox_errors": _lines(j.sandbox_errors),
        "nvidia_container_cli_errors": _lines(j.container_cli_errors),
        "oci_hook_errors": _lines(j.hook_errors),
        "cdi_errors": _lines(j.cdi_errors),
        "dra_prepare_errors": _lines(j.dra_errors),
        "eviction": _lines(j.evictions),
    }
    cites = {name: _cite(ev, lines) for name, lines in line_sets.items() if lines}
    return known(SPEC, values, cites)


def _signals(signals: list[Signal]) -> list[dict[str, Any]]:
    return [s.to_fact() for s in signals]


def _lines(signals: list[Signal]) -> list[int]:
    return [n for s in signals for n in s.lines]


def _cite(ev: Evidence, lines: list[int]) -> list[LineRef]:
    return [ev.cite(n) for n in sorted(set(lines))[:MAX_CITES]]
