"""The bundle reader turns every kind of bad file into a named unknown, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputriage.errors import GputriageError
from gputriage.evidence import bundle
from gputriage.evidence.bundle import decode, read_bundle
from gputriage.evidence.model import Evidence, EvidenceSet, Key, Status

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "u-1"},
    "spec": {"nodeName": "gpu-1", "containers": [{"name": "main"}]},
    "status": {"phase": "Pending"},
}


def write(tmp: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        data = content if isinstance(content, bytes) else content.encode()
        (tmp / name).write_bytes(data)
    return tmp


def test_minimal_bundle_reads_pod_and_marks_the_rest_unavailable(tmp_path: Path) -> None:
    ev = read_bundle(write(tmp_path, {"pod.json": json.dumps(POD)}))
    assert ev[Key.POD].ok and ev[Key.POD].data["metadata"]["name"] == "trainer-0"
    assert ev[Key.POD].format == "json"
    assert ev[Key.DMESG].status is Status.UNAVAILABLE
    assert "dmesg.log is not in the bundle" in ev[Key.DMESG].detail
    assert len(ev) == len(Key)


def test_bundle_without_pod_is_an_actionable_error(tmp_path: Path) -> None:
    with pytest.raises(GputriageError, match=r"kubectl get pod P -n NS -o json"):
        read_bundle(write(tmp_path, {"dmesg.log": "x\n"}))
    with pytest.raises(GputriageError, match="not a directory"):
        read_bundle(tmp_path / "nope")


def test_yaml_pod_and_single_event_where_list_expected(tmp_path: Path) -> None:
    import yaml

    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
    }
    ev = read_bundle(
        write(tmp_path, {"pod.yaml": yaml.safe_dump(POD), "events.json": json.dumps(event)})
    )
    assert ev[Key.POD].format == "yaml" and ev[Key.POD].data["spec"]["nodeName"] == "gpu-1"
    assert ev[Key.EVENTS].data["items"][0]["reason"] == "FailedScheduling"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("events.json", "", "is empty"),
        ("events.json", "   \n\n", "is empty"),
        ("node.json", b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4, "looks binary"),
        ("node.json", '{"kind": "Node", "metadata": {"name": "gpu', "truncated JSON"),
        ("node.json", '{"kind": "Node",, }', "malformed JSON"),
        ("node.json", json.dumps(POD), "expected kind Node, got 'Pod'"),
        ("events.json", json.dumps({"kind": "PodList", "items": []}), "expected kind EventList"),
        ("events.json", json.dumps({"kind": "EventList", "items": [1]}), "not a list of objects"),
        ("nodes.json", "42", "expected a NodeList object, got int"),
        ("node.json", "[]", "expected a Node object, got list"),
        ("quota.yaml", "a: [b\n", "neither JSON nor YAML"),
        ("dmesg.log", b"\x00\x01\x02\x03" * 100, "looks binary"),
    ],
)
def test_bad_files_become_named_errors(
    tmp_path: Path, name: str, content: str | bytes, expected: str
) -> None:
    ev = read_bundle(write(tmp_path, {"pod.json": json.dumps(POD), name: content}))
    key = next(k for k, names in bundle.BUNDLE_FILES.items() if name in names)
    assert ev[key].status is Status.ERROR
    assert expected in ev[key].detail
    assert ev[key].detail.startswith(f"{tmp_path.name}/{name}")


def test_oversized_log_keeps_the_newest_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle, "MAX_TEXT_BYTES", 1000)
    lines = [f"line {i:05d}" for i in range(1000)]
    ev = read_bundle(
        write(tmp_path, {"pod.json": json.dumps(POD), "kubelet.log": "\n".join(lines) + "\n"})
    )
    kubelet = ev[Key.KUBELET_LOG]
    assert kubelet.ok
    assert kubelet.lines()[-1] == "line 00999"
    assert all(line.startswith("line ") and len(line) == 10 for line in kubelet.lines())
    assert "only the last 1000 were read" in kubelet.detail


def test_meta_json_explains_what_collection_could_not_get(tmp_path: Path) -> None:
    meta = {
        "sources": {
            "dmesg": {"status": "forbidden", "detail": "ssh gpu-1: dmesg: Operation not permitted"}
        }
    }
    ev = read_bundle(write(tmp_path, {"pod.json": json.dumps(POD), "meta.json": json.dumps(meta)}))
    assert ev[Key.DMESG].status is Status.FORBIDDEN
    assert "Operation not permitted" in ev[Key.DMESG].detail


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    ev = decode(Key.DMESG, b"NVRM: Xid 79 \xff\xfe ok\n", source="x")
    assert ev.ok and "\ufffd" in ev.raw and "Xid 79" in ev.raw


def test_nvidia_smi_xml_is_detected_as_xml() -> None:
    ev = decode(Key.NVIDIA_SMI, b'<?xml version="1.0" ?>\n<nvidia_smi_log/>', source="x")
    assert ev.format == "xml"


def test_line_citations_and_find_line() -> None:
    ev = Evidence(Key.KUBELET_LOG, Status.OK, "", "a\nNVRM: Xid 79\nc\n", "b/kubelet.log")
    assert str(ev.cite(2)) == "b/kubelet.log:2: NVRM: Xid 79"
    assert ev.find_line("Xid").line == 2
    assert ev.find_line("absent").line == 0


def test_evidence_set_is_immutable_and_reports_missing() -> None:
    s = EvidenceSet([Evidence(Key.POD, Status.OK)])
    assert s.get_or_missing(Key.DMESG).status is Status.UNAVAILABLE
    s2 = s.with_evidence(Evidence(Key.DMESG, Status.TIMEOUT, "ssh timed out"))
    assert Key.DMESG not in s and s2[Key.DMESG].status is Status.TIMEOUT


def test_integers_past_pythons_digit_limit_do_not_escape() -> None:
    huge = "9" * 5000
    ev = decode(
        Key.NODE,
        f'{{"kind": "Node", "metadata": {{"name": "n", "x": {huge}}}}}'.encode(),
        source="b/node.json",
    )
    assert ev.ok and ev.data["metadata"]["x"] == huge


@pytest.mark.parametrize(
    "blob",
    [b"[" * 100_000, b'{"a":' * 100_000, b"- " * 100_000],
    ids=["json-arrays", "json-objects", "yaml-list"],
)
def test_nesting_too_deep_is_an_error_not_a_recursion_error(blob: bytes) -> None:
    ev = decode(Key.EVENTS, blob, source="deep/events.json")
    assert ev.status is Status.ERROR
    assert "nested too deeply" in ev.detail or "nesting depth" in ev.detail, ev.detail
