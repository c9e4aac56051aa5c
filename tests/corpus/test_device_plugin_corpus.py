"""The device-plugin logs in the real-world corpus (``corpus/gpu/dmesg/k8s-device-plugin-*``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.parsers.device_plugin import parse_device_plugin_log

pytestmark = pytest.mark.corpus


def read(corpus_dir: Path, name: str) -> str:
    return (corpus_dir / "gpu" / "dmesg" / name).read_text(encoding="utf-8")


def test_xid69_unhealthy_2020(corpus_dir: Path) -> None:
    log = parse_device_plugin_log(read(corpus_dir, "k8s-device-plugin-xid69-unhealthy-2020.log"))
    assert [(d.uuid, d.xid, d.resource, d.lines) for d in log.unhealthy] == [
        ("GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8", 69, "nvidia.com/gpu", [1, 2])
    ]
    assert log.errors == [] and log.skipped_events == []


def test_health_go_skips_a_double_bit_ecc_event(corpus_dir: Path) -> None:
    log = parse_device_plugin_log(
        read(corpus_dir, "k8s-device-plugin-health-go-xid94-skip-log-h100.log")
    )
    assert log.skipped_events == [{"type": 2, "kind": "double_bit_ecc", "xid": 0, "line": 1}]
    assert log.skipped_xids == [] and log.unhealthy == []


def test_every_corpus_plugin_log_parses(corpus_dir: Path) -> None:
    files = sorted((corpus_dir / "gpu" / "dmesg").glob("k8s-device-plugin-*.log"))
    assert len(files) == 2
    for f in files:
        log = parse_device_plugin_log(f.read_text(encoding="utf-8"))
        assert log.lines_scanned == len(f.read_text(encoding="utf-8").splitlines())
