"""Talking to the Kubernetes API: which cluster and credentials, and GETs that never raise.

Built on the official client's configuration loading (kubeconfig files, ``--context``,
``KUBECONFIG`` with several files, in-cluster service accounts, exec and OIDC credentials with
their token refresh) and its ``ApiClient`` transport, but not on the generated ``CoreV1Api``:
its first use imports ~250 model classes. Requests go through ``ApiClient.param_serialize`` +
``call_api`` (which keep the credential refresh hook) with a timeout per call, and the body is
returned as bytes for the caller to decode.

``kubernetes`` is imported inside functions so ``gputriage --help`` stays fast, and only for
the logins the lean path (:mod:`gputriage.evidence.kube_lean`: a token or a client
certificate, the standard library's HTTPS) leaves to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from gputriage import __version__
from gputriage.errors import GputriageError
from gputriage.evidence.kube_errors import Reply, describe_exception
from gputriage.options import DEFAULT_REQUEST_TIMEOUT

#: Items per page when listing (nodes, pods on a node, events).
PAGE_SIZE = 500
#: Bounds on what one API answer, and one paginated list, may cost us. A reply larger than
#: :data:`MAX_RESPONSE_BYTES` is not read further (a 100 MB event list took 1.46 GB decoded);
#: a list stops after :data:`MAX_PAGES` pages or :data:`MAX_LIST_BYTES` bytes (a server whose
#: ``continue`` never ends), each with a named reason. Every reply must also finish within the
#: call's timeout as a whole (a chunked body that never ends), and a list within its deadline.
MAX_RESPONSE_BYTES = 64 << 20
MAX_LIST_BYTES = 1 << 30
MAX_PAGES = 1000
_READ_CHUNK = 1 << 16

#: Where a pod's service account credentials and namespace are mounted.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class KubeConfig:
    """Where and as whom to talk to the API."""

    context: str  # the kubeconfig context ("in-cluster" inside a pod)
    namespace: str  # the context's namespace ("" when it sets none)
    host: str
    configuration: Any  # kubernetes.client.Configuration, or kube_lean.LeanAuth
    notes: tuple[str, ...] = ()  # errors the client logged while loading (exec plugin output)


def load_config(kubeconfig: str | None = None, context: str | None = None) -> KubeConfig:
    """Load ``--kubeconfig`` (else ``$KUBECONFIG``, else ``~/.kube/config``) at ``--context``
    (else the current one); inside a pod without a kubeconfig, the service account."""
    files = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    paths = [os.path.expanduser(p) for p in files.split(os.pathsep) if p]
    existing = [p for p in paths if os.path.isfile(p)]
    if not existing:
        if not kubeconfig and not context and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return _in_cluster_config()
        raise GputriageError(
            f"no kubeconfig at {', '.join(paths) or files}. Pass --kubeconfig FILE, set "
            "KUBECONFIG, or run gputriage inside a pod with a service account. Without a "
            "cluster: `gputriage demo` shows the built-in scenarios, and `gputriage POD --from "
            "DIR` replays an evidence bundle (one `gputriage collect` wrote, or files pasted "
            "by hand).",
            title="no kubeconfig",
        )
    from gputriage.evidence.kube_lean import lean_config

    lean = lean_config(existing, context)
    if lean is not None:  # a token or client certificate: no need for the official client
        return lean
    from kubernetes.client.configuration import Configuration
    from kubernetes.config import kube_config

    joined = os.pathsep.join(existing)
    with _client_errors() as notes:
        try:
            contexts, current = kube_config.list_kube_config_contexts(config_file=joined)
        except Exception as exc:  # the client raises ConfigException, yaml and OS errors
            raise GputriageError(
                f"cannot read kubeconfig {joined}: {exc}", title="bad kubeconfig"
            ) from exc
        names = [str(c.get("name")) for c in contexts or []]
        chosen = context or _current_context(existing) or str((current or {}).get("name") or "")
        if not chosen or chosen not in names:
            raise GputriageError(_context_problem(chosen, names, joined), title="bad context")
        ctx = next(c for c in contexts if c.get("name") == chosen)
        cfg = Configuration()
        try:
            kube_config.load_kube_config(
                config_file=joined, context=chosen, client_configuration=cfg, persist_config=False
            )
        except Exception as exc:
            raise GputriageError(
                f"cannot use context {chosen!r} of {joined}: {exc}", title="bad kubeconfig"
            ) from exc
    _tune(cfg)
    namespace = str((ctx.get("context") or {}).get("namespace") or "")
    return KubeConfig(chosen, namespace, str(cfg.host), cfg, tuple(notes))


def _current_context(paths: list[str]) -> str:
    """The current-context kubectl uses: the first file that sets one wins (the client's
    merger lets the last one win)."""
    import yaml

    for path in paths:
        try:
            with open(path) as fh:
                data = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and data.get("current-context"):
            return str(data["current-context"])
    return ""


def _context_problem(chosen: str, names: list[str], where: str) -> str:
    import difflib

    if not chosen:
        return (
            f"{where} has no current-context; pass --context NAME "
            f"(available: {', '.join(names) or 'none'})"
        )
    close = difflib.get_close_matches(chosen, names, n=3)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return f"context {chosen!r} is not in {where} (available: {', '.join(names) or 'none'}).{hint}"


def _in_cluster_config() -> KubeConfig:
    from kubernetes.client.configuration import Configuration
    from kubernetes.config import incluster_config

    cfg = Configuration()
    try:
        incluster_config.InClusterConfigLoader(
            token_filename=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
            cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
        ).load_and_set(cfg)
    except Exception as exc:
        raise GputriageError(
            f"running in a pod, but its service account is unusable: {exc}", title="no kubeconfig"
        ) from exc
    _tune(cfg)
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace")) as fh:
            namespace = fh.read().strip()
    except OSError:
        namespace = ""
    return KubeConfig("in-cluster", namespace, str(cfg.host), cfg)


def _tune(cfg: Any) -> None:
    import urllib3

    # One retry for a dropped pooled connection; never for a read timeout (our budget).
    cfg.retries = urllib3.Retry(total=1, read=0, redirect=0, status=0, raise_on_status=False)
    cfg.connection_pool_maxsize = 32  # the broker runs ~20 calls at once


@contextlib.contextmanager
def _client_errors() -> Iterator[list[str]]:
    """Collect what the client logs (exec plugin failures) instead of printing it."""
    import logging  # the official client's path only

    notes: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    handler = _Collect(logging.ERROR)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield notes
    finally:
        root.removeHandler(handler)


def shown(path: str, query: Mapping[str, object] | None = None) -> str:
    """How a request reads in a source line: ``GET /api/v1/...?fieldSelector=a=b``."""
    q = "&".join(f"{k}={v}" for k, v in (query or {}).items())
    return f"GET {path}" + (f"?{q}" if q else "")


class KubeClient:
    """GETs against the API with a timeout per call; answers are :class:`Reply`, never raise."""

    def __init__(self, config: KubeConfig, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        from gputriage.evidence.kube_lean import LeanAuth, LeanTransport

        self.config = config
        self.timeout = timeout
        self._lean: LeanTransport | None = None
        self._api: Any = None
        if isinstance(config.configuration, LeanAuth):
            self._lean = LeanTransport(config.configuration, f"gputriage/{__version__}")
        else:
            from kubernetes.client.api_client import ApiClient

            self._api = ApiClient(config.configuration)
            self._api.user_agent = f"gputriage/{__version__}"
        # Serialising a request may refresh credentials (exec plugin, OIDC): one at a time.
        self._auth_lock = threading.Lock()
        self.max_response_bytes = MAX_RESPONSE_BYTES
        self.max_list_bytes = MAX_LIST_BYTES
        self.max_pages = MAX_PAGES
        #: How long one paginated list may take in all (default: three timeouts).
        self.list_deadline = 3 * timeout
        self._closed = threading.Event()
        self._inflight: set[Any] = set()
        self._inflight_lock = threading.Lock()

    def get(
        self,
        path: str,
        query: Mapping[str, object] | None = None,
        *,
        max_bytes: int = 0,
        timeout: float = 0.0,
    ) -> Reply:
        """GET ``path``; read at most ``max_bytes`` of the body when given (the rest is cut,
        ``truncated``), else at most :data:`MAX_RESPONSE_BYTES` (over it: an error). The whole
        answer, body included, must arrive within ``timeout``; :meth:`close` ends it early."""
        words = shown(path, query)
        budget = timeout or self.timeout
        deadline = time.monotonic() + budget
        if self._closed.is_set():
            return Reply(0, b"", words, "the client was closed", timeout_s=budget)
        params = [(k, "true" if v is True else str(v)) for k, v in (query or {}).items()]
        try:
            response = self._send(path, params, budget)
        except Exception as exc:  # urllib3, TLS, auth plugin: all mean "no answer"
            text, timed_out = describe_exception(exc)
            return Reply(0, b"", words, text, timed_out, timeout_s=budget)
        cap = max_bytes or self.max_response_bytes
        chunks: list[bytes] = []
        size = 0
        problem = ""
        with self._track(response):
            try:
                while size <= cap:
                    if self._closed.is_set():
                        problem = "the client was closed while the reply was being read"
                        break
                    if time.monotonic() > deadline:
                        problem = "timeout"
                        break
                    chunk = response.read1(min(_READ_CHUNK, cap + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            except Exception as exc:
                text, timed_out = describe_exception(exc)
                response.close()
                if self._closed.is_set():
                    text, timed_out = "the client was closed while the reply was being read", False
                return Reply(0, b"", words, text, timed_out, timeout_s=budget)
        data = b"".join(chunks)
        if problem:
            response.close()
            if problem == "timeout":
                return Reply(
                    0,
                    b"",
                    words,
                    f"the reply did not finish within {budget:g} s ({size:,} bytes read)",
                    True,
                    timeout_s=budget,
                )
            return Reply(0, b"", words, problem, timeout_s=budget)
        truncated = len(data) > cap
        if truncated:
            response.close()  # do not drain a huge body just to reuse the connection
            data = data[:cap]
            if not max_bytes:
                return Reply(
                    0,
                    b"",
                    words,
                    f"the reply is larger than {cap >> 20} MiB: not read further",
                    truncated=True,
                    timeout_s=budget,
                )
        else:
            response.release_conn()
        return Reply(int(response.status), data, words, truncated=truncated, timeout_s=budget)

    def _send(self, path: str, params: list[tuple[str, str]], budget: float) -> Any:
        """The response of one GET (``status``, ``read``, ``release_conn``, ``close``)."""
        if self._lean is not None:
            return self._lean.get(path, params, budget)
        with self._auth_lock:
            method, url, headers, body, post = self._api.param_serialize(
                "GET",
                quote(path),
                query_params=params,
                header_params={"Accept": "application/json, */*"},
                auth_settings=["BearerToken"],
            )
        return self._api.call_api(
            method, url, headers, body, post, _request_timeout=budget
        ).response

    @contextlib.contextmanager
    def _track(self, response: Any) -> Iterator[None]:
        with self._inflight_lock:
            self._inflight.add(response)
        try:
            yield
        finally:
            with self._inflight_lock:
                self._inflight.discard(response)

    def watch(
        self, path: str, query: Mapping[str, object], *, seconds: int
    ) -> Iterator[dict[str, Any]]:
        """``GET path?watch=true``: each watch event (``{"type", "object"}``) as it arrives,
        until the server ends the watch after ``seconds``. Raises OSError-like errors of the
        HTTP stack to the caller (``gputriage.evidence.watch`` retries)."""
        params = [(k, str(v)) for k, v in query.items()]
        params += [("watch", "true"), ("timeoutSeconds", str(seconds))]
        chunks: Iterator[bytes]
        if self._lean is not None:
            response: Any = self._lean.get(quote(path), params, seconds + self.timeout)
            if response.status != 200:
                response.close()
                raise OSError(f"watch {path}: HTTP {response.status}")
            chunks = iter(lambda: response.read1(65536), b"")
        else:
            with self._auth_lock:
                method, url, headers, body, post = self._api.param_serialize(
                    "GET",
                    quote(path),
                    query_params=params,
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                )
            response = self._api.call_api(
                method,
                url,
                headers,
                body,
                post,
                _request_timeout=(self.timeout, seconds + self.timeout),
            ).response
            chunks = response.stream(None)
        try:
            buffer = b""
            for chunk in chunks:
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        if isinstance(event, dict):
                            yield event
        finally:
            response.release_conn()

    def list_all(
        self,
        path: str,
        query: Mapping[str, object] | None = None,
        *,
        page_size: int = PAGE_SIZE,
        keep: Callable[[Any], Any] | None = None,
    ) -> tuple[Reply, dict[str, Any] | None]:
        """Every item of a list, page by page. Returns the last reply, and the merged list
        (None when a page failed).

        ``keep`` maps each item as its page arrives (``None`` drops it), so a cluster-wide
        list holds only what the caller needs, never every object at once.
        """
        items: list[Any] = []
        token = ""
        merged: dict[str, Any] = {}
        restarted = False
        deadline = time.monotonic() + self.list_deadline
        pages = total = 0
        while True:
            page = {**(query or {}), "limit": page_size}
            if token:
                page["continue"] = token
            left = deadline - time.monotonic()
            stop = ""
            if pages >= self.max_pages:
                stop = (
                    f"the list did not end after {pages:,} pages of {page_size} (the API "
                    "server keeps answering with a continue token): not read further"
                )
            elif total > self.max_list_bytes:
                stop = (
                    f"the list is larger than {self.max_list_bytes >> 20} MiB after "
                    f"{pages:,} pages: not read further"
                )
            elif left <= 0:
                return Reply(
                    0, b"", shown(path, query), timed_out=True, timeout_s=self.list_deadline
                ), None
            if stop:
                return Reply(0, b"", shown(path, query), stop, truncated=True), None
            reply = self.get(path, page, timeout=min(self.timeout, left))
            pages += 1
            total += len(reply.body)
            if reply.status == 410 and token and not restarted:
                # The continue token expired (the list changed too much): start over once.
                items, token, restarted = [], "", True
                continue
            data = reply.json() if reply.ok else None
            if not isinstance(data, dict) or not isinstance(data.get("items", []), list):
                if reply.ok:
                    reply = replace(
                        reply,
                        status=502,
                        body=b"the API answered with something that is not a list",
                    )
                return replace(reply, shown=shown(path, query)), None
            page_items = data.get("items") or []
            if keep is not None:
                page_items = [k for k in map(keep, page_items) if k is not None]
            items.extend(page_items)
            merged = {k: v for k, v in data.items() if k != "items"}
            token = str((data.get("metadata") or {}).get("continue") or "")
            if not token:
                break
        merged = {
            **merged,
            "items": items,
            "metadata": {
                "resourceVersion": (merged.get("metadata") or {}).get("resourceVersion", "")
            },
        }
        return replace(reply, shown=shown(path, query)), merged

    def close(self) -> None:
        """End every call now: replies being read are cut (their sockets shut down, so a
        thread blocked on one wakes at once), lists stop, later calls answer "closed"."""
        self._closed.set()
        with self._inflight_lock:
            inflight = list(self._inflight)
        for response in inflight:
            with contextlib.suppress(Exception):
                sock = getattr(getattr(response, "connection", None), "sock", None)
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            if self._lean is not None:
                self._lean.close()
            else:
                self._api.close()
