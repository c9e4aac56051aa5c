"""Fact group ``kernel`` built from a kernel log the way a bundle or SSH source delivers it."""

from __future__ import annotations

from typing import Any

import pytest

from gputriage.evidence.bundle import decode
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status
from gputriage.facts import kernel
from gputriage.facts.model import FactGroup, Target

# An HGX node in trouble, lines verbatim from the corpus (gpud, NVSentinel, open-gpu-kernel-
# modules issues): DBE -> row remap -> contained error, a GPU lost, NVSwitch links going down,
# a recovery action, and peermem noise.
NODE_LOG = """\
[Sun Jul 28 09:15:27 2024] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024
[Fri Aug 30 11:11:22 2024] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing
[Fri Aug 30 11:43:09 2024] NVRM: GPU at PCI:0000:19:00: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375
[Fri Aug 30 11:43:09 2024] NVRM: GPU Board Serial Number: 1650423013443
[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.
[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:19:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.
[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:19:00): 94, pid=1248209, name=python3.10, Ch 00000008
[Fri Aug 30 11:43:10 2024] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[Fri Aug 30 11:43:10 2024] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.
[Fri Aug 30 11:43:22 2024] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up
[Fri Aug 30 11:43:22 2024] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00
[Fri Aug 30 11:43:22 2024] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)
[Fri Aug 30 11:43:23 2024] NVRM: Xid (PCI:0000:19:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)
"""


def facts_of(text: str | bytes, source: str = "bundle/dmesg.log") -> tuple[FactGroup, Evidence]:
    blob = text.encode() if isinstance(text, str) else text
    ev = decode(Key.DMESG, blob, source=source)
    return kernel.build(EvidenceSet([ev]), Target(), {}), ev


def test_node_log_facts() -> None:
    g, _ = facts_of(NODE_LOG)
    v = g.values
    assert g.known and g.reason == ""
    assert v["xid_codes"] == [48, 63, 79, 94, 154]
    assert [(x["code"], x["pci"], x["pid"], x["line"]) for x in v["xids"]] == [
        (48, "0000:19:00", "<unknown>", 5),
        (63, "0000:19:00", "<unknown>", 6),
        (94, "0000:19:00", "1248209", 7),
        (79, "0000:91:00", "<unknown>", 8),
        (154, "0000:19:00", "", 13),
    ]
    x94 = v["xids"][2]
    assert (x94["process"], x94["klass"], x94["mnemonic"], x94["plugin_skips"]) == (
        "python3.10",
        "memory",
        "ROBUST_CHANNEL_CONTAINED_ERROR",
        False,
    )
    assert x94["time"] == "2024-08-30T11:43:09"
    assert v["fallen_off_bus"] is True and v["fallen_off_bus_pci"] == ["0000:91:00"]
    assert v["hardware_xids"] is True and v["application_xids_only"] is False
    assert v["sxid_codes"] == [12028, 20034]
    assert [(s["code"], s["fatal"], s["link"], s["switch"], s["klass"]) for s in v["sxids"]] == [
        (20034, True, 48, "nvidia-nvswitch1", "potentially-fatal"),
        (12028, False, 32, "nvidia-nvswitch3", "non-fatal"),
    ]
    assert v["sxid_fatal"] is True
    assert v["recovery_actions"] == [
        {
            "pci": "0000:19:00",
            "previous_code": 0,
            "previous": "None",
            "action_code": 4,
            "action": "Drain and Reset",
            "line": 13,
            "timestamp": "Fri Aug 30 11:43:23 2024",
        }
    ]
    assert v["latest_xid"]["code"] == 154 and v["latest_xid"]["line"] == 13
    assert v["driver_version"] == "535.183.01"
    assert v["gpu_identities"] == [
        {
            "pci": "0000:19:00",
            "uuid": "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375",
            "serial": "1650423013443",
        }
    ]
    assert v["peermem_invalid_context"] == 1
    assert v["rm_init_adapter_failed"] is False and v["gsp_timeout"] is False
    assert v["driver_load_errors"] == [] and v["xids_omitted"] == 0
    assert v["lines_scanned"] == 13
    summary = {e["code"]: (e["count"], e["pcis"], e["first_line"]) for e in v["xid_summary"]}
    assert summary == {
        48: (1, ["0000:19:00"], 5),
        63: (1, ["0000:19:00"], 6),
        79: (1, ["0000:91:00"], 8),
        94: (1, ["0000:19:00"], 7),
        154: (1, ["0000:19:00"], 13),
    }


