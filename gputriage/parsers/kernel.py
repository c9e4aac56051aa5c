"""NVIDIA GPU messages in kernel logs: Xid, SXid, lost GPUs, init failures, GSP timeouts.

Reads what an SRE can get from a node: ``dmesg`` (plain, ``-T``/``--ctime``,
``--time-format iso``, ``-x``), ``journalctl -k`` (short, short-iso, short-precise, short-full),
syslog files, raw ``/dev/kmsg`` records and the nv-fabricmanager log, in any mix. Lines are read
one at a time (a 100 MB log costs one pass and memory only for the records found), each line is
looked at through its first :data:`MAX_LINE` characters, and nothing here raises on bad input:
a line that is not understood simply yields no record.

Multi-line driver messages (the probe-time "fallen off the bus" text, nouveau conflicts, API
mismatches) are joined into one record that starts at their first line.

A reader made with ``oom_kills=True`` also reports the kernel OOM killer's victims
(``oom-kill:constraint=...`` and ``[Memory cgroup] out of memory: Killed process N (name)``
lines), with the memory cgroup and the pod UID and container id it names; the Xid decoder
leaves them out.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Characters of each line that are looked at; the kernel's own limit is 1024 per record.
MAX_LINE = 4096
#: Continuation lines joined into one multi-line message, at most.
MAX_CONTINUATION = 16


class Kind(enum.StrEnum):
    """What a kernel log record reports."""

    XID = "xid"  # NVRM: Xid (PCI:...): N, ...
    SXID = "sxid"  # an NVSwitch SXid event (kernel or Fabric Manager log)
    SXID_DETAIL = "sxid_detail"  # "Severity N Engine instance" / "Data {...}" lines of an SXid
    FALLEN_OFF_BUS = "fallen_off_bus"  # GPU lost without (or next to) an Xid 79
    RM_INIT_ADAPTER = "rm_init_adapter"  # the driver could not initialise a GPU
    GSP_TIMEOUT = "gsp_timeout"  # GSP heartbeat / RPC timeouts outside the Xid 119 line
    DRIVER_LOAD = "driver_load"  # module load problems: no GPU, probe failed, nouveau, mismatch
    DRIVER_VERSION = "driver_version"  # the "loading NVIDIA UNIX ... Kernel Module" banner
    GPU_IDENTITY = "gpu_identity"  # PCI id -> UUID / board serial lines
    PEERMEM = "peermem"  # nvidia-peermem "invalid context" (GPUDirect RDMA noise)
    OOM_KILL = "oom_kill"  # the kernel OOM killer chose a victim (only with oom_kills=True)
    OTHER_NVRM = "other_nvrm"  # any other NVRM line


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One NVIDIA message found in a kernel log.

    ``pci`` is normalised to ``DDDD:BB:DD`` in upper case (``0000:3B:00``) whatever the line
    printed (``PCI:0000:3b:00``, ``0000:3b:00.0``, ``00000000:3B:00.0``). Integer fields that a
    line does not carry are ``-1`` (``code`` and ``caused_by`` are ``0``). For OOM kills,
    ``unit`` is the scope (``cgroup``: a memory cgroup hit its limit; ``node``: the whole node
    ran out; ``""`` when the line does not say) and ``detail`` the kernel's constraint
    (``CONSTRAINT_MEMCG``, ``CONSTRAINT_NONE``...).
    """

    kind: Kind
    line: int  # 1-based line number where the message starts
    text: str  # that line as seen (at most MAX_LINE characters)
    message: str  # the message: after pid/name for Xids, after "NVRM: " otherwise
    timestamp: str = ""  # as printed: "Sun Feb 23 16:24:18 2025", "1843.308145"...
    time: str = ""  # ISO 8601 when the line carries a date, else ""
    end_line: int = 0  # last line of a multi-line message
    code: int = 0  # the Xid or SXid number
    pci: str = ""
    device: str = ""  # nvidia-nvswitch0, GPU6, a GPU UUID...
    gpu_instance: int = -1  # MIG GPU-I
    compute_instance: int = -1  # MIG GPU-CI
    pid: str = ""  # "1234", "<unknown>", or "" when the line has no pid
    process: str = ""
    severity: str = ""  # fatal | nonfatal (NVLink5 Xids, Xid 74, SXids)
    unit: str = ""  # NVLink5 sub-unit, MMU fault engine, contained unit
    link: int = -1  # NVLink / NVSwitch link or port
    registers: tuple[str, ...] = ()  # NVLink register words
    caused_by: int = 0  # Xid 45 "caused by previous Xid N"
    gpc: int = -1
    tpc: int = -1
    sm: int = -1
    recovery_from: int = -1  # Xid 154: previous recovery action value
    recovery_from_name: str = ""
    recovery_to: int = -1  # Xid 154: new recovery action value
    recovery_to_name: str = ""
    first: bool = False  # SXid "(First)"
    detail: str = ""  # kind-specific: RmInitAdapter code, driver version, UUID, serial...
    origin: str = "kernel"  # kernel | fabricmanager | device-plugin
    cgroup: str = ""  # OOM kills: the victim's memory cgroup (task_memcg, else oom_memcg)
    rss_kb: int = -1  # OOM kills: the victim's anon-rss in kB when printed


