"""Line shapes of node logs (journald, klog, Go ``log``) and the kubelet journal's GPU signals.

Every node log gputriage reads is some stack of prefixes around a message:

* journald ``-o short`` / ``short-precise`` / ``short-iso`` / ``short-full`` prefixes
  (``Mar 05 10:11:12 host kubelet[1234]: ...``, ``2024-03-05T10:11:12+0000 host kubelet[1234]:``),
* a ``kubectl logs --timestamps`` RFC 3339 prefix,
* a klog header (``E0305 10:11:12.123456    1234 manager.go:123] ...``) or a Go ``log`` prefix
  (``2020/08/10 19:09:42 ...``), or a JSON record (``{"ts":...,"msg":"..."}``),
* and, for structured klog, a quoted message followed by ``key="value"`` pairs.

:func:`parse_line` peels those layers off one line; :func:`parse_kubelet_journal` then keeps the
lines about one pod (plus node-wide device-manager and runtime lines) and sorts them into the
signals the playbooks reason over. Everything here is pure and never raises on bad input.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gputriage.parsers.runtime_errors import (
    CDI_FAILURE,
    cdi_devices,
    container_cli_errors,
    hook_errors,
    missing_runtime_handler,
)

#: Longest part of one line that is looked at; a pathological 50 MB line is cut, not parsed.
MAX_LINE_CHARS = 64 * 1024

_JOURNAL_TS = (
    r"(?:[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [A-Z]{2,5})"  # short-full
    r"|(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"  # short-iso
    r"|(?:\S{1,5} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?)"  # short / short-precise, any locale
)
_JOURNAL = re.compile(
    rf"^(?P<ts>{_JOURNAL_TS}) (?P<host>\S+) (?P<unit>[A-Za-z][\w@.\-/]*)(?:\[(?P<pid>\d+)\])?: ?"
    r"(?P<rest>.*)$"
)
_RFC3339 = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) "
    r"(?P<rest>.*)$"
)
_KLOG = re.compile(
    r"^(?P<sev>[IWEF])(?P<date>\d{4}) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?)\s+(?P<tid>\d+)\s+"
    r"(?P<src>[^\s\]]+:\d+)\] ?(?P<msg>.*)$"
)
_GOLOG = re.compile(r"^(?P<ts>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<msg>.*)$")
_KEY = re.compile(r"([A-Za-z_][\w.\-/]*)=")
_DETAIL_KEYS = frozenset({"err", "error", "message", "reason"})
_SEVERITY_WORDS = {
    "info": "I",
    "warning": "W",
    "warn": "W",
    "error": "E",
    "fatal": "F",
    "panic": "F",
    "debug": "I",
}


@dataclass(frozen=True)
class LogLine:
    """One log line with its prefixes taken apart.

    ``body`` is the text after the journald / timestamp prefix; ``message`` the text after
    every prefix; ``msg`` the structured-klog message (the quoted first string, unquoted) or
    ``message`` itself, and ``fields`` the ``key=value`` pairs that followed it (values
    unquoted once).
    """

    lineno: int
    text: str
    time: str = ""
    host: str = ""
    unit: str = ""
    severity: str = ""  # I | W | E | F | "" (not printed)
    origin: str = ""  # klog "file.go:123" or a JSON record's caller
    message: str = ""
    msg: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    body: str = ""

    @property
    def flat(self) -> str:
        """``msg`` and every field value on one line with nested Go quoting undone.

        kubelet wraps runtime errors several levels deep (``err="failed to \\"StartContainer\\"
        ... stderr: nvidia-container-cli: ...\\\\n\\""``); matching runs on this text.
        """
        parts = [self.msg, *(f"{k}={v}" for k, v in self.fields.items())]
        return flatten(" ".join(p for p in parts if p))

    @property
    def detail(self) -> str:
        """``msg: err`` (plus other error-ish fields), flattened: the words worth showing."""
        parts = [self.msg, *(v for k, v in self.fields.items() if k in _DETAIL_KEYS and v)]
        return flatten(": ".join(p for p in parts if p))


def flatten(text: str) -> str:
    """Undo nested Go string escaping well enough to match on the words inside."""
    text = re.sub(r'\\+"', '"', text)
    text = re.sub(r"\\+[nrt]", " ", text)
    return re.sub(r"\\+'", "'", text)


def unquote_go(text: str, start: int = 0) -> tuple[str, int]:
    """Read the Go ``%q`` string that opens at ``text[start]``; return it and the end index.

    An unterminated string returns everything to the end of the line.
    """
    out: list[str] = []
    i = start + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), n


def _bracketed(text: str, start: int) -> int:
    """End index of a ``[...]`` / ``{...}`` value starting at ``start`` (quotes respected)."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            _, i = unquote_go(text, i)
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def parse_fields(text: str) -> dict[str, str]:
    """``key="value" key=value key=[...]`` pairs, values unquoted once; stops at junk."""
    fields: dict[str, str] = {}
    i = 0
    n = len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        m = _KEY.match(text, i)
        if not m:
            break
        key = m.group(1)
        i = m.end()
        if i < n and text[i] == '"':
            value, i = unquote_go(text, i)
        elif i < n and text[i] in "[{":
            end = _bracketed(text, i)
            value, i = text[i:end], end
        else:
            end = text.find(" ", i)
            end = n if end < 0 else end
            value, i = text[i:end], end
        fields[key] = value
    return fields


