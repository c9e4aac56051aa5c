"""Atomic file writes: a crash or a dropped terminal never leaves half a file behind.

Only regular files are written (``-o -`` is stdout, handled by the commands): an ``-o`` naming
a device, a pipe (``-o >(cmd)`` is ``/dev/fd/63``), a directory or a symbolic link is refused
with a named reason, never replaced (as root, renaming over ``/dev/stdout`` would replace the
device link with a file).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from gputriage.errors import GputriageError

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def refuse_non_regular(target: Path) -> None:
    """Raise :class:`GputriageError` unless ``target`` is absent or a regular file."""
    try:
        mode = os.lstat(target).st_mode
    except OSError:  # absent, or unreachable: the write itself reports it (an OSError)
        return
    if stat.S_ISREG(mode):
        return
    what = _kind(mode)
    if stat.S_ISLNK(mode):
        try:
            what += f" to {_kind(os.stat(target).st_mode)}"
        except OSError:
            what += " (dangling)"
    raise GputriageError(
        f"will not write {target}: it is {what}, and only regular files are "
        "written; use -o - to write to stdout",
        title="cannot write",
    )


def atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same directory, fsync, rename.

    Readers see either the old content or the new one, never a mix. Parent directories are
    created. Returns the final path.
    """
    target = Path(path).expanduser()
    refuse_non_regular(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return target
