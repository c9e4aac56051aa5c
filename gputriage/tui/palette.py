"""Command palette entries for every action of the triage screen (``:`` or ctrl+p).

Generated from the screen's bindings so the palette, the footer and the help screen always
agree, plus one entry per evidence tab.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from gputriage.tui.tables import TABS


class TriageCommands(Provider):
    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        from gputriage.tui.screens.triage import TRIAGE_BINDINGS

        app = self.app
        found: list[tuple[str, str, Callable[[], object]]] = []
        for b in TRIAGE_BINDINGS:
            if not isinstance(b, Binding) or b.action == "app.command_palette":
                continue
            action = b.action.removeprefix("app.")
            found.append((b.description, b.tooltip, partial(app.run_action, action)))
        for spec in TABS:
            found.append(
                (
                    f"Show tab: {spec.title}",
                    f"Open the {spec.title} evidence tab",
                    partial(app.run_action, f"show_tab('{spec.id}')"),
                )
            )
        return found

    async def discover(self) -> Hits:
        for name, help_text, command in self._commands():
            yield DiscoveryHit(name, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, command in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, text=name, help=help_text)
