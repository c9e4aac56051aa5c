"""gputriage's own themes, registered next to Textual's built-in ones (palette: "theme").

Colours carry meaning here (red: hardware / error, amber: needs attention, green: fine), so the
defaults keep those hues distinct on dark and light terminals alike. ``NO_COLOR`` is honoured
by Textual itself, which then renders every theme in monochrome.
"""

from __future__ import annotations

from textual.theme import Theme

THEMES: tuple[Theme, ...] = (
    Theme(
        name="gputriage",
        primary="#76B900",  # NVIDIA green: the thing we triage
        secondary="#5AA9E6",
        accent="#FFB347",
        warning="#F2C14E",
        error="#FF5F5F",
        success="#76B900",
        foreground="#E6E6E6",
        background="#15171A",
        surface="#1E2125",
        panel="#2A2E33",
        dark=True,
    ),
    Theme(
        name="gputriage-light",
        primary="#4A7A00",
        secondary="#1F6FB2",
        accent="#B35900",
        warning="#9A6B00",
        error="#C62828",
        success="#2E7D32",
        foreground="#1A1A1A",
        background="#FAFAF7",
        surface="#F0F0EA",
        panel="#E2E2DA",
        dark=False,
    ),
)