@dataclass(frozen=True)
class KernelLog:
    """Every record found in a log, and how many lines were read."""

    records: tuple[KernelRecord, ...]
    lines_scanned: int

    def of_kind(self, kind: Kind) -> list[KernelRecord]:
        return [r for r in self.records if r.kind is kind]


# --- PCI ids -------------------------------------------------------------------------------

_PCI_TEXT = r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2}(?:\.[0-7])?"
_PCI_PARTS = re.compile(
    r"(?:PCI:)?(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<dev>[0-9A-Fa-f]{1,2})"
    r"(?:\.[0-7])?$"
)


def normalize_pci(text: str) -> str:
    """``0000:3B:00`` for any spelling of a PCI address ("" when ``text`` is not one).

    The function digit is dropped (Xid lines never print it; NVSwitch SXids always print
    ``.0``), the domain is at least four hex digits and everything is upper case.
    """
    m = _PCI_PARTS.match(text.strip())
    if not m:
        return ""
    dom = int(m["dom"] or "0", 16)
    return f"{dom:04X}:{int(m['bus'], 16):02X}:{int(m['dev'], 16):02X}"


# --- line prefixes (timestamps, hosts, facilities) -----------------------------------------

_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_MON = "|".join(_MONTHS)
_DAY = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_HMS = r"\d{2}:\d{2}:\d{2}"

_KMSG = re.compile(r"\d{1,3},\d+,(?P<usec>\d+),[^;]{0,40};")
_FACILITY = re.compile(
    r"(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
    r"\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s*"
)
_ISO = re.compile(
    rf"(?P<date>\d{{4}}-\d{{2}}-\d{{2}})[T ](?P<hms>{_HMS})"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2})?\s+"
)
_CTIME = re.compile(
    rf"\[\s*(?:{_DAY})\s+(?P<mon>{_MON})\s+(?P<day>\d{{1,2}})\s+(?P<hms>{_HMS})"
    r"\s+(?P<year>\d{4})\s*\]\s*"
)
_FABRIC = re.compile(
    rf"\[(?P<mon>{_MON})\s+(?P<day>\d{{1,2}})\s+(?P<year>\d{{4}})\s+"
    rf"(?P<hms>{_HMS})\]\s*(?:\[[A-Z]+\]\s*)?(?:\[tid \d+\]\s*)?"
)
_FULL = re.compile(
    rf"(?:{_DAY})\s+(?P<date>\d{{4}}-\d{{2}}-\d{{2}})\s+(?P<hms>{_HMS})(?:\.\d+)?"
    r"\s+(?P<tz>[A-Z]{2,5}|[+-]\d{4})\s+"
)
_SYSLOG = re.compile(rf"(?P<mon>{_MON})\s+(?P<day>\d{{1,2}})\s+(?P<hms>{_HMS})(?:\.\d+)?\s+")
_HOST_KERNEL = re.compile(r"(?:[\w.\-]{1,253}\s+)?kernel(?:\[\d+\])?:\s*")
_UPTIME = re.compile(r"\[\s*(?P<up>\d+(?:\.\d+)?)\]\s*")


@dataclass(frozen=True, slots=True)
class _Prefix:
    end: int  # where the message starts
    timestamp: str
    time: str

    @property
    def stamped(self) -> bool:
        return bool(self.timestamp)


def _tz(tz: str | None) -> str:
    if not tz:
        return ""
    if tz in ("Z", "UTC", "GMT"):
        return "+00:00"
    if tz[0] in "+-":
        digits = tz.replace(":", "")
        return f"{digits[:3]}:{digits[3:5]}" if len(digits) == 5 else ""
    return ""


def _date(year: str, mon: str, day: str, hms: str) -> str:
    return f"{year}-{_MONTHS[mon]:02d}-{int(day):02d}T{hms}"


