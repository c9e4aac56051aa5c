"""Read an evidence bundle directory (DESIGN 3.1) into an :class:`EvidenceSet`.

The reader accepts what SREs actually paste: JSON or YAML from kubectl, ``kubectl describe pod``
text as a fallback for the pod and its events, and plain text logs. It never raises for bad
content: a missing, empty, binary, truncated or wrong-kind file becomes an Evidence whose status
and detail say exactly what was wrong. Only a bundle without any pod file is an error, because
without a target there is nothing to triage.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputriage.errors import GputriageError
from gputriage.evidence.loose_files import stand_ins
from gputriage.evidence.model import BUNDLE_FILES, DESCRIPTIONS, Evidence, EvidenceSet, Key, Status

#: Logs bigger than this are read from their tail only (the newest lines matter most).
MAX_TEXT_BYTES = 16 * 1024 * 1024
#: Structured objects bigger than this are refused (a node list of 5,000 nodes is ~50 MB).
MAX_STRUCTURED_BYTES = 256 * 1024 * 1024

#: The ``kind`` each structured key must hold. Lists may also be ``List`` or a bare YAML list.
EXPECTED_KIND: dict[Key, str] = {
    Key.POD: "Pod",
    Key.EVENTS: "EventList",
    Key.NODE: "Node",
    Key.NODES: "NodeList",
    Key.NODE_PODS: "PodList",
    Key.NODE_EVENTS: "EventList",
    Key.QUOTA: "ResourceQuotaList",
    Key.OWNER_EVENTS: "EventList",
    Key.RUNTIME_CLASSES: "RuntimeClassList",
    Key.RESOURCE_CLAIMS: "ResourceClaimList",
    Key.RESOURCE_SLICES: "ResourceSliceList",
    Key.DEVICE_CLASSES: "DeviceClassList",
    Key.CANDIDATES: "CandidateNodeList",
    Key.GPU_OPERATOR: "GpuOperatorState",
    Key.JOB_PODS: "JobPodList",
}

META_FILE = "meta.json"
#: Longer integer literals are kept as strings (Python refuses to convert > 4300 digits).
MAX_INT_DIGITS = 4000


def read_bundle(path: str | os.PathLike[str]) -> EvidenceSet:
    """Read every known file of the bundle at ``path``."""
    root = Path(path)
    if not root.is_dir():
        raise GputriageError(
            f"{root} is not a directory. A bundle is a directory holding at least pod.json "
            "(kubectl get pod P -n NS -o json); see `gputriage collect --help`.",
            title="bundle not found",
        )
    meta = _read_meta(root)
    items: list[Evidence] = []
    for key, names in BUNDLE_FILES.items():
        items.append(_read_key(root, key, names, meta))
    evidence = EvidenceSet(items)
    missing = [ev.key for ev in items if ev.status is Status.UNAVAILABLE]
    for stand_in in stand_ins(root, missing):
        evidence = evidence.with_evidence(stand_in)
    pod = evidence[Key.POD]
    if pod.status is Status.UNAVAILABLE and not _owner_only(meta, evidence):
        raise GputriageError(
            f"{root} holds no pod.json, pod.yaml or pod.describe.txt. Add the output of "
            "`kubectl get pod P -n NS -o json > pod.json` (or `kubectl describe pod P > "
            "pod.describe.txt`); when no pod was ever created, add the owner's events as "
            "owner-events.json (`kubectl get events -n NS --field-selector "
            "involvedObject.name=OWNER -o json`).",
            title="bundle has no pod",
        )
    if pod.format == "describe" and not evidence[Key.EVENTS].ok and pod.ok:
        evidence = evidence.with_evidence(_events_from_describe(pod))
    if evidence[Key.CANDIDATES].ok:  # candidate nodes' own evidence, under nodes/<name>/
        from gputriage.evidence.candidate_bundle import attach_from_bundle

        evidence = evidence.with_evidence(
            attach_from_bundle(root, evidence[Key.CANDIDATES], read_file)
        )
    return evidence


def _owner_only(meta: dict[str, Any], evidence: EvidenceSet) -> bool:
    """A bundle for a target that never got a pod: its owner's events stand for it."""
    target = meta.get("target")
    owner = target.get("owner") if isinstance(target, dict) else None
    return evidence[Key.OWNER_EVENTS].ok or (isinstance(owner, dict) and bool(owner.get("name")))


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The bundle's ``meta.json`` (empty when absent or unreadable)."""
    return _read_meta(Path(path))


