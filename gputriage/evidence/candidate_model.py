"""The shape of candidate-node evidence, shared by the collector, the bundle and the facts.

``candidate-nodes.json`` (:data:`KIND`) lists the candidate nodes of an unscheduled pod that
were examined, why, and how each of their sources went; in memory the CANDIDATES
:class:`Evidence` also carries, under :data:`NODE_EVIDENCE` in its ``data``, the per-node
:class:`Evidence` objects (a bundle keeps them under ``nodes/<name>/``). Pure: imports only the
evidence model, so facts may read it.
"""

from __future__ import annotations

from typing import Any

from gputriage.evidence.model import Evidence, Key

#: ``kind`` and ``apiVersion`` of ``candidate-nodes.json``.
KIND = "CandidateNodeList"
API_VERSION = "gputriage/v1"
#: Key of ``Evidence.data`` holding ``{node: {key value: Evidence}}`` (never serialised).
NODE_EVIDENCE = "_node_evidence"
#: Node keys read from each examined candidate over the node sources.
NODE_KEYS: tuple[Key, ...] = (Key.DMESG, Key.NVIDIA_SMI, Key.KUBELET_LOG)
#: All keys an examined candidate may have (the device-plugin log comes from the API).
CANDIDATE_KEYS: tuple[Key, ...] = (*NODE_KEYS, Key.DEVICE_PLUGIN_LOG, Key.GPU_OPERATOR)


def source_record(ev: Evidence, file: str | None = None) -> dict[str, Any]:
    """How one source of one candidate node went, as ``candidate-nodes.json`` records it."""
    return {"status": ev.status.value, "detail": ev.detail, "source": ev.source, "file": file}


def node_evidence(ev: Evidence) -> dict[str, dict[str, Evidence]]:
    """``{node: {key value: Evidence}}`` of a CANDIDATES evidence ({} when none)."""
    data = ev.data if ev.ok and isinstance(ev.data, dict) else {}
    found = data.get(NODE_EVIDENCE)
    return found if isinstance(found, dict) else {}
