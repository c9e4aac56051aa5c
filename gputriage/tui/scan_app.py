"""The scan TUI: GPU pods and nodes in trouble, streaming in as list pages arrive.

A thread worker runs :func:`gputriage.scan.collect.scan` and posts one :class:`ScanUpdate` per
page; the app (the only writer of state) upserts the rows it names into a ``DataTable``. Rows
are sortable (click a header, or ``s`` to cycle the sort column, ``S`` to reverse it) and
filterable (``/``: every word must appear in the row; ``esc`` clears). The panel below shows
the highlighted row's reason, its triage command and the GPU inventory of its node.

``enter`` on a row exits the app with a :class:`Selection`; :func:`run_scan_tui` then runs the
triage of that pod or node, and shows the scan again (without rescanning) when it is left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import Worker, WorkerState, get_current_worker

from gputriage.errors import GputriageError
from gputriage.evidence.model import Status
from gputriage.scan.collect import Lister, Listing, Scope, Update, scan
from gputriage.scan.fleet import Fleet
from gputriage.scan.inventory import inventory_lines
from gputriage.scan.model import NODE, RANK, Row, short_age
from gputriage.textsafe import clean_line

if TYPE_CHECKING:
    from gputriage.evidence.kube_client import KubeClient
    from gputriage.options import TriageOptions

#: (column key, title) of the table; SORTS orders rows by a column (a Row and the clock in).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "Kind"),
    ("namespace", "Namespace"),
    ("name", "Name"),
    ("node", "Node"),
    ("family", "Family"),
    ("troubles", "Troubles"),
    ("age", "Age"),
    ("reason", "Reason"),
)
SORTS: dict[str, Callable[[Row, float], tuple[Any, ...]]] = {
    "troubles": lambda r, now: (r.kind != NODE, RANK[r.troubles[0]], r.namespace, r.name),
    "age": lambda r, now: (-r.age_s(now), r.namespace, r.name),
    "family": lambda r, now: (r.family.value, r.namespace, r.name),
    "kind": lambda r, now: (r.kind, r.namespace, r.name),
    "namespace": lambda r, now: (r.namespace, r.name),
    "name": lambda r, now: (r.name, r.namespace),
    "node": lambda r, now: (r.node, r.namespace, r.name),
    "reason": lambda r, now: (r.reason, r.name),
}
SORT_CYCLE = ("troubles", "age", "family", "name", "node")
REASON_WIDTH = 90


@dataclass(frozen=True)
class Selection:
    """What the SRE chose to triage."""

    kind: str  # pod | node
    namespace: str
    name: str


@dataclass
class ScanUpdate(Message):
    """One page (or the end) of the scan, from the worker."""

    update: Update


def row_id(row: Row) -> str:
    return "/".join(row.key)


def matches(row: Row, words: list[str]) -> bool:
    """Every word (lower case) appears in the row's kind, names, family, troubles or reason."""
    hay = " ".join(
        (row.kind, row.namespace, row.name, row.node, row.family.value, *row.troubles, row.reason)
    ).lower()
    return all(w in hay for w in words)


