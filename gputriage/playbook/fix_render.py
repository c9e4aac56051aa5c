"""A fix command record + facts -> the command an SRE pastes (:class:`FixCommand`).

* ``run: node`` commands are written without ``ssh``; here they become
  ``ssh NODE 'remote command'``, NODE being ``node.name``, else the pod's node, else the
  upper-case placeholder ``NODE`` (a Pending pod has no node yet: the SRE picks one).
* a command whose templates cannot all be filled uses its ``if_unknown`` variant; when that is
  missing too (or cannot be filled either), the command is left out of the copyable text and
  the record says which facts it needed (``missing``), so no ``<placeholder>`` reaches a shell.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from gputriage.playbook.model import CommandSpec
from gputriage.playbook.templating import lookup, missing, render
from gputriage.playbook.transcript import FixCommand

#: Where a node command's host name comes from, in order.
NODE_PATHS = ("node.name", "pod.node")
NODE_PLACEHOLDER = "NODE"


def render_command(spec: CommandSpec, context: Mapping[str, Any]) -> FixCommand:
    """The pasteable command for ``spec`` (``text`` empty when a needed fact is unknown)."""
    cmd = spec.cmd
    gaps = missing(cmd, context)
    if gaps and spec.if_unknown and not missing(spec.if_unknown, context):
        cmd, gaps = spec.if_unknown, []
    if gaps:
        return FixCommand(
            "", spec.run, spec.mutates, _text(spec.why, context), spec.order, tuple(gaps)
        )
    text = render(cmd, context, shell=True)
    if spec.run == "node":
        text = f"ssh {node_host(context)} {_remote(text)}"
    return FixCommand(text, spec.run, spec.mutates, _text(spec.why, context), spec.order)


def node_host(context: Mapping[str, Any]) -> str:
    """The node a ``run: node`` command goes to (shell-quoted), or ``NODE``."""
    for path in NODE_PATHS:
        value = lookup(context, path)
        if isinstance(value, str) and value:
            return shlex.quote(value)
    return NODE_PLACEHOLDER


def _remote(command: str) -> str:
    """``command`` as one ssh argument: quoted once more when the remote shell must parse it."""
    if all(c.isalnum() or c in " -_./=:,@%+" for c in command):
        return command
    if "'" not in command:
        return f"'{command}'"
    if not any(c in command for c in '"$`\\!'):  # readable: nothing expands inside "..."
        return f'"{command}"'
    return shlex.quote(command)


def _text(text: str, context: Mapping[str, Any]) -> str:
    return render(text, context) if "{{" in text else text


def doc_line(spec: CommandSpec, *, raw: bool = False) -> str:
    """``spec`` as documentation shows it: templates as ``<group.field>`` (as written when
    ``raw``), ``ssh <node>`` before node commands, a mark on mutating ones."""
    text = spec.cmd if raw else render(spec.cmd, {})
    if spec.run == "node":
        text = f"ssh <node> {_remote(text)}"
    return f"{text}  # changes state" if spec.mutates else text
