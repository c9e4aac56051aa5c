"""Resolve where and how to reach a node over SSH, the way ``ssh`` itself would (ssh_config).

paramiko parses ``~/.ssh/config`` (Host patterns, HostName, User, Port, IdentityFile...) but does
not follow ``ProxyJump``: this module turns a host alias into a :class:`Route`, the list of hops
to dial in order, each hop resolved through the same config as OpenSSH does (``ssh -G``).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import paramiko

#: More jumps than this is a loop in the config, not a network.
MAX_HOPS = 8
_IMPORT_LOCK = threading.Lock()

_HOP = re.compile(
    r"^(?:ssh://)?(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:@]+)(?::(?P<port>\d+))?$"
)


#: What a host name or address may hold: DNS names, IPv4, IPv6 (with a %zone). Anything else
#: (shell metacharacters, spaces, quotes) is refused before ssh_config sees it, since
#: ``Match exec`` runs a local shell with %h substituted (cf. OpenSSH CVE-2023-51385).
_SAFE_HOST = re.compile(r"^[A-Za-z0-9._:%-]+$")


class SshConfigError(ValueError):
    """The ssh_config (or a ProxyJump spec) cannot be followed; the message says why."""


class UnsafeHostError(SshConfigError):
    """A host name or address that gputriage refuses to hand to ssh_config or to connect to."""


def unsafe_host_reason(host: str) -> str:
    """Why ``host`` is not an acceptable host name or address ("" when it is)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not bare:
        return "it is empty"
    if len(bare) > 255:
        return "it is longer than 255 characters"
    if bare.startswith("-"):
        return "it starts with '-'"
    if not _SAFE_HOST.match(bare):
        return (
            "it holds characters that are not allowed in a host name or IP address "
            "(only letters, digits, '.', '-', '_', ':' and '%')"
        )
    return ""


def check_host(host: str, what: str = "host") -> str:
    """``host`` if it is a plain host name or IP address, else :class:`UnsafeHostError`."""
    reason = unsafe_host_reason(host)
    if reason:
        raise UnsafeHostError(f"refusing to connect to {what} {host!r}: {reason}")
    return host


@dataclass(frozen=True)
class Hop:
    """One SSH server to authenticate to: a jump host or the node itself."""

    alias: str  # the name as written in ProxyJump / asked for (the ssh_config Host key)
    hostname: str
    port: int = 22
    user: str = ""
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    known_hosts_files: tuple[str, ...] = ()  # UserKnownHostsFile, ~ expanded
    connect_timeout: float | None = None

    @property
    def label(self) -> str:
        port = f":{self.port}" if self.port != 22 else ""
        name = self.alias if self.alias == self.hostname else f"{self.alias} ({self.hostname})"
        return f"{self.user}@{name}{port}" if self.user else f"{name}{port}"


@dataclass(frozen=True)
class Route:
    """The hops to dial in order; the last one is the target."""

    hops: tuple[Hop, ...]

    @property
    def target(self) -> Hop:
        return self.hops[-1]

    @property
    def jumps(self) -> tuple[Hop, ...]:
        return self.hops[:-1]

    def describe(self) -> str:
        return " -> ".join(h.label for h in self.hops)


def default_config_path() -> str:
    return os.path.expanduser("~/.ssh/config")


def import_paramiko() -> ModuleType:
    """paramiko, imported without the ``invoke`` task runner.

    paramiko's only use for ``invoke`` is running ``Match exec`` commands, which gputriage
    runs itself (:class:`_MatchExec`, swapped in for every lookup); importing ``invoke`` would
    cost about 20 ms of the start of every triage that reaches a node (it imports YAML,
    ``unittest.mock`` and asyncio). ``invoke`` stays importable for anyone else afterwards.
    """
    # Not a look in sys.modules first: while another thread imports paramiko, it is there
    # half-initialised; the import statement waits for it to finish.
    with _IMPORT_LOCK:
        blocked = "invoke" not in sys.modules and "paramiko" not in sys.modules
        if blocked:
            sys.modules["invoke"] = None  # type: ignore[assignment]  # "import invoke" fails
        try:
            import paramiko
        finally:
            if blocked and sys.modules.get("invoke", 0) is None:
                del sys.modules["invoke"]
    return paramiko


def load_config(path: str | None = None) -> paramiko.SSHConfig:
    """Parse ``path`` (default ``~/.ssh/config``); a missing default file is an empty config."""
    import_paramiko()
    import paramiko

    explicit = path is not None
    path = os.path.expanduser(path) if path else default_config_path()
    if not os.path.exists(path):
        if explicit:
            raise SshConfigError(f"ssh_config file {path} does not exist")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SshConfigError(f"cannot read ssh_config {path}: {exc}") from exc
    except Exception as exc:  # paramiko raises ConfigParseError and plain exceptions
        raise SshConfigError(f"cannot parse ssh_config {path}: {exc}") from exc


def has_host_entry(config: paramiko.SSHConfig, name: str) -> bool:
    """Whether a ``Host`` pattern other than ``*`` matches ``name`` (a node name in config).

    ``Match`` blocks are ignored here (their criteria need a full lookup to evaluate, and
    paramiko's ``get_hostnames`` raises ``KeyError: 'host'`` on them).
    """
    for entry in getattr(config, "_config", []):
        for pattern in entry.get("host", ()) if isinstance(entry, dict) else ():
            if pattern != "*" and not pattern.startswith("!") and fnmatch(name, pattern):
                return True
    return False


