"""Errors that reach the user carry a title and an actionable message, never a traceback."""

from __future__ import annotations


class GputriageError(Exception):
    """An error the CLI prints as ``error: <title>`` plus the message, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, title: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.title = title

    def __str__(self) -> str:
        return f"{self.title}: {self.message}" if self.title else self.message
