"""Files a user drops into a bundle under names of their own (DESIGN 3.1).

A ticket's bundle holds what people pasted: ``toolkit.log``, ``scheduler.log``, ``lspci.txt``,
``kubectl-get-events.txt``. Any ``*.log`` / ``*.txt`` file the bundle layout does not name is
read as a generic log: the real parsers sniff what it is, and it stands in for the evidence kind
it matches when that kind is missing from the bundle (a kernel log with Xid lines for
``dmesg.log``, a device-plugin log, a kubelet journal or runtime errors, nvidia-smi output, a
container log with a known failure signature). It is cited by its own file name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from gputriage.evidence.model import BUNDLE_FILES, Evidence, Key, Status

#: Suffixes read as generic logs.
SUFFIXES = (".log", ".txt")
#: A loose file bigger than this is read from its tail only, as the bundle reader does.
MAX_BYTES = 16 * 1024 * 1024


def _is_kernel(text: str) -> bool:
    from gputriage.parsers.kernel import parse_text

    return bool(parse_text(text).records)


def _is_device_plugin(text: str) -> bool:
    from gputriage.parsers.device_plugin import parse_device_plugin_log

    log = parse_device_plugin_log(text)
    return bool(
        log.registered
        or log.nvml_errors
        or log.no_devices
        or log.unhealthy
        or log.registration_errors
        or log.starts
    )


def _is_kubelet(text: str) -> bool:
    from gputriage.parsers.journal import parse_kubelet_journal

    j = parse_kubelet_journal(text)
    return bool(
        j.registrations
        or j.endpoint_errors
        or j.admission_errors
        or j.runtime_handler
        or j.sandbox_errors
        or j.container_cli_errors
        or j.hook_errors
        or j.cdi_errors
        or j.dra_errors
        or j.evictions
    )


def _is_nvidia_smi(text: str) -> bool:
    return "NVIDIA-SMI" in text or "<nvidia_smi_log>" in text or "Driver Version" in text


def _is_container_log(text: str) -> bool:
    from gputriage.parsers.container_log import scan_container_log

    return bool(scan_container_log(text).matches)


#: Evidence kinds a loose file can stand for, most specific first.
SNIFFERS: tuple[tuple[Key, Callable[[str], bool]], ...] = (
    (Key.NVIDIA_SMI, _is_nvidia_smi),
    (Key.DMESG, _is_kernel),
    (Key.DEVICE_PLUGIN_LOG, _is_device_plugin),
    (Key.KUBELET_LOG, _is_kubelet),
    (Key.CONTAINER_LOG, _is_container_log),
)


def loose_files(root: Path) -> list[Path]:
    """``*.log`` / ``*.txt`` regular files in ``root`` that the bundle layout does not name."""
    known = {name for names in BUNDLE_FILES.values() for name in names}
    out = []
    for path in sorted(root.iterdir()):
        if (
            path.suffix in SUFFIXES
            and path.name not in known
            and not path.is_symlink()
            and path.is_file()
        ):
            out.append(path)
    return out


def stand_ins(root: Path, missing: Iterable[Key]) -> list[Evidence]:
    """Evidence read from loose files for the kinds in ``missing`` (one file per kind)."""
    wanted = set(missing)
    found: list[Evidence] = []
    for path in loose_files(root):
        try:
            with path.open("rb") as f:
                size = path.stat().st_size
                if size > MAX_BYTES:
                    f.seek(size - MAX_BYTES)
                text = f.read(MAX_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        for key, sniff in SNIFFERS:
            if key in wanted and _safe(sniff, text):
                found.append(
                    Evidence(
                        key,
                        Status.OK,
                        f"read from {path.name} (a loose file)",
                        text,
                        f"{root.name}/{path.name}",
                        format="text",
                        complete=False,
                    )
                )
                wanted.discard(key)
                break
    return found


def _safe(sniff: Callable[[str], bool], text: str) -> bool:
    try:
        return sniff(text)
    except Exception:  # a parser bug must not lose the rest of the bundle
        return False
