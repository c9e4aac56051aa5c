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
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gputriage import __version__
from gputriage.playbook.problems import Problem
from gputriage.playbook.source_map import SourceMap, parse_yaml

#: Bumped when the layout of a cache file changes.
FORMAT = 1
#: A cache file bigger than this is not ours.
MAX_CACHE_BYTES = 8 * 1024 * 1024
#: Set to a non-empty value to neither read nor write the cache.
DISABLE_ENV = "GPUTRIAGE_NO_CACHE"
#: The modules whose code decides what a cached entry holds.
_PARSER_MODULES = ("load_cache.py", "source_map.py", "loader.py")

_salt: bytes | None = None


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


def parse_yaml_cached(raw: bytes, text: str, file: str) -> tuple[Any, SourceMap, list[Problem]]:
    """:func:`parse_yaml` of ``text`` (the decoded ``raw``), from the cache when it can be."""
    key = None if os.environ.get(DISABLE_ENV) else cache_key(raw)
    if key is not None:
        hit = _read(cache_dir() / f"{key}.json")
        if hit is not None:
            return hit, DeferredSourceMap(file, text), []
    data, smap, problems = parse_yaml(text, file)
    if key is not None and not problems and data is not None:
        _write(cache_dir() / f"{key}.json", data)
    return data, smap, problems


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


def _read(path: Path) -> Any:
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
    return data if isinstance(data, dict) else None


def _write(path: Path, data: Any) -> None:
    """Write an entry atomically; anything that cannot be stored as JSON exactly is skipped."""
    try:
        text = json.dumps(
            {"format": FORMAT, "data": data},
            ensure_ascii=True,
            allow_nan=False,
            separators=(",", ":"),
        )
        if json.loads(text)["data"] != data:  # tuples, dates...: would not come back the same
            return
    except (TypeError, ValueError, RecursionError):
        return
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
        return


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return