def _prefix(line: str) -> _Prefix:
    """Strip what tools put before the kernel's message, keeping the first timestamp seen."""
    pos = 0
    stamp = iso = ""
    m: re.Match[str] | None = _KMSG.match(line)
    if m:
        pos = m.end()
        stamp = f"{int(m['usec']) / 1_000_000:.6f}"
    m = _FACILITY.match(line, pos)
    if m:
        pos = m.end()
    dated = False
    if m := _ISO.match(line, pos):
        frac = f".{m['frac']}" if m["frac"] else ""
        stamp, iso, dated = m.group(0).strip(), f"{m['date']}T{m['hms']}{frac}{_tz(m['tz'])}", True
    elif m := _CTIME.match(line, pos):
        stamp = " ".join(m.group(0).strip().strip("[]").split())
        iso, dated = _date(m["year"], m["mon"], m["day"], m["hms"]), True
    elif m := _FABRIC.match(line, pos):
        stamp = f"{m['mon']} {int(m['day'])} {m['year']} {m['hms']}"
        iso, dated = _date(m["year"], m["mon"], m["day"], m["hms"]), True
    elif m := _FULL.match(line, pos):
        stamp, iso, dated = m.group(0).strip(), f"{m['date']}T{m['hms']}{_tz(m['tz'])}", True
    elif m := _SYSLOG.match(line, pos):
        stamp, dated = " ".join(m.group(0).split()), True  # no year: no ISO time
    if m:
        pos = m.end()
    if m := _HOST_KERNEL.match(line, pos):
        pos = m.end()
    if m := _UPTIME.match(line, pos):
        pos = m.end()
        if not dated and not stamp:
            stamp = m["up"]
    return _Prefix(pos, stamp, iso)


# --- message patterns ----------------------------------------------------------------------

_XID = re.compile(
    rf"NVRM: (?:GPU\d+ )?Xid \((?:PCI:)?(?P<pci>{_PCI_TEXT})(?: GPU-I:(?P<gi>\d+))?"
    r"(?: GPU-CI:(?P<ci>\d+))?\):\s*(?P<code>\d{1,5})\b,?\s*(?P<rest>.*)"
)
#: NVIDIA's documented pre-A100 page-retirement form: "XID 48 An uncorrectable ... GPU (<id>)".
_XID_LEGACY_DPR = re.compile(r"(?:^|\s)XID (?P<code>\d{1,3}) (?P<rest>[A-Z].*)")
_TRAILING_PCI = re.compile(rf"\((?:PCI:)?(?P<pci>{_PCI_TEXT})\)\s*$")
_XID_NVML = re.compile(
    r"XidCriticalError: Xid=(?P<code>\d{1,5}) on Device=(?P<dev>[^,\s]+),?"
    r"\s*(?P<rest>.*)"
)
_PID = re.compile(r"pid=(?:'(?P<q>[^']*)'|(?P<p>[^,\s]*))\s*(?:,\s*|$)")
#: How the message after "name=<process>, " starts; used to find where a process name whose
#: text contains ", " ends.
_MESSAGE_START = re.compile(
    r"(?:Ch\b|channel |Channel |ChID|Graphics |GPU |Contained|Uncontained|Timeout|Row Remapper"
    r"|An uncorrectable|NVLink|MMU|errorString|Preemptive|Dynamic Page|caused by"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\s+(?:Fatal|Nonfatal|Non-fatal)\b)"
)
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<code>\d{1,5})")
_GPC = re.compile(r"\(GPC (?P<gpc>\d+), TPC (?P<tpc>\d+), SM (?P<sm>\d+)\)")
_NVLINK5 = re.compile(
    r"(?P<unit>[A-Z][A-Z0-9_]*)\s+(?P<sev>Fatal|Nonfatal|Non-fatal)\s+XC\d+\s+i\d+\s+"
    r"Link\s+(?P<link>-?\d+)\s*\((?P<regs>[^)]*)\)"
)
_NVLINK_74 = re.compile(
    r"NVLink: (?P<sev>fatal|non-fatal|nonfatal)?\s*error detected on link "
    r"(?P<link>\d+)\s*\((?P<regs>[^)]*)\)",
    re.IGNORECASE,
)
_RECOVERY = re.compile(
    r"GPU recovery action changed from (?P<f>0x[0-9A-Fa-f]+|\d+) \((?P<fn>[^)]*)\) to "
    r"(?P<t>0x[0-9A-Fa-f]+|\d+) \((?P<tn>[^)]*)\)"
)
_MMU_ENGINE = re.compile(r"MMU Fault: ENGINE (?P<unit>\S+)")
_CONTAINED = re.compile(r"^(?:Contained|Uncontained): (?P<unit>\w+)")

