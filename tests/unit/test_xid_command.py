"""``gputriage xid``: explain a code, decode a pasted line or a whole log, plain text or JSON."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from gputriage.cli import main

LINE_79 = (
    "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus."
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["xid", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_explains_a_code(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "79")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "Xid 79: GPU has fallen off the bus"
    assert "  NVIDIA mnemonic:   ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in lines
    assert "  immediate action:  RESTART_BM (restart the bare-metal node)" in lines
    assert any(line.startswith("  device plugin:     marks the GPU") for line in lines)
    assert "  feeds Xid 154:     since driver R565" in lines
    assert "\x1b" not in out and "[bold" not in out  # plain text, no markup


def test_xid45_is_preemptive_cleanup(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "45")
    assert rc == 0
    assert out.startswith("Xid 45: Preemptive cleanup, due to previous errors")
    assert "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL" in out
    assert "device plugin:     ignored" in out
    assert "prefetch" not in out.split("notes:")[0].lower()


def test_unknown_code_exits_2_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "999")
    assert rc == 2 and out == ""
    assert err.startswith(
        "gputriage: error: unknown code 999: 999 is neither an Xid in NVIDIA's "
        "catalog (codes 1-172)"
    )


def test_sxid_code(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "20034")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "SXid 20034 (NVSwitch): LTSSM Fault Up (link went down from active)"
    assert "  class:             potentially-fatal" in lines


def test_decodes_a_pasted_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, LINE_79)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"Xid 79 at line 1: {LINE_79}"
    assert "  GPU:               PCI 0000:91:00" in lines
    assert "  pid:               <unknown>" in lines
    assert "  process:           <unknown>" in lines
    assert "  message:           GPU has fallen off the bus." in lines
    assert "  meaning:           GPU has fallen off the bus" in lines
    assert "  immediate action:  RESTART_BM (restart the bare-metal node)" in lines


def test_decodes_a_line_given_as_several_words(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, *LINE_79.split(" "))
    assert rc == 0 and "  GPU:               PCI 0000:91:00" in out.splitlines()


def test_decodes_nvlink5_and_recovery_lines(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(
        capsys,
        "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from "
        "0x4 (Drain and Reset) to 0x1 (GPU Reset Required)",
    )
    assert rc == 0
    assert "  recovery action:   Drain and Reset -> GPU Reset Required" in out.splitlines()
    rc, out, _ = run(
        capsys,
        "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 "
        "Link 14 (0x0215c5c6 0x00000000 0x00000000 0x00000000 0x00000000 "
        "0x00000000)",
    )
    lines = out.splitlines()
    assert "  severity:          fatal" in lines and "  link:              14" in lines
    assert "  unit:              NETIR_LINK_EVT" in lines


def test_decodes_an_sxid_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(
        capsys,
        "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, "
        "Fatal, Link 48 LTSSM Fault Up",
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("SXid 20034 at line 1:")
    assert "  NVSwitch:          nvidia-nvswitch1 at PCI 0000:06:00" in lines
    assert "  fatal:             yes" in lines and "  link:              48" in lines
    assert "  class:             potentially-fatal" in lines


def test_decodes_a_non_xid_gpu_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(
        capsys, "[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)"
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("rm_init_adapter at line 1:")
    assert "  detail:            0x62:0x65:1792" in lines


def test_line_without_gpu_message_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "[ 1.0] IPv6: ADDRCONF(NETDEV_UP): eth0: link is not ready")
    assert rc == 2 and out == ""
    assert "no Xid, SXid or other NVIDIA GPU kernel message found" in err


def test_no_argument_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys)
    assert rc == 2 and "give an Xid code" in err


def test_json_for_a_code(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "94", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["query"] == "94"
    assert data["xid"]["mnemonic"] == "ROBUST_CHANNEL_CONTAINED_ERROR"
    assert data["xid"]["klass"] == "memory" and data["xid"]["plugin_skips"] is False
    assert data["xid"]["device_plugin"].startswith("marks the GPU")


def test_json_for_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--json", LINE_79)
    assert rc == 0
    (rec,) = json.loads(out)["records"]
    assert (rec["kind"], rec["code"], rec["pci"], rec["pid"], rec["process"]) == (
        "xid",
        79,
        "0000:91:00",
        "<unknown>",
        "<unknown>",
    )
    assert rec["meaning"]["immediate"] == "RESTART_BM"


def test_whole_log_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = (
        "[ 1.0] IPv6: ADDRCONF(NETDEV_UP): eth0: link is not ready\n"
        f"{LINE_79}\n"
        "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 "
        "LTSSM Fault Up\n"
        "[6781753.5] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid "
        "context, skipping further processing\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(log))
    rc, out, _ = run(capsys, "-")
    assert rc == 0
    lines = out.splitlines()
    assert lines[:3] == [
        "2 NVIDIA GPU messages in 4 lines",
        "line 2: Xid 79 on 0000:91:00 pid=<unknown> (<unknown>): GPU has fallen off the bus.",
        "line 3: SXid 20034 on 0000:06:00: Fatal, Link 48 LTSSM Fault Up",
    ]
    assert "Xid 79: GPU has fallen off the bus" in lines
    assert "SXid 20034 (NVSwitch): LTSSM Fault Up (link went down from active)" in lines


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--list")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 172
    assert lines[78].split()[:3] == ["79", "hardware", "RESTART_BM"]


def test_entry_point_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gputriage", "xid", "79"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Xid 79: GPU has fallen off the bus\n")
