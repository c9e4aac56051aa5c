"""A lean HTTPS transport for the common kubeconfig: a bearer token or a client certificate.

Importing the official ``kubernetes`` client costs 0.2-0.4 s of a fresh process on the
project's 2-core machine (its config loader pulls in requests, oauthlib, google-auth hooks and
urllib3), while gputriage only sends a few GETs. When the kubeconfig's user has a ``token``,
``tokenFile`` or a client certificate and nothing else, :func:`lean_config` reads it itself
(kubectl's merge rules for ``KUBECONFIG`` with several files) and :class:`LeanTransport` speaks
HTTPS with the standard library: ``http.client`` and ``ssl``, a small pool of keep-alive
connections, a timeout per request, one retry for a pooled connection the server dropped.

Everything else goes to the official client, chosen automatically by returning ``None``:
exec plugins, OIDC and other auth providers, basic auth, impersonation, ``proxy-url`` or a
proxy in the environment, ``tls-server-name``, in-cluster service accounts, and any key this
module does not know. Errors keep their meaning: a transport failure raises the same
exceptions the official path's ``describe_exception`` already reads (``TimeoutError``,
``ConnectionRefusedError``, ``ssl.SSLCertVerificationError``), and HTTP statuses (404, 403
with the API's Status message) come back as they are.
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

if TYPE_CHECKING:
    from gputriage.evidence.kube_client import KubeConfig

#: Keys of a kubeconfig ``user`` the lean path understands; any other sends it to the
#: official client (exec, auth-provider, username/password, as, as-groups...).
USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "extensions",
    }
)
#: Keys of a kubeconfig ``cluster`` the lean path understands (not proxy-url, tls-server-name).
CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "extensions",
        "disable-compression",
    }
)
#: A proxy in the environment is honoured by the official client: leave it to it.
PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
#: Idle keep-alive connections kept per client (the broker runs ~20 GETs at once).
POOL_SIZE = 32


@dataclass(frozen=True)
class LeanAuth:
    """What the lean transport needs from a kubeconfig context."""

    server: str  # https://host:port[/prefix]
    token: str = ""
    ca_pem: str = ""  # PEM text; "" for the system's trust store
    insecure: bool = False
    cert_pem: bytes = b""
    key_pem: bytes = b""

    def __repr__(self) -> str:  # never print the token or the key
        return f"LeanAuth(server={self.server!r})"


def lean_config(paths: Sequence[str], context: str | None) -> KubeConfig | None:
    """The context of the merged kubeconfig ``paths`` when the lean path can serve it."""
    if any(os.environ.get(name) for name in PROXY_ENV):
        return None
    docs = [_read(p) for p in paths]
    if any(d is None for d in docs):
        return None
    chosen = context or next(
        (str(d.get("current-context")) for d in docs if d and d.get("current-context")), ""
    )
    ctx_entry = _first(docs, paths, "contexts", chosen)
    if not chosen or ctx_entry is None:
        return None  # the official loader words the problem (close names, available ones)
    ctx, _ = ctx_entry
    cluster_entry = _first(docs, paths, "clusters", str(ctx.get("cluster") or ""))
    user_entry = _first(docs, paths, "users", str(ctx.get("user") or ""))
    if cluster_entry is None or user_entry is None:
        return None
    auth = _auth(cluster_entry, user_entry)
    if auth is None:
        return None
    from gputriage.evidence.kube_client import KubeConfig

    namespace = str(ctx.get("namespace") or "")
    return KubeConfig(chosen, namespace, auth.server, auth)


def _read(path: str) -> dict[str, Any] | None:
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else ({} if data is None else None)


def _first(
    docs: Sequence[dict[str, Any] | None], paths: Sequence[str], section: str, name: str
) -> tuple[dict[str, Any], str] | None:
    """The first entry named ``name`` across the files (kubectl: the first file wins), with
    the folder its relative paths are relative to."""
    body = section[:-1]  # "contexts" -> "context"
    for doc, path in zip(docs, paths, strict=True):
        for entry in (doc or {}).get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                value = entry.get(body)
                if not isinstance(value, dict):
                    return None
                return value, os.path.dirname(os.path.abspath(path))
    return None


def _auth(
    cluster_entry: tuple[dict[str, Any], str], user_entry: tuple[dict[str, Any], str]
) -> LeanAuth | None:
    cluster, cluster_dir = cluster_entry
    user, user_dir = user_entry
    if set(cluster) - CLUSTER_KEYS or set(user) - USER_KEYS:
        return None
    server = str(cluster.get("server") or "")
    if urlsplit(server).scheme != "https" or not urlsplit(server).hostname:
        return None
    try:
        ca_pem = _text(cluster, "certificate-authority", cluster_dir)
        token = user.get("token") or ""
        if not token and user.get("tokenFile"):
            token = _file(str(user["tokenFile"]), user_dir).decode().strip()
        cert = _blob(user, "client-certificate", user_dir)
        key = _blob(user, "client-key", user_dir)
    except (OSError, ValueError):
        return None  # the official loader says what is wrong with the file
    if not isinstance(token, str) or bool(cert) != bool(key) or not (token or cert):
        return None
    insecure = cluster.get("insecure-skip-tls-verify") is True
    return LeanAuth(server.rstrip("/"), token, ca_pem, insecure, cert, key)


def _file(path: str, folder: str) -> bytes:
    with open(os.path.join(folder, os.path.expanduser(path)), "rb") as fh:
        return fh.read()


def _blob(entry: Mapping[str, Any], key: str, folder: str) -> bytes:
    """``key-data`` (base64) or the file ``key`` names (relative to its kubeconfig)."""
    data = entry.get(f"{key}-data")
    if data:
        return base64.b64decode(str(data), validate=False)
    path = entry.get(key)
    return _file(str(path), folder) if path else b""


def _text(entry: Mapping[str, Any], key: str, folder: str) -> str:
    return _blob(entry, key, folder).decode("ascii", errors="strict")


class LeanResponse:
    """An answer whose body is read by the caller, as urllib3's: ``status``, ``read``,
    ``read1``, ``connection`` (its ``sock`` can be shut down to wake a blocked reader),
    ``release_conn`` (the connection goes back to the pool) and ``close`` (it does not)."""

    def __init__(
        self,
        transport: LeanTransport,
        conn: http.client.HTTPSConnection,
        response: http.client.HTTPResponse,
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._response = response
        self.connection = conn
        self.status = response.status
        self.headers = response.headers

    def read(self, amt: int | None = None) -> bytes:
        return self._response.read(amt)

    def read1(self, amt: int = -1) -> bytes:
        return self._response.read1(amt)

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self._response.getheader(name, default)

    def release_conn(self) -> None:
        if self._response.isclosed() and not self._response.will_close:
            self._transport.release(self._conn)
        else:
            self.close()

    def close(self) -> None:
        self._response.close()
        self._conn.close()


class LeanTransport:
    """GETs over HTTPS with the standard library; safe to use from many threads."""

    def __init__(self, auth: LeanAuth, user_agent: str) -> None:
        parts = urlsplit(auth.server)
        self.host = parts.hostname or ""
        self.port = parts.port or 443
        self.prefix = parts.path.rstrip("/")
        self._context = self._tls(auth)
        self._headers = {"Accept": "application/json, */*", "User-Agent": user_agent}
        if auth.token:
            self._headers["Authorization"] = f"Bearer {auth.token}"
        self._idle: list[http.client.HTTPSConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def _tls(auth: LeanAuth) -> ssl.SSLContext:
        # Without a certificate-authority, the system's trust store (as the official client).
        context = ssl.create_default_context(cadata=auth.ca_pem or None)
        if auth.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if auth.cert_pem:
            # ssl loads a client certificate from files only: a private folder, gone at once.
            import tempfile  # client certificates only

            with tempfile.TemporaryDirectory(prefix="gputriage-tls-") as tmp:
                cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
                for path, data in ((cert, auth.cert_pem), (key, auth.key_pem)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                context.load_cert_chain(cert, key)
        return context

    def url(self, path: str, params: Sequence[tuple[str, str]]) -> str:
        query = urlencode(list(params), quote_via=quote) if params else ""
        return self.prefix + quote(path) + (f"?{query}" if query else "")

    def get(self, path: str, params: Sequence[tuple[str, str]], timeout: float) -> LeanResponse:
        """Send one GET; raises the transport's exceptions (the caller words them)."""
        target = self.url(path, params)
        conn, reused = self._take(timeout)
        try:
            return self._send(conn, target, timeout)
        except (
            http.client.RemoteDisconnected,
            ConnectionResetError,
            BrokenPipeError,
            http.client.CannotSendRequest,
            http.client.BadStatusLine,
        ):
            conn.close()
            if not reused:
                raise
        # The server closed an idle keep-alive connection: once more on a new one.
        return self._send(self._new(timeout), target, timeout)

    def _send(self, conn: http.client.HTTPSConnection, target: str, timeout: float) -> LeanResponse:
        try:
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.request("GET", target, headers=self._headers)
            return LeanResponse(self, conn, conn.getresponse())
        except BaseException:
            conn.close()
            raise

    def _take(self, timeout: float) -> tuple[http.client.HTTPSConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(timeout), False

    def _new(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=timeout, context=self._context
        )

    def release(self, conn: http.client.HTTPSConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < POOL_SIZE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
