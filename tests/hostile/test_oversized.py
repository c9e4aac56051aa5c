"""Oversized, truncated, deeply nested and non-UTF-8 input: named errors, bounded memory.

Memory is measured where it is real: a child process (:mod:`tests.hostile.bounded`) reads
the input the way gputriage does and reports its peak RSS from the kernel.

* a bundle with 1 GiB logs (sparse files with real text at their end, and one that is all
  NULs): the reader tails them, so memory stays near the interpreter's own;
* a node whose journal streams a gigabyte of matching lines: cut on the node;
* an API server that ignores ``limitBytes`` and sends a 96 MiB container log;
* huge single lines and fields, integers thousands of digits long, JSON nested 100,000 deep,
  cut-off JSON and XML, bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gputriage.evidence.bundle import MAX_TEXT_BYTES, decode, read_bundle
from gputriage.evidence.model import EvidenceSet, Key, Status
from gputriage.facts.build import build_facts
from gputriage.parsers.container_log import scan_container_log
from gputriage.parsers.describe import parse_pod_describe
from gputriage.parsers.device_plugin import parse_device_plugin_log
from gputriage.parsers.host import parse_containerd_config, parse_dev_nvidia, parse_lsmod
from gputriage.parsers.journal import parse_kubelet_journal
from gputriage.parsers.kernel import parse_text
from gputriage.parsers.nvidia_smi import parse_nvidia_smi
from gputriage.parsers.scheduler import parse_scheduler_message
from gputriage.scenarios import scenario_path
from tests.hostile.bounded import run_bounded
from tests.hostile.seeds import DESCRIBE, SCHEDULER, seeds
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import gpu_cluster
from tests.sshd import SshLab

GIB = 1024**3
MIB = 1024**2
#: What the interpreter plus gputriage's core imports cost; a bounded read adds tens of MiB.
RSS_BOUND_MIB = 256

READ_BUNDLE = r"""
import json, sys
from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.report.render import render
evidence = read_bundle(sys.argv[1])
facts = build_facts(evidence)
transcript = walk(load_playbooks(user_config=False), facts)
report = render("json", "bundle", "", evidence, facts, transcript, [])
print(json.dumps({k.value: [e.status.value, e.detail, len(e.raw)] for k, e in evidence.items()}))
"""


def sparse_log(path: Path, size: int, tail: str) -> None:
    """A ``size``-byte file: a hole (NULs, no disk) then ``tail`` as its last bytes."""
    data = tail.encode()
    with path.open("wb") as fh:
        fh.truncate(size)
        fh.seek(size - len(data))
        fh.write(data)


def test_gigabyte_logs_in_a_bundle_are_tailed(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    src = scenario_path("lost-xid79")
    bundle.mkdir()
    for name in ("pod.json", "events.json", "node.json"):
        (bundle / name).write_bytes((src / name).read_bytes())
    kernel = (src / "dmesg.log").read_text()
    filler = "[Tue Aug 13 09:00:00 2024] cali5f1e9a3b2c4: link becomes ready, eth0 carrier on\n" * (
        20 * MIB // 80
    )
    sparse_log(bundle / "dmesg.log", GIB, filler + kernel)
    kubelet = (src / "kubelet.log").read_text()
    sparse_log(bundle / "kubelet.log", GIB, filler + kubelet)
    sparse_log(
        bundle / "container.log",
        GIB,
        "x" * (20 * MIB) + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n",
    )
    sparse_log(bundle / "device-plugin.log", GIB, "")  # all NULs: not text

    outcome = run_bounded(READ_BUNDLE, str(bundle), timeout=120, memory_mib=2048)
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.describe()
    assert outcome.max_rss_mib < RSS_BOUND_MIB, outcome.describe()
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    for key in ("dmesg", "kubelet", "container"):
        status, detail, raw_len = seen[key]
        assert status == "ok", (key, detail)
        assert f"file is {GIB} bytes; only the last {MAX_TEXT_BYTES} were read" in detail
        assert raw_len <= MAX_TEXT_BYTES
    assert seen["device-plugin"][0] == "error" and "binary" in seen["device-plugin"][1]


def test_oversized_fields_and_lines(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    src = scenario_path("lost-xid79")
    bundle.mkdir()
    pod = json.loads((src / "pod.json").read_text())
    pod["metadata"]["annotations"] = {"huge": "a" * (40 * MIB)}
    (bundle / "pod.json").write_text(json.dumps(pod))
    events = json.loads((src / "events.json").read_text())
    events["items"][0]["message"] = "Insufficient nvidia.com/gpu " * (400_000)
    (bundle / "events.json").write_text(json.dumps(events))
    (bundle / "dmesg.log").write_text(
        "NVRM: Xid (PCI:0000:3b:00): 79, "
        + "p" * (12 * MIB)
        + "\n"
        + (src / "dmesg.log").read_text()
    )
    outcome = run_bounded(READ_BUNDLE, str(bundle), timeout=60, memory_mib=3072)
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.describe()
    assert outcome.max_rss_mib < 1024, outcome.describe()
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert seen["pod"][0] == "ok" and seen["events"][0] == "ok" and seen["dmesg"][0] == "ok"


NODE_CHILD = r"""
import json, sys
from gputriage.evidence.model import Key
from gputriage.evidence.sources import NodeQuery
from gputriage.evidence.ssh import SshNodeSource, SshSettings
source = SshNodeSource(SshSettings(config_path=sys.argv[1], known_hosts=sys.argv[2]))
query = NodeQuery(node="gpu-node-1", address="10.0.0.7", namespace="ml", pod="trainer-0")
ev = source.collect(Key.DMESG, query, timeout=100)
source.close()
print(json.dumps([ev.status.value, ev.detail, len(ev.raw), source.bytes_received]))
"""


@pytest.mark.integration
def test_a_gigabyte_journal_stream_is_cut_on_the_node(lab: SshLab) -> None:
    line = (
        "2026-03-05T10:06:41+0000 gpu-node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    lab.write_tool("journalctl", f'yes "{line}" | head -c {GIB}\n')
    outcome = run_bounded(NODE_CHILD, str(lab.config), str(lab.known_hosts), timeout=150)
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.describe()
    status, detail, raw_len, received = json.loads(outcome.stdout.strip().splitlines()[-1])
    limit = 4 * MIB
    assert status == "ok" and f"cut at {limit} bytes on the node" in detail, detail
    assert raw_len < limit and received < limit + 64 * 1024, (raw_len, received)
    assert outcome.max_rss_mib < RSS_BOUND_MIB, outcome.describe()


API_CHILD = r"""
import json, sys
from gputriage.evidence.kube import KubeSource
from gputriage.evidence.kube_client import KubeClient, load_config
from gputriage.evidence.model import Key
client = KubeClient(load_config(sys.argv[1], None), timeout=60)
source = KubeSource(client, "ml", "trainer-0")
pod = source.pod()
ev = source.collect(Key.CONTAINER_LOG, pod) if sys.argv[2] == "log" else pod
print(json.dumps([ev.status.value, ev.detail[:300], len(ev.raw)]))
"""
#: What reading a log capped at 4 MiB may add to the same process without reading it.
LOG_READ_BOUND_MIB = 64


def test_an_api_that_ignores_limit_bytes_cannot_flood_memory(tmp_path: Path) -> None:
    with KubeAPI(gpu_cluster()) as api:
        api.fail(
            r"/pods/trainer-0/log$",
            200,
            b"step 1 loss 2.0\n" * (6 * MIB),
            content_type="text/plain",
        )
        config = api.write_kubeconfig(tmp_path / "kubeconfig")
        # The same process without the log read: what the imports and the pod cost here.
        baseline = run_bounded(API_CHILD, str(config), "pod", timeout=120, memory_mib=3072)
        outcome = run_bounded(API_CHILD, str(config), "log", timeout=120, memory_mib=3072)
        logged = [r for r in api.requests if r.path.endswith("/log")]
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.describe()
    assert logged and all(r.param("limitBytes") and r.param("tailLines") for r in logged)
    status, detail, raw_len = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert status == "ok", detail
    assert raw_len <= 4 * MIB, f"read {raw_len} bytes of a log the client asked to cap at 4 MiB"
    assert baseline.returncode == 0, baseline.describe()
    grew = outcome.max_rss_mib - baseline.max_rss_mib
    assert grew < LOG_READ_BOUND_MIB, f"{grew:.0f} MiB more: {outcome.describe()}"


# -- in-process: exact behaviour on malformed input ------------------------------------------

HUGE_INT = "9" * 5000  # past Python's 4300-digit int() limit
PARSERS = {
    Key.DMESG.value: parse_text,
    Key.NVIDIA_SMI.value: parse_nvidia_smi,
    Key.KUBELET_LOG.value: parse_kubelet_journal,
    SCHEDULER: parse_scheduler_message,
    Key.DEVICE_PLUGIN_LOG.value: parse_device_plugin_log,
    DESCRIBE: parse_pod_describe,
    Key.CONTAINER_LOG.value: scan_container_log,
    Key.LSMOD.value: parse_lsmod,
    Key.DEV_NVIDIA.value: parse_dev_nvidia,
    Key.CONTAINERD_CONFIG.value: parse_containerd_config,
}


@pytest.mark.parametrize("kind", list(PARSERS))
def test_integers_thousands_of_digits_long(kind: str) -> None:
    """Every number in every seed document made 5,000 digits long: parsers must not raise
    (``int()`` refuses more than 4,300 digits with a ValueError)."""
    failures = []
    for doc in seeds()[kind]:
        text = re.sub(r"\d+", HUGE_INT, doc)
        try:
            PARSERS[kind](text)
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {str(exc)[:80]}")
    assert not failures, f"{kind}: {len(failures)} documents raised: {sorted(set(failures))}"


@pytest.mark.parametrize("key", list(Key), ids=lambda k: k.value)
def test_huge_integers_through_decode_and_facts(key: Key) -> None:
    pod = decode(Key.POD, seeds()["pod"][0].encode(), source="seed/pod.json")
    problems = []
    for doc in seeds()[key.value]:
        blob = re.sub(r"\d+", HUGE_INT, doc).encode()
        try:
            ev = decode(key, blob, source=f"fuzz/{key.value}")
        except Exception as exc:
            problems.append(f"decode raised {type(exc).__name__}")
            continue
        facts = build_facts(EvidenceSet([pod, ev] if key is not Key.POD else [ev]))
        problems += [g.reason[:120] for g in facts.groups.values() if "internal error" in g.reason]
    assert not problems, sorted(set(problems))


@pytest.mark.parametrize(
    "blob",
    [b"[" * 100_000, b'{"a":' * 100_000, b"- " * 100_000 + b"x"],
    ids=["json-arrays", "json-objects", "yaml-lists"],
)
def test_nesting_100000_deep_is_an_error_not_a_crash(blob: bytes) -> None:
    ev = decode(Key.EVENTS, blob, source="deep/events.json")
    assert ev.status is Status.ERROR, ev.detail


def test_truncated_json_xml_and_non_utf8(tmp_path: Path) -> None:
    src = scenario_path("oom-time-sliced")
    bundle = tmp_path / "b"
    bundle.mkdir()
    pod = (src / "pod.json").read_bytes()
    (bundle / "pod.json").write_bytes(pod.replace(b'"name": "', b'"name": "\xff\xfe', 1))
    events = (src / "events.json").read_bytes()
    (bundle / "events.json").write_bytes(events[: len(events) // 2])
    xml = (src / "nvidia-smi.xml").read_bytes()
    (bundle / "nvidia-smi.xml").write_bytes(xml[: xml.index(b"</gpu>") // 2])
    (bundle / "kubelet.log").write_bytes((src / "kubelet.log").read_bytes() + b"\xc3\x28 \xa0\n")
    evidence = read_bundle(bundle)
    assert evidence[Key.POD].ok and "\ufffd" in evidence[Key.POD].raw
    assert evidence[Key.EVENTS].status is Status.ERROR
    assert "truncated JSON" in evidence[Key.EVENTS].detail
    assert evidence[Key.KUBELET_LOG].ok
    facts = build_facts(evidence)
    assert not facts["events"].known and "truncated JSON" in facts["events"].reason
    smi = parse_nvidia_smi(evidence[Key.NVIDIA_SMI].raw)
    assert smi.status == "unparsed" and smi.message, smi
    assert all("internal error" not in g.reason for g in facts.groups.values())
