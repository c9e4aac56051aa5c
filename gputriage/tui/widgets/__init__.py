"""Widgets of the triage screen. Each gets a :class:`~gputriage.tui.view.TriageView` as an
attribute and reports user intent with a message nested in its class."""
