"""``gputriage playbooks list|validate|explain|schema|findings`` and ``gputriage facts``, run
through the real command line entry point."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage.cli import main
from gputriage.playbook.findings_doc import render_findings
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.schema import schema_text

ROOT = Path(__file__).resolve().parents[2]

# A user playbook written against the registered pod facts.
MINE = """\
format_version: 1
id: site-pending
title: Site checks for pending pods
routes:
  - when: pod.phase == "Pending"
    priority: 5
start: phase
steps:
  phase:
    prompt: Is the pod pending?
    branches:
      - when: pod.phase == "Pending"
        because: it is
        conclude: site.pending
    otherwise:
      goto: phase-check
  phase-check:
    prompt: Anything else?
    otherwise:
      conclude: site.pending
findings:
  site.pending:
    requires: pod.phase == "Pending"
    severity: low
    title: Pending at our site
    summary: Ask the platform team.
    fix:
      summary: Ping them.
      commands:
        - kubectl -n {{pod.namespace}} get pod {{pod.name}}
"""


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_schema_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "playbooks", "schema")
    assert rc == 0 and out == schema_text()
    assert json.loads(out)["title"] == "gputriage playbook"


def test_list_shows_shipped_and_user_playbooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "site.yaml").write_text(MINE)
    rc, out, err = run(capsys, "playbooks", "list", "--playbooks", str(d))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "MATURITY", "STEPS", "FINDINGS", "FROM", "TITLE"]
    assert re.search(r"^triage\s+beta\s+7\s+3\s+shipped\s+Which kind of trouble", out, re.M)
    assert re.search(
        r"^lost-card\s+beta\s+\d+\s+\d+\s+shipped\s+Is a GPU on the node lost", out, re.M
    )
    assert re.search(
        rf"^site-pending\s+experimental\s+2\s+1\s+{re.escape(str(d))}/site.yaml\s+"
        r"Site checks for pending pods$",
        out,
        re.M,
    )


def test_validate_all_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "playbooks", "validate")
    assert rc == 0
    assert re.fullmatch(r"ok: \d+ playbooks, \d+ steps, \d+ findings\n", out)


def test_validate_a_good_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(MINE)
    rc, out, _ = run(capsys, "playbooks", "validate", str(path))
    assert rc == 0
    assert out.splitlines()[0] == f"{path}: ok: playbook 'site-pending'"


def test_validate_reports_located_problems_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(
        MINE.replace("goto: phase-check", "goto: phase-chek").replace(
            'pod.phase == "Pending"\n        because', 'pod.phsae == "Pending"\n        because'
        )
    )
    shipped = len(load_playbooks(user_config=False).playbooks)
    rc, out, _ = run(capsys, "playbooks", "validate", str(path))
    assert rc == 1
    assert out == (
        f"{path}:12:15: error: unknown fact 'pod.phsae'\n"
        "   |\n"
        '12 |       - when: pod.phsae == "Pending"\n'
        "   |               ^^^^^^^^^\n"
        "   = help: did you mean 'pod.phase'?\n"
        "\n"
        f"1 problem; {shipped} playbooks loaded\n"
    )
    path.write_text(MINE.replace("goto: phase-check", "goto: phase-chek"))
    rc, out, _ = run(capsys, "playbooks", "validate", str(path))
    assert rc == 1
    assert f"{path}:16:13: error: 'goto' names a step that does not exist: 'phase-chek'" in out
    assert "= help: did you mean 'phase-check'?" in out


def test_explain_prints_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "playbooks", "explain", "triage")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "triage: Which kind of trouble is this GPU pod in?"
    assert "Starts at: gpu-request" in lines
    assert "Step phase: Where in its life is the pod stuck?" in lines
    at = lines.index("Step phase: Where in its life is the pod stuck?")
    assert lines[at + 2 : at + 6] == [
        "  1. when pod.admission_rejected",
        "     because the kubelet on {{pod.node}} rejected the pod at admission ({{pod.reason}})",
        "     also cites pod.reason, pod.message",
        "     -> goto playbook create, step symptom",
    ]
    assert (
        '  6. when !pod.scheduled && (pod.phase == "Pending" || (pod.phase == "" && '
        'pod.containers.exists(c, c.image != "")))'
    ) in lines
    assert "     -> goto playbook pending, step scheduler" in lines
    assert (
        "  8. when container_log.no_cuda_device && !dra.pod_uses_dra && "
        'pod.containers.exists(c, c.image != "")  [if unknown: skip to the next branch]'
    ) in lines
    assert "Step signature: What do the container's log and its node say?" in lines
    assert "     -> goto playbook lost-card, step reachable" in lines
    assert "     -> conclude triage.crash-looping [high] A container keeps crashing" in lines
    assert (
        "  otherwise ask: The pod is running and its containers have not failed. What is "
        "wrong?" in lines
    )
    assert "      $ kubectl -n {{pod.namespace}} logs {{pod.name}} --previous --tail=200" in lines


def test_explain_unknown_id_suggests_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "playbooks", "explain", "triag")
    assert rc == 2
    assert err == (
        "gputriage: error: playbooks explain: no playbook 'triag' is loaded; did you "
        "mean 'triage'?\n"
    )


def test_findings_catalog_is_docs_findings_md(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "playbooks", "findings", "--shipped-only")
    assert rc == 0
    assert out == render_findings(load_playbooks(user_config=False))
    assert "### `triage.crash-looping`: A container keeps crashing" in out
    assert "kubectl -n <pod.namespace> logs <pod.name> --previous --tail=200" in out
    # One id per root cause: the merged duplicates are gone, their survivor lists every step.
    for gone in (
        "lost.driver-not-loaded",
        "lost.driver-library-mismatch",
        "pending.device-plugin-not-running",
        "pending.gpu-unhealthy",
        "create.lost-gpu-blocks-pods",
    ):
        assert f"`{gone}`" not in out
    assert "- **Concluded at:** `node-onboarding/driver`, `node-onboarding/runtime-evidence`" in out
    assert "- **Concluded at:** `create/lost-gpu`, `lost-card/reachable`" in out
    assert out == (ROOT / "docs" / "findings.md").read_text(), (
        "docs/findings.md is stale: run `gputriage playbooks findings --shipped-only > "
        "docs/findings.md`"
    )


def test_broken_user_playbook_is_a_warning_for_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "xdg" / "gputriage" / "playbooks"
    config.mkdir(parents=True)
    (config / "bad.yaml").write_text(MINE.replace("severity: low", "severity: lowish"))
    rc, out, err = run(capsys, "playbooks", "list")
    assert rc == 0 and "triage" in out and "site-pending" not in out
    assert err == (
        f"gputriage: warning: skipped playbook: {config / 'bad.yaml'}:24:15: "
        "'severity' must be one of: critical, high, medium, low, info; got 'lowish' "
        "(did you mean 'low'?)\n"
    )


# -- gputriage facts ----------------------------------------------------------------------------

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "7f3c"},
    "spec": {
        "containers": [
            {"name": "main", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        ]
    },
    "status": {"phase": "Pending"},
}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "pod.json").write_text(json.dumps(POD, indent=2))
    return b


def test_facts_text(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "facts", "--from", str(bundle))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "pod: known"
    assert '  pod.phase = "Pending"' in lines
    assert '  pod.gpu_resources = {"nvidia.com/gpu": 1}' in lines
    assert '      cites bundle/pod.json:23: "phase": "Pending"' in lines
    kernel = next(line for line in lines if line.startswith("kernel: "))
    assert kernel.startswith(
        "kernel: UNKNOWN: the node's kernel log (dmesg / journalctl -k): unavailable: "
    )
    assert "  kernel.xids = []" in lines


def test_facts_json_for_chosen_groups(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "facts", "--from", str(bundle), "--json", "pod", "kernel")
    assert rc == 0
    doc = json.loads(out)
    assert doc["target"] == {
        "namespace": "ml",
        "pod": "trainer-0",
        "uid": "7f3c",
        "node": "",
        "containers": ["main"],
    }
    assert list(doc["groups"]) == ["pod", "kernel"]
    assert doc["groups"]["pod"]["known"] is True
    assert doc["groups"]["pod"]["values"]["gpu_total"] == 1
    assert doc["groups"]["pod"]["cites"]["phase"] == ['bundle/pod.json:23: "phase": "Pending"']
    assert doc["groups"]["kernel"]["known"] is False


def test_facts_unknown_group(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "facts", "--from", str(bundle), "kernal")
    assert rc == 2
    assert err.startswith(
        "gputriage: error: facts: no fact group 'kernal'; did you mean 'kernel'? (groups: pod, "
    )


def test_validate_exit_code_through_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("format_version: 1\nid: x\n")
    result = subprocess.run(
        [sys.executable, "-m", "gputriage", "playbooks", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert f"{path}:1:1: error: the playbook is missing required key 'title'" in result.stdout
