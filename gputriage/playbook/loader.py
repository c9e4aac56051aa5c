"""Find, parse, check and compile playbooks: the shipped ones, then the user's.

Layers, later ones adding playbooks or overriding earlier ones by ``id``:

1. shipped: ``gputriage/playbooks`` inside the installed package (the wheel maps the repo's
   top-level ``playbooks/`` there); in a source checkout, the repo's ``playbooks/``;
2. the user config dir: ``$XDG_CONFIG_HOME/gputriage/playbooks`` (``~/.config/...``);
3. each ``--playbooks DIR`` (or file), in order.

A playbook with problems is reported in :attr:`PlaybookSet.problems` and skipped; the others
keep working. A user file that breaks a shipped playbook it overrides is the one skipped.
Every CEL condition is compiled here, once. The YAML of each file is parsed once and kept in
the user's cache dir as plain data (:mod:`gputriage.playbook.load_cache`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from gputriage.playbook.load_cache import (
    check_fingerprint,
    checked_conditions,
    parse_yaml_cached,
    remember_checked,
)
from gputriage.playbook.model import Playbook, PlaybookSet
from gputriage.playbook.parse import FactPaths, ParsedFile, parse_playbook
from gputriage.playbook.problems import Problem, sort_problems
from gputriage.playbook.references import check_references, resolve

#: A playbook file bigger than this is not a playbook.
MAX_FILE_BYTES = 1024 * 1024
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class _Source:
    name: str  # what problems print as the file
    read: Traversable | Path


def load_playbooks(
    extra_dirs: Sequence[Path] = (),
    *,
    known_facts: set[str] | None = None,
    user_config: bool = True,
    shipped: bool = True,
) -> PlaybookSet:
    """Shipped playbooks, then the user config dir, then ``extra_dirs`` (dirs or files).

    ``known_facts`` is the set of declared ``group.field`` paths conditions may read; it
    defaults to every field of the registered fact groups. ``user_config=False`` skips the
    user config dir and ``shipped=False`` the shipped playbooks (tests, ``validate FILES``).
    """
    facts = FactPaths(_known_facts() if known_facts is None else known_facts)
    problems: list[Problem] = []
    builtin = _load_layer(shipped_sources() if shipped else [], facts, problems, shipped=True)
    user_layers = [user_config_dir()] if user_config else []
    user_layers += list(extra_dirs)
    user: dict[str, ParsedFile] = {}
    for layer in user_layers:
        user.update(_load_layer(_sources_in(Path(layer), problems), facts, problems, shipped=False))
    books = _check_set(builtin, user, problems)
    order = [*builtin, *(pid for pid in user if pid not in builtin)]
    playbooks = {pid: resolve(books[pid], books) for pid in order if pid in books}
    return PlaybookSet(playbooks, tuple(sort_problems(problems)))


def parse_file(
    path: Path, *, known_facts: set[str] | None = None, shipped: bool = False
) -> ParsedFile:
    """One file through the per-file checks (no references to other files resolved)."""
    facts = FactPaths(_known_facts() if known_facts is None else known_facts)
    return _parse_source(_Source(str(path), path), facts, shipped=shipped)


def shipped_sources() -> list[_Source]:
    """The playbook files that come with gputriage."""
    packaged = resources.files("gputriage").joinpath("playbooks")
    if packaged.is_dir():
        return sorted(
            (
                _Source(str(f), f)
                for f in packaged.iterdir()
                if f.name.endswith(SUFFIXES) and f.is_file()
            ),
            key=lambda s: s.name,
        )
    checkout = Path(__file__).resolve().parents[2] / "playbooks"
    return _sources_in(checkout, []) if checkout.is_dir() else []


def user_config_dir() -> Path:
    """Where a user's own playbooks live: ``$XDG_CONFIG_HOME/gputriage/playbooks``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gputriage" / "playbooks"


def _known_facts() -> set[str]:
    from gputriage.facts.registry import known_paths

    return known_paths()


def _sources_in(path: Path, problems: list[Problem]) -> list[_Source]:
    if path.is_file():
        return [_Source(str(path), path)]
    if not path.is_dir():
        if path != user_config_dir():
            problems.append(Problem(str(path), 0, 0, "no such playbook file or directory"))
        return []
    files = [p for p in sorted(path.iterdir()) if p.suffix in SUFFIXES and p.is_file()]
    return [_Source(str(p), p) for p in files]


def _parse_source(source: _Source, facts: FactPaths, *, shipped: bool) -> ParsedFile:
    from gputriage.playbook.source_map import SourceMap

    def broken(message: str) -> ParsedFile:
        return ParsedFile(
            source.name, SourceMap(source.name, ""), None, [Problem(source.name, 0, 0, message)]
        )

    try:
        raw = source.read.read_bytes()
    except OSError as exc:
        return broken(f"cannot read: {exc.strerror or exc}")
    if len(raw) > MAX_FILE_BYTES:
        return broken(f"{len(raw)} bytes: bigger than a playbook can be ({MAX_FILE_BYTES})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return broken(f"not UTF-8 text (byte {exc.start})")
    cached = parse_yaml_cached(raw, text, source.name)
    if cached.problems:
        return ParsedFile(source.name, cached.smap, None, cached.problems)
    fingerprint = check_fingerprint(facts.paths, shipped=shipped)
    checked = checked_conditions(cached, fingerprint)
    parsed = parse_playbook(cached.data, cached.smap, facts, shipped=shipped, checked=checked)
    if checked is None and parsed.playbook is not None:
        remember_checked(cached, fingerprint, parsed.conditions)
    return parsed


def _load_layer(
    sources: Iterable[_Source], facts: FactPaths, problems: list[Problem], *, shipped: bool
) -> dict[str, ParsedFile]:
    """Parse every file of one layer; report and skip broken files and duplicate ids."""
    books: dict[str, ParsedFile] = {}
    for source in sources:
        pf = _parse_source(source, facts, shipped=shipped)
        if pf.playbook is None:
            problems += pf.problems
            continue
        first = books.get(pf.playbook.id)
        if first is not None:
            problems.append(
                pf.smap.problem(
                    ("id",), f"playbook id '{pf.playbook.id}' is already defined in {first.file}"
                )
            )
            continue
        books[pf.playbook.id] = pf
    return books


def _check_set(
    shipped: dict[str, ParsedFile], user: dict[str, ParsedFile], problems: list[Problem]
) -> dict[str, ParsedFile]:
    """Cross-check the combined set, dropping culprits until it is consistent."""
    current = {pid: pf for pid, pf in shipped.items() if pid not in user}
    current.update(user)
    while True:
        originals = {
            pid: shipped[pid]
            for pid, pf in current.items()
            if pid in shipped and not _book(pf).shipped
        }
        blames = check_references(current, originals)
        if not blames:
            return current
        problems += [b.problem for b in blames]
        for culprit in dict.fromkeys(b.culprit for b in blames):
            dropped = current.pop(culprit, None)
            if dropped is not None and not _book(dropped).shipped and culprit in shipped:
                current[culprit] = shipped[culprit]


def _book(pf: ParsedFile) -> Playbook:
    assert pf.playbook is not None
    return pf.playbook
