"""Node evidence over SSH (paramiko): one connection per node, strict host keys, bounded output.

* Where to connect: ``--node-address NODE=HOST`` if given, else the node name when ssh_config has
  a ``Host`` entry for it, else the node's InternalIP/Hostname (``NodeQuery.address``).
* ssh_config is honoured (see :mod:`gputriage.evidence.sshconfig`), ``ProxyJump`` chains are
  followed hop by hop through ``direct-tcpip`` channels, and the SSH agent is used.
* Host keys are checked against known_hosts. An unknown key is refused unless
  ``--accept-new-host-key`` (then it is saved, like OpenSSH's ``accept-new``); a changed key is
  always refused. Either way the Evidence detail shows the key type and SHA256 fingerprint.
* Commands come from :mod:`gputriage.evidence.nodecmds`: quoted, filtered and bounded on the
  node. Every step has a timeout; nothing here raises into the caller.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.nodecmds import STDERR_LIMIT, NodeCommand, RawResult, collect_key
from gputriage.evidence.sources import NodeQuery
from gputriage.evidence.sshconfig import (
    Hop,
    Route,
    SshConfigError,
    UnsafeHostError,
    check_host,
    has_host_entry,
    import_paramiko,
    load_config,
    resolve_route,
)

if TYPE_CHECKING:
    import paramiko

GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
#: Extra bytes accepted beyond a command's own bound before the channel is cut.
_SLACK = 64 * 1024


@dataclass(frozen=True)
class SshSettings:
    """How to reach nodes; built from the command line by ``nodes.node_source_from_args``."""

    config_path: str | None = None  # None: ~/.ssh/config (missing is fine)
    user: str | None = None  # --ssh-user: overrides ssh_config for the node (not jump hosts)
    overrides: Mapping[str, str] = field(default_factory=dict)  # --node-address NODE=HOST
    known_hosts: str | None = None  # None: UserKnownHostsFile from config, else ~/.ssh/...
    accept_new_host_key: bool = False
    sudo: bool = False
    connect_timeout: float = 10.0


class _Failure(Exception):
    """A connection that could not be made; becomes an Evidence for every key of the node."""

    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


#: Command channels open at once on one connection: OpenSSH's default ``MaxSessions``. A
#: server that allows fewer refuses the extra channel (OpenSSH: "connect failed"): the
#: connection then keeps to what it allowed and the command waits for a channel to close.
MAX_CHANNELS = 10
#: Refusals retried (after 50, 100, 150 ms) when no other channel of ours is open.
_REFUSAL_RETRIES = 3


@dataclass
class _Connection:
    route: Route
    clients: list[paramiko.SSHClient]
    notes: list[str]
    limit: int = MAX_CHANNELS
    open_channels: int = 0
    slots: threading.Condition = field(default_factory=threading.Condition)

    def take_slot(self, deadline: float) -> bool:
        """Wait (until ``deadline``) for a channel slot; False when the time ran out."""
        with self.slots:
            while self.open_channels >= self.limit:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.slots.wait(remaining)
            self.open_channels += 1
            return True

    def give_slot(self, *, refused: bool = False) -> bool:
        """Return a slot. ``refused``: the server would not open it; True when other channels
        are open, so waiting for one of them to close is worth a retry."""
        with self.slots:
            self.open_channels -= 1
            if refused and self.open_channels > 0:
                self.limit = max(1, min(self.limit, self.open_channels))
                return True
            self.slots.notify()
            return False

    @property
    def transport(self) -> paramiko.Transport:
        transport = self.clients[-1].get_transport()
        assert transport is not None  # connected clients always have one
        return transport

    def alive(self) -> bool:
        transports = [c.get_transport() for c in self.clients]
        return all(t is not None and t.is_active() for t in transports)

    def close(self) -> None:
        for client in reversed(self.clients):
            # Closing a broken connection must not mask the real problem.
            with contextlib.suppress(Exception):
                client.close()


def fingerprint(key: paramiko.PKey) -> str:
    """``ssh-ed25519 SHA256:...``, as ``ssh-keygen -l`` shows it."""
    return f"{key.get_name()} {key.fingerprint}"


class SshNodeSource:
    """A :class:`~gputriage.evidence.sources.NodeSource` over SSH. Thread-safe: the broker
    collects several keys of one node at once over the node's single connection."""

    name = "ssh"

    def __init__(self, settings: SshSettings | None = None) -> None:
        self.settings = settings or SshSettings()
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._connections: dict[str, _Connection] = {}
        self._failures: dict[str, _Failure] = {}
        self._config: paramiko.SSHConfig | None = None
        #: Bytes received on command channels (stdout + stderr), for benchmarks and tests.
        self.bytes_received = 0
        #: SSH connections made (one per node, plus one per jump host on its route).
        self.connections_opened = 0

    # -- NodeSource ------------------------------------------------------------------------

    def collect(self, key: Key, query: NodeQuery, timeout: float) -> Evidence:
        started = time.monotonic()
        deadline = started + timeout
        node = query.node or query.address
        where = f"ssh {node}"
        try:
            conn, notes = self._connection(query, deadline)
            evidence = collect_key(
                key,
                query,
                lambda cmd: self._run(conn, cmd, deadline),
                where=where,
                sudo=self.settings.sudo,
                time_left=lambda: deadline - time.monotonic(),
            )
            if notes:
                evidence = evidence.with_status(
                    evidence.status, "; ".join([evidence.detail, *notes])
                )
        except _Failure as failure:
            evidence = Evidence(key, failure.status, failure.detail, "", where)
        except Exception as exc:  # a bug or an exotic paramiko error must not crash a triage
            evidence = Evidence(
                key, Status.ERROR, f"SSH to {node} failed: {type(exc).__name__}: {exc}", "", where
            )
        return replace(evidence, elapsed_s=time.monotonic() - started)

    def prepare(self, query: NodeQuery, timeout: float) -> threading.Event:
        """Start connecting to the node now, in the background, when where to connect does
        not depend on the Node object (a ``--node-address`` or a ``Host`` entry for the node's
        name): the broker calls this as soon as the pod names its node, so the SSH handshake
        overlaps the rest of the API's answers. ``collect`` then shares the connection, or its
        failure.

        The event returned is set once the connection has been dialled (or will not be made
        early): the broker holds the other API requests back until then, so the longest chain
        of the collection (connect, log in, run commands) is not slowed down at its start."""
        dialled = threading.Event()
        threading.Thread(
            target=self._connect_early,
            args=(query, timeout, dialled),
            name="gputriage-ssh-early",
            daemon=True,
        ).start()
        return dialled

    def _connect_early(self, query: NodeQuery, timeout: float, dialled: threading.Event) -> None:
        try:
            with self._lock:
                known = bool(self.settings.overrides.get(query.node)) or bool(
                    query.node and has_host_entry(self._load_config(), query.node)
                )
            if known:
                self._connection(query, time.monotonic() + timeout, dialled)
        except Exception:  # recorded for collect() to report (or retried by it)
            return
        finally:
            dialled.set()

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
            self._failures.clear()
        for conn in connections:
            conn.close()

    # -- where to connect ------------------------------------------------------------------

    def alias_for(self, query: NodeQuery) -> str:
        """The name handed to ssh_config for this node (see the module docstring).

        A ``--node-address`` or a node address from the cluster is checked first
        (:func:`~gputriage.evidence.sshconfig.check_host`): ssh_config's ``Match exec`` would
        run it through a local shell. A node name is used only when a ``Host`` entry the user
        wrote matches it.
        """
        override = self.settings.overrides.get(query.node)
        if override:
            return check_host(override, f"--node-address of {query.node}")
        if query.node and has_host_entry(self._load_config(), query.node):
            return query.node
        if query.address:
            return check_host(query.address, f"the address of node {query.node}")
        return check_host(query.node, "node") if query.node else ""

    def route_for(self, query: NodeQuery) -> Route:
        return resolve_route(self.alias_for(query), self._load_config(), user=self.settings.user)

    def _load_config(self) -> paramiko.SSHConfig:
        if self._config is None:
            self._config = load_config(self.settings.config_path)
        return self._config

    # -- connections -----------------------------------------------------------------------

    def _connection(
        self, query: NodeQuery, deadline: float, dialled: threading.Event | None = None
    ) -> tuple[_Connection, list[str]]:
        """The node's connection, made on first use; later callers share it (or its failure).
        ``dialled`` is set once the first hop's TCP connection is made (or failed)."""
        try:
            with self._lock:
                alias = self.alias_for(query)
                node_lock = self._node_locks.setdefault(alias, threading.Lock())
        except UnsafeHostError as exc:
            raise _Failure(Status.UNAVAILABLE, str(exc)) from exc
        except SshConfigError as exc:
            raise _Failure(Status.ERROR, f"ssh_config: {exc}") from exc
        if not alias:
            raise _Failure(
                Status.UNAVAILABLE,
                "the node has no address to connect to (give one with --node-address NODE=HOST)",
            )
        if not node_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise _Failure(Status.TIMEOUT, f"still connecting to {alias} when the time ran out")
        try:
            if alias in self._failures:
                known = self._failures[alias]
                raise _Failure(known.status, known.detail)
            conn = self._connections.get(alias)
            if conn is not None and conn.alive():
                return conn, []
            if conn is not None:
                conn.close()
            try:
                conn = self._connect(self.route_for(query), deadline, dialled)
            except SshConfigError as exc:
                failure = _Failure(Status.ERROR, f"ssh_config: {exc}")
                self._failures[alias] = failure
                raise failure from exc
            except _Failure as failure:
                self._failures[alias] = failure
                raise
            self._connections[alias] = conn
            return conn, conn.notes
        finally:
            node_lock.release()

    def _connect(
        self, route: Route, deadline: float, dialled: threading.Event | None = None
    ) -> _Connection:
        # Dial first: the server starts its side of the session (sshd forks and loads its
        # keys) while paramiko is still being imported here, if it is.
        try:
            sock: Any = self._dial(route.hops[0], route, deadline)
        finally:
            if dialled is not None:
                dialled.set()
        import_paramiko()
        import paramiko

        conn = _Connection(route, [], [])
        try:
            for i, hop in enumerate(route.hops):
                client = self._login(hop, route, sock, deadline, conn.notes)
                conn.clients.append(client)
                with self._lock:
                    self.connections_opened += 1
                if i + 1 < len(route.hops):
                    nxt = route.hops[i + 1]
                    sock = self._tunnel(client, hop, nxt, route, deadline)
            return conn
        except _Failure:
            conn.close()
            _close_quietly(sock)
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            conn.close()
            _close_quietly(sock)
            raise _Failure(*_describe_ssh_error(exc, route)) from exc

    def _timeout(self, hop: Hop, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Failure(Status.TIMEOUT, f"no time left to connect to {hop.label}")
        return min(remaining, hop.connect_timeout or self.settings.connect_timeout)

    def _dial(self, hop: Hop, route: Route, deadline: float) -> socket.socket:
        timeout = self._timeout(hop, deadline)
        via = f" (route {route.describe()})" if route.jumps else ""
        try:
            sock = socket.create_connection((hop.hostname, hop.port), timeout=timeout)
        except TimeoutError as exc:
            raise _Failure(
                Status.TIMEOUT,
                f"connecting to {hop.hostname}:{hop.port} timed out after {timeout:.0f} s{via}",
            ) from exc
        except socket.gaierror as exc:
            raise _Failure(
                Status.UNAVAILABLE, f"cannot resolve {hop.hostname}: {exc.strerror or exc}{via}"
            ) from exc
        except OSError as exc:
            raise _Failure(
                Status.UNAVAILABLE,
                f"cannot reach {hop.hostname}:{hop.port} over SSH: {exc.strerror or exc}{via}",
            ) from exc
        # paramiko leaves Nagle on: each command would wait ~40 ms for delayed ACKs.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _tunnel(
        self, client: paramiko.SSHClient, hop: Hop, nxt: Hop, route: Route, deadline: float
    ) -> paramiko.Channel:
        import paramiko

        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (nxt.hostname, nxt.port),
                ("127.0.0.1", 0),
                timeout=self._timeout(nxt, deadline),
            )
        except paramiko.ChannelException as exc:
            raise _Failure(
                Status.UNAVAILABLE,
                f"jump host {hop.label} could not open a tunnel "
                f"to {nxt.hostname}:{nxt.port}: {exc.text} (route "
                f"{route.describe()})",
            ) from exc

    def _login(
        self, hop: Hop, route: Route, sock: Any, deadline: float, notes: list[str]
    ) -> paramiko.SSHClient:
        import paramiko

        timeout = self._timeout(hop, deadline)
        client = paramiko.SSHClient()
        known = self._known_hosts_files(hop)
        for path in [*known, GLOBAL_KNOWN_HOSTS]:
            if os.path.isfile(path):
                try:
                    client.load_system_host_keys(path)
                except (OSError, paramiko.SSHException) as exc:
                    notes.append(f"could not read known_hosts {path}: {exc}")
        client.set_missing_host_key_policy(
            _host_key_policy(self.settings.accept_new_host_key, known[0], notes)
        )
        keys = [f for f in hop.identity_files if os.path.isfile(f)]
        started = time.monotonic()
        try:
            client.connect(
                hop.hostname,
                hop.port,
                username=hop.user,
                sock=sock,
                key_filename=keys or None,  # type: ignore[arg-type]  # str | list
                look_for_keys=not hop.identity_files,
                allow_agent=True,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                transport_factory=_aead_first_transport(),
            )
        except _HostKeyRefused as exc:
            client.close()
            raise _Failure(Status.ERROR, f"{exc} (connecting to {hop.label})") from exc
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise _Failure(Status.ERROR, _changed_key_message(exc, hop, known[0])) from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            missing = [f for f in hop.identity_files if f not in keys]
            tried = ", ".join(keys) if keys else "default keys in ~/.ssh"
            extra = f"; IdentityFile not found: {', '.join(missing)}" if missing else ""
            raise _Failure(
                Status.FORBIDDEN,
                f"SSH login as {hop.user} on {hop.label} was "
                f"refused ({exc}); tried {tried} and the SSH agent{extra}",
            ) from exc
        except paramiko.SSHException as exc:
            client.close()
            if time.monotonic() - started >= timeout - 0.05:
                # paramiko reports a silent server as "Error reading SSH protocol banner".
                raise _Failure(
                    Status.TIMEOUT,
                    f"SSH to {hop.label} timed out after {timeout:.0f} s in the handshake ({exc})",
                ) from exc
            raise
        except BaseException:
            client.close()
            raise
        return client

    def _known_hosts_files(self, hop: Hop) -> list[str]:
        if self.settings.known_hosts:
            return [os.path.expanduser(self.settings.known_hosts)]
        return list(hop.known_hosts_files) or [os.path.expanduser("~/.ssh/known_hosts")]

    # -- commands --------------------------------------------------------------------------

    def _run(self, conn: _Connection, cmd: NodeCommand, deadline: float) -> RawResult:
        import paramiko

        refusals = 0
        while True:
            if not conn.take_slot(deadline):
                return RawResult(None, b"", b"", timed_out=True)
            try:
                chan = conn.transport.open_session(timeout=deadline - time.monotonic())
            except (paramiko.SSHException, EOFError, OSError) as exc:
                # Past its MaxSessions OpenSSH says "connect failed" (others "prohibited"; a
                # thread whose refusal another thread read sees "Unable to open channel"):
                # while the connection is up and other channels are open, wait for one of
                # them to close and try again.
                refused = isinstance(exc, paramiko.SSHException) and conn.alive()
                if conn.give_slot(refused=refused):
                    continue
                # None open here, but the server may not have freed a channel just closed.
                refusals += 1
                if refused and refusals <= _REFUSAL_RETRIES:
                    time.sleep(min(0.05 * refusals, max(0.0, deadline - time.monotonic())))
                    continue
                return RawResult(None, b"", b"", failure=f"cannot open an SSH session: {exc}")
            break
        try:
            chan.exec_command(cmd.remote(sudo=self.settings.sudo))
            return self._read(chan, cmd.max_bytes + _SLACK, deadline)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            return RawResult(None, b"", b"", failure=f"SSH channel failed: {exc}")
        finally:
            chan.close()
            conn.give_slot()

    def _read(self, chan: paramiko.Channel, limit: int, deadline: float) -> RawResult:
        out: list[bytes] = []
        err: list[bytes] = []
        n_out = n_err = 0
        clipped = False
        while True:
            progressed = False
            while chan.recv_ready():
                data = chan.recv(65536)
                if not data:
                    break
                progressed = True
                if n_out < limit:
                    out.append(data[: limit - n_out])
                n_out += len(data)
            while chan.recv_stderr_ready():
                data = chan.recv_stderr(65536)
                if not data:
                    break
                progressed = True
                if n_err < STDERR_LIMIT:
                    err.append(data[: STDERR_LIMIT - n_err])
                n_err += len(data)
            if n_out > limit:
                clipped = True
                break
            if chan.eof_received and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._count(n_out + n_err)
                return RawResult(None, b"".join(out), b"".join(err), timed_out=True)
            if not progressed:
                select.select([chan], [], [], min(remaining, 0.5))
        status: int | None = None
        if not clipped and chan.status_event.wait(max(0.0, deadline - time.monotonic())):
            status = chan.recv_exit_status()
        self._count(n_out + n_err)
        return RawResult(status, b"".join(out), b"".join(err), clipped=clipped)

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_received += n


