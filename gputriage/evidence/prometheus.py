"""GPU metrics history from Prometheus (the DCGM exporter, cAdvisor): an optional source.

Read-only PromQL over the HTTP API (``GET /api/v1/query_range``), bounded by time range, step,
series count and bytes. The queries ask for the DCGM exporter's standard fields on the pod's node
(matched by the exporter's ``Hostname`` label or the ``node`` / ``kubernetes_node`` labels that
relabelling adds) and cAdvisor's CFS counters for the pod. Every answer, failures included, is
kept in one document (``prometheus.json`` in a bundle): one line per query, so a fact can cite
``prometheus.json:LINE`` and a replay reads exactly what the live run read.

Nothing here raises: no URL configured is ``unavailable``, an unreachable server is
``unavailable``/``timeout`` with the reason, and one failing query is recorded in its line while
the others are still asked. Importing this module costs only the standard library.
"""

from __future__ import annotations

import base64
import json
import math
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputriage.evidence.model import Evidence, Key, Status
from gputriage.options import MetricsAccess

#: Format marker of the stored document (bump when its shape changes).
DOCUMENT_FORMAT = "gputriage-prometheus/1"


@dataclass(frozen=True)
class PromQuery:
    """One query of the plan. ``scope`` says which selector fills ``{sel}``: the node's GPUs or
    the pod's containers. ``over`` wraps the selector in ``<over>_over_time(...[step])`` so a
    short event between two steps is not lost. ``window_s`` narrows the window (0: the
    configured window), for series wanted at a finer step (memory before an OOM)."""

    id: str
    metric: str
    scope: str  # node | pod
    over: str = ""  # max | min | "" (the sample at each step)
    window_s: float = 0.0
    template: str = ""

    def text(self, sel: str, step: int) -> str:
        if self.template:
            return self.template.format(metric=self.metric, sel=sel, step=step)
        series = f"{self.metric}{{{sel}}}"
        return f"{self.over}_over_time({series}[{step}s])" if self.over else series


