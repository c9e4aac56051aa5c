"""Candidate nodes in a bundle: ``candidate-nodes.json`` plus ``nodes/<name>/<file>``.

``collect`` writes each examined candidate node's evidence under ``nodes/<name>/`` with the
same file names as the pod's own node (``dmesg.log``, ``nvidia-smi.xml``, ``kubelet.log``,
``device-plugin.log``) and records in ``candidate-nodes.json`` how every source went, so a
replay knows a missing file timed out rather than was never tried. The reader attaches them to
the CANDIDATES evidence exactly as the live collector does. Node names become directory names
only when they are valid Kubernetes node names (no ``/``, no ``..``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputriage.evidence.candidate_model import CANDIDATE_KEYS, NODE_EVIDENCE, source_record
from gputriage.evidence.model import BUNDLE_FILES, Evidence, Key, Status

NODES_DIR = "nodes"
#: A DNS-1123 subdomain, the form of a node name: safe as one path component.
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_KEYS_BY_VALUE = {k.value: k for k in CANDIDATE_KEYS}


def safe_node_dir(name: str) -> str:
    """``name`` when it may be used as a directory name, else ''."""
    return name if _NODE_NAME.fullmatch(name) and ".." not in name else ""


def attach_from_bundle(root: Path, ev: Evidence, read_file: Callable[..., Evidence]) -> Evidence:
    """Add the per-node evidence under ``root/nodes/`` to a CANDIDATES evidence read from
    ``candidate-nodes.json``."""
    if not ev.ok or not isinstance(ev.data, dict):
        return ev
    per_node: dict[str, dict[str, Evidence]] = {}
    for item in ev.data.get("items") or []:
        if not isinstance(item, dict):
            continue
        name = safe_node_dir(str(item.get("name") or ""))
        if not name:
            continue
        sources = item.get("sources") if isinstance(item.get("sources"), dict) else {}
        found: dict[str, Evidence] = {}
        for value, key in _KEYS_BY_VALUE.items():
            recorded = sources.get(value) if isinstance(sources, dict) else None
            found_ev = _read_node_key(root, name, key, recorded, read_file)
            if found_ev is not None:
                found[value] = found_ev
        per_node[name] = found
    return replace(ev, data={**ev.data, NODE_EVIDENCE: per_node})


def _read_node_key(
    root: Path, node: str, key: Key, recorded: Any, read_file: Callable[..., Evidence]
) -> Evidence | None:
    folder = root / NODES_DIR / node
    for file in BUNDLE_FILES[key]:
        if (folder / file).is_file():
            return read_file(key, folder / file, source=f"{root.name}/{NODES_DIR}/{node}/{file}")
    if isinstance(recorded, dict) and recorded.get("status") in Status._value2member_map_:
        status = Status(recorded["status"])
        if status is Status.OK:  # recorded fine but the file is gone, or it was empty
            return Evidence(
                key,
                Status.OK,
                str(recorded.get("detail") or ""),
                "",
                str(recorded.get("source") or ""),
                None,
                "text",
            )
        return Evidence(
            key, status, str(recorded.get("detail") or ""), "", str(recorded.get("source") or "")
        )
    return None


def write_node_files(
    ev: Evidence,
    root: Path,
    name_for: Callable[[Evidence], str],
    write: Callable[[Path, bytes], Path],
) -> tuple[list[Path], str]:
    """Write the examined nodes' evidence under ``root/nodes/``; returns the files written and
    ``candidate-nodes.json``'s text with each source's file recorded."""
    import json

    data = ev.data if ev.ok and isinstance(ev.data, dict) else {}
    found = data.get(NODE_EVIDENCE)
    per_node: dict[str, dict[str, Evidence]] = found if isinstance(found, dict) else {}
    document = {k: v for k, v in data.items() if k != NODE_EVIDENCE}
    remove_stale_node_files(root)
    written: list[Path] = []
    items = []
    for item in document.get("items") or []:
        if not isinstance(item, dict):
            continue
        name = safe_node_dir(str(item.get("name") or ""))
        evs = per_node.get(name, {}) if name else {}
        sources = {}
        for value, node_ev in evs.items():
            file = name_for(node_ev) if node_ev.ok and node_ev.raw else ""
            if file:
                folder = root / NODES_DIR / name
                folder.mkdir(parents=True, exist_ok=True)
                written.append(write(folder / file, node_ev.raw.encode("utf-8")))
            sources[value] = source_record(node_ev, file or None)
        items.append({**item, "sources": sources or item.get("sources", {})})
    document["items"] = items
    return written, json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def remove_stale_node_files(root: Path) -> None:
    """Remove the candidate-node files an earlier ``collect --force`` left under ``nodes/``
    (bundle file names only; anything else is left alone), and folders left empty."""
    folder = root / NODES_DIR
    if not folder.is_dir() or folder.is_symlink():
        return
    names = {n for key in CANDIDATE_KEYS for n in BUNDLE_FILES[key]}
    for node in folder.iterdir():
        if not node.is_dir() or node.is_symlink() or not safe_node_dir(node.name):
            continue
        for file in node.iterdir():
            if file.name in names and file.is_file() and not file.is_symlink():
                file.unlink()
        if not any(node.iterdir()):
            node.rmdir()