def test_values_match_the_declared_schema() -> None:
    g, _ = facts_of(NODE_LOG)
    assert set(g.values) == set(kernel.SPEC.fields)
    assert all(spec.doc for spec in kernel.SPEC.fields.values())
    xid_keys = set(g.values["xids"][0])
    assert all(set(x) == xid_keys for x in g.values["xids"])
    assert set(g.values["latest_xid"]) == xid_keys
    for name in xid_keys:  # every key is named in the field's documentation
        assert name in kernel.SPEC.fields["xids"].doc, name
    g, _ = facts_of(OOM_LOG)
    for field in ("cgroup_oom_kills", "node_oom_kills"):
        for kill in g.values[field]:
            assert all(name in kernel.SPEC.fields["cgroup_oom_kills"].doc for name in kill)


def test_citations_point_at_the_lines_with_their_text() -> None:
    g, ev = facts_of(NODE_LOG)
    lines = NODE_LOG.splitlines()
    assert [r.line for r in g.cites["fallen_off_bus"]] == [8, 9]
    assert [r.line for r in g.cites["sxid_fatal"]] == [10]
    assert [r.line for r in g.cites["recovery_actions"]] == [13]
    assert [r.line for r in g.cites["latest_xid"]] == [13]
    assert [r.line for r in g.cites["xid_codes"]] == [5, 6, 7, 8, 13]
    assert [r.line for r in g.cites["driver_version"]] == [1]
    for refs in g.cites.values():
        for ref in refs:
            assert ref.text == lines[ref.line - 1] == ev.cite(ref.line).text
            assert ref.source == "bundle/dmesg.log" and ref.key == "dmesg"
    assert str(g.cites["fallen_off_bus"][0]).startswith(
        "bundle/dmesg.log:8: [Fri Aug 30 11:43:10 2024] NVRM: Xid (PCI:0000:91:00): 79"
    )


def test_each_xid_carries_nvidia_immediate_action() -> None:
    g, _ = facts_of(NODE_LOG)
    assert [(x["code"], x["immediate_action"]) for x in g.values["xids"]] == [
        (48, "WORKFLOW_XID_48"),
        (63, "IGNORE"),
        (94, "RESTART_APP"),
        (79, "RESTART_BM"),
        (154, "XID_154"),
    ]
    assert g.values["latest_xid"]["immediate_action"] == "XID_154"
    assert [(e["code"], e["immediate_action"]) for e in g.values["xid_summary"]] == [
        (48, "WORKFLOW_XID_48"),
        (63, "IGNORE"),
        (79, "RESTART_BM"),
        (94, "RESTART_APP"),
        (154, "XID_154"),
    ]
    g, _ = facts_of("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 999, pid=1, name=x, something\n")
    assert g.values["xids"][0]["immediate_action"] == ""


# A cgroup OOM kill of a data-loader worker of pod 0b4f6e1c-... (systemd cgroup driver), the
# next kill joined from the two lines of a pre-4.19 kernel, and a node-wide OOM kill. Lines built
# from mm/oom_kill.c's printk formats; the corpus carries the same forms
# (dmesg/xid13-43-sm-exception-dmesg-decode-gpud.log, see tests/corpus).
POD_UID = "0b4f6e1c-6a3e-4c55-9d1e-0123456789ab"
CID = "3fc28fa1c647ceede9f6b340d0b16c9f1f663698972d22a52e296f291638e014"
MEMCG = (
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
    f"{POD_UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope"
)
OOM_LOG = f"""\
[Tue Mar  4 02:11:09 2025] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997
[Tue Mar  4 02:11:09 2025] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-{CID}.scope,mems_allowed=0-1,oom_memcg={MEMCG},task_memcg={MEMCG},task=pt_data_worker,pid=4242,uid=0
[Tue Mar  4 02:11:09 2025] Memory cgroup out of memory: Killed process 4242 (pt_data_worker) total-vm:35624912kB, anon-rss:16745684kB, file-rss:76420kB, shmem-rss:12kB, UID:0 pgtables:33460kB oom_score_adj:-997
[Tue Mar  4 02:40:00 2025] Memory cgroup out of memory: Kill process 5005 (python) score 1990 or sacrifice child
[Tue Mar  4 02:40:00 2025] Killed process 5005 (python) total-vm:22872336kB, anon-rss:8124016kB, file-rss:0kB, shmem-rss:0kB
[Tue Mar  4 03:00:00 2025] NVRM: Xid (PCI:0000:3b:00): 45, pid=7007, name=python3, Ch 00000010
[Tue Mar  4 03:00:01 2025] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/kubepods/besteffort/pod{POD_UID}/{CID},task=python3,pid=7007,uid=1000
[Tue Mar  4 03:00:01 2025] Out of memory: Killed process 7007 (python3) total-vm:1024kB, anon-rss:512kB, file-rss:0kB, shmem-rss:0kB
[Tue Mar  4 03:10:00 2025] Killed process 8008 (orphan) total-vm:1024kB, anon-rss:512kB
"""


