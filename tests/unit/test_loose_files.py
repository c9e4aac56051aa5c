"""Loose files in a bundle: read as generic logs, standing in for the evidence they are."""

from __future__ import annotations

import json
from pathlib import Path

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Key, Status

XID_LINE = (
    "Dec 01 10:00:01 gpu-node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
    "GPU has fallen off the bus.\n"
)
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml"},
    "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "main", "image": "x"}]},
    "status": {"phase": "Running"},
}


def _bundle(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "pod.json").write_text(json.dumps(POD))
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_a_kernel_log_under_another_name_stands_in_for_dmesg(tmp_path: Path) -> None:
    ev = read_bundle(
        _bundle(
            tmp_path,
            {
                "node-7-journal.txt": "boot\n" + XID_LINE,
                "notes.txt": "paged at 03:12, restarted the job\n",
            },
        )
    )
    dmesg = ev[Key.DMESG]
    assert dmesg.ok and dmesg.source == "bundle/node-7-journal.txt"
    assert "fallen off the bus" in dmesg.raw
    assert "loose file" in dmesg.detail
    assert not dmesg.complete
    # a file that matches no known kind stands in for nothing
    assert ev[Key.CONTAINER_LOG].status is Status.UNAVAILABLE


def test_a_file_with_the_standard_name_wins(tmp_path: Path) -> None:
    ev = read_bundle(
        _bundle(tmp_path, {"dmesg.log": "[  1.0] usb 1-1: new device\n", "other.log": XID_LINE})
    )
    assert ev[Key.DMESG].source == "bundle/dmesg.log"


def test_runtime_errors_in_a_toolkit_log_are_read(tmp_path: Path) -> None:
    text = (
        "Error: failed to create containerd task: failed to create shim task: OCI runtime "
        "create failed: runc create failed: unable to start container process: error "
        "during container init: error running hook #0: error running hook: exit status 1, "
        "stdout: , stderr: nvidia-container-cli: initialization error: load library "
        "failed: libnvidia-ml.so.1: cannot open shared object file: no such file or "
        "directory: unknown\n"
    )
    ev = read_bundle(_bundle(tmp_path, {"toolkit.log": text}))
    found = [k for k in (Key.DMESG, Key.KUBELET_LOG, Key.CONTAINER_LOG) if ev[k].ok]
    assert found and all(ev[k].source == "bundle/toolkit.log" for k in found)


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text(XID_LINE)
    root = _bundle(tmp_path, {})
    (root / "linked.log").symlink_to(outside)
    assert read_bundle(root)[Key.DMESG].status is Status.UNAVAILABLE
