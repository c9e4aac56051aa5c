"""Fuzzed bundles through every fact builder, the CEL context and the shipped playbooks.

A bundle here is any mix of: a key absent, a key that failed (each non-OK status), and a key
whose bytes are a mutated real document or noise, decoded by the same
:func:`gputriage.evidence.bundle.decode` the bundle, API and SSH sources share. The pod is
usually a real one (mutated or not), so the builders get past "no pod" and into their
parsing. The promise checked: every registered group is built, none with an "internal error"
(a builder that raised), each carries exactly its declared fields with CEL-friendly values,
and the engine walks the shipped playbooks over it without raising.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts.build import build_facts
from gputriage.facts.registry import specs
from gputriage.playbook.conditions import new_context
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import PlaybookSet
from gputriage.playbook.transcript import Transcript
from tests.hostile.budget import fuzz
from tests.hostile.seeds import seeds
from tests.hostile.strategies import hostile_bytes, mutated_seed

FAILED = [s for s in Status if s is not Status.OK]


@cache
def shipped() -> PlaybookSet:
    books = load_playbooks(user_config=False)
    assert books.playbooks, books.problems
    return books


@st.composite
def evidence_for(draw: st.DrawFn, key: Key) -> Evidence | None:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return None
    if choice == 1:
        status = draw(st.sampled_from(FAILED))
        return Evidence(key, status, f"fuzz: {status.value}", "", f"fuzz/{key.value}")
    if choice <= 4:
        blob = draw(st.sampled_from(seeds()[key.value])).encode()
    elif choice <= 8:
        blob = draw(mutated_seed(key.value)).encode("utf-8", errors="surrogatepass")
    else:
        blob = draw(hostile_bytes(key.value))
    return decode(key, blob, source=f"fuzz/{key.value}")


@st.composite
def bundles(draw: st.DrawFn) -> EvidenceSet:
    items = [draw(evidence_for(key)) for key in Key]
    return EvidenceSet(e for e in items if e is not None)


def check_cel_friendly(value: Any, where: str) -> None:
    if isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), f"{where}: key {k!r} is not a string"
            if v is not None:  # a null inside a map is an explicit "not set"
                check_cel_friendly(v, f"{where}.{k}")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            assert v is not None, f"{where}[{i}] is None"
            check_cel_friendly(v, f"{where}[{i}]")
        return
    raise AssertionError(f"{where} is a {type(value).__name__}, not CEL data")


@fuzz(0.5)
@given(bundles())
def test_every_group_built_from_fuzzed_bundles(evidence: EvidenceSet) -> None:
    facts = build_facts(evidence)
    declared = specs()
    assert set(facts.groups) == set(declared)
    for name, group in facts.groups.items():
        assert "internal error" not in group.reason, f"{name}: {group.reason}"
        assert set(group.values) == set(declared[name].fields), name
        assert group.known or group.reason, f"{name} is unknown without a reason"
        for field, value in group.values.items():
            default = declared[name].fields[field].default
            if isinstance(default, (list, dict)):
                assert isinstance(value, type(default)), (
                    f"{name}.{field} is {type(value).__name__}, declared {type(default).__name__}"
                )
            if value is not None:
                check_cel_friendly(value, f"{name}.{field}")
        for path, refs in group.cites.items():
            for ref in refs:
                assert ref.line >= 0 and isinstance(ref.text, str), (name, path, ref)

    context = facts.to_context()
    new_context(context)  # converts every value once: must accept all of them
    transcript = walk(shipped(), facts)
    assert isinstance(transcript, Transcript)
    assert transcript.findings or transcript.question is not None, "the walk ended nowhere"


DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize("deep", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize(
    "key",
    [
        Key.PROMETHEUS,
        Key.DEVICE_PLUGIN_LOG,
        Key.KUBELET_LOG,
        Key.DEVICE_CHECKPOINT,
        Key.POD,
        Key.EVENTS,
        Key.NODE_PODS,
    ],
)
def test_json_nested_past_the_recursion_limit_is_bad_input_not_an_internal_error(
    key: Key, deep: str
) -> None:
    evidence = EvidenceSet([Evidence(key, Status.OK, "", deep, "fuzz")])
    facts = build_facts(evidence)
    for name, group in facts.groups.items():
        assert "internal error" not in group.reason, f"{name}: {group.reason}"