def _structured(message: str) -> tuple[str, dict[str, str]]:
    if message.startswith('"'):
        msg, end = unquote_go(message)
        return msg, parse_fields(message[end:])
    return message, {}


def _from_json(rest: str) -> tuple[str, str, str, dict[str, str]] | None:
    try:
        data: Any = json.loads(rest)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    msg = str(data.get("msg") or data.get("message") or "")
    level = str(data.get("level") or data.get("severity") or "").lower()
    severity = _SEVERITY_WORDS.get(level, "")
    if not severity and "err" in data:
        severity = "E"
    skip = {"msg", "message", "level", "severity", "ts", "time", "caller", "v"}
    fields = {
        str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items() if k not in skip
    }
    return msg, severity, str(data.get("caller") or ""), fields


def parse_line(text: str, lineno: int) -> LogLine:
    """Take one log line apart (see the module docstring). Never raises."""
    rest = text[:MAX_LINE_CHARS].rstrip("\r\n")
    time = host = unit = ""
    m = _JOURNAL.match(rest)
    if m:
        time, host, unit, rest = m["ts"], m["host"], m["unit"], m["rest"]
    else:
        r = _RFC3339.match(rest)
        if r:
            time, rest = r["ts"], r["rest"]
    body = rest.strip()
    k = _KLOG.match(body)
    if k:
        message = k["msg"]
        msg, fields = _structured(message)
        return LogLine(
            lineno,
            text,
            time or f"{k['date']} {k['time']}",
            host,
            unit,
            k["sev"],
            k["src"],
            message,
            msg,
            fields,
            body,
        )
    g = _GOLOG.match(body)
    if g:
        return LogLine(
            lineno, text, time or g["ts"], host, unit, "", "", g["msg"], g["msg"], {}, body
        )
    if body.startswith("{"):
        decoded = _from_json(body)
        if decoded:
            msg, severity, origin, fields = decoded
            return LogLine(lineno, text, time, host, unit, severity, origin, msg, msg, fields, body)
    return LogLine(lineno, text, time, host, unit, "", "", body, body, {}, body)


def iter_lines(text: str) -> Iterator[LogLine]:
    """Every line of ``text`` parsed, numbered from 1 like ``Evidence.cite`` expects."""
    for i, line in enumerate(text.splitlines(), 1):
        yield parse_line(line, i)


# --- kubelet journal -------------------------------------------------------------------------

_POD_REF = re.compile(r"(?<![\w.-])([a-z0-9][\w.-]*)_([a-z0-9][\w-]*)\(([0-9a-f-]{36})\)")
_UUID = re.compile(
    r"(?<![\w-])([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"(?![\w-])"
)
_POD_KEYS = ("pod", "podUID", "pods", "podName")

#: Words of node-wide lines worth keeping even though they name no pod (lower case).
_NODE_WORDS = (
    "device plugin",
    "device-plugin",
    "deviceplugin",
    "devicemanager",
    "device manager",
    "resourcename",
    "nvidia",
    "allocate",
    "no runtime for",
    "runtime handler",
    "runtimehandler",
    "cdi",
    "dynamic resources",
    "resourceclaim",
    "dra driver",
    "endpoint",
)

