"""Real kernel logs and nvidia-smi outputs from the corpus, served by the lab node over SSH.

Proves on real text that the on-node filter keeps exactly the lines with GPU keywords (every
Xid/SXid/NVRM line survives) and that documents arrive byte for byte. Corpus files are copied
into the lab's temp dir at test time only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gputriage.evidence.model import Key, Status
from gputriage.evidence.nodecmds import KERNEL_KEYWORDS
from gputriage.evidence.ssh import SshNodeSource
from tests.conftest import require_tool
from tests.sshd import SshLab

pytestmark = [pytest.mark.integration, pytest.mark.corpus]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path_factory.mktemp("corpus") / "lab") as lab:
        yield lab


@pytest.fixture(scope="module")
def source(lab: SshLab) -> Iterator[SshNodeSource]:
    src = SshNodeSource(lab.settings())
    yield src
    src.close()


def test_kernel_filter_on_every_corpus_log(
    corpus_dir: Path, lab: SshLab, source: SshNodeSource
) -> None:
    files = sorted((corpus_dir / "gpu" / "dmesg").iterdir())
    assert len(files) >= 30
    kept_xids = 0
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        lab.write_data("kernel.log", text)
        ev = source.collect(Key.DMESG, lab.query(), timeout=20)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        expected = [line for line in lines if any(k in line for k in KERNEL_KEYWORDS)]
        assert ev.status is Status.OK, (path.name, ev.detail)
        assert ev.raw == "".join(f"{line}\n" for line in expected), path.name
        xid_lines = [line for line in lines if "Xid" in line]
        assert all(line in ev.raw for line in xid_lines), path.name
        kept_xids += len(xid_lines)
    assert kept_xids > 100


def test_xid79_corpus_lines_survive_verbatim(
    corpus_dir: Path, lab: SshLab, source: SshNodeSource
) -> None:
    text = (corpus_dir / "gpu/dmesg/xid79-sxid20034-hgx-fallen-off-bus-gpud-readme.log").read_text()
    lab.write_data("kernel.log", "[6781740.000001] e1000e: eno1 NIC Link is Up\n" + text)
    ev = source.collect(Key.DMESG, lab.query(), timeout=20)
    assert ev.lines()[2] == (
        "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    assert sum("SXid (PCI:0000:05:00.0): 20034" in line for line in ev.lines()) == 4
    assert "e1000e" not in ev.raw


def test_nvidia_smi_documents_and_errors_arrive_intact(
    corpus_dir: Path, lab: SshLab, source: SshNodeSource
) -> None:
    smi = corpus_dir / "gpu" / "nvidia-smi"
    for path in sorted((smi / "xml").iterdir()):
        lab.write_data("nvidia-smi.xml", path.read_text())
        ev = source.collect(Key.NVIDIA_SMI, lab.query(), timeout=20)
        assert (ev.status, ev.format) == (Status.OK, "xml"), path.name
        assert ev.raw == path.read_text(), path.name
    lost = (smi / "errors" / "unable-device-handle-gpu-is-lost-linux.txt").read_text()
    lab.write_data("nvidia-smi.xml", lost)
    lab.write_tool("nvidia-smi", 'cat "$DATA/nvidia-smi.xml"; exit 15\n')
    try:
        ev = source.collect(Key.NVIDIA_SMI, lab.query(), timeout=20)
    finally:
        lab.reset_node()
    assert ev.status is Status.OK and ev.raw == lost
    assert (
        "nvidia-smi -q -x exited 15: Unable to determine the device handle for GPU "
        "0000:02:00.0: GPU is lost" in ev.detail
    )
