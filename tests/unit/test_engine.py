"""The engine walks the valid fixture playbooks to each of their findings from hand-built facts;
unknown facts end in ``undetermined`` with what to collect; answers, overrides, loops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playbook_facts import DMESG, KNOWN, VALID, XID48, XID79, dmesg_ref, facts, xid

from gputriage.evidence.model import LineRef
from gputriage.facts.model import FactSet
from gputriage.playbook.engine import walk
from gputriage.playbook.loader import load_playbooks
from gputriage.playbook.model import PlaybookSet
from gputriage.playbook.transcript import Choice, Outcome


@pytest.fixture(scope="module")
def books() -> PlaybookSet:
    result = load_playbooks([VALID], known_facts=KNOWN, shipped=False, user_config=False)
    assert result.problems == ()
    return result


REF79 = dmesg_ref(412, f"[Tue Mar  4 02:13:55 2025] {XID79}")
REF48 = dmesg_ref(97, f"[Tue Mar  4 01:02:03 2025] {XID48}")
LOST_REF = LineRef(
    "nvidia-smi",
    "bundle/nvidia-smi.txt",
    3,
    "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error",
)


def lost_facts(*xids: dict[str, Any], **values: dict[str, Any]) -> FactSet:
    kernel = {"xids": list(xids), "latest_xid": dict(xids[-1]) if xids else {}}
    merged: dict[str, dict[str, Any]] = {
        "pod": {"name": "trainer-0", "namespace": "ml", "phase": "Running"},
        "kernel": kernel,
        "gpus": {"count": 8, "lost": []},
        "node": {"name": "gpu-node-7", "gpu_capacity": 8},
    }
    for group, vals in values.items():
        merged[group] = {**merged[group], **vals}
    xid_lines = tuple(REF79 if x["code"] == 79 else REF48 for x in xids)
    cites: dict[str, dict[str, tuple[LineRef, ...]]] = {
        "kernel": {"xids": xid_lines},
        "gpus": {"lost": (LOST_REF,)},
    }
    return facts(merged, cites=cites)


def test_route_with_higher_priority_picks_the_entry(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(xid(79, "0000:3b:00", 412)))
    assert t.entry == "lost-gpu"
    assert t.entry_reason == "the kernel log of gpu-node-7 has Xid errors"
    t = walk(books, lost_facts())
    assert t.entry == "router"
    assert t.entry_reason == "everything starts here unless a more specific route matches"


def test_xid79_concludes_fallen_off_bus_citing_the_kernel_line(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(xid(79, "0000:3b:00", 412)))
    assert t.concluded and not t.undetermined and t.question is None
    (visit,) = t.visits
    assert (visit.ref, visit.outcome, visit.target) == (
        "lost-gpu/xid",
        Outcome.CONDITION,
        "finding:lost.fallen-off-bus",
    )
    assert visit.condition == "kernel.xids.exists(x, x.code == 79)"
    assert visit.because == "Xid 79 (fallen off the bus) on 0000:3b:00"
    assert visit.citations == (REF79,)
    (finding,) = t.findings
    assert finding.id == "lost.fallen-off-bus"
    assert finding.severity == "critical"
    assert finding.title == "GPU 0000:3b:00 fell off the bus"
    assert finding.fix.commands == (
        "kubectl drain gpu-node-7 --ignore-daemonsets --delete-emptydir-data",
        "ssh gpu-node-7 nvidia-smi -q -i 0000:3b:00",
    )
    assert finding.evidence == (REF79,)
    assert str(finding.evidence[0]).startswith(f"{DMESG}:412: [Tue Mar  4 02:13:55 2025] NVRM")
    assert (finding.playbook, finding.step) == ("lost-gpu", "xid")
    assert finding.references == ("https://docs.nvidia.com/deploy/xid-errors/index.html",)


def test_xid48_concludes_double_bit_ecc_with_extra_cited_paths(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(xid(48, "0000:86:00", 97), gpus={"lost": ["0000:3B:00.0"]}))
    (finding,) = t.findings
    assert finding.id == "lost.double-bit-ecc"
    # The condition reads kernel.xids; `cite: [gpus.lost]` adds nvidia-smi's line.
    assert t.visits[0].citations == (REF48, LOST_REF)


def test_no_lost_gpu_goes_through_the_router_and_every_step(books: PlaybookSet) -> None:
    t = walk(books, lost_facts())
    assert [(v.ref, v.outcome, v.target) for v in t.visits] == [
        ("router/phase", Outcome.CONDITION, "lost-gpu/xid"),
        ("lost-gpu/xid", Outcome.OTHERWISE, "lost-gpu/smi"),
        ("lost-gpu/smi", Outcome.OTHERWISE, "finding:lost.no-gpu-lost"),
    ]
    assert t.visits[1].because == "no Xid that loses a GPU"
    assert [f.id for f in t.findings] == ["lost.no-gpu-lost"]
    assert t.findings[0].fix.commands == ()


def test_ask_step_waits_then_takes_the_answer(books: PlaybookSet) -> None:
    fs = lost_facts(gpus={"count": 7})
    t = walk(books, fs)
    assert t.visits[-1].ref == "lost-gpu/reboot"
    assert t.visits[-1].outcome is Outcome.WAITING and t.visits[-1].target == ""
    assert t.visits[-2].because == "nvidia-smi sees 7 of 8 GPUs"
    assert t.findings == () and not t.concluded
    q = t.question
    assert q is not None
    assert q.ref == "lost-gpu/reboot"
    assert q.prompt == "Was gpu-node-7 rebooted after the GPU went missing?"
    assert q.help == "Check `uptime` on the node or its boot time in the node object."
    assert q.choices == (
        Choice("yes", "Yes, and the GPU is still missing", "finding:lost.needs-rma"),
        Choice("no", "Not yet", "finding:lost.reboot-first"),
    )
    for answer, finding in (("yes", "lost.needs-rma"), ("no", "lost.reboot-first")):
        t = walk(books, fs, answers={"lost-gpu/reboot": answer})
        assert t.question is None and [f.id for f in t.findings] == [finding]
        assert t.visits[-1].outcome is Outcome.ANSWER
        assert t.visits[-1].because.startswith("answered: ")


def test_an_answer_that_is_not_a_choice_is_a_warning_and_the_step_waits(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(gpus={"count": 7}), answers={"lost-gpu/reboot": "maybe"})
    assert t.question is not None
    assert t.warnings == ("answer 'maybe' for 'lost-gpu/reboot' is not one of: yes, no",)


def test_router_concludes_itself_with_templated_commands(books: PlaybookSet) -> None:
    fs = lost_facts(pod={"phase": "Pending", "name": "x; rm -rf /", "namespace": "team a"})
    t = walk(books, fs)
    (finding,) = t.findings
    assert finding.id == "router.not-running"
    assert finding.summary == "Pod team a/x; rm -rf / is Pending."
    assert finding.fix.commands == ("kubectl -n 'team a' describe pod 'x; rm -rf /'",)
    assert t.visits[0].outcome is Outcome.OTHERWISE
    assert t.visits[0].because == "the pod is Pending"


def test_unknown_branch_of_an_ask_step_asks_instead_of_stopping(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(ASK_ON_UNKNOWN)
    books = load_playbooks([tmp_path], known_facts=KNOWN, shipped=False, user_config=False)
    assert books.problems == ()
    fs = facts(unknown_groups={"gpus": "nvidia-smi: timeout"})
    t = walk(books, fs)
    assert t.question is not None and t.question.ref == "ask/lost"
    assert t.visits[0].outcome is Outcome.WAITING
    assert t.visits[0].unknown_facts == ("gpus",)
    t = walk(books, facts({"gpus": {"lost": ["0000:3b:00"]}}))
    assert [f.id for f in t.findings] == ["ask.lost"]


ASK_ON_UNKNOWN = """\
format_version: 1
id: ask
title: asks when nvidia-smi cannot tell
routes: [{when: "true"}]
start: lost
steps:
  lost:
    prompt: Is a GPU lost?
    branches:
      - {when: "size(gpus.lost) > 0", because: nvidia-smi says so, conclude: ask.lost}
    ask:
      question: Does the workload still see all its GPUs?
      choices:
        - {value: "all", label: "All of them", conclude: ask.fine}
        - {value: "fewer", label: "Fewer", conclude: ask.lost}
