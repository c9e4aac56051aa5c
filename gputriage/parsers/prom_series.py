"""Read the stored Prometheus document (``prometheus.json``) and summarise time series.

Pure functions over the text :mod:`gputriage.evidence.prometheus` writes: one query per line,
each with its PromQL, status and ``series`` (``metric`` labels, ``values`` as ``[unix_time,
"value"]``). Helpers find Xid episodes, trends, throttle-reason bits and draw text sparklines.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from typing import Any

#: Label names that carry the same thing across DCGM exporter versions and scrape configs.
UUID_LABELS = ("UUID", "uuid")
GPU_LABELS = ("gpu", "GPU_I_ID")
POD_LABELS = (
    ("pod", "namespace"),
    ("exported_pod", "exported_namespace"),
    ("pod_name", "pod_namespace"),
)
MODEL_LABELS = ("modelName", "model_name")

#: NVML clocks event (throttle) reason bits (nvmlClocksEventReason*), as the DCGM exporter
#: reports them in DCGM_FI_DEV_CLOCK_THROTTLE_REASONS / DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}
#: Reasons that slow a busy GPU down (idle, sync boost, app clocks and display are benign).
SLOWING_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
POWER_REASONS = ("sw_power_cap", "hw_power_brake_slowdown")

_SPARKS = "▁▂▃▄▅▆▇█"


@dataclass
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]

    def label(self, names: tuple[str, ...]) -> str:
        return next((self.labels[n] for n in names if self.labels.get(n)), "")

    @property
    def uuid(self) -> str:
        return self.label(UUID_LABELS)

    @property
    def gpu(self) -> str:
        return self.label(GPU_LABELS)

    def pod(self) -> tuple[str, str]:
        for pod, ns in POD_LABELS:
            if self.labels.get(pod):
                return self.labels[pod], self.labels.get(ns, "")
        return "", ""


@dataclass
class QueryResult:
    id: str
    query: str
    line: int  # 1-based line of the document holding this query
    status: str
    error: str
    series: list[Series] = field(default_factory=list)
    step: float = 60.0


@dataclass
class PromDocument:
    header: dict[str, Any]
    queries: dict[str, QueryResult]

    def get(self, qid: str) -> QueryResult:
        return self.queries.get(qid) or QueryResult(qid, "", 0, "missing", "not asked")


def parse_document(text: str) -> PromDocument:
    """Parse the stored document; raises ValueError with a reason when it is not one."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError("not a Prometheus document: JSON nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("queries"), list):
        raise ValueError('no "queries" list: not a gputriage Prometheus document')
    lines = text.splitlines()
    header = {k: v for k, v in doc.items() if k != "queries"}
    out: dict[str, QueryResult] = {}
    for q in doc["queries"]:
        if not isinstance(q, dict) or not isinstance(q.get("id"), str):
            continue
        needle = f'"id":{json.dumps(q["id"])}'
        line = next((i for i, t in enumerate(lines, 1) if needle in t.replace(" ", "")), 0)
        series = []
        for s in q.get("series") or []:
            if not isinstance(s, dict):
                continue
            labels = {str(k): str(v) for k, v in (s.get("metric") or {}).items()}
            points = []
            for p in s.get("values") or []:
                try:
                    t, v = float(p[0]), float(p[1])
                except (TypeError, ValueError, IndexError):
                    continue
                # Real metric values stay far below 1e18; beyond it is junk that would
                # overflow the arithmetic of trends and sparklines.
                if math.isfinite(t) and math.isfinite(v) and abs(v) <= 1e18 and abs(t) <= 1e11:
                    points.append((t, v))
            series.append(Series(labels, sorted(points)))
        try:
            step = float(q.get("step_s") or doc.get("step_s") or 60)
        except (TypeError, ValueError):
            step = 60.0
        out[q["id"]] = QueryResult(
            q["id"],
            str(q.get("query") or ""),
            line,
            str(q.get("status") or ""),
            str(q.get("error") or ""),
            series,
            step if math.isfinite(step) and step > 0 else 60.0,
        )
    return PromDocument(header, out)


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Episode:
    value: int
    start: float
    end: float
    samples: int


def episodes(points: list[tuple[float, float]], step: float) -> list[Episode]:
    """Runs of one non-zero value; a zero, another value or a gap over 3 steps ends a run."""
    runs: list[Episode] = []
    cur: Episode | None = None
    for t, v in points:
        code = int(v)
        if code and cur and code == cur.value and t - cur.end <= 3 * step:
            cur = Episode(code, cur.start, t, cur.samples + 1)
            continue
        if cur:
            runs.append(cur)
        cur = Episode(code, t, t, 1) if code else None
    if cur:
        runs.append(cur)
    return runs


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope in units per minute (0 for fewer than two points)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in points) / den * 60.0


def throttle_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def sparkline(values: list[float], width: int = 32) -> str:
    """A text sparkline of ``values`` resampled (max per bucket) to at most ``width`` cells."""
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [
            max(values[int(i * size) : max(int(i * size) + 1, int((i + 1) * size))])
            for i in range(width)
        ]
    lo, hi = min(values), max(values)
    if hi == lo:
        return _SPARKS[0 if hi == 0 else 3] * len(values)
    return "".join(_SPARKS[min(7, int((v - lo) / (hi - lo) * 7.999))] for v in values)
