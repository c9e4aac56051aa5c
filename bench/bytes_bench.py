#!/usr/bin/env python3
"""Bytes on the wire from a node with a 1M-line kubelet journal and a 100 MB kernel log.

A real sshd node (``tests/sshd.SshLab``, reached through its ProxyJump bastion with a TCP
relay in front that counts every byte sent to the client, handshakes included) whose
``journalctl`` prints a million kubelet lines about other pods (then the fixture journal) and
100 MB of unrelated kernel lines (then the fixture kernel log with its Xid 79). gputriage's
SSH source collects the kubelet journal and the kernel log for ``ml/trainer-0``; the figure is
what crossed the network, next to what the node produced. DESIGN 4: bounded by the filter
(the lines that matter), not by the log size.

    .venv/bin/python bench/bytes_bench.py [--lines 1000000] [--kernel-mb 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import Figure, at_most, human_bytes, info

SECTION = "node bytes"
KUBELET_LINE = (
    "2026-03-05T10:00:00+0000 gpu-node-1 kubelet[1187]: I0305 10:00:00.000000 1187 "
    'reconciler.go:245] "VerifyControllerAttachedVolume started" '
    'pod="web/frontend-5d9c7b7f4-x2p9k"'
)
KERNEL_LINE = (
    "2026-03-05T09:00:00+0000 gpu-node-1 kernel: cali5f1e9a3b2c4: link becomes "
    "ready, eth0 carrier on"
)
#: Goal: the lines that matter plus SSH's own overhead (key exchange, channels).
WIRE_LIMIT = 64 * 1024


def journal_tool(lines: int, kernel_bytes: int) -> str:
    return f"""\
case " $* " in
  *" -u kubelet "*)
    yes '{KUBELET_LINE}' | head -n {lines}
    exec cat "$DATA/kubelet.log" ;;
  *" -k "*)
    yes '{KERNEL_LINE}' | head -c {kernel_bytes}
    exec cat "$DATA/kernel.log" ;;
esac
exit 1
"""


def measure(lines: int, kernel_mb: int) -> list[Figure]:
    from gputriage.evidence.model import Key
    from gputriage.evidence.ssh import SshNodeSource
    from tests.sshd import SshLab

    kernel_bytes = kernel_mb * 1000 * 1000
    produced = lines * (len(KUBELET_LINE) + 1) + kernel_bytes
    with (
        tempfile.TemporaryDirectory(prefix="gputriage-bytes-") as tmp,
        SshLab(Path(tmp) / "lab", proxy=True) as lab,
    ):
        lab.write_tool("journalctl", journal_tool(lines, kernel_bytes))
        source = SshNodeSource(lab.settings())
        start = time.perf_counter()
        kubelet = source.collect(Key.KUBELET_LOG, lab.query(), timeout=300)
        kernel = source.collect(Key.DMESG, lab.query(), timeout=300)
        elapsed = time.perf_counter() - start
        source.close()
        assert lab.counting is not None
        wire = lab.counting.bytes_to_client
    if not (kubelet.ok and kernel.ok):
        raise RuntimeError(f"collection failed: {kubelet.detail} / {kernel.detail}")
    if "Xid (PCI:0000:3b:00): 79" not in kernel.raw:
        raise RuntimeError("the Xid 79 line did not come through the filter")
    note = (
        f"node produced {human_bytes(produced)} ({lines:,} journal lines + "
        f"{kernel_mb} MB kernel log); kept {len(kubelet.lines())} + "
        f"{len(kernel.lines())} lines; {elapsed:.1f} s"
    )
    return [
        info(SECTION, "bytes the node's logs hold", produced, "B"),
        at_most(
            SECTION,
            "bytes on the wire (both logs, SSH included)",
            wire,
            "B",
            WIRE_LIMIT,
            goal=f"<= {WIRE_LIMIT // 1024} KiB",
            note=note,
        ),
        info(SECTION, "share of the logs transferred", 100 * wire / produced, "%", note),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--kernel-mb", type=int, default=100)
    args = parser.parse_args()
    for f in measure(args.lines, args.kernel_mb):
        print(f"{f.name:<48} {f.shown():>14}  {f.goal:<10} {f.verdict}  {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