_SXID = re.compile(
    rf"(?P<dev>nvidia-nvswitch\d+):\s*SXid \((?:PCI:)?(?P<pci>{_PCI_TEXT})\):\s*"
    r"(?P<code>\d{1,6})\b,?\s*(?P<rest>.*)"
)
_SXID_EVENT = re.compile(
    r"(?P<sev>Fatal|Non-fatal|Nonfatal),\s*(?:Link\s+(?P<link>\d+)\s*)?"
    r"(?P<desc>.*)"
)
_SXID_DETAIL = re.compile(r"(?:Severity \d+|Data \{|.*\bdata\[\d+\])")
_FABRIC_SXID = re.compile(
    rf"detected NVSwitch (?P<sev>non-fatal|fatal) error (?P<code>\d{{1,6}}) on fid \d+ on "
    rf"NVSwitch pci bus id (?P<pci>{_PCI_TEXT}) physical id (?P<phys>\d+)(?: port (?P<port>\d+))?",
    re.IGNORECASE,
)

_FALLEN_GPU = re.compile(
    rf"GPU (?:at )?(?:PCI:)?(?P<pci>{_PCI_TEXT}):?\s+(?:GPU\s+)?has fallen "
    r"off the bus"
)
_PROBE_GPU = re.compile(
    rf"The NVIDIA GPU (?P<pci>{_PCI_TEXT})"
    r"(?:\s*\(PCI ID: (?P<id>[0-9A-Fa-f:]+)\))?"
)
_FALLEN_PROBE = re.compile(r"fallen off the bus and is not responding to commands")

_RM_INIT = re.compile(
    rf"GPU (?P<pci>{_PCI_TEXT}): RmInitAdapter failed!\s*"
    r"(?:\((?P<code>0x[0-9A-Fa-f]+:0x[0-9A-Fa-f]+:\d+)\))?"
)
_RM_INIT_MINOR = re.compile(
    rf"GPU (?P<pci>{_PCI_TEXT}): rm_init_adapter failed, device minor "
    r"number (?P<minor>\d+)"
)
_RM_INIT_OTHER = re.compile(
    r"RmInitAdapter: (?P<what>.+)|(?P<gfw>failed to wait for GFW[_ ]"
    r"(?:BOOT|boot complete).*)"
)

_GSP = re.compile(
    r"Heartbeat timed out|heartbeat timed out|GSP Timeout|Rate limiting GSP RPC error prints"
    r"|waiting for RPC (?:response )?from (?:GPU\d+ )?GSP"
)
_GSP_PCI = re.compile(rf"GPU at PCI:(?P<pci>{_PCI_TEXT})")
_GPU_INDEX = re.compile(r"NVRM: (?P<gpu>GPU\d+) ")

_BANNER = re.compile(
    r"loading NVIDIA UNIX (?P<what>.*?Kernel Module.*?)\s+"
    r"(?P<ver>\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b"
)
_IDENTITY_UUID = re.compile(rf"GPU at PCI:(?P<pci>{_PCI_TEXT}): (?P<uuid>GPU-\S+)")
_IDENTITY_SERIAL = re.compile(
    rf"(?:GPU (?P<pci>{_PCI_TEXT}): GPU serial number is "
    r"|GPU Board Serial Number: )(?P<serial>[^\s.]+)"
)

#: Driver-load problems: (pattern, what it means in words). The first match wins.
_DRIVER_LOAD: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"API mismatch: the client has the version (?P<client>\S+?),? but"
            r"(?:.*?this kernel module has the version (?P<module>\S+?)\.?\s)?"
        ),
        "API mismatch between the NVIDIA user-space driver and the kernel module",
    ),
    (re.compile(r"No NVIDIA GPU found"), "no NVIDIA GPU found"),
    (re.compile(r"No NVIDIA graphics adapter (?:found|probed)"), "no NVIDIA GPU found"),
    (re.compile(r"NVIDIA init module failed"), "the nvidia kernel module failed to initialise"),
    (
        re.compile(r"probe routine failed for (?P<n>\d+) device"),
        "the NVIDIA probe routine failed for {n} device(s)",
    ),
    (
        re.compile(r"probe routine was not called for (?P<n>\d+) device"),
        "the NVIDIA probe routine was not called for {n} device(s): another driver (nouveau?) "
        "owns them",
    ),
    (
        re.compile(r"nouveau|conflicting kernel module"),
        "a conflicting driver (nouveau, rivafb, nvidiafb or rivatv) owns the GPU",
    ),
    (
        re.compile(rf"The NVIDIA GPU (?P<pci>{_PCI_TEXT}).*not supported by open\s+nvidia\.ko"),
        "GPU {pci} is not supported by the open nvidia.ko (no GSP): use the proprietary module",
    ),
    (
        re.compile(
            r"nvidia\S*: (?:disagrees about version of symbol|Unknown symbol|version magic)"
        ),
        "the nvidia kernel module does not match the running kernel",
    ),
)

