"""Copying a fix command somewhere the SRE can paste it from, and saying truthfully where.

Three ways, tried together (no Textual here, so each is tested on its own):

* **OSC 52**: the terminal escape that asks the terminal (and tmux, and terminals at the end of
  an SSH session) to set its clipboard. The app writes it to its own output stream; whether the
  terminal honoured it cannot be known, so it is reported as *sent*, never as *copied*.
* **the platform clipboard**: ``wl-copy`` (Wayland), ``xclip``/``xsel`` (X11), ``pbcopy``
  (macOS) or ``clip.exe`` (WSL), when present and their display is set. Reported only when the
  command exited 0.
* **a file**: when no platform clipboard took the text, it is written (owner-only) to
  ``$XDG_STATE_HOME/gputriage/clipboard.txt`` so it can always be found.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: Seconds a platform clipboard command may take before it counts as failed.
PLATFORM_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ClipboardTool:
    name: str
    argv: tuple[str, ...]
    needs_env: str = ""  # the variable that must be set for the tool to reach a clipboard


#: In order of preference. ``xclip`` and ``xsel`` need an X display, ``wl-copy`` Wayland.
PLATFORM_TOOLS: tuple[ClipboardTool, ...] = (
    ClipboardTool("wl-copy", ("wl-copy",), "WAYLAND_DISPLAY"),
    ClipboardTool("xclip", ("xclip", "-selection", "clipboard", "-in"), "DISPLAY"),
    ClipboardTool("xsel", ("xsel", "--clipboard", "--input"), "DISPLAY"),
    ClipboardTool("pbcopy", ("pbcopy",)),
    ClipboardTool("clip.exe", ("clip.exe",)),
)


@dataclass(frozen=True)
class CopyResult:
    """Where the text went. ``osc52`` is True when the escape was written to a terminal."""

    osc52: bool = False
    platform: str = ""  # the tool that took it ("xclip"), "" when none did
    file: Path | None = None  # the fallback file, when it was written
    problems: tuple[str, ...] = ()  # why a way failed, in words

    @property
    def reached(self) -> bool:
        return self.osc52 or bool(self.platform) or self.file is not None

    def title(self) -> str:
        if self.platform:
            return f"copied to the clipboard ({self.platform})"
        if self.osc52 and self.file is not None:
            return "sent to the terminal clipboard (OSC 52) and saved to a file"
        if self.osc52:
            return "sent to the terminal clipboard (OSC 52)"
        if self.file is not None:
            return "saved to a file (no clipboard reachable)"
        return "not copied"

    def lines(self) -> list[str]:
        """What the toast says beyond its title: each way that worked, then what failed."""
        out: list[str] = []
        if self.platform and self.osc52:
            out.append("also sent to the terminal (OSC 52)")
        if self.file is not None:
            out.append(f"file: {self.file}")
        out += self.problems
        return out


def osc52_sequence(text: str) -> str:
    """``ESC ] 52 ; c ; base64 BEL``: set the clipboard selection ``c`` to ``text``."""
    return "\x1b]52;c;" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "\a"


def platform_tool(env: Mapping[str, str] | None = None) -> ClipboardTool | None:
    """The first clipboard tool that is installed and can reach its display."""
    env = os.environ if env is None else env
    path = env.get("PATH", os.defpath)
    for tool in PLATFORM_TOOLS:
        if tool.needs_env and not env.get(tool.needs_env):
            continue
        if tool.name == "pbcopy" and sys.platform != "darwin":
            continue
        if shutil.which(tool.argv[0], path=path):
            return tool
    return None


def copy_with_platform(text: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Hand ``text`` to the platform clipboard: ``(tool name, "")`` or ``("", why not)``."""
    tool = platform_tool(env)
    if tool is None:
        return "", ""
    try:
        done = subprocess.run(
            list(tool.argv),
            input=text.encode("utf-8"),
            timeout=PLATFORM_TIMEOUT_S,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            env=dict(env) if env is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{tool.name} failed: {type(exc).__name__}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return "", f"{tool.name} exited {done.returncode}" + (f": {why[0][:80]}" if why else "")
    return tool.name, ""


def default_clipboard_file(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or str(
        Path(env.get("HOME", "~")).expanduser() / ".local" / "state"
    )
    return Path(state) / "gputriage" / "clipboard.txt"


def write_clipboard_file(text: str, path: Path) -> str:
    """Write ``text`` to ``path`` readable by its owner only; returns why not, or ""."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    except OSError as exc:
        return f"file {path}: {exc.strerror or exc}"
    return ""


def copy_text(
    text: str, *, osc52_sent: bool, file: Path, env: Mapping[str, str] | None = None
) -> CopyResult:
    """Try the platform clipboard, fall back to ``file``; ``osc52_sent`` says whether the
    caller wrote :func:`osc52_sequence` to a real terminal."""
    problems: list[str] = []
    tool, why = copy_with_platform(text, env)
    if why:
        problems.append(why)
    written: Path | None = None
    if not tool:
        why = write_clipboard_file(text, file)
        if why:
            problems.append(why)
        else:
            written = file
    return CopyResult(osc52=osc52_sent, platform=tool, file=written, problems=tuple(problems))
