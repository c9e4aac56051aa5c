"""Node commands are built purely, quote everything, and their outcomes are read one way."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.evidence.model import Key, Status
from gputriage.evidence.nodecmds import (
    KERNEL_KEYWORDS,
    RawResult,
    collect_key,
    commands_for,
    journal_since,
    read_outcome,
    split_stderr,
)
from gputriage.evidence.sources import NODE_KEYS, NodeQuery

UID = "6b1f0a6e-2f8e-4b8a-9d53-0c4a4c6f1b2e"


def query(**kw: object) -> NodeQuery:
    base: dict[str, object] = {
        "node": "gpu-7",
        "address": "10.0.3.7",
        "namespace": "ml",
        "pod": "trainer-0",
        "pod_uid": UID,
    }
    return NodeQuery(**{**base, **kw})  # type: ignore[arg-type]


def script_argv(command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3
    return argv


def test_exact_commands_per_key() -> None:
    q = query()
    shown = {k: [c.display() for c in commands_for(k, q)] for k in NODE_KEYS}
    assert shown == {
        Key.KUBELET_LOG: ["journalctl -u kubelet --no-pager --since -2h -o short-iso"],
        Key.DMESG: ["journalctl -k --no-pager --since -2h -o short-iso", "dmesg -T", "dmesg"],
        Key.NVIDIA_SMI: [
            "nvidia-smi -q -x",
            "nvidia-smi -q",
            "chroot /run/nvidia/driver nvidia-smi -q -x",
        ],
        Key.DEVICE_CHECKPOINT: ["cat /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"],
        Key.LSMOD: ["lsmod"],
        Key.NVIDIA_TOPO: ["nvidia-smi topo -m"],
        Key.NVLINK: ["nvidia-smi nvlink -s"],
        Key.DEV_NVIDIA: ["ls -l /dev/nvidia*"],
        Key.CONTAINERD_CONFIG: [
            "cat /etc/containerd/config.toml",
            "cat /var/lib/rancher/k3s/agent/etc/containerd/config.toml",
            "containerd config dump",
        ],
    }
    assert commands_for(Key.POD, q) == ()


def test_kubelet_filter_names_the_pod_and_gpu_keywords() -> None:
    (cmd,) = commands_for(Key.KUBELET_LOG, query())
    assert cmd.keep[:2] == (UID, "ml/trainer-0")
    assert {"nvidia", "devicemanager", "no runtime for", "UnexpectedAdmissionError"} <= set(
        cmd.keep
    )
    assert cmd.newest and cmd.max_bytes == 4 * 1024 * 1024
    script = cmd.script()
    assert f"| grep -a -F -e {UID} -e ml/trainer-0 -e nvidia" in script
    assert script.endswith("| tail -c 4194304")


def test_kernel_filter_keywords_and_head_for_documents() -> None:
    journal, dmesg_t, _dmesg = commands_for(Key.DMESG, query(max_bytes=1000))
    assert (
        journal.keep
        == KERNEL_KEYWORDS
        == (
            "NVRM",
            "Xid",
            "SXid",
            "nvidia",
            "NVIDIA",
            "nvswitch",
            "fallen off the bus",
            "RmInit",
            "GSP",
        )
    )
    assert "-e 'fallen off the bus'" in dmesg_t.script()
    assert dmesg_t.script().endswith("| tail -c 1000")
    smi = commands_for(Key.NVIDIA_SMI, query())[0]
    assert smi.script().endswith("| head -c 4194304") and "nvidia-smi -q -x 2>&1;" in smi.script()
    dev = commands_for(Key.DEV_NVIDIA, query())[0]
    assert "{ ls -l /dev/nvidia* 2>&1;" in dev.script()  # the glob stays unquoted


@pytest.mark.parametrize(
    "pod", ["a;rm -rf /", "$(x)", "`id`", "a'b", 'a"b', "a b", "a|b", "a&&b", "-e", "a\nb"]
)
def test_hostile_values_are_quoted_exactly_once(pod: str) -> None:
    q = query(pod=pod, namespace="n$(y)", pod_uid="u`z`", since="2h; reboot")
    for sudo in (False, True):
        cmd = commands_for(Key.KUBELET_LOG, q)[0]
        line = cmd.remote(sudo=sudo)
        argv = shlex.split(line)
        if sudo:
            assert argv[:2] == ["sudo", "-n"]
            argv = argv[2:]
        assert argv[:2] == ["sh", "-c"]
        inner = shlex.split(argv[2].split("| grep -a -F ", 1)[1].split(" | tail", 1)[0])
        assert inner[:4] == ["-e", "u`z`", "-e", f"n$(y)/{pod}"]
        assert f"--since {shlex.quote('2h; reboot')}" in argv[2]


@settings(max_examples=60, deadline=None)
@given(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
        min_size=1,
        max_size=40,
    )
)
def test_any_pod_name_reaches_grep_as_one_literal_argument(pod: str) -> None:
    """The real sh parses the script; grep receives the pod reference verbatim."""
    cmd = commands_for(Key.KUBELET_LOG, query(pod=pod, namespace="ml", pod_uid=""))[0]
    script = cmd.script().replace("grep -a -F", "printf '%s\\0'", 1)
    script = script.replace("command -v journalctl", "command -v sh", 1)
    script = script.replace(cmd.display(), "true", 1).rsplit(" | tail", 1)[0]
    out = subprocess.run(["sh", "-c", script], capture_output=True, timeout=10)
    args = out.stdout.split(b"\0")
    assert args[:3] == [b"-e", f"ml/{pod}".encode(), b"-e"]


def test_journal_since() -> None:
    assert journal_since("2h") == "-2h"
    assert journal_since(" 30m ") == "-30m"
    assert journal_since("") == "-2h"
    assert journal_since("-1d") == "-1d"
    assert journal_since("2026-03-05 10:00:00") == "2026-03-05 10:00:00"
    assert journal_since("yesterday") == "yesterday"


def test_split_stderr_takes_the_trailer() -> None:
    assert split_stderr(b"Hint: x\ngputriage-rc=1\n") == (1, "Hint: x")
    assert split_stderr(b"oops\n") == (None, "oops")


def run(key: Key, results: list[RawResult], sudo: bool = False) -> tuple[object, list[str]]:
    calls: list[str] = []

    def fake(cmd: object) -> RawResult:
        calls.append(cmd.display())  # type: ignore[attr-defined]
        return results.pop(0)

    return collect_key(key, query(), fake, where="ssh gpu-7", sudo=sudo), calls


def test_outcomes_missing_forbidden_and_fallbacks() -> None:
    missing = RawResult(127, b"", b"gputriage: dmesg: command not found\n")
    nvrm = b"[Tue Mar  5 10:06:41 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>'\n"
    ev, calls = run(
        Key.DMESG,
        [
            RawResult(0, b"", b"No journal files were found.\ngputriage-rc=1\n"),
            RawResult(0, nvrm, b"gputriage-rc=0\n"),
        ],
    )
    assert calls == ["journalctl -k --no-pager --since -2h -o short-iso", "dmesg -T"]
    assert ev.ok and ev.raw == nvrm.decode() and ev.source == "ssh gpu-7: dmesg -T"
    assert (
        "tried first: journalctl -k --no-pager --since -2h -o short-iso: no systemd journal"
        in ev.detail
    )

    ev, calls = run(
        Key.DMESG,
        [
            RawResult(
                0,
                b"",
                b"Hint: You are currently not seeing messages from other users and "
                b"the system.\ngputriage-rc=0\n",
            ),
            RawResult(
                0,
                b"",
                b"dmesg: read kernel buffer failed: Operation not permitted\ngputriage-rc=1\n",
            ),
            missing,
        ],
    )
    assert ev.status is Status.FORBIDDEN and len(calls) == 3
    assert ev.detail.startswith(
        "journalctl -k --no-pager --since -2h -o short-iso: Hint: You "
        "are currently not seeing messages"
    )
    assert "dmesg is not installed on the node (command not found)" in ev.detail


def test_sudo_outcomes() -> None:
    refused = RawResult(1, b"", b"sudo: a password is required\n")
    assert (
        read_outcome(commands_for(Key.LSMOD, query())[0], refused, sudo=True).status
        is Status.FORBIDDEN
    )
    no_sudo = RawResult(127, b"", b"sh: 1: sudo: not found\n")
    outcome = read_outcome(commands_for(Key.LSMOD, query())[0], no_sudo, sudo=True)
    assert (outcome.status, outcome.reason) == (
        Status.UNAVAILABLE,
        "sudo is not installed on the node (sh: 1: sudo: not found); drop --sudo",
    )


def test_empty_filtered_log_is_known_and_empty() -> None:
    ev, _ = run(Key.KUBELET_LOG, [RawResult(0, b"", b"gputriage-rc=0\n")])
    assert ev.status is Status.OK and ev.raw == ""
    assert ev.detail == (
        "no lines naming the pod or GPU device/runtime keywords in the window --since -2h"
    )


def test_nvidia_smi_error_text_kept_after_trying_plain_q() -> None:
    text = (
        b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        b"Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    ev, calls = run(
        Key.NVIDIA_SMI,
        [RawResult(0, text, b"gputriage-rc=9\n"), RawResult(0, text, b"gputriage-rc=9\n")],
    )
    # The host has nvidia-smi: the GPU Operator's driver root is not looked at.
    assert calls == ["nvidia-smi -q -x", "nvidia-smi -q"]
    assert ev.status is Status.OK and ev.raw == text.decode() and ev.format == "text"
    assert ev.detail.startswith("1 lines; nvidia-smi -q -x exited 9: NVIDIA-SMI has failed")


def test_timeout_and_transport_failure() -> None:
    ev, calls = run(Key.DMESG, [RawResult(None, b"", b"", timed_out=True)])
    assert ev.status is Status.TIMEOUT and len(calls) == 1  # no more tries after a timeout
    ev, _ = run(Key.LSMOD, [RawResult(None, b"", b"", failure="SSH channel failed: EOF")])
    assert (ev.status, ev.detail) == (Status.ERROR, "lsmod: SSH channel failed: EOF")


def test_binary_output_goes_through_bundle_decode() -> None:
    ev, _ = run(Key.LSMOD, [RawResult(0, b"\x00\x01\x02" * 100, b"gputriage-rc=0\n")])
    assert ev.status is Status.ERROR and "looks binary" in ev.detail


def test_keeps_matches_grep_fixed_strings() -> None:
    cmd = commands_for(Key.DMESG, query())[0]
    assert cmd.keeps(b"[  1.0] NVRM: loading")
    assert cmd.keeps(b"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034")
    assert not cmd.keeps(b"[  1.0] e1000e: link up")
    assert commands_for(Key.LSMOD, query())[0].keeps(b"anything")


def test_warnings_beside_output_and_clipped_output() -> None:
    lsmod = commands_for(Key.LSMOD, query())[0]
    warned = RawResult(
        0,
        b"Module Size Used by\nnvidia 1 0\n",
        b"lsmod: Permission denied reading one file\ngputriage-rc=0\n",
    )
    assert read_outcome(lsmod, warned).status is Status.OK
    assert read_outcome(lsmod, RawResult(0, b"", warned.stderr)).status is Status.FORBIDDEN
    flood = RawResult(None, b"x\n" * 1000, b"", clipped=True)
    outcome = read_outcome(lsmod, flood)
    assert (outcome.status, outcome.reason) == (
        Status.OK,
        "gputriage stopped reading after 2000 bytes (the node did not bound the output)",
    )
    silent = RawResult(None, b"", b"")
    assert read_outcome(lsmod, silent).reason == (
        "lsmod: the node closed the channel without a status"
    )


def test_operator_driver_root_is_tried_when_the_host_has_no_nvidia_smi() -> None:
    """GPU Operator nodes: nvidia-smi lives in the driver container's root."""
    missing = RawResult(127, b"", b"gputriage: nvidia-smi: command not found\n")
    xml = (
        b'<?xml version="1.0" ?>\n'
        b"<nvidia_smi_log><attached_gpus>1</attached_gpus></nvidia_smi_log>\n"
    )
    ev, calls = run(Key.NVIDIA_SMI, [missing, missing, RawResult(0, xml, b"gputriage-rc=0\n")])
    assert calls[-1] == "chroot /run/nvidia/driver nvidia-smi -q -x"
    assert ev.ok and ev.format == "xml"
    assert ev.source == "ssh gpu-7: chroot /run/nvidia/driver nvidia-smi -q -x"

    # Neither on the host nor an Operator driver root: both named in the reason.
    no_root = RawResult(
        0,
        b"",
        b"chroot: cannot change root directory to '/run/nvidia/driver'"
        b": No such file or directory\ngputriage-rc=125\n",
    )
    ev, _ = run(Key.NVIDIA_SMI, [missing, missing, no_root])
    assert ev.status is Status.UNAVAILABLE
    assert "nvidia-smi is not installed on the node" in ev.detail
    assert "/run/nvidia/driver': No such file or directory" in ev.detail

    # Not root: chroot is refused, and the reason says how to get it.
    not_root = RawResult(
        0,
        b"",
        b"chroot: cannot change root directory to '/run/nvidia/driver'"
        b": Operation not permitted\ngputriage-rc=125\n",
    )
    ev, _ = run(Key.NVIDIA_SMI, [missing, missing, not_root])
    assert ev.status is Status.FORBIDDEN and "--sudo" in ev.detail
