"""Live updates: watch the pod, its events and its node, and re-collect what changed.

A watch is a GET with ``watch=true`` (read-only; ``deploy/rbac.yaml`` already grants
``watch``). Each watch only says *that* something changed; the changed key is then collected
again through the same source as the first time (:class:`~gputriage.evidence.kube.KubeSource`),
so a watched update decodes exactly like a fresh collection and can be cited the same way.

One daemon thread per watch. Each watch asks the server to end it after ``seconds`` and is
then renewed from the last resourceVersion seen, so :meth:`LiveWatch.stop` takes effect within
that time without killing a connection mid-read. Errors (a dropped connection, 410 Gone) wait
a moment and list again; they never reach the caller, which keeps its last evidence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputriage.evidence.model import Evidence, Key

if TYPE_CHECKING:
    from gputriage.evidence.kube import KubeSource
    from gputriage.evidence.kube_client import KubeClient

#: Seconds a single watch request lasts before it is renewed (and a stop is noticed).
WATCH_SECONDS = 10
#: Seconds to wait after a failed watch before listing again.
RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class WatchTarget:
    key: Key
    path: str
    field_selector: str


def pod_targets(namespace: str, pod: str) -> list[WatchTarget]:
    return [
        WatchTarget(Key.POD, f"/api/v1/namespaces/{namespace}/pods", f"metadata.name={pod}"),
        WatchTarget(
            Key.EVENTS, f"/api/v1/namespaces/{namespace}/events", f"involvedObject.name={pod}"
        ),
    ]


def node_target(node: str) -> WatchTarget:
    return WatchTarget(Key.NODE, "/api/v1/nodes", f"metadata.name={node}")


def node_of(pod: Evidence) -> str:
    data = pod.data if isinstance(pod.data, dict) else {}
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    node = spec.get("nodeName") if isinstance(spec, dict) else ""
    return node if isinstance(node, str) else ""


class LiveWatch:
    """Watches one pod, its events and (once scheduled) its node; calls ``on_change`` with the
    re-collected :class:`Evidence` of each key that changed."""

    def __init__(
        self,
        client: KubeClient,
        source: KubeSource,
        namespace: str,
        pod: str,
        on_change: Callable[[Evidence], None],
        *,
        pod_evidence: Evidence,
        seconds: int = WATCH_SECONDS,
    ) -> None:
        self.client = client
        self.source = source
        self.namespace = namespace
        self.pod_name = pod
        self.on_change = on_change
        self.seconds = seconds
        self._pod = pod_evidence
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._node = ""
        self._threads: list[threading.Thread] = []

    def start(self) -> LiveWatch:
        for target in pod_targets(self.namespace, self.pod_name):
            self._spawn(target)
        self._watch_node(node_of(self._pod))
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _spawn(self, target: WatchTarget) -> None:
        thread = threading.Thread(
            target=self._run,
            args=(target,),
            daemon=True,
            name=f"gputriage-watch-{target.key.value}",
        )
        self._threads.append(thread)
        thread.start()

    def _watch_node(self, node: str) -> None:
        with self._lock:
            if not node or self._node:
                return
            self._node = node
        self._spawn(node_target(node))

    def _run(self, target: WatchTarget) -> None:
        query = {"fieldSelector": target.field_selector}
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    reply = self.client.get(target.path, query)
                    data = reply.json() if reply.ok else None
                    meta = data.get("metadata") if isinstance(data, dict) else None
                    version = str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""
                    if not version:
                        self._stop.wait(RETRY_SECONDS)
                        continue
                for event in self.client.watch(
                    target.path, {**query, "resourceVersion": version}, seconds=self.seconds
                ):
                    if self._stop.is_set():
                        return
                    version = _version_of(event) or version
                    if event.get("type") == "ERROR":  # 410 Gone: list again
                        version = ""
                        break
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._changed(target.key)
            except Exception:  # the connection dropped, the server went away: try again
                version = ""
                self._stop.wait(RETRY_SECONDS)

    def _changed(self, key: Key) -> None:
        if key is Key.POD:
            evidence = self.source.pod()
            if evidence.ok:
                self._pod = evidence
                self._watch_node(node_of(evidence))
        else:
            evidence = self.source.collect(key, self._pod)
        if not self._stop.is_set():
            self.on_change(evidence)


def _version_of(event: dict[str, Any]) -> str:
    obj = event.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(version) if version else ""
