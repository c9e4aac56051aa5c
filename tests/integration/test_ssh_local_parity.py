"""``--local`` runs the same commands as SSH, filters the same way, and yields the same Evidence.

The local source runs the lab node's fixture tools directly (PATH points at them), so the two
transports see identical node output.
"""

from __future__ import annotations

import time

import pytest

from gputriage.evidence.local import LocalNodeSource
from gputriage.evidence.model import Key, Status
from gputriage.evidence.nvml import NvmlError
from gputriage.evidence.sources import NODE_KEYS
from gputriage.evidence.ssh import SshNodeSource
from tests.sshd import KUBELET_LOG, SshLab

pytestmark = pytest.mark.integration

COMMAND_KEYS = [k for k in NODE_KEYS if k is not Key.NVIDIA_SMI]


@pytest.fixture
def lab(lab: SshLab, monkeypatch: pytest.MonkeyPatch) -> SshLab:
    """The shared lab (tests/conftest.py), with its node's tools on this process's PATH too."""
    monkeypatch.setenv("PATH", f"{lab.bin}:{lab.core}")
    return lab


class NoDriver:
    """An NVML adapter on a machine without the driver (only ``init`` is ever reached)."""

    def init(self) -> None:
        raise NvmlError("library_not_found", "NVML Shared Library Not Found")


def test_local_and_ssh_collect_identical_evidence(lab: SshLab) -> None:
    # Lines naming a pod with shell metacharacters: local passes argv, never a shell.
    pwned = lab.tmp / "pwned"
    pod, namespace = f"$(touch {pwned})", "ml;x"
    lab.write_data("kubelet.log", KUBELET_LOG + f'... E0305 pod="{namespace}/{pod}"\n')
    query = lab.query(pod=pod, namespace=namespace)
    ssh = SshNodeSource(lab.settings())
    over_ssh = {k: ssh.collect(k, query, 20) for k in COMMAND_KEYS}
    ssh.close()
    local = LocalNodeSource()
    here = {k: local.collect(k, query, 20) for k in COMMAND_KEYS}
    for key in COMMAND_KEYS:
        a, b = over_ssh[key], here[key]
        assert (b.status, b.format, b.raw) == (a.status, a.format, a.raw), key
        assert b.source.removeprefix("local: ") == a.source.removeprefix("ssh gpu-node-1: ")
        assert b.detail == a.detail
    assert len(here[Key.KUBELET_LOG].lines()) == 4
    assert here[Key.KUBELET_LOG].lines()[-1] == f'... E0305 pod="{namespace}/{pod}"'
    assert not pwned.exists()


def test_local_nvidia_smi_comes_from_nvml(lab: SshLab) -> None:
    ev = LocalNodeSource(nvml=NoDriver).collect(Key.NVIDIA_SMI, lab.query(), 5)
    assert ev.status is Status.UNAVAILABLE
    assert ev.detail == ("no NVIDIA driver/NVML on this machine (NVML Shared Library Not Found)")
    assert ev.source == "local: NVML"


def test_local_missing_tool_sudo_and_timeout(lab: SshLab) -> None:
    lab.remove_tool("lsmod")
    missing = LocalNodeSource().collect(Key.LSMOD, lab.query(), 5)
    assert (missing.status, missing.detail) == (
        Status.UNAVAILABLE,
        "lsmod is not installed on the node (command not found)",
    )

    sudo = LocalNodeSource(sudo=True).collect(Key.DMESG, lab.query(), 5)
    assert sudo.ok and "Xid (PCI:0000:3b:00): 79" in sudo.raw
    assert (lab.data / "sudo.log").read_text().startswith("journalctl -k --no-pager")

    lab.write_data("sudo-needs-password", "")
    refused = LocalNodeSource(sudo=True).collect(Key.DMESG, lab.query(), 5)
    assert refused.status is Status.FORBIDDEN and "NOPASSWD" in refused.detail

    lab.write_tool("dmesg", "sleep 10\n")
    lab.write_tool("journalctl", "sleep 10\n")
    started = time.monotonic()
    slow = LocalNodeSource().collect(Key.DMESG, lab.query(), 1.0)
    assert slow.status is Status.TIMEOUT
    assert slow.detail == "journalctl -k --no-pager --since -2h -o short-iso did not finish in time"
    assert time.monotonic() - started < 3
