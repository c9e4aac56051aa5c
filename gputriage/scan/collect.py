"""Paginated, streaming listing of nodes and pods for a scan, through the kube source's client.

Lists are read ``limit=500`` at a time with ``continue`` tokens, nodes and pods at the same time
(one thread each, a bounded queue between them and the caller). Every page is turned into small
records (:mod:`gputriage.scan.classify`) as soon as it is decoded and the page is dropped, so
memory follows the GPU objects, not the cluster size; the caller gets an :class:`Update` with
the rows each page changed, so views fill in while the lists are still running.

Only GETs. The client is anything with :class:`Lister`'s ``get`` (the command passes
:class:`gputriage.evidence.kube_client.KubeClient`, configured from kubeconfig/context with
its per-call timeout); failures are worded by :mod:`gputriage.evidence.kube_errors` (a 403
names the verb and resource to grant).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gputriage.evidence.kube_errors import Reply, failure_status
from gputriage.evidence.model import Status
from gputriage.facts.device_plugin import PLUGIN_POD_LABELS
from gputriage.scan.classify import PodInfo, node_info, pod_info
from gputriage.scan.fleet import Fleet
from gputriage.scan.model import Row

#: Items per page (what kubectl uses too).
PAGE_SIZE = 500
#: Pages a lister may run ahead of the caller.
QUEUE_PAGES = 4
#: Pods that can never be in trouble, left on the server.
POD_FIELD_SELECTOR = "status.phase!=Succeeded"

NODES = "nodes"
PODS = "pods"
PLUGINS = "device-plugin pods"


class Lister(Protocol):
    """GETs that answer a :class:`Reply` and never raise (``KubeClient`` has this shape)."""

    def get(
        self,
        path: str,
        query: Mapping[str, object] | None = None,
        *,
        max_bytes: int = 0,
        timeout: float = 0.0,
    ) -> Reply: ...


@dataclass(frozen=True)
class Scope:
    """What to scan."""

    namespace: str = ""  # "" = every namespace
    selector: str = ""  # label selector for pods
    stuck_after: int = 600  # seconds before ContainerCreating / old Pending count as trouble
    page_size: int = PAGE_SIZE

    @property
    def pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods" if self.namespace else "/api/v1/pods"

    @property
    def every_pod(self) -> bool:
        """Every pod of the cluster is listed: plugin pods and GPU holders come with it."""
        return not self.namespace and not self.selector


@dataclass(frozen=True)
class Listing:
    """How one list went."""

    what: str  # nodes | pods | device-plugin pods
    shown: str  # GET /api/v1/pods?fieldSelector=...
    status: Status = Status.OK
    detail: str = ""
    items: int = 0
    pages: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "request": self.shown,
            "status": self.status.value,
            "detail": self.detail,
            "items": self.items,
            "pages": self.pages,
        }


@dataclass(frozen=True)
class Update:
    """What one page (or the end of the scan) changed."""

    rows: tuple[Row, ...] = ()
    listing: Listing | None = None  # a list finished (ok or not)
    done: bool = False
    nodes_seen: int = 0
    pods_seen: int = 0
    listings: tuple[Listing, ...] = field(default=())  # with done: every list


#: Pages one list may take (1,000,000 items at 500 a page): past it the list is incomplete.
MAX_PAGES = 2000


class ListFailed(Exception):
    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.shown)
        self.reply = reply


def list_pages(
    client: Lister,
    path: str,
    query: Mapping[str, object] | None = None,
    *,
    page_size: int = PAGE_SIZE,
) -> Iterator[list[Any]]:
    """The items of a list, one page at a time. Raises :class:`ListFailed` for an answer
    that is not a list. An expired ``continue`` token (410) continues from the token the API
    offers for an inconsistent continuation, else restarts the list once."""
    token = ""
    restarted = False
    pages = 0
    while True:
        page: dict[str, object] = {**(query or {}), "limit": page_size}
        if token:
            page["continue"] = token
        if pages >= MAX_PAGES:  # a server whose continue token never ends
            raise ListFailed(
                Reply(
                    0,
                    b"",
                    _shown(path, query or {}),
                    (
                        f"the list did not end after {pages:,} pages of {page_size} "
                        "(the API server keeps answering with a continue token): not read further"
                    ),
                    truncated=True,
                )
            )
        pages += 1
        reply = client.get(path, page)
        if reply.status == 410 and token:
            offered = str(((reply.json() or {}).get("metadata") or {}).get("continue") or "")
            if offered or not restarted:
                token, restarted = offered, restarted or not offered
                continue
        if not reply.ok:
            raise ListFailed(reply)
        data = reply.json()
        items = data.get("items") if isinstance(data, dict) else None
        if items is None and isinstance(data, dict) and "items" in data:
            items = []
        if not isinstance(items, list):
            raise ListFailed(
                replace(
                    reply, status=502, body=b"the API answered with something that is not a list"
                )
            )
        del reply  # the page's bytes go before the next request
        yield items
        token = str((data.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def _shown(path: str, query: Mapping[str, object]) -> str:
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return f"GET {path}" + (f"?{q}" if q else "")


#: One message from a lister thread: (what, items seen, records, finished listing or None).
_Message = tuple[str, int, list[Any], Listing | None]


def _lister(
    client: Lister,
    what: str,
    path: str,
    query: Mapping[str, object],
    convert: Callable[[Any], Any],
    page_size: int,
    out: queue.Queue[_Message],
    stop: threading.Event,
) -> None:
    items = pages = 0
    shown = _shown(path, query)

    def put(message: _Message) -> bool:
        while not stop.is_set():
            try:
                out.put(message, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    try:
        for page in list_pages(client, path, query, page_size=page_size):
            records = [r for r in map(convert, page) if r is not None]
            items += len(page)
            pages += 1
            if not put((what, len(page), records, None)):
                return
        put(
            (
                what,
                0,
                [],
                Listing(what, shown, Status.OK, f"{items} items in {pages} pages", items, pages),
            )
        )
    except ListFailed as exc:
        status, detail = failure_status(replace(exc.reply, shown=shown))
        put((what, 0, [], Listing(what, shown, status, detail, items, pages)))
    except Exception as exc:  # a bug must end the list, not hang the scan
        put(
            (
                what,
                0,
                [],
                Listing(
                    what,
                    shown,
                    Status.ERROR,
                    f"internal error: {type(exc).__name__}: {exc}",
                    items,
                    pages,
                ),
            )
        )


def plugin_selectors() -> list[str]:
    """Label selectors that find NVIDIA device-plugin pods, one per label key."""
    by_key: dict[str, list[str]] = {}
    for key, value in PLUGIN_POD_LABELS:
        by_key.setdefault(key, []).append(value)
    return [f"{key} in ({','.join(values)})" for key, values in by_key.items()]


def scan(
    client: Lister, scope: Scope, *, now: float | None = None, fleet: Fleet | None = None
) -> Generator[Update, None, None]:
    """Run a scan, yielding an :class:`Update` per page and a last one with ``done``.

    ``fleet`` (made when not given) holds the result: rows, GPU node records, inventories.
    Closing the iterator early stops the listers.
    """
    fleet = fleet if fleet is not None else Fleet(now or time.time(), scope.stuck_after)
    fleet.holders_complete = scope.every_pod
    out: queue.Queue[_Message] = queue.Queue(maxsize=QUEUE_PAGES)
    stop = threading.Event()
    pod_query: dict[str, object] = {"fieldSelector": POD_FIELD_SELECTOR}
    if scope.selector:
        pod_query["labelSelector"] = scope.selector
    jobs: list[tuple[str, str, Mapping[str, object], Callable[[Any], Any]]] = [
        (NODES, "/api/v1/nodes", {}, node_info),
        (PODS, scope.pods_path, pod_query, pod_info),
    ]
    if not scope.every_pod:
        jobs += [
            (f"{PLUGINS} ({selector})", "/api/v1/pods", {"labelSelector": selector}, _plugin_only)
            for selector in plugin_selectors()
        ]
    threads = [
        threading.Thread(
            target=_lister,
            name=f"gputriage-scan-{i}",
            daemon=True,
            args=(client, what, path, query, convert, scope.page_size, out, stop),
        )
        for i, (what, path, query, convert) in enumerate(jobs)
    ]
    for t in threads:
        t.start()
    listings: list[Listing] = []
    try:
        while len(listings) < len(jobs):
            what, seen, records, ended = out.get()
            if ended is not None:
                listings.append(ended)
                yield Update(listing=ended, nodes_seen=fleet.nodes_seen, pods_seen=fleet.pods_seen)
                continue
            if what == NODES:
                rows = fleet.add_nodes(seen, records)
            elif what == PODS:
                rows = fleet.add_pods(seen, records)
            else:
                for pod in records:
                    fleet.add_plugin(pod)
                rows = []
            yield Update(tuple(rows), nodes_seen=fleet.nodes_seen, pods_seen=fleet.pods_seen)
        plugin_lists = [ls for ls in listings if ls.what.startswith(PLUGINS)] or [
            ls for ls in listings if ls.what == PODS
        ]
        nodes_ok = any(ls.what == NODES and ls.status is Status.OK for ls in listings)
        plugins_ok = all(ls.status is Status.OK for ls in plugin_lists)
        final = fleet.finish(plugins_listed=nodes_ok and plugins_ok)
        yield Update(
            tuple(final),
            done=True,
            nodes_seen=fleet.nodes_seen,
            pods_seen=fleet.pods_seen,
            listings=tuple(listings),
        )
    finally:
        stop.set()


def _plugin_only(obj: Any) -> PodInfo | None:
    info = pod_info(obj)
    return info if info is not None and info.plugin else None
