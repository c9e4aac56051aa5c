"""The exact command gputriage runs on a node for each node evidence key, and how to read it.

Everything here is pure: it builds commands and interprets their results, and the transports
(:mod:`gputriage.evidence.ssh`, :mod:`gputriage.evidence.local`) do the running. Keeping both
halves in one place means SSH and local collection run identical commands, filter identically
and turn the same failures into the same named unknowns.

Logs are filtered ON the node (``grep -a -F``, fixed strings) and bounded there (``tail -c``),
so a 1M-line journal costs the bytes of the lines that matter, not the size of the log. Every
value that can come from a user or the cluster (pod name, namespace, UID, ``--since``) reaches
the node's shell only through :func:`shlex.quote`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.sources import NodeQuery
from gputriage.options import DEFAULT_SINCE

#: Kernel lines worth transferring: driver, Xid/SXid, NVSwitch, bus drops, init and GSP failures.
KERNEL_KEYWORDS: tuple[str, ...] = (
    "NVRM",
    "Xid",
    "SXid",
    "nvidia",
    "NVIDIA",
    "nvswitch",
    "fallen off the bus",
    "RmInit",
    "GSP",
)

#: Kubelet lines about GPUs whatever the pod: device manager, plugins, runtimes, CDI, DRA.
KUBELET_KEYWORDS: tuple[str, ...] = (
    "nvidia",
    "NVIDIA",
    "devicemanager",
    "device plugin",
    "Device plugin",
    "device-plugin",
    "deviceplugin",
    "UnexpectedAdmissionError",
    "Allocate failed",
    "healthy devices",
    "unregistered device",
    "endpoint not found",
    "no runtime for",
    "RuntimeHandler",
    "runtime handler",
    "OCI runtime",
    "dynamic resources",
    "ResourceClaim",
    "CDI",
    "Xid",
)

#: Where the GPU Operator's driver container exposes its root filesystem on the host.
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
#: The kubelet's device-manager checkpoint (pod -> device IDs), readable by root only.
DEVICE_CHECKPOINT_PATH = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"

#: The status trailer the node script prints on stderr after the producer command finishes.
RC_MARK = "gputriage-rc="
#: Printed by the node script when the producer is not installed (it exits 127).
MISSING_MARK = "gputriage: {program}: command not found"

_NOT_FOUND = re.compile(r"command not found|: not found\b|No such file or directory", re.I)
_FORBIDDEN = re.compile(
    r"Permission denied|Operation not permitted|insufficient permissions|"
    r"not seeing messages from other users|Access denied|must be root|are not root|"
    r"requires root|EPERM",
    re.I,
)
_SUDO_PASSWORD = re.compile(
    r"sudo: (a )?(terminal|password) is required|is not in the sudoers|"
    r"not allowed to execute",
    re.I,
)
_NO_JOURNAL = re.compile(r"No journal files were (found|opened)", re.I)
_SINCE_RELATIVE = re.compile(r"\d+(\.\d+)?\s*[a-zA-Z]*")

#: Bytes of stderr kept for reasons; error text is short, a flood is not worth transferring.
STDERR_LIMIT = 64 * 1024


@dataclass(frozen=True)
class NodeCommand:
    """One command to run on the node for ``key``, with its on-node filter and size bound."""

    key: Key
    argv: tuple[str, ...]
    max_bytes: int
    #: Keep only lines containing one of these fixed strings (``grep -a -F``); empty: keep all.
    keep: tuple[str, ...] = ()
    #: True: keep the newest bytes (``tail -c``, for logs); False: the first (``head -c``).
    newest: bool = True
    #: The error text is evidence too (``nvidia-smi`` failures, ``ls`` of missing devices).
    merge_stderr: bool = False
    #: argv items the node's shell must expand (``/dev/nvidia*``); never user data.
    globs: frozenset[str] = field(default_factory=frozenset)
    #: A sentence for the Evidence detail describing what the filter kept.
    kept: str = ""
    #: Tried only when every earlier alternative was unavailable (its program missing): the
    #: GPU Operator's driver root is looked at only where the host has no nvidia-smi.
    only_if_missing: bool = False
    #: A cheap, read-only look (a config file): when every alternative of a key is one, they
    #: all run at once and the first usable answer in order still wins, so a missing first
    #: choice costs no extra round trip to the node. Never for tools that can hang on a sick
    #: GPU (nvidia-smi) or scan a journal.
    together: bool = False

    @property
    def program(self) -> str:
        return self.argv[0]

    def display(self) -> str:
        """The producer command as an SRE would type it (used as the Evidence source)."""
        return " ".join(a if a in self.globs else shlex.quote(a) for a in self.argv)

    def script(self) -> str:
        """A POSIX ``sh`` script: run, filter and bound on the node; report the exit status.

        The producer's exit status goes to stderr as ``gputriage-rc=N`` because a pipeline's
        status is the status of its last command (``tail``), and POSIX sh has no pipefail.
        """
        prog = shlex.quote(self.program)
        missing = shlex.quote(MISSING_MARK.format(program=self.program))
        merge = " 2>&1" if self.merge_stderr else ""
        parts = [
            "LC_ALL=C; export LC_ALL",
            f"command -v {prog} >/dev/null 2>&1 || {{ echo {missing} >&2; exit 127; }}",
        ]
        pipeline = f'{{ {self.display()}{merge}; echo "{RC_MARK}$?" >&2; }}'
        if self.keep:
            patterns = " ".join(f"-e {shlex.quote(p)}" for p in self.keep)
            pipeline += f" | grep -a -F {patterns}"
        pipeline += f" | {'tail' if self.newest else 'head'} -c {int(self.max_bytes)}"
        parts.append(pipeline)
        return "; ".join(parts)

    def remote(self, *, sudo: bool = False) -> str:
        """The command line sent over SSH: the script under ``sh -c`` (and ``sudo -n``)."""
        prefix = "sudo -n " if sudo else ""
        return f"{prefix}sh -c {shlex.quote(self.script())}"

    def keeps(self, line: bytes) -> bool:
        """The filter of :meth:`script`, for transports that filter in Python (local)."""
        return not self.keep or any(p.encode() in line for p in self.keep)


def journal_since(since: str) -> str:
    """``--since`` as journalctl wants it: ``2h`` -> ``-2h``; absolute times pass through."""
    since = since.strip() or DEFAULT_SINCE
    if _SINCE_RELATIVE.fullmatch(since):
        return "-" + since.replace(" ", "")
    return since


def commands_for(key: Key, query: NodeQuery) -> tuple[NodeCommand, ...]:
    """The commands to try for ``key``, in order; the first usable result wins."""
    since = journal_since(query.since)
    limit = query.max_bytes
    window = f"in the window --since {since}"
    if key is Key.KUBELET_LOG:
        keep = tuple(p for p in (query.pod_uid, _pod_ref(query)) if p) + KUBELET_KEYWORDS
        return (
            NodeCommand(
                key,
                ("journalctl", "-u", "kubelet", "--no-pager", "--since", since, "-o", "short-iso"),
                limit,
                keep,
                kept=f"lines naming the pod or GPU device/runtime keywords {window}",
            ),
        )
    if key is Key.DMESG:
        kept = "NVRM/Xid/SXid/NVSwitch/GSP lines"
        return (
            NodeCommand(
                key,
                ("journalctl", "-k", "--no-pager", "--since", since, "-o", "short-iso"),
                limit,
                KERNEL_KEYWORDS,
                kept=f"{kept} {window}",
            ),
            NodeCommand(
                key,
                ("dmesg", "-T"),
                limit,
                KERNEL_KEYWORDS,
                kept=f"{kept} (dmesg has no time window)",
            ),
            NodeCommand(
                key, ("dmesg",), limit, KERNEL_KEYWORDS, kept=f"{kept} (dmesg has no time window)"
            ),
        )
    if key is Key.NVIDIA_SMI:
        return (
            NodeCommand(key, ("nvidia-smi", "-q", "-x"), limit, newest=False, merge_stderr=True),
            NodeCommand(key, ("nvidia-smi", "-q"), limit, newest=False, merge_stderr=True),
            # GPU Operator nodes: the driver (and nvidia-smi) live in the driver container's
            # root, mounted on the host at /run/nvidia/driver; chroot needs root (--sudo).
            # stderr stays apart so chroot's own failure (no such directory, not root) is a
            # named unavailable/forbidden, never mistaken for nvidia-smi output.
            NodeCommand(
                key,
                ("chroot", OPERATOR_DRIVER_ROOT, "nvidia-smi", "-q", "-x"),
                limit,
                newest=False,
                only_if_missing=True,
            ),
        )
    if key is Key.NVIDIA_TOPO:
        return (
            NodeCommand(key, ("nvidia-smi", "topo", "-m"), limit, newest=False, merge_stderr=True),
        )
    if key is Key.NVLINK:
        return (
            NodeCommand(
                key, ("nvidia-smi", "nvlink", "-s"), limit, newest=False, merge_stderr=True
            ),
        )
    if key is Key.DEVICE_CHECKPOINT:
        return (NodeCommand(key, ("cat", DEVICE_CHECKPOINT_PATH), limit, newest=False),)
    if key is Key.LSMOD:
        return (NodeCommand(key, ("lsmod",), limit, newest=False),)
    if key is Key.DEV_NVIDIA:
        return (
            NodeCommand(
                key,
                ("ls", "-l", "/dev/nvidia*"),
                limit,
                newest=False,
                merge_stderr=True,
                globs=frozenset({"/dev/nvidia*"}),
            ),
        )
    if key is Key.CONTAINERD_CONFIG:
        return (
            NodeCommand(
                key, ("cat", "/etc/containerd/config.toml"), limit, newest=False, together=True
            ),
            NodeCommand(
                key,
                ("cat", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"),
                limit,
                newest=False,
                together=True,
            ),
            NodeCommand(key, ("containerd", "config", "dump"), limit, newest=False, together=True),
        )
    return ()


def _pod_ref(query: NodeQuery) -> str:
    if query.namespace and query.pod:
        return f"{query.namespace}/{query.pod}"
    return query.pod


@dataclass(frozen=True)
class RawResult:
    """What a transport saw when it ran one :class:`NodeCommand`."""

    exit_status: int | None  # None: the command did not finish (timeout, dropped channel)
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    #: The transport cut the output (the node sent more than it should have).
    clipped: bool = False
    #: Set when the transport itself failed (channel refused, process could not start).
    failure: str = ""


@dataclass(frozen=True)
class Outcome:
    """How one command went: usable evidence, or a named reason why not."""

    status: Status
    reason: str
    data: bytes = b""
    #: A usable but second-best result (nvidia-smi's own error text): keep trying the next
    #: alternative, and fall back to this if nothing better comes.
    final: bool = True


def split_stderr(stderr: bytes) -> tuple[int | None, str]:
    """The producer's exit status from the ``gputriage-rc=N`` trailer, and the other text."""
    rc: int | None = None
    kept: list[str] = []
    for line in stderr.decode("utf-8", errors="replace").splitlines():
        if line.startswith(RC_MARK) and line[len(RC_MARK) :].isdigit():
            rc = int(line[len(RC_MARK) :])
        else:
            kept.append(line)
    return rc, "\n".join(kept).strip()


