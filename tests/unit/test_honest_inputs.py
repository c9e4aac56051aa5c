"""Inputs are taken at their word: a pod the bundle does not hold is an error, not a silent
triage of another pod; with no kubeconfig the error says how to go on without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputriage.cli import main
from gputriage.scenarios import scenario_path

BUNDLE = str(scenario_path("lost-xid79"))  # holds ml-prod/llama-pretrain-worker-3


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ("other-pod", "--from", BUNDLE),
        ("llama-pretrain-worker-3", "-n", "default", "--from", BUNDLE),
        ("pod/other-pod", "-n", "ml-prod", "--from", BUNDLE),
    ],
)
def test_pod_or_namespace_not_in_the_bundle_is_an_error_naming_what_it_holds(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    rc, out, err = run(capsys, *argv, "--report", "md")
    assert rc == 2 and out == ""
    assert "holds pod ml-prod/llama-pretrain-worker-3" in err
    assert "gputriage llama-pretrain-worker-3 -n ml-prod --from" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("llama-pretrain-worker-3", "--from", BUNDLE),
        ("llama-pretrain-worker-3", "-n", "ml-prod", "--from", BUNDLE),
        ("pytorchjob/llama-pretrain", "--from", BUNDLE),  # an owner: its pod is the bundle's
    ],
)
def test_the_bundles_own_pod_is_triaged(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    rc, out, _ = run(capsys, *argv, "--report", "text")
    assert rc == 0
    assert out.startswith("GPU incident summary: ml-prod/llama-pretrain-worker-3")


def test_no_kubeconfig_points_at_demo_and_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-config"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    rc, out, err = run(capsys, "trainer-0", "--report", "json")
    assert rc == 2 and out == ""
    assert "no kubeconfig" in err and "gputriage demo" in err and "--from DIR" in err