# --- the kernel OOM killer ----------------------------------------------------------------

#: ``oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=...,oom_memcg=...,task_memcg=...,task=...,
#: pid=N,uid=N`` (Linux 4.19+), the line that names the cgroups.
_OOM_KILL = re.compile(r"oom-kill:\s*constraint=(?P<constraint>CONSTRAINT_[A-Z_]+)")
_OOM_FIELD = {
    "oom_memcg": re.compile(r"[,\s]oom_memcg=(?P<v>[^,\s]*)"),
    "task_memcg": re.compile(r"[,\s]task_memcg=(?P<v>[^,\s]*)"),
    "task": re.compile(r"[,\s]task=(?P<v>.*?),pid="),
    "pid": re.compile(r"[,\s]pid=(?P<v>\d{1,10})\b"),
}
#: ``Memory cgroup out of memory: Killed process 12345 (python) total-vm:...kB, anon-rss:...``,
#: ``Out of memory: Kill process 456 (python) score 50 or sacrifice child`` (before 4.19), the
#: bare ``Killed process N (name) ...`` that follows it, and ``Killed process N, UID U, (name)``.
_OOM_VICTIM = re.compile(
    r"(?:(?P<scope>Memory cgroup out of memory|Out of memory)(?: \([\w ]+\))?:\s*)?"
    r"Kill(?:ed)? process (?P<pid>\d{1,10})(?:, UID \d+,)? \((?P<name>.*?)\)(?=[\s,.]|$)"
)
_OOM_RSS = re.compile(r"anon-rss:\s*(?P<kb>\d{1,15})\s*kB")
#: Constraints the kernel prints; anything else is not an OOM kill line.
_OOM_CONSTRAINTS = frozenset(
    {"CONSTRAINT_NONE", "CONSTRAINT_CPUSET", "CONSTRAINT_MEMORY_POLICY", "CONSTRAINT_MEMCG"}
)
#: A pod's cgroup: ``pod<uid>`` (cgroupfs) or ``...-pod<uid_with_underscores>.slice`` (systemd).
_POD_CGROUP = re.compile(r"pod(?P<uid>[0-9a-fA-F]{8}(?:[-_][0-9a-fA-F]{4}){3}[-_][0-9a-fA-F]{12})")
#: The container's cgroup: the last path element, a 64-hex id with a runtime's prefix or not.
_CONTAINER_CGROUP = re.compile(
    r"/(?:cri-containerd-|crio-|docker-|containerd-)?"
    r"(?P<id>[0-9a-f]{64})(?:\.scope)?/?$"
)


def pod_of_cgroup(path: str) -> tuple[str, str]:
    """(pod UID, container id) named by a kubelet-managed cgroup path ("" for each not named).

    Both cgroup drivers are understood: ``/kubepods/burstable/pod<uid>/<id>`` (cgroupfs) and
    ``/kubepods.slice/.../kubepods-burstable-pod<uid_with_underscores>.slice/
    cri-containerd-<id>.scope`` (systemd); the UID comes back with dashes, in lower case.
    """
    pod = _POD_CGROUP.search(path)
    container = _CONTAINER_CGROUP.search(path)
    return (
        pod["uid"].replace("_", "-").lower() if pod else "",
        container["id"] if container else "",
    )


def _oom_kill(base: _Fields, body: str) -> KernelRecord | None:
    """An OOM-killer record from an ``oom-kill:`` line or a ``Killed process`` line."""
    if m := _OOM_KILL.search(body):
        constraint = m["constraint"]
        if constraint not in _OOM_CONSTRAINTS:
            return None
        found = {
            k: (f["v"] if (f := p.search(body, m.end())) else "") for k, p in _OOM_FIELD.items()
        }
        return _make(
            base,
            kind=Kind.OOM_KILL,
            message=body[m.start() :],
            detail=constraint,
            unit="cgroup" if constraint == "CONSTRAINT_MEMCG" else "node",
            pid=found["pid"],
            process=found["task"],
            cgroup=found["task_memcg"] or found["oom_memcg"],
        )
    if m := _OOM_VICTIM.search(body):
        scope = {"Memory cgroup out of memory": "cgroup", "Out of memory": "node"}
        rss = _OOM_RSS.search(body, m.end())
        return _make(
            base,
            kind=Kind.OOM_KILL,
            message=body[m.start() :],
            pid=m["pid"],
            process=m["name"],
            unit=scope.get(m["scope"] or "", ""),
            rss_kb=int(rss["kb"]) if rss else -1,
        )
    return None


