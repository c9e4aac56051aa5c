"""A bundle with secrets planted everywhere: no export carries one.

Markdown, JSON, the headless CLI (stdout and ``-o``), ``facts`` (plain text and JSON) and the
``scan`` report are all checked for every planted secret fragment, and for ESC bytes.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from gputriage.cli import main
from gputriage.evidence.bundle import read_bundle
from gputriage.facts.build import build_facts
from gputriage.pipeline import EXIT_FINDING, EXIT_UNDETERMINED, EXIT_WAITING
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.report.render import render
from gputriage.scan.classify import pod_info
from gputriage.scan.collect import Scope
from gputriage.scan.fleet import Fleet
from gputriage.scan.report import build_report, render_json, render_markdown
from tests.hostile.secrets import PLANTED, all_secrets
from tests.hostile.secrets_bundle import write_secrets_bundle

#: The pod the lost-Xid-79 scenario holds (a pod name the bundle lacks is refused).
POD = ["llama-pretrain-worker-3", "-n", "ml-prod"]

_REPORTED = (EXIT_FINDING, EXIT_UNDETERMINED, EXIT_WAITING)
_BAD_BYTES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_clean(text: str, where: str) -> None:
    leaked = [s for s in all_secrets() if s in text]
    assert leaked == [], f"{where} leaks {leaked}"
    assert not _BAD_BYTES.search(text), f"{where} holds control bytes"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_secrets_bundle(tmp_path_factory.mktemp("secrets"))


def test_the_bundle_really_holds_the_secrets(bundle: Path) -> None:
    raw = "".join(p.read_text() for p in bundle.iterdir() if p.is_file())
    missing = [s for s in all_secrets() if s not in raw and s not in raw.replace("\\n", "\n")]
    assert missing == []
    assert len((bundle / "pod.json").read_text().splitlines()) == 1


def test_summary_exports_hold_no_secret(bundle: Path) -> None:
    evidence = read_bundle(bundle)
    facts = build_facts(evidence)
    transcript = walk(
        load_playbooks(user_config=False), facts, answers={"triage/symptom": "gpu-errors"}
    )
    assert transcript.visits
    md = render("md", "bundle secrets", "", evidence, facts, transcript, [])
    js = render("json", "bundle secrets", "", evidence, facts, transcript, [])
    assert "<redacted>" in md + js  # something was cited and masked, not just left out
    assert_clean(md, "markdown")
    assert_clean(js, "json")
    json.loads(js)


def test_headless_cli_stdout_and_file_hold_no_secret(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fmt in ("md", "json"):
        assert main([*POD, "--from", str(bundle), "--report", fmt]) in _REPORTED
        out, err = capsys.readouterr()
        assert_clean(out, f"--report {fmt} stdout")
        assert_clean(err, f"--report {fmt} stderr")
    target = tmp_path / "summary.md"
    assert main([*POD, "--from", str(bundle), "--report", "md", "-o", str(target)]) in _REPORTED
    assert_clean(target.read_text(), "-o file")


def test_facts_command_holds_no_secret(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--json"]):
        main(["facts", "--from", str(bundle), *extra])
        out, err = capsys.readouterr()
        assert "container_log" in out or "pod" in out
        assert_clean(out + err, f"facts {extra}")


def test_scan_reports_hold_no_secret() -> None:
    now = time.time()
    pods = []
    for i, (text, _) in enumerate(PLANTED):
        pods.append(
            {
                "metadata": {
                    "name": f"trainer-{i}",
                    "namespace": "ml",
                    "uid": f"u{i}",
                    "creationTimestamp": "2020-01-01T00:00:00Z",
                },
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
                },
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": f"\x1b]0;pwned\x07 [link=x]{text}",
                        }
                    ],
                },
            }
        )
    fleet = Fleet(now, 600)
    fleet.holders_complete = True
    fleet.add_pods(len(pods), [p for p in map(pod_info, pods) if p])
    fleet.finish(plugins_listed=True)
    assert len(fleet.rows) == len(PLANTED)
    report = build_report(fleet, [], Scope(namespace="ml"), context="prod")
    md, js = render_markdown(report), render_json(report)
    assert_clean(md, "scan markdown")
    assert_clean(js, "scan json")
    assert "<redacted>" in md and "\\[link=x\\]" in md


async def test_tui_export_holds_no_secret(bundle: Path, tmp_path: Path) -> None:
    from gputriage.session import BundleSession
    from gputriage.tui.app import TriageApp
    from tests.tui.harness import NOW, settle

    app = TriageApp(
        BundleSession(bundle, description="bundle secrets"),
        notes_path=tmp_path / "notes.json",
        export_dir=tmp_path / "out",
        clock=lambda: NOW,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app)
        await pilot.press("e")
        await pilot.pause()
        await settle(pilot, app)
    exported = sorted((tmp_path / "out").glob("gputriage-*"))
    assert [p.suffix for p in exported] == [".json", ".md"], exported
    for path in exported:
        assert_clean(path.read_text(encoding="utf-8"), f"TUI export {path.suffix}")