#: What gputriage asks for. Metric names are the DCGM exporter's (etc/default-counters.csv and
#: dcp-metrics-included.csv) and cAdvisor's; a metric an exporter does not export just comes
#: back with no series.
RECENT_S = 6 * 3600.0
QUERIES: tuple[PromQuery, ...] = (
    PromQuery("xid", "DCGM_FI_DEV_XID_ERRORS", "node", "max"),
    PromQuery("fb_used", "DCGM_FI_DEV_FB_USED", "node", "max", RECENT_S),
    PromQuery("fb_free", "DCGM_FI_DEV_FB_FREE", "node", "min", RECENT_S),
    PromQuery("gpu_temp", "DCGM_FI_DEV_GPU_TEMP", "node", "max"),
    PromQuery("power", "DCGM_FI_DEV_POWER_USAGE", "node", "max"),
    PromQuery("sm_clock", "DCGM_FI_DEV_SM_CLOCK", "node"),
    PromQuery("gpu_util", "DCGM_FI_DEV_GPU_UTIL", "node"),
    PromQuery("throttle", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "node"),
    PromQuery("clocks_event", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "node"),
    PromQuery("pcie_replay", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "node", "max"),
    PromQuery("ecc_dbe", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "node", "max"),
    PromQuery("remap_unc", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "node", "max"),
    PromQuery("remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "node", "max"),
    PromQuery("nvlink_crc", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "node", "max"),
    PromQuery("gr_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "node"),
    PromQuery(
        "cpu_throttled",
        "container_cpu_cfs_throttled_periods_total",
        "pod",
        template="sum by (container) (rate({metric}{{{sel}}}[5m])) / sum by (container) "
        "(rate(container_cpu_cfs_periods_total{{{sel}}}[5m]))",
    ),
)

#: Node label names across exporter versions and scrape configs.
NODE_LABELS = ("Hostname", "kubernetes_node", "node")


@dataclass(frozen=True)
class PromSettings:
    """Where Prometheus is and how far gputriage may go with it."""

    url: str
    bearer_token: str = ""
    username: str = ""
    password: str = ""
    ca_file: str = ""
    insecure: bool = False
    window_s: float = 7 * 86400.0
    max_points: int = 600  # per series: the step is window / max_points, at least 60 s
    timeout: float = 10.0
    max_series: int = 256  # per query
    max_bytes: int = 8 * 1024 * 1024  # per response

    def step_s(self, window_s: float = 0.0) -> int:
        window = window_s or self.window_s
        return max(60, math.ceil(window / max(1, self.max_points) / 60.0) * 60)


def promql_string(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal (escapes backslash, quote, newline)."""
    return json.dumps(value)


def selector(scope: str, *, node: str, namespace: str, pod: str) -> list[str]:
    """Label matchers for ``scope``: one alternative per node label name, or the pod's."""
    if scope == "pod":
        return [f'namespace={promql_string(namespace)},pod={promql_string(pod)},container!=""']
    return [f"{label}={promql_string(node)}" for label in NODE_LABELS]


def build_query(q: PromQuery, *, node: str, namespace: str, pod: str, step: int = 60) -> str:
    """The PromQL text of ``q`` for this target; node scopes OR the label-name variants."""
    parts = [q.text(s, step) for s in selector(q.scope, node=node, namespace=namespace, pod=pod)]
    return parts[0] if len(parts) == 1 else " or ".join(parts)


def public_url(url: str) -> str:
    """``url`` without user:password, for the record."""
    if url.startswith(SERVICE_PREFIX):
        return url
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Unreachable(Exception):
    """The server did not answer at all (connection refused, DNS, TLS, timeout)."""

    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


#: ``--prometheus svc:NAMESPACE/NAME[:PORT]``: through the API server's service proxy.
SERVICE_PREFIX = "svc:"


def service_proxy_path(spec: str) -> str:
    """``svc:monitoring/prometheus-k8s:9090`` -> the API server's proxy path for it."""
    ns, _, name = spec.removeprefix(SERVICE_PREFIX).partition("/")
    dns = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    import re

    if not (re.fullmatch(dns, ns) and re.fullmatch(rf"(https?:)?{dns}(:[a-z0-9-]+)?", name)):
        raise ValueError(
            f"{spec!r}: write svc:NAMESPACE/NAME[:PORT] (e.g. svc:monitoring/prometheus-k8s:9090)"
        )
    return f"/api/v1/namespaces/{ns}/services/{name}/proxy"


class PrometheusClient:
    """A tiny read-only HTTP API client: GET only, bounded size, its own timeout.

    With ``kube`` (a :class:`gputriage.evidence.kube_client.KubeClient`) and a ``svc:`` URL the
    same GETs go through the API server's service proxy, with the kubeconfig's credentials
    (RBAC: ``get`` on ``services/proxy`` in Prometheus's namespace)."""

    def __init__(
        self, settings: PromSettings, opener: Callable[..., Any] | None = None, kube: Any = None
    ) -> None:
        self.settings = settings
        self._kube: Any = None
        if settings.url.startswith(SERVICE_PREFIX):
            if kube is None:
                raise ValueError("a svc: URL needs the cluster's API server")
            self._kube = kube
            self._proxy = service_proxy_path(settings.url)
            self._open = opener
            return
        base = settings.url.rstrip("/")
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {public_url(base)!r}")
        self._base = urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, "", "")
        )
        user = settings.username or urllib.parse.unquote(parts.username or "")
        password = settings.password or urllib.parse.unquote(parts.password or "")
        self._headers = {"Accept": "application/json", "User-Agent": "gputriage"}
        if settings.bearer_token:
            self._headers["Authorization"] = f"Bearer {settings.bearer_token}"
        elif user:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._context: ssl.SSLContext | None = None
        if parts.scheme == "https":
            ctx = ssl.create_default_context(cafile=settings.ca_file or None)
            if settings.insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._context = ctx
        #: urllib.request's urlopen unless a test gives its own (imported on first use).
        self._open = opener

    def get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        """GET ``path`` and return the API's ``data``; raises Unreachable or ValueError."""
        if self._kube is not None:
            return self._decode(self._get_proxied(path, params))
        import urllib.error
        import urllib.request  # only when a Prometheus is asked: ~5 ms of every fresh run

        url = f"{self._base}{path}?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(url, headers=self._headers, method="GET")
        limit = self.settings.max_bytes
        opener = self._open or urllib.request.urlopen
        try:
            with opener(request, timeout=self.settings.timeout, context=self._context) as response:
                body = response.read(limit + 1)
        except urllib.error.HTTPError as exc:
            body = exc.read(limit + 1) if exc.fp else b""
            if exc.code in (401, 403):
                raise Unreachable(
                    Status.FORBIDDEN,
                    f"HTTP {exc.code} {exc.reason}: check --prometheus-token / --prometheus-user",
                ) from None
            raise ValueError(_api_error(body) or f"HTTP {exc.code} {exc.reason}") from None
        except TimeoutError:
            raise Unreachable(
                Status.TIMEOUT, f"no answer within {self.settings.timeout:g} s"
            ) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise Unreachable(
                    Status.TIMEOUT, f"no answer within {self.settings.timeout:g} s"
                ) from None
            raise Unreachable(Status.UNAVAILABLE, f"cannot reach it: {reason}") from None
        except OSError as exc:
            raise Unreachable(Status.UNAVAILABLE, f"cannot reach it: {exc}") from None
        return self._decode(body)

    def _get_proxied(self, path: str, params: dict[str, str]) -> bytes:
        limit = self.settings.max_bytes
        reply = self._kube.get(
            f"{self._proxy}{path}", params, max_bytes=limit + 1, timeout=self.settings.timeout
        )
        where = f"service proxy {self._proxy}"
        if reply.status == 0:
            status = Status.TIMEOUT if reply.timed_out else Status.UNAVAILABLE
            raise Unreachable(status, f"{where}: {reply.error or 'no answer'}")
        if reply.status in (401, 403):
            raise Unreachable(
                Status.FORBIDDEN,
                f"{where}: HTTP {reply.status}: grant get on services/proxy "
                "in its namespace (deploy/rbac.yaml)",
            )
        if reply.status in (404, 502, 503):
            raise Unreachable(
                Status.UNAVAILABLE,
                f"{where}: HTTP {reply.status} (no such service, port or ready endpoint)",
            )
        if reply.status != 200:
            raise ValueError(_api_error(reply.body) or f"HTTP {reply.status}")
        return bytes(reply.body) + (b" " if reply.truncated else b"")

    def _decode(self, body: bytes) -> dict[str, Any]:
        limit = self.settings.max_bytes
        if len(body) > limit:
            raise ValueError(f"answer larger than {limit} bytes: narrow the window")
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            raise ValueError("answer is not JSON (is this the Prometheus API?)") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise ValueError(_api_error(body) or "answer has no status: success")
        data = doc.get("data")
        return data if isinstance(data, dict) else {}

    def query_range(self, query: str, start: float, end: float, step: int) -> dict[str, Any]:
        return self.get(
            "/api/v1/query_range",
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}s"},
        )


