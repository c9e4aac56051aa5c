"""Parse why a pod is unschedulable: ``0/N nodes are available: ...`` in every generation.

The kube-scheduler envelope (k8s-messages.md 2.1) is ``0/N nodes are available: <PreFilter or
Filter histogram>. <PostFilter>``. The histogram is ``<count> <reason>`` entries sorted with
``sort.Strings`` and joined by ``", "``; PostFilter text (``preemption: 0/N nodes are available:
...``, DRA's ``no new claims to deallocate`` / ``still not schedulable``) follows the first
``". "``. Reasons changed wording across releases; :data:`GENERATIONS` names each era so a
verdict can say which wording it read. cluster-autoscaler ``NotTriggerScaleUp``, KAI-scheduler,
Volcano (``0/N nodes are unavailable: ...``) and HAMi (``FilteringFailed``: ``N nodes
<Reason>(<nodes>)``) texts are parsed here too (k8s-messages.md 2.5, 2.6). Volcano's gang
messages (``pod group is not ready``) carry no per-node reason: they are attributed to Volcano
but not recognised as a verdict.

:func:`parse_scheduler_message` never raises: text it does not recognise comes back with
``recognised=False`` and the first sentence as the PreFilter text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

#: Reason kinds, as playbooks see them.
KINDS = (
    "insufficient",
    "taint",
    "selector",
    "unschedulable",
    "too_many_pods",
    "volume",
    "dra",
    "prefilter",
    "other",
)

#: Wording generations, oldest first, with the Kubernetes releases that printed them.
GENERATIONS: dict[str, str] = {
    "fit-failure": "k8s <= 1.5: 'pod (P) failed to fit in any node' + 'fit failure summary on "
    "nodes : PodToleratesNodeTaints (1)' or one 'fit failure on node (N): ...' "
    "line per node",
    "predicates-summary": "k8s ~1.6-1.8: 'No nodes are available that match all of the "
    "following predicates:: Insufficient cpu (4).'",
    "predicates": "k8s <= 1.9: predicate names (PodToleratesNodeTaints, MatchNodeSelector)",
    "predicate-descriptions": "k8s ~1.10-1.17: 'node(s) had taints that the pod didn't "
    "tolerate', 'node(s) didn't match node selector'",
    "taint-didnt-tolerate": "k8s ~1.18-1.25: 'node(s) had taint {k: v}, that the pod didn't "
    "tolerate'",
    "untolerated-taint": "k8s ~1.26-1.33: 'node(s) had untolerated taint {k: v}'",
    "untolerated-taints": "k8s ~1.34+: 'node(s) had untolerated taint(s)' (no key printed)",
    "framework": "scheduler-framework wording (k8s 1.18+) without a taint reason to date it",
    "autoscaler": "cluster-autoscaler NotTriggerScaleUp ('pod didn't trigger scale-up: ...')",
    "kai": "KAI-scheduler ('no nodes with enough resources were found: ...')",
    "volcano": "Volcano ('0/N nodes are unavailable: ...', 'all nodes are unavailable: ...')",
    "hami": "HAMi scheduler extender FilteringFailed ('no available node, N nodes do not meet', "
    "'N nodes CardInsufficientMemory(node-a,...)')",
}

#: HAMi's per-node failure reasons (pkg/device/common) that mean "the GPUs are taken or too
#: small": the resource they are short of, as the scheduler facts count it.
_HAMI_SHORTAGES: dict[str, str] = {
    "NodeInsufficientDevice": "nvidia.com/gpu",
    "AllocatedCardsInsufficientRequest": "nvidia.com/gpu",
    "CardTimeSlicingExhausted": "nvidia.com/gpu",
    "ExclusiveDeviceAllocateConflict": "nvidia.com/gpu",
    "CardInsufficientMemory": "nvidia.com/gpumem",
    "CardInsufficientCore": "nvidia.com/gpucores",
}

_PREDICATE_NAMES = frozenset(
    {
        "PodToleratesNodeTaints",
        "MatchNodeSelector",
        "NodeUnschedulable",
        "HostName",
        "PodFitsHostPorts",
        "PodFitsResources",
        "MatchInterPodAffinity",
        "NoDiskConflict",
        "NoVolumeZoneConflict",
        "MaxVolumeCount",
        "CheckNodeMemoryPressure",
        "CheckNodeDiskPressure",
        "CheckNodeCondition",
        "CheckNodePIDPressure",
        "NodeNotReady",
        "CheckVolumeBinding",
        "GeneralPredicates",
    }
)

_ENVELOPE = re.compile(r"(?<!preemption: )0/(\d+) nodes are available(?::\s*|\.?\s*$)")
_PREEMPTION = re.compile(r"preemption:\s*0/(\d+) nodes are available:?\s*(.*)$", re.S)
_AUTOSCALER = re.compile(r"pod didn't trigger scale-up(?: \([^)]*\))?:\s*(?P<body>.*)$", re.S)
_KAI = re.compile(r"no nodes with enough resources were found:?\s*(?P<body>.*)$", re.S | re.I)
_VOLCANO = re.compile(r"(?:\b0/(\d+)|\ball) nodes are unavailable(?::\s*|\.?\s*$)")
_GANG = re.compile(r"\d+/\d+ tasks in gang unschedulable|^(?:pod group|job) is not ready\b")
_HAMI_NONE = re.compile(r"^no available node, (?:(\d+) nodes?|all node scores) do not meet")
#: k8s ~1.6-1.8 (kubernetes#53465): counts follow each reason in parentheses.
_SUMMARY = re.compile(
    r"No nodes are available that match all of the following predicates"
    r"::?\s*(?P<body>.*)$",
    re.S,
)
#: k8s <= 1.5 (kubernetes#41070, #37232): a summary line or one line per node.
_FIT_FAILURE = re.compile(r"failed to fit in any node\b")
_FIT_SUMMARY = re.compile(r"fit failure summary on nodes ?: ?(?P<body>.*)$", re.M)
_FIT_NODE = re.compile(r"^\s*fit failure on node \((?P<node>[^()]*)\): ?(?P<reason>.+?)\s*$", re.M)
_SUMMARY_ENTRY = re.compile(r"(?P<reason>[^,()]+?) \((?P<count>\d+)\)")
_HAMI_ENTRY = re.compile(r"^(\d+) nodes? (?:failed: )?([A-Za-z]+) ?\(([^()]*)\)")
_ENTRY = re.compile(r"^(\d+)\s+(.+)$", re.S)
_MAX_COUNT_DIGITS = 9
_TAINT_KV = re.compile(r"\{(?P<key>[^:{}]+): ?(?P<value>[^{}]*)\}")
_KAI_SHORTAGE = re.compile(r"didn't have enough (?:resources|of mig profile):\s*(?P<resource>\S+)")


@dataclass(frozen=True)
class Reason:
    """One histogram entry (or the PreFilter sentence, which applies to every node)."""

    count: int
    kind: str
    text: str
    resource: str = ""  # for kind "insufficient": the resource named
    taint_key: str = ""  # for kind "taint", when the message printed it
    taint_value: str = ""
    prefilter: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "kind": self.kind,
            "text": self.text,
            "resource": self.resource,
            "taint_key": self.taint_key,
            "taint_value": self.taint_value,
            "prefilter": self.prefilter,
        }


@dataclass(frozen=True)
class Preemption:
    """The ``preemption: 0/N nodes are available: ...`` tail."""

    total_nodes: int
    not_helpful: int  # nodes where preemption can never help (taint, selector, no resource)
    no_victims: int  # nodes that would fit by evicting pods, but none have lower priority
    reasons: tuple[Reason, ...] = ()

    @property
    def helpful(self) -> bool:
        """True when some node could fit by evicting pods (the resource exists but is busy)."""
        return self.no_victims > 0


@dataclass(frozen=True)
class SchedulerMessage:
    """A parsed scheduler (or autoscaler / KAI) message."""

    raw: str
    recognised: bool  # an envelope, autoscaler or KAI text was found
    total_nodes: int  # 0 when the text does not say (autoscaler, bare PreFilter text)
    reasons: tuple[Reason, ...] = ()
    prefilter: str = ""
    preemption: Preemption | None = None
    notes: tuple[str, ...] = ()  # other PostFilter text ("no new claims to deallocate")
    generation: str = ""  # a key of GENERATIONS, "" when not recognised
    scheduler: str = ""  # kube-scheduler, cluster-autoscaler, kai-scheduler, volcano...

    def count(self, kind: str) -> int:
        """Nodes rejected for reasons of ``kind`` (sum of the histogram counts)."""
        return sum(r.count for r in self.reasons if r.kind == kind)

    def insufficient(self) -> dict[str, int]:
        """Resource -> number of nodes short of it."""
        out: dict[str, int] = {}
        for r in self.reasons:
            if r.kind == "insufficient" and r.resource:
                out[r.resource] = out.get(r.resource, 0) + r.count
        return out


def parse_scheduler_message(text: str) -> SchedulerMessage:
    """Parse one FailedScheduling / NotTriggerScaleUp / PodScheduled message. Never raises."""
    raw = text if isinstance(text, str) else ""
    clean = raw.strip()
    if not clean:
        return SchedulerMessage(raw, False, 0)
    auto = _AUTOSCALER.search(clean)
    if auto:
        reasons = tuple(_reason(e) for e in _split_entries(_strip_dots(auto["body"])))
        return SchedulerMessage(
            raw, True, 0, reasons, generation="autoscaler", scheduler="cluster-autoscaler"
        )
    kai = _KAI.search(clean)
    if kai:
        entries = re.split(r"\.\s+(?=\d+ )|\n+|, (?=\d+ )", kai["body"])
        reasons = tuple(_reason(_strip_dots(e)) for e in entries if _strip_dots(e))
        return SchedulerMessage(raw, True, 0, reasons, generation="kai", scheduler="kai-scheduler")
    if _GANG.search(clean):
        return SchedulerMessage(raw, False, 0, scheduler="volcano")
    hami = _parse_hami(raw, clean)
    if hami is not None:
        return hami
    old = _parse_pre_framework(raw, clean)
    if old is not None:
        return old
    volcano = None if _ENVELOPE.search(clean) else _VOLCANO.search(clean)
    if volcano:
        msg = _parse_envelope(raw, clean, volcano)
        return replace(msg, generation="volcano", scheduler="volcano")
    return _parse_envelope(raw, clean)


def _parse_hami(raw: str, clean: str) -> SchedulerMessage | None:
    """HAMi's FilteringFailed texts (pkg/scheduler/scheduler.go, score.go), one per event."""
    none = _HAMI_NONE.match(clean)
    if none:
        total = _count(none.group(1)) if none.group(1) else 0
        return SchedulerMessage(
            raw,
            True,
            total,
            (Reason(total, "other", _strip_dots(clean)),),
            generation="hami",
            scheduler="hami-scheduler",
        )
    entry = _HAMI_ENTRY.match(clean)
    if not entry:
        return None
    count, name = _count(entry.group(1)), entry.group(2)
    resource = _HAMI_SHORTAGES.get(name, "")
    return SchedulerMessage(
        raw,
        True,
        0,
        (Reason(count, "insufficient" if resource else "other", name, resource),),
        generation="hami",
        scheduler="hami-scheduler",
    )


