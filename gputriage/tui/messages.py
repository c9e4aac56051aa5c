"""App-wide messages: what background workers tell the app (toolong's messages module).

Workers never touch widgets. They post one of these; the app, the only writer of state, stores
the result and pushes a fresh snapshot down to the screen. Widget-specific messages (a step
clicked in the walk path...) are nested in their widget instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from gputriage.evidence.model import Evidence, Key
from gputriage.tui.walkstate import Walker


@dataclass
class CollectionStarted(Message):
    """A (re)collection began: every key in ``keys`` is now pending."""

    keys: tuple[Key, ...]


@dataclass
class EvidenceArrived(Message):
    """One piece of evidence finished collecting (ok or not)."""

    evidence: Evidence


@dataclass
class CollectionFinished(Message):
    """The session's stream ended: nothing else will arrive until the next refresh."""


@dataclass
class PlaybooksLoaded(Message):
    """Playbooks are compiled; ``walker`` turns facts, answers and overrides into a walk."""

    walker: Walker
    problems: tuple[str, ...] = ()


@dataclass
class PlaybooksFailed(Message):
    """The playbooks could not be loaded: the evidence panels still work, the walk does not."""

    error: str


@dataclass
class EvidenceChanged(Message):
    """A watch saw the pod, its events or its node change; this is the key collected again."""

    evidence: Evidence
