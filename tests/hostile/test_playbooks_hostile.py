"""Malformed and adversarial playbooks: located errors, bounded time and memory.

* Fuzzed YAML (mutated shipped and fixture playbooks, random text) through the per-file
  checks: never an exception, every problem placed inside the file.
* A broken user playbook never takes down the shipped ones.
* Bombs, each in a child process under ``RLIMIT_AS`` and a deadline
  (:mod:`tests.hostile.bounded`): a billion-laughs alias bomb, nesting far past any playbook,
  a file bigger than a playbook can be, a big but legal file, and CEL conditions that explode
  (nested comprehensions over large lists, gigabytes of concatenated strings), crash the
  engine (an expression tree deep enough to overflow its stack) or practically never
  terminate (a triple comprehension over the 500 Xids the kernel facts may list). Each must
  end in a located problem, or in a walk that finishes, within the bounds.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputriage.playbook.loader import load_playbooks, parse_file
from tests.conftest import ROOT
from tests.hostile.bounded import run_bounded, write
from tests.hostile.budget import fuzz
from tests.hostile.strategies import NASTY

#: Deadline and memory ceiling for loading plus one walk. A normal load and walk take ~2 s.
DEADLINE_S = 20.0
MEMORY_MIB = 2048

TEMPLATE = """\
format_version: 1
id: hostile
title: Hostile conditions
routes:
  - when: {route}
    because: hostile route
    priority: 1000
start: only
steps:
  only:
    prompt: Anything?
    branches:
      - when: {branch}
        because: it held
        conclude: hostile.held
    otherwise:
      because: it did not
      conclude: hostile.held
findings:
  hostile.held:
    severity: info
    title: Held
    summary: It held.
    fix:
      summary: Nothing to do.
"""

#: Loads the shipped playbooks plus argv[1] (a dir), walks facts from bundle argv[2] if given,
#: and prints what happened as JSON.
CHILD = r"""
import json, sys, time
from pathlib import Path
t0 = time.monotonic()
from gputriage.playbook.loader import load_playbooks
books = load_playbooks([Path(sys.argv[1])], user_config=False)
out = {"load_s": time.monotonic() - t0, "ids": sorted(books.playbooks),
       "problems": [{"file": p.file, "line": p.line, "col": p.col, "message": p.message}
                    for p in books.problems]}
if len(sys.argv) > 2:
    from gputriage.evidence.bundle import read_bundle
    from gputriage.facts.build import build_facts
    from gputriage.playbook.engine import walk
    facts = build_facts(read_bundle(sys.argv[2]))
    t1 = time.monotonic()
    transcript = walk(books, facts)
    out["walk_s"] = time.monotonic() - t1
    out["entry"] = transcript.entry
    out["findings"] = [f.id for f in transcript.findings]
    out["warnings"] = list(transcript.warnings)