# --- reading ---------------------------------------------------------------------------------

#: Keyword arguments of a KernelRecord being assembled.
_Fields = dict[str, Any]

_LINE_END = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def iter_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` exactly as ``str.splitlines()`` numbers them, without the copy.

    Line numbers must agree with :meth:`Evidence.cite`, which uses ``splitlines()``.
    """
    pos = 0
    for m in _LINE_END.finditer(text):
        yield text[pos : m.start()]
        pos = m.end()
    if pos < len(text):
        yield text[pos:]


@dataclass
class _Message:
    """A message being assembled: its first line and any continuation lines."""

    line: int
    text: str
    prefix: _Prefix
    body: str
    parts: list[str] = field(default_factory=list)
    end_line: int = 0

    def joined(self) -> str:
        if not self.parts:
            return self.body.strip()
        return " ".join([self.body.strip(), *self.parts])

    def unfinished(self) -> bool:
        tail = (self.parts[-1] if self.parts else self.body).rstrip()
        return bool(tail) and tail[-1] not in ".!)"


class KernelLogReader:
    """Turns lines into records, counting lines; remembers what a later line refers back to.

    ``for rec in reader.records(lines)`` streams; ``reader.lines_scanned`` is the number of
    lines read so far.
    """

    def __init__(self, *, oom_kills: bool = False) -> None:
        self.lines_scanned = 0
        self._oom = oom_kills  # also report the kernel OOM killer's victims
        self._probe_pci = ""  # "The NVIDIA GPU <pci>" waiting for its "fallen off the bus"
        self._probe_line = 0

    def records(self, lines: Iterable[str]) -> Iterator[KernelRecord]:
        pending: _Message | None = None
        for lineno, raw in enumerate(lines, 1):
            self.lines_scanned = lineno
            line = raw[:MAX_LINE].rstrip("\r\n")
            if not (_relevant(line) or (self._oom and _oom_relevant(line))):
                if pending:
                    yield from self._finish(pending)
                    pending = None
                continue
            prefix = _prefix(line)
            body = line[prefix.end :]
            if pending and self._continues(pending, line, prefix, body):
                pending.parts.append(body.strip().removeprefix("NVRM:").strip())
                pending.end_line = lineno
                continue
            if pending:
                yield from self._finish(pending)
            pending = _Message(lineno, line, prefix, body, end_line=lineno)
        if pending:
            yield from self._finish(pending)

    @staticmethod
    def _continues(pending: _Message, line: str, prefix: _Prefix, body: str) -> bool:
        """Is ``line`` the next line of a multi-line NVRM message rather than a new one?

        dmesg indents continuation lines; older kernels print them flush left without a
        timestamp under a timestamped first line. Xid and SXid lines are always single lines.
        """
        if prefix.stamped or len(pending.parts) >= MAX_CONTINUATION:
            return False
        stripped = body.lstrip()
        if not stripped.startswith("NVRM:") or "Xid (" in stripped:
            return False
        first = pending.body
        if "NVRM:" not in first or "Xid (" in first:
            return False
        if line[:1].isspace():
            return True
        return pending.prefix.stamped and pending.unfinished()

    def _finish(self, msg: _Message) -> Iterator[KernelRecord]:
        try:
            record = self._classify(msg)
        except (ValueError, KeyError, IndexError):  # a malformed number deep in a regex group
            record = None
        if record is not None:
            yield record

    def _classify(self, msg: _Message) -> KernelRecord | None:
        body = msg.joined()
        base: _Fields = {
            "kind": Kind.OTHER_NVRM,
            "line": msg.line,
            "text": msg.text,
            "message": "",
            "timestamp": msg.prefix.timestamp,
            "time": msg.prefix.time,
            "end_line": msg.end_line,
        }
        if m := _XID.search(body):
            return _xid(base, m["code"], m["rest"], pci=m["pci"], gi=m["gi"], ci=m["ci"])
        if m := _SXID.search(body):
            return _sxid(base, m)
        if m := _FABRIC_SXID.search(body):
            port = int(m["port"]) if m["port"] else -1
            return _make(
                base,
                kind=Kind.SXID,
                code=int(m["code"]),
                pci=normalize_pci(m["pci"]),
                device=f"NVSwitch physical id {m['phys']}",
                link=port,
                severity=_severity(m["sev"]),
                message=body,
                origin="fabricmanager",
            )
        if m := _XID_NVML.search(body):
            return _make(
                base,
                kind=Kind.XID,
                code=int(m["code"]),
                device=m["dev"],
                message=m["rest"],
                origin="device-plugin",
            )
        if m := _XID_LEGACY_DPR.search(body):
            at = _TRAILING_PCI.search(m["rest"])
            return _xid(base, m["code"], m["rest"], pci=at["pci"] if at else "")
        if "NVRM" not in body:
            if self._oom and _oom_relevant(body):
                return _oom_kill(base, body)
            return _non_nvrm(base, body)
        message = body[body.index("NVRM:") + 5 :].strip() if "NVRM:" in body else body
        base = {**base, "message": message}
        return self._nvrm(base, message)

    def _nvrm(self, base: _Fields, message: str) -> KernelRecord | None:
        if m := _FALLEN_GPU.search(message):
            return _make(base, kind=Kind.FALLEN_OFF_BUS, pci=normalize_pci(m["pci"]))
        probe = _PROBE_GPU.search(message)
        if probe and _FALLEN_PROBE.search(message):
            return _make(
                base,
                kind=Kind.FALLEN_OFF_BUS,
                pci=normalize_pci(probe["pci"]),
                detail=probe["id"] or "",
            )
        if _FALLEN_PROBE.search(message):
            near = base["line"] - self._probe_line <= 3
            return _make(base, kind=Kind.FALLEN_OFF_BUS, pci=self._probe_pci if near else "")
        if m := _RM_INIT.search(message):
            return _make(
                base, kind=Kind.RM_INIT_ADAPTER, pci=normalize_pci(m["pci"]), detail=m["code"] or ""
            )
        if m := _RM_INIT_MINOR.search(message):
            return _make(
                base,
                kind=Kind.RM_INIT_ADAPTER,
                pci=normalize_pci(m["pci"]),
                detail=f"device minor number {m['minor']}",
            )
        if m := _RM_INIT_OTHER.search(message):
            return _make(base, kind=Kind.RM_INIT_ADAPTER, detail=(m["what"] or m["gfw"]).strip())
        if _GSP.search(message):
            at = _GSP_PCI.search(message)
            gpu = _GPU_INDEX.search(base["text"])
            return _make(
                base,
                kind=Kind.GSP_TIMEOUT,
                pci=normalize_pci(at["pci"]) if at else "",
                device=gpu["gpu"] if gpu else "",
            )
        if m := _BANNER.search(message):
            flavour = "open" if "Open" in m["what"] else "proprietary"
            return _make(base, kind=Kind.DRIVER_VERSION, detail=m["ver"], unit=flavour)
        if m := _IDENTITY_UUID.search(message):
            return _make(
                base, kind=Kind.GPU_IDENTITY, pci=normalize_pci(m["pci"]), device=m["uuid"]
            )
        if m := _IDENTITY_SERIAL.search(message):
            return _make(
                base, kind=Kind.GPU_IDENTITY, pci=normalize_pci(m["pci"] or ""), detail=m["serial"]
            )
        driver = _driver_load(message)
        if driver:
            return _make(base, kind=Kind.DRIVER_LOAD, detail=driver)
        if probe:
            self._probe_pci, self._probe_line = normalize_pci(probe["pci"]), base["line"]
        return _make(base)


def _non_nvrm(base: _Fields, body: str) -> KernelRecord | None:
    """NVIDIA messages that do not come from NVRM: peermem, module loading."""
    if "nvidia-peermem" in body and "invalid context" in body:
        start = body.index("nvidia-peermem")
        return _make(base, kind=Kind.PEERMEM, message=body[start:])
    driver = _driver_load(body)
    if driver and "nvidia" in body:
        return _make(base, kind=Kind.DRIVER_LOAD, message=body, detail=driver)
    if "fallen off the bus" in body and (m := _FALLEN_GPU.search(body)):
        return _make(base, kind=Kind.FALLEN_OFF_BUS, message=body, pci=normalize_pci(m["pci"]))
    return None


def _driver_load(message: str) -> str:
    for pattern, words in _DRIVER_LOAD:
        m = pattern.search(message)
        if m:
            found = {k: v for k, v in m.groupdict().items() if v}
            if "client" in found:
                module = f", kernel module {found['module']}" if "module" in found else ""
                return f"{words} (client {found['client']}{module})"
            if "pci" in found:
                found["pci"] = normalize_pci(found["pci"])
            return words.format(**found) if found else words
    return ""


def _severity(text: str | None) -> str:
    if not text:
        return ""
    return "fatal" if text.lower() == "fatal" else "nonfatal"


def _split_pid_name(rest: str) -> tuple[str, str, str]:
    """``pid=..., name=..., message`` -> (pid, process, message); each part may be absent.

    The driver prints ``pid='<unknown>', name=<unknown>`` for unknown processes. Process names
    may contain ``:``, ``[``, ``]`` and even ``, ``: the name ends at the first ``, `` that is
    followed by something that looks like the start of a message.
    """
    m = _PID.match(rest)
    if not m:
        return "", "", rest
    pid = m["q"] if m["q"] is not None else m["p"]
    tail = rest[m.end() :]
    if not tail.startswith("name="):
        return pid, "", tail
    tail = tail[5:]
    first = chosen = -1
    at = tail.find(", ")
    while 0 <= at <= 64:
        if first < 0:
            first = at
        if _MESSAGE_START.match(tail, at + 2):
            chosen = at
            break
        at = tail.find(", ", at + 1)
    end = chosen if chosen >= 0 else first
    if end < 0:
        return pid, tail.rstrip(","), ""
    return pid, tail[:end], tail[end + 2 :]


def _xid(
    base: _Fields,
    code: str,
    rest: str,
    *,
    pci: str = "",
    gi: str | None = None,
    ci: str | None = None,
) -> KernelRecord:
    pid, process, message = _split_pid_name(rest.strip())
    message = message.strip()
    f: _Fields = {
        "kind": Kind.XID,
        "code": int(code),
        "pci": normalize_pci(pci) if pci else "",
        "gpu_instance": int(gi) if gi else -1,
        "compute_instance": int(ci) if ci else -1,
        "pid": pid,
        "process": process,
        "message": message,
    }
    if m := _CAUSED_BY.search(message):
        f["caused_by"] = int(m["code"])
    if m := _GPC.search(message):
        f.update(gpc=int(m["gpc"]), tpc=int(m["tpc"]), sm=int(m["sm"]))
    if m := _NVLINK5.match(message):
        f.update(
            unit=m["unit"],
            severity=_severity(m["sev"]),
            link=int(m["link"]),
            registers=tuple(m["regs"].split()),
        )
    elif m := _NVLINK_74.search(message):
        f.update(
            severity=_severity(m["sev"]),
            link=int(m["link"]),
            registers=tuple(r.strip() for r in m["regs"].split(",") if r.strip()),
        )
    if m := _RECOVERY.search(message):
        f.update(
            recovery_from=int(m["f"], 0),
            recovery_from_name=m["fn"].strip(),
            recovery_to=int(m["t"], 0),
            recovery_to_name=m["tn"].strip(),
        )
    if m := _MMU_ENGINE.search(message) or _CONTAINED.match(message):
        f["unit"] = m["unit"]
    return _make(base, **f)


def _sxid(base: _Fields, m: re.Match[str]) -> KernelRecord:
    rest = m["rest"].strip()
    f: _Fields = {
        "kind": Kind.SXID,
        "code": int(m["code"]),
        "pci": normalize_pci(m["pci"]),
        "device": m["dev"],
        "message": rest,
    }
    if _SXID_DETAIL.match(rest):
        return _make(base, **{**f, "kind": Kind.SXID_DETAIL})
    if ev := _SXID_EVENT.match(rest):
        desc = ev["desc"].strip()
        first = desc.endswith("(First)")
        f.update(
            severity=_severity(ev["sev"]),
            link=int(ev["link"]) if ev["link"] else -1,
            detail=desc.removesuffix("(First)").strip(),
            first=first,
        )
        return _make(base, **f)
    return _make(base, **f, detail=rest)


def _make(base: _Fields, **fields: Any) -> KernelRecord:
    """One record from the line's common fields and what the message added (built once)."""
    return KernelRecord(**{**base, **fields})


def _relevant(line: str) -> bool:
    """Cheap test run on every line before any regular expression."""
    return (
        "NVRM" in line
        or "Xid" in line
        or "XID" in line
        or "nvidia" in line
        or "NVSwitch" in line
        or "fallen off the bus" in line
    )


def _oom_relevant(line: str) -> bool:
    """Cheap test for the OOM killer's lines: ``Kill[ed] process`` and ``oom-kill:``."""
    return "Kill process" in line or "Killed process" in line or "oom-kill:" in line


def iter_records(lines: Iterable[str]) -> Iterator[KernelRecord]:
    """Records found in ``lines`` (any iterable of str, e.g. an open file), in line order."""
    return KernelLogReader().records(lines)


def parse_text(text: str) -> KernelLog:
    """Every record in a whole log, plus the number of lines read."""
    reader = KernelLogReader()
    records = tuple(reader.records(iter_lines(text)))
    return KernelLog(records, reader.lines_scanned)


def parse_line(text: str) -> KernelRecord | None:
    """The record on one pasted line (or the first record of a pasted block), if any."""
    return next(iter_records(iter_lines(text)), None)