def _read_meta(root: Path) -> dict[str, Any]:
    try:
        fd, _ = open_regular(root / META_FILE)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(MAX_TEXT_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_key(root: Path, key: Key, names: tuple[str, ...], meta: dict[str, Any]) -> Evidence:
    sources = meta.get("sources")
    recorded = sources.get(key.value) if isinstance(sources, dict) else None
    for name in names:
        file = root / name
        if file.exists() or file.is_symlink():
            ev = read_file(key, file, source=f"{root.name}/{name}")
            return ev if _complete(meta, recorded) else replace(ev, complete=False)
    if isinstance(recorded, dict) and recorded.get("status") in Status._value2member_map_:
        status = Status(recorded["status"])
        if status is not Status.OK:
            return Evidence(
                key,
                status,
                str(recorded.get("detail") or ""),
                "",
                str(recorded.get("source") or f"{root.name}/{names[0]}"),
            )
    return Evidence.missing(key, f"{names[0]} is not in the bundle", f"{root.name}/{names[0]}")


def _complete(meta: dict[str, Any], recorded: Any) -> bool:
    """Whether a file's lists are whole: only what ``gputriage collect`` wrote is.

    A hand-assembled bundle holds what someone pasted, so an item missing from its lists
    (the device-plugin pod in node-pods.json, say) is unknown rather than absent.
    """
    if not str(meta.get("tool") or "").startswith("gputriage"):
        return False
    if isinstance(recorded, dict) and "complete" in recorded:
        return recorded["complete"] is True
    return True


def read_file(key: Key, file: Path, *, source: str) -> Evidence:
    """Read one bundle file into an Evidence; bad content becomes a status, never an exception.

    Only regular files inside the bundle are read: a FIFO (which would block ``open`` forever),
    a device, a socket, a directory, or a symbolic link leading out of the bundle (to
    ``/etc/shadow`` or a home file) is refused with a named reason."""
    limit = MAX_STRUCTURED_BYTES if key in EXPECTED_KIND else MAX_TEXT_BYTES
    try:
        fd, size = open_regular(file)
    except RefusedFile as exc:
        return Evidence(key, Status.ERROR, f"not read: {source} {exc}", "", source)
    except OSError as exc:
        status = Status.FORBIDDEN if isinstance(exc, PermissionError) else Status.ERROR
        return Evidence(key, status, f"cannot read {source}: {exc.strerror or exc}", "", source)
    try:
        with os.fdopen(fd, "rb") as fh:
            truncated = size > limit
            if truncated:
                fh.seek(size - limit)
            blob = fh.read(limit)
    except OSError as exc:
        return Evidence(
            key, Status.ERROR, f"cannot read {source}: {exc.strerror or exc}", "", source
        )
    return decode(key, blob, source=source, truncated_from=size if truncated else 0)


class RefusedFile(OSError):
    """A bundle entry that is not a regular file inside the bundle; the message says what."""


_KINDS = (
    (stat.S_ISFIFO, "is a named pipe (FIFO)"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISSOCK, "is a socket"),
    (stat.S_ISDIR, "is a directory"),
)


def open_regular(file: Path, root: Path | None = None) -> tuple[int, int]:
    """(fd, size) of ``file`` opened read-only, when it is a regular file inside ``root``
    (default: its directory); else :class:`RefusedFile`. The open never blocks (O_NONBLOCK,
    so a FIFO cannot hang it) and the kind is checked on the opened descriptor."""
    root = (root or file.parent).resolve()
    if file.is_symlink():
        target = file.resolve()
        if not target.is_relative_to(root):
            raise RefusedFile(f"is a symbolic link to {target}, outside the bundle")
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = next(
                (words for test, words in _KINDS if test(info.st_mode)), "is not a regular file"
            )
            raise RefusedFile(f"{what}: only regular files are read")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def decode(key: Key, blob: bytes, *, source: str, truncated_from: int = 0) -> Evidence:
    """Turn bytes seen for ``key`` into an Evidence (shared by bundle, API and SSH sources)."""
    if not blob.strip():
        return Evidence(key, Status.ERROR, f"{source} is empty", "", source)
    if _looks_binary(blob):
        return Evidence(
            key,
            Status.ERROR,
            f"{source} looks binary ({len(blob)} bytes, not text); expected {DESCRIPTIONS[key]}",
            "",
            source,
        )
    text = blob.decode("utf-8", errors="replace")
    if truncated_from:
        # Drop the partial first line left by reading from the middle of the file.
        text = text.split("\n", 1)[1] if "\n" in text else text
    note = (
        f" (file is {truncated_from} bytes; only the last {len(blob)} were read)"
        if truncated_from
        else ""
    )
    if key in EXPECTED_KIND:
        return _decode_structured(key, text, source, note)
    fmt = "xml" if text.lstrip().startswith(("<?xml", "<nvidia_smi_log")) else "text"
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return Evidence(key, Status.OK, f"{lines} lines{note}", text, source, None, fmt)


def _looks_binary(blob: bytes) -> bool:
    head = blob[:8192]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte sequence cut at the window edge is fine; garbage in the middle is not.
        if exc.start < len(head) - 4:
            bad = sum(1 for b in head if b < 9 or 13 < b < 32 or b > 127)
            return bad / max(1, len(head)) > 0.3
    return False


def _decode_structured(key: Key, text: str, source: str, note: str) -> Evidence:
    stripped = text.lstrip()
    if key is Key.POD and not stripped.startswith(("{", "[")) and _is_describe(stripped):
        return _decode_describe(text, source)
    data: Any
    fmt = "json"
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text, parse_int=_json_int)
        except RecursionError:
            return _too_deep(key, source, note, text, "json")
        except json.JSONDecodeError as exc:
            what = "truncated" if _json_unfinished(text) else "malformed"
            return Evidence(
                key,
                Status.ERROR,
                f"{source} is {what} JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{note}",
                text,
                source,
                None,
                "json",
            )
    else:
        fmt = "yaml"
        try:
            import yaml

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            data = yaml.load(text, Loader=loader)
        except RecursionError:
            return _too_deep(key, source, note, text, "yaml")
        except Exception as exc:  # yaml raises many types; all mean "not readable YAML"
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            return Evidence(
                key,
                Status.ERROR,
                f"{source} is neither JSON nor YAML: {getattr(exc, 'problem', exc)}{where}{note}",
                text,
                source,
                None,
                "yaml",
            )
    data, problem = _check_kind(key, data)
    if problem:
        return Evidence(key, Status.ERROR, f"{source}: {problem}{note}", text, source, None, fmt)
    items = data.get("items") if isinstance(data, dict) else None
    count = f"{len(items)} items" if isinstance(items, list) else "object"
    return Evidence(key, Status.OK, f"{count} ({fmt}){note}", text, source, data, fmt)


