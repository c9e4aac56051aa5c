"""An HTTPS Kubernetes API server for tests, faithful on the read paths.

What it does like kube-apiserver: TLS with a CA that a generated kubeconfig carries as
``certificate-authority-data``; bearer tokens (401 ``Status`` without or with a wrong one);
per-user RBAC rules in ClusterRole form, answering 403 ``Status`` objects worded like the real
authorizer; ``/version`` and discovery documents kubectl accepts; GET and list of the resources
in :mod:`tests.kubeapi.resources` with real field/label selectors and ``limit``/``continue``
pagination; pod logs (``container``, ``previous``, ``tailLines``, ``limitBytes``) and the node
log query (``/api/v1/nodes/N/proxy/logs/?query=kubelet``); 404 ``Status`` for missing objects.

Test helpers: injected latency per path, a request log (method, path, query, user, status), and
405 for any method but GET, recorded so a suite can prove it never wrote (:data:`ALL_REQUESTS`).
Each response is one ``sendall`` on a ``TCP_NODELAY`` socket (no Nagle/delayed-ACK stalls).
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import ipaddress
import json
import re
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.kubeapi.cluster import Cluster, Obj
from tests.kubeapi.resources import Resource
from tests.kubeapi.selectors import SelectorError, field_predicate, label_predicate

PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})


@dataclass(frozen=True)
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: Mapping[str, tuple[str, ...]]
    user: str
    status: int
    agent: str = ""  # the User-Agent header ("gputriage/0.1.0", "kubectl/v1.32.4 ...")

    def param(self, name: str) -> str:
        values = self.query.get(name, ())
        return values[0] if values else ""


#: Every request any test server saw in this process (only the log, never the cluster).
ALL_REQUESTS: list[Request] = []
_ALL_LOCK = threading.Lock()


@dataclass(frozen=True)
class User:
    """An authenticated identity. ``rules`` are ClusterRole rules (None: cluster-admin);
    ``namespaces`` limits them to those namespaces, as a RoleBinding would."""

    name: str
    rules: tuple[Mapping[str, Any], ...] | None = None
    namespaces: frozenset[str] | None = None

    def allows(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        if self.rules is None:
            return True
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        for rule in self.rules:
            if (
                _matches(rule.get("verbs"), verb)
                and _matches(rule.get("apiGroups"), group)
                and _matches(rule.get("resources"), resource)
                and (not rule.get("resourceNames") or name in rule["resourceNames"])
            ):
                return True
        return False


def _matches(allowed: Any, value: str) -> bool:
    return isinstance(allowed, list) and ("*" in allowed or value in allowed)


@dataclass(frozen=True)
class KubeContext:
    """A kubeconfig context: a token (default: the admin's) or an exec credential plugin."""

    name: str
    token: str = ""
    namespace: str = ""
    exec_command: Sequence[str] = ()


@dataclass(frozen=True)
class _Reply:
    code: int
    body: bytes
    content_type: str = "application/json"
    endless: bool = False  # chunked: ``body`` first, then a chunk every 50 ms, forever
    #: For a watch: yields each event line (JSON + newline); sent chunked as it comes.
    stream: Callable[[], Iterator[bytes]] | None = None


@dataclass
class _Attrs:
    """What a resource request asks for, in the authorizer's terms."""

    verb: str
    resource: Resource
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    rest: list[str] = field(default_factory=list)

    @property
    def rbac_resource(self) -> str:
        return (
            f"{self.resource.plural}/{self.subresource}"
            if self.subresource
            else self.resource.plural
        )

    @property
    def group_resource(self) -> str:
        r = self.resource
        return f"{r.plural}.{r.group}" if r.group else r.plural


class KubeAPI:
    """The server. Use as a context manager or call :meth:`start` / :meth:`stop`.

    ``global_log=False`` keeps its requests out of :data:`ALL_REQUESTS`, for a test that
    sends a write on purpose. ``own_ca=True`` gives it a CA no other server shares."""

    def __init__(
        self, cluster: Cluster | None = None, *, global_log: bool = True, own_ca: bool = False
    ) -> None:
        self.cluster = cluster or Cluster()
        self._global_log = global_log
        self.token = "admin-token-0123456789"
        self._users: dict[str, User] = {self.token: User("kubernetes-admin")}
        self._delays: list[tuple[re.Pattern[str], float]] = []
        self._expire_continue = 0
        self._faults: list[tuple[re.Pattern[str], _Reply]] = []
        self._endless_pages: list[re.Pattern[str]] = []
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.ca_pem, cert_pem, key_pem = _new_certificates() if own_ca else _certificates()
        self._tmp = tempfile.TemporaryDirectory(prefix="kubeapi-")
        cert_file = Path(self._tmp.name, "tls.crt")
        key_file = Path(self._tmp.name, "tls.key")
        cert_file.write_bytes(cert_pem + self.ca_pem)
        key_file.write_bytes(key_pem)
        self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ssl.load_cert_chain(cert_file, key_file)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeAPI:
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="kubeapi",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._tmp.cleanup()

    def __enter__(self) -> KubeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- test controls ---------------------------------------------------------------------

    def add_user(
        self,
        name: str,
        *,
        token: str = "",
        rules: Sequence[Mapping[str, Any]] | None = None,
        namespaces: Sequence[str] | None = None,
    ) -> str:
        """Register a user; returns its bearer token."""
        token = token or f"{name}-token-{len(self._users)}"
        self._users[token] = User(
            name,
            None if rules is None else tuple(rules),
            None if namespaces is None else frozenset(namespaces),
        )
        return token

    def delay(self, path_regex: str, seconds: float) -> None:
        """Answer requests whose path matches ``path_regex`` (re.search) after ``seconds``."""
        self._delays.append((re.compile(path_regex), seconds))

    def fail(
        self, path_regex: str, code: int, body: str | bytes, content_type: str = "application/json"
    ) -> None:
        """Answer authenticated GETs of matching paths with this reply (500s, garbage...)."""
        raw = body.encode() if isinstance(body, str) else body
        self._faults.append((re.compile(path_regex), _Reply(code, raw, content_type)))

    # -- hostile modes (tests/hostile) -------------------------------------------------------

    def endless_pagination(self, path_regex: str) -> None:
        """Lists whose ``[namespaces/NS/]PLURAL`` matches always say there is another page (a
        fresh continue token each time, the same items): a client that trusts
        ``metadata.continue`` never ends."""
        self._endless_pages.append(re.compile(path_regex))

    def endless_body(self, path_regex: str, head: bytes = b'{"kind":"PodList","items":[') -> None:
        """Answer matching paths 200 with a chunked body that never ends: ``head``, then a
        small chunk every 50 ms until the client goes away or the server stops."""
        self._faults.append((re.compile(path_regex), _Reply(200, head, endless=True)))

    def huge_list(
        self, path_regex: str, size: int, kind: str = "EventList", continue_token: str = ""
    ) -> int:
        """Answer matching paths with a valid list of about ``size`` bytes (saying there is a
        next page when ``continue_token``); returns its size."""
        item = {"metadata": {"name": "x"}, "message": "m" * 1000}
        count = max(1, size // (len(json.dumps(item)) + 1))
        meta = {"continue": continue_token} if continue_token else {}
        body = json.dumps(
            {"kind": kind, "apiVersion": "v1", "metadata": meta, "items": [item] * count}
        ).encode()
        self._faults.append((re.compile(path_regex), _Reply(200, body)))
        return len(body)

    def expire_continue_tokens(self, count: int = 1) -> None:
        """Answer the next ``count`` continued lists with 410 Expired, as etcd compaction does."""
        self._expire_continue = count

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def mutations(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    def write_kubeconfig(
        self, path: str | Path, contexts: Sequence[KubeContext] = (), current: str = ""
    ) -> Path:
        """A kubeconfig for this server (JSON, which is valid YAML for every client)."""
        ctxs = list(contexts) or [KubeContext("test", namespace="ml")]
        users = []
        for c in ctxs:
            user: dict[str, Any]
            if c.exec_command:
                user = {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": c.exec_command[0],
                        "args": list(c.exec_command[1:]),
                        "interactiveMode": "Never",
                    }
                }
            else:
                user = {"token": c.token or self.token}
            users.append({"name": f"{c.name}-user", "user": user})
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {
                    "name": "test-cluster",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
                    },
                }
            ],
            "users": users,
            "contexts": [
                {
                    "name": c.name,
                    "context": {
                        "cluster": "test-cluster",
                        "user": f"{c.name}-user",
                        **({"namespace": c.namespace} if c.namespace else {}),
                    },
                }
                for c in ctxs
            ],
            "current-context": current or ctxs[0].name,
        }
        out = Path(path)
        out.write_text(json.dumps(config, indent=2))
        return out

    # -- request handling (called from handler threads) ------------------------------------

    def _record(self, req: Request) -> None:
        with self._lock:
            self._requests.append(req)
        if self._global_log:
            with _ALL_LOCK:
                ALL_REQUESTS.append(req)

    def _wait(self, path: str) -> None:
        for pattern, seconds in self._delays:
            if pattern.search(path):
                self._stop.wait(seconds)

    def handle(self, method: str, target: str, headers: Message) -> tuple[_Reply, str]:
        split = urlsplit(target)
        path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        user = self._authenticate(headers.get("Authorization", ""))
        if method != "GET":
            reply = _status(
                405,
                "MethodNotAllowed",
                f"the test API is read-only: {method} {path} is not allowed",
            )
        elif user is None and path not in PUBLIC_PATHS:
            reply = _status(401, "Unauthorized", "Unauthorized")
        else:
            self._wait(path)
            fault = next((r for rx, r in self._faults if rx.search(path)), None)
            try:
                reply = fault or self._route(path, query, user or User("system:anonymous"))
            except (SelectorError, ValueError) as exc:
                reply = _status(400, "BadRequest", str(exc))
        self._record(
            Request(
                method,
                path,
                {k: tuple(v) for k, v in query.items()},
                user.name if user else "",
                reply.code,
                headers.get("User-Agent", ""),
            )
        )
        return reply, path

    def _authenticate(self, header: str) -> User | None:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer":  # the apiserver compares the scheme case-insensitively
            return None
        return self._users.get(token.strip())

    def _route(self, path: str, query: Mapping[str, list[str]], user: User) -> _Reply:
        # Split first, then percent-decode each segment (as kube-apiserver does): a name may
        # hold an encoded "/" or any other character a client had to escape.
        parts = [unquote(p) for p in path.split("/") if p]
        if path in ("/healthz", "/livez", "/readyz"):
            return _Reply(200, b"ok", "text/plain; charset=utf-8")
        if path == "/version":
            return _json(200, self._version())
        if parts[:1] == ["api"]:
            if len(parts) == 1:
                return _json(
                    200,
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                        ],
                    },
                )
            if parts[1] != "v1":
                return _not_found_path()
            if len(parts) == 2:
                return _json(200, self._resource_list("", "v1"))
            return self._resource_request("", "v1", parts[2:], query, user)
        if parts[:1] == ["apis"]:
            if len(parts) == 1:
                return _json(
                    200,
                    {
                        "kind": "APIGroupList",
                        "apiVersion": "v1",
                        "groups": [self._group(g) for g in self._groups()],
                    },
                )
            group = parts[1]
            if group not in self._groups():
                return _not_found_path()
            if len(parts) == 2:
                return _json(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)})
            version = parts[2]
            if version != self._groups()[group]:
                return _not_found_path()
            if len(parts) == 3:
                return _json(200, self._resource_list(group, version))
            return self._resource_request(group, version, parts[3:], query, user)
        return _not_found_path()

    def _version(self) -> Obj:
        v = self.cluster.kube_version
        major, minor = v.lstrip("v").split(".")[:2]
        return {
            "major": major,
            "minor": minor,
            "gitVersion": v,
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2025-04-22T16:03:06Z",
            "goVersion": "go1.23.6",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def _groups(self) -> dict[str, str]:
        groups: dict[str, str] = {}
        for r in self.cluster.resources:
            if r.group:
                groups.setdefault(r.group, r.version)
        return groups

    def _group(self, name: str) -> Obj:
        version = self._groups()[name]
        gv = {"groupVersion": f"{name}/{version}", "version": version}
        return {"name": name, "versions": [gv], "preferredVersion": gv}

    def _resource_list(self, group: str, version: str) -> Obj:
        resources = [
            entry
            for r in self.cluster.resources
            if r.group == group and r.version == version
            for entry in r.discovery()
        ]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _resource_request(
        self, group: str, version: str, parts: list[str], query: Mapping[str, list[str]], user: User
    ) -> _Reply:
        attrs = self._attributes(group, parts, query)
        if attrs is None:
            return _not_found_path()
        r = attrs.resource
        if not user.allows(attrs.verb, r.group, attrs.rbac_resource, attrs.namespace, attrs.name):
            return _forbidden(user.name, attrs)
        if attrs.verb == "watch":
            return self._watch(attrs, query)
        if attrs.subresource == "log" and r.plural == "pods":
            return self._pod_log(attrs, query)
        if attrs.subresource == "proxy" and r.plural == "nodes":
            return self._node_proxy(attrs, query)
        if attrs.subresource == "proxy" and r.plural == "services":
            return self._service_proxy(attrs, query)
        if attrs.subresource:
            return _not_found_path()
        if attrs.name:
            obj = self.cluster.get(r.group, r.plural, attrs.namespace, attrs.name)
            if obj is None:
                return _not_found(attrs)
            return _json(200, {**obj, "apiVersion": r.group_version, "kind": r.kind})
        return self._list(attrs, query)

    def _attributes(
        self, group: str, parts: list[str], query: Mapping[str, list[str]]
    ) -> _Attrs | None:
        namespace = ""
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        r = self.cluster.resource(group, parts[0])
        if r is None or (namespace and not r.namespaced):
            return None
        name = parts[1] if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        if sub and sub not in r.subresources:
            return None
        if name:
            verb = "get"
        else:
            verb = "watch" if query.get("watch", [""])[0] in ("true", "1") else "list"
        return _Attrs(verb, r, namespace, name, sub, parts[3:])

    def _list(self, attrs: _Attrs, query: Mapping[str, list[str]]) -> _Reply:
        r = attrs.resource
        fs = query.get("fieldSelector", [""])[0]
        ls = query.get("labelSelector", [""])[0]
        preds: list[Callable[[Mapping[str, Any]], bool]] = []
        if fs:
            try:
                preds.append(field_predicate(fs, r.plural))
            except SelectorError as exc:
                return _status(
                    400,
                    "BadRequest",
                    f'Unable to find "{r.group}/{r.version}, Resource={r.plural}" '
                    f'that match label selector "{ls}", field selector "{fs}": {exc}',
                )
        if ls:
            preds.append(label_predicate(ls))
        try:
            limit = int(query.get("limit", ["0"])[0] or 0)
        except ValueError:
            return _status(400, "BadRequest", "limit must be an integer")
        keys = self.cluster.keys(r.group, r.plural)
        lo, hi = 0, len(keys)
        if attrs.namespace:
            lo = bisect.bisect_left(keys, (attrs.namespace, ""))
            hi = bisect.bisect_left(keys, (attrs.namespace + "\x00", ""))
        token = query.get("continue", [""])[0]
        if token and self._expire_continue > 0:
            self._expire_continue -= 1
            return _status(
                410,
                "Expired",
                "The provided continue parameter is too old to "
                "display a consistent list result. You can start a "
                "new list without the continue parameter.",
            )
        if token:
            try:
                lo = max(lo, int(json.loads(base64.urlsafe_b64decode(token))["start"]))
            except (ValueError, KeyError, TypeError):
                return _status(400, "BadRequest", "continue key is not valid")
        store = self.cluster.objects.get((r.group, r.plural), {})
        items: list[Obj] = []
        i = lo
        while i < hi:
            obj = store[keys[i]]
            i += 1
            if all(p(obj) for p in preds):
                items.append({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
                if limit and len(items) >= limit:
                    break
        meta: Obj = {"resourceVersion": self.cluster.resource_version}
        where = (f"namespaces/{attrs.namespace}/" if attrs.namespace else "") + r.plural
        if any(rx.search(where) for rx in self._endless_pages):
            i = lo  # the same page again, under a new token
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps(
                    {"rv": self.cluster.resource_version, "start": lo, "n": len(self._requests)}
                ).encode()
            ).decode()
        elif limit and i < hi:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": self.cluster.resource_version, "start": i}).encode()
            ).decode()
            if not preds:
                meta["remainingItemCount"] = hi - i
        return _json(
            200,
            {"kind": r.list_kind, "apiVersion": r.group_version, "metadata": meta, "items": items},
        )

    def _watch(self, attrs: _Attrs, query: Mapping[str, list[str]]) -> _Reply:
        """A watch (GET ...?watch=true): ADDED for what exists when no resourceVersion is
        given, then every change after it, one JSON event per line, until
        ``timeoutSeconds`` (capped at 60 s) or the server stops."""
        r = attrs.resource
        fs = query.get("fieldSelector", [""])[0]
        ls = query.get("labelSelector", [""])[0]
        preds: list[Callable[[Mapping[str, Any]], bool]] = []
        if fs:
            preds.append(field_predicate(fs, r.plural))
        if ls:
            preds.append(label_predicate(ls))
        try:
            timeout = min(60.0, float(query.get("timeoutSeconds", ["60"])[0] or 60))
            since = int(query.get("resourceVersion", ["0"])[0] or 0)
        except ValueError:
            return _status(400, "BadRequest", "timeoutSeconds and resourceVersion are numbers")
        cluster = self.cluster
        stopped = self._stop

        def matches(obj: Mapping[str, Any]) -> bool:
            ns = obj.get("metadata", {}).get("namespace", "")
            return (not attrs.namespace or ns == attrs.namespace) and all(p(obj) for p in preds)

        def line(kind: str, obj: Mapping[str, Any]) -> bytes:
            shown = {**obj, "apiVersion": r.group_version, "kind": r.kind}
            return json.dumps({"type": kind, "object": shown}).encode() + b"\n"

        def events() -> Iterator[bytes]:
            deadline = time.monotonic() + timeout
            with cluster.changed:
                start = since
                if not since:  # no resourceVersion: the current state first, as ADDED
                    start = int(cluster.resource_version)
                    current = [
                        o
                        for o in cluster.objects.get((r.group, r.plural), {}).values()
                        if matches(o)
                    ]
                else:
                    current = []
            for obj in current:
                yield line("ADDED", obj)
            seen = start
            while time.monotonic() < deadline and not stopped.is_set():
                with cluster.changed:
                    fresh = [c for c in cluster.changes if c[0] > seen]
                    if not fresh:
                        cluster.changed.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                        continue
                for rv, kind, group, plural, obj in fresh:
                    seen = rv
                    if (group, plural) == (r.group, r.plural) and matches(obj):
                        yield line(kind, obj)

        return _Reply(200, b"", "application/json", stream=events)

    def _pod_log(self, attrs: _Attrs, query: Mapping[str, list[str]]) -> _Reply:
        pod = self.cluster.get("", "pods", attrs.namespace, attrs.name)
        if pod is None:
            return _not_found(attrs)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        inits = [c["name"] for c in pod["spec"].get("initContainers", [])]
        name = query.get("container", [""])[0]
        if not name:
            if len(containers) != 1:
                msg = (
                    f"a container name must be specified for pod {attrs.name}, choose one "
                    f"of: [{' '.join(containers)}]"
                )
                if inits:
                    msg += f" or one of the init containers: [{' '.join(inits)}]"
                return _status(400, "BadRequest", msg)
            name = containers[0]
        if name not in containers + inits:
            return _status(400, "BadRequest", f"container {name} is not valid for pod {attrs.name}")
        previous = query.get("previous", ["false"])[0] in ("true", "1")
        text = self.cluster.logs.get((attrs.namespace, attrs.name, name, previous))
        if text is None:
            if previous:
                return _status(
                    400,
                    "BadRequest",
                    f'previous terminated container "{name}" in pod "{attrs.name}" not found',
                )
            statuses = pod.get("status", {}).get("containerStatuses", []) + pod.get(
                "status", {}
            ).get("initContainerStatuses", [])
            st = next((s for s in statuses if s.get("name") == name), None)
            waiting = (st or {}).get("state", {}).get("waiting")
            if st is None or (waiting and not st.get("restartCount")):
                reason = (waiting or {}).get("reason", "ContainerCreating")
                return _status(
                    400,
                    "BadRequest",
                    f'container "{name}" in pod "{attrs.name}" is waiting to start: {reason}',
                )
            text = ""
        return _Reply(200, _tail(text, query).encode(), "text/plain")

    def _service_proxy(self, attrs: _Attrs, query: Mapping[str, list[str]]) -> _Reply:
        """GET forwarded to a registered upstream on 127.0.0.1 (a real Prometheus in tests)."""
        import urllib.error
        import urllib.parse
        import urllib.request

        upstream = self.cluster.service_upstreams.get((attrs.namespace, attrs.name))
        if upstream is None:
            return _status(
                503, "ServiceUnavailable", f'no endpoints available for service "{attrs.name}"'
            )
        url = f"{upstream}/{'/'.join(attrs.rest)}?{urllib.parse.urlencode(query, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return _Reply(r.status, r.read(), r.headers.get_content_type())
        except urllib.error.HTTPError as exc:
            return _Reply(exc.code, exc.read(), "application/json")

    def _node_proxy(self, attrs: _Attrs, query: Mapping[str, list[str]]) -> _Reply:
        if self.cluster.get("", "nodes", "", attrs.name) is None:
            return _not_found(attrs)
        if [p for p in attrs.rest if p] != ["logs"]:
            return _not_found_path()
        services = query.get("query", [])
        if not services:
            return _Reply(400, b"query parameter is required", "text/plain")
        chunks = []
        for service in services:
            text = self.cluster.node_logs.get((attrs.name, service))
            if text is None:
                return _Reply(404, f"no journal for {service!r}".encode(), "text/plain")
            chunks.append(text)
        text = "".join(chunks)
        pattern = query.get("pattern", [""])[0]
        if pattern:
            rx = re.compile(pattern)
            text = "".join(line for line in text.splitlines(keepends=True) if rx.search(line))
        return _Reply(200, _tail(text, query).encode(), "text/plain")


def _tail(text: str, query: Mapping[str, list[str]]) -> str:
    tail = query.get("tailLines", [""])[0]
    if tail:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-int(tail) :]) if int(tail) > 0 else ""
    limit = query.get("limitBytes", [""])[0]
    if limit:
        text = text.encode()[: int(limit)].decode("utf-8", errors="ignore")
    return text


