"""Fact group ``metrics``: GPU history from Prometheus (DCGM exporter) and cAdvisor.

Built from ``Key.PROMETHEUS`` (the document :mod:`gputriage.evidence.prometheus` stores).
Xid episodes per GPU with their times, repeats of one Xid on one UUID, the memory trend of the
pod's GPUs (peak, slope, sparkline), clock throttle reasons over time, error counters that rose
in the window, and CFS throttling of the pod's containers. Every field is cited by the query's
line in ``prometheus.json`` with the times and values that decided it.

The pod's GPUs are the series whose pod labels (``pod``/``namespace``, ``exported_pod``/...,
``pod_name``/... across exporter versions and scrape configs) name the target pod; when no
series carries them, every GPU of the node counts and ``pod_gpus_from_labels`` is false.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef
from gputriage.facts.model import (
    FactGroup,
    FieldSpec,
    GroupSpec,
    Target,
    known,
    unknown,
    unknown_from,
)
from gputriage.parsers.prom_series import (
    MODEL_LABELS,
    POWER_REASONS,
    SLOWING_REASONS,
    THERMAL_REASONS,
    PromDocument,
    QueryResult,
    Series,
    episodes,
    iso,
    parse_document,
    slope_per_min,
    sparkline,
    throttle_reasons,
)

#: A reason active in at least this share of a GPU's busy samples counts as throttling.
THROTTLE_MIN_FRACTION = 0.2
#: CFS throttling at or above this share of periods starves the GPUs' feeders.
CPU_THROTTLE_MIN = 0.25
#: Counters whose increase over the window means hardware trouble.
ERROR_COUNTERS = ("pcie_replay", "ecc_dbe", "remap_unc", "remap_failure", "nvlink_crc")

SPEC = GroupSpec(
    name="metrics",
    doc="GPU metrics history from Prometheus (DCGM exporter, cAdvisor) over a window (default "
    "7 days): Xid episodes and repeats per GPU, the memory trend of the pod's GPUs, clock "
    "throttle reasons over time, error counters rising, CFS throttling of the pod.",
    sources=(Key.PROMETHEUS,),
    fields={
        "prometheus": FieldSpec("string", "", "The Prometheus URL asked (no credentials)."),
        "window_start": FieldSpec("string", "", "Start of the window (UTC, RFC 3339)."),
        "window_end": FieldSpec("string", "", "End of the window (UTC, RFC 3339)."),
        "step_s": FieldSpec("int", 0, "Resolution of the range queries in seconds."),
        "gpus": FieldSpec(
            "list<map>", [], "GPUs seen on the node: {uuid, gpu, model, pod, namespace}."
        ),
        "pod_gpus": FieldSpec(
            "list<string>", [], "UUIDs of the pod's GPUs (see pod_gpus_from_labels)."
        ),
        "pod_gpu_indexes": FieldSpec(
            "list<int>", [], "nvidia-smi indexes (the exporter's gpu label) of the pod's GPUs."
        ),
        "pod_gpus_from_labels": FieldSpec(
            "bool", False, "The exporter's pod labels name the target pod (else: all node GPUs)."
        ),
        "xid_episodes": FieldSpec(
            "list<map>",
            [],
            "{uuid, gpu, code, start, end, samples}: "
            "runs of one Xid value in "
            "DCGM_FI_DEV_XID_ERRORS.",
        ),
        "xid_codes": FieldSpec("list<int>", [], "Distinct Xid codes seen in the window."),
        "xid_repeats": FieldSpec(
            "list<map>",
            [],
            "{uuid, gpu, code, count, times}: one Xid seen in two or more episodes on one GPU.",
        ),
        "any_xid_repeat": FieldSpec("bool", False, "Some GPU had the same Xid twice or more."),
        "xid_per_day": FieldSpec(
            "list<int>",
            [],
            "Xid episodes per day of the window, oldest first (the last entry is the last 24 h).",
        ),
        "memory": FieldSpec(
            "list<map>",
            [],
            "Per pod GPU: {uuid, gpu, total_mib, start_mib, "
            "start_at (the climb to the peak), peak_mib, "
            "peak_at, last_mib, slope_mib_per_min (of the "
            "climb), peak_fraction, spark}.",
        ),
        "memory_peak_fraction": FieldSpec(
            "float", -1.0, "Largest framebuffer use / size over the pod's GPUs (-1 unknown)."
        ),
        "memory_rising": FieldSpec(
            "bool",
            False,
            "A pod GPU's memory climbed over the window (positive slope, peak above 1.5x start).",
        ),
        "throttle": FieldSpec(
            "list<map>",
            [],
            "{uuid, gpu, reason, fraction, first, last}: "
            "slowing reasons and the share of busy samples "
            "they were active.",
        ),
        "throttle_reasons": FieldSpec(
            "list<string>",
            [],
            "Slowing reasons active in at least 20% of a pod GPU's busy samples.",
        ),
        "thermal_throttling": FieldSpec("bool", False, "sw/hw thermal slowdown among them."),
        "power_throttling": FieldSpec("bool", False, "sw power cap or hw power brake among them."),
        "hw_slowdown": FieldSpec("bool", False, "hw_slowdown among them."),
        "temp_max": FieldSpec("int", -1, "Highest GPU temperature of the pod's GPUs (C)."),
        "sm_clock_min": FieldSpec("int", -1, "Lowest SM clock while busy (MHz)."),
        "sm_clock_max": FieldSpec("int", -1, "Highest SM clock (MHz)."),
        "errors_rising": FieldSpec(
            "list<map>",
            [],
            "{counter, uuid, gpu, increase}: error counters that rose in the window.",
        ),
        "cpu_throttled_ratio": FieldSpec(
            "float",
            -1.0,
            "Largest share of CFS periods throttled (5m rate) of a pod container (-1 unknown).",
        ),
        "cpu_throttled_container": FieldSpec("string", "", "The container with that ratio."),
        "cpu_throttled": FieldSpec("bool", False, "cpu_throttled_ratio >= 0.25."),
        "failed_queries": FieldSpec("list<string>", [], "Queries that failed: id: error."),
    },
)


def build(evidence: EvidenceSet, target: Target, earlier: Mapping[str, FactGroup]) -> FactGroup:
    ev = evidence.get_or_missing(Key.PROMETHEUS)
    if not ev.ok:
        return unknown_from(SPEC, ev)
    try:
        doc = parse_document(ev.raw)
    except ValueError as exc:
        return unknown(SPEC, f"{ev.source}: cannot read the Prometheus document: {exc}")
    return _facts(doc, ev, target)


def _cite(ev: Evidence, q: QueryResult, text: str) -> LineRef:
    return LineRef(ev.key.value, ev.source, q.line, f"{q.query} | {text}")


def _facts(doc: PromDocument, ev: Evidence, target: Target) -> FactGroup:
    header = doc.header
    step = float(header.get("step_s") or 60)
    cites: dict[str, list[LineRef]] = {}
    values: dict[str, Any] = {
        "prometheus": str(header.get("prometheus") or ""),
        "window_start": iso(float(header["start"])) if header.get("start") else "",
        "window_end": iso(float(header["end"])) if header.get("end") else "",
        "step_s": int(step),
        "failed_queries": [f"{q.id}: {q.error}" for q in doc.queries.values() if q.status != "ok"],
    }
    # --- which GPUs: every series of every node query names one ----------------------------
    gpus: dict[str, dict[str, str]] = {}
    mine: set[str] = set()
    for q in doc.queries.values():
        for s in q.series:
            if not s.uuid:
                continue
            info = gpus.setdefault(
                s.uuid,
                {
                    "uuid": s.uuid,
                    "gpu": s.gpu,
                    "model": s.label(MODEL_LABELS),
                    "pod": "",
                    "namespace": "",
                },
            )
            pod, ns = s.pod()
            if pod:
                info["pod"], info["namespace"] = pod, ns
                if pod == target.pod and (not ns or ns == target.namespace):
                    mine.add(s.uuid)
    values["gpus"] = sorted(gpus.values(), key=lambda g: (_int(g["gpu"]), g["uuid"]))
    values["pod_gpus_from_labels"] = bool(mine)
    pod_gpus = mine or set(gpus)
    values["pod_gpus"] = sorted(pod_gpus)
    values["pod_gpu_indexes"] = sorted(
        {_int(gpus[u]["gpu"]) for u in pod_gpus if _int(gpus[u]["gpu"]) >= 0}
    )

    # --- Xid history ---------------------------------------------------------------------
    xq = doc.get("xid")
    eps: list[dict[str, Any]] = []
    for s in _by_gpu(xq.series):
        for e in episodes(s.points, xq.step):
            eps.append(
                {
                    "uuid": s.uuid,
                    "gpu": s.gpu,
                    "code": e.value,
                    "start": iso(e.start),
                    "end": iso(e.end),
                    "samples": e.samples,
                }
            )
    eps.sort(key=lambda e: (e["start"], e["gpu"]))
    values["xid_episodes"] = eps
    values["xid_codes"] = sorted({e["code"] for e in eps})
    repeats: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for ep in eps:
        repeats.setdefault((ep["uuid"], ep["code"]), []).append(ep)
    values["xid_repeats"] = [
        {
            "uuid": u,
            "gpu": es[0]["gpu"],
            "code": c,
            "count": len(es),
            "times": [e["start"] for e in es],
        }
        for (u, c), es in sorted(repeats.items())
        if len(es) >= 2
    ]
    values["any_xid_repeat"] = bool(values["xid_repeats"])
    end = float(header.get("end") or 0)
    start = float(header.get("start") or 0)
    days = max(1, min(90, round((end - start) / 86400))) if end > start else 0
    per_day = [0] * days
    for gpu_series in _by_gpu(xq.series):
        for run in episodes(gpu_series.points, xq.step):
            back = int((end - run.start) // 86400)
            if 0 <= back < days:
                per_day[days - 1 - back] += 1
    values["xid_per_day"] = per_day if any(per_day) else []
    if any(per_day):
        spark = sparkline([float(n) for n in per_day], days)
        cites["xid_per_day"] = [
            _cite(ev, xq, f"Xid episodes per day, {days} days to {iso(end)}: {spark} {per_day}")
        ]
    cites["xid_episodes"] = [
        _cite(
            ev, xq, f"GPU {e['gpu']} {e['uuid']}: Xid {e['code']} from {e['start']} to {e['end']}"
        )
        for e in eps
    ]
    cites["xid_codes"] = cites["xid_episodes"]
    cites["xid_repeats"] = [
        _cite(
            ev,
            xq,
            f"GPU {r['gpu']} {r['uuid']}: Xid {r['code']} "
            f"{r['count']} times, at {', '.join(r['times'])}",
        )
        for r in values["xid_repeats"]
    ]
    cites["any_xid_repeat"] = cites["xid_repeats"]

    # --- memory trend ----------------------------------------------------------------------
    used_q, free_q = doc.get("fb_used"), doc.get("fb_free")
    free_last = {s.uuid: s.points[-1][1] for s in free_q.series if s.uuid and s.points}
    free_at = {s.uuid: dict(s.points) for s in free_q.series if s.uuid}
    memory: list[dict[str, Any]] = []
    for s in _by_gpu(used_q.series):
        if s.uuid not in pod_gpus or not s.points:
            continue
        t_peak, peak = max(s.points, key=lambda p: p[1])
        # The climb to the peak: from the last sample at zero (the process started) on.
        upto = [p for p in s.points if p[0] <= t_peak]
        zero = max((i for i, (_, v) in enumerate(upto) if v <= 0), default=-1)
        climb = upto[zero + 1 :] or upto[-1:]
        total = peak + free_at.get(s.uuid, {}).get(t_peak, free_last.get(s.uuid, -1.0))
        fraction = round(peak / total, 3) if total > 0 and s.uuid in free_at else -1.0
        memory.append(
            {
                "uuid": s.uuid,
                "gpu": s.gpu,
                "total_mib": int(total) if total > 0 else -1,
                "start_mib": int(climb[0][1]),
                "start_at": iso(climb[0][0]),
                "peak_mib": int(peak),
                "peak_at": iso(t_peak),
                "last_mib": int(s.points[-1][1]),
                "slope_mib_per_min": round(slope_per_min(climb), 2),
                "peak_fraction": fraction,
                "spark": sparkline([v for _, v in s.points]),
            }
        )
    values["memory"] = memory
    values["memory_peak_fraction"] = max((m["peak_fraction"] for m in memory), default=-1.0)
    values["memory_rising"] = any(
        m["slope_mib_per_min"] > 0 and m["peak_mib"] > 1.5 * max(1, m["start_mib"]) for m in memory
    )
    cites["memory"] = [
        _cite(
            ev,
            used_q,
            f"GPU {m['gpu']} {m['uuid']}: {m['spark']} "
            f"{m['start_mib']} MiB at {m['start_at']} -> peak "
            f"{m['peak_mib']} MiB at {m['peak_at']} (of "
            f"{m['total_mib']} MiB), "
            f"{m['slope_mib_per_min']:+g} MiB/min",
        )
        for m in memory
    ]
    for k in ("memory_peak_fraction", "memory_rising"):
        cites[k] = cites["memory"]

    # --- throttling ------------------------------------------------------------------------
    util = {s.uuid: dict(s.points) for s in doc.get("gpu_util").series if s.uuid}
    throttle: list[dict[str, Any]] = []
    tq = doc.get("clocks_event") if doc.get("clocks_event").series else doc.get("throttle")
    for s in _by_gpu(tq.series):
        if s.uuid not in pod_gpus:
            continue
        busy = [
            (t, int(v))
            for t, v in s.points
            if not int(v) & 0x1 and util.get(s.uuid, {}).get(t, 100.0) > 0
        ]
        for reason in SLOWING_REASONS:
            hits = [t for t, m in busy if reason in throttle_reasons(m)]
            if hits:
                throttle.append(
                    {
                        "uuid": s.uuid,
                        "gpu": s.gpu,
                        "reason": reason,
                        "fraction": round(len(hits) / len(busy), 3),
                        "first": iso(hits[0]),
                        "last": iso(hits[-1]),
                    }
                )
    values["throttle"] = throttle
    reasons = sorted({t["reason"] for t in throttle if t["fraction"] >= THROTTLE_MIN_FRACTION})
    values["throttle_reasons"] = reasons
    values["thermal_throttling"] = any(r in THERMAL_REASONS for r in reasons)
    values["power_throttling"] = any(r in POWER_REASONS for r in reasons)
    values["hw_slowdown"] = "hw_slowdown" in reasons
    temps = doc.get("gpu_temp")
    temp_points = [p for s in temps.series if s.uuid in pod_gpus for p in s.points]
    values["temp_max"] = int(max((v for _, v in temp_points), default=-1))
    clock = doc.get("sm_clock")
    busy_clock = [
        v
        for s in clock.series
        if s.uuid in pod_gpus
        for t, v in s.points
        if util.get(s.uuid, {}).get(t, 100.0) > 0
    ]
    values["sm_clock_min"] = int(min(busy_clock, default=-1))
    values["sm_clock_max"] = int(
        max((v for s in clock.series if s.uuid in pod_gpus for _, v in s.points), default=-1)
    )
    tcites = [
        _cite(
            ev,
            tq,
            f"GPU {t['gpu']} {t['uuid']}: {t['reason']} active in "
            f"{t['fraction']:.0%} of busy samples, {t['first']} .. {t['last']}",
        )
        for t in throttle
    ]
    tcites += [
        _cite(
            ev,
            temps,
            f"GPU {s.gpu} {s.uuid}: temperature "
            f"{sparkline([v for _, v in s.points])} max "
            f"{int(max(v for _, v in s.points))} C",
        )
        for s in _by_gpu(temps.series)
        if s.uuid in pod_gpus and s.points
    ]
    tcites += [
        _cite(
            ev,
            clock,
            f"GPU {s.gpu} {s.uuid}: SM clock "
            f"{sparkline([v for _, v in s.points])} "
            f"{int(min(v for _, v in s.points))}-"
            f"{int(max(v for _, v in s.points))} MHz",
        )
        for s in _by_gpu(clock.series)
        if s.uuid in pod_gpus and s.points
    ]
    for k in (
        "throttle",
        "throttle_reasons",
        "thermal_throttling",
        "power_throttling",
        "hw_slowdown",
        "temp_max",
        "sm_clock_min",
        "sm_clock_max",
    ):
        cites[k] = tcites

    # --- error counters --------------------------------------------------------------------
    rising = []
    for qid in ERROR_COUNTERS:
        q = doc.get(qid)
        for s in _by_gpu(q.series):
            if len(s.points) >= 2 and s.points[-1][1] > s.points[0][1]:
                rising.append(
                    {
                        "counter": qid,
                        "uuid": s.uuid,
                        "gpu": s.gpu,
                        "increase": int(s.points[-1][1] - s.points[0][1]),
                    }
                )
                cites.setdefault("errors_rising", []).append(
                    _cite(
                        ev,
                        q,
                        f"GPU {s.gpu} {s.uuid}: {int(s.points[0][1])} at "
                        f"{iso(s.points[0][0])} -> {int(s.points[-1][1])} at "
                        f"{iso(s.points[-1][0])}",
                    )
                )
    values["errors_rising"] = rising

    # --- CPU (CFS) throttling ------------------------------------------------------------
    cq = doc.get("cpu_throttled")
    best, who, when = -1.0, "", 0.0
    for s in cq.series:
        if not s.points:
            continue
        mean = sum(v for _, v in s.points) / len(s.points)
        if mean > best:
            best, who, when = mean, s.labels.get("container", ""), s.points[-1][0]
    values["cpu_throttled_ratio"] = round(best, 3) if best >= 0 else -1.0
    values["cpu_throttled_container"] = who
    values["cpu_throttled"] = best >= CPU_THROTTLE_MIN
    if best >= 0:
        ccite = [
            _cite(
                ev,
                cq,
                f"container {who}: {best:.0%} of CFS periods throttled on "
                f"average (5m rate), last sample {iso(when)}",
            )
        ]
        for k in ("cpu_throttled_ratio", "cpu_throttled", "cpu_throttled_container"):
            cites[k] = ccite
    return known(SPEC, values, cites)


def _by_gpu(series: list[Series]) -> list[Series]:
    """One series per UUID, in GPU order. A GPU's series differ by pod labels (the exporter
    relabels as pods come and go) and by the node-label variant that matched: merge them."""
    merged: dict[str, tuple[Series, dict[float, float]]] = {}
    for s in series:
        if not s.uuid:
            continue
        _, points = merged.setdefault(s.uuid, (s, {}))
        for t, v in s.points:
            points[t] = max(v, points.get(t, v))
    out = [Series(first.labels, sorted(points.items())) for first, points in merged.values()]
    return sorted(out, key=lambda s: (_int(s.gpu), s.uuid))


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) <= 6 else -1
