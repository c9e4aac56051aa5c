"""Resolve where and how to reach a node over SSH, the way ``ssh`` itself would (ssh_config).

paramiko parses ``~/.ssh/config`` (Host patterns, HostName, User, Port, IdentityFile...) but does
not follow ``ProxyJump``: this module turns a host alias into a :class:`Route`, the list of hops
to dial in order, each hop resolved through the same config as OpenSSH does (``ssh -G``).
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import paramiko

#: More jumps than this is a loop in the config, not a network.
MAX_HOPS = 8

_HOP = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:@]+)(?::(?P<port>\d+))?$")


class SshConfigError(ValueError):
    """The ssh_config (or a ProxyJump spec) cannot be followed; the message says why."""


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


def load_config(path: str | None = None) -> paramiko.SSHConfig:
    """Parse ``path`` (default ``~/.ssh/config``); a missing default file is an empty config."""
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
    """Whether a ``Host`` pattern other than ``*`` matches ``name`` (a node name in config)."""
    for pattern in config.get_hostnames():
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
            raise SshConfigError(f"cannot read ProxyJump hop {part.strip()!r} (want "
                                 "[user@]host[:port])")
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


def _route(alias: str, config: paramiko.SSHConfig, user: str, port: int | None, *,
           depth: int, jump_spec: str | None = None) -> list[Hop]:
    if depth > MAX_HOPS:
        raise SshConfigError(f"ProxyJump chain to {alias} is longer than {MAX_HOPS} hops "
                             "(a loop in ssh_config?)")
    entry = config.lookup(alias)
    hop = _hop(alias, entry, user, port)
    spec = jump_spec if jump_spec is not None else str(entry.get("proxyjump", ""))
    jumps = parse_jumps(spec)
    if not jumps:
        return [hop]
    # ssh -J a,b target: reach b through "-J a", and a through a's own config.
    *before, (j_user, j_host, j_port) = jumps
    prefix = ",".join(_hop_text(*j) for j in before)
    chain = _route(j_host, config, j_user, j_port, depth=depth + 1,
                   jump_spec=prefix if before else None)
    return [*chain, hop]


def _hop_text(user: str, host: str, port: int | None) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"{user + '@' if user else ''}{host}{f':{port}' if port else ''}"


def _hop(alias: str, entry: Mapping[str, Any], user: str, port: int | None) -> Hop:
    try:
        cfg_port = int(entry.get("port", 22))
    except ValueError as exc:
        raise SshConfigError(f"ssh_config Port for {alias} is not a number: "
                             f"{entry.get('port')!r}") from exc
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
        known_hosts_files=tuple(os.path.expanduser(f)
                                for f in str(entry.get("userknownhostsfile", "")).split()),
        connect_timeout=timeout,
    )