def _api_error(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    if isinstance(doc, dict) and doc.get("error"):
        return f"{doc.get('errorType', 'error')}: {doc['error']}"
    return ""


def collect_metrics(
    client: PrometheusClient, *, node: str, namespace: str, pod: str, end: float | None = None
) -> Evidence:
    """Run the query plan for one pod and its node; never raises."""
    settings = client.settings
    started = time.monotonic()
    end = time.time() if end is None else end
    start = end - settings.window_s
    step = settings.step_s()
    where = public_url(settings.url)
    header = {
        "format": DOCUMENT_FORMAT,
        "prometheus": where,
        "node": node,
        "namespace": namespace,
        "pod": pod,
        "start": round(start, 3),
        "end": round(end, 3),
        "step_s": step,
    }
    lines: list[str] = []
    answered = 0
    budget = 2 * settings.timeout  # the broker waits 3 timeouts for the whole key
    for q in QUERIES:
        if time.monotonic() - started > budget:
            lines.append(
                json.dumps(
                    {
                        "id": q.id,
                        "metric": q.metric,
                        "query": "",
                        "status": "error",
                        "series": [],
                        "error": f"not asked: the {budget:g} s budget for all queries was spent",
                    },
                    separators=(",", ":"),
                )
            )
            continue
        window = min(q.window_s or settings.window_s, settings.window_s)
        q_step = settings.step_s(window)
        promql = build_query(q, node=node, namespace=namespace, pod=pod, step=q_step)
        entry: dict[str, Any] = {
            "id": q.id,
            "metric": q.metric,
            "query": promql,
            "start": round(end - window, 3),
            "step_s": q_step,
        }
        try:
            data = client.query_range(promql, end - window, end, q_step)
        except Unreachable as exc:
            return Evidence(
                Key.PROMETHEUS,
                exc.status,
                f"Prometheus at {where}: {exc.detail}",
                "",
                f"prometheus {where}",
                elapsed_s=round(time.monotonic() - started, 3),
            )
        except (ValueError, OSError) as exc:
            entry.update(status="error", error=str(exc)[:500], series=[])
        else:
            answered += 1
            found = data.get("result")
            result: list[Any] = found if isinstance(found, list) else []
            kept = result[: settings.max_series]
            entry.update(
                status="ok",
                error="",
                series=[
                    {"metric": s.get("metric") or {}, "values": s.get("values") or []}
                    for s in kept
                    if isinstance(s, dict)
                ],
            )
            if len(result) > len(kept):
                entry["error"] = f"{len(result)} series; kept the first {len(kept)}"
        lines.append(json.dumps(entry, separators=(",", ":")))
    raw = "{" + json.dumps(header)[1:-1] + ',\n"queries": [\n' + ",\n".join(lines) + "\n]}\n"
    status = Status.OK if answered else Status.ERROR
    series = sum(len(json.loads(line)["series"]) for line in lines)
    detail = (
        f"{answered}/{len(QUERIES)} queries answered, {series} series over "
        f"{settings.window_s / 3600:g} h (step {step} s)"
    )
    return Evidence(
        Key.PROMETHEUS,
        status,
        detail,
        raw,
        f"prometheus {where}",
        None,
        "json",
        elapsed_s=round(time.monotonic() - started, 3),
    )


def parse_duration(text: str) -> float:
    """``90m``, ``36h``, ``7d``, ``3600`` (seconds) -> seconds; ValueError otherwise."""
    text = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    value = float(number) * units[unit]
    if not math.isfinite(value) or value <= 0 or value > 90 * 86400:
        raise ValueError(f"{text!r}: give a duration from 1s to 90d")
    return value


def settings_from_access(access: MetricsAccess, timeout: float) -> PromSettings | None:
    """PromSettings from the typed options (``--prometheus`` and friends) or the environment;
    None when no URL is given. Raises ValueError for an unreadable secret file or duration."""
    import os
    from pathlib import Path

    url = access.url or os.environ.get("GPUTRIAGE_PROMETHEUS_URL", "")
    if not url:
        return None

    def secret(path: str) -> str:
        if not path:
            return ""
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None

    token = secret(access.token_file) or os.environ.get("GPUTRIAGE_PROMETHEUS_TOKEN", "")
    return PromSettings(
        url=url,
        bearer_token=token,
        username=access.user,
        password=secret(access.password_file),
        ca_file=access.ca_file,
        insecure=access.insecure,
        window_s=parse_duration(access.window or "7d"),
        timeout=timeout,
    )


class PrometheusSource:
    """Evidence source for ``Key.PROMETHEUS``: the pod (and its node) in, one Evidence out."""

    name = "prometheus"

    def __init__(self, settings: PromSettings | None, kube: Any = None) -> None:
        self.settings = settings
        self.kube = kube

    def collect(self, pod: Evidence) -> Evidence:
        if self.settings is None or not self.settings.url:
            return Evidence.missing(Key.PROMETHEUS, "no Prometheus configured (--prometheus URL)")
        data = pod.data if pod.ok and isinstance(pod.data, dict) else {}
        meta = data.get("metadata") or {}
        node = str((data.get("spec") or {}).get("nodeName") or "")
        if not node:
            return Evidence.missing(
                Key.PROMETHEUS, "the pod has no node: no GPU metrics to ask for"
            )
        try:
            client = PrometheusClient(self.settings, kube=self.kube)
        except ValueError as exc:
            return Evidence(Key.PROMETHEUS, Status.ERROR, f"--prometheus: {exc}")
        try:
            return collect_metrics(
                client,
                node=node,
                namespace=str(meta.get("namespace") or ""),
                pod=str(meta.get("name") or ""),
            )
        except Exception as exc:  # never raise into the broker
            return Evidence(
                Key.PROMETHEUS,
                Status.ERROR,
                f"internal error reading Prometheus: {type(exc).__name__}: {exc}",
            )
