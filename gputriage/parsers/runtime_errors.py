"""Container-runtime failure texts shared by events, the kubelet journal and pod statuses.

The same runtime error reaches gputriage through several wrappers (an event message, a
structured kubelet journal line with nested Go quoting, a container's waiting message), and
through three runtimes that word it differently. Recognised here (k8s-messages.md 4.3, 4.5,
5.1-5.3):

* a missing runtime handler: containerd 1.x ``failed to get sandbox runtime: no runtime for
  "nvidia" is configured``, containerd 2.x ``unable to get OCI runtime for sandbox "<id>": no
  runtime for "nvidia" is configured``, CRI-O ``failed to find runtime handler nvidia from
  runtime list map[...]``, dockershim / cri-dockerd ``RuntimeHandler "nvidia" not supported``;
* ``nvidia-container-cli`` (libnvidia-container) errors in every hook wrapper generation (runc
  ``container_linux.go`` ``running prestart hook 0 caused``, runc >= 1.1 ``error running hook
  #0``, runc >= 1.2 ``error running prestart hook #0``), including the operator's
  ``nvidia-container-cli.real`` and ``exec command: [...]\\nnvidia-container-cli: ...`` forms;
* CDI injection failures (``unresolvable CDI devices ...``) from the NVIDIA runtime, containerd's
  native CDI and CRI-O.

Pure; never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Missing runtime handler, one alternative per runtime (the handler name is group h1..h3).
RUNTIME_HANDLER_MISSING = re.compile(
    r'no runtime for "(?P<h1>[^"]+)" is configured'  # containerd (CRI plugin, 1.x and 2.x)
    r"|failed to find runtime handler (?P<h2>[^\s:]+) from runtime list"  # CRI-O
    r'|RuntimeHandler "(?P<h3>[^"]+)" not supported'
)  # dockershim, cri-dockerd

#: ``nvidia-container-cli: <kind> error: <detail>``; the detail ends at the wrapper's quoting,
#: an escaped or real newline, or the runtime's trailing ``: unknown``.
_CLI = re.compile(r"nvidia-container-cli(?:\.real)?: (?P<kind>[a-z]+) error: (?P<detail>.+)")
_DETAIL_END = re.compile(r'\\+n|\\+"|"|\n|\s{2,}')

#: CDI: the NVIDIA runtime's modifier, containerd's native CDI, CRI-O, the CDI library itself.
CDI_FAILURE = re.compile(
    r"unresolvable CDI devices?|CDI device injection failed|"
    r"failed to inject CDI devices|failed to inject devices"
)
_CDI_DEVICES = re.compile(
    r"unresolvable CDI devices? (?P<devs>[\w./-]+=[\w.-]+(?::\d+)?"
    r"(?:,\s*[\w./-]+=[\w.-]+(?::\d+)?)*)"
)


#: An OCI hook failed, in every runc generation: ``running prestart hook 0 caused`` (runc <=
#: 1.0-rc9), ``Running hook #0::`` (1.0), ``error running hook #0`` (1.1), ``error running
#: prestart hook #0`` / ``error running createContainer hook #1`` (1.2+). NVIDIA's hooks
#: (nvidia-container-runtime-hook, nvidia-ctk / nvidia-cdi-hook) are the usual ones on GPU nodes.
_HOOK = re.compile(
    r"(?:error running (?P<stage>[a-zA-Z]+) hook #\d+"
    r"|running (?P<old>prestart) hook \d+ caused"
    r"|(?:error )?running hook #\d+:?)"
    r"[^\n]{0,2000}?stderr: (?P<stderr>.*)",
    re.I | re.S,
)
_HOOK_MSG = re.compile(r'level=(?:error|fatal) msg=\\*"(?P<msg>(?:[^"\\]|\\.)*?)\\*"')
_AUTO_DETECTED = re.compile(r"^Auto-detected mode as '[^']*'\s*")
#: The NVIDIA runtime's own (non-hook) failure to add its hook (nvidia-docker#1017).
_INJECT_HOOK = re.compile(r"inject NVIDIA hook: (?P<detail>[^\n\"]+)")


@dataclass(frozen=True)
class HookError:
    """A failed OCI hook: the stage runc named and what the hook printed on stderr."""

    stage: str  # prestart | createContainer | createRuntime | startContainer | "" (not named)
    detail: str

    def to_fact(self) -> dict[str, str]:
        return {"stage": self.stage, "message": self.detail}


@dataclass(frozen=True)
class ContainerCliError:
    """One ``nvidia-container-cli`` complaint: its class and the normalised message."""

    kind: str  # initialization | detection | device | requirement | mount | permission | ...
    detail: str

    @property
    def message(self) -> str:
        return f"nvidia-container-cli: {self.kind} error: {self.detail}"

    def to_fact(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def missing_runtime_handler(text: str) -> str | None:
    """The handler a runtime says it does not have, or None when the text says nothing of it."""
    m = RUNTIME_HANDLER_MISSING.search(text or "")
    if not m:
        return None
    return m["h1"] or m["h2"] or m["h3"] or ""


def container_cli_errors(text: str) -> list[ContainerCliError]:
    """Every ``nvidia-container-cli`` error in ``text``, in order, without duplicates."""
    out: list[ContainerCliError] = []
    for m in _CLI.finditer(text or ""):
        detail = _DETAIL_END.split(m["detail"], maxsplit=1)[0]
        detail = re.sub(r"(?::\s*unknown)+\.?\s*$", "", detail.strip())
        detail = detail.strip().rstrip(".").strip()
        err = ContainerCliError(m["kind"], detail)
        if detail and err not in out:
            out.append(err)
    return out


def cdi_devices(text: str) -> list[str]:
    """The CDI device names (``vendor/class=name``) an ``unresolvable CDI devices`` text lists."""
    m = _CDI_DEVICES.search(text or "")
    # A sentence-ending period is not part of the name (moby/moby#47633: "...=demo1.").
    return [d.strip().rstrip(".") for d in m["devs"].split(",")] if m else []


def hook_errors(text: str) -> list[HookError]:
    """OCI hook failures in ``text`` with the hook's own words (its logrus ``msg`` when it
    printed one, else its stderr), whatever the runc and runtime wording around them."""
    out: list[HookError] = []
    for m in _HOOK.finditer(text or ""):
        stage = m["stage"] or m["old"] or ""
        stderr = m["stderr"]
        logged = _HOOK_MSG.search(stderr)
        if logged:
            detail = re.sub(r'\\+"', '"', logged["msg"])
        else:
            detail = _AUTO_DETECTED.sub("", re.sub(r"\\+n", "\n", stderr).strip())
            cli = re.search(r"nvidia-container-cli(?:\.real)?: ", detail)
            detail = detail[cli.start() :] if cli else detail  # drop "exec command: [...]"
            detail = re.split(r'\\*"|\n', detail, maxsplit=1)[0]
        detail = re.sub(r"\\+n", " ", detail)
        detail = re.sub(r"(?::\s*unknown)+\.?\s*$", "", detail.strip()).strip().rstrip(".")
        err = HookError(stage, detail.strip())
        if err.detail and err not in out:
            out.append(err)
    for m in _INJECT_HOOK.finditer(text or ""):
        err = HookError("", f"inject NVIDIA hook: {m['detail'].strip()}")
        if err not in out:
            out.append(err)
    return out