print(json.dumps(out))
"""


@cache
def seed_playbooks() -> tuple[str, ...]:
    files = sorted((ROOT / "playbooks").glob("*.yaml"))
    files += sorted((ROOT / "tests" / "fixtures" / "playbooks").rglob("*.yaml"))
    return tuple(f.read_text(encoding="utf-8") for f in files)


@st.composite
def mutated_playbook(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(seed_playbooks()))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 5))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.integers(0, 6))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, draw(st.sampled_from(lines)))
        elif op == 2:  # re-indent: YAML's favourite failure
            lines[i] = " " * draw(st.integers(0, 9)) + lines[i].lstrip(" ")
        elif op == 3:
            j = draw(st.integers(0, len(lines[i])))
            nasty = draw(
                st.sampled_from(
                    (*NASTY, ":", "- ", "&a ", "*a", "!!python/object ", "{{", "'", "\t")
                )
            )
            lines[i] = lines[i][:j] + nasty + lines[i][j:]
        elif op == 4:
            lines = lines[:i]  # cut off
        elif op == 5:
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.text(max_size=20)) + lines[i][j:]
        else:
            a, b = i, draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
    return "".join(lines)


@fuzz(0.5)
@given(st.one_of(mutated_playbook(), st.text(max_size=500)))
def test_fuzzed_playbook_yaml_gives_located_problems(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "fuzzed.yaml", text)
        pf = parse_file(path)
    n_lines = max(len(text.splitlines()), text.count("\n")) + 1  # YAML breaks on more than \n
    assert (pf.playbook is None) == bool(pf.problems), pf.problems
    for p in pf.problems:
        assert p.file == str(path), p
        assert p.message.strip(), p
        assert 0 <= p.line <= n_lines and p.col >= 0, (p, n_lines)
        assert p.where in p.render()


def test_a_broken_user_playbook_never_takes_down_the_shipped_ones(tmp_path: Path) -> None:
    shipped = set(load_playbooks(user_config=False).playbooks)
    assert shipped
    user = tmp_path / "user"
    write(user / "a-broken.yaml", "format_version: 1\nid: [unclosed\n")
    write(user / "b-binary.yaml", "\x00\x01garbage")
    write(user / "c-wrong-kind.yaml", "- just\n- a list\n")
    write(user / "d-bad-cel.yaml", TEMPLATE.format(route='"true"', branch="kernel.xids.("))
    books = load_playbooks([user], user_config=False)
    assert shipped <= set(books.playbooks)
    files = {Path(p.file).name for p in books.problems}
    assert {"a-broken.yaml", "b-binary.yaml", "c-wrong-kind.yaml", "d-bad-cel.yaml"} <= files
    cel = next(p for p in books.problems if p.file.endswith("d-bad-cel.yaml"))
    assert cel.line == 13 and cel.col > 0, cel


def billion_laughs(levels: int = 9) -> str:
    lines = ["lol0: &l0 lol"]
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "format_version: 1\nid: laughs\n" + "\n".join(lines) + "\n"


def legal_but_big(steps: int) -> str:
    out = ["format_version: 1", "id: big", "title: A big legal playbook", "start: s0", "steps:"]
    for i in range(steps):
        nxt = f"goto: s{i + 1}" if i + 1 < steps else "conclude: big.end"
        out += [
            f"  s{i}:",
            f"    prompt: Step {i} of a long chain?",
            "    branches:",
            f"      - when: pod.known && pod.gpu_total > {i} && "
            f"pod.containers.exists(c, c.name == 'c{i}')",
            f"        because: restarts above {i}",
            "        conclude: big.end",
            "    otherwise:",
            "      because: not yet",
            f"      {nxt}",
        ]
    out += [
        "findings:",
        "  big.end:",
        "    requires: pod.known",
        "    severity: info",
        "    title: End",
        "    summary: The end.",
        "    fix:",
        "      summary: Nothing.",
    ]
    return "\n".join(out) + "\n"


def literal(n: int, item: str = "0") -> str:
    return "[" + ", ".join([item] * n) + "]"


XIDS_DMESG = "".join(
    f"[Tue Mar  5 10:{i // 60 % 60:02d}:{i % 60:02d} 2026] NVRM: Xid (PCI:0000:{i % 256:02x}:00):"
    f" {13 + i % 100}, pid=1234, name=python, Graphics Exception\n"
    for i in range(2000)
)
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "u-1"},
    "spec": {
        "nodeName": "gpu-node-1",
        "containers": [{"name": "c0", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    },
    "status": {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "c0",
                "ready": False,
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            }
        ],
    },
}

#: Conditions that explode in time or size when evaluated.
CEL_BOMBS = {
    "nested-map-over-literals": (
        f"{literal(300)}.map(a, {literal(300)}.map(b, {literal(300)}.map(c, a))).size() > 0"
    ),
    "cubic-strings": (
        f"{literal(100, repr('x' * 1000))}.map(a, {literal(100, repr('y' * 1000))}"
        f".map(b, {literal(100, repr('z' * 1000))}.map(c, a + b + c))).size() > 0"
    ),
    # 120 KB of "1 + 1 + ...": evaluating the 30,000-deep tree overflows the CEL engine's
    # stack (SIGSEGV, measured: from ~20,000 terms), taking the whole process down.
    "deep-expression-tree": " + ".join(["1"] * 30_000) + " > 0",
    "cubic-over-fact-list": (
        "kernel.xids.all(a, kernel.xids.all(b, kernel.xids.all(c, a.code + b.code >= c.code - "
        "1000000)))"
    ),
}


def _run_child(tmp: Path, name: str, text: str, *, walk: bool = False) -> dict[str, object]:
    user = tmp / "user"
    write(user / name, text)
    args = [str(user)]
    if walk:
        bundle = tmp / "bundle"
        write(bundle / "pod.json", json.dumps(POD))
        write(bundle / "dmesg.log", XIDS_DMESG)
        args.append(str(bundle))
    outcome = run_bounded(CHILD, *args, timeout=DEADLINE_S, memory_mib=MEMORY_MIB)
    assert not outcome.timed_out, (
        f"{name}: still running after {DEADLINE_S:.0f} s\n{outcome.describe()}"
    )
    assert outcome.returncode == 0, f"{name}: the loader crashed\n{outcome.describe()}"
    result: dict[str, object] = json.loads(outcome.stdout.strip().splitlines()[-1])
    result["max_rss_mib"] = outcome.max_rss_mib
    return result


def _problems_in(result: dict[str, object], name: str) -> list[dict[str, object]]:
    problems = result["problems"]
    assert isinstance(problems, list)
    return [p for p in problems if str(p["file"]).endswith(name)]


@pytest.mark.parametrize(
    "name, text",
    [
        ("laughs.yaml", billion_laughs()),
        ("deep-flow.yaml", "format_version: 1\nid: deep\nsteps: " + "[" * 100_000 + "\n"),
        (
            "deep-block.yaml",
            "format_version: 1\nid: deep\nsteps:\n"
            + "".join(f"{' ' * (i + 1)}k:\n" for i in range(1100)),
        ),
        ("huge.yaml", "# " + "x" * (2 * 1024 * 1024) + "\n"),
    ],
    ids=["billion-laughs", "deep-flow", "deep-block", "over-1MiB"],
)
def test_bombs_are_refused_with_a_located_problem(tmp_path: Path, name: str, text: str) -> None:
    result = _run_child(tmp_path, name, text)
    mine = _problems_in(result, name)
    assert mine, f"{name} was accepted: {result}"
    assert "laughs" not in result["ids"] and "deep" not in result["ids"]  # type: ignore[operator]
    if name != "huge.yaml":
        assert all(int(p["line"]) > 0 for p in mine), mine  # type: ignore[call-overload]
    else:
        assert "bigger than a playbook can be" in str(mine[0]["message"])
    assert len(result["ids"]) > 1, "the shipped playbooks went down with it"  # type: ignore


def test_a_big_legal_playbook_loads_within_bounds(tmp_path: Path) -> None:
    text = legal_but_big(1500)
    assert 200_000 < len(text) < 1024 * 1024
    result = _run_child(tmp_path, "big.yaml", text)
    assert "big" in result["ids"], _problems_in(result, "big.yaml")  # type: ignore[operator]
    assert float(result["max_rss_mib"]) < 1024  # type: ignore[arg-type]


@pytest.mark.parametrize("bomb", list(CEL_BOMBS), ids=list(CEL_BOMBS))
def test_exploding_cel_is_refused_or_bounded(tmp_path: Path, bomb: str) -> None:
    condition = json.dumps(CEL_BOMBS[bomb])
    text = TEMPLATE.format(route=condition, branch=condition)
    result = _run_child(tmp_path, "hostile.yaml", text, walk=True)
    mine = _problems_in(result, "hostile.yaml")
    if mine:  # refused at load: the problem points at the condition
        assert all(int(p["line"]) in (5, 13) for p in mine), mine  # type: ignore[call-overload]
        return
    assert "hostile" in result["ids"]  # type: ignore[operator]
    assert result["findings"], result


#: The bypass the attack report found: passes every load-time limit (each list is iterated at
#: most twice deep), but ``filter`` copies the list on every outer step; with 700 Xids it ran
#: for more than 300 s. The run-time budget must stop it before it runs.
FILTER_NESTING = "kernel.xids.all(a, kernel.xids.filter(z, true).all(b, b.code >= a.code - 99))"
#: One filter deeper: the load-time nesting check sees through ``filter(...)`` chains.
FILTER_NESTING_DEEPER = (
    "kernel.xids.all(a, kernel.xids.filter(z, true).all(b, "
    "kernel.xids.filter(y, y.code == b.code).size() >= 0))"
)


def test_filter_nesting_bypass_is_stopped_by_the_run_time_budget(tmp_path: Path) -> None:
    condition = json.dumps(FILTER_NESTING)
    # The finding declares what it requires, so the playbook is valid as a whole.
    template = TEMPLATE.replace(
        "    severity: info\n", "    severity: info\n    requires:\n      - kernel.known\n"
    )
    text = template.format(route='"true"', branch=condition)
    result = _run_child(tmp_path, "hostile.yaml", text, walk=True)
    assert _problems_in(result, "hostile.yaml") == []  # legal at load: the budget decides
    warnings = [w for w in result["warnings"] if "hostile" in w or "budget" in w]  # type: ignore
    assert any("estimated cost" in w and "over the budget" in w for w in warnings), result
    assert float(result["walk_s"]) < 5.0, result  # type: ignore[arg-type]


def test_deeper_filter_nesting_is_refused_at_load(tmp_path: Path) -> None:
    text = TEMPLATE.format(route='"true"', branch=json.dumps(FILTER_NESTING_DEEPER))
    mine = _problems_in(_run_child(tmp_path, "hostile.yaml", text), "hostile.yaml")
    assert [
        (p["line"], "iterates 'kernel.xids' inside 2 macros" in str(p["message"])) for p in mine
    ] == [(13, True)]
