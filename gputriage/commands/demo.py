"""``gputriage demo [scenario]``: the TUI on a built-in evidence bundle, no cluster needed.

``--list`` prints the scenarios; without a name an interactive picker opens; ``--report md|json``
walks the scenario headless, exactly like ``gputriage <pod> --from DIR --report ...``.
"""

from __future__ import annotations

import argparse

from gputriage.commands.options import (
    add_playbook_arguments,
    add_report_arguments,
    triage_options_from_args,
)

HELP = "the TUI on built-in scenarios (no cluster needed); --list shows them"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "scenario", nargs="?", help="scenario name (see --list); without one, pick from a menu"
    )
    p.add_argument("--list", action="store_true", help="list the built-in scenarios and exit")
    add_report_arguments(p)
    p.add_argument(
        "--export-dir",
        metavar="DIR",
        help="where the TUI's export (e) writes the summary (default: current dir)",
    )
    add_playbook_arguments(p)


def run(args: argparse.Namespace) -> int:
    from gputriage.scenarios import list_scenarios, scenario_path

    scenarios = list_scenarios()
    if args.list:
        width = max((len(s.name) for s in scenarios), default=0)
        for s in scenarios:
            print(f"{s.name:<{width}}  {s.title}")
            if s.description:
                print(f"{'':<{width}}  {s.description}")
        return 0
    name = args.scenario
    if not name:
        from gputriage.tui.launch import pick_scenario

        name = pick_scenario(
            [
                (s.name, f"{s.title}: {s.description}" if s.description else s.title)
                for s in scenarios
            ]
        )
        if not name:
            return 0
    path = scenario_path(name)  # a GputriageError naming close matches for a typo
    from dataclasses import replace

    from gputriage.pipeline import pod_triage

    options = replace(triage_options_from_args(args), bundle=path)
    if options.report is not None:
        from gputriage.pipeline import run_headless

        return run_headless(pod_triage(name, options, check_bundle=False), options, options.report)
    from gputriage.tui.launch import run_triage

    return run_triage(
        pod_triage(name, options, description=f"demo {name}", check_bundle=False), options
    )