def test_oom_kills_join_their_lines_and_name_the_pod() -> None:
    g, _ = facts_of(OOM_LOG)
    v = g.values
    assert v["cgroup_oom_kills"] == [
        {
            "pid": 4242,
            "process": "pt_data_worker",
            "constraint": "CONSTRAINT_MEMCG",
            "cgroup": MEMCG,
            "pod_uid": POD_UID,
            "container_id": CID,
            "anon_rss_kb": 16745684,
            "line": 2,
            "timestamp": "Tue Mar 4 02:11:09 2025",
            "time": "2025-03-04T02:11:09",
        },
        {
            "pid": 5005,
            "process": "python",
            "constraint": "",
            "cgroup": "",
            "pod_uid": "",
            "container_id": "",
            "anon_rss_kb": 8124016,
            "line": 4,
            "timestamp": "Tue Mar 4 02:40:00 2025",
            "time": "2025-03-04T02:40:00",
        },
    ]
    (node_kill,) = v["node_oom_kills"]
    assert (
        node_kill["pid"],
        node_kill["process"],
        node_kill["constraint"],
        node_kill["pod_uid"],
        node_kill["anon_rss_kb"],
        node_kill["line"],
    ) == (7007, "python3", "CONSTRAINT_NONE", POD_UID, 512, 7)
    # The bare "Killed process" line on line 9 has no first line to say its scope: left out.
    assert [r.line for r in g.cites["cgroup_oom_kills"]] == [2, 4]
    assert [r.line for r in g.cites["node_oom_kills"]] == [7]
    assert v["xid_codes"] == [45]


def test_oom_kills_in_cel() -> None:
    cel = pytest.importorskip("cel")
    g, _ = facts_of(OOM_LOG)
    ctx: dict[str, Any] = {"kernel": g.to_context(), "pod": {"uid": POD_UID}}
    assert cel.evaluate("kernel.cgroup_oom_kills.exists(k, k.pod_uid == pod.uid)", ctx) is True
    assert cel.evaluate(
        "kernel.cgroup_oom_kills.filter(k, k.pod_uid == pod.uid).map(k, k.process)", ctx
    ) == ["pt_data_worker"]
    assert (
        cel.evaluate(
            "kernel.node_oom_kills.exists(k, k.pod_uid == pod.uid && k.anon_rss_kb > 0)", ctx
        )
        is True
    )


def test_oom_kills_are_bounded() -> None:
    line = "[ 10.0] Memory cgroup out of memory: Killed process {n} (w{n}) total-vm:1kB\n"
    g, _ = facts_of("".join(line.format(n=n) for n in range(1, 301)))
    kills = g.values["cgroup_oom_kills"]
    assert len(kills) == kernel.MAX_OOM_KILLS
    assert (kills[0]["pid"], kills[-1]["pid"]) == (201, 300)
    assert len(g.cites["cgroup_oom_kills"]) == kernel.MAX_CITES


def test_conditions_in_cel_read_the_facts() -> None:
    cel = pytest.importorskip("cel")
    g, _ = facts_of(NODE_LOG)
    ctx: dict[str, Any] = {"kernel": g.to_context()}
    assert cel.evaluate("kernel.known && kernel.xids.exists(x, x.code == 79)", ctx) is True
    assert cel.evaluate("kernel.latest_xid.pci == '0000:19:00'", ctx) is True
    assert (
        cel.evaluate("kernel.recovery_actions.exists(r, r.action == 'Drain and Reset')", ctx)
        is True
    )
    assert cel.evaluate("kernel.xids.filter(x, x.klass == 'memory').size()", ctx) == 3
    assert cel.evaluate("kernel.sxids.exists(s, s.fatal && s.link == 48)", ctx) is True
    assert cel.evaluate("79 in kernel.xid_codes && kernel.fallen_off_bus", ctx) is True


def test_application_errors_only() -> None:
    g, _ = facts_of(
        "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
        "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction "
        "Parameter\n"
        "[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, "
        "name=pt_main_thread, Ch 00000008\n"
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001\n"
    )
    v = g.values
    assert v["application_xids_only"] is True and v["hardware_xids"] is False
    assert [x["plugin_skips"] for x in v["xids"]] == [True, True, True]
    assert v["xids"][0]["gpc"] == 7 and v["xids"][0]["sm"] == 0
    assert [r.line for r in g.cites["application_xids_only"]] == [1, 2, 3]


def test_only_sympathetic_xids_are_not_application_errors() -> None:
    g, _ = facts_of(
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, "
        "Ch 00000001 caused by previous Xid 149\n"
    )
    assert g.values["application_xids_only"] is False
    assert g.values["xids"][0]["caused_by"] == 149