def _parse_pre_framework(raw: str, clean: str) -> SchedulerMessage | None:
    """The envelopes before ``0/N nodes are available`` (k8s <= 1.8): reasons with counts in
    parentheses, or one ``fit failure on node (N): reason`` line per node."""
    summary = _SUMMARY.search(clean)
    generation = "predicates-summary"
    body = summary["body"] if summary else ""
    if not summary and _FIT_FAILURE.search(clean):
        generation = "fit-failure"
        fit = _FIT_SUMMARY.search(clean)
        if fit:
            body = fit["body"]
        else:
            counts: dict[str, int] = {}
            nodes = 0
            for m in _FIT_NODE.finditer(clean):
                nodes += 1
                for reason in _strip_dots(m["reason"]).split(", "):
                    counts[reason] = counts.get(reason, 0) + 1
            reasons = tuple(_reason(f"{n} {r}") for r, n in counts.items())
            return SchedulerMessage(
                raw, True, nodes, reasons, generation=generation, scheduler="kube-scheduler"
            )
    elif not summary:
        return None
    reasons = tuple(
        _reason(f"{_count(m['count'])} {m['reason'].strip()}")
        for m in _SUMMARY_ENTRY.finditer(_strip_dots(body))
    )
    return SchedulerMessage(
        raw, True, 0, reasons, generation=generation, scheduler="kube-scheduler"
    )