def read_outcome(cmd: NodeCommand, raw: RawResult, *, sudo: bool = False) -> Outcome:
    """Interpret one run of ``cmd``: the only place that decides what a node's answer means."""
    what = cmd.display()
    if raw.failure:
        return Outcome(Status.ERROR, f"{what}: {raw.failure}")
    if raw.timed_out:
        return Outcome(Status.TIMEOUT, f"{what} did not finish in time")
    if raw.clipped:
        return Outcome(
            Status.OK,
            f"gputriage stopped reading after {len(raw.stdout)} bytes "
            "(the node did not bound the output)",
            raw.stdout,
        )
    trailer, err = split_stderr(raw.stderr)
    rc = trailer if trailer is not None else raw.exit_status
    first_err = _first_line(err)
    if sudo and trailer is None and _SUDO_PASSWORD.search(err):
        return Outcome(
            Status.FORBIDDEN,
            f"sudo -n refused on the node ({first_err}); allow the SSH user to run "
            "it without a password (NOPASSWD) or drop --sudo",
        )
    if trailer is None and rc == 127:
        if MISSING_MARK.format(program=cmd.program) in err:
            return Outcome(
                Status.UNAVAILABLE,
                f"{cmd.program} is not installed on the node (command not found)",
            )
        if sudo and re.search(r"\bsudo\b", err):
            return Outcome(
                Status.UNAVAILABLE, f"sudo is not installed on the node ({first_err}); drop --sudo"
            )
        if re.search(r"\bsh\b", err):
            return Outcome(Status.ERROR, f"the node has no POSIX sh: {first_err}")
    if cmd.merge_stderr and raw.stdout.strip():
        if rc in (0, None) or (rc == 141 and not cmd.newest):  # 141: head -c closed the pipe
            return Outcome(Status.OK, "", raw.stdout)
        # The tool's own error text is the evidence ("couldn't communicate with the driver",
        # "No such file or directory" for /dev/nvidia*). For nvidia-smi a later alternative
        # may still do better, so it is kept only as a fallback.
        text = raw.stdout.decode("utf-8", errors="replace")
        note = f"{what} exited {rc}: {_first_line(text)}"
        return Outcome(Status.OK, note, raw.stdout, final=cmd.program != "nvidia-smi")
    # A warning beside good output is not a refusal, but journalctl's "not seeing messages
    # from other users" hint means the output is silently incomplete.
    usable = rc == 0 and raw.stdout.strip() and cmd.program != "journalctl"
    if _FORBIDDEN.search(err) and not usable:
        return _forbidden(cmd, _matching_line(err, _FORBIDDEN), sudo)
    if cmd.program == "journalctl" and _NO_JOURNAL.search(err):
        return Outcome(Status.UNAVAILABLE, f"{what}: no systemd journal on the node ({first_err})")
    if rc not in (0, None) and not (rc == 141 and not cmd.newest):
        if rc == 127 or _NOT_FOUND.search(err):
            return Outcome(Status.UNAVAILABLE, f"{what}: {first_err or 'not found'}")
        return Outcome(Status.ERROR, f"{what} exited {rc}: {first_err or 'no error text'}")
    if rc is None:
        return Outcome(Status.ERROR, f"{what}: the node closed the channel without a status")
    return Outcome(Status.OK, "", raw.stdout)


