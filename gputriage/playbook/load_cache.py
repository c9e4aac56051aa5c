"""A cache of parsed playbook YAML, so a fresh process does not parse the same files again.

What is cached is the *plain data* :func:`gputriage.playbook.source_map.parse_yaml` builds
from a file (dicts, lists, strings, numbers), never model objects: the model is built from
that data by the ordinary checks every time (:func:`gputriage.playbook.parse.parse_playbook`),
so new keys in the playbook format keep working, and CEL is compiled from source each run.
The source map (line and column of every key) is rebuilt from the file's text only when a
problem has to be placed (:class:`DeferredSourceMap`), which for a file that parsed cleanly
means a cross-file problem: each file is still parsed at most once per process.

One JSON file per playbook file, in ``$XDG_CACHE_HOME/gputriage/playbooks/`` (else
``~/.cache/...``), named by the SHA-256 of the file's bytes, gputriage's version and the source
of the modules that turn YAML into data (this one, ``source_map`` and ``loader``): editing a
playbook, upgrading gputriage or changing the parser all miss. Files with YAML problems are
never cached. The cache is an optimisation only: an unreadable, corrupt, foreign or
unwritable cache is ignored, never an error. JSON, never pickle: a cache file is data.

An entry also remembers that its file passed every per-file check (:func:`remember_checked`),
with what the checks found in each condition (the fact paths it reads, its macros), under a
fingerprint of everything the checks depend on: the declared fact paths, whether the file is
shipped, gputriage's version, the source of the checking modules and the CEL extension. A later
run with the same fingerprint builds the playbook without checking it again
(:func:`checked_conditions`); CEL compiles each of its conditions when it first runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputriage import __version__
from gputriage.playbook.conditions import Condition, FactRef, Macro, checked_condition
from gputriage.playbook.problems import Problem
from gputriage.playbook.source_map import SourceMap, parse_yaml

#: Bumped when the layout of a cache file changes.
FORMAT = 2
#: A cache file bigger than this is not ours.
MAX_CACHE_BYTES = 8 * 1024 * 1024
#: Set to a non-empty value to neither read nor write the cache.
DISABLE_ENV = "GPUTRIAGE_NO_CACHE"
#: The modules whose code decides what a cached entry holds.
_PARSER_MODULES = ("load_cache.py", "source_map.py", "loader.py")
#: The modules whose code decides whether a file passes the per-file checks.
_CHECKER_MODULES = (
    "parse.py",
    "conditions.py",
    "templating.py",
    "mutating.py",
    "model.py",
    "schema.py",
)
#: Fingerprints of checks remembered per entry (a user switching gputriage versions).
MAX_CHECKED = 4

_salt: bytes | None = None
_checker_salt: bytes | None = None


@dataclass
class CachedYaml:
    """A file's YAML data, where it came from, and the checks an earlier run remembered."""

    data: Any
    smap: SourceMap
    problems: list[Problem]
    key: str | None = None
    """The cache entry's name; None when the cache is off or unusable."""
    checked: Mapping[str, Any] = field(default_factory=dict)
    """Check fingerprint -> what the checks found (see :func:`remember_checked`)."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gputriage/playbooks`` (``~/.cache/gputriage/playbooks``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gputriage" / "playbooks"


def cache_key(raw: bytes) -> str | None:
    """The entry name for a file's bytes; None when the parser's own source is unreadable."""
    salt = _parser_salt()
    if not salt:
        return None
    return hashlib.sha256(salt + b"\0" + raw).hexdigest()


class DeferredSourceMap(SourceMap):
    """A source map for a file whose data came from the cache: parsed from the text on first
    use (to place a problem), not before."""

    def __init__(self, file: str, text: str) -> None:  # no SourceMap.__init__: lazy
        self.file = file
        self.text = text
        self._full: SourceMap | None = None

    def _map(self) -> SourceMap:
        if self._full is None:
            _, self._full, _ = parse_yaml(self.text, self.file)
        return self._full

    @property
    def values(self) -> Any:  # type: ignore[override]
        return self._map().values

    @property
    def keys(self) -> Any:  # type: ignore[override]
        return self._map().keys

    @property
    def styles(self) -> Any:  # type: ignore[override]
        return self._map().styles

    @property
    def scalars(self) -> Any:  # type: ignore[override]
        return self._map().scalars

    @property
    def _line_starts(self) -> Any:  # type: ignore[override]
        return self._map()._line_starts


def parse_yaml_cached(raw: bytes, text: str, file: str) -> CachedYaml:
    """:func:`parse_yaml` of ``text`` (the decoded ``raw``), from the cache when it can be."""
    key = None if os.environ.get(DISABLE_ENV) else cache_key(raw)
    if key is not None:
        hit = _read(cache_dir() / f"{key}.json")
        if hit is not None:
            data, checked = hit
            return CachedYaml(data, DeferredSourceMap(file, text), [], key, checked)
    data, smap, problems = parse_yaml(text, file)
    if (
        key is not None
        and not problems
        and data is not None
        and not _write(cache_dir() / f"{key}.json", data, {})
    ):
        key = None
    return CachedYaml(data, smap, problems, key if not problems else None)


def check_fingerprint(fact_paths: frozenset[str], *, shipped: bool) -> str | None:
    """What the per-file checks of a file depend on, as one digest; None: do not remember."""
    salt = _checker_modules_salt()
    return _fingerprint(salt, fact_paths, shipped) if salt else None


@functools.cache
def _fingerprint(salt: bytes, fact_paths: frozenset[str], shipped: bool) -> str:
    # Once per layer, not once per file: the same few hundred fact paths every time.
    digest = hashlib.sha256(salt)
    digest.update(b"shipped" if shipped else b"user")
    digest.update("\n".join(sorted(fact_paths)).encode())
    return digest.hexdigest()


def remember_checked(
    cached: CachedYaml, fingerprint: str | None, conditions: Iterable[Condition]
) -> None:
    """Record in ``cached``'s entry that its file passed the per-file checks under
    ``fingerprint``, with what they found in each condition."""
    if cached.key is None or fingerprint is None or fingerprint in cached.checked:
        return
    record = [
        [c.source, [[r.path, r.offset, r.length] for r in c.refs], [_macro(m) for m in c.macros]]
        for c in conditions
    ]
    kept = dict(list(cached.checked.items())[-(MAX_CHECKED - 1) :])
    kept[fingerprint] = record
    if _write(cache_dir() / f"{cached.key}.json", cached.data, kept):
        cached.checked = kept


def checked_conditions(cached: CachedYaml, fingerprint: str | None) -> dict[str, Condition] | None:
    """Source -> condition for a file that passed the checks under ``fingerprint`` before;
    None when it did not (or the record is not what :func:`remember_checked` writes)."""
    if fingerprint is None:
        return None
    record = cached.checked.get(fingerprint)
    if not isinstance(record, list):
        return None
    out: dict[str, Condition] = {}
    try:
        for source, refs, macros in record:
            out[source] = checked_condition(
                _str(source),
                tuple(FactRef(_str(p), _int(o), _int(n)) for p, o, n in refs),
                tuple(Macro(_str(a), _str(r), tuple(_int(i) for i in o)) for a, r, o in macros),
            )
    except (TypeError, ValueError):
        return None
    return out


def _macro(m: Macro) -> list[Any]:
    return [m.name, m.range, list(m.outer)]


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


def _checker_modules_salt() -> bytes:
    global _checker_salt
    if _checker_salt is None:
        from gputriage.playbook.cel_runtime import extension_path

        digest = hashlib.sha256(_parser_salt())
        here = Path(__file__).resolve().parent
        try:
            for name in _CHECKER_MODULES:
                digest.update((here / name).read_bytes())
            cel = extension_path()
            if cel is not None:
                stat = cel.stat()
                digest.update(f"{cel} {stat.st_size} {stat.st_mtime_ns}".encode())
        except OSError:
            _checker_salt = b""
            return _checker_salt
        _checker_salt = digest.digest() if _parser_salt() else b""
    return _checker_salt


def _parser_salt() -> bytes:
    global _salt
    if _salt is None:
        digest = hashlib.sha256(f"gputriage {__version__} format {FORMAT}".encode())
        here = Path(__file__).resolve().parent
        try:
            for name in _PARSER_MODULES:
                digest.update((here / name).read_bytes())
        except OSError:  # no source to hash (a zipped or frozen install): no cache
            _salt = b""
            return _salt
        _salt = digest.digest()
    return _salt


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CACHE_BYTES + 1)
        if len(raw) > MAX_CACHE_BYTES:
            return None
        entry = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return None
    data = entry.get("data")
    checked = entry.get("checked")
    if not isinstance(data, dict):
        return None
    return data, checked if isinstance(checked, dict) else {}


def _write(path: Path, data: Any, checked: Mapping[str, Any]) -> bool:
    """Write an entry atomically; anything that cannot be stored as JSON exactly is skipped.
    True when it was written."""
    try:
        text = json.dumps(
            {"format": FORMAT, "data": data, "checked": checked},
            ensure_ascii=True,
            allow_nan=False,
            separators=(",", ":"),
        )
        if json.loads(text)["data"] != data:  # tuples, dates...: would not come back the same
            return False
    except (TypeError, ValueError, RecursionError):
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
    except OSError:  # read-only home, full disk, a file where the folder should be
        return False
    return True


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return
