"""Evidence from the Kubernetes fixtures under tests/fixtures/k8s, and a runner for the
Kubernetes fact groups (pod, events, owner_events, scheduler, node, cluster, quota, dra).

Evidence goes through :func:`gputriage.evidence.bundle.decode`, the same path a bundle file or
an API answer takes, so facts are tested on exactly what the product would hand them.
"""

from __future__ import annotations

from pathlib import Path

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key
from gputriage.facts import cluster, dra, events, node, owner_events, pod, quota, scheduler
from gputriage.facts.build import target_of
from gputriage.facts.model import FactGroup

K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
MODULES = (pod, events, owner_events, scheduler, node, cluster, quota, dra)


def fixture(key: Key, path: str) -> Evidence:
    """Evidence for ``key`` from a fixture file, cited as ``bundle/<file name>``."""
    return decode(key, (K8S / path).read_bytes(), source=f"bundle/{Path(path).name}")


def text(key: Key, content: str | bytes, name: str = "") -> Evidence:
    blob = content.encode() if isinstance(content, str) else content
    return decode(key, blob, source=f"bundle/{name or key.value}")


def groups(*evidence: Evidence) -> dict[str, FactGroup]:
    """Every Kubernetes fact group built in registry order from ``evidence``."""
    snapshot = EvidenceSet(evidence)
    target = target_of(snapshot)
    built: dict[str, FactGroup] = {}
    for module in MODULES:
        built[module.SPEC.name] = module.build(snapshot, target, built)
    return built
