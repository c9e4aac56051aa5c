"""``gputriage <pod> --report md|json``: the whole walk without a terminal UI.

Exit codes (documented in the README):

* 0: the walk concluded with a finding (a root cause);
* 3: undetermined: evidence was insufficient; the summary says what to collect next;
* 4: the walk waits for an answer to an ``ask`` step (pass ``--answer STEP=CHOICE``);
* 2: bad input (no such pod, unreadable bundle, broken playbook argument...);
* 1: an internal error (a bug: please report it).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gputriage.errors import GputriageError

EXIT_FINDING = 0
EXIT_UNDETERMINED = 3
EXIT_WAITING = 4


def parse_pairs(values: list[str], flag: str) -> dict[str, str]:
    """``["a/b=c", ...]`` -> ``{"a/b": "c"}`` with a clear error for a malformed pair."""
    pairs: dict[str, str] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise GputriageError(f"{flag} expects STEP=VALUE (e.g. {flag} "
                                 f"oom-cuda/params=7e9), got {raw!r}", title="bad argument")
        pairs[key.strip()] = value.strip()
    return pairs


def run_headless(args: argparse.Namespace) -> int:
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    from gputriage.playbook.loader import load_playbooks
    from gputriage.report.notes import read_notes_file
    from gputriage.report.render import render
    from gputriage.report.write import atomic_write
    from gputriage.session import open_session

    answers = parse_pairs(getattr(args, "answer", []) or [], "--answer")
    overrides = parse_pairs(getattr(args, "override", []) or [], "--override")
    dirs = [Path(p) for p in getattr(args, "playbooks", []) or []]
    # Importing cel and compiling every condition takes a few hundred milliseconds: do it
    # while the evidence is being collected, not before.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="playbooks") as pool:
        loading = pool.submit(load_playbooks, dirs)
        session = open_session(args)
        try:
            evidence = session.collect_all()
        finally:  # end any call still reading (a source past its deadline): exit promptly
            close = getattr(session, "close", None)
            if callable(close):
                close()
        playbooks = loading.result()
    for problem in playbooks.problems:
        print(f"gputriage: warning: skipped playbook: {problem}", file=sys.stderr)
    facts = build_facts(evidence)
    transcript = walk(playbooks, facts, answers, overrides)
    notes = read_notes_file(args.notes) if getattr(args, "notes", None) else []

    text = render(args.report, session.description, session.context, evidence, facts,
                  transcript, notes)
    if getattr(args, "output", None) not in (None, "", "-"):  # "-": stdout
        path = atomic_write(args.output, text)
        print(f"gputriage: wrote {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if transcript.question is not None:
        return EXIT_WAITING
    if transcript.undetermined or not transcript.findings:
        return EXIT_UNDETERMINED
    return EXIT_FINDING