findings:
  ask.lost: {severity: high, title: lost, summary: lost, fix: {summary: reboot}}
  ask.fine: {severity: info, title: fine, summary: fine, fix: {summary: none}}
"""


def test_cross_playbook_goto_to_a_named_step(books: PlaybookSet) -> None:
    t = walk(
        books, lost_facts(pod={"phase": "Failed", "restarts": 5}), answers={"lost-gpu/reboot": "no"}
    )
    assert [v.ref for v in t.visits] == ["router/phase", "lost-gpu/reboot"]
    assert t.visits[0].because == "it failed after 5 restarts"


# -- unknown is not false -------------------------------------------------------------------


def test_unknown_group_stops_the_walk_undetermined_with_what_to_collect(books: PlaybookSet) -> None:
    reason = (
        "the node's kernel log (dmesg / journalctl -k): timeout: ssh gpu-node-7 did not "
        "answer in 10 s"
    )
    fs = facts(
        {
            "pod": {"phase": "Running"},
            "gpus": {"count": 8},
            "node": {"name": "gpu-node-7", "gpu_capacity": 8},
        },
        unknown_groups={"kernel": reason},
    )
    t = walk(books, fs)
    assert t.entry == "router"  # the lost-gpu route reads kernel: unknown is not a match
    visit = t.visits[-1]
    assert (visit.ref, visit.outcome, visit.target) == (
        "lost-gpu/xid",
        Outcome.UNKNOWN,
        "finding:undetermined",
    )
    assert visit.unknown_facts == ("kernel",)
    assert visit.because == f"cannot decide: unknown fact group 'kernel' ({reason})"
    assert t.undetermined and t.concluded
    (finding,) = t.findings
    assert finding.id == "undetermined" and finding.undetermined
    assert finding.collect_next == (f"kernel: {reason}",)
    assert (finding.playbook, finding.step) == ("lost-gpu", "xid")
    assert finding.summary.startswith(
        "The walk stopped at 'lost-gpu/xid' (Does the kernel log "
        "show a GPU-losing Xid?): cannot decide"
    )


def test_if_unknown_skip_falls_through_to_the_next_branch(books: PlaybookSet) -> None:
    fs = lost_facts(gpus={"lost": ["0000:3B:00.0"]})
    fs = FactSet(
        fs.target,
        {
            **fs.groups,
            "node": facts(
                unknown_groups={"node": "the pod's node object: forbidden: nodes is forbidden"}
            )["node"],
        },
    )
    t = walk(books, fs, entry="lost-gpu/smi")
    visit = t.visits[0]
    assert visit.outcome is Outcome.CONDITION
    assert visit.condition == "size(gpus.lost) > 0"
    assert visit.unknown_facts == ("node",)  # from `needs` and the skipped branch
    assert t.question is not None and t.question.ref == "lost-gpu/reboot"


def test_unknown_in_a_later_branch_without_skip_stops(books: PlaybookSet) -> None:
    fs = lost_facts()
    fs = FactSet(
        fs.target,
        {
            **fs.groups,
            "gpus": facts(
                unknown_groups={"gpus": "nvidia-smi -q -x on the node: unavailable: not in bundle"}
            )["gpus"],
        },
    )
    t = walk(books, fs, entry="lost-gpu/smi")
    assert t.visits[0].outcome is Outcome.UNKNOWN
    assert t.visits[0].condition == "size(gpus.lost) > 0"
    assert t.findings[0].collect_next == (
        "gpus: nvidia-smi -q -x on the node: unavailable: not in bundle",
    )


def test_a_group_without_facts_is_unknown_not_an_error(books: PlaybookSet) -> None:
    fs = lost_facts()
    without_kernel = FactSet(fs.target, {k: v for k, v in fs.groups.items() if k != "kernel"})
    t = walk(books, without_kernel)
    assert t.warnings == ()
    assert t.findings[0].collect_next == ("kernel: no facts were built for this group",)


def test_no_matching_route_is_undetermined(tmp_path: Path, books: PlaybookSet) -> None:
    only_lost = PlaybookSet({"lost-gpu": books.playbooks["lost-gpu"]})
    t = walk(only_lost, lost_facts())
    assert t.entry == "" and t.visits == ()
    (finding,) = t.findings
    assert finding.undetermined and finding.summary == "no playbook's route matches these facts."


def test_cel_runtime_error_is_a_warning_and_counts_as_unknown(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(RUNTIME_ERROR)
    books = load_playbooks([tmp_path], known_facts=KNOWN, shipped=False, user_config=False)
    assert books.problems == ()
    t = walk(books, lost_facts(pod={"name": "trainer-0"}))
    assert [f.id for f in t.findings] == ["rt.fallback"]  # the first branch was skipped
    assert t.warnings == (
        "step 'rt/check': condition `int(pod.name) > 3` could not be evaluated: "
        "RuntimeError: Function 'int' error: string parse error: invalid digit found in string",
    )
    t = walk(books, lost_facts(pod={"name": "12"}))
    assert [f.id for f in t.findings] == ["rt.big"] and t.warnings == ()


RUNTIME_ERROR = """\
format_version: 1
id: rt
title: run-time errors
routes: [{when: "true"}]
start: check
steps:
  check:
    prompt: Is the pod name a big number?
    branches:
      - when: int(pod.name) > 3
        because: big
        if_unknown: skip
        conclude: rt.big
    otherwise: {conclude: rt.fallback}
