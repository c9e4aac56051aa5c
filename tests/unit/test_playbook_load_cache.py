"""The playbook load cache: hit, miss, invalidation on edit, corrupt and unwritable caches.

Every test points ``XDG_CACHE_HOME`` at its own folder and loads real playbook files (a copy
of the shipped set, loaded as a user's directory); the cache's entries are real JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputriage.playbook import load_cache
from gputriage.playbook.loader import load_playbooks, shipped_sources
from gputriage.playbook.source_map import parse_yaml


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(load_cache.DISABLE_ENV, raising=False)
    return tmp_path / "xdg" / "gputriage" / "playbooks"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files parse_yaml really parsed (a hit parses none)."""
    seen: list[str] = []

    def counting(text: str, file: str):  # type: ignore[no-untyped-def]
        seen.append(Path(file).name)
        return parse_yaml(text, file)

    monkeypatch.setattr(load_cache, "parse_yaml", counting)
    return seen


#: The router: it goes to every other playbook.
ROUTER = "triage.yaml"


def _copy_valid(tmp_path: Path) -> Path:
    """The shipped playbooks, copied into a directory of their own."""
    d = tmp_path / "books"
    d.mkdir()
    for source in shipped_sources():
        (d / Path(source.name).name).write_bytes(source.read.read_bytes())
    assert (d / ROUTER).exists()
    return d


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.yaml"))


def _load(d: Path):  # type: ignore[no-untyped-def]
    return load_playbooks([d], shipped=False, user_config=False)


def _shape(result) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Everything a loaded set says (conditions by source; their programs are not compared)."""
    return {pid: repr(pb) for pid, pb in result.playbooks.items()}


def test_first_load_misses_and_writes_one_entry_per_file(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    d = _copy_valid(tmp_path)
    result = _load(d)
    assert not result.problems
    assert sorted(parses) == _names(d)
    entries = sorted(cache.glob("*.json"))
    assert len(entries) == len(_names(d)) > 5
    for entry in entries:
        data = json.loads(entry.read_text())
        assert data["format"] == load_cache.FORMAT
        assert isinstance(data["data"], dict) and "id" in data["data"]


def test_second_load_hits_parses_nothing_and_builds_the_same_set(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    parses.clear()
    second = _load(d)
    assert parses == []
    assert _shape(second) == _shape(first)
    # CEL is compiled again from source: real programs that run.
    assert all(
        c.program is not None
        for pb in second.playbooks.values()
        for step in pb.steps.values()
        for c in _conditions(step)
    )


def _conditions(step):  # type: ignore[no-untyped-def]
    return [b.when for b in getattr(step, "branches", ()) if getattr(b, "when", None)]


def test_editing_a_file_misses_for_that_file_only(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    parses.clear()
    router = d / ROUTER
    router.write_text(router.read_text().replace("\ntitle: ", "\ntitle: (edited) ", 1))
    result = _load(d)
    assert parses == [ROUTER]
    assert not result.problems
    assert any("(edited)" in pb.title for pb in result.playbooks.values())
    assert len(list(cache.glob("*.json"))) == len(_names(d)) + 1


def test_a_new_gputriage_version_misses(
    cache: Path, parses: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    parses.clear()
    monkeypatch.setattr(load_cache, "__version__", "99.0.0")
    monkeypatch.setattr(load_cache, "_salt", None)
    _load(d)
    assert sorted(parses) == _names(d)


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b"[1, 2]",
        b'{"format": 0, "data": {}}',
        b'{"format": 2, "data": "text"}',
        b"\xff\xfe\x00",
    ],
)
def test_a_corrupt_entry_is_ignored_and_rewritten(
    cache: Path, parses: list[str], tmp_path: Path, garbage: bytes
) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    for entry in cache.glob("*.json"):
        entry.write_bytes(garbage)
    parses.clear()
    second = _load(d)
    assert sorted(parses) == _names(d)
    assert not second.problems
    assert _shape(second) == _shape(first)
    assert all(
        json.loads(e.read_text())["format"] == load_cache.FORMAT for e in cache.glob("*.json")
    )


def test_an_unwritable_cache_is_not_an_error(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    cache.parent.parent.mkdir(parents=True)
    (cache.parent.parent / "gputriage").write_text("a file where the folder should be")
    d = _copy_valid(tmp_path)
    result = _load(d)
    assert not result.problems
    assert len(result.playbooks) == len(_names(d))
    parses.clear()
    _load(d)
    assert sorted(parses) == _names(d)  # nothing cached, no error


def test_a_file_with_problems_is_never_cached(cache: Path, tmp_path: Path) -> None:
    d = tmp_path / "books"
    d.mkdir()
    (d / "broken.yaml").write_text("id: x\nid: y\n")
    result = _load(d)
    assert [p.message for p in result.problems] == ["duplicate key 'id'"]
    assert list(cache.glob("*.json")) == []


def test_a_problem_in_a_cached_file_is_still_placed_at_file_line_col(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    for other in d.glob("*.yaml"):  # the router now goes to playbooks that are not there
        if other.name != ROUTER:
            other.unlink()
    parses.clear()
    result = _load(d)
    gotos = [p for p in result.problems if p.message.startswith("'goto' names a ")]
    assert gotos
    for problem in gotos:
        assert problem.file == str(d / ROUTER)
        assert (problem.line, problem.col) > (0, 0)
        assert "goto" in problem.source_line  # the line of the file, from the source map
    assert parses == [ROUTER]  # parsed once, only to place the problems


def test_shipped_playbooks_load_the_same_from_the_cache(cache: Path, parses: list[str]) -> None:
    first = load_playbooks(user_config=False)
    assert parses  # a cold cache parses every shipped file
    parses.clear()
    second = load_playbooks(user_config=False)
    assert parses == []
    assert not second.problems
    assert _shape(second) == _shape(first)


def test_the_cache_can_be_turned_off(
    cache: Path, parses: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(load_cache.DISABLE_ENV, "1")
    d = _copy_valid(tmp_path)
    _load(d)
    _load(d)
    assert sorted(parses) == sorted(_names(d) * 2)
    assert not cache.exists()


# -- checks remembered -------------------------------------------------------------------------


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conditions the per-file checks really compiled (a checked hit compiles none)."""
    from gputriage.playbook import parse

    seen: list[str] = []
    real = parse.compile_condition

    def counting(source: str):  # type: ignore[no-untyped-def]
        seen.append(source)
        return real(source)

    monkeypatch.setattr(parse, "compile_condition", counting)
    return seen


