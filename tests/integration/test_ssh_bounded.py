"""Huge node logs cost the bytes of the lines that matter: filtering and bounds run on the node.

The bytes are measured on the wire, by a TCP relay in front of the bastion that counts what
the client received (handshake and all).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gputriage.evidence.model import Key, Status
from gputriage.evidence.ssh import SshNodeSource
from tests.conftest import require_tool
from tests.sshd import SshLab

pytestmark = pytest.mark.integration

#: 1M kubelet lines about other pods, then the fixture journal (3 lines that matter).
BIG_JOURNAL = """\
printf '%s\\n' "$@" > "$DATA/journalctl.args"
case " $* " in
  *" -u kubelet "*)
    yes '2026-03-05T10:00:00+0000 gpu-node-1 kubelet[1187]: I0305 10:00:00.000000 1187 reconciler.go:245] "VerifyControllerAttachedVolume started" pod="web/frontend-5d9c7b7f4-x2p9k"' | head -n 1000000
    exec cat "$DATA/kubelet.log" ;;
  *" -k "*)
    yes '2026-03-05T09:00:00+0000 gpu-node-1 kernel: cali5f1e9a3b2c4: link becomes ready, eth0 carrier on' | head -c 100000000
    exec cat "$DATA/kernel.log" ;;
esac
exit 1
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[SshLab]:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "lab", proxy=True) as lab:
        yield lab


def test_million_line_journal_and_100mb_kernel_log_transfer_kilobytes(lab: SshLab) -> None:
    lab.write_tool("journalctl", BIG_JOURNAL)
    source = SshNodeSource(lab.settings())
    kubelet = source.collect(Key.KUBELET_LOG, lab.query(), timeout=120)
    kernel = source.collect(Key.DMESG, lab.query(), timeout=120)
    source.close()
    assert lab.counting is not None
    assert kubelet.status is Status.OK and kernel.status is Status.OK
    assert len(kubelet.lines()) == 3 and "frontend" not in kubelet.raw
    assert len(kernel.lines()) == 6
    assert "NVRM: Xid (PCI:0000:3b:00): 79" in kernel.raw
    # ~200 MB were produced on the node; the client received a few kilobytes.
    assert source.bytes_received == len(kubelet.raw) + len(kernel.raw) + len("gputriage-rc=0\n") * 2
    assert lab.counting.bytes_to_client < 32 * 1024, lab.counting.bytes_to_client


def test_matching_flood_is_cut_on_the_node_at_max_bytes(lab: SshLab) -> None:
    line = (
        "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus."
    )
    lab.write_tool("journalctl", f'yes "{line}" | head -n 1000000\n')  # 115 MB
    limit = 256 * 1024
    source = SshNodeSource(lab.settings())
    ev = source.collect(Key.DMESG, lab.query(max_bytes=limit), timeout=120)
    source.close()
    assert lab.counting is not None
    assert ev.status is Status.OK
    assert f"cut at {limit} bytes on the node" in ev.detail
    assert all(text == line for text in ev.lines())  # the partial first line was dropped
    assert limit - len(line) - 1 <= len(ev.raw) < limit
    assert lab.counting.bytes_to_client < limit + 32 * 1024, lab.counting.bytes_to_client
