"""NVIDIA k8s-device-plugin logs: registration, NVML start-up, health checks and config.

Reads what ``kubectl logs`` of the plugin pod (or ``journalctl -u nvidia-k8s-device-plugin``
on hosts that run it as a unit) prints, in every generation documented in
``k8s-messages.md`` section 6 and the GKE plugin's section 7.1: Go ``log`` lines
(``2020/08/10 19:09:42 ...``), klog (``I0305 10:11:12.123456 1 main.go:123] ...``), klog JSON and
bare lines. Pure; never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gputriage.parsers.journal import LogLine, iter_lines

#: NVML event types as the plugin prints them (``EventType:8`` in ``%+v`` of an event).
NVML_EVENT_TYPES: dict[int, str] = {
    1: "single_bit_ecc",
    2: "double_bit_ecc",
    4: "pstate",
    8: "xid",
    16: "clock",
    32: "power_source",
    64: "mig_config_change",
}

_START_MARKERS = (
    re.compile(r"^Starting FS watcher"),
    re.compile(r"^Starting NVIDIA Device Plugin"),
    re.compile(r"^Loading NVML", re.IGNORECASE),
)
_RESTART = re.compile(
    r"inotify: (?P<what>\S+) created, restarting|"
    r"Received (?P<sig>SIGHUP), restarting|"
    r"Found \d+ GPUs, while only \d+ are registered\. Stopping device-plugin"
)
_VERSION = re.compile(r"\bversion[=: ]+\"?(?P<v>v?\d[\w.\-+]*)")
_REGISTERED = re.compile(
    r"Registered device plugin for '(?P<res>[^']+)' with Kubelet|"
    r"Registered device plugin with Kubelet|"
    r"device-plugin registered with the kubelet",
    re.IGNORECASE,
)
_SERVING = re.compile(r"Starting to serve '(?P<res>[^']+)' on (?P<sock>\S+)")
_REGISTRATION_ERROR = re.compile(
    r"Could not register device plugin: (?P<err>.+)|"
    r"Could not contact Kubelet"
)
_NVML_FAILED = re.compile(
    r"Failed to initialize NVML: (?P<a>.+)|Failed to start nvml with error:\s*(?P<b>.+)|"
    r"nvml init failed: (?P<c>.+)|NVML init failed: (?P<d>[^;]+)|"
    r"failed to initialize NVML: (?P<e>.+)|NVML not detected: (?P<h>.+)|"  # v0.17 rm.go
    r"(?P<f>could not load NVML library)|(?P<g>ERROR_LIBRARY_NOT_FOUND)"
)
_RUNTIME_HINT = re.compile(
    r"did you set the docker default runtime to `?nvidia`?|"
    r"did you configure the NVIDIA Container Toolkit"
)
_NO_DEVICES = re.compile(
    r"No devices found\. Waiting indefinitely|No devices found|"
    r"Found 0 GPU devices",
    re.IGNORECASE,
)
_XID_DEVICE = re.compile(
    r"XidCriticalError: Xid=(?P<xid>\d+) on Device=(?P<dev>[^\s,;]+)"
    r"(?:, uuid=(?P<uuid>[^\s,;]+))?"
)
_XID_ALL = re.compile(r"XidCriticalError: Xid=(?P<xid>\d+), All devices will go unhealthy")
_XID_UNKNOWN_DEVICE = re.compile(r"XidCriticalError: Xid=(?P<xid>\d+) on unknown device")
_MARKED = re.compile(r"(?:'(?P<res>[^']+)' )?device marked unhealthy: (?P<dev>\S+)")
_UNHEALTHY_REASONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nvml_error", re.compile(r"Marking device (?P<dev>\S+) as unhealthy: (?P<why>.+)")),
    (
        "placement_unknown",
        re.compile(
            r"Could not determine device placement for (?P<dev>\S+): "
            r"(?P<why>.+?); Marking it unhealthy",
            re.IGNORECASE,
        ),
    ),
    (
        "no_handle",
        re.compile(
            r"unable to get device handle from UUID: (?P<why>.+?); "
            r"marking it as unhealthy",
            re.IGNORECASE,
        ),
    ),
    (
        "events_unsupported",
        re.compile(
            r"unable to determine the supported events for "
            r"(?P<dev>\S+): (?P<why>.+?); marking it as unhealthy",
            re.IGNORECASE,
        ),
    ),
    (
        "too_old",
        re.compile(
            r"Warning: (?:GPU with UUID )?(?P<dev>\S+) is too old to support "
            r"heal?t?h?c?h?ecking(?P<why>.*?)\.? Marking it unhealthy",
            re.IGNORECASE,
        ),
    ),
)
_ALL_UNHEALTHY = re.compile(
    r"Error waiting for event: (?P<why>.+?); Marking all devices as "
    r"unhealthy|Failed to determine uuid for event .*?: (?P<why2>.+?); "
    r"Marking all devices as unhealthy",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"^(?P<verb>Skipping(?: non-nvmlEventTypeXidCriticalError)? event|"
    r"Processing event):? (?P<body>\{.*)"
)
_EVENT_FIELD = re.compile(r"\b(EventType|EventData):(\d+)")
_GKE_SKIP = re.compile(
    r"Skip error Xid=(?P<a>\d+) as it is not Xid Critical|"
    r"Health checker is skipping Xid (?P<b>\d+) error"
)
_IGNORED_XIDS = re.compile(r"Ignoring the following XIDs for health checks: (?P<list>.*)")
_HEALTH_OFF = re.compile(
    r"health ?checks? disabled|continuing with health checks disabled", re.IGNORECASE
)
_CONFIG = re.compile(r"Running with config:\s*(?P<json>.*)$", re.DOTALL)
_MIG_FALLBACK = re.compile(r"Falling back to mig\.strategy=(?P<s>\w+)")
_ERROR_WORDS = re.compile(
    r"Could not (?:register|contact|start)|Failed to |failed to |Incompatible (?:strategy|"
    r"platform)|GRPC server for '[^']+' (?:crashed|has repeatedly crashed)|unable to load "
    r"config|error starting plugins|^Error:|[Ee]rror creating nvml|Unable to retrieve list"
)

#: Cheap first look: a line with none of these words cannot match any pattern above.
_KEYWORDS = (
    "regist",
    "serve",
    "could not",
    "nvml",
    "runtime",
    "found",
    "xid",
    "unhealthy",
    "skip",
    "event",
    "ignor",
    "health",
    "strategy",
    "version",
    "restart",
    "stopping",
    "error",
    "fail",
    "incompatible",
    "crash",
    "unable",
    "warning",
    "marking",
    "starting",
    "loading",
)

#: How many continuation lines a printed config may span.
MAX_CONFIG_LINES = 400


@dataclass
class UnhealthyDevice:
    """One device the plugin took out of service, merged across the lines that said so."""

    uuid: str
    xid: int = 0  # 0 when the reason was not an Xid
    resource: str = ""
    reason: str = ""  # xid | nvml_error | too_old | no_handle | ... | all_devices
    line: int = 0
    lines: list[int] = field(default_factory=list)

    def to_fact(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "xid": self.xid,
            "resource": self.resource,
            "reason": self.reason,
            "line": self.line,
        }


@dataclass
class PluginConfig:
    """The parts of ``Running with config:`` a triage needs (empty when not printed)."""

    printed: bool = False
    line: int = 0
    mig_strategy: str = ""
    sharing: str = ""  # "" | time-slicing | mps
    replicas: int = 0  # largest replicas of any shared resource
    shared_resources: list[str] = field(default_factory=list)
    rename_by_default: bool = False
    fail_on_init_error: bool = False
    device_list_strategy: list[str] = field(default_factory=list)
    device_id_strategy: str = ""
    resources: list[str] = field(default_factory=list)

    def to_fact(self) -> dict[str, Any]:
        return {
            "printed": self.printed,
            "mig_strategy": self.mig_strategy,
            "sharing": self.sharing,
            "replicas": self.replicas,
            "shared_resources": list(self.shared_resources),
            "rename_by_default": self.rename_by_default,
            "fail_on_init_error": self.fail_on_init_error,
            "device_list_strategy": list(self.device_list_strategy),
            "device_id_strategy": self.device_id_strategy,
            "resources": list(self.resources),
        }


@dataclass
class Message:
    """A distinct message and the lines it appeared on."""

    text: str
    line: int
    count: int = 1
    lines: list[int] = field(default_factory=list)


@dataclass
class DevicePluginLog:
    """Everything :func:`parse_device_plugin_log` found, with the line numbers that say so."""

    lines_scanned: int = 0
    version: str = ""
    version_line: int = 0
    starts: list[int] = field(default_factory=list)
    restarts: list[Message] = field(default_factory=list)
    registered: list[tuple[str, int]] = field(default_factory=list)  # (resource, line)
    serving: list[tuple[str, int]] = field(default_factory=list)
    registration_errors: list[Message] = field(default_factory=list)
    nvml_errors: list[Message] = field(default_factory=list)
    runtime_hint: list[int] = field(default_factory=list)
    no_devices: list[int] = field(default_factory=list)
    unhealthy: list[UnhealthyDevice] = field(default_factory=list)
    all_unhealthy: list[Message] = field(default_factory=list)
    skipped_events: list[dict[str, Any]] = field(default_factory=list)
    processed_xids: list[tuple[int, int]] = field(default_factory=list)  # (xid, line)
    ignored_xids: list[int] = field(default_factory=list)
    ignored_xids_line: int = 0
    healthcheck_disabled: list[int] = field(default_factory=list)
    config: PluginConfig = field(default_factory=PluginConfig)
    errors: list[Message] = field(default_factory=list)

    @property
    def skipped_xids(self) -> list[int]:
        return sorted({e["xid"] for e in self.skipped_events if e["xid"]})


def _note(messages: list[Message], text: str, line: int) -> None:
    for m in messages:
        if m.text == text:
            m.count += 1
            m.lines.append(line)
            return
    messages.append(Message(text, line, 1, [line]))


def _tidy(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".").strip()


def parse_device_plugin_log(text: str) -> DevicePluginLog:
    """Read a device-plugin log (any generation). Never raises; unknown lines are skipped."""
    out = DevicePluginLog()
    lines = list(iter_lines(text))
    out.lines_scanned = len(lines)
    marker = _start_marker(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        msg = line.msg.strip()
        i += 1
        if not msg:
            continue
        cfg = _CONFIG.search(msg)
        if cfg:
            i = _read_config(out, lines, i, cfg["json"], line.lineno)
            continue
        if marker and marker.search(msg):
            out.starts.append(line.lineno)
        low = msg.lower()
        if line.severity in ("E", "F") or any(word in low for word in _KEYWORDS):
            _scan(out, line, msg)
    return out


def _start_marker(lines: list[LogLine]) -> re.Pattern[str] | None:
    for rx in _START_MARKERS:
        if any(rx.search(line.msg.strip()) for line in lines):
            return rx
    return None


def _scan(out: DevicePluginLog, line: LogLine, msg: str) -> None:
    n = line.lineno
    if "Starting NVIDIA Device Plugin" in msg or msg.lower().startswith("nvidia device plugin"):
        version = line.fields.get("version", "")
        if not version:
            v = _VERSION.search(msg)
            version = v["v"] if v else ""
        if version and not out.version:
            out.version, out.version_line = version, n
    restart = _RESTART.search(msg)
    if restart:
        _note(out.restarts, _tidy(restart.group(0)), n)
    reg = _REGISTERED.search(msg)
    if reg:
        resource = reg["res"] or "nvidia.com/gpu"
        if resource not in [r for r, _ in out.registered]:
            out.registered.append((resource, n))
    serve = _SERVING.search(msg)
    if serve and serve["res"] not in [r for r, _ in out.serving]:
        out.serving.append((serve["res"], n))
    rerr = _REGISTRATION_ERROR.search(msg)
    if rerr:
        _note(out.registration_errors, _tidy(rerr.group(0)), n)
    nvml = _NVML_FAILED.search(msg)
    if nvml:
        detail = next((g for g in nvml.groups() if g), msg)
        _note(out.nvml_errors, _tidy(detail), n)
    if _RUNTIME_HINT.search(msg):
        out.runtime_hint.append(n)
    if _NO_DEVICES.search(msg):
        out.no_devices.append(n)
    health = _scan_health(out, msg, n)
    ignored = _IGNORED_XIDS.search(msg)
    if ignored:
        out.ignored_xids_line = n
        out.ignored_xids = sorted(
            {
                _number(x)
                for x, flag in re.findall(r"(\d+)(?::(true|false))?", ignored["list"])
                if flag != "false"
            }
        )
        if 0 in out.ignored_xids:  # the plugin's "all Xids" sentinel
            out.healthcheck_disabled.append(n)
    if _HEALTH_OFF.search(msg):
        out.healthcheck_disabled.append(n)
    mig = _MIG_FALLBACK.search(msg)
    if mig and not out.config.mig_strategy:
        out.config.mig_strategy = mig["s"]
    if not health and (line.severity in ("E", "F") or _ERROR_WORDS.search(msg)):
        _note(out.errors, _tidy(line.detail), n)


def _scan_health(out: DevicePluginLog, msg: str, n: int) -> bool:
    """Health-check lines; True when the line was one (so it is not also an "error")."""
    m = _XID_DEVICE.search(msg)
    if m:
        _unhealthy(out, m["uuid"] or m["dev"], n, xid=_number(m["xid"]), reason="xid")
        return True
    m = _XID_ALL.search(msg) or _XID_UNKNOWN_DEVICE.search(msg)
    if m:
        _note(out.all_unhealthy, _tidy(m.group(0)), n)
        _unhealthy(out, "all", n, xid=_number(m["xid"]), reason="xid")
        return True
    m = _MARKED.search(msg)
    if m:
        _unhealthy(out, m["dev"], n, resource=m["res"] or "")
        return True
    for reason, rx in _UNHEALTHY_REASONS:
        m = rx.search(msg)
        if m:
            _unhealthy(out, m.groupdict().get("dev") or "", n, reason=reason)
            return True
    m = _ALL_UNHEALTHY.search(msg)
    if m:
        _note(out.all_unhealthy, _tidy(m.group(0)), n)
        _unhealthy(out, "all", n, reason="event_wait_failed")
        return True
    ev = _EVENT.search(msg)
    if ev:
        values = dict(_EVENT_FIELD.findall(ev["body"]))
        etype = _number(values.get("EventType", "0"))
        data = _number(values.get("EventData", "0"))
        if ev["verb"].startswith("Processing"):
            if etype == 8:
                out.processed_xids.append((data, n))
        else:
            out.skipped_events.append(
                {
                    "type": etype,
                    "kind": NVML_EVENT_TYPES.get(etype, ""),
                    "xid": data if etype == 8 else 0,
                    "line": n,
                }
            )
        return True
    gke = _GKE_SKIP.search(msg)
    if gke:
        out.skipped_events.append(
            {"type": 8, "kind": "xid", "xid": _number(gke["a"] or gke["b"]), "line": n}
        )
        return True
    return False


def _number(digits: str) -> int:
    """``int(digits)``, or -1 for a number no Xid, event type or code can be (20+ digits):
    ``int()`` refuses strings over 4,300 digits, and a hostile log must not make it raise."""
    return int(digits) if len(digits) < 20 else -1


def _unhealthy(
    out: DevicePluginLog,
    device: str,
    line: int,
    *,
    xid: int = 0,
    resource: str = "",
    reason: str = "",
) -> None:
    uuid = device.strip().rstrip(".,;:'\"")
    for d in out.unhealthy:
        if d.uuid == uuid:
            d.xid = d.xid or xid
            d.resource = d.resource or resource
            d.reason = d.reason or reason
            d.lines.append(line)
            return
    out.unhealthy.append(UnhealthyDevice(uuid, xid, resource, reason, line, [line]))


def _read_config(
    out: DevicePluginLog, lines: list[LogLine], i: int, first: str, lineno: int
) -> int:
    """Collect the JSON printed after ``Running with config:``; return the next line index."""
    chunks = [first] if first.strip() else []
    depth = _depth(first)
    started = bool(first.strip())
    j = i
    while j < len(lines) and j - i < MAX_CONFIG_LINES and (not started or depth > 0):
        piece = lines[j].body
        if not started and not piece.strip():
            j += 1
            continue
        if not started and not piece.lstrip().startswith("{"):
            break
        started = True
        chunks.append(piece)
        depth += _depth(piece)
        j += 1
    try:
        data: Any = json.loads("\n".join(chunks)) if chunks else None
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        _apply_config(out.config, data, lineno)
        return j
    return i  # not JSON after all: scan the following lines normally


def _depth(text: str) -> int:
    return text.count("{") - text.count("}")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _apply_config(cfg: PluginConfig, data: dict[str, Any], line: int) -> None:
    cfg.printed, cfg.line = True, line
    flags = _obj(data.get("flags"))
    plugin = _obj(flags.get("plugin"))
    cfg.mig_strategy = str(flags.get("migStrategy") or cfg.mig_strategy or "")
    cfg.fail_on_init_error = bool(flags.get("failOnInitError"))
    strategy = plugin.get("deviceListStrategy")
    cfg.device_list_strategy = (
        [str(s) for s in strategy]
        if isinstance(strategy, list)
        else [str(strategy)]
        if strategy
        else []
    )
    cfg.device_id_strategy = str(plugin.get("deviceIDStrategy") or "")
    resources = _obj(data.get("resources"))
    for group in resources.values():
        for r in group if isinstance(group, list) else []:
            if isinstance(r, dict) and r.get("name") and r["name"] not in cfg.resources:
                cfg.resources.append(str(r["name"]))
    sharing = _obj(data.get("sharing"))
    for key, name in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        block = sharing.get(key)
        if not isinstance(block, dict):
            continue
        shared = [r for r in block.get("resources") or [] if isinstance(r, dict)]
        if not shared:
            continue
        cfg.sharing = name
        rename = bool(block.get("renameByDefault"))
        cfg.rename_by_default = cfg.rename_by_default or rename
        for r in shared:
            replicas = r.get("replicas")
            if isinstance(replicas, int):
                cfg.replicas = max(cfg.replicas, replicas)
            res = str(r.get("rename") or r.get("name") or "")
            if rename and not r.get("rename") and res:
                res += ".shared"
            if res and res not in cfg.shared_resources:
                cfg.shared_resources.append(res)
