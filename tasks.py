#!/usr/bin/env python3
"""Set-up and run, on a fresh machine with only Python 3.11+.

    python3 tasks.py demo [ARGS...]   create .venv, install gputriage, run `gputriage demo`
    python3 tasks.py test [ARGS...]   create .venv, install test extras, run the whole suite

Extra arguments go to gputriage or pytest. The virtual environment is reused; the install
step is skipped while pyproject.toml is unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def ensure_venv(extras: str) -> None:
    if not (BIN / "python").exists():
        print(f"tasks: creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / f".installed-{extras or 'base'}"
    pyproject = ROOT / "pyproject.toml"
    if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return
    target = f".[{extras}]" if extras else "."
    print(f"tasks: installing gputriage{f'[{extras}]' if extras else ''} into {VENV}", flush=True)
    subprocess.run(
        [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        cwd=ROOT,
        check=True,
    )
    subprocess.run(
        [str(BIN / "python"), "-m", "pip", "install", "--quiet", "-e", target], cwd=ROOT, check=True
    )
    stamp.touch()


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__, file=sys.stderr)
        return 2
    task, rest = argv[0], argv[1:]
    if task == "demo":
        ensure_venv("")
        return subprocess.call([str(BIN / "gputriage"), "demo", *rest], cwd=ROOT)
    ensure_venv("test")
    rc = subprocess.call([str(BIN / "python"), "-m", "pytest", *rest], cwd=ROOT)
    if rc == 5:
        print("tasks: pytest collected no tests: that is a failure", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
