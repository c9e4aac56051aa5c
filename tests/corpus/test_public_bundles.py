"""The public real-incident bundles, run the way a user runs them: the CLI, from the router.

``../shared/corpus/k8s/bundles`` holds evidence bundles hand-assembled from public incident
reports with ``EXPECTED.yaml``. Each bundle goes through ``gputriage POD -n NS --from DIR
--report json`` in a fresh process (a target without a pod is triaged as ``KIND/NAME``), and
the first finding is held to the expectation: an evaluable case names an acceptable root cause;
a case the evidence cannot decide ends undetermined or at a question, never a guess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.corpus


def _bundles(corpus_dir: Path) -> Path:
    root = corpus_dir / "k8s" / "bundles"
    if not (root / "EXPECTED.yaml").is_file():
        pytest.skip("no public bundles in this corpus")
    return root


def _expected(corpus_dir: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load((_bundles(corpus_dir) / "EXPECTED.yaml").read_text())
    return list(data)


def _target(bundle: Path) -> list[str]:
    t = json.loads((bundle / "meta.json").read_text()).get("target", {})
    pod = t.get("pod") or (
        f"{t['owner']['kind'].lower()}/{t['owner']['name']}" if t.get("owner") else "unknown"
    )
    return [pod, "-n", t.get("namespace", "default")]


def _first_finding(bundle: Path) -> tuple[str | None, dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputriage",
            *_target(bundle),
            "--from",
            str(bundle),
            "--report",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode in (0, 3, 4), f"{bundle.name}: exit {proc.returncode}: {proc.stderr}"
    report = json.loads(proc.stdout)
    findings = report.get("findings") or [{}]
    return findings[0].get("id"), report


def test_every_public_bundle(corpus_dir: Path) -> None:
    root = _bundles(corpus_dir)
    wrong: list[str] = []
    for case in _expected(corpus_dir):
        first, report = _first_finding(root / case["case"])
        if case.get("evaluable", True):
            if first not in case["acceptable_first_findings"]:
                wrong.append(f"{case['case']}: got {first}")
            else:
                assert report["verdict"]["confidence"] in ("certain", "likely", "possible")
        elif first not in (None, "undetermined"):
            wrong.append(f"{case['case']} (not evaluable): guessed {first}")
    assert not wrong, "\n".join(wrong)


def test_differential_is_in_the_report(corpus_dir: Path) -> None:
    """The verdict comes with what else fits and what was ruled out, each with its reason."""
    root = _bundles(corpus_dir)
    case = next(c for c in _expected(corpus_dir) if c["case"].startswith("pending-007"))
    first, report = _first_finding(root / case["case"])
    assert first == "pending.insufficient-gpu"
    ruled = {a["id"]: a for a in report["differential"]["ruled_out"]}
    # the node advertises its GPU: a plugin registered it, whatever the partial pod list says
    assert "node.device-plugin-not-running" in ruled
    assert "allocatable" in ruled["node.device-plugin-not-running"]["because"]
    assert all(a["because"] for a in report["differential"]["consistent"])
