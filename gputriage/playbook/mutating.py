"""Which shell commands can change state: the loader refuses one without ``mutates: true``.

A fix command is read the way a shell reads it: split into pipeline/list segments (``|``,
``&&``, ``||``, ``;``), ``sudo``/``env``/``VAR=value`` prefixes dropped, then the program and
its verb are looked up in :data:`MUTATING`. A write redirection (``>``/``>>``) anywhere makes a
command mutating too. The list errs on the side of "mutates": a read-only command wrongly
flagged only costs the author one ``mutates: true``; a mutating one missed would be copied
without a question.
"""

from __future__ import annotations

import re
import shlex

#: Programs that change state whatever their arguments.
ALWAYS: frozenset[str] = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "tee",
        "dd",
        "ln",
        "chmod",
        "chown",
        "mkdir",
        "touch",
        "modprobe",
        "rmmod",
        "insmod",
        "nvidia-modprobe",
        "reboot",
        "shutdown",
        "poweroff",
        "kill",
        "pkill",
        "killall",
        "update-initramfs",
        "dracut",
        "sysctl",
        "apt",
        "apt-get",
        "yum",
        "dnf",
        "zypper",
        "dpkg",
        "rpm",
        "pip",
        "nvidia-persistenced",
        "mount",
        "umount",
        "swapoff",
        "swapon",
        "truncate",
        "install",
    }
)

#: Program -> verbs (first non-flag word) that change state.
VERBS: dict[str, frozenset[str]] = {
    "kubectl": frozenset(
        {
            "delete",
            "cordon",
            "uncordon",
            "drain",
            "taint",
            "label",
            "annotate",
            "patch",
            "apply",
            "create",
            "replace",
            "edit",
            "set",
            "scale",
            "rollout",
            "run",
            "expose",
            "autoscale",
            "debug",
            "cp",
            "attach",
        }
    ),
    "helm": frozenset({"install", "upgrade", "uninstall", "delete", "rollback"}),
    "systemctl": frozenset(
        {
            "restart",
            "start",
            "stop",
            "reload",
            "try-restart",
            "reload-or-restart",
            "enable",
            "disable",
            "mask",
            "unmask",
            "daemon-reload",
            "kill",
            "isolate",
            "reboot",
        }
    ),
    "nvidia-ctk": frozenset({"runtime", "cdi", "system", "config"}),
    "dkms": frozenset({"autoinstall", "install", "build", "remove", "uninstall", "unbuild"}),
    "crictl": frozenset({"rm", "rmp", "rmi", "stop", "stopp", "runp", "create", "start"}),
    "ctr": frozenset({"run", "rm", "delete", "kill"}),
}

#: ``nvidia-ctk`` sub-commands that only read (``cdi list``).
_READ_ONLY_PAIRS: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("nvidia-ctk", "cdi", "list"),
    }
)

#: nvidia-smi options that change the GPU (reset, persistence, MIG, ECC, clocks, power).
NVIDIA_SMI_WRITES: frozenset[str] = frozenset(
    {
        "-r",
        "--gpu-reset",
        "-pm",
        "--persistence-mode",
        "-mig",
        "--multi-instance-gpu",
        "-e",
        "--ecc-config",
        "-c",
        "--compute-mode",
        "-ac",
        "--applications-clocks",
        "-rac",
        "-lgc",
        "-rgc",
        "-lmc",
        "-rmc",
        "-pl",
        "--power-limit",
        "-cgi",
        "-dgi",
        "-cci",
        "-dci",
        "--create-gpu-instance",
        "--destroy-gpu-instance",
        "--create-compute-instance",
        "--destroy-compute-instance",
        "-am",
        "--accounting-mode",
        "-caa",
    }
)

_VALUE_FLAGS = frozenset(
    {
        "-n",
        "--namespace",
        "--context",
        "--kubeconfig",
        "-c",
        "-l",
        "--selector",
        "-o",
        "--output",
        "-f",
        "--cluster",
        "--user",
        "-i",
    }
)
_SPLIT = re.compile(r"\|\||&&|[|;&\n]|\$\(|\)|`")
_REDIRECT = re.compile(r"(?<![0-9&<])>>?(?!&)\s*(?!/dev/null\b)\S")


def mutating_reason(command: str) -> str:
    """Why ``command`` can change state ("kubectl delete", "redirects to a file"), or ""."""
    if _REDIRECT.search(_unquoted(command)):
        return "writes a file with a '>' redirection"
    for segment in _SPLIT.split(command):
        reason = _segment_reason(segment)
        if reason:
            return reason
    return ""


def _segment_reason(segment: str) -> str:
    try:
        words = shlex.split(segment, comments=True)
    except ValueError:
        words = segment.split()
    while words and (
        words[0] in ("sudo", "env", "nohup", "time", "exec")
        or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])
        or (words[0].startswith("-") and len(words) > 1)
    ):
        words = words[1:]
    if not words:
        return ""
    program = words[0].rsplit("/", 1)[-1]
    if program == "ssh":  # ssh HOST CMD...: judge the remote command
        rest = [w for w in words[1:] if not w.startswith("-")][1:]
        return mutating_reason(" ".join(rest)) if rest else ""
    if program == "kubectl" and "exec" in words and "--" in words:  # judge the inner command
        return mutating_reason(shlex.join(words[words.index("--") + 1 :]))
    if program in ALWAYS:
        return program
    if program == "sed" and any(
        w == "-i" or w.startswith("-i") or w == "--in-place" for w in words[1:]
    ):
        return "sed -i"
    if program == "nvidia-smi":
        if len(words) > 1 and words[1] in ("dmon", "pmon", "topo", "nvlink"):
            return ""  # monitoring sub-commands (their -c is a count, not compute mode)
        hit = next((w for w in words[1:] if w.split("=", 1)[0] in NVIDIA_SMI_WRITES), "")
        if hit:
            return f"nvidia-smi {hit}"
        return ""
    if program == "nvidia-bug-report.sh":
        return ""
    verbs = VERBS.get(program)
    if not verbs:
        return ""
    args = _positional(words[1:])
    if not args:
        return ""
    if tuple([program, *args[:2]]) in _READ_ONLY_PAIRS:
        return ""
    if args[0] in verbs:
        return f"{program} {args[0]}"
    return ""


def _positional(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w.startswith("-"):
            skip = w in _VALUE_FLAGS
            continue
        out.append(w)
    return out


def _unquoted(command: str) -> str:
    """The command with quoted strings blanked, so a '>' in a grep pattern is not a redirect."""
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", command)