def _forbidden(cmd: NodeCommand, line: str, sudo: bool) -> Outcome:
    hint = (
        "even with sudo -n"
        if sudo
        else "rerun with --sudo, or give the SSH user read access (groups adm/systemd-journal)"
    )
    return Outcome(Status.FORBIDDEN, f"{cmd.display()}: {line} ({hint})")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _matching_line(text: str, pattern: re.Pattern[str]) -> str:
    for line in text.splitlines():
        if pattern.search(line):
            return line.strip()[:300]
    return _first_line(text)


#: Order in which failures are reported when no alternative worked: the most actionable first.
_FAILURE_RANK = {Status.FORBIDDEN: 0, Status.ERROR: 1, Status.TIMEOUT: 2, Status.UNAVAILABLE: 3}


def collect_key(
    key: Key,
    query: NodeQuery,
    run: Callable[[NodeCommand], RawResult],
    *,
    where: str,
    sudo: bool = False,
    time_left: Callable[[], float] = lambda: 1.0,
) -> Evidence:
    """Run the alternatives for ``key`` through ``run`` and return one Evidence; never raises.

    ``where`` names the transport and node for the Evidence source (``ssh gpu-7``, ``local``).
    ``time_left`` stops trying further alternatives once the caller's deadline has passed.
    """
    commands = commands_for(key, query)
    if not commands:
        return Evidence(key, Status.UNAVAILABLE, f"{key.value} is not node evidence", "", where)
    fallback: tuple[NodeCommand, Outcome] | None = None
    failures: list[tuple[NodeCommand, Outcome]] = []
    together = len(commands) > 1 and all(c.together for c in commands)
    ran = _run_together(commands, run) if together else {}
    for cmd in commands:
        if failures and time_left() <= 0 and cmd not in ran:
            break
        if cmd.only_if_missing and (
            fallback is not None or any(o.status is not Status.UNAVAILABLE for _, o in failures)
        ):
            continue
        outcome = read_outcome(cmd, ran[cmd] if cmd in ran else run(cmd), sudo=sudo)
        if outcome.status is Status.OK and outcome.final:
            return _evidence(cmd, outcome, where, failures)
        if outcome.status is Status.OK:
            fallback = fallback or (cmd, outcome)
        else:
            failures.append((cmd, outcome))
        if outcome.status is Status.TIMEOUT:
            break
    if fallback is not None:
        return _evidence(fallback[0], fallback[1], where, failures)
    cmd, worst = min(failures, key=lambda f: _FAILURE_RANK.get(f[1].status, 9))
    others = [o.reason for c, o in failures if o is not worst]
    detail = worst.reason + (f" (also tried: {'; '.join(others)})" if others else "")
    return Evidence(key, worst.status, detail, "", f"{where}: {cmd.display()}")


