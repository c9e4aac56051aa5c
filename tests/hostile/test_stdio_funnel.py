"""No byte below 0x20 but newline and tab, and no ESC, reaches stdout or stderr from cluster
text: ``xid -`` on a hostile kernel log, ``facts`` on the hostile bundle, ``collect`` against
an API whose events are laced with escapes (each run as the real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage.textsafe import SafeStream
from tests.conftest import ROOT
from tests.hostile.hostile_bundle import ESCAPES, write_hostile_bundle
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import event, gpu_cluster

_BAD = bytes(b for b in range(0x20) if b not in (9, 10)) + b"\x7f\x9b\x9d"


def run(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECACHEDIR": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-m", "gputriage", *argv],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def assert_inert(data: bytes, where: str) -> None:
    bad = sorted({b for b in data if b in _BAD})
    assert not bad, f"{where}: bytes {bad} reached the terminal"
    assert "\u009b".encode() not in data and "\u009d".encode() not in data


def test_xid_stdin_prints_no_escape() -> None:
    line = (
        f"[Tue Mar  5 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
        f"name=py{ESCAPES}, GPU has fallen off the bus.\n"
    )
    done = run("xid", "-", stdin=line.encode())
    assert b"79" in done.stdout
    assert_inert(done.stdout + done.stderr, "xid -")


def test_facts_of_a_hostile_bundle_print_no_escape(tmp_path: Path) -> None:
    bundle = write_hostile_bundle(tmp_path)
    for extra in ([], ["--json"]):
        done = run("facts", "--from", str(bundle), *extra)
        assert b"events" in done.stdout
        assert_inert(done.stdout + done.stderr, f"facts {extra}")


def test_collect_prints_no_escape(tmp_path: Path) -> None:
    cluster = gpu_cluster()
    trainer = cluster.get("", "pods", "ml", "trainer-0")
    assert trainer is not None
    cluster.add(event(trainer, "Failed", f"pull failed {ESCAPES}"))
    with KubeAPI(cluster) as api:
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        api.fail("/namespaces/ml/resourcequotas$", 500, f"boom {ESCAPES}", "text/plain")
        overrides = [f"--node-address={n}=127.0.0.1" for _, n in cluster.keys("", "nodes")]
        done = run(
            "collect",
            "trainer-0",
            "-n",
            "ml",
            "--kubeconfig",
            str(config),
            "--ssh",
            "off",
            *overrides,
            "-o",
            str(tmp_path / "bundle"),
        )
    assert b"quota" in done.stdout, done.stderr[-2000:]
    assert_inert(done.stdout + done.stderr, "collect")


@pytest.mark.parametrize(
    "chunks", [["\x1b", "]0;pwned\x07 ok\n"], ["a\x1b[3", "1mred\n"], ["password=hun", "ter2 x\n"]]
)
def test_safe_stream_cleans_across_writes(chunks: list[str], tmp_path: Path) -> None:
    with (tmp_path / "out").open("w") as raw:
        stream = SafeStream(raw)
        for chunk in chunks:
            stream.write(chunk)
            stream.flush() if chunk is chunks[0] and "\x1b" in chunk else None
        stream.flush()
    text = (tmp_path / "out").read_text()
    assert "\x1b" not in text and "hunter2" not in text
