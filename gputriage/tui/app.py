"""TriageApp: owns the walk's state, runs the workers, routes keys to actions. Thin by design.

State has one writer, this app. One async worker consumes ``session.stream()`` and posts an
:class:`EvidenceArrived` per piece of evidence; one thread worker loads and compiles the
playbooks (``cel`` costs ~0.35 s to import, so never on the way to the first paint). On every
change the app rebuilds facts and re-walks (pure, milliseconds), then hands a fresh
:class:`TriageView` down to the screen. Workers never touch widgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import App
from textual.worker import Worker, WorkerState

from gputriage.errors import GputriageError
from gputriage.evidence.model import EvidenceSet, Key
from gputriage.facts.model import FactSet
from gputriage.playbook.transcript import Choice, Transcript, Visit
from gputriage.session import Session
from gputriage.textsafe import clean, inert
from gputriage.tui import walkstate
from gputriage.tui.messages import (
    CollectionFinished,
    CollectionStarted,
    EvidenceArrived,
    EvidenceChanged,
    PlaybooksFailed,
    PlaybooksLoaded,
)
from gputriage.tui.screens.triage import TriageScreen
from gputriage.tui.view import TriageView
from gputriage.tui.walkstate import Walker
from gputriage.tui.widgets.fix_panel import FixPanel
from gputriage.tui.widgets.step_panel import StepPanel
from gputriage.tui.widgets.walk_path import WalkPath

if TYPE_CHECKING:
    from textual.command import Provider

    from gputriage.report.notes import NotesStore
    from gputriage.tui.clipboard import CopyResult
    from gputriage.tui.tables import RowDetail
    from gputriage.tui.widgets.evidence_tabs import EvidenceTabs
    from gputriage.tui.widgets.source_status import SourceStatus


def triage_commands() -> type[Provider]:
    """The palette's provider, imported when the palette first opens (not on the way to the
    first paint)."""
    from gputriage.tui.palette import TriageCommands

    return TriageCommands


#: Seconds the export toast stays (toasts sit top right, over the step panel, never over the
#: evidence table: app.tcss).
EXPORT_TOAST_S = 4.0

#: Playbook problems listed in the start-up warning; the rest are counted.
MAX_PROBLEMS_SHOWN = 3

#: Loads the playbooks and returns the bound engine plus any problems worth a warning.
WalkerFactory = Callable[[], tuple[Walker, tuple[str, ...]]]


def playbook_walker(
    extra_dirs: Sequence[Path] = (), entry: str | None = None
) -> tuple[Walker, tuple[str, ...]]:
    """The real engine over the shipped playbooks plus ``extra_dirs`` (run in a thread),
    entering at ``entry`` (None: the playbooks' routes choose)."""
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks

    playbooks = load_playbooks(list(extra_dirs))
    problems = tuple(str(p) for p in playbooks.problems)
    return partial(walk, playbooks, entry=entry), problems


#: Widgets that keep ``enter`` for themselves: text boxes, and evidence tables (it opens the
#: row). Matched by class name: none of them exists before the first frame, and importing
#: their modules on the way to it would delay it.
_KEEP_ENTER = frozenset({"Input", "TextArea", "EvidenceTable"})


def _keeps_enter(widget: object) -> bool:
    return any(cls.__name__ in _KEEP_ENTER for cls in type(widget).__mro__)


def _session_target(session: Session) -> str:
    """``ns/pod`` when the session knows it before collecting (a live session does)."""
    namespace, pod = getattr(session, "namespace", ""), getattr(session, "pod", "")
    return f"{namespace}/{pod}" if isinstance(pod, str) and pod else ""


class TriageApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputriage"
    COMMANDS: ClassVar = App.COMMANDS | {triage_commands}

    def __init__(
        self,
        session: Session,
        *,
        walker_factory: WalkerFactory | None = None,
        playbook_dirs: Sequence[Path] = (),
        facts_builder: Callable[[EvidenceSet], FactSet] | None = None,
        entry: str | None = None,
        notes_path: Path | None = None,
        extra_notes_file: Path | None = None,
        export_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        clipboard_file: Path | None = None,
        target_hint: str = "",
    ) -> None:
        super().__init__()
        self.session = session
        self.walker_factory = walker_factory or partial(
            playbook_walker, tuple(playbook_dirs), entry
        )
        #: Evidence -> facts (a node walk names the node as its target); None: build_facts.
        self.facts_builder = facts_builder
        self.notes_path = notes_path
        self.extra_notes_file = extra_notes_file  # --notes FILE: read-only, exported too
        self.export_dir = export_dir or Path.cwd()
        self.clock = clock
        #: "ns/pod" as asked for: the header shows it in the first frame, before any evidence.
        self.target_hint = target_hint or _session_target(session)
        self.clipboard_file = clipboard_file  # the copy fallback; default under XDG_STATE_HOME
        #: The differential (also consistent / ruled out) shown with its evidence (``x``).
        self.differential_open = False
        self.evidence = EvidenceSet()
        self.pending: frozenset[Key] = frozenset()
        self.facts: FactSet | None = None
        self.walker: Walker | None = None
        self.walk_status = "loading playbooks…"
        self.transcript: Transcript | None = None
        self.answers: dict[str, str] = {}
        self.overrides: dict[str, str] = {}
        self.cursor = 0
        self.exported: tuple[Path, ...] = ()
        self.triage = TriageScreen()
        self._notes: NotesStore | None = None
        self._rebuild_scheduled = False
        #: Set by ``triage_node``: the node to walk (``gputriage node``) once this app exits.
        self.next_node = ""
        #: Keys a watch updated since launch, with when (shown in the status bar).
        self.changed: dict[Key, float] = {}
        self._stop_watch: Callable[[], None] | None = None
        #: Where the last ``c`` put its text (for the toast and the tests).
        self.last_copy: CopyResult | None = None

    # -- lifecycle and workers ------------------------------------------------------------

    def on_load(self) -> None:
        from gputriage.tui.theme import THEMES

        for theme in THEMES:
            self.register_theme(theme)

    def on_mount(self) -> None:
        self.theme = "gputriage"
        self.push_screen(self.triage)
        self._push()
        # Start the workers once the first frame is out: their threads (bundle reading, the
        # cel import) would otherwise compete with the first paint for the GIL.
        self.call_after_refresh(self._start)

    def _start(self) -> None:
        self.collect()
        self.load_playbooks()
        # A live session says how it chose the pod when given a workload ("deploy/x: 3 pods").
        notice = getattr(self.session, "notice", "")
        if notice:
            self.notify(clean(str(notice)), title="target", timeout=15, markup=False)

    @work(
        exclusive=True,
        group="evidence",
        exit_on_error=False,
        description="collect evidence from the session",
    )
    async def collect(self) -> None:
        self.post_message(CollectionStarted(tuple(self.session.keys())))
        async for evidence in self.session.stream():
            self.post_message(EvidenceArrived(evidence))
        self.post_message(CollectionFinished())

    @work(
        exclusive=True,
        group="evidence",
        exit_on_error=False,
        description="collect node-side evidence again",
    )
    async def refresh_node_side(self, keys: tuple[Key, ...]) -> None:
        """Only ``keys`` land; the rest of the stream (the pod, events, node that the watch
        keeps live) is left as the watch has it. Stops reading once every key landed."""
        self.post_message(CollectionStarted(keys))
        remaining = set(keys)
        # A live session can collect just these keys; any other streams everything.
        stream_only = getattr(self.session, "stream_only", None)
        stream = stream_only(keys) if callable(stream_only) else self.session.stream()
        try:
            async for evidence in stream:
                if evidence.key in remaining:
                    remaining.discard(evidence.key)
                    self.post_message(EvidenceArrived(evidence))
                    if not remaining:
                        break
        finally:
            close = getattr(stream, "aclose", None)  # an async generator: end it now
            if close is not None:
                await close()
        self.post_message(CollectionFinished())

    @work(
        thread=True,
        exclusive=True,
        group="playbooks",
        exit_on_error=False,
        description="load and compile the playbooks",
    )
    def load_playbooks(self) -> None:
        walker, problems = self.walker_factory()
        self.post_message(PlaybooksLoaded(walker, problems))

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """Every background failure ends here, once (harlequin's funnel)."""
        if event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        if event.worker.group == "playbooks":
            self.post_message(PlaybooksFailed(f"{type(error).__name__}: {error}"))
            return
        from gputriage.tui.screens.error import ErrorScreen

        self.pending = frozenset()
        self._push()
        if isinstance(error, GputriageError):
            self.push_screen(ErrorScreen(error.title or "cannot collect evidence", error.message))
        else:
            self.push_screen(
                ErrorScreen("collecting evidence failed", f"{type(error).__name__}: {error}")
            )

    # -- messages from workers -------------------------------------------------------------

    def on_collection_started(self, message: CollectionStarted) -> None:
        self.pending = frozenset(message.keys)
        self._push()

    def on_evidence_arrived(self, message: EvidenceArrived) -> None:
        self.evidence = self.evidence.with_evidence(message.evidence)
        self.pending = self.pending - {message.evidence.key}
        self._schedule_rebuild()

    def on_collection_finished(self, message: CollectionFinished) -> None:
        self.pending = frozenset()
        self._schedule_rebuild()
        self._start_watch()

    def _start_watch(self) -> None:
        """Once everything was collected, follow the pod, its events and its node live
        (sessions that can: a live cluster; a bundle does not change)."""
        watch = getattr(self.session, "watch", None)
        pod = self.evidence.get_or_missing(Key.POD)
        if self._stop_watch is not None or not callable(watch) or not pod.ok:
            return
        self._stop_watch = watch(lambda ev: self.post_message(EvidenceChanged(ev)), pod)

    def on_evidence_changed(self, message: EvidenceChanged) -> None:
        self.changed[message.evidence.key] = self.clock()
        self.evidence = self.evidence.with_evidence(message.evidence)
        self._schedule_rebuild()

    def on_unmount(self) -> None:
        if self._stop_watch is not None:
            self._stop_watch()

    def on_playbooks_loaded(self, message: PlaybooksLoaded) -> None:
        self.walker = message.walker
        self.walk_status = "" if self.facts is not None else "waiting for the pod…"
        if message.problems:
            shown = [
                *message.problems[:MAX_PROBLEMS_SHOWN],
                *(
                    [f"… and {len(message.problems) - MAX_PROBLEMS_SHOWN} more"]
                    if len(message.problems) > MAX_PROBLEMS_SHOWN
                    else []
                ),
                "`gputriage playbooks validate` lists them all.",
            ]
            self.notify("\n".join(shown), title="playbooks skipped", severity="warning", timeout=15)
        self._rewalk()
        self._push()

    def on_playbooks_failed(self, message: PlaybooksFailed) -> None:
        self.walk_status = f"the playbooks could not be loaded: {message.error}"
        self.notify(self.walk_status, title="no walk", severity="error", timeout=15)
        self._push()

    # -- state changes ---------------------------------------------------------------------

    #: While sources are still out, the screen is rebuilt at most this often: each rebuild
    #: builds the facts, walks and redraws every panel, and 20-odd keys land one by one.
    REBUILD_INTERVAL = 0.1

    def _schedule_rebuild(self) -> None:
        # Evidence often lands in bursts (a bundle yields everything at once): rebuild once
        # after the burst's messages are handled, not once per message. The first facts
        # (the pod's) and the last key go out at once; in between, once per interval.
        throttled = self.facts is not None and bool(self.pending)
        if throttled and self._rebuild_scheduled:
            return
        self._rebuild_scheduled = True
        if throttled:
            self.set_timer(self.REBUILD_INTERVAL, self._rebuild_if_due)
        else:
            self.call_later(self._rebuild_if_due)

    def _rebuild_if_due(self) -> None:
        if self._rebuild_scheduled:  # not done meanwhile (the last key landed)
            self._rebuild()

    def _rebuild(self) -> None:
        from gputriage.facts.build import build_facts

        builder = self.facts_builder or build_facts
        self._rebuild_scheduled = False
        self.facts = builder(self.evidence)
        if self.walker is not None:
            self.walk_status = ""
        self._rewalk()
        self._push()

    def _rewalk(self) -> None:
        if self.walker is None or self.facts is None:
            return
        try:
            self.transcript = self.walker(self.facts, dict(self.answers), dict(self.overrides))
        except Exception as exc:  # an engine bug must not take the evidence panels down
            self.transcript = None
            self.walk_status = f"the playbook engine failed: {type(exc).__name__}: {exc}"
        self.cursor = walkstate.clamp(self.cursor, self.transcript)

    def _push(self) -> None:
        self.triage.view = TriageView(
            session=self.session.description,
            evidence=self.evidence,
            pending=self.pending,
            facts=self.facts,
            transcript=self.transcript,
            cursor=self.cursor,
            walk_status=self.walk_status,
            differential_open=self.differential_open,
            target_hint=self.target_hint,
            changed=dict(self.changed),
            live=self._stop_watch is not None,
        )

    def _move(self, cursor: int) -> None:
        self.cursor = walkstate.clamp(cursor, self.transcript)
        self._push()

    @property
    def settled(self) -> bool:
        """Everything collected and walked: what tests and benchmarks wait for."""
        return (
            self.triage.rest_mounted
            and not self.pending
            and not self._rebuild_scheduled
            and self.facts is not None
            and (self.transcript is not None or bool(self.walk_status))
        )

    # -- actions (bound on the triage screen, listed in the palette) ----------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # ``enter`` is a priority binding so lists don't swallow it; text boxes still need it.
        # On an evidence row ``enter`` opens the row whole (the table's own binding).
        return not (action == "follow" and _keeps_enter(self.focused))

    def action_follow(self) -> None:
        step = walkstate.follow(self.cursor, self.transcript)
        if step.kind == "advance":
            self._move(step.cursor)
        elif step.kind == "ask":
            self.action_answer()
        elif step.kind == "done":
            self.notify("The walk is complete: e exports the incident summary.", title="verdict")
        else:
            self.notify(self.walk_status or "Waiting for more evidence.", title="walk")

    def action_go_back(self) -> None:
        tabs = self.triage.evidence_tabs()
        if self.triage.maximized is not None:
            self.triage.minimize()
        elif tabs is not None and tabs.filter_open:
            tabs.close_filter()
        elif self.cursor > 0:
            back = self.cursor - 1
            visit = walkstate.visit_at(back, self.transcript)
            if visit is not None and visit.ref in self.overrides:
                # Back over an override undoes it: the walk reads as the engine's own again.
                self.overrides = {k: v for k, v in self.overrides.items() if k != visit.ref}
                self._rewalk()
                self.notify(f"Override at {visit.ref} undone.", title="back", markup=False)
            self._move(back)
        else:
            self.notify("Already at the first step.", title="walk")

    def on_walk_path_step_chosen(self, message: WalkPath.StepChosen) -> None:
        self._move(message.index)

    def _current_visit(self) -> Visit | None:
        return walkstate.visit_at(self.cursor, self.transcript)

    def action_override(self) -> None:
        visit = self._current_visit()
        if visit is None:
            self.notify("Move to a step of the walk to take another branch.", title="override")
            return
        if walkstate.is_ask(visit):
            self.action_answer()
            return
        if len(visit.choices) < 2:
            self.notify("This step has no other branch.", title="override")
            return
        from gputriage.tui.screens.choice import ChoiceScreen

        index = self.cursor
        screen = ChoiceScreen(
            "Take another branch",
            visit.prompt,
            visit.choices,
            taken=walkstate.choice_index(visit, visit.target),
            proposed=walkstate.choice_index(visit, walkstate.engine_target(visit)),
        )
        self.push_screen(screen, partial(self._overridden, index, visit))

    def _overridden(self, index: int, visit: Visit, choice: Choice | None) -> None:
        if choice is None:
            return
        self.overrides = walkstate.with_choice(self.overrides, visit, choice)
        self._rewalk()
        self._move(index + 1)

    def action_answer(self) -> None:
        visit = self._current_visit()
        if visit is None or not walkstate.is_ask(visit):
            waiting = walkstate.question_position(self.transcript)
            if waiting is None:
                self.notify("No question is waiting for an answer.", title="answer")
                return
            self._move(waiting)
            visit = self._current_visit()
            assert visit is not None
        from gputriage.tui.screens.choice import ChoiceScreen

        question = self.transcript.question if self.transcript is not None else None
        help_text = question.help if question is not None and question.ref == visit.ref else ""
        screen = ChoiceScreen(
            "Answer",
            visit.prompt,
            visit.choices,
            taken=walkstate.choice_index(visit, visit.target),
            help=help_text,
        )
        self.push_screen(screen, partial(self._answered, self.cursor, visit))

    def _answered(self, index: int, visit: Visit, choice: Choice | None) -> None:
        if choice is None:
            return
        self.answers[visit.ref] = choice.value
        self._rewalk()
        self._move(index + 1)

    def action_note(self) -> None:
        from gputriage.tui.screens.note import NoteScreen

        visit = self._current_visit()
        self.push_screen(
            NoteScreen(visit.ref if visit else ""), partial(self._noted, visit.ref if visit else "")
        )

    def _noted(self, step: str, text: str | None) -> None:
        if not text:
            return
        store = self.notes()
        store.add(text, step)
        self.notify(f"Saved to {store.path}", title=f"note {len(store.notes)}")

    def notes(self) -> NotesStore:
        """The notes of this target, opened on first use (the pod must be known by then)."""
        from gputriage.report.notes import NotesStore, default_notes_path

        if self._notes is None:
            target = self.facts.target if self.facts is not None else None
            path = self.notes_path or default_notes_path(
                self.session.context or "bundle",
                target.namespace if target else "",
                target.pod if target else "",
            )
            self._notes = NotesStore(path)
        return self._notes

    def on_source_status_retry_requested(self, message: SourceStatus.RetryRequested) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        if self._stop_watch is None:  # a bundle, or a live session still collecting
            self.collect()
            self.notify("Collecting every source again.", title="refresh")
            return
        from gputriage.evidence.sources import NODE_KEYS

        # The watch keeps the pod, its events and its node current; what it cannot follow is
        # read on the node (journal, dmesg, nvidia-smi...), so that is what ``r`` reads again.
        offered = self.session.keys()
        keys = tuple(k for k in offered if k in NODE_KEYS)
        self.refresh_node_side(keys)
        self.notify(
            "Collecting node-side evidence again (kubelet journal, dmesg, nvidia-smi…). "
            "The pod, its events and its node are live already.",
            title="refresh",
            markup=False,
        )

    def action_filter(self) -> None:
        if (tabs := self.triage.evidence_tabs()) is not None:
            tabs.open_filter()

    def action_show_tab(self, tab_id: str) -> None:
        if (tabs := self.triage.evidence_tabs()) is not None:
            tabs.show_tab(tab_id)

    def action_tab_number(self, number: int) -> None:
        if (tabs := self.triage.evidence_tabs()) is not None:
            tabs.show_tab_number(number)

    def action_next_tab(self, delta: int) -> None:
        if (tabs := self.triage.evidence_tabs()) is not None:
            tabs.next_tab(delta)

    def action_view_row(self) -> None:
        tabs = self.triage.evidence_tabs()
        detail = tabs.highlighted_detail() if tabs is not None else None
        if detail is None:
            self.notify("This tab has no rows to open.", title="view")
            return
        self._open_row(detail)

    def on_evidence_tabs_row_opened(self, message: EvidenceTabs.RowOpened) -> None:
        self._open_row(message.detail)

    def _open_row(self, detail: RowDetail) -> None:
        from gputriage.tui.screens.row_detail import RowDetailScreen

        self.push_screen(RowDetailScreen(detail))

    def action_zoom(self, panel: str) -> None:
        """Show the fix (or the step) on the whole screen; again to return."""
        widget = self.triage.query_one(FixPanel if panel == "fix" else StepPanel)
        if self.triage.maximized is widget:
            self.triage.minimize()
        else:
            self.triage.maximize(widget, container=False)

    def action_toggle_differential(self) -> None:
        self.differential_open = not self.differential_open
        self._push()

    def action_copy(self) -> None:
        panel = self.triage.query_one(FixPanel)
        record = panel.selected_record
        self._copy(
            panel.selected_command,
            record.mutates if record else False,
            record.why if record else "",
        )

    def action_copy_read_only(self) -> None:
        commands = self.triage.query_one(FixPanel).read_only_commands
        if not commands:
            self.notify("The fix has no read-only command to copy.", title="copy")
            return
        self._put_on_clipboard("\n".join(commands) + "\n", f" ({len(commands)} read-only commands)")

    def on_fix_panel_command_chosen(self, message: FixPanel.CommandChosen) -> None:
        self._copy(message.command, message.mutates, message.why)

    def _copy(self, command: str, mutates: bool = False, why: str = "") -> None:
        if not command:
            self.notify("There is no fix command to copy yet.", title="copy")
            return
        command = inert(command)  # no escape sequence rides into the clipboard
        if mutates:
            from gputriage.tui.screens.confirm import ConfirmScreen

            def copy_if_yes(yes: bool | None) -> None:
                if yes:
                    self._put_on_clipboard(command, " (changes state)")

            self.push_screen(
                ConfirmScreen("This command changes state. Copy it?", command, why), copy_if_yes
            )
            return
        self._put_on_clipboard(command)

    def _put_on_clipboard(self, text: str, note: str = "") -> None:
        """OSC 52, the platform clipboard or a file; the toast names the ways that worked."""
        from gputriage.tui.clipboard import copy_text, default_clipboard_file

        self.copy_to_clipboard(text)  # OSC 52 on the app's own output stream
        result = copy_text(
            text,
            osc52_sent=self._driver is not None and not self.is_headless,
            file=self.clipboard_file or default_clipboard_file(),
        )
        self.last_copy = result
        # Cluster text in the command ([link=...], [@click=...]) shows verbatim, never markup.
        self.notify(
            "\n".join([clean(text), *result.lines()]),
            title=result.title() + note,
            severity="information" if result.reached else "error",
            markup=False,
        )

    def action_export(self) -> None:
        if self.transcript is None or self.facts is None:
            self.notify(
                "Nothing to export before the walk has started.", title="export", severity="warning"
            )
            return
        from gputriage.report.notes import read_notes_file
        from gputriage.tui.export import export_summary

        notes = [
            *(read_notes_file(self.extra_notes_file) if self.extra_notes_file else []),
            *self.notes().notes,
        ]
        try:
            self.exported = export_summary(
                self.export_dir,
                self.session,
                self.evidence,
                self.facts,
                self.transcript,
                notes,
                self.clock(),
                confirmed=walkstate.at_verdict(self.cursor, self.transcript),
            )
        except OSError as exc:
            self.notify(
                f"{exc.strerror or exc}: {exc.filename or self.export_dir}",
                title="export failed",
                severity="error",
                timeout=15,
            )
            return
        # Short and inert: a path is not markup ("[x]" in a directory name stays as it is).
        md, *others = self.exported
        self.notify(
            "\n".join([clean(str(md)), *(f"+ {p.suffix} beside it" for p in others)]),
            title="incident summary written",
            timeout=EXPORT_TOAST_S,
            markup=False,
        )

    def action_triage_node(self) -> None:
        """Leave this walk for the node walk when the verdict blames the node."""
        from gputriage.scan.nodewalk import blamed_node

        node = blamed_node(self.facts, self.transcript)
        if not node:
            self.notify("Only a lost.* or node.* verdict blames the node.", title="triage node")
            return
        self.next_node = node
        self.exit(0)

    def action_help(self) -> None:
        from gputriage.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        names = sorted(self.available_themes)
        self.theme = names[(names.index(self.theme) + 1) % len(names)]
        self.notify(self.theme, title="theme")
