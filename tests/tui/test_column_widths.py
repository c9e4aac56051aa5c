"""Evidence tables get their column widths with their rows (not later, when the table is idle)."""

from __future__ import annotations

from rich.text import Text

from gputriage.tui.widgets.evidence_tabs import column_widths


def test_widths_are_the_widest_cell_or_label_in_terminal_cells() -> None:
    rows = [
        [Text("▶ gpu-node-1"), Text("short")],
        [Text("n"), Text("first line\na much longer second line")],
        [Text("全角"), Text("")],
    ]
    assert column_widths(["node", "message"], rows) == [12, 25]
    assert column_widths(["a very long label", "m"], [[Text("x"), Text("y")]]) == [17, 1]
    assert column_widths(["只"], [[Text("全角全角")]]) == [8]  # wide characters count twice
    assert column_widths(["a", "b"], []) == [1, 1]
