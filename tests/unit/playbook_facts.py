"""Small fact groups of our own for playbook tests, independent of the real fact builders.

The fixture playbooks under ``tests/fixtures/playbooks`` read these groups: ``pod``,
``kernel``, ``gpus`` and ``node``. :func:`facts` builds a FactSet from plain values, with
citations, and lets a test mark any group unknown with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputriage.evidence.model import Key, LineRef
from gputriage.facts.model import FactGroup, FactSet, FieldSpec, GroupSpec, Target, known, unknown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "playbooks"
VALID = FIXTURES / "valid"
INVALID = FIXTURES / "invalid"

SPECS: dict[str, GroupSpec] = {
    "pod": GroupSpec(
        "pod",
        "the pod",
        (Key.POD,),
        {
            "name": FieldSpec("string", "", "pod name"),
            "namespace": FieldSpec("string", "", "namespace"),
            "phase": FieldSpec("string", "", "status.phase"),
            "restarts": FieldSpec("int", 0, "restart count"),
        },
    ),
    "kernel": GroupSpec(
        "kernel",
        "kernel log",
        (Key.DMESG,),
        {
            "xids": FieldSpec("list<map>", [], "Xid events: code, pci, line"),
            "latest_xid": FieldSpec("map", {}, "the newest Xid event"),
        },
    ),
    "gpus": GroupSpec(
        "gpus",
        "nvidia-smi",
        (Key.NVIDIA_SMI,),
        {
            "count": FieldSpec("int", 0, "GPUs nvidia-smi sees"),
            "lost": FieldSpec("list", [], "PCI ids of lost GPUs"),
        },
    ),
    "node": GroupSpec(
        "node",
        "node object",
        (Key.NODE,),
        {
            "name": FieldSpec("string", "", "node name"),
            "gpu_capacity": FieldSpec("int", 0, "capacity nvidia.com/gpu"),
        },
    ),
}


def known_paths() -> set[str]:
    paths: set[str] = set()
    for spec in SPECS.values():
        paths |= {f"{spec.name}.known", f"{spec.name}.reason"}
        paths |= {f"{spec.name}.{f}" for f in spec.fields}
    return paths


KNOWN = known_paths()

DMESG = "bundle/dmesg.log"
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, GPU has fallen off the bus."
XID48 = (
    "NVRM: Xid (PCI:0000:86:00): 48, pid=2323, name=python, An uncorrectable double bit "
    "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
)


def xid(code: int, pci: str, line: int) -> dict[str, Any]:
    return {"code": code, "pci": pci, "line": line}


def facts(
    values: Mapping[str, Mapping[str, Any]] | None = None,
    unknown_groups: Mapping[str, str] | None = None,
    cites: Mapping[str, Mapping[str, tuple[LineRef, ...]]] | None = None,
) -> FactSet:
    """A FactSet of every fixture group: ``values`` per group, ``unknown_groups`` with reasons."""
    groups: dict[str, FactGroup] = {}
    for name, spec in SPECS.items():
        if unknown_groups and name in unknown_groups:
            groups[name] = unknown(spec, unknown_groups[name])
        else:
            groups[name] = known(spec, (values or {}).get(name, {}), (cites or {}).get(name))
    return FactSet(Target(namespace="ml", pod="trainer-0", node="gpu-node-7"), groups)


def dmesg_ref(line: int, text: str) -> LineRef:
    return LineRef("dmesg", DMESG, line, text)
