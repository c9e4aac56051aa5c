"""gputriage as a user has it: a wheel installed into its own virtual environment.

The live and replay figures time the *installed* package, not the source tree: a wheel built
from this checkout (``pip wheel``), installed non-editable with ``pip install`` into a fresh
venv in a temp dir, with its bytecode compiled by pip as on any install, run through its
``gputriage`` console script with no ``PYTHONPATH``. The third-party dependencies are not
downloaded again: the venv reads them from the interpreter running the bench (a ``.pth``
line naming its site-packages), where they are installed and byte-compiled already.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import TracebackType

from bench._util import ROOT

#: What ``pyproject.toml`` builds the wheel from (the package, the playbooks it maps in, and
#: the files the metadata reads).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "gputriage", "playbooks")


class Installed:
    """``with Installed() as inst:`` builds and installs; ``inst.gputriage`` is the script."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="gputriage-installed-")
        self.dir = Path(self._tmp.name)
        self.venv = self.dir / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def gputriage(self) -> Path:
        return self.venv / "bin" / "gputriage"

    def __enter__(self) -> Installed:
        try:
            self._build()
        except BaseException:
            self._tmp.cleanup()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._tmp.cleanup()

    def _build(self) -> None:
        wheels = self.dir / "wheels"
        src = self.dir / "src"  # a clean copy of what the wheel is built from
        src.mkdir()
        for name in WHEEL_SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(
                    ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            else:
                shutil.copy2(ROOT / name, src / name)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--quiet",
                "-w",
                str(wheels),
                str(src),
            ]
        )
        wheel = next(wheels.glob("gputriage-*.whl"))
        _run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)])
        purelib = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        Path(purelib, "gputriage-bench-deps.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(self.python),
                "install",
                "--no-deps",
                "--quiet",
                str(wheel),
            ]
        )
        clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        where = subprocess.run(
            [str(self.python), "-c", "import gputriage; print(gputriage.__file__)"],
            check=True,
            capture_output=True,
            text=True,
            cwd=self.dir,
            env=clean,
        ).stdout.strip()
        if not where.startswith(str(self.venv)):
            raise RuntimeError(f"the bench venv imports gputriage from {where}, not the wheel")
        if not any(Path(where).parent.glob("__pycache__/*.pyc")):
            raise RuntimeError("the installed gputriage has no bytecode")

    def describe(self) -> str:
        return f"wheel installed into {self.venv} (bytecode compiled by pip)"


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... failed: {done.stderr[-1500:]}")
