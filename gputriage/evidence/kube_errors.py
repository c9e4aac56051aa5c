"""Words for what went wrong talking to the Kubernetes API.

Every failed call becomes an :class:`Evidence` whose status and detail an SRE can act on: a 403
names the verb and resource that the ClusterRole lacks ("needs `list` on `events` in namespace
ml"), a 401 says the credentials were refused, a timeout says how long we waited. The same
words end up in :class:`GputriageError` when the target pod itself cannot be read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gputriage.evidence.model import Evidence, Key, Status

RBAC_HINT = "add it to the ClusterRole, see deploy/rbac.yaml"

_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
    r'(?: in the namespace "(?P<namespace>[^"]*)")?'
)


@dataclass(frozen=True)
class Reply:
    """One API answer, or the reason there was none (``status`` 0)."""

    status: int
    body: bytes
    shown: str  # "GET /api/v1/namespaces/ml/pods/x" (what the SRE would run with kubectl)
    error: str = ""
    timed_out: bool = False
    truncated: bool = False
    timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The decoded JSON body (None when it is not JSON)."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    def message(self) -> str:
        """The API's own words: a Status ``message``, else the start of the body."""
        data = self.json()
        if isinstance(data, dict) and data.get("kind") == "Status":
            return str(data.get("message") or data.get("reason") or "")
        return self.body[:300].decode("utf-8", errors="replace").strip()


@dataclass(frozen=True)
class Access:
    """The RBAC attributes of one request: what a ClusterRole must grant for it."""

    verb: str
    resource: str  # "pods", "pods/log", "nodes/proxy"
    group: str = ""
    namespace: str = ""

    def words(self) -> str:
        what = f"`{self.verb}` on `{self.resource}`"
        if self.group:
            what += f" (API group {self.group})"
        return what + (f" in namespace {self.namespace}" if self.namespace else " (cluster-wide)")


def access_of(path: str) -> Access:
    """RBAC attributes of a GET on an API ``path`` (name present: get; absent: list)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    group = ""
    if parts[:2] == ["api", "v1"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, parts = parts[1], parts[3:]
    else:
        return Access("get", path)
    namespace = ""
    if len(parts) >= 3 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    if not parts:
        return Access("get", path)
    resource = parts[0]
    if len(parts) >= 3:
        resource = f"{resource}/{parts[2]}"
    return Access("get" if len(parts) >= 2 else "list", resource, group, namespace)


def forbidden_access(reply: Reply) -> Access:
    """What the API said we may not do, else what the path implies."""
    m = _FORBIDDEN.search(reply.message())
    if m:
        return Access(m["verb"], m["resource"], m["group"], m["namespace"] or "")
    return access_of(reply.shown.removeprefix("GET "))


def failure_status(reply: Reply) -> tuple[Status, str]:
    """Status and words for a reply that is not 2xx."""
    if reply.timed_out:
        return Status.TIMEOUT, (
            f"the API server did not answer within {reply.timeout_s:g} s ({reply.shown})"
        )
    if reply.status == 0 and reply.truncated:  # a reply or a list over its bounds
        return Status.ERROR, f"{reply.error} ({reply.shown})"
    if reply.status == 0:
        return Status.ERROR, f"cannot reach the API server: {reply.error} ({reply.shown})"
    if reply.status == 401:
        return Status.FORBIDDEN, (
            "the API server refused our credentials (401 Unauthorized): the token may have "
            "expired or the kubeconfig user is wrong; log in again (e.g. refresh the cloud "
            f"credentials) and retry ({reply.shown})"
        )
    if reply.status == 403:
        access = forbidden_access(reply)
        hint = RBAC_HINT
        if access.resource == "nodes/proxy":
            hint = "grant the optional nodes/proxy rule in deploy/rbac.yaml, or use --ssh"
        return Status.FORBIDDEN, f"needs {access.words()}: {hint} ({reply.message()})"
    if reply.status == 404:
        return Status.UNAVAILABLE, f"{reply.message()} ({reply.shown})"
    if reply.status == 429:
        return Status.ERROR, f"the API server is throttling us (429): {reply.message()}"
    return Status.ERROR, f"HTTP {reply.status}: {reply.message()} ({reply.shown})"


def failed(key: Key, reply: Reply, what: str = "") -> Evidence:
    """An Evidence for a failed call; ``what`` prefixes the detail ("device-plugin pod: ")."""
    status, detail = failure_status(reply)
    return Evidence(key, status, f"{what}{detail}", "", reply.shown)


def describe_exception(exc: BaseException) -> tuple[str, bool]:
    """(words, timed_out) for a transport exception from urllib3 or the client."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        nxt = getattr(cur, "reason", None)
        cur = nxt if isinstance(nxt, BaseException) else cur.__cause__ or cur.__context__
    names = {type(e).__name__ for e in seen}
    timed_out = bool(
        names
        & {"ReadTimeoutError", "ConnectTimeoutError", "TimeoutError", "timeout", "SocketTimeout"}
    )
    root = seen[-1]
    text = str(root) or type(root).__name__
    if "CERTIFICATE_VERIFY_FAILED" in " ".join(str(e) for e in seen):
        text = (
            "TLS certificate verification failed: the kubeconfig's certificate-authority "
            "does not match the server"
        )
    elif "Connection refused" in text or "ConnectionRefusedError" in names:
        text = "connection refused"
    elif "Name or service not known" in text or "NameResolutionError" in names:
        text = "the server name does not resolve (DNS)"
    return re.sub(r"<[^>]*object at 0x[0-9a-f]+>:?\s*", "", text).strip(), timed_out
