"""A Session is where evidence for one triage comes from: a bundle, or the live cluster.

Both the TUI and the headless report consume the same interface:

* ``stream()`` yields each :class:`Evidence` as it lands (the TUI shows them one by one);
* ``collect_all()`` blocks until every source has answered or timed out.

A session never raises for evidence it could not get; that becomes an Evidence with a status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gputriage.evidence.model import Evidence, EvidenceSet, Key


class Session(Protocol):
    #: Words for the header: "bundle ./b", "context prod-eu (ml/trainer-0)".
    description: str
    #: The cluster context name, or "" for a bundle.
    context: str

    def keys(self) -> tuple[Key, ...]:
        """Every evidence key this session will try to produce."""
        ...

    def stream(self) -> AsyncIterator[Evidence]:
        """Yield each Evidence as it lands, fastest first."""
        ...

    def collect_all(self) -> EvidenceSet:
        """Everything, blocking."""
        ...


@dataclass
class BundleSession:
    """Replays a bundle directory (``--from DIR`` and ``gputriage demo``)."""

    path: Path
    description: str = ""
    context: str = ""
    _evidence: EvidenceSet | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.description:
            self.description = f"bundle {self.path}"

    def _load(self) -> EvidenceSet:
        if self._evidence is None:
            from gputriage.evidence.bundle import read_bundle

            self._evidence = read_bundle(self.path)
        return self._evidence

    def keys(self) -> tuple[Key, ...]:
        return tuple(Key)

    async def stream(self) -> AsyncIterator[Evidence]:

        import asyncio  # here: a headless replay never streams

        evidence = await asyncio.to_thread(self._load)
        for key in Key:
            yield evidence.get_or_missing(key)

    def collect_all(self) -> EvidenceSet:
        return self._load()


def check_bundle_target(
    evidence: EvidenceSet, pod: str | None, namespace: str | None, path: Path
) -> None:
    """Raise when ``pod``/``namespace`` (as typed) name another pod than the bundle holds."""
    from gputriage.errors import GputriageError
    from gputriage.facts.build import target_of

    held = target_of(evidence)
    if not held.pod:  # no pod.json (a rejected owner): nothing to compare with
        return
    name = "" if _is_kind_ref(pod or "") else (pod or "").rpartition("/")[2]
    wrong_pod = bool(name) and name != held.pod
    wrong_ns = bool(namespace) and namespace != held.namespace
    if wrong_pod or wrong_ns:
        asked = f"{namespace or held.namespace}/{name or held.pod}"
        raise GputriageError(
            f"the bundle {path.name} holds pod {held.namespace}/{held.pod}, not {asked}. Run "
            f"`gputriage {held.pod} -n {held.namespace} --from {path}`, or point --from at "
            "the bundle collected for that pod.",
            title="pod not in bundle",
        )


def _is_kind_ref(pod: str) -> bool:
    """``job/trainer`` names an owner, not a pod: the bundle's pod may be any of its pods."""
    kind = pod.partition("/")[0].lower() if "/" in pod else ""
    return bool(kind) and kind not in ("pod", "pods", "po")