def test_a_checked_file_is_rebuilt_without_checking_and_runs_the_same(
    cache: Path, compiles: list[str], tmp_path: Path
) -> None:
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.report.render import render
    from gputriage.session import BundleSession

    d = _copy_valid(tmp_path)
    first = _load(d)
    assert len(compiles) > 100
    entries = [json.loads(e.read_text()) for e in cache.glob("*.json")]
    assert all(len(e["checked"]) == 1 for e in entries)
    compiles.clear()
    second = _load(d)
    assert compiles == []  # nothing checked or compiled while loading
    assert not second.problems
    assert _shape(second) == _shape(first)
    # Programs are compiled when they first run, and walk exactly as checked ones do.
    scenario = Path(__file__).resolve().parents[2] / "gputriage" / "scenarios" / "lost-xid79"
    session = BundleSession(scenario)
    evidence = session.collect_all()
    facts = build_facts(evidence)

    def report(playbooks):  # type: ignore[no-untyped-def]
        transcript = walk(playbooks, facts, {}, {})
        return transcript, render("json", "", "", evidence, facts, transcript, [])

    def without_time(text: str) -> object:
        doc = json.loads(text)
        doc.pop("generated_at")  # the two renders may fall in different seconds
        return doc

    again, text = report(second)
    assert [f.id for f in again.findings] == ["lost.gpu-fallen-off-bus"]
    assert without_time(text) == without_time(report(first)[1])


def test_other_declared_facts_check_the_files_again(
    cache: Path, compiles: list[str], tmp_path: Path
) -> None:
    from gputriage.facts.registry import known_paths

    d = _copy_valid(tmp_path)
    _load(d)
    compiles.clear()
    fewer = {p for p in known_paths() if not p.startswith("kernel.")}
    result = load_playbooks([d], shipped=False, user_config=False, known_facts=fewer)
    assert compiles  # checked again under the other fingerprint...
    assert any("unknown fact group 'kernel'" in p.message for p in result.problems)
    compiles.clear()
    _load(d)  # ...while the first fingerprint is still remembered
    assert compiles == []


@pytest.mark.parametrize(
    "record",
    [
        "not a list",
        [["kernel.xid > 1", "refs", []]],
        [["x", [["kernel.xids", "0", 6]], []]],
        [[1, [], []]],
    ],
)
def test_a_damaged_check_record_means_checking_again(
    cache: Path, compiles: list[str], tmp_path: Path, record: object
) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    for entry in cache.glob("*.json"):
        data = json.loads(entry.read_text())
        data["checked"] = {fp: record for fp in data["checked"]}
        entry.write_text(json.dumps(data))
    compiles.clear()
    second = _load(d)
    assert compiles  # the record was not trusted
    assert not second.problems
    assert _shape(second) == _shape(first)


def test_a_condition_missing_from_the_record_means_checking_again(
    cache: Path, compiles: list[str], tmp_path: Path
) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    for entry in cache.glob("*.json"):
        data = json.loads(entry.read_text())
        data["checked"] = {fp: rec[1:] for fp, rec in data["checked"].items()}
        entry.write_text(json.dumps(data))
    compiles.clear()
    second = _load(d)
    assert compiles
    assert _shape(second) == _shape(first)