_REGISTRATION = re.compile(
    r'Got registration request from device plugin with resource(?: name)?(?: "([^"]+)")?'
)
_ENDPOINT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "listandwatch_ended",
        re.compile(r"listAndWatch ended unexpectedly for device plugin", re.IGNORECASE),
    ),
    (
        "dial_failed",
        re.compile(
            r"Unable to connect to device plugin|failed to dial device plugin", re.IGNORECASE
        ),
    ),
    (
        "not_in_cache",
        re.compile(r"endpoint not found in cache for a registered resource", re.IGNORECASE),
    ),
    (
        "stale_socket",
        re.compile(
            r"stale.{0,40}(?:socket|endpoint)|(?:socket|endpoint).{0,40}"
            r"stale",
            re.IGNORECASE,
        ),
    ),
    (
        "not_registered",
        re.compile(
            r"(?:endpoint|device plugin|resource)\b.{0,80}"
            r"\bnot (?:been )?registered",
            re.IGNORECASE,
        ),
    ),
    (
        "unhealthy",
        re.compile(
            r"Endpoint \(.{0,80}\) became unhealthy|"
            r"endpoint.{0,40}(?:became|marked) unhealthy",
            re.IGNORECASE,
        ),
    ),
)
_GRPC_NOISE = re.compile(r'scheme "[^"]*" not registered')

_ADMISSION_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "devices_unavailable",
        re.compile(
            r"requested number of devices unavailable for (?P<res>[^\s.]+(?:\.[^\s.]+)*)\. "
            r"Requested: (?P<req>\d+), Available: (?P<avail>\d+)"
        ),
    ),
    (
        "no_healthy_devices",
        re.compile(
            r"no healthy devices present; cannot allocate unhealthy devices (?P<res>[^\s,]+)"
        ),
    ),
    (
        "previously_allocated_unhealthy",
        re.compile(
            r"previously allocated devices are no longer healthy; "
            r"cannot allocate unhealthy devices "
            r"(?P<res>[^\s,]+)"
        ),
    ),
    (
        "unregistered_device",
        re.compile(
            r"(?:cannot|can't) allocate unregistered device "
            r"(?P<res>[^\s,]+)"
        ),
    ),
    ("preferred_allocation_failed", re.compile(r"GetPreferredAllocation rpc failed")),
    ("prestart_failed", re.compile(r"PreStartContainer rpc failed")),
    (
        "endpoint_not_found",
        re.compile(
            r"endpoint not found in cache for a registered resource"
            r"(?::? (?P<res>[^\s,]+))?"
        ),
    ),
    # The numbers first: a journal line may carry the reason (OutOf<res>) before the message.
    (
        "out_of_resource",
        re.compile(
            r"Node didn't have enough resource: (?P<res>[^\s,]+), requested: (?P<req>\d+), "
            r"used: \d+, capacity: (?P<avail>\d+)"
        ),
    ),
    ("out_of_resource", re.compile(r"\bOutOf(?P<res2>[\w./-]+)")),
    (
        "topology_affinity",
        re.compile(
            r"Resources cannot be allocated with Topology locality|"
            r"\bTopologyAffinityError\b|Topology Affinity Error"
        ),
    ),
    # "Allocate failed due to" (k8s >= 1.17), "Update plugin resources failed due to" (older).
    (
        "allocate_failed",
        re.compile(
            r"(?:Allocate|Update plugin resources) failed due to "
            r"(?P<inner>.+?)(?:, which is unexpected|$)"
        ),
    ),
    ("unexpected_admission", re.compile(r"UnexpectedAdmissionError")),
    (
        "rejected",
        re.compile(
            r"Pod was rejected|Failed to admit pod|Predicate failed on Pod|"
            r"pod admission (?:denied|failed)",
            re.IGNORECASE,
        ),
    ),
)