def _run_together(
    commands: tuple[NodeCommand, ...], run: Callable[[NodeCommand], RawResult]
) -> dict[NodeCommand, RawResult]:
    """Run ``commands`` at once (one thread each; the transport is thread-safe)."""
    from concurrent.futures import ThreadPoolExecutor

    def safe(cmd: NodeCommand) -> RawResult:
        try:
            return run(cmd)
        except Exception as exc:  # transports do not raise; a bug must not lose the others
            return RawResult(None, b"", b"", failure=f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(len(commands), thread_name_prefix="gputriage-node-cmd") as pool:
        return dict(zip(commands, pool.map(safe, commands), strict=True))


def _evidence(
    cmd: NodeCommand, outcome: Outcome, where: str, failures: list[tuple[NodeCommand, Outcome]]
) -> Evidence:
    source = f"{where}: {cmd.display()}"
    notes = [outcome.reason] if outcome.reason else []
    if failures:
        notes.append("tried first: " + "; ".join(o.reason for _, o in failures))
    if not outcome.data.strip():
        what = cmd.kept or "output"
        detail = f"no {what}" if cmd.kept else f"{cmd.display()} printed nothing"
        return Evidence(cmd.key, Status.OK, "; ".join([detail, *notes]), "", source, None, "text")
    data = outcome.data
    if len(data) >= cmd.max_bytes:
        notes.append(f"cut at {cmd.max_bytes} bytes on the node")
        if cmd.newest and b"\n" in data:  # tail -c starts mid-line: drop the fragment
            data = data.split(b"\n", 1)[1]
    evidence = decode(cmd.key, data, source=source)
    if cmd.kept and evidence.ok:
        notes.insert(0, f"kept {cmd.kept}, at most {cmd.max_bytes} bytes")
    if notes:
        evidence = evidence.with_status(evidence.status, "; ".join([evidence.detail, *notes]))
    return evidence