def _parse_envelope(raw: str, clean: str, env: re.Match[str] | None = None) -> SchedulerMessage:
    env = env or _ENVELOPE.search(clean)
    total = _count(env.group(1)) if env and env.group(1) else 0
    head = clean[env.end() :] if env else clean
    body, rest = _first_sentence(head)
    preemption, notes = _postfilter(rest)
    if not total and preemption:
        total = preemption.total_nodes
    prefilter = ""
    reasons: tuple[Reason, ...]
    if re.match(r"\d+\s", body):
        reasons = tuple(_reason(e) for e in _split_entries(body))
    elif body:
        prefilter = body
        kind, resource, key, value = _classify(body)
        reasons = (
            Reason(
                total,
                "prefilter" if kind == "other" else kind,
                body,
                resource,
                key,
                value,
                prefilter=True,
            ),
        )
    else:
        reasons = ()
    # A preemption tail without an envelope is still the scheduler talking (classic DRA).
    recognised = env is not None or preemption is not None
    msg = SchedulerMessage(raw, recognised, total, reasons, prefilter, preemption, notes)
    return _with_generation(msg) if recognised else msg


def _with_generation(msg: SchedulerMessage) -> SchedulerMessage:
    texts = [r.text for r in msg.reasons]
    generation = "framework"
    if any(t in _PREDICATE_NAMES for t in texts):
        generation = "predicates"
    elif any(
        "had taints that the pod didn't tolerate" in t or "didn't match node selector" in t
        for t in texts
    ):
        generation = "predicate-descriptions"
    elif any("had untolerated taint(s)" in t for t in texts):
        generation = "untolerated-taints"
    elif any("had untolerated taint {" in t for t in texts):
        generation = "untolerated-taint"
    elif any("that the pod didn't tolerate" in t for t in texts):
        generation = "taint-didnt-tolerate"
    return SchedulerMessage(
        msg.raw,
        msg.recognised,
        msg.total_nodes,
        msg.reasons,
        msg.prefilter,
        msg.preemption,
        msg.notes,
        generation,
        "kube-scheduler",
    )


