"""Evidence crosses to the forked walk process unchanged (gputriage.evidence.wire)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gputriage.evidence import wire
from gputriage.evidence.candidate_model import NODE_EVIDENCE
from gputriage.evidence.model import Evidence, Key, Status
from gputriage.session import BundleSession

SCENARIOS = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios"
TAG = "a1b2c3d4e5f60718293a4b5c6d7e8f90"


def _round_trip(items: list[Evidence]) -> list[Evidence]:
    return wire.decode(wire.encode(items, TAG), TAG)


@pytest.mark.parametrize("scenario", sorted(p.parent.name for p in SCENARIOS.glob("*/pod.json")))
def test_every_built_in_scenario_crosses_unchanged(scenario: str) -> None:
    items = list(BundleSession(SCENARIOS / scenario).collect_all().values())
    assert len(items) > 10
    assert _round_trip(items) == items


def test_public_bundles_cross_unchanged(corpus_dir: Path) -> None:
    bundles = sorted(p for p in (corpus_dir / "k8s" / "bundles").iterdir() if p.is_dir())
    assert bundles
    for bundle in bundles:
        items = list(BundleSession(bundle).collect_all().values())
        assert _round_trip(items) == items, bundle.name


def test_nested_evidence_and_every_field_survive() -> None:
    inner = Evidence(
        Key.DMESG,
        Status.FORBIDDEN,
        "dmesg: read kernel buffer failed: Operation not permitted",
        "",
        "ssh gpu-2: dmesg",
        collected_at=1764600000.123456,
        elapsed_s=0.25,
    )
    outer = Evidence(
        Key.CANDIDATES,
        Status.OK,
        "2 candidate nodes",
        '{"items": []}\n',
        "kube",
        {"items": [{"name": "gpu-2"}], NODE_EVIDENCE: {"gpu-2": {"dmesg": inner}}},
        "json",
        collected_at=1764600001.5,
        elapsed_s=1.0,
        complete=False,
    )
    odd = Evidence(
        Key.KUBELET_LOG,
        Status.OK,
        raw="caf\u00e9 \udcff \x1b[31mred\x1b[0m \u202e\n",  # non-ASCII, a lone surrogate, escapes
        data={"n": math.inf, "x": None, "list": [1, 2.5, "three", True]},
    )
    back = _round_trip([outer, odd])
    assert back == [outer, odd]
    assert back[0].data[NODE_EVIDENCE]["gpu-2"]["dmesg"] == inner
    assert isinstance(back[0].key, Key) and isinstance(back[0].status, Status)
    assert wire.encode([outer], TAG).isascii()


def test_an_object_from_the_cluster_cannot_pass_for_evidence() -> None:
    """Only the random tag marks evidence: an API object shaped like a record stays data."""
    lookalike = {"wire": {"key": "pod", "status": "ok"}, "__evidence__": {"key": "pod"}}
    ev = Evidence(Key.POD, Status.OK, data={"metadata": {"annotations": lookalike}})
    assert _round_trip([ev]) == [ev]
    # The same bytes read with another tag are not evidence at all.
    with pytest.raises(wire.WireError):
        wire.decode(wire.encode([ev], TAG), "another-tag")


def test_data_json_cannot_carry_is_refused_when_encoding() -> None:
    for data in ({1, 2}, b"bytes", object()):
        with pytest.raises(TypeError):
            wire.encode([Evidence(Key.POD, Status.OK, data={"x": data})], TAG)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"{}",
        b"[1, 2]",
        json.dumps([{TAG: {"key": "pod"}}]).encode(),  # fields missing
        json.dumps([{TAG: {"key": "no-such-key", "status": "ok"}}]).encode(),
        b"[" * 100_000 + b"]" * 100_000,  # nested past the recursion limit
    ],
)
def test_garbage_is_a_wire_error(payload: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode(payload, TAG)


def test_a_record_with_a_bad_status_is_a_wire_error() -> None:
    fields = json.loads(wire.encode([Evidence(Key.POD, Status.OK)], TAG))[0][TAG]
    fields["status"] = "maybe"
    with pytest.raises(wire.WireError):
        wire.decode(json.dumps([{TAG: fields}]).encode(), TAG)
