"""Real documents to mutate: what each parser sees in the field, from files we already have.

Fuzzing that starts from real text reaches the deep branches of a parser (an Xid line with a
mangled PCI id, an nvidia-smi XML cut inside a ``<gpu>`` block) far more often than random
text does. Seeds come from, in order:

* the shipped demo scenarios and ``tests/fixtures/k8s`` (always present, CI included);
* the fixture text of the test servers (``tests/sshd.py``, ``tests/kubeapi/cluster.py``);
* the real-world corpus next to the checkout (``../shared/corpus``), when it is there: kernel
  logs, nvidia-smi XML/text/errors, device-plugin logs and the strings of the incident cases.

Seeds are read once per session and only read, never copied into the repo.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from gputriage.evidence.model import BUNDLE_FILES, Key
from tests import sshd
from tests.conftest import ROOT, SHARED
from tests.kubeapi import cluster as kube_fixtures

#: Parser inputs that are not a whole bundle file.
SCHEDULER = "scheduler"
DESCRIBE = "describe"

#: Files larger than this are not used as seeds (mutating megabytes is slow and adds nothing).
MAX_SEED_BYTES = 256 * 1024

_FILE_KEYS: dict[str, Key] = {name: key for key, names in BUNDLE_FILES.items() for name in names}


def _bundle_dirs() -> Iterator[Path]:
    scenarios = ROOT / "gputriage" / "scenarios"
    fixtures = ROOT / "tests" / "fixtures" / "k8s"
    for parent in (scenarios, fixtures):
        if parent.is_dir():
            yield from sorted(p for p in parent.iterdir() if p.is_dir())


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_SEED_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _corpus_files(sub: str) -> list[Path]:
    if SHARED is None:
        return []
    base = SHARED / "corpus" / sub
    return sorted(p for p in base.rglob("*") if p.is_file() and p.suffix != ".md")


def _case_strings(field: str) -> list[str]:
    """Every string under ``field`` of the corpus incident cases (their evidence, not answers)."""
    import yaml

    out: list[str] = []
    for path in _corpus_files("k8s/cases"):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        value = data.get(field) if isinstance(data, dict) else None
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            lines = [v if isinstance(v, str) else json.dumps(v) for v in value]
            if lines:
                out.append("\n".join(lines) + "\n")
    return out


def _event_messages(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data.get("items") if isinstance(data, dict) else None
    return [str(i["message"]) for i in items or [] if isinstance(i, dict) and i.get("message")]


@cache
def seeds() -> dict[str, tuple[str, ...]]:
    """Seed documents by parser input kind: a :class:`Key` value, ``scheduler`` or
    ``describe``. Every kind has at least one seed."""
    found: dict[str, list[str]] = {k.value: [] for k in Key}
    found[SCHEDULER] = []
    found[DESCRIBE] = []

    for bundle in _bundle_dirs():
        for file in sorted(bundle.iterdir()):
            key = _FILE_KEYS.get(file.name)
            text = _read(file) if key else None
            if key is None or text is None:
                continue
            found[key.value].append(text)
            if file.name.startswith(("events", "owner-events")):
                found[SCHEDULER] += _event_messages(text)
    for file in sorted((ROOT / "tests" / "fixtures" / "k8s" / "describe").glob("*.txt")):
        text = _read(file)
        if text:
            found[DESCRIBE].append(text)
            found[Key.POD.value].append(text)  # the bundle reader accepts describe text

    found[Key.KUBELET_LOG.value] += [sshd.KUBELET_LOG, kube_fixtures.KUBELET_JOURNAL]
    found[Key.DMESG.value] += [sshd.KERNEL_LOG, sshd.DMESG_T]
    found[Key.NVIDIA_SMI.value] += [sshd.NVIDIA_SMI_XML, sshd.NVIDIA_SMI_DRIVER_ERROR]
    found[Key.LSMOD.value].append(sshd.LSMOD)
    found[Key.CONTAINERD_CONFIG.value].append(sshd.CONTAINERD_DUMP)
    found[Key.DEVICE_PLUGIN_LOG.value].append(kube_fixtures.XID_PLUGIN_LOG)
    found[SCHEDULER] += [kube_fixtures.UNSCHEDULABLE, kube_fixtures.QUOTA_REJECTION]
    found[Key.CONTAINER_LOG.value].append(
        "step 9000 loss 1.71\nRuntimeError: CUDA error: unspecified launch failure\n"
    )

    for path in _corpus_files("gpu/dmesg") + _corpus_files("gpu/fabricmanager"):
        text = _read(path)
        if text is None:
            continue
        kind = Key.DEVICE_PLUGIN_LOG if "device-plugin" in path.name else Key.DMESG
        found[kind.value].append(text)
    for path in _corpus_files("gpu/nvidia-smi"):
        text = _read(path)
        if text is not None:
            found[Key.NVIDIA_SMI.value].append(text)
    found[Key.KUBELET_LOG.value] += _case_strings("kubelet_journal")
    found[Key.DEVICE_PLUGIN_LOG.value] += _case_strings("device_plugin_log")
    found[Key.CONTAINER_LOG.value] += _case_strings("container_log")
    found[Key.DMESG.value] += _case_strings("dmesg")
    for text in _case_strings("events"):
        found[SCHEDULER] += [
            line
            for line in text.splitlines()
            if "nodes are available" in line or "Insufficient" in line
        ]

    found[Key.CONTAINER_LOG_PREVIOUS.value] += found[Key.CONTAINER_LOG.value]
    found[Key.DEV_NVIDIA.value].append(
        "crw-rw-rw- 1 root root 195,   0 Mar  5 09:58 /dev/nvidia0\n"
        "crw-rw-rw- 1 root root 195, 255 Mar  5 09:58 /dev/nvidiactl\n"
        "ls: cannot access '/dev/nvidia-uvm': No such file or directory\n"
    )
    empty = [name for name, docs in found.items() if not docs]
    for name in empty:  # every structured key at least gets an empty list
        found[name].append(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    return {k: tuple(dict.fromkeys(v)) for k, v in found.items()}


def lines_of(kind: str) -> tuple[str, ...]:
    """Every distinct non-empty line of the seeds of ``kind``."""
    out: dict[str, None] = {}
    for doc in seeds()[kind]:
        for line in doc.splitlines():
            if line.strip():
                out[line] = None
    return tuple(out)
