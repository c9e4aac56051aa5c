"""The scan TUI (Pilot) against the HTTPS test API with the generated 2,000-node / 20,000-pod
cluster: rows stream in while pages arrive, the table holds exactly the planted troubles, sort
and filter work, the detail shows the node's GPU inventory, and enter picks a row to triage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from gputriage.evidence.kube_client import KubeClient, load_config
from gputriage.scan.collect import Scope
from gputriage.scan.model import FAMILY_OF, Family, Trouble
from gputriage.tui.scan_app import ScanApp, ScanUpdate, Selection
from tests.kubeapi import KubeAPI
from tests.kubeapi.generate import Planted, generate

pytestmark = pytest.mark.integration


class RecordingScanApp(ScanApp):
    """The real app, noting how many rows it showed after each page."""

    seen: list[tuple[bool, int]]

    def on_scan_update(self, message: ScanUpdate) -> None:
        super().on_scan_update(message)
        self.seen.append((message.update.done, len(self.rows)))


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KubeAPI, Planted, KubeClient]]:
    cluster, planted = generate(2000, 20000, seed=11, now=time.time())
    with KubeAPI(cluster) as api:
        config = api.write_kubeconfig(Path(tmp_path_factory.mktemp("kc")) / "kubeconfig")
        client = KubeClient(load_config(str(config)), timeout=30)
        yield api, planted, client
        client.close()
        assert not api.mutations()


async def test_scan_tui_streams_sorts_filters_and_picks(
    setup: tuple[KubeAPI, Planted, KubeClient],
) -> None:
    api, planted, client = setup
    api.delay(r"^/api/v1/pods$", 0.01)  # let the UI breathe between pages
    now = time.time()
    app = RecordingScanApp(client, Scope(namespace=""), context="test", clock=lambda: now)
    app.seen = []
    async with app.run_test(size=(180, 50)) as pilot:
        deadline = time.monotonic() + 90
        while not app.done and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert app.done, "the scan did not finish"
        await pilot.pause()

        # rows arrived while the lists were still running
        assert len(app.seen) > 20
        assert any(not done and rows > 0 for done, rows in app.seen)
        pods = {
            (r.namespace, r.name): frozenset(r.troubles)
            for r in app.rows.values()
            if r.kind == "pod"
        }
        nodes = {r.name: frozenset(r.troubles) for r in app.rows.values() if r.kind == "node"}
        assert pods == planted.pods and nodes == planted.nodes
        table = app.query_one(DataTable)
        assert table.row_count == len(planted.pods) + len(planted.nodes) == 36
        header = str(app.query_one("#scan-header", Static).render())
        assert "2000 nodes" in header and "in trouble: 19 pods, 17 nodes" in header
        assert header.endswith("done")

        # sort: the next column is age, oldest first
        await pilot.press("s")
        assert app.sort_by == "age"
        ages = [app.rows[k].age_s(now) for k in app.shown]
        assert ages == sorted(ages, reverse=True) and ages[0] > 86400 and ages[-1] == -1
        await pilot.press("S")
        assert [app.rows[k].age_s(now) for k in app.shown] == sorted(ages)

        # filter: only the OOM family is left
        await pilot.press("slash", *"oom", "enter")
        oom = {
            k
            for k, t in planted.pods.items()
            if FAMILY_OF[Trouble(sorted(t, key=list(Trouble).index)[0])] is Family.OOM
        }
        assert table.row_count == len(oom) == 7
        assert {(app.rows[k].namespace, app.rows[k].name) for k in app.shown} == oom
        await pilot.press("escape")
        assert table.row_count == 36

        # the lost-card node: its inventory below, enter picks it
        table.move_cursor(row=app.shown.index("node//gpu-node-1"))
        await pilot.pause()
        detail = str(app.query_one("#scan-detail", Static).render())
        assert "node gpu-node-1: nvidia.com/gpu: allocatable 7 of capacity 8" in detail
        assert "enter: gputriage node gpu-node-1" in detail
        assert "gpu-node-1: NVIDIA-H100-80GB-HBM3, 80 GiB; label count 8, advertised 8" in detail
        await pilot.press("enter")
    assert app.return_value == Selection("node", "", "gpu-node-1")
    assert {r.method for r in api.requests} == {"GET"}


async def test_rescan_and_pick_a_pod(tmp_path: Path) -> None:
    cluster, planted = generate(60, 300, seed=5, now=time.time())
    with KubeAPI(cluster) as api:
        client = KubeClient(load_config(str(api.write_kubeconfig(tmp_path / "kubeconfig"))))
        app = ScanApp(client, Scope(namespace=""), context="test")
        try:
            async with app.run_test(size=(180, 50)) as pilot:
                for _ in range(2):
                    deadline = time.monotonic() + 30
                    while not app.done and time.monotonic() < deadline:
                        await pilot.pause(0.05)
                    assert app.done and len(app.rows) == len(planted.pods) + len(planted.nodes)
                    lists = [r for r in api.requests if r.path == "/api/v1/nodes"]
                    if len(lists) == 1:
                        await pilot.press("r")
                assert len(lists) == 2  # the rescan listed again
                await pilot.press("slash", *"crash-loop (error)", "enter")
                assert len(app.shown) == 2
                await pilot.press("enter")
        finally:
            client.close()
    chosen = app.return_value
    assert chosen is not None and chosen.kind == "pod"
    assert (chosen.namespace, chosen.name) in planted.pods
    assert planted.pods[(chosen.namespace, chosen.name)] == frozenset({"crash-loop"})