def test_lost_gpu_without_xid_init_failures_and_gsp() -> None:
    g, _ = facts_of(
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
        "[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)\n"
        "[  903.611884] NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0\n"
        "[ 1097.650222] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)\n"
        "[37803.140481] NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out\n"
    )
    v = g.values
    assert v["xids"] == [] and v["latest_xid"] == {} and v["hardware_xids"] is False
    assert v["fallen_off_bus"] is True and v["fallen_off_bus_pci"] == ["0000:B3:00"]
    assert [r.line for r in g.cites["fallen_off_bus"]] == [1]
    assert v["driver_load_errors"] == ["the NVIDIA probe routine failed for 1 device(s)"]
    assert v["rm_init_adapter_failed"] is True
    assert v["rm_init_adapter_errors"] == [
        {"pci": "0000:98:00", "code": "0x62:0x65:1792", "line": 5, "count": 2}
    ]
    assert [r.line for r in g.cites["rm_init_adapter_failed"]] == [5, 6, 7]
    assert v["gsp_timeout"] is True and [r.line for r in g.cites["gsp_timeout"]] == [8]


def test_xid119_counts_as_gsp_timeout() -> None:
    g, _ = facts_of(
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=4071838, name=python, Timeout after 45s "
        "of waiting for RPC response from GPU4 GSP! Expected function 76 "
        "(GSP_RM_CONTROL) (0x20801702 0x4).\n"
    )
    assert g.values["gsp_timeout"] is True and g.values["hardware_xids"] is False
    assert g.values["xids"][0]["klass"] == "firmware"


def test_flood_is_bounded_but_counted() -> None:
    first = (
        "[1.0] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.\n"
    )
    flood = "".join(
        f"[{i}.5] NVRM: Xid (PCI:0000:dc:00): 45, pid={i}, name=python3, Ch 00000001\n"
        for i in range(2, 3002)
    )
    g, _ = facts_of(first + flood)
    v = g.values
    assert v["xid_summary"][0]["code"] == 45 and v["xid_summary"][0]["count"] == 3000
    assert len(v["xids"]) == kernel.MAX_LISTED + 2  # the latest 500 + the first 79 and 45
    assert v["xids"][0]["code"] == 79  # the first of each kind is kept
    assert v["xids"][1]["line"] == 2  # ... and the first Xid 45
    assert v["xids_omitted"] == 3001 - len(v["xids"])
    assert v["latest_xid"]["pid"] == "3001" and v["latest_xid"]["line"] == 3001
    assert all(len(refs) <= kernel.MAX_CITES for refs in g.cites.values())
    assert v["lines_scanned"] == 3001


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        (
            Evidence.missing(Key.DMESG, source="bundle/dmesg.log"),
            "the node's kernel log (dmesg / journalctl -k): unavailable: not collected",
        ),
        (
            decode(Key.DMESG, b"", source="bundle/dmesg.log"),
            "the node's kernel log (dmesg / journalctl -k): error: bundle/dmesg.log is empty",
        ),
        (
            decode(
                Key.DMESG,
                b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8,
                source="bundle/dmesg.log",
            ),
            "the node's kernel log (dmesg / journalctl -k): error: bundle/dmesg.log looks binary",
        ),
        (
            Evidence(Key.DMESG, Status.TIMEOUT, "ssh gpu-7 did not answer in 10 s"),
            "the node's kernel log (dmesg / journalctl -k): timeout: ssh gpu-7 did not answer in 10 s",
        ),
    ],
)
def test_unusable_evidence_gives_an_unknown_group(evidence: Evidence, reason: str) -> None:
    g = kernel.build(EvidenceSet([evidence]), Target(), {})
    assert g.known is False
    assert g.reason.startswith(reason)
    assert g.values == kernel.SPEC.defaults()
    assert g.values["xids"] == [] and g.values["latest_xid"] == {}


def test_group_is_unknown_when_the_key_was_never_collected() -> None:
    g = kernel.build(EvidenceSet([]), Target(), {})
    assert g.known is False and "not collected" in g.reason


def test_a_log_without_gpu_messages_is_known_and_empty() -> None:
    junk = "".join(
        f"[{i}.5] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n" for i in range(1000)
    )
    g, _ = facts_of(junk)
    assert g.known is True
    assert g.values == {**kernel.SPEC.defaults(), "lines_scanned": 1000}
    assert g.cites == {}


def test_oom_lines_with_absurd_numbers_do_not_raise() -> None:
    big = "9" * 5000  # int() refuses more than 4,300 digits
    text = (
        f"[ 1.0] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),task=x,pid={big},uid=0\n"
        f"[ 1.0] Memory cgroup out of memory: Killed process {big} (x) anon-rss:{big}kB\n"
        "[ 2.0] Memory cgroup out of memory: Killed process 77 (y) anon-rss:1024kB\n"
    )
    g, _ = facts_of(text)
    assert g.known
    assert [(k["pid"], k["process"], k["anon_rss_kb"]) for k in g.values["cgroup_oom_kills"]] == [
        (-1, "x", -1),
        (77, "y", 1024),
    ]