_SANDBOX = re.compile(
    r"CreatePodSandbox|RunPodSandbox|Failed to create (?:pod )?sandbox|"
    r"FailedCreatePodSandBox",
    re.IGNORECASE,
)
_DRA = re.compile(
    r"Failed to prepare dynamic resources|FailedPrepareDynamicResources|"
    r"prepare dynamic resources|DRA driver \S+ is not registered|"
    r"Unable to get container claim info state|NodePrepareResources failed",
    re.IGNORECASE,
)
_EVICT = re.compile(r"\bevict", re.IGNORECASE)
_EVICT_RESOURCE = re.compile(
    r"The node was low on resource: (?P<res>[\w.\-/]+)|"
    r"Usage of EmptyDir volume \"(?P<vol>[^\"]+)\""
)


@dataclass
class Signal:
    """One distinct kubelet complaint: the first line it was seen on and how often."""

    kind: str
    message: str
    line: int
    count: int = 1
    resource: str = ""
    requested: int = 0
    available: int = 0
    devices: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def to_fact(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "line": self.line,
            "count": self.count,
            "resource": self.resource,
            "requested": self.requested,
            "available": self.available,
            "devices": list(self.devices),
        }


@dataclass
class KubeletJournal:
    """What the kubelet journal says about one pod and the node's GPU plumbing."""

    lines_scanned: int = 0
    pod_lines: list[int] = field(default_factory=list)
    node_lines: list[int] = field(default_factory=list)
    registrations: list[tuple[str, int]] = field(default_factory=list)  # (resource, line)
    endpoint_errors: list[Signal] = field(default_factory=list)
    admission_errors: list[Signal] = field(default_factory=list)
    runtime_handler: tuple[str, int] | None = None  # (handler name, first line)
    runtime_handler_lines: list[int] = field(default_factory=list)
    sandbox_errors: list[Signal] = field(default_factory=list)
    container_cli_errors: list[Signal] = field(default_factory=list)
    hook_errors: list[Signal] = field(default_factory=list)
    cdi_errors: list[Signal] = field(default_factory=list)
    dra_errors: list[Signal] = field(default_factory=list)
    evictions: list[Signal] = field(default_factory=list)


def _add(signals: list[Signal], new: Signal) -> None:
    for s in signals:
        if s.kind == new.kind and s.message == new.message:
            s.count += 1
            s.lines.append(new.line)
            return
    new.lines = [new.line]
    signals.append(new)


def _error_tail(text: str) -> str:
    """The innermost useful part of a wrapped runtime error (after the last ``desc =``)."""
    _, sep, tail = text.rpartition(" desc = ")
    return _clean(tail if sep else text)


