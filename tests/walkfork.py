"""Run one prepared walk in a fresh interpreter and print what came back, as JSON; and
:func:`cli_report`, the CLI in a fresh interpreter noting whether its walk forked.

``python -m tests.walkfork MODE BUNDLE`` (from the checkout). The fork in
:mod:`gputriage.prepared_walk` needs a process with no other thread, which a pytest process
running servers is not: ``tests/unit/test_prepared_walk.py`` runs this instead. MODE:

* ``fork`` / ``thread``: the walk as the headless runner does it, forked or in process;
* ``crash``, ``garbage``, ``hang``, ``raise``: the child dies, answers nonsense, never answers,
  or the walk raises (in the child and here alike); ``stuck``: the child never reads;
* ``close-early``: the run ends before any evidence (the session failed to open);
* ``big``: the evidence is over the size worth sending to the child;
* ``threaded``: another thread is running when the walk is prepared;
* ``count``: the report says how many conditions were compiled when the walk began.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputriage import prepared_walk
from gputriage.errors import GputriageError

if TYPE_CHECKING:
    from gputriage.evidence.model import EvidenceSet
    from gputriage.playbook.model import PlaybookSet

PARENT = os.getpid()

#: The console script, with a line on stderr saying whether the forked child walked.
_NOTING_CLI = """
import sys
import gputriage.prepared_walk as pw
finish = pw.ForkedWalk.finish
def noted(self, *args):
    result = finish(self, *args)
    print(f"walked in child: {result.forked}", file=sys.stderr)
    return result
pw.ForkedWalk.finish = noted
sys.argv = ["gputriage", *sys.argv[1:]]
from gputriage.cli import entry
entry()
"""


def cli_report(
    args: list[str], out: Path, cwd: Path, **env: str
) -> tuple[int, str, dict[str, Any]]:
    """``gputriage ARGS --report json -o OUT`` in a fresh interpreter (where the walk forks):
    exit status, stderr (with ``walked in child: True|False`` when a child was forked) and
    the report without what differs between two runs (when it was made, how long each source
    took)."""
    import subprocess

    environ = {k: v for k, v in os.environ.items() if k != "GPUTRIAGE_NO_FORK"}
    proc = subprocess.run(
        [sys.executable, "-c", _NOTING_CLI, *args, "--report", "json", "-o", str(out)],
        cwd=cwd,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(out.read_text())
    doc.pop("generated_at")
    for source in doc["sources"]:
        for timing in ("elapsed_s", "collected_at"):
            source.pop(timing, None)
    return proc.returncode, proc.stderr, doc


def _walk(
    playbooks: PlaybookSet, evidence: EvidenceSet, description: str, context: str
) -> tuple[str, int]:
    from gputriage.facts.build import build_facts
    from gputriage.pipeline import exit_code
    from gputriage.playbook.engine import walk
    from gputriage.report.render import render

    facts = build_facts(evidence)
    transcript = walk(playbooks, facts, {}, {})
    text = render("json", description, context, evidence, facts, transcript, [])
    return text, exit_code(transcript)


def main(mode: str, bundle: Path) -> dict[str, Any]:
    in_child = lambda: os.getpid() != PARENT  # noqa: E731

    def finish(
        playbooks: PlaybookSet, evidence: EvidenceSet, description: str, context: str
    ) -> tuple[str, int]:
        if mode == "crash" and in_child():
            os._exit(9)
        if mode == "garbage" and in_child():
            return 123, "three"  # type: ignore[return-value]
        if mode == "hang" and in_child():
            time.sleep(60)
        if mode == "raise":
            raise GputriageError("the notes file is not readable", title="bad notes")
        conditions = list(playbooks.conditions())
        compiled = sum(c.compiled is not None for c in conditions)
        text, code = _walk(playbooks, evidence, description, context)
        if mode == "count":
            counts = {"compiled": compiled, "conditions": len(conditions)}
            return json.dumps({**counts, "report": json.loads(text)}), code
        return text, code

    if mode == "hang":
        prepared_walk.ANSWER_TIMEOUT_S = 0.5
    if mode == "big":
        prepared_walk.WIRE_LIMIT_BYTES = 1000
    if mode == "stuck":  # the child never gets to read the evidence
        prepared_walk.ANSWER_TIMEOUT_S = 0.5
        load = prepared_walk.load

        def stuck_load(dirs: list[Path]) -> PlaybookSet:
            if in_child():
                time.sleep(60)
            return load(dirs)

        prepared_walk.load = stuck_load
    stop = threading.Event()
    if mode == "threaded":
        threading.Thread(target=stop.wait, daemon=True).start()
    from gputriage.session import BundleSession

    evidence = BundleSession(bundle).collect_all()
    started = time.monotonic()
    prepared = prepared_walk.prepare_walk([], finish, fork=mode != "thread")
    pid = getattr(prepared, "_pid", None)
    out: dict[str, Any] = {"child": pid is not None}
    try:
        if mode == "close-early":
            return out
        if mode == "count":
            time.sleep(3)  # as long as a collection: the child is ready and compiles
        try:
            result = prepared.finish(evidence, "a description", "a context")
        except GputriageError as exc:
            out["error"] = str(exc)
            return out
        out.update(
            forked=result.forked,
            text=result.text,
            exit_code=result.exit_code,
            problems=list(result.problems),
        )
        return out
    finally:
        prepared.close()
        stop.set()
        out["seconds"] = time.monotonic() - started
        if pid is not None:
            try:
                os.waitpid(pid, os.WNOHANG)
                out["reaped"] = False
            except ChildProcessError:
                out["reaped"] = True


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
