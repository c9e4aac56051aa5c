"""Command line: ``gputriage <pod>`` and its subcommands.

Every subcommand lives in ``gputriage.commands.<name>`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import nothing heavy at
module level, so ``gputriage --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from gputriage import __version__
from gputriage.errors import GputriageError
from gputriage.textsafe import funnelled_stdio

#: Subcommand name -> module. ``triage`` is the default when the first word is not a command.
COMMANDS: dict[str, str] = {
    "triage": "gputriage.commands.triage",
    "demo": "gputriage.commands.demo",
    "collect": "gputriage.commands.collect",
    "scan": "gputriage.commands.scan",
    "node": "gputriage.commands.node",
    "playbooks": "gputriage.commands.playbooks",
    "xid": "gputriage.commands.xid",
    "facts": "gputriage.commands.facts",
}

EXAMPLES = """\
examples:
  gputriage trainer-0 -n ml                  triage a pod in the TUI (current kube context)
  kubectl gputriage trainer-0 -n ml          the same, as a kubectl plugin
  gputriage deploy/llm-serve -n inference    triage the pods of a Deployment
  gputriage trainer-0 -n ml --report md      headless: print the incident summary as Markdown
  gputriage collect trainer-0 -n ml -o ./b   write an evidence bundle for later or elsewhere
  gputriage trainer-0 --from ./b --report json   replay a bundle without a cluster
  gputriage demo                             the TUI on built-in scenarios, no cluster needed
  gputriage scan -A                          GPU pods and nodes in trouble, cluster-wide
  gputriage node gpu-node-7                  lost-card triage for a node
  gputriage xid 79                           what NVIDIA says about Xid 79
  gputriage xid "NVRM: Xid (PCI:0000:3b:00): 79, pid=..."   decode a pasted kernel line
  gputriage playbooks validate my.yaml       check a playbook you wrote

gputriage is read-only against the cluster. It never creates, changes or deletes objects.
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line. ``only``: the subcommand being run, the one whose module and options
    are loaded (all of them are for ``gputriage --help``)."""
    parser = argparse.ArgumentParser(
        prog="gputriage",
        description="Guided triage of stuck or dying GPU workloads on Kubernetes.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gputriage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_module=module_name)
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """``gputriage <pod> ...`` means ``gputriage triage <pod> ...``; so does a command line
    that starts with an option (``kubectl gputriage -n ml trainer-0``: the top level has no
    options of its own besides help and version)."""
    if not argv or argv[0] in ("-h", "--help", "--version") or argv[0] in COMMANDS:
        return argv
    return ["triage", *argv]


def main(argv: Sequence[str] | None = None) -> int:
    args_list = _normalise(list(sys.argv[1:] if argv is None else argv))
    first = next((w for w in args_list if not w.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    if not args_list:
        parser.print_help()
        return 2
    args = parser.parse_args(args_list)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    module = importlib.import_module(args._module)
    with funnelled_stdio():  # nothing printed can drive the terminal or leak a secret
        return _run(module, args)


def entry() -> None:
    """The console scripts (``gputriage``, ``kubectl-gputriage``) and ``python -m gputriage``:
    :func:`main`, then out at once.

    Everything the command produced is written and closed when :func:`main` returns; what is
    left is the interpreter's own teardown (freeing every object, joining evidence threads
    that outlived a deadline, closing connections the command has finished with), which on
    a triage costs more than a tenth of its run. Standard streams are flushed first.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        # closed or broken: nothing more can be said there
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _run(module: Any, args: argparse.Namespace) -> int:
    try:
        return int(module.run(args))
    except GputriageError as exc:
        print(f"gputriage: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error for the user.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