class _HostKeyRefused(Exception):
    pass


#: Ciphers asked for first: AES-GCM authenticates as it decrypts, in the compiled
#: ``cryptography`` code, where the other ciphers' MAC is checked byte by byte in Python
#: (paramiko's constant-time compare: the largest CPU cost of reading a node's output).
#: The server still chooses among everything both sides support.
AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


@functools.cache
def _aead_first_transport() -> Any:  # a paramiko.Transport subclass (stubs differ)
    import paramiko

    known: tuple[str, ...] = getattr(paramiko.Transport, "_preferred_ciphers", ())
    order = (
        *(c for c in AEAD_CIPHERS if c in known),
        *(c for c in known if c not in AEAD_CIPHERS),
    )
    return type("Transport", (paramiko.Transport,), {"_preferred_ciphers": order})


def _host_key_policy(accept_new: bool, save_to: str, notes: list[str]) -> Any:
    """A MissingHostKeyPolicy: refuse unknown keys, or accept and save them (accept-new).

    paramiko asks the policy only about hosts with NO known key; a known host that offers a
    different key raises ``BadHostKeyException`` before any policy is consulted.
    """
    import paramiko

    class Policy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(
            self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
        ) -> None:
            if not accept_new:
                raise _HostKeyRefused(
                    f"host key of {hostname} is not in known_hosts ({save_to}): the server "
                    f"offered {fingerprint(key)}. Check it out of band (ssh-keyscan, your "
                    "inventory), then add it or rerun with --accept-new-host-key"
                )
            line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
            try:
                os.makedirs(os.path.dirname(save_to) or ".", mode=0o700, exist_ok=True)
                with open(save_to, "a", encoding="ascii") as fh:
                    fh.write(line)
                saved = f"saved to {save_to}"
            except OSError as exc:
                saved = f"could not save it to {save_to}: {exc.strerror or exc}"
            notes.append(f"accepted new host key of {hostname}: {fingerprint(key)} ({saved})")

    return Policy()


def _changed_key_message(exc: paramiko.BadHostKeyException, hop: Hop, known: str) -> str:
    name = hop.hostname if hop.port == 22 else f"[{hop.hostname}]:{hop.port}"
    return (
        f"host key of {name} CHANGED: known_hosts has {fingerprint(exc.expected_key)} but "
        f"the server offered {fingerprint(exc.key)}. This can be a man-in-the-middle or a "
        f"reinstalled node; gputriage refuses it even with --accept-new-host-key. If the "
        f"change is expected: ssh-keygen -R '{name}' -f {known}"
    )


def _describe_ssh_error(exc: BaseException, route: Route) -> tuple[Status, str]:
    text = str(exc) or type(exc).__name__
    where = f"SSH to {route.describe()}"
    if isinstance(exc, TimeoutError) or "timed out" in text.lower():
        return Status.TIMEOUT, f"{where} timed out: {text}"
    if isinstance(exc, EOFError) or "banner" in text.lower():
        return (
            Status.ERROR,
            f"{where}: the server closed the connection during the handshake ({text})",
        )
    return Status.ERROR, f"{where} failed: {text}"


def _close_quietly(sock: Any) -> None:
    if sock is not None:
        with contextlib.suppress(Exception):  # already closed or half-open
            sock.close()
