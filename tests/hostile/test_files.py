"""Bundle reading touches only regular files inside the bundle; ``-o`` writes only regular
files (or ``-``, stdout). Each hostile entry is refused with a named reason, promptly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputriage.evidence.bundle import read_bundle
from gputriage.evidence.model import Key, Status
from gputriage.scenarios import scenario_path
from tests.conftest import ROOT

#: The pod the lost-xid79 scenario holds (a pod name the bundle lacks is refused).
POD = ("llama-pretrain-worker-3", "-n", "ml-prod")


def bundle_at(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(scenario_path("lost-xid79"), bundle)
    return bundle


def run_cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gputriage", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_a_fifo_named_container_log_is_refused_not_waited_on(tmp_path: Path) -> None:
    bundle = bundle_at(tmp_path)
    (bundle / "container.log").unlink()
    os.mkfifo(bundle / "container.log")
    (bundle / "meta.json").unlink()
    os.mkfifo(bundle / "meta.json")
    started = time.monotonic()
    evidence = read_bundle(bundle)
    assert time.monotonic() - started < 5.0
    ev = evidence[Key.CONTAINER_LOG]
    assert ev.status is Status.ERROR
    assert ev.detail == (
        "not read: bundle/container.log is a named pipe (FIFO): only regular files are read"
    )
    assert evidence[Key.POD].ok


def test_the_cli_on_a_fifo_bundle_exits_with_its_report(tmp_path: Path) -> None:
    bundle = bundle_at(tmp_path)
    (bundle / "dmesg.log").unlink()
    os.mkfifo(bundle / "dmesg.log")
    done = run_cli(*POD, "--from", str(bundle), "--report", "json", timeout=60)
    summary = json.loads(done.stdout)
    dmesg = next(s for s in summary["sources"] if s["key"] == Key.DMESG.value)
    assert "named pipe (FIFO)" in dmesg["detail"]


def test_symlinks_leaving_the_bundle_are_refused(tmp_path: Path) -> None:
    bundle = bundle_at(tmp_path)
    secret = tmp_path / "home-file"
    secret.write_text("root:$6$SECRETHASH:19000:0:99999:7:::\n")
    (bundle / "kubelet.log").unlink()
    (bundle / "kubelet.log").symlink_to(secret)
    (bundle / "container.log").unlink()
    (bundle / "container.log").symlink_to("/dev/zero")
    inside = bundle / "logs"
    inside.mkdir()
    shutil.move(str(bundle / "dmesg.log"), inside / "dmesg.log")
    (bundle / "dmesg.log").symlink_to(Path("logs") / "dmesg.log")  # stays inside: read
    evidence = read_bundle(bundle)
    kubelet = evidence[Key.KUBELET_LOG]
    assert kubelet.status is Status.ERROR and "SECRETHASH" not in kubelet.raw
    assert kubelet.detail == (
        f"not read: bundle/kubelet.log is a symbolic link to {secret}, outside the bundle"
    )
    assert "outside the bundle" in evidence[Key.CONTAINER_LOG].detail
    assert evidence[Key.DMESG].ok


def test_a_device_in_the_bundle_is_refused(tmp_path: Path) -> None:
    bundle = bundle_at(tmp_path)
    (bundle / "nvidia-smi.txt").unlink()
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    os.mknod(bundle / "nvidia-smi.txt", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero
    ev = read_bundle(bundle)[Key.NVIDIA_SMI]
    assert ev.detail.endswith("is a character device: only regular files are read")


@pytest.mark.parametrize("target", ["/dev/stdout", "/dev/null", "{tmp}/dir", "{tmp}/link"])
def test_output_only_to_regular_files(tmp_path: Path, target: str) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "real.md").write_text("keep me\n")
    (tmp_path / "link").symlink_to(tmp_path / "real.md")
    path = target.format(tmp=tmp_path)
    done = run_cli(*POD, "--from", str(scenario_path("lost-xid79")), "--report", "md", "-o", path)
    assert done.returncode != 0
    assert "only regular files are written; use -o - to write to stdout" in done.stderr
    assert Path("/dev/stdout").is_symlink() or not Path("/dev/stdout").exists()
    assert (tmp_path / "real.md").read_text() == "keep me\n"


def test_output_to_a_process_substitution_is_refused_not_a_crash(tmp_path: Path) -> None:
    script = (
        f"{sys.executable} -m gputriage llama-pretrain-worker-3 -n ml-prod "
        f"--from {scenario_path('lost-xid79')} "
        f"--report md -o >(cat > {tmp_path}/out.md)"
    )
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert "Traceback" not in done.stderr
    assert "it is a symbolic link to a pipe" in done.stderr or "it is a pipe" in done.stderr


def test_dash_writes_stdout(tmp_path: Path) -> None:
    done = run_cli(*POD, "--from", str(scenario_path("lost-xid79")), "--report", "md", "-o", "-")
    assert done.stdout.startswith("# GPU incident summary")
    assert not Path(ROOT, "-").exists()