def _clean(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip().strip('"').strip()
    text = re.sub(r",? which is unexpected", "", text)
    return re.sub(r'(?::\s*unknown)?["\s.]*$', "", text).strip()


class _Relation(enum.Enum):
    """How a journal line relates to the pod under triage."""

    POD = "names the pod"
    OTHER = "names another pod"
    NODE = "names no pod"


def _relation(line: LogLine, flat: str, namespace: str, pod: str, uid: str) -> _Relation:
    if not pod and not uid:  # no target: everything is fair game
        return _Relation.POD if _names_a_pod(line, flat) else _Relation.NODE
    if uid and uid in line.text:
        return _Relation.POD
    if pod:
        ref = f"{namespace}/{pod}" if namespace else pod
        for key in _POD_KEYS:
            value = line.fields.get(key, "")
            if value and (value in (ref, pod) or f'"{ref}"' in value):
                return _Relation.POD
        if re.search(rf"(?<![\w.-]){re.escape(pod)}_{re.escape(namespace)}\(", flat):
            return _Relation.POD
        if namespace and re.search(rf"(?<![\w.-]){re.escape(ref)}(?![\w.-])", flat):
            return _Relation.POD
    return _Relation.OTHER if _names_a_pod(line, flat) else _Relation.NODE


def _names_a_pod(line: LogLine, flat: str) -> bool:
    if any(line.fields.get(k) for k in _POD_KEYS):
        return True
    if _POD_REF.search(flat):
        return True
    for m in _UUID.finditer(flat):
        before = flat[max(0, m.start() - 4) : m.start()]
        if not before.endswith(("GPU-", "MIG-")):
            return True
    return False


def parse_kubelet_journal(
    text: str, *, namespace: str = "", pod: str = "", uid: str = ""
) -> KubeletJournal:
    """Sort a kubelet journal into GPU signals for the pod ``namespace/pod`` (uid ``uid``).

    Lines naming another pod are skipped; lines naming no pod are kept when they are about
    device plugins, runtimes, CDI or DRA (node-wide causes). Never raises.
    """
    out = KubeletJournal()
    last_reclaim = ""
    targeted = bool(pod or uid)
    for lineno, raw in enumerate(text.splitlines(), 1):
        out.lines_scanned += 1
        # Cheap first look: most journal lines are about other things entirely.
        named = targeted and ((uid and uid in raw) or (pod and pod in raw))
        reclaim = "attempting to reclaim" in raw
        if targeted and not named and not reclaim and not _node_relevant(raw):
            continue
        line = parse_line(raw, lineno)
        if reclaim:  # node-pressure eviction names its resource on this line, not per pod
            last_reclaim = line.fields.get("resourceName", "") or last_reclaim
            continue
        flat = line.flat
        relation = _relation(line, flat, namespace, pod, uid)
        if relation is _Relation.OTHER:
            continue
        if relation is _Relation.NODE:
            if not _node_relevant(flat):
                continue
            out.node_lines.append(lineno)
        else:
            out.pod_lines.append(lineno)
        _classify(out, line, relation, last_reclaim)
    return out


def _node_relevant(text: str) -> bool:
    low = text.lower()
    return any(word in low for word in _NODE_WORDS)


def _classify(out: KubeletJournal, line: LogLine, relation: _Relation, last_reclaim: str) -> None:
    n = line.lineno
    text = line.detail
    reg = _REGISTRATION.search(text)
    if reg:
        resource = reg.group(1) or line.fields.get("resourceName", "")
        if resource and resource not in [r for r, _ in out.registrations]:
            out.registrations.append((resource, n))
    if not _GRPC_NOISE.search(text):
        for kind, rx in _ENDPOINT_RULES:
            if rx.search(text):
                resource = line.fields.get("resourceName", "") or line.fields.get("resource", "")
                _add(out.endpoint_errors, Signal(kind, _clean(text), n, resource=resource))
                break
    _classify_admission(out, n, text)
    handler = missing_runtime_handler(text)
    if handler is not None:
        if out.runtime_handler is None:
            out.runtime_handler = (handler, n)
        out.runtime_handler_lines.append(n)
    if _SANDBOX.search(text) and (
        line.severity in ("E", "W") or re.search(r"(?i)error|fail", text)
    ):
        _add(out.sandbox_errors, Signal("sandbox", _error_tail(text), n))
    for err in container_cli_errors(text):
        _add(out.container_cli_errors, Signal(err.kind, err.message, n))
    for hook in hook_errors(text):
        _add(out.hook_errors, Signal(hook.stage, hook.detail, n))
    if CDI_FAILURE.search(text):
        _add(out.cdi_errors, Signal("cdi", _error_tail(text), n, devices=cdi_devices(text)))
    if _DRA.search(text):
        _add(out.dra_errors, Signal("dra_prepare", _error_tail(text), n))
    if relation is _Relation.POD and _EVICT.search(text) and "rank" not in text.lower():
        ev = _EVICT_RESOURCE.search(text)
        resource = (ev["res"] or "ephemeral-storage") if ev else ""
        resource = resource or line.fields.get("resourceName", "") or last_reclaim
        _add(out.evictions, Signal("evicted", _clean(text), n, resource=resource))


def _classify_admission(out: KubeletJournal, lineno: int, text: str) -> None:
    for kind, rx in _ADMISSION_RULES:
        m = rx.search(text)
        if not m:
            continue
        groups = m.groupdict()
        resource = groups.get("res") or groups.get("res2") or ""
        requested = int(groups.get("req") or 0)
        available = int(groups.get("avail") or 0)
        if kind == "allocate_failed":
            message = _clean(groups.get("inner") or text)
        elif kind in ("unexpected_admission", "rejected"):
            message = _error_tail(text)
        else:
            message = _clean(text[m.start() :])
        _add(
            out.admission_errors,
            Signal(
                kind, message, lineno, resource=resource, requested=requested, available=available
            ),
        )
        return