class ScanApp(App[Selection | None]):
    CSS_PATH = Path(__file__).with_name("scan.tcss")  # absolute: subclasses live elsewhere
    TITLE = "gputriage scan"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter", "triage", "Triage", priority=True, tooltip="Triage the highlighted pod or node"
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Show only rows containing every word typed",
        ),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("s", "cycle_sort", "Sort", tooltip="Sort by the next column"),
        Binding("S", "reverse_sort", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("r", "rescan", "Rescan", tooltip="List every node and pod again"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        client: Lister,
        scope: Scope,
        *,
        context: str = "",
        fleet: Fleet | None = None,
        listings: tuple[Listing, ...] = (),
        notice: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        import time

        self.client = client
        self.scope = scope
        self.context = context
        self.clock = clock or time.time
        self.notice = notice
        #: Results of a finished scan carried over from before a triage (no rescan then).
        self.fleet = fleet if fleet is not None else Fleet(self.clock(), scope.stuck_after)
        self.listings = listings
        self.done = bool(listings)
        self.rows: dict[str, Row] = {row_id(r): r for r in self.fleet.rows.values()}
        self.shown: list[str] = []
        self.words: list[str] = []
        self.sort_by = "troubles"
        self.reverse = False
        self.nodes_seen = self.fleet.nodes_seen
        self.pods_seen = self.fleet.pods_seen

    def compose(self) -> ComposeResult:
        yield Static(id="scan-header")
        yield Input(
            placeholder="filter: words that must all appear (family, trouble, name…)",
            id="scan-filter",
        )
        yield DataTable(id="scan-rows", cursor_type="row", zebra_stripes=True)
        yield Static(id="scan-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, title in COLUMNS:
            table.add_column(title, key=key)
        self._rebuild()
        table.focus()
        if self.notice:
            self.notify(
                clean_line(self.notice),
                title="triage",
                severity="warning",
                timeout=15,
                markup=False,
            )
        if not self.done:
            self.run_scan()

    # -- the worker ------------------------------------------------------------------------

    @work(
        thread=True,
        exclusive=True,
        group="scan",
        exit_on_error=False,
        description="list nodes and pods",
    )
    def run_scan(self) -> None:
        worker = get_current_worker()
        with contextlib.closing(scan(self.client, self.scope, fleet=self.fleet)) as updates:
            for update in updates:
                if worker.is_cancelled:
                    return
                self.post_message(ScanUpdate(update))

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """The scan never raises for the API's answers; anything else is a bug to show."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.notify(
                clean_line(f"{type(error).__name__}: {error}"),
                title="the scan failed",
                severity="error",
                timeout=30,
                markup=False,
            )

    def on_scan_update(self, message: ScanUpdate) -> None:
        update = message.update
        self.nodes_seen, self.pods_seen = update.nodes_seen, update.pods_seen
        table = self.query_one(DataTable)
        for row in update.rows:
            key = row_id(row)
            known = key in self.rows
            self.rows[key] = row
            if not matches(row, self.words):
                continue
            if known and key in self.shown:
                for column, value in zip((k for k, _ in COLUMNS), self._cells(row), strict=True):
                    table.update_cell(key, column, value)
            else:
                table.add_row(*self._cells(row), key=key)
                self.shown.append(key)
        if update.listing is not None and update.listing.status is not Status.OK:
            self.notify(
                clean_line(f"{update.listing.what}: {update.listing.detail}"),
                title="cannot list",
                severity="error",
                timeout=20,
                markup=False,
            )
        if update.done:
            self.done = True
            self.listings = update.listings
            self._rebuild()
        self._header()
        self._detail()

    # -- drawing ---------------------------------------------------------------------------

    def _cells(self, row: Row) -> tuple[Text, ...]:
        """Cells as ``Text``: a DataTable parses plain strings as markup, and cluster text
        (``[link=...]``, ``[@click=app.quit]``) must show verbatim."""
        reason = clean_line(row.reason)
        if len(reason) > REASON_WIDTH:
            reason = reason[: REASON_WIDTH - 1] + "…"
        return tuple(
            Text(cell)
            for cell in (
                row.kind,
                clean_line(row.namespace),
                clean_line(row.name),
                clean_line(row.node),
                row.family.value,
                ", ".join(row.troubles),
                short_age(row.age_s(self.clock())),
                reason,
            )
        )

    def _visible(self) -> list[Row]:
        now = self.clock()
        rows = [r for r in self.rows.values() if matches(r, self.words)]
        order = SORTS[self.sort_by]
        return sorted(rows, key=lambda r: order(r, now), reverse=self.reverse)

    def _rebuild(self) -> None:
        table = self.query_one(DataTable)
        current = self.highlighted()
        table.clear()
        visible = self._visible()
        self.shown = [row_id(r) for r in visible]
        for r in visible:
            table.add_row(*self._cells(r), key=row_id(r))
        if current is not None and row_id(current) in self.shown:
            table.move_cursor(row=self.shown.index(row_id(current)))
        self._header()
        self._detail()

    def _header(self) -> None:
        where = f"namespace {self.scope.namespace}" if self.scope.namespace else "all namespaces"
        if self.scope.selector:
            where += f", pods matching {self.scope.selector}"
        pods = sum(1 for r in self.rows.values() if r.kind != NODE)
        nodes = len(self.rows) - pods
        state = "done" if self.done else "listing…"
        failed = [ls for ls in self.listings if ls.status is not Status.OK]
        if failed:
            state = f"incomplete: could not list {', '.join(ls.what for ls in failed)}"
        shown = (
            f"; showing {len(self.shown)} matching '{' '.join(self.words)}'" if (self.words) else ""
        )
        order = f"{self.sort_by}{' (reversed)' if self.reverse else ''}"
        self.query_one("#scan-header", Static).update(
            Text(
                clean_line(
                    f"{self.context or 'cluster'}: {where} | {self.nodes_seen} nodes, "
                    f"{self.pods_seen} pods listed | "
                    f"in trouble: {pods} pods, {nodes} nodes{shown} | "
                    f"sort: {order} | {state}"
                )
            )
        )

    def highlighted(self) -> Row | None:
        table = self.query_one(DataTable)
        if not self.shown or not (0 <= table.cursor_row < len(self.shown)):
            return None
        return self.rows.get(self.shown[table.cursor_row])

    def _detail(self) -> None:
        row = self.highlighted()
        panel = self.query_one("#scan-detail", Static)
        if row is None:
            panel.update("Nothing in trouble yet." if self.done else "Listing nodes and pods…")
            return
        lines = [
            f"{row.kind} {clean_line(row.namespace + '/' if row.namespace else '')}"
            f"{clean_line(row.name)}: {clean_line(row.reason)}",
            f"enter: {row.triage_command}",
        ]
        inventory = self.fleet.inventory(row.node) if row.node else None
        if inventory is not None:
            lines += [clean_line(line) for line in inventory_lines(inventory)]
        panel.update(Text("\n".join(lines)))  # cluster text: never markup

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column in SORTS:
            self.reverse = not self.reverse if column == self.sort_by else False
            self.sort_by = column
            self._rebuild()

    # -- actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # ``enter`` is a priority binding so the table does not swallow it; the filter box
        # still needs it.
        return not (action == "triage" and isinstance(self.focused, Input))

    def action_triage(self) -> None:
        row = self.highlighted()
        if row is None:
            self.notify("No row to triage.", title="triage")
            return
        self.exit(Selection(row.kind, row.namespace, row.name))

    def action_filter(self) -> None:
        box = self.query_one("#scan-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#scan-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.words = event.value.lower().split()
        self._rebuild()

    @on(Input.Submitted, "#scan-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#scan-filter", Input)
        box.value = ""
        box.display = False
        self.words = []
        self._rebuild()
        self.query_one(DataTable).focus()

    def action_cycle_sort(self) -> None:
        at = SORT_CYCLE.index(self.sort_by) if self.sort_by in SORT_CYCLE else -1
        self.sort_by = SORT_CYCLE[(at + 1) % len(SORT_CYCLE)]
        self.reverse = False
        self._rebuild()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self._rebuild()

    def action_rescan(self) -> None:
        self.fleet = Fleet(self.clock(), self.scope.stuck_after)
        self.rows, self.listings, self.done = {}, (), False
        self.nodes_seen = self.pods_seen = 0
        self._rebuild()
        self.run_scan()
        self.notify("Listing every node and pod again.", title="rescan")


def run_scan_tui(client: KubeClient, scope: Scope, options: TriageOptions) -> int:
    """The scan, then the triage of each row the SRE picks, then back to the scan."""
    fleet: Fleet | None = None
    listings: tuple[Listing, ...] = ()
    notice = ""
    while True:
        app = ScanApp(
            client,
            scope,
            context=client.config.context,
            fleet=fleet,
            listings=listings,
            notice=notice,
        )
        selection = app.run()
        if selection is None:
            return 0
        if app.done:  # keep a finished scan; an unfinished one starts over
            fleet, listings = app.fleet, app.listings
        notice = ""
        try:
            triage(selection, options)
        except GputriageError as exc:
            notice = str(exc)


def triage(selection: Selection, options: TriageOptions) -> int:
    """Run the triage TUI of a pod (``gputriage POD -n NS``) or node (``gputriage node``)."""
    from dataclasses import replace

    from gputriage.pipeline import node_triage, pod_triage
    from gputriage.tui.launch import run_triage

    if selection.kind == NODE:
        live = replace(options, bundle=None)
        return run_triage(node_triage(selection.name, live), live)
    live = replace(
        options, bundle=None, cluster=replace(options.cluster, namespace=selection.namespace)
    )
    return run_triage(pod_triage(selection.name, live), live)
