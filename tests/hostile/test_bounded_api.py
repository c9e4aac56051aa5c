"""A hostile Kubernetes API cannot stall gputriage, flood its memory or drive the terminal.

Against the local HTTPS fake API (tests/kubeapi) in its hostile modes: a list whose
``continue`` never ends, a chunked body that never ends, a list far over the size cap, and
error bodies full of terminal escapes. The client stops each with a named reason, within its
deadline, and a headless run against all of them at once exits promptly with its report.
Wall-clock bounds here are generous ("does not hang"), not speed goals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputriage.evidence.kube_client import KubeClient, load_config
from gputriage.evidence.kube_errors import failure_status
from gputriage.evidence.model import Status
from gputriage.pipeline import EXIT_FINDING, EXIT_UNDETERMINED, EXIT_WAITING
from tests.conftest import ROOT
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import gpu_cluster

EVENTS = "/api/v1/namespaces/ml/events"


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    with KubeAPI(gpu_cluster()) as server:
        yield server
        assert not server.mutations()


def client_for(api: KubeAPI, tmp_path: Path, timeout: float = 2.0) -> KubeClient:
    config = load_config(str(api.write_kubeconfig(tmp_path / "kubeconfig")), None)
    return KubeClient(config, timeout=timeout)


def test_endless_pagination_stops_at_the_page_bound(api: KubeAPI, tmp_path: Path) -> None:
    api.endless_pagination("events")
    client = client_for(api, tmp_path)
    client.max_pages = 40
    reply, data = client.list_all(EVENTS)
    assert data is None
    status, detail = failure_status(reply)
    assert status is Status.ERROR
    assert detail.startswith("the list did not end after 40 pages of 500")
    assert len([r for r in api.requests if r.path == EVENTS]) == 40


def test_endless_pagination_stops_at_the_list_deadline(api: KubeAPI, tmp_path: Path) -> None:
    api.endless_pagination("events")
    api.delay("/events$", 0.05)
    client = client_for(api, tmp_path)
    client.list_deadline = 1.0
    started = time.monotonic()
    reply, data = client.list_all(EVENTS)
    assert data is None and reply.timed_out
    assert time.monotonic() - started < 5.0
    assert failure_status(reply)[0] is Status.TIMEOUT


def test_an_endless_body_ends_at_the_call_timeout(api: KubeAPI, tmp_path: Path) -> None:
    api.endless_body("events$")
    client = client_for(api, tmp_path, timeout=1.0)
    started = time.monotonic()
    reply = client.get(EVENTS)
    elapsed = time.monotonic() - started
    assert reply.timed_out and not reply.ok, reply
    assert "did not finish within 1 s" in reply.error
    assert elapsed < 4.0, elapsed


def test_close_wakes_a_reader_blocked_on_an_endless_body(api: KubeAPI, tmp_path: Path) -> None:
    api.endless_body("events$")
    client = client_for(api, tmp_path, timeout=60.0)
    replies = []
    reader = threading.Thread(target=lambda: replies.append(client.get(EVENTS)))
    reader.start()
    time.sleep(0.5)
    started = time.monotonic()
    client.close()
    reader.join(timeout=5)
    assert not reader.is_alive(), "close() did not end the read"
    assert time.monotonic() - started < 2.0
    assert replies[0].error.startswith("the client was closed")


def test_a_huge_reply_is_not_read_past_the_cap(api: KubeAPI, tmp_path: Path) -> None:
    size = api.huge_list("events$", 8 << 20)
    client = client_for(api, tmp_path)
    client.max_response_bytes = 1 << 20
    reply, data = client.list_all(EVENTS)
    assert size > 7 << 20 and data is None
    assert failure_status(reply) == (
        Status.ERROR,
        f"the reply is larger than 1 MiB: not read further (GET {EVENTS})",
    )


def test_a_huge_list_stops_at_the_list_cap(api: KubeAPI, tmp_path: Path) -> None:
    api.huge_list("events$", 3 << 20, continue_token="more")  # 3 MiB pages, forever
    client = client_for(api, tmp_path)
    client.max_list_bytes = 4 << 20
    reply, data = client.list_all(EVENTS)
    assert data is None
    assert reply.error == ("the list is larger than 4 MiB after 2 pages: not read further")


ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b6n"


def run_cli(*argv: str, timeout: float) -> tuple[subprocess.CompletedProcess[bytes], float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECACHEDIR": "/nonexistent"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", *argv],
        capture_output=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    return done, time.monotonic() - started


def test_api_error_bodies_cannot_drive_the_terminal(api: KubeAPI, tmp_path: Path) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": f'pods "trainer-0" is forbidden {ESCAPES} token=tokSECRET99',
    }
    api.fail("/pods/trainer-0$", 403, json.dumps(status))
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    done, _ = run_cli(
        "trainer-0",
        "-n",
        "ml",
        "--kubeconfig",
        str(config),
        "--ssh",
        "off",
        "--report",
        "md",
        timeout=60,
    )
    assert done.returncode != 0
    err = done.stderr.decode()
    assert "forbidden" in err and "pwned" not in err, err
    assert not [b for b in done.stderr + done.stdout if b < 0x20 and b not in (9, 10)]
    assert b"\x9b" not in done.stderr and "tokSECRET99" not in err


def test_headless_run_against_every_hostile_mode_exits_promptly(
    api: KubeAPI, tmp_path: Path
) -> None:
    """Endless pagination (nodes), an endless body (events), a huge list (node pods): the
    report is written and the process exits, no thread left reading."""
    api.endless_pagination("^nodes$")
    api.endless_body("/namespaces/ml/events$")
    api.huge_list("^/api/v1/pods$", 80 << 20, kind="PodList")
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    out = tmp_path / "summary.json"
    overrides = [f"--node-address={n}=127.0.0.1" for _, n in api.cluster.keys("", "nodes")]
    done, elapsed = run_cli(
        "trainer-0",
        "-n",
        "ml",
        "--kubeconfig",
        str(config),
        "--ssh",
        "off",
        "--request-timeout",
        "2",
        "--report",
        "json",
        "-o",
        str(out),
        *overrides,
        timeout=120,
    )
    summary = json.loads(out.read_text())
    sources = {s["key"]: s for s in summary["sources"]}
    assert sources["events"]["status"] == "timeout", sources["events"]
    assert sources["nodes"]["status"] in ("error", "timeout"), sources["nodes"]
    # 2 s per call, lists bounded by 3 calls' time: well inside a minute, measured ~7 s.
    assert elapsed < 60, (elapsed, done.stderr.decode()[-2000:])
    assert done.returncode in (EXIT_FINDING, EXIT_UNDETERMINED, EXIT_WAITING), done.stderr.decode()[
        -2000:
    ]


def test_scan_stops_an_endless_pod_list(
    api: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputriage.scan import collect as scan_collect
    from gputriage.scan.collect import Scope, scan

    monkeypatch.setattr(scan_collect, "MAX_PAGES", 30)
    api.endless_pagination("^pods$")
    client = client_for(api, tmp_path)
    updates = list(scan(client, Scope(namespace="")))
    pods = next(ls for ls in updates[-1].listings if ls.what == "pods")
    assert pods.status is Status.ERROR
    assert pods.detail.startswith("the list did not end after 30 pages of 500")
    assert len([r for r in api.requests if r.path == "/api/v1/pods"]) == 30
