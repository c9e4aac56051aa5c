"""The main screen: header, walk path, current step, fix, evidence tabs, source status, footer.

The screen holds no state of its own beyond what it was handed: the app assigns ``view`` and
the screen passes it to every widget. Key bindings route to app actions (``app.follow``...),
because the app owns the walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen

from gputriage.tui.view import TriageView
from gputriage.tui.widgets.fix_panel import FixPanel
from gputriage.tui.widgets.step_panel import StepPanel
from gputriage.tui.widgets.target_header import TargetHeader, header_content
from gputriage.tui.widgets.walk_path import WalkPath

if TYPE_CHECKING:
    from gputriage.tui.widgets.evidence_tabs import EvidenceTabs

#: k9s-familiar keys. The help screen and the command palette are generated from this list;
#: the footer shows them in this order, so the ones an SRE needs at 80 columns come first.
TRIAGE_BINDINGS: list[BindingType] = [
    Binding("enter", "app.follow", "Follow", priority=True, tooltip="Take the proposed branch"),
    Binding("o", "app.override", "Override", tooltip="Take another branch at this step"),
    Binding(
        "b,escape",
        "app.go_back",
        "Back",
        key_display="b",
        tooltip="Go back one step, undoing the override made there (esc also closes the filter)",
    ),
    Binding(
        "c",
        "app.copy",
        "Copy",
        tooltip="Copy the highlighted fix command (asks first when it changes state)",
    ),
    Binding("e", "app.export", "Export", tooltip="Write the incident summary (.md and .json)"),
    Binding(
        "f",
        "app.zoom('fix')",
        "Fix",
        tooltip="Every fix command on the whole screen (again or esc to return)",
    ),
    Binding(
        "v",
        "app.view_row",
        "View",
        tooltip="Read the highlighted evidence row whole (enter or space on a row too)",
    ),
    Binding(
        "1",
        "app.tab_number(1)",
        "Tabs",
        key_display="1-9",
        tooltip="Evidence tab by number, or the next one ([ the previous one)",
    ),
    Binding("question_mark", "app.help", "Help", key_display="?", tooltip="Keys and legend"),
    Binding("q", "app.quit", "Quit", tooltip="Leave gputriage"),
    Binding("a", "app.answer", "Answer", tooltip="Answer the question the walk waits on"),
    Binding(
        "z",
        "app.zoom('step')",
        "Zoom",
        tooltip="The step or verdict on the whole screen (again or esc to return)",
    ),
    Binding(
        "right_square_bracket",
        "app.next_tab(1)",
        "Next tab",
        key_display="]",
        show=False,
        tooltip="The evidence tab to the right",
    ),
    Binding(
        "x",
        "app.toggle_differential",
        "Expand",
        tooltip="Show or hide the evidence behind the other findings at the verdict",
    ),
    Binding("n", "app.note", "Note", tooltip="Write a note (saved at once)"),
    Binding(
        "r",
        "app.refresh",
        "Refresh",
        tooltip="Collect again: node-side evidence when live (the watch follows the rest), "
        "every source for a bundle",
    ),
    Binding(
        "slash",
        "app.filter",
        "Filter",
        key_display="/",
        tooltip="Filter the rows of the evidence tabs",
    ),
    Binding(
        "left_square_bracket",
        "app.next_tab(-1)",
        "Previous tab",
        key_display="[",
        show=False,
        tooltip="The evidence tab to the left",
    ),
    Binding(
        "C",
        "app.copy_read_only",
        "Copy read-only",
        show=False,
        tooltip="Copy every read-only command of the fix",
    ),
    Binding(
        "N",
        "app.triage_node",
        "Triage node",
        show=False,
        tooltip="Walk the node this verdict blames (gputriage node)",
    ),
    Binding(
        "colon", "app.command_palette", "Palette", key_display=":", tooltip="Every action by name"
    ),
    Binding("t", "app.next_theme", "Next theme", show=False, tooltip="Switch to the next theme"),
]

#: ``1``..``9``: the evidence tabs by position (shown as one "1-9" entry in footer and help).
TAB_NUMBER_BINDINGS: list[BindingType] = [
    Binding(str(i), f"app.tab_number({i})", f"Tab {i}", show=False) for i in range(2, 10)
]


class TriageScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [*TRIAGE_BINDINGS, *TAB_NUMBER_BINDINGS]

    view: reactive[TriageView | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        # Built with its text when the app already handed down a view: the pod header is in
        # the very first frame rather than one refresh later.
        yield TargetHeader(header_content(self.view) if self.view is not None else "", id="header")
        with Horizontal(id="top"):
            yield WalkPath(id="walk")
            with Vertical(id="detail"):
                yield StepPanel(id="step")
                yield FixPanel(id="fix")
        # The evidence tabs (nine tables), the source status bar and the footer follow once
        # the first frame is out (``_mount_rest``): the pod header, the walk and the verdict's
        # skeleton paint first.

    #: How long after mounting the rest of the screen follows: past the first frame.
    REST_DELAY = 1 / 30
    #: Set once the rest of the screen is mounted (the app's ``settled`` waits for it).
    rest_mounted = False

    #: Below this size the compact layout applies (80x24 must show verdict, fix and keys).
    COMPACT_WIDTH, COMPACT_HEIGHT = 100, 32

    def on_resize(self) -> None:
        self.set_class(
            self.size.width < self.COMPACT_WIDTH or self.size.height < self.COMPACT_HEIGHT,
            "-compact",
        )

    def on_mount(self) -> None:
        for selector, title in (("#walk", "Walk"), ("#step", "Step"), ("#fix", "Fix")):
            self.query_one(selector).border_title = title
        self.query_one(WalkPath).focus()
        # The app handed the first view down before this screen was mounted: show it now, so
        # the first frame already has the pod header and the verdict's skeleton.
        self.watch_view(self.view)
        self.set_timer(self.REST_DELAY, self._mount_rest)

    async def _mount_rest(self) -> None:
        # Imported here too: the tables' code loads after the first frame, not before it.
        from textual.widgets import Footer

        from gputriage.tui.widgets.evidence_tabs import EvidenceTabs
        from gputriage.tui.widgets.source_status import SourceStatus

        await self.mount(
            EvidenceTabs(id="evidence"),
            SourceStatus(id="sources"),
            Footer(show_command_palette=False, compact=True),
        )
        self.rest_mounted = True
        self.watch_view(self.view)
        self.refresh_bindings()  # the footer lists the keys once it is there

    def watch_view(self, view: TriageView | None) -> None:
        if view is None or not self.is_mounted:
            return
        self.query_one(TargetHeader).view = view
        self.query_one(WalkPath).view = view
        self.query_one(StepPanel).view = view
        self.query_one(FixPanel).view = view
        if not self.rest_mounted:  # the tabs and the status bar follow the first frame
            return
        from gputriage.tui.widgets.evidence_tabs import EvidenceTabs
        from gputriage.tui.widgets.source_status import SourceStatus

        self.query_one(EvidenceTabs).view = view
        self.query_one(SourceStatus).view = view

    def evidence_tabs(self) -> EvidenceTabs | None:
        """The evidence tabs, or None in the moment before they are mounted."""
        if not self.rest_mounted:
            return None
        from gputriage.tui.widgets.evidence_tabs import EvidenceTabs

        return self.query_one(EvidenceTabs)
