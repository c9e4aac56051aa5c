"""GPU metrics history against a real Prometheus (Debian's server over a promtool-backfilled
TSDB of DCGM-exporter-shaped series, tests/promlab.py): repeats of Xid 79 with both times, the
memory climb before a CUDA OOM, thermal throttling by reason, CFS throttling, an unreachable
server, and `collect` -> replay through the fake Kubernetes API giving the same verdict."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.evidence.prometheus import (
    PrometheusClient,
    PrometheusSource,
    PromSettings,
    collect_metrics,
)
from gputriage.facts.build import build_facts
from tests.conftest import require_tool
from tests.kubeapi import KubeAPI
from tests.promlab import NODE_HOT, NODE_XID, UUID_HOT, UUID_OOM, UUID_XID, PromLab, free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromLab]:
    lab = PromLab(
        tmp_path_factory.mktemp("prom"), require_tool("prometheus"), require_tool("promtool")
    )
    lab.start(ready_within=90)
    try:
        yield lab
    finally:
        lab.close()
    assert lab.proc is None


def _metrics(prom: PromLab, node: str, ns: str, pod: str) -> Evidence:
    client = PrometheusClient(PromSettings(prom.url, timeout=20))
    return collect_metrics(client, node=node, namespace=ns, pod=pod, end=prom.now)


def _pod(name: str, ns: str, node: str, *, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name.rsplit("-", 1)[0],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.internal/train:1",
                    "resources": {
                        "limits": {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": "1"},
                        "requests": {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Guaranteed",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.internal/train:1",
                    "state": {"running": {"startedAt": "2026-12-01T08:00:00Z"}},
                }
            ],
        },
    }


def _walk(prom_ev: Evidence, pod: dict[str, Any]):  # type: ignore[no-untyped-def]
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    text = json.dumps(pod)
    ev = EvidenceSet(
        [Evidence(Key.POD, Status.OK, "object", text, "pod.json", pod, "json"), prom_ev]
    )
    facts = build_facts(ev)
    return facts, walk(load_playbooks(), facts, {}, {})


def _verdict(transcript: Any) -> str:
    path = " -> ".join(f"{v.ref}[{v.outcome.value}]" for v in transcript.visits)
    assert transcript.findings, f"no finding; walk: {path}; question: {transcript.question}"
    assert transcript.concluded, path
    return str(transcript.findings[0].id)


def test_two_xid79_episodes_are_a_repeat_with_both_times(prom: PromLab) -> None:
    ev = _metrics(prom, NODE_XID, "ml", "trainer-0")
    assert ev.status is Status.OK, ev.detail
    facts, transcript = _walk(ev, _pod("trainer-0", "ml", NODE_XID))
    m = facts["metrics"]
    assert m.known and m.values["pod_gpus"] == [UUID_XID] and m.values["pod_gpus_from_labels"]
    [rep] = m.values["xid_repeats"]
    assert (rep["uuid"], rep["code"], rep["count"]) == (UUID_XID, 79, 2)
    day = 86400
    expected = [prom.now - 5 * day, prom.now - day]
    got = [
        time.mktime(time.strptime(t, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone for t in rep["times"]
    ]
    # Each episode starts within one query step (17 min at the default 7-day window).
    assert all(abs(g - e) <= 1020 for g, e in zip(got, expected, strict=True)), rep
    cited = [c.text for c in m.cites["xid_repeats"]]
    assert cited and "DCGM_FI_DEV_XID_ERRORS" in cited[0] and rep["times"][1] in cited[0]
    assert m.cites["xid_repeats"][0].line > 1 and m.cites["xid_repeats"][0].key == "prometheus"
    per_day = m.values["xid_per_day"]
    # one episode about 5 days back, one about 1 day back (each within a day of its mark)
    assert len(per_day) == 7 and sum(per_day) == 2, per_day
    assert sum(per_day[1:3]) == sum(per_day[5:]) == 1, per_day
    # A running pod whose GPU keeps losing the bus: lost-card names the repeat (RMA).
    assert facts["metrics"].values["any_xid_repeat"]
    assert _verdict(transcript) == "lost.repeated-hardware-xid"


def test_memory_climb_before_a_cuda_oom(prom: PromLab) -> None:
    ev = _metrics(prom, NODE_XID, "ml", "llm-oom-0")
    facts, _ = _walk(ev, _pod("llm-oom-0", "ml", NODE_XID))
    m = facts["metrics"].values
    [mem] = m["memory"]
    assert mem["uuid"] == UUID_OOM and mem["peak_mib"] == mem["total_mib"] == 81559
    assert 20000 <= mem["start_mib"] <= 22000  # the climb starts where the model was loaded
    assert 300 <= mem["slope_mib_per_min"] <= 360  # (81559-20480) MiB over 3 h = 339 MiB/min
    assert m["memory_rising"] and m["memory_peak_fraction"] == 1.0
    assert mem["last_mib"] == 0  # the process died: its memory was freed
    text = facts["metrics"].cites["memory"][0].text
    assert "DCGM_FI_DEV_FB_USED" in text and mem["peak_at"] in text and "▁" in text


def test_thermal_throttling_is_diagnosed_by_reason(prom: PromLab) -> None:
    ev = _metrics(prom, NODE_HOT, "nlp", "bert-0")
    facts, transcript = _walk(ev, _pod("bert-0", "nlp", NODE_HOT))
    m = facts["metrics"].values
    assert m["throttle_reasons"] == ["hw_thermal_slowdown", "sw_thermal_slowdown"]
    assert m["thermal_throttling"] and not m["power_throttling"]
    assert m["temp_max"] == 87 and m["sm_clock_min"] == 1200 and m["sm_clock_max"] == 1980
    shares = {t["reason"]: t["fraction"] for t in m["throttle"]}
    assert 0.3 <= shares["hw_thermal_slowdown"] <= 0.6, shares
    assert m["cpu_throttled_ratio"] == pytest.approx(0.05, abs=0.01) and not m["cpu_throttled"]
    assert _verdict(transcript) == "slow.gpu-thermal-throttling"
    cites = [c.text for v in transcript.visits for c in v.citations]
    assert any("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in c and UUID_HOT in c for c in cites)


def test_cfs_throttling_of_the_pod_concludes_cpu_starvation(prom: PromLab) -> None:
    ev = _metrics(prom, "gpu-node-3", "ml", "etl-0")
    facts, transcript = _walk(ev, _pod("etl-0", "ml", "gpu-node-3", cpu="2"))
    m = facts["metrics"].values
    assert m["cpu_throttled"] and m["cpu_throttled_container"] == "loader"
    assert m["cpu_throttled_ratio"] == pytest.approx(0.6, abs=0.02)
    assert m["gpus"] == []  # nothing exported for that node: no GPU verdict from metrics
    assert _verdict(transcript) == "oom.cpu-limit-starves-gpu"


def test_unreachable_prometheus_is_unknown_and_bounded() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    ev = PrometheusSource(PromSettings(f"http://127.0.0.1:{port}", timeout=3)).collect(
        Evidence(Key.POD, Status.OK, "", "", "pod.json", _pod("x-0", "ml", "gpu-node-1"), "json")
    )
    assert time.monotonic() - started < 5
    assert ev.status is Status.UNAVAILABLE and "cannot reach" in ev.detail
    facts, _ = _walk(ev, _pod("x-0", "ml", "gpu-node-1"))
    assert not facts["metrics"].known and "cannot reach" in facts["metrics"].reason


def test_bad_query_is_recorded_and_others_still_answer(prom: PromLab) -> None:
    client = PrometheusClient(PromSettings(prom.url, timeout=20))
    with pytest.raises(ValueError, match=r"bad_data|parse error"):
        client.query_range("DCGM_FI_DEV_XID_ERRORS{", prom.now - 3600, prom.now, 60)


def test_collect_then_replay_gives_the_same_verdict(
    prom: PromLab, kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    from gputriage.cli import main
    from tests.integration.conftest import node_overrides
    from tests.kubeapi.cluster import gpu_cluster

    common = [
        "-n",
        "ml",
        "--kubeconfig",
        str(kubeconfig),
        "--ssh",
        "off",
        "--prometheus",
        prom.url,
        *node_overrides(gpu_cluster()),
    ]
    live = tmp_path / "live.json"
    rc_live = main(["trainer-0", *common, "--report", "json", "-o", str(live)])
    bundle = tmp_path / "bundle"
    assert main(["collect", "trainer-0", *common, "-o", str(bundle)]) == 0
    stored = json.loads((bundle / "prometheus.json").read_text())
    assert stored["prometheus"] == prom.url and stored["node"] == NODE_XID
    assert {q["id"] for q in stored["queries"]} >= {"xid", "fb_used", "clocks_event"}
    assert json.loads((bundle / "meta.json").read_text())["sources"]["prometheus"]["status"] == "ok"
    replay = tmp_path / "replay.json"
    rc_replay = main(["trainer-0", "--from", str(bundle), "--report", "json", "-o", str(replay)])
    a, b = json.loads(live.read_text()), json.loads(replay.read_text())
    assert rc_live == rc_replay
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in b["findings"]]
    assert [(w["id"], w["target"]) for w in a["walk"]] == [
        (w["id"], w["target"]) for w in b["walk"]
    ]
    assert {s["key"]: s["status"] for s in a["sources"]}["prometheus"] == "ok"
    assert "lost.repeated-hardware-xid" in [f["id"] for f in a["findings"]]


def test_through_the_api_servers_service_proxy(
    prom: PromLab, kube_cluster: Any, kube_api: KubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    from gputriage.cli import main
    from tests.integration.conftest import node_overrides

    kube_cluster.add_service_proxy("monitoring", "prometheus-k8s", 9090, prom.url)
    common = [
        "-n",
        "ml",
        "--kubeconfig",
        str(kubeconfig),
        "--ssh",
        "off",
        *node_overrides(kube_cluster),
    ]
    out = tmp_path / "proxy.json"
    main(
        [
            "trainer-0",
            *common,
            "--prometheus",
            "svc:monitoring/prometheus-k8s:9090",
            "--report",
            "json",
            "-o",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    source = {s["key"]: s for s in report["sources"]}["prometheus"]
    assert source["status"] == "ok", source
    assert "lost.repeated-hardware-xid" in [f["id"] for f in report["findings"]]
    from urllib.parse import unquote

    proxied = [unquote(r.path) for r in kube_api.requests if "/services/" in r.path]
    assert proxied and all(
        p.startswith(
            "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy/api/v1/query_range"
        )
        for p in proxied
    )
    # A service without endpoints is "could not see", and the walk still ends.
    main(
        [
            "trainer-0",
            *common,
            "--prometheus",
            "svc:monitoring/nothing:9090",
            "--report",
            "json",
            "-o",
            str(out),
        ]
    )
    report = json.loads(out.read_text())
    source = {s["key"]: s for s in report["sources"]}["prometheus"]
    assert source["status"] == "unavailable" and "HTTP 503" in source["detail"]
    assert report["findings"]