def parse_jumps(spec: str) -> list[tuple[str, str, int | None]]:
    """``ProxyJump`` text -> ``[(user, host, port)]``; ``user`` is "" and port None when unset."""
    spec = spec.strip()
    if not spec or spec.lower() == "none":
        return []
    hops: list[tuple[str, str, int | None]] = []
    for part in spec.split(","):
        m = _HOP.match(part.strip())
        if not m:
            raise SshConfigError(
                f"cannot read ProxyJump hop {part.strip()!r} (want [user@]host[:port])"
            )
        port = int(m["port"]) if m["port"] else None
        hops.append((m["user"] or "", m["host"].strip("[]"), port))
    return hops


def resolve_route(
    alias: str,
    config: paramiko.SSHConfig,
    *,
    user: str | None = None,
    port: int | None = None,
) -> Route:
    """The hops to reach ``alias``: its ProxyJump chain (recursively resolved), then itself.

    ``user``/``port`` override the config for the target only (``--ssh-user``), as ``ssh -l``
    would; jump hosts keep their own.
    """
    hops = _route(alias, config, user or "", port, depth=0)
    return Route(tuple(hops))


def _route(
    alias: str,
    config: paramiko.SSHConfig,
    user: str,
    port: int | None,
    *,
    depth: int,
    jump_spec: str | None = None,
) -> list[Hop]:
    if depth > MAX_HOPS:
        raise SshConfigError(
            f"ProxyJump chain to {alias} is longer than {MAX_HOPS} hops (a loop in ssh_config?)"
        )
    with _match_exec_guard(alias):
        entry = config.lookup(alias)
    hop = _hop(alias, entry, user, port)
    spec = jump_spec if jump_spec is not None else str(entry.get("proxyjump", ""))
    jumps = parse_jumps(spec)
    if not jumps:
        return [hop]
    # ssh -J a,b target: reach b through "-J a", and a through a's own config.
    *before, (j_user, j_host, j_port) = jumps
    prefix = ",".join(_hop_text(*j) for j in before)
    chain = _route(
        j_host, config, j_user, j_port, depth=depth + 1, jump_spec=prefix if before else None
    )
    return [*chain, hop]


def _hop_text(user: str, host: str, port: int | None) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"{user + '@' if user else ''}{host}{f':{port}' if port else ''}"


def _hop(alias: str, entry: Mapping[str, Any], user: str, port: int | None) -> Hop:
    try:
        cfg_port = int(entry.get("port", 22))
    except ValueError as exc:
        raise SshConfigError(
            f"ssh_config Port for {alias} is not a number: {entry.get('port')!r}"
        ) from exc
    timeout: float | None = None
    if entry.get("connecttimeout"):
        try:
            timeout = float(entry["connecttimeout"])
        except ValueError:
            timeout = None
    return Hop(
        alias=alias,
        hostname=str(entry.get("hostname") or alias),
        port=port or cfg_port,
        user=user or str(entry.get("user") or "") or getpass.getuser(),
        identity_files=tuple(os.path.expanduser(f) for f in entry.get("identityfile", [])),
        identities_only=str(entry.get("identitiesonly", "no")).lower() == "yes",
        known_hosts_files=tuple(
            os.path.expanduser(f) for f in str(entry.get("userknownhostsfile", "")).split()
        ),
        connect_timeout=timeout,
    )


#: Seconds a ``Match exec`` command may run (OpenSSH has no limit; a triage cannot wait).
MATCH_EXEC_TIMEOUT = 10.0
_EXEC_LOCK = threading.Lock()


class _ExecResult:
    def __init__(self, ok: bool) -> None:
        self.ok = ok


class _MatchExec:
    """Stands in for the ``invoke`` module paramiko runs ``Match exec`` commands with.

    ``invoke.run`` mirrors our stdin into the command (it would steal the TUI's keyboard and
    fails under a captured stdin); this runs the command like OpenSSH does (``sh -c``) with
    stdin and output closed and a timeout. A host name that did not pass
    :func:`unsafe_host_reason` (a node name matched by a ``Host`` pattern) is never run
    through the shell: the lookup fails instead.
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def run(self, command: str, **_: object) -> _ExecResult:
        if unsafe_host_reason(self.alias) and self.alias in command:
            raise UnsafeHostError(
                f"refusing to run ssh_config Match exec {command!r}: it holds "
                f"the host name {self.alias!r}, which "
                f"{unsafe_host_reason(self.alias)}"
            )
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=MATCH_EXEC_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return _ExecResult(False)
        return _ExecResult(done.returncode == 0)


@contextlib.contextmanager
def _match_exec_guard(alias: str) -> Iterator[None]:
    """Run paramiko's ``Match exec`` commands for this lookup through :class:`_MatchExec`."""
    import paramiko.config as pconfig

    with _EXEC_LOCK:
        saved = getattr(pconfig, "invoke", None)
        pconfig.invoke = _MatchExec(alias)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            pconfig.invoke = saved  # type: ignore[attr-defined]
