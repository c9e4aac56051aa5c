"""Write an evidence bundle (DESIGN 3.1): the layout :func:`read_bundle` reads back.

One file per piece of evidence that was collected, named as in ``BUNDLE_FILES`` (the name that
matches its format: ``nvidia-smi.txt`` for plain nvidia-smi output, ``pod.json`` for JSON), and
``meta.json`` recording when, from where, and how every key went, so a replay knows a missing
``dmesg.log`` timed out rather than was never tried. Each file is written to a temporary name and
renamed into place; ``meta.json`` is written last. An existing non-empty directory is refused
unless ``force``; then only bundle files are replaced (stale ones removed), nothing else.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gputriage import __version__
from gputriage.errors import GputriageError
from gputriage.evidence.bundle import META_FILE
from gputriage.evidence.model import BUNDLE_FILES, Evidence, EvidenceSet, Key

_SUFFIX = {
    "json": ".json",
    "yaml": ".yaml",
    "describe": ".describe.txt",
    "xml": ".xml",
    "text": ".txt",
}


def check_destination(directory: Path, *, force: bool) -> None:
    """Refuse a destination that is a file, or a non-empty directory without ``force``."""
    if directory.exists() and not directory.is_dir():
        raise GputriageError(f"{directory} exists and is not a directory", title="bad -o")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise GputriageError(
            f"{directory} is not empty. Choose a new directory, or pass --force to replace the "
            "bundle files in it (other files are left alone).",
            title="bundle exists",
        )


def bundle_name(evidence: Evidence) -> str:
    """The file an Evidence is written to: the key's name for its format, else the first."""
    names = BUNDLE_FILES[evidence.key]
    suffix = _SUFFIX.get(evidence.format, "")
    return next((n for n in names if suffix and n.endswith(suffix)), names[0])


def write_bundle(
    evidence: EvidenceSet,
    directory: str | os.PathLike[str],
    *,
    force: bool = False,
    meta: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write ``evidence`` under ``directory``; returns the files written (meta.json last)."""
    root = Path(directory)
    check_destination(root, force=force)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    sources: dict[str, dict[str, Any]] = {}
    for key in Key:
        ev = evidence.get_or_missing(key)
        name = bundle_name(ev) if ev.ok and ev.raw else ""
        for stale in BUNDLE_FILES[key]:
            if stale != name and (root / stale).is_file():
                (root / stale).unlink()
        if name and key is Key.CANDIDATES:  # and the examined nodes' files, nodes/<name>/
            from gputriage.evidence.candidate_bundle import write_node_files

            files, text = write_node_files(ev, root, bundle_name, _atomic_write)
            written.extend(files)
            written.append(_atomic_write(root / name, text.encode("utf-8")))
        elif name:
            written.append(_atomic_write(root / name, ev.raw.encode("utf-8")))
        sources[key.value] = {
            "status": ev.status.value,
            "detail": ev.detail,
            "source": ev.source,
            "elapsed_s": ev.elapsed_s,
            "file": name or None,
            "complete": ev.complete,
        }
    document = {
        "tool": "gputriage",
        "version": __version__,
        "collected_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "target": _target(evidence),
        **(meta or {}),
        "sources": sources,
    }
    written.append(
        _atomic_write(root / META_FILE, (json.dumps(document, indent=2) + "\n").encode())
    )
    return written


def _target(evidence: EvidenceSet) -> dict[str, str]:
    pod = evidence.get_or_missing(Key.POD)
    data = pod.data if pod.ok and isinstance(pod.data, dict) else {}
    meta = data.get("metadata") or {}
    return {
        "namespace": str(meta.get("namespace") or ""),
        "pod": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "node": str((data.get("spec") or {}).get("nodeName") or ""),
    }


def _atomic_write(path: Path, data: bytes) -> Path:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