def _json(code: int, obj: Any) -> _Reply:
    return _Reply(code, json.dumps(obj).encode())


def _status(code: int, reason: str, message: str, details: Obj | None = None) -> _Reply:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return _json(code, body)


def _details(attrs: _Attrs) -> Obj:
    d: Obj = {"kind": attrs.resource.plural}
    if attrs.name:
        d["name"] = attrs.name
    if attrs.resource.group:
        d["group"] = attrs.resource.group
    return d


def _not_found(attrs: _Attrs) -> _Reply:
    return _status(
        404, "NotFound", f'{attrs.group_resource} "{attrs.name}" not found', _details(attrs)
    )


def _not_found_path() -> _Reply:
    return _status(
        404,
        "NotFound",
        "the server could not find the requested resource",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
    )


def _forbidden(user: str, attrs: _Attrs) -> _Reply:
    subject = f'{attrs.group_resource} "{attrs.name}"' if attrs.name else attrs.group_resource
    scope = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {attrs.verb} resource '
        f'"{attrs.rbac_resource}" in API group "{attrs.resource.group}"{scope}'
    )
    return _status(403, "Forbidden", message, _details(attrs))


# -- HTTP plumbing ---------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog is 5: a client opening ~20 connections at once (as
    # gputriage's collection does) would see SYNs dropped and wait a 1 s retransmit. A real
    # API server listens with the kernel's somaxconn.
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], api: KubeAPI
    ) -> None:
        self.api = api
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wrapped = self.api._ssl.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops the connection or rejects the certificate is not our error."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        self.request.settimeout(30)
        self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is the record."""

    def _serve(self) -> None:
        reply, _ = self.server.api.handle(self.command, self.path, self.headers)
        if self.command != "GET":
            self.close_connection = True
        date = dt.datetime.now(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
        if reply.stream is not None:  # a watch: chunked, one event per chunk, as it happens
            self.wfile.write(
                (
                    f"HTTP/1.1 {reply.code} {HTTPStatus(reply.code).phrase}\r\n"
                    f"Content-Type: {reply.content_type}\r\n"
                    "Transfer-Encoding: chunked\r\n"
                    f"Cache-Control: no-cache, private\r\nDate: {date}\r\n\r\n"
                ).encode()
            )
            try:
                for chunk in reply.stream():
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True
            return
        head = (
            f"HTTP/1.1 {reply.code} {HTTPStatus(reply.code).phrase}\r\n"
            f"Content-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(reply.body)}\r\n"
            f"Cache-Control: no-cache, private\r\nDate: {date}\r\n"
        )
        if reply.endless:
            self._endless(reply)
            return
        if self.close_connection:
            head += "Connection: close\r\n"
        self.wfile.write(head.encode() + b"\r\n" + reply.body)

    def _endless(self, reply: _Reply) -> None:
        self.close_connection = True
        head = (
            f"HTTP/1.1 {reply.code} {HTTPStatus(reply.code).phrase}\r\n"
            f"Content-Type: {reply.content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = reply.body
        try:
            self.wfile.write(head.encode())
            while not self.server.api._stop.is_set():
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                chunk = b'{"metadata":{"name":"x"}},'
                self.server.api._stop.wait(0.05)
        except OSError:
            return  # the client went away: what a bounded client does

    do_GET = _serve
    do_HEAD = _serve
    do_POST = _serve
    do_PUT = _serve
    do_PATCH = _serve
    do_DELETE = _serve
    do_OPTIONS = _serve


def _new_certificates() -> tuple[bytes, bytes, bytes]:
    """(CA cert, server cert, server key) PEM; the server cert has SAN IP:127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-test-ca")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), cert.public_bytes(pem), key_pem


#: One CA and server certificate per test session (key generation is the slow part).
_certificates = cache(_new_certificates)
