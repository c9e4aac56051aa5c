"""A real Prometheus for tests: Debian's ``prometheus`` over a TSDB backfilled by ``promtool``.

:func:`dcgm_openmetrics` writes fixture series shaped like the DCGM exporter's output (metric
names from its etc/default-counters.csv; labels ``gpu``, ``UUID``, ``device``, ``modelName``,
``Hostname``, ``DCGM_FI_DRIVER_VERSION``, ``pod``, ``namespace``, ``container``) and cAdvisor's
CFS counters, relative to ``now`` so they are inside the retention window:

* gpu-node-1 GPU 0 (``UUID_XID``): Xid 79 in two episodes, 5 days and 1 day before ``now``;
* gpu-node-1 GPU 1 (``UUID_OOM``): pod ml/llm-oom-0's framebuffer use climbs for 3 hours to
  the full 81559 MiB, then drops (the process was killed by a CUDA OOM);
* gpu-node-2 GPU 0 (``UUID_HOT``): pod nlp/bert-0 busy for 6 hours, HW+SW thermal slowdown
  active half of that time, 87 C, SM clock 1980 -> 1200 MHz;
* cAdvisor: ml/etl-0 container ``loader`` throttled in 60% of its CFS periods, nlp/bert-0
  container ``trainer`` in 5%.

:class:`PromLab` backfills with ``promtool tsdb create-blocks-from openmetrics`` and runs
``prometheus`` on 127.0.0.1 with a bounded readiness wait; ``close`` kills it by its pid.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

NODE_XID = "gpu-node-1"
NODE_HOT = "gpu-node-2"
UUID_XID = "GPU-5f1d3a7c-2b9e-4c61-8d0a-7e3f9b2c4d15"
UUID_OOM = "GPU-0c8e6b2a-91f4-4a7d-b3e5-6d2f8a1c9e40"
UUID_HOT = "GPU-b7a2e9d4-3c1f-4e8a-9b6d-2f5c7a0e1d83"
MODEL = "NVIDIA H100 80GB HBM3"
FB_TOTAL = 81559
DAY = 86400


def _labels(
    node: str, gpu: int, uuid: str, pod: str = "", ns: str = "", container: str = ""
) -> str:
    return (
        f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{0x19 + 0x22 * gpu:02X}:00.0",'
        f'device="nvidia{gpu}",modelName="{MODEL}",Hostname="{node}",'
        f'DCGM_FI_DRIVER_VERSION="535.161.08",container="{container}",namespace="{ns}",'
        f'pod="{pod}"'
    )


def _times(now: int) -> list[int]:
    """7 days at 5 minutes, the last 6 hours at 1 minute."""
    start = now - 7 * DAY + 600
    coarse = range(start - start % 300, now - 6 * 3600, 300)
    fine = range(now - 6 * 3600, now + 1, 60)
    return sorted({*coarse, *fine})


def dcgm_openmetrics(now: int) -> str:
    ts = _times(now)
    fam: dict[str, tuple[str, list[str]]] = {}

    def add(name: str, kind: str, labels: str, values: list[tuple[int, float]]) -> None:
        sample = f"{name}_total" if kind == "counter" else name
        fam.setdefault(name, (kind, []))[1].extend(
            f"{sample}{{{labels}}} {v:g} {t}" for t, v in values
        )

    xid_eps = [(now - 5 * DAY, now - 5 * DAY + 1800), (now - DAY, now - DAY + 1200)]
    g0 = _labels(NODE_XID, 0, UUID_XID, "trainer-0", "ml", "trainer")
    add(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        g0,
        [(t, 79 if any(a <= t <= b for a, b in xid_eps) else 0) for t in ts],
    )
    add("DCGM_FI_DEV_GPU_TEMP", "gauge", g0, [(t, 54) for t in ts])

    g1 = _labels(NODE_XID, 1, UUID_OOM, "llm-oom-0", "ml", "serve")
    oom_start, oom_at = now - 3 * 3600 - 600, now - 600

    def used(t: int) -> float:
        if t < oom_start or t > oom_at:
            return 0
        return 20480 + (FB_TOTAL - 20480) * (t - oom_start) / (oom_at - oom_start)

    add("DCGM_FI_DEV_FB_USED", "gauge", g1, [(t, round(used(t))) for t in ts])
    add("DCGM_FI_DEV_FB_FREE", "gauge", g1, [(t, FB_TOTAL - round(used(t))) for t in ts])
    add("DCGM_FI_DEV_XID_ERRORS", "gauge", g1, [(t, 0) for t in ts])

    g2 = _labels(NODE_HOT, 0, UUID_HOT, "bert-0", "nlp", "trainer")
    job = now - 6 * 3600

    def hot(t: int) -> bool:  # thermal slowdown in alternating 30-minute blocks of the job
        return t >= job and ((t - job) // 1800) % 2 == 1

    add("DCGM_FI_DEV_GPU_UTIL", "gauge", g2, [(t, 96 if t >= job else 0) for t in ts])
    add(
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        g2,
        [(t, (0x40 | 0x20) if hot(t) else (0 if t >= job else 0x1)) for t in ts],
    )
    add(
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        g2,
        [(t, 1200 if hot(t) else (1980 if t >= job else 345)) for t in ts],
    )
    add(
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        g2,
        [(t, 87 if hot(t) else (79 if t >= job else 38)) for t in ts],
    )
    add("DCGM_FI_DEV_XID_ERRORS", "gauge", g2, [(t, 0) for t in ts])

    for ns, pod, container, ratio in (
        ("ml", "etl-0", "loader", 0.6),
        ("nlp", "bert-0", "trainer", 0.05),
    ):
        labels = (
            f'namespace="{ns}",pod="{pod}",container="{container}",'
            f'image="registry.internal/{container}:1",name="k8s_{container}_{pod}"'
        )
        periods = [(t, (t - ts[0]) * 10) for t in ts]  # 100 ms CFS period: 10 per second
        add("container_cpu_cfs_periods", "counter", labels, periods)
        add(
            "container_cpu_cfs_throttled_periods",
            "counter",
            labels,
            [(t, round(v * ratio)) for t, v in periods],
        )

    out: list[str] = []
    for name, (kind, lines) in fam.items():
        out += [f"# TYPE {name} {kind}", *lines]
    return "\n".join(out) + "\n# EOF\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PromLab:
    root: Path
    prometheus: str
    promtool: str
    now: int = field(default_factory=lambda: int(time.time()) // 60 * 60)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_within: float = 30.0) -> PromLab:
        data = self.root / "dcgm.om"
        data.write_text(dcgm_openmetrics(self.now), encoding="utf-8")
        tsdb = self.root / "tsdb"
        subprocess.run(
            [self.promtool, "tsdb", "create-blocks-from", "openmetrics", str(data), str(tsdb)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        config = self.root / "prom.yml"
        config.write_text("global:\n  scrape_interval: 1m\n", encoding="utf-8")
        self.port = free_port()
        log = (self.root / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                self.prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={tsdb}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=15d",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + ready_within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.close()
        tail = (self.root / "prometheus.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"prometheus did not become ready in {ready_within} s:\n{tail}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
