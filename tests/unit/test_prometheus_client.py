"""The Prometheus client's contract against a small local HTTP server on 127.0.0.1: GET only,
auth headers, bounded answers, HTTP errors as statuses, PromQL quoting, no credentials in the
record. (The PromQL itself runs against a real Prometheus in tests/integration.)"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gputriage.evidence.model import Evidence, Key, Status
from gputriage.evidence.prometheus import (
    QUERIES,
    PrometheusClient,
    PrometheusSource,
    PromSettings,
    build_query,
    collect_metrics,
    parse_duration,
    promql_string,
    public_url,
    settings_from_access,
)
from gputriage.options import MetricsAccess
from gputriage.parsers.prom_series import episodes, parse_document, sparkline, throttle_reasons


class _Server:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.reply: tuple[int, bytes] = (
            200,
            json.dumps(
                {"status": "success", "data": {"resultType": "matrix", "result": []}}
            ).encode(),
        )
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(("GET", self.path, dict(self.headers)))
                code, body = outer.reply
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _pod() -> Evidence:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "ml"},
        "spec": {"nodeName": "gpu-7"},
    }
    return Evidence(Key.POD, Status.OK, "", json.dumps(pod), "pod.json", pod, "json")


def test_bearer_token_and_read_only_queries(server: _Server) -> None:
    ev = PrometheusSource(PromSettings(server.url, bearer_token="s3cret")).collect(_pod())
    assert ev.status is Status.OK and ev.detail.startswith(f"{len(QUERIES)}/{len(QUERIES)}")
    assert len(server.requests) == len(QUERIES)
    for method, path, headers in server.requests:
        assert method == "GET" and path.startswith("/api/v1/query_range?")
        assert headers["Authorization"] == "Bearer s3cret"
    query = parse_qs(urlsplit(server.requests[0][1]).query)["query"][0]
    assert 'Hostname="gpu-7"' in query and 'node="gpu-7"' in query
    assert "s3cret" not in ev.raw and ev.source == f"prometheus {server.url}"
    doc = parse_document(ev.raw)
    assert set(doc.queries) == {q.id for q in QUERIES}
    assert doc.get("xid").line == 3  # header, "queries": [, then one line per query


def test_basic_auth_from_the_url_is_sent_but_never_recorded(server: _Server) -> None:
    url = server.url.replace("http://", "http://ops:pa%3Ass@")
    client = PrometheusClient(PromSettings(url))
    ev = collect_metrics(client, node="gpu-7", namespace="ml", pod="train-0")
    expected = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
    assert server.requests[0][2]["Authorization"] == expected
    assert "pa%3Ass" not in ev.raw and "ops" not in ev.raw
    assert public_url(url) == server.url


def test_http_errors_become_statuses(server: _Server) -> None:
    server.reply = (401, b'{"status":"error","error":"unauthorized"}')
    ev = PrometheusSource(PromSettings(server.url)).collect(_pod())
    assert ev.status is Status.FORBIDDEN and "HTTP 401" in ev.detail
    assert len(server.requests) == 1  # no point asking the other queries
    server.reply = (400, b'{"status":"error","errorType":"bad_data","error":"parse error"}')
    ev = PrometheusSource(PromSettings(server.url)).collect(_pod())
    assert ev.status is Status.ERROR  # every query failed, each one recorded
    doc = parse_document(ev.raw)
    assert all(
        q.status == "error" and "bad_data: parse error" in q.error for q in doc.queries.values()
    )


def test_oversized_answers_and_series_are_bounded(server: _Server) -> None:
    series = [
        {"metric": {"UUID": f"GPU-{i}", "gpu": str(i)}, "values": [[1, "0"]]} for i in range(50)
    ]
    server.reply = (
        200,
        json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": series}}
        ).encode(),
    )
    ev = collect_metrics(
        PrometheusClient(PromSettings(server.url, max_series=10)), node="n", namespace="ns", pod="p"
    )
    doc = parse_document(ev.raw)
    assert len(doc.get("xid").series) == 10 and "kept the first 10" in doc.get("xid").error
    ev = collect_metrics(
        PrometheusClient(PromSettings(server.url, max_bytes=100)), node="n", namespace="ns", pod="p"
    )
    assert ev.status is Status.ERROR and "larger than 100 bytes" in ev.raw


def test_no_url_no_node_and_bad_url_never_raise() -> None:
    assert PrometheusSource(None).collect(_pod()).status is Status.UNAVAILABLE
    pending = Evidence(
        Key.POD,
        Status.OK,
        "",
        "{}",
        "pod.json",
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        "json",
    )
    assert "no node" in PrometheusSource(PromSettings("http://127.0.0.1:9")).collect(pending).detail
    bad = PrometheusSource(PromSettings("file:///etc/passwd")).collect(_pod())
    assert bad.status is Status.ERROR and "not an http(s) URL" in bad.detail


def test_label_values_are_quoted_as_promql_strings() -> None:
    hostile = 'gpu-7"} or vector(1) or up{x="'
    q = build_query(QUERIES[0], node=hostile, namespace="ml", pod="p", step=60)
    assert promql_string(hostile) in q and 'Hostname="gpu-7"}' not in q
    pod_q = build_query(QUERIES[-1], node="n", namespace='a"b', pod="c\\d", step=60)
    assert 'namespace="a\\"b"' in pod_q and 'pod="c\\\\d"' in pod_q


def test_options_and_durations(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_duration("7d") == 7 * 86400 and parse_duration("90m") == 5400
    for bad in ("0", "-1h", "100d", "soon"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    monkeypatch.delenv("GPUTRIAGE_PROMETHEUS_URL", raising=False)
    assert settings_from_access(MetricsAccess(), 10.0) is None
    token = tmp_path / "token"
    token.write_text("abc\n")
    s = settings_from_access(
        MetricsAccess(url="https://prom:9090", token_file=str(token), window="2d", insecure=True), 5
    )
    assert s is not None and s.bearer_token == "abc" and s.window_s == 2 * 86400
    assert s.insecure and s.timeout == 5 and s.step_s() == 300
    with pytest.raises(ValueError, match="cannot read"):
        settings_from_access(MetricsAccess(url="http://p", token_file=str(tmp_path / "none")), 10.0)


def test_series_helpers() -> None:
    pts = [(0, 0), (60, 79), (120, 79), (180, 0), (900, 79), (960, 43), (1020, 43)]
    eps = episodes([(float(t), float(v)) for t, v in pts], 60)
    assert [(e.value, e.start, e.samples) for e in eps] == [(79, 60, 2), (79, 900, 1), (43, 960, 2)]
    assert throttle_reasons(0x60) == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█" and sparkline([]) == ""
    assert len(sparkline(list(range(1000)), width=20)) == 20
    with pytest.raises(ValueError):
        parse_document("[]")


def test_service_proxy_spec_is_validated() -> None:
    from gputriage.evidence.prometheus import service_proxy_path

    assert (
        service_proxy_path("svc:monitoring/prometheus-k8s:9090")
        == "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy"
    )
    assert service_proxy_path("svc:mon/https:prom:web").endswith("/services/https:prom:web/proxy")
    for bad in ("svc:monitoring", "svc:Mon/prom", "svc:mon/../../nodes/x", "svc:mon/p?x=1"):
        with pytest.raises(ValueError, match="svc:NAMESPACE/NAME"):
            service_proxy_path(bad)
    ev = PrometheusSource(PromSettings("svc:monitoring/prom:9090")).collect(_pod())
    assert ev.status is Status.ERROR and "needs the cluster's API server" in ev.detail


def test_a_slow_server_spends_at_most_the_time_budget(server: _Server) -> None:
    import time as _time

    from gputriage.evidence import prometheus

    calls = []
    real = PrometheusClient.query_range

    def slow(self: PrometheusClient, *a: Any) -> dict[str, Any]:
        calls.append(a)
        _time.sleep(0.3)
        return real(self, *a)

    client = PrometheusClient(PromSettings(server.url, timeout=0.5))
    client.query_range = slow.__get__(client)  # type: ignore[method-assign]
    started = _time.monotonic()
    ev = prometheus.collect_metrics(client, node="n", namespace="ns", pod="p")
    assert _time.monotonic() - started < 2.5
    doc = parse_document(ev.raw)
    skipped = [q for q in doc.queries.values() if "budget" in q.error]
    assert skipped and len(calls) + len(skipped) == len(QUERIES)
