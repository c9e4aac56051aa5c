"""The report layer: inert text, redaction, atomic writes, autosaved notes, summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gputriage.evidence.model import Evidence, EvidenceSet, Key, LineRef, Status
from gputriage.facts.model import FactGroup, FactSet, Target
from gputriage.playbook.transcript import Choice, Finding, Fix, Outcome, Transcript, Visit
from gputriage.report.json import render_json
from gputriage.report.markdown import fence, render_markdown
from gputriage.report.notes import NotesStore, default_notes_path, read_notes_file
from gputriage.report.redact import MASK, redact_obj, redact_text
from gputriage.report.summary import build_summary
from gputriage.report.write import atomic_write
from gputriage.textsafe import inert, inert_line

HOSTILE = "[bold red]boom[/] \x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07end\r"


def test_inert_strips_escapes_and_keeps_markup_characters() -> None:
    out = inert(HOSTILE)
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert out == "[bold red]boom[/] red  end"
    assert inert_line("a\nb\tc") == "a b c"
    assert inert("\x9b31mx") == "x"


def test_redaction_covers_tokens_keys_and_secret_env() -> None:
    text = (
        "Authorization: Bearer abcdefghijklmnop token: s3cr3tvalue "
        "AKIAABCDEFGHIJKLMNOP HF_TOKEN=hf_abcdefghijklmnopqrstuvwx "
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIz"
    )
    out = redact_text(text)
    for secret in (
        "abcdefghijklmnop",
        "s3cr3tvalue",
        "AKIAABCDEFGHIJKLMNOP",
        "hf_abcdefghijklmnopqrstuvwx",
        "eyJhbGciOiJIUzI1NiJ9",
    ):
        assert secret not in out
    obj = redact_obj(
        {
            "env": [
                {"name": "DB_PASSWORD", "value": "hunter2"},
                {"name": "NCCL_DEBUG", "value": "INFO"},
            ],
            "client-key-data": "LS0tLS1CRUdJTi",
        }
    )
    assert obj["env"][0]["value"] == MASK and obj["env"][1]["value"] == "INFO"
    assert "LS0tLS1CRUdJTi" not in json.dumps(obj)


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "summary.md"
    atomic_write(target, "first")
    atomic_write(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["summary.md"]


def test_killed_writer_leaves_the_old_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "notes.json"
    atomic_write(target, "old content")
    code = (
        "import os, sys\n"
        "from gputriage.report import write\n"
        "real = os.replace\n"
        "os.replace = lambda *a: os.kill(os.getpid(), 9)\n"
        f"write.atomic_write({str(target)!r}, 'new ' * 100000)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert target.read_text() == "old content"


def test_notes_autosave_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    store = NotesStore(path)
    store.add("drained gpu-7, waiting for RMA", step="lost/xid")
    again = NotesStore(path)
    assert [n.text for n in again.notes] == ["drained gpu-7, waiting for RMA"]
    assert again.notes[0].step == "lost/xid"
    assert read_notes_file(path)[0].text.startswith("drained")
    plain = tmp_path / "plain.txt"
    plain.write_text("called vendor\n")
    assert read_notes_file(plain)[0].text == "called vendor"
    assert default_notes_path("ctx/a", "ml", "p;rm").name == "ctx-a_ml_p-rm.json"


def _fixture_summary() -> dict:
    dmesg = Evidence(
        Key.DMESG,
        Status.OK,
        "2 lines",
        "x\nNVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n",
        "b/dmesg.log",
    )
    ref = dmesg.cite(2)
    hostile_ref = LineRef("events", "b/events.json", 7, HOSTILE)
    evidence = EvidenceSet(
        [
            Evidence(Key.POD, Status.OK, "", "{}", "b/pod.json"),
            dmesg,
            Evidence(Key.KUBELET_LOG, Status.TIMEOUT, "ssh gpu-7 timed out", "", "ssh gpu-7"),
        ]
    )
    facts = FactSet(
        Target("ml", "trainer-0", "u1", "gpu-7"),
        {
            "pod": FactGroup(
                "pod",
                True,
                "",
                {"phase": "Running", "node": "gpu-7", "gpu_resources": {"nvidia.com/gpu": 8}},
            ),
            "kernel": FactGroup(
                "kernel",
                True,
                "",
                {
                    "xids": [
                        {"code": 79, "timestamp": "2026-11-29T03:10:00Z", "message": "fallen off"}
                    ]
                },
            ),
            "events": FactGroup(
                "events",
                True,
                "",
                {
                    "items": [
                        {"reason": "BackOff", "message": "Back-off", "last": "2026-11-29T03:12:00Z"}
                    ]
                },
            ),
        },
    )
    visit = Visit(
        "lost/start",
        "lost",
        "start",
        "Did a GPU fall off the bus?",
        Outcome.OVERRIDE,
        "finding:lost.xid79",
        because="Xid 79 in kernel log",
        proposed="lost/ecc",
        citations=(ref, hostile_ref),
        choices=(Choice("x", "X", "finding:lost.xid79"),),
    )
    finding = Finding(
        "lost.xid79-fallen-off-bus",
        "critical",
        "GPU fell off the bus",
        "The GPU stopped answering.",
        Fix("Drain the node", ("kubectl drain gpu-7 --ignore-daemonsets",)),
        evidence=(ref,),
    )
    tr = Transcript("lost", (visit,), (finding,))
    from gputriage.report.notes import Note

    return build_summary(
        session="bundle b",
        context="prod",
        evidence=evidence,
        facts=facts,
        transcript=tr,
        notes=[Note(0.0, "token: abcdef123456 seen")],
        now=0.0,
    )


def test_summary_contents() -> None:
    s = _fixture_summary()
    assert s["verdict"] == {
        "status": "finding",
        "headline": "GPU fell off the bus",
        "finding": "lost.xid79-fallen-off-bus",
        "severity": "critical",
        "confidence": "",
    }
    assert s["walk"][0]["overridden"] and s["walk"][0]["proposed"] == "lost/ecc"
    assert [e["source"] for e in s["timeline"]] == ["kernel", "events"]
    assert s["timeline"][0]["text"].startswith("Xid 79")
    assert next(u["key"] for u in s["unreadable"]) == "events"
    assert any(u["key"] == "kubelet" and u["status"] == "timeout" for u in s["unreadable"])
    assert "abcdef123456" not in json.dumps(s)
    assert "\x1b" not in json.dumps(s, ensure_ascii=False)


def test_markdown_keeps_cluster_text_in_fences() -> None:
    md = render_markdown(_fixture_summary())
    assert "# GPU incident summary: ml/trainer-0" in md
    assert "**overridden** by the SRE" in md
    assert "kubectl drain gpu-7 --ignore-daemonsets" in md
    assert "b/dmesg.log:2: NVRM: Xid (PCI:0000:3b:00): 79" in md
    assert "[bold red]boom[/]" in md and "\x1b" not in md
    assert "## What gputriage could not see" in md and "ssh gpu-7 timed out" in md
    assert json.loads(render_json(_fixture_summary()))["findings"][0]["fix"]["commands"]


def test_fence_outgrows_backticks_in_content() -> None:
    block = fence(["```", "x"])
    assert block.startswith("````\n") and block.endswith("\n````")


def test_atomic_write_permissions_follow_umask(tmp_path: Path) -> None:
    p = atomic_write(tmp_path / "x", "y")
    assert p.exists() and os.stat(p).st_size == 1