findings:
  rt.big: {severity: low, title: big, summary: big, fix: {summary: none}}
  rt.fallback: {severity: low, title: fallback, summary: fallback, fix: {summary: none},
                requires: pod.known}
"""


# -- overrides, entry, loops ----------------------------------------------------------------


def test_override_takes_another_branch_and_records_the_proposal(books: PlaybookSet) -> None:
    fs = lost_facts(xid(79, "0000:3b:00", 412))
    t = walk(books, fs, overrides={"lost-gpu/xid": "finding:lost.needs-rma"})
    (visit,) = t.visits
    assert visit.outcome is Outcome.OVERRIDE
    assert visit.target == "finding:lost.needs-rma"
    assert visit.proposed == "finding:lost.fallen-off-bus"
    assert visit.because == (
        "overridden by the SRE (the engine proposed: Xid 79 (fallen off the bus) on 0000:3b:00)"
    )
    assert [f.id for f in t.findings] == ["lost.needs-rma"]
    # The menu the TUI offers: every branch and the otherwise, in file order.
    assert [c.value for c in visit.choices] == [
        "finding:lost.fallen-off-bus",
        "finding:lost.double-bit-ecc",
        "lost-gpu/smi",
    ]


def test_override_to_a_step_and_on_an_undetermined_step(books: PlaybookSet) -> None:
    fs = facts({"pod": {"phase": "Running"}}, unknown_groups={"kernel": "dmesg: timeout"})
    t = walk(books, fs, overrides={"lost-gpu/xid": "smi"})
    assert t.visits[1].outcome is Outcome.OVERRIDE
    assert t.visits[1].proposed == "finding:undetermined"
    assert t.visits[2].ref == "lost-gpu/smi"
    assert [f.id for f in t.findings] == ["lost.no-gpu-lost"]


def test_bad_overrides_and_answers_are_warnings(books: PlaybookSet) -> None:
    t = walk(
        books,
        lost_facts(),
        answers={"lost-gpu/nope": "yes"},
        overrides={"router/phase": "finding:lost.nope", "router/nope": "x"},
    )
    assert t.warnings == (
        "answer for 'lost-gpu/nope': no such step (use playbook/step)",
        "override for 'router/nope': no such step (use playbook/step)",
        "override for 'router/phase' names no step or finding: 'finding:lost.nope'",
    )
    assert [f.id for f in t.findings] == ["lost.no-gpu-lost"]


def test_overrides_that_go_in_circles_end_the_walk_with_a_warning(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(), overrides={"lost-gpu/xid": "router"})
    assert [v.ref for v in t.visits] == ["router/phase", "lost-gpu/xid"]
    assert t.warnings == (
        "loop: step 'router/phase' was reached twice; the walk stops there "
        "(a playbook bug, or overrides that go in circles)",
    )
    assert t.undetermined


def test_entry_names_a_playbook_or_step(books: PlaybookSet) -> None:
    t = walk(books, lost_facts(), entry="lost-gpu")
    assert t.entry == "lost-gpu" and t.visits[0].ref == "lost-gpu/xid"
    assert t.entry_reason == "chosen by the caller: lost-gpu"
    t = walk(books, lost_facts(), entry="lost-gpu/nope")
    assert t.visits == () and t.undetermined
    assert t.warnings == ("entry 'lost-gpu/nope' names no loaded playbook or step",)


def test_walk_is_pure_and_repeatable(books: PlaybookSet) -> None:
    fs = lost_facts(xid(79, "0000:3b:00", 412))
    assert walk(books, fs) == walk(books, fs)