def _first_sentence(text: str) -> tuple[str, str]:
    """Split at the first ``". "`` outside braces (taint values are printed in braces)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] in " \n"):
            return text[:i].strip(), text[i + 1 :].strip()
    return _strip_dots(text), ""


def _postfilter(rest: str) -> tuple[Preemption | None, tuple[str, ...]]:
    if not rest:
        return None, ()
    m = _PREEMPTION.search(rest)
    before = rest[: m.start()] if m else rest
    notes = tuple(n for n in (_strip_dots(p) for p in re.split(r",\s+|\.\s+", before)) if n)
    if not m:
        return None, notes
    entries = [_reason(e) for e in _split_entries(_strip_dots(m.group(2)))]
    not_helpful = sum(r.count for r in entries if "not helpful" in r.text)
    no_victims = sum(r.count for r in entries if "No preemption victims" in r.text)
    return Preemption(_count(m.group(1)), not_helpful, no_victims, tuple(entries)), notes


def _split_entries(body: str) -> list[str]:
    """Split a histogram on ``", "`` before a count, never inside ``{...}``."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and body.startswith(", ", i) and re.match(r"\d+ ", body[i + 2 :]):
            parts.append(body[start:i])
            start = i + 2
            i += 1
        i += 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def _reason(entry: str) -> Reason:
    m = _ENTRY.match(entry.strip())
    count, text = (_count(m.group(1)), m.group(2).strip()) if m else (0, entry.strip())
    kind, resource, key, value = _classify(text)
    return Reason(count, kind, text, resource, key, value)


def _classify(text: str) -> tuple[str, str, str, str]:
    """(kind, resource, taint key, taint value) of one reason phrase."""
    lower = text.lower()
    m = re.fullmatch(r"Insufficient (\S+)", text)
    if m:
        if m.group(1) == "pods":
            return "too_many_pods", "", "", ""
        return "insufficient", m.group(1), "", ""
    if lower.startswith("too many pods") or "pod number exceeded" in lower:
        return "too_many_pods", "", "", ""
    m = _KAI_SHORTAGE.search(text)
    if m:
        resource = m["resource"].rstrip(".")
        if resource.lower() in ("gpu", "gpus"):
            resource = "nvidia.com/gpu"  # KAI says "GPUs" for whole devices
        return "insufficient", resource, "", ""
    if "taint" in lower:
        kv = _TAINT_KV.search(text)
        if kv:
            return "taint", "", kv["key"].strip(), kv["value"].strip()
        return "taint", "", "", ""
    if "volume" in lower or "pvc" in lower or text in ("NoDiskConflict", "CheckVolumeBinding"):
        return "volume", "", "", ""
    if re.search(
        r"node affinity|node selector|requested node name|requested hostname", lower
    ) or text in ("MatchNodeSelector", "HostName"):
        return "selector", "", "", ""
    if "unschedulable" in lower:
        return "unschedulable", "", "", ""
    if re.search(
        r"claim|device ?class|resource ?class|dynamic ?resource|resource driver"
        r"|resourceslice",
        lower,
    ):
        return "dra", "", "", ""
    return "other", "", "", ""


def _count(digits: str) -> int:
    """A node count; 0 for a number no cluster has (and ``int()`` refuses past 4,300 digits)."""
    return int(digits) if len(digits) <= _MAX_COUNT_DIGITS else 0


def _strip_dots(text: str) -> str:
    return text.strip().rstrip(".").strip()
