"""The playbook load cache: hit, miss, invalidation on edit, corrupt and unwritable caches.

Every test points ``XDG_CACHE_HOME`` at its own folder and loads real playbook files (the
valid fixtures and the shipped set); the cache's entries are real JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playbook_facts import KNOWN, VALID

from gputriage.playbook import load_cache
from gputriage.playbook.loader import load_playbooks
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


def _copy_valid(tmp_path: Path) -> Path:
    d = tmp_path / "books"
    d.mkdir()
    for f in VALID.glob("*.yaml"):
        (d / f.name).write_bytes(f.read_bytes())
    return d


def _load(d: Path):  # type: ignore[no-untyped-def]
    return load_playbooks([d], known_facts=KNOWN, shipped=False, user_config=False)


def _shape(result) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Everything a loaded set says (conditions by source; their programs are not compared)."""
    return {pid: repr(pb) for pid, pb in result.playbooks.items()}


def test_first_load_misses_and_writes_one_entry_per_file(cache: Path, parses: list[str],
                                                         tmp_path: Path) -> None:
    d = _copy_valid(tmp_path)
    result = _load(d)
    assert not result.problems
    assert sorted(parses) == ["lost-gpu.yaml", "router.yaml"]
    entries = sorted(cache.glob("*.json"))
    assert len(entries) == 2
    for entry in entries:
        data = json.loads(entry.read_text())
        assert data["format"] == load_cache.FORMAT
        assert isinstance(data["data"], dict) and "id" in data["data"]


def test_second_load_hits_parses_nothing_and_builds_the_same_set(
        cache: Path, parses: list[str], tmp_path: Path) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    parses.clear()
    second = _load(d)
    assert parses == []
    assert _shape(second) == _shape(first)
    # CEL is compiled again from source: real programs that run.
    assert all(c.program is not None for pb in second.playbooks.values()
               for step in pb.steps.values() for c in _conditions(step))


def _conditions(step):  # type: ignore[no-untyped-def]
    return [b.when for b in getattr(step, "branches", ()) if getattr(b, "when", None)]


def test_editing_a_file_misses_for_that_file_only(cache: Path, parses: list[str],
                                                  tmp_path: Path) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    parses.clear()
    router = d / "router.yaml"
    router.write_text(router.read_text().replace("title:", "title: (edited)", 1))
    result = _load(d)
    assert parses == ["router.yaml"]
    assert "(edited)" in result.playbooks["router"].title
    assert len(list(cache.glob("*.json"))) == 3


def test_a_new_gputriage_version_misses(cache: Path, parses: list[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    parses.clear()
    monkeypatch.setattr(load_cache, "__version__", "99.0.0")
    monkeypatch.setattr(load_cache, "_salt", None)
    _load(d)
    assert sorted(parses) == ["lost-gpu.yaml", "router.yaml"]


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"[1, 2]", b'{"format": 0, "data": {}}',
                                     b'{"format": 1, "data": "text"}', b"\xff\xfe\x00"])
def test_a_corrupt_entry_is_ignored_and_rewritten(cache: Path, parses: list[str],
                                                  tmp_path: Path, garbage: bytes) -> None:
    d = _copy_valid(tmp_path)
    first = _load(d)
    for entry in cache.glob("*.json"):
        entry.write_bytes(garbage)
    parses.clear()
    second = _load(d)
    assert sorted(parses) == ["lost-gpu.yaml", "router.yaml"]
    assert not second.problems
    assert _shape(second) == _shape(first)
    assert all(json.loads(e.read_text())["format"] == 1 for e in cache.glob("*.json"))


def test_an_unwritable_cache_is_not_an_error(cache: Path, parses: list[str],
                                             tmp_path: Path) -> None:
    cache.parent.parent.mkdir(parents=True)
    (cache.parent.parent / "gputriage").write_text("a file where the folder should be")
    d = _copy_valid(tmp_path)
    result = _load(d)
    assert not result.problems
    assert sorted(result.playbooks) == ["lost-gpu", "router"]
    parses.clear()
    _load(d)
    assert sorted(parses) == ["lost-gpu.yaml", "router.yaml"]  # nothing cached, no error


def test_a_file_with_problems_is_never_cached(cache: Path, tmp_path: Path) -> None:
    d = tmp_path / "books"
    d.mkdir()
    (d / "broken.yaml").write_text("id: x\nid: y\n")
    result = _load(d)
    assert [p.message for p in result.problems] == ["duplicate key 'id'"]
    assert list(cache.glob("*.json")) == []


def test_a_problem_in_a_cached_file_is_still_placed_at_file_line_col(
        cache: Path, parses: list[str], tmp_path: Path) -> None:
    d = _copy_valid(tmp_path)
    _load(d)
    (d / "lost-gpu.yaml").unlink()  # router.yaml now has a goto to nowhere, found set-wide
    parses.clear()
    result = _load(d)
    assert result.problems
    problem = result.problems[0]
    assert problem.message.startswith("'goto' names a ")
    assert problem.message.endswith("that does not exist: 'lost-gpu'")
    assert all(p.file == str(d / "router.yaml") and p.line > 0 for p in result.problems)
    assert problem.file == str(d / "router.yaml")
    assert (problem.line, problem.col) > (0, 0)
    assert "lost-gpu" in problem.source_line
    assert parses == ["router.yaml"]  # parsed once, only to place the problem


def test_shipped_playbooks_load_the_same_from_the_cache(cache: Path, parses: list[str]) -> None:
    first = load_playbooks(user_config=False)
    assert parses  # a cold cache parses every shipped file
    parses.clear()
    second = load_playbooks(user_config=False)
    assert parses == []
    assert not second.problems
    assert _shape(second) == _shape(first)


def test_the_cache_can_be_turned_off(cache: Path, parses: list[str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(load_cache.DISABLE_ENV, "1")
    d = _copy_valid(tmp_path)
    _load(d)
    _load(d)
    assert sorted(parses) == ["lost-gpu.yaml", "lost-gpu.yaml", "router.yaml", "router.yaml"]
    assert not cache.exists()