def _too_deep(key: Key, source: str, note: str, text: str, fmt: str) -> Evidence:
    return Evidence(
        key,
        Status.ERROR,
        f"{source} is nested too deeply to read as {fmt.upper()} (brackets or "
        f"indentation thousands of levels deep){note}",
        text,
        source,
        None,
        fmt,
    )


def _json_int(digits: str) -> int | str:
    """JSON integers; one too long for Python's int conversion limit stays a string."""
    return int(digits) if len(digits) <= MAX_INT_DIGITS else digits


def _json_unfinished(text: str) -> bool:
    """True when ``text`` ends inside a string or with brackets left open: a cut-off paste."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def _check_kind(key: Key, data: Any) -> tuple[Any, str]:
    expected = EXPECTED_KIND[key]
    if isinstance(data, list) and expected.endswith("List"):  # a bare list of objects
        data = {"kind": expected, "apiVersion": "v1", "items": data}
    if not isinstance(data, dict):
        return None, f"expected a {expected} object, got {type(data).__name__}"
    kind = data.get("kind")
    if expected.endswith("List"):
        item_kind = expected[: -len("List")]
        if kind == item_kind:  # a single object where a list was expected: wrap it
            return {
                "kind": expected,
                "apiVersion": data.get("apiVersion", "v1"),
                "items": [data],
            }, ""
        if kind not in (expected, "List") and not (kind is None and "items" in data):
            return None, f"expected kind {expected} (or List), got {kind!r}"
        items = data.get("items")
        if items is None:
            data = {**data, "items": []}
        elif not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return None, f"{expected}.items is not a list of objects"
        return data, ""
    if kind != expected:
        return None, f"expected kind {expected}, got {kind!r}"
    return data, ""


def _is_describe(text: str) -> bool:
    head = text[:2000]
    return head.startswith("Name:") and "Namespace:" in head


def _decode_describe(text: str, source: str) -> Evidence:
    from gputriage.parsers.describe import parse_pod_describe

    try:
        pod, events = parse_pod_describe(text)
    except Exception as exc:  # the parser must not raise, but a paste must never crash us
        return Evidence(
            Key.POD,
            Status.ERROR,
            f"{source}: cannot read describe text: {exc}",
            text,
            source,
            None,
            "describe",
        )
    pod = {**pod, "_describe_events": events}
    return Evidence(
        Key.POD,
        Status.OK,
        f"kubectl describe text ({len(events)} events)",
        text,
        source,
        pod,
        "describe",
    )


def _events_from_describe(pod: Evidence) -> Evidence:
    events = pod.data.get("_describe_events", []) if isinstance(pod.data, dict) else []
    return Evidence(
        Key.EVENTS,
        Status.OK,
        f"{len(events)} events from the Events: section of {pod.source}",
        pod.raw,
        pod.source,
        {"kind": "EventList", "apiVersion": "v1", "items": events},
        "describe",
    )
