"""Every kernel and Fabric Manager log of the public corpus, parsed and checked line by line.

A new corpus file fails ``test_every_corpus_file_has_expectations`` until its expected results
are written down here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts import kernel
from gputriage.facts.model import Target
from gputriage.parsers.kernel import KernelLog, KernelRecord, Kind, parse_text

pytestmark = pytest.mark.corpus

U = "<unknown>"

#: Per file: lines read, records per kind, Xid codes in order and their PCI ids, pids and
#: processes, SXid codes in order and their PCI ids, Xid 154 recovery actions.
EXPECTED: dict[str, dict[str, Any]] = {
    "dmesg/fallen-off-bus-multiline-no-xid-570-open.log": dict(
        lines=5, kinds={"driver_load": 1, "driver_version": 1, "fallen_off_bus": 1}
    ),
    "dmesg/gb200-nvlink5-xid144-150-154-lines-gpud-tests.txt": dict(
        lines=27,
        kinds={"sxid": 2, "sxid_detail": 1, "xid": 24},
        xids=[
            79,
            145,
            145,
            145,
            149,
            149,
            149,
            149,
            149,
            154,
            149,
            149,
            149,
            154,
            145,
            145,
            149,
            149,
            149,
            154,
            145,
            145,
            149,
            154,
        ],
        xid_pcis=["0000:05:00", "0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"],
        pids=["11436", "876766", "876767", "922932", U],
        processes=[U, "acctg", "cache_mgr_main", "ray::WorkerDict"],
        sxids=[12028, 12028],
        sxid_pcis=["0000:05:00"],
        recovery=[
            ("0008:01:00", "Drain and Reset", "GPU Reset Required"),
            ("0009:01:00", "None", "Drain and Reset"),
            ("0018:01:00", "Drain and Reset", "GPU Reset Required"),
            ("0019:01:00", "Drain and Reset", "GPU Reset Required"),
        ],
    ),
    "dmesg/gb200-xid144-149-lines-gpud-pr-1160-1174.txt": dict(
        lines=5,
        kinds={"xid": 5},
        xids=[144, 149, 149, 149, 145],
        xid_pcis=["0000:00:00", "0000:01:00", "0018:01:00", "0019:01:00"],
    ),
    "dmesg/gsp-heartbeat-timeout-gh100-595.71.05.log": dict(
        lines=10, kinds={"driver_version": 1, "gsp_timeout": 3, "other_nvrm": 5}
    ),
    "dmesg/gsp-heartbeat-timeout-journal-bazzite.log": dict(
        lines=9, kinds={"gsp_timeout": 2, "other_nvrm": 6}
    ),
    "dmesg/gsp-heartbeat-timeout-resume-rtx3090.log": dict(lines=5, kinds={"gsp_timeout": 2}),
    "dmesg/journalctl-peermem-invalid-context-gpud.log": dict(lines=47, kinds={"peermem": 14}),
    "dmesg/k8s-device-plugin-health-go-xid94-skip-log-h100.log": dict(lines=1, kinds={}),
    "dmesg/k8s-device-plugin-xid69-unhealthy-2020.log": dict(
        lines=2, kinds={"xid": 1}, xids=[69], xid_pcis=[""]
    ),
    "dmesg/kmsg-raw-nvswitch-open-gpud.log": dict(lines=47, kinds={}),
    "dmesg/kmsg-raw-peermem-gpud.log": dict(lines=8, kinds={"peermem": 7}),
    "dmesg/legacy-xid-format-no-pci-prefix-pastebin.log": dict(
        lines=10,
        kinds={"fallen_off_bus": 1, "other_nvrm": 8, "xid": 1},
        xids=[3],
        xid_pcis=["0000:01:00"],
    ),
    "dmesg/nvidia-uvm-loaded-331-bumblebee-2014.log": dict(lines=7, kinds={"driver_version": 1}),
    "dmesg/nvrm-no-adapter-found-init-module-failed-2014.log": dict(
        lines=2, kinds={"driver_load": 2}
    ),
    "dmesg/nvrm-probe-routine-not-called-nouveau-conflict-2018.log": dict(
        lines=11, kinds={"driver_load": 4}
    ),
    "dmesg/open-module-gpu-not-supported-no-gsp-v100.log": dict(lines=8, kinds={"driver_load": 1}),
    "dmesg/rminitadapter-failed-0x11-0x45-openshift-vm.log": dict(
        lines=16, kinds={"rm_init_adapter": 10}
    ),
    "dmesg/rminitadapter-failed-0x24-0x72-syslog-k8s-worker.log": dict(
        lines=12, kinds={"rm_init_adapter": 12}
    ),
    "dmesg/rminitadapter-failed-gsp-3090-550.log": dict(lines=5, kinds={"rm_init_adapter": 5}),
    "dmesg/sxid-lines-nvsentinel-tests.txt": dict(
        lines=9,
        kinds={"sxid": 7, "sxid_detail": 2},
        sxids=[28006, 20009, 24007, 26008, 26006, 26007, 20009],
        sxid_pcis=["0000:06:00", "0000:C1:00", "0000:C3:00", "0004:00:00"],
    ),
    "dmesg/sxid-xid64-lines-menthos-hf-dataset.txt": dict(
        lines=9,
        kinds={"sxid": 7, "sxid_detail": 1, "xid": 1},
        xids=[64],
        xid_pcis=["0000:0F:00"],
        pids=["57530"],
        processes=[],
        sxids=[19084, 20034, 20034, 20034, 20034, 20034, 19084],
        sxid_pcis=["0000:C2:00", "0000:C3:00", "0000:C4:00", "0000:C5:00", "0000:C6:00"],
    ),
    "dmesg/xid119-gsp-rpc-timeout-h100-xe9680-gpud.log": dict(
        lines=43,
        kinds={"gpu_identity": 2, "gsp_timeout": 1, "other_nvrm": 21, "xid": 5},
        xids=[119] * 5,
        xid_pcis=["0000:9B:00"],
        pids=["1240590", "1263500", "2024380"],
        processes=["cache_mgr_main", "gpud", "nvidia-smi"],
    ),
    "dmesg/xid119-gsp-timeout-45s-gpud-scan-output.txt": dict(
        lines=5,
        kinds={"xid": 5},
        xids=[119] * 5,
        xid_pcis=["0000:9B:00"],
        pids=["28098", "28232", "4071838"],
        processes=["cache_mgr_main", "gpu-feature-dis", "python"],
    ),
    "dmesg/xid119-gsp-timeout-525-old-format.log": dict(
        lines=7,
        kinds={"xid": 7},
        xids=[119] * 7,
        xid_pcis=["0000:61:00"],
        pids=["905052", "977772", "977823"],
        processes=["nvidia-smi", "python"],
    ),
    "dmesg/xid119-process-name-with-brackets-nvsentinel-pr.txt": dict(
        lines=1,
        kinds={"xid": 1},
        xids=[119],
        xid_pcis=["0002:00:00"],
        pids=["1582259"],
        processes=["nvc:[driver]"],
    ),
    "dmesg/xid13-109-ctx-switch-timeout-peermem-ctime.log": dict(
        lines=5,
        kinds={"peermem": 1, "xid": 4},
        xids=[13, 13, 13, 109],
        xid_pcis=["0000:CB:00"],
        pids=["1797828", U],
        processes=[U, "pt_main_thread"],
    ),
    "dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log": dict(
        lines=24,
        kinds={"xid": 17},
        xids=[13] * 16 + [43],
        xid_pcis=["0000:38:00"],
        pids=["2924364", U],
        processes=[U, "pt_main_thread"],
    ),
    "dmesg/xid31-2018-old-format-no-pid-pastebin.log": dict(
        lines=2,
        kinds={"gpu_identity": 1, "xid": 1},
        xids=[31],
        xid_pcis=["0000:01:00"],
        pids=[],
        processes=[],
    ),
    "dmesg/xid31-mmu-fault-variants-issues.log": dict(
        lines=17,
        kinds={"driver_version": 1, "gpu_identity": 4, "xid": 12},
        xids=[31, 31, 13, 13, 13, 13, 32, 31, 31, 31, 31, 31],
        xid_pcis=["0000:01:00", "0000:08:00", "0000:0C:00"],
        pids=["11461", "13705", "169800", "174421", "35097"],
        processes=["SpaceEngine.exe", "UnrealEditor", "chrome"],
    ),
    "dmesg/xid32-31-2015-bumblebee-old-format.log": dict(
        lines=3, kinds={"xid": 3}, xids=[32, 32, 31], xid_pcis=["0000:01:00"], pids=[]
    ),
    "dmesg/xid43-31-94-dmesg-T-535.183.01-akash-k8s-node.log": dict(
        lines=11,
        kinds={"driver_version": 1, "gpu_identity": 6, "xid": 4},
        xids=[43, 43, 31, 94],
        xid_pcis=["0000:00:05", "0000:00:07", "0000:00:08"],
        pids=["1045242", "1084984", "2512125", U],
        processes=[U, "pt_main_thread", "python3.10"],
    ),
    "dmesg/xid43-lowercase-channel-format-dra-driver-issue.txt": dict(
        lines=1,
        kinds={"xid": 1},
        xids=[43],
        xid_pcis=["0009:01:00"],
        pids=["3188489"],
        processes=["trigger_xid"],
    ),
    "dmesg/xid45-caused-by-previous-xid145-149-590.log": dict(
        lines=7,
        kinds={"xid": 7},
        xids=[45] * 7,
        xid_pcis=["0000:97:00", "0000:BA:00", "0000:DC:00", "0000:ED:00"],
        pids=["1818987", "1818989", "1818990", "1818992"],
        processes=["python3"],
    ),
    "dmesg/xid48-63-94-dbe-rowremap-contained-peermem-gpud.log": dict(
        lines=41,
        kinds={"peermem": 30, "xid": 11},
        xids=[48, 63] + [94] * 9,
        xid_pcis=["0000:19:00"],
        pids=["1248209", U],
        processes=[U, "python3.10"],
    ),
    "dmesg/xid74-nvlink-fatal-gh200-nvsentinel-design-doc.txt": dict(
        lines=1, kinds={"xid": 1}, xids=[74], xid_pcis=["0003:00:00"], pids=[U], processes=[U]
    ),
    "dmesg/xid79-rtx5080-open-no-precursor.log": dict(
        lines=3,
        kinds={"fallen_off_bus": 1, "gpu_identity": 1, "xid": 1},
        xids=[79],
        xid_pcis=["0000:2B:00"],
        pids=[],
        processes=[],
    ),
    "dmesg/xid79-sxid20034-hgx-fallen-off-bus-gpud-readme.log": dict(
        lines=13,
        kinds={"fallen_off_bus": 1, "gpu_identity": 3, "sxid": 4, "sxid_detail": 4, "xid": 1},
        xids=[79],
        xid_pcis=["0000:91:00"],
        pids=[U],
        processes=[U],
        sxids=[20034] * 4,
        sxid_pcis=["0000:05:00", "0000:06:00", "0000:07:00"],
    ),
    "fabricmanager/fabricmanager-2025-gpud.log": dict(
        lines=101, kinds={"sxid": 1}, sxids=[12028], sxid_pcis=["0000:86:00"]
    ),
    "fabricmanager/fabricmanager-nvswitch-nonfatal-12028-gpud.log": dict(
        lines=499,
        kinds={"sxid": 18},
        sxids=[12028] * 18,
        sxid_pcis=["0000:83:00", "0000:84:00", "0000:85:00", "0000:86:00"],
    ),
}


def _files(corpus: Path) -> list[str]:
    gpu = corpus / "gpu"
    return sorted(
        str(p.relative_to(gpu))
        for d in ("dmesg", "fabricmanager")
        for p in (gpu / d).iterdir()
        if p.is_file()
    )


def _parse(corpus_dir: Path, name: str) -> KernelLog:
    return parse_text((corpus_dir / "gpu" / name).read_text(encoding="utf-8"))


def _summary(log: KernelLog) -> dict[str, Any]:
    xids = [r for r in log.records if r.kind is Kind.XID]
    sxids = [r for r in log.records if r.kind is Kind.SXID]
    return {
        "lines": log.lines_scanned,
        "kinds": dict(Counter(r.kind.value for r in log.records)),
        "xids": [r.code for r in xids],
        "xid_pcis": sorted({r.pci for r in xids}),
        "pids": sorted({r.pid for r in xids if r.pid}),
        "processes": sorted({r.process for r in xids if r.process}),
        "sxids": [r.code for r in sxids],
        "sxid_pcis": sorted({r.pci for r in sxids}),
        "recovery": [
            (r.pci, r.recovery_from_name, r.recovery_to_name) for r in xids if r.recovery_to >= 0
        ],
    }


def test_every_corpus_file_has_expectations(corpus_dir: Path) -> None:
    assert _files(corpus_dir) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(corpus_dir: Path, name: str) -> None:
    got = _summary(_parse(corpus_dir, name))
    expected = {
        "xids": [],
        "xid_pcis": [],
        "sxids": [],
        "sxid_pcis": [],
        "recovery": [],
        **EXPECTED[name],
    }
    for key, value in expected.items():
        assert got[key] == value, key


def _records(corpus_dir: Path, name: str, kind: Kind) -> list[KernelRecord]:
    return _parse(corpus_dir, name).of_kind(kind)


def test_nvlink5_fields(corpus_dir: Path) -> None:
    xids = _records(corpus_dir, "dmesg/gb200-nvlink5-xid144-150-154-lines-gpud-tests.txt", Kind.XID)
    by_line = {r.line: r for r in xids}
    assert (by_line[5].unit, by_line[5].severity, by_line[5].link) == ("NETIR", "fatal", -1)
    assert (by_line[7].unit, by_line[7].link, by_line[7].registers[0]) == (
        "NETIR_LINK_EVT",
        1,
        "0x021425c6",
    )
    assert (by_line[15].pid, by_line[15].process, by_line[15].unit) == (
        "876767",
        "ray::WorkerDict",
        "RLW_RXPIPE",
    )
    assert [r.severity for r in xids if r.code == 145] == ["nonfatal"] * 7


def test_timestamps_per_format(corpus_dir: Path) -> None:
    def first(name: str) -> KernelRecord:
        return _parse(corpus_dir, name).records[0]

    rec = first("dmesg/xid48-63-94-dbe-rowremap-contained-peermem-gpud.log")
    assert rec.time == "2024-11-15T05:39:15.491363+00:00"
    rec = first("dmesg/xid43-31-94-dmesg-T-535.183.01-akash-k8s-node.log")
    assert (rec.timestamp, rec.time) == ("Sun Jul 28 09:15:27 2024", "2024-07-28T09:15:27")
    rec = first("dmesg/kmsg-raw-peermem-gpud.log")
    assert (rec.timestamp, rec.time) == ("227.996636", "")
    rec = first("dmesg/journalctl-peermem-invalid-context-gpud.log")
    assert (rec.line, rec.time) == (34, "2025-01-17T17:39:30+00:00")
    rec = first("dmesg/rminitadapter-failed-0x24-0x72-syslog-k8s-worker.log")
    assert (rec.timestamp, rec.time) == ("Dec 2 11:49:53", "")
    rec = first("fabricmanager/fabricmanager-2025-gpud.log")
    assert (rec.line, rec.time, rec.link) == (100, "2025-02-27T15:10:02", 61)


def test_init_failures_and_driver_messages(corpus_dir: Path) -> None:
    rm = _records(
        corpus_dir, "dmesg/rminitadapter-failed-0x11-0x45-openshift-vm.log", Kind.RM_INIT_ADAPTER
    )
    assert {(r.pci, r.detail) for r in rm if r.detail.startswith("0x")} == {
        ("0000:04:01", "0x11:0x45:2525"),
        ("0000:04:02", "0x11:0x45:2525"),
    }
    load = _records(
        corpus_dir,
        "dmesg/nvrm-probe-routine-not-called-nouveau-conflict-2018.log",
        Kind.DRIVER_LOAD,
    )
    assert [(r.line, r.end_line) for r in load] == [(1, 1), (4, 4), (5, 7), (8, 11)]
    lost = _records(
        corpus_dir, "dmesg/fallen-off-bus-multiline-no-xid-570-open.log", Kind.FALLEN_OFF_BUS
    )
    assert [(r.pci, r.detail, r.line, r.end_line) for r in lost] == [
        ("0000:B3:00", "10de:26b5", 1, 3)
    ]
    banner = _records(
        corpus_dir, "dmesg/fallen-off-bus-multiline-no-xid-570-open.log", Kind.DRIVER_VERSION
    )
    assert [(r.detail, r.unit) for r in banner] == [("570.158.01", "open")]


def test_xid45_root_causes_and_xid13_coordinates(corpus_dir: Path) -> None:
    xid45 = _records(corpus_dir, "dmesg/xid45-caused-by-previous-xid145-149-590.log", Kind.XID)
    assert [r.caused_by for r in xid45] == [149, 145, 145, 145, 149, 145, 145]
    xid13 = _records(corpus_dir, "dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log", Kind.XID)
    coords = {(r.gpc, r.tpc, r.sm) for r in xid13 if r.gpc >= 0}
    assert coords == {(8, 5, 1), (9, 1, 1), (9, 2, 0), (9, 5, 0), (10, 1, 1), (10, 4, 0)}


@pytest.mark.parametrize(
    ("name", "facts"),
    [
        (
            "dmesg/xid79-sxid20034-hgx-fallen-off-bus-gpud-readme.log",
            dict(
                fallen_off_bus=True,
                fallen_off_bus_pci=["0000:91:00"],
                hardware_xids=True,
                sxid_fatal=True,
                sxid_codes=[20034],
                xid_codes=[79],
            ),
        ),
        (
            "dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log",
            dict(application_xids_only=True, hardware_xids=False, xid_codes=[13, 43]),
        ),
        (
            "dmesg/xid119-gsp-rpc-timeout-h100-xe9680-gpud.log",
            dict(gsp_timeout=True, hardware_xids=False, xid_codes=[119]),
        ),
        (
            "dmesg/rminitadapter-failed-gsp-3090-550.log",
            dict(rm_init_adapter_failed=True, xid_codes=[]),
        ),
        (
            "dmesg/nvrm-no-adapter-found-init-module-failed-2014.log",
            dict(
                driver_load_errors=[
                    "no NVIDIA GPU found",
                    "the nvidia kernel module failed to initialise",
                ]
            ),
        ),
        (
            "dmesg/gb200-nvlink5-xid144-150-154-lines-gpud-tests.txt",
            dict(
                xid_codes=[79, 145, 149, 154],
                fallen_off_bus=True,
                hardware_xids=True,
                sxid_fatal=False,
            ),
        ),
        (
            "dmesg/xid48-63-94-dbe-rowremap-contained-peermem-gpud.log",
            dict(peermem_invalid_context=30, hardware_xids=True, xid_codes=[48, 63, 94]),
        ),
        (
            "fabricmanager/fabricmanager-nvswitch-nonfatal-12028-gpud.log",
            dict(sxid_codes=[12028], sxid_fatal=False, lines_scanned=499),
        ),
    ],
)
def test_facts_from_corpus_files(corpus_dir: Path, name: str, facts: dict[str, Any]) -> None:
    ev = decode(Key.DMESG, (corpus_dir / "gpu" / name).read_bytes(), source=f"bundle/{name}")
    group = kernel.build(EvidenceSet([ev]), Target(), {})
    assert group.known
    for key, value in facts.items():
        assert group.values[key] == value, key
    for refs in group.cites.values():
        assert all(ref.line > 0 and ref.text == ev.cite(ref.line).text for ref in refs)


def test_oom_killer_lines_from_a_real_node(corpus_dir: Path) -> None:
    """gpud's dmesg test log: memcg and node OOM kills around the Xid lines (kernel group)."""
    name = "dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log"
    ev = decode(Key.DMESG, (corpus_dir / "gpu" / name).read_bytes(), source=f"bundle/{name}")
    v = kernel.build(EvidenceSet([ev]), Target(), {}).values
    assert [
        (k["line"], k["pid"], k["process"], k["pod_uid"], k["container_id"][:12])
        for k in v["cgroup_oom_kills"]
    ] == [
        (19, -1, "", "", ""),  # the line is cut after nodemask=: a memcg kill, victim unknown
        (23, 863987, "node", "a8697f49-441d-4d4f-90d2-6d8e1fa3bbe7", "3fc28fa1c647"),
    ]
    assert [(k["line"], k["pid"], k["process"]) for k in v["node_oom_kills"]] == [
        (20, 123, "httpd"),
        (21, 456, "python"),
        (22, 123, "httpd"),
    ]
    assert [x["immediate_action"] for x in v["xid_summary"]] == ["RESTART_APP", "IGNORE"]
    # The Xid decoder's own view of the file is unchanged: no OOM records without oom_kills.
    assert {r.kind for r in parse_text(ev.raw).records} == {Kind.XID}
