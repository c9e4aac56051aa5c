"""The loader: one fixture per error message, each at its exact ``file:line:col``; layering of
shipped and user playbooks; broken user playbooks skipped while the shipped ones keep working."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from playbook_facts import INVALID, KNOWN, VALID

from gputriage.playbook.loader import load_playbooks, parse_file, user_config_dir
from gputriage.playbook.model import SHAPES, PlaybookSet
from gputriage.playbook.parse import FactPaths, parse_playbook
from gputriage.playbook.source_map import parse_yaml

# (fixture, line, col, message, hint): the message text is API (docs and users rely on it).
CASES = [
    (
        "ask-and-otherwise",
        21,
        5,
        "step 'smi' has both 'ask' and 'otherwise': the question is "
        "what happens when no branch holds; keep one",
        "",
    ),
    (
        "bad-choice-value",
        24,
        18,
        "choice value 'not sure' has characters that do not fit in "
        "--answer STEP=VALUE (use letters, digits, '-', '_', '.', '+')",
        "",
    ),
    (
        "bad-enum",
        4,
        11,
        "'maturity' must be one of: stable, beta, experimental; got 'stabel'",
        "did you mean 'stable'?",
    ),
    ("bad-finding-id", 38, 3, "finding id 'AllVisible' is not 'family.kebab-case'", ""),
    (
        "bad-playbook-id",
        2,
        5,
        "playbook id 'Lost_Mini' is not kebab-case (lowercase words joined by '-')",
        "",
    ),
    (
        "bad-severity",
        25,
        15,
        "'severity' must be one of: critical, high, medium, low, info; got 'urgent'",
        "",
    ),
    ("bad-step-id", 6, 3, "step id 'Xid_Check' is not kebab-case", ""),
    (
        "bool-choice-value",
        24,
        18,
        "'value' of choice 1 of 'ask' of step 'smi' must be a string, got a boolean",
        "quote it to make it a string",
    ),
    ("cel-syntax", 18, 48, "CEL syntax error: the condition ends where CEL expects an operand", ""),
    ("cel-syntax-folded", 20, 25, "CEL syntax error: token recognition error at: '= '", ""),
    ("cel-syntax-literal", 20, 29, "CEL syntax error: extraneous input ')' expecting <EOF>", ""),
    (
        "cel-syntax-quoted",
        18,
        71,
        "CEL syntax error: the condition ends where CEL expects an operand",
        "",
    ),
    (
        "conclude-missing-finding",
        15,
        19,
        "'conclude' names a finding that does not exist: 'lost.falen-off-bus'",
        "did you mean 'lost.fallen-off-bus'?",
    ),
    (
        "duplicate-key",
        17,
        5,
        "duplicate key 'prompt'",
        "first defined at line 16; YAML would silently keep the last one",
    ),
    ("empty", 0, 0, "the file is empty: a playbook is a YAML mapping", ""),
    (
        "format-version",
        1,
        17,
        "unsupported format_version 2: this gputriage reads format_version 1",
        "",
    ),
    ("format-version-missing", 1, 1, "the playbook is missing required key 'format_version'", ""),
    (
        "goto-and-conclude",
        12,
        9,
        "branch 1 of step 'xid' has both 'goto' and 'conclude': keep one",
        "",
    ),
    (
        "goto-missing-playbook",
        15,
        15,
        "'goto' names a playbook that does not exist: 'lost-gpus'",
        "",
    ),
    (
        "goto-missing-step",
        15,
        15,
        "'goto' names a step that does not exist: 'smy'",
        "did you mean 'smi'?",
    ),
    (
        "goto-missing-step-other",
        15,
        15,
        "'goto' names a step of 'lost-mini' that does not exist: 'smy'",
        "did you mean 'smi'?",
    ),
    ("missing-because", 10, 9, "branch 1 of step 'xid' is missing required key 'because'", ""),
    ("missing-required", 1, 1, "the playbook is missing required key 'start'", ""),
    (
        "mutating-command-string",
        31,
        11,
        "command can change state (kubectl drain) but is not marked 'mutates: true'",
        "write it as a record: {cmd: ..., run: ..., mutates: true, why: ...}",
    ),
    (
        "mutating-command-unmarked",
        31,
        17,
        "command can change state (kubectl cordon) but is not marked 'mutates: true'",
        "add 'mutates: true' and say in 'why' what it disrupts",
    ),
    ("no-target", 18, 9, "branch 1 of step 'smi' needs one of 'goto' or 'conclude'", ""),
    ("not-a-mapping", 1, 1, "a playbook is a YAML mapping, got a list", ""),
    ("second-document", 45, 1, "a playbook file holds one YAML document; this is a second one", ""),
    ("self-loop", 15, 15, "'goto' leads back to step 'xid' itself: the walk would loop", ""),
    (
        "start-missing",
        4,
        8,
        "'start' names a step that does not exist: 'xdi'",
        "did you mean 'xid'?",
    ),
    (
        "step-without-exit",
        18,
        3,
        "step 'dead-end' has no 'branches', 'otherwise' or 'ask': the walk could never leave it",
        "",
    ),
    (
        "template-in-quotes",
        31,
        41,
        "template inside quotes: values are shell-quoted already; remove the quotes around it",
        "",
    ),
    (
        "template-malformed",
        31,
        33,
        "template '{{ node name }}' is not a fact path like '{{pod.namespace}}'",
        "",
    ),
    ("template-unclosed", 27, 24, "unclosed template: '{{' without '}}'", ""),
    ("template-unknown-fact", 31, 33, "unknown fact 'node.nmae'", "did you mean 'node.name'?"),
    (
        "unknown-branch-key",
        12,
        9,
        "unknown key 'if_unkown' in branch 1 of step 'xid'",
        "did you mean 'if_unknown'?",
    ),
    (
        "unknown-cite",
        12,
        16,
        "unknown fact 'kernel.latest_xdi'",
        "did you mean 'kernel.latest_xid'?",
    ),
    ("unknown-fact", 10, 15, "unknown fact 'kernel.xdis'", "did you mean 'kernel.xids'?"),
    ("unknown-fact-group", 18, 28, "unknown fact group 'nodes'", "did you mean 'node'?"),
    (
        "unknown-fact-literal",
        20,
        26,
        "unknown fact 'node.gpu_capcity'",
        "did you mean 'node.gpu_capacity'?",
    ),
    ("unknown-key", 17, 5, "unknown key 'brnaches' in step 'smi'", "did you mean 'branches'?"),
    ("unknown-needs", 8, 13, "unknown fact group 'kernal'", "did you mean 'kernel'?"),
    ("unreachable-step", 15, 3, "step 'smi' is not reachable from 'start' ('xid')", ""),
    ("unused-finding", 39, 3, "finding 'lost.all-visible' is never concluded by any branch", ""),
    (
        "wrong-kind",
        8,
        12,
        "'needs' of step 'xid' must be a list of strings, got a string",
        "write a list: [kernel]",
    ),
    (
        "cel-too-long",
        18,
        15,
        "the condition is 4694 characters long: at most 4096; split it into steps",
        "",
    ),
    ("cel-too-deep", 18, 31, "brackets nested more than 16 deep", ""),
    (
        "cel-too-many-operators",
        18,
        273,
        "more than 64 operators in one condition; split it into steps",
        "",
    ),
    (
        "cel-macro-nesting",
        18,
        97,
        "'exists' nests macros more than 3 deep: a walk could run for minutes",
        "",
    ),
    (
        "cel-same-list-nesting",
        18,
        65,
        "'all' iterates 'kernel.xids' inside 2 macros over it "
        "already: a walk over a long list could run for minutes",
        "",
    ),
    (
        "cel-too-many-macros",
        18,
        339,
        "more than 8 macros in one condition; split it into steps",
        "",
    ),
    ("cel-literal-too-long", 18, 274, "a literal of more than 64 items", ""),
    (
        "yaml-alias",
        16,
        13,
        "YAML aliases are not allowed in playbooks",
        "'*question' repeats the node anchored as '&question'; write the value out instead",
    ),
    (
        "yaml-too-deep",
        19,
        75,
        "nesting deeper than 64 levels",
        "a playbook is never nested this deeply",
    ),
    (
        "yaml-syntax",
        9,
        13,
        "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence)",
        "a flow sequence started at line 8, column 12",
    ),
]


def load_alone(*paths: Path) -> PlaybookSet:
    return load_playbooks(list(paths), known_facts=KNOWN, shipped=False, user_config=False)


def test_every_invalid_fixture_has_a_case() -> None:
    assert sorted(p.stem for p in INVALID.glob("*.yaml")) == sorted(c[0] for c in CASES)


@pytest.mark.parametrize(
    ("name", "line", "col", "message", "hint"), CASES, ids=[c[0] for c in CASES]
)
def test_invalid_fixture_is_reported_at_its_place(
    name: str, line: int, col: int, message: str, hint: str
) -> None:
    path = INVALID / f"{name}.yaml"
    result = load_alone(path)
    assert len(result) == 0
    assert [(p.file, p.line, p.col, p.message, p.hint) for p in result.problems] == [
        (str(path), line, col, message, hint)
    ]


def test_problem_renders_the_line_with_a_caret_under_the_token() -> None:
    (problem,) = load_alone(INVALID / "goto-missing-step.yaml").problems
    where = f"{INVALID / 'goto-missing-step.yaml'}:15:15"
    assert problem.render().splitlines() == [
        f"{where}: error: 'goto' names a step that does not exist: 'smy'",
        "   |",
        "15 |         goto: smy",
        "   |               ^^^",
        "   = help: did you mean 'smi'?",
    ]
    assert (
        str(problem) == f"{where}: 'goto' names a step that does not exist: 'smy' "
        "(did you mean 'smi'?)"
    )


def test_cel_error_in_a_literal_block_points_into_the_block() -> None:
    (problem,) = load_alone(INVALID / "cel-syntax-literal.yaml").problems
    assert problem.source_line == "            (gpus.count > 0))"
    assert problem.source_line[problem.col - 1] == ")"


def test_unknown_fact_underlines_the_whole_path() -> None:
    (problem,) = load_alone(INVALID / "unknown-fact-literal.yaml").problems
    start = problem.col - 1
    assert problem.source_line[start : start + problem.length] == "node.gpu_capcity"


def test_valid_fixtures_load_compiled_and_resolved() -> None:
    result = load_alone(VALID)
    assert result.problems == ()
    assert list(result.playbooks) == ["lost-gpu", "router"]
    lost = result.playbooks["lost-gpu"]
    assert lost.maturity == "experimental" and lost.tags == ("lost", "fixture")
    assert list(lost.steps) == ["xid", "smi", "reboot"]
    assert len(lost.findings) == 5
    assert lost.routes[0].priority == 10
    assert lost.routes[0].when.paths == ("kernel.known", "kernel.xids")
    router = result.playbooks["router"].steps["phase"]
    # A goto to another playbook resolves to its start step; playbook/step stays as written.
    assert [b.target.ref for b in router.branches] == ["lost-gpu/xid", "lost-gpu/reboot"]
    assert router.otherwise is not None
    assert router.otherwise.target.ref == "finding:router.not-running"
    # Block scalars lose their trailing newline; the literal condition keeps its own lines.
    assert lost.findings["lost.fallen-off-bus"].summary.endswith("PCIe problem.")
    assert lost.steps["xid"].branches[1].when.source == ("kernel.xids.exists(x,\n  x.code == 48)")


def test_a_goto_to_a_playbook_that_failed_to_load_is_reported_too(tmp_path: Path) -> None:
    broken = tmp_path / "lost.yaml"
    broken.write_text(
        (VALID / "lost-gpu.yaml").read_text().replace("maturity: experimental", "maturity: alpha")
    )
    result = load_alone(broken, VALID / "router.yaml")
    assert list(result.playbooks) == []
    messages = [p.message for p in result.problems]
    assert "'maturity' must be one of: stable, beta, experimental; got 'alpha'" in messages
    assert "'goto' names a playbook that does not exist: 'lost-gpu'" in messages


def test_duplicate_playbook_id_in_one_layer_keeps_the_first(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    text = (VALID / "router.yaml").read_text()
    (d / "a.yaml").write_text(text.replace("goto: lost-gpu/reboot", "goto: lost-gpu/smi"))
    (d / "b.yaml").write_text(text)
    result = load_alone(VALID / "lost-gpu.yaml", d)
    assert list(result.playbooks) == ["lost-gpu", "router"]
    assert result.playbooks["router"].file == str(d / "a.yaml")
    (problem,) = result.problems
    assert (problem.file, problem.line, problem.col) == (str(d / "b.yaml"), 3, 5)
    assert problem.message == f"playbook id 'router' is already defined in {d / 'a.yaml'}"


def test_duplicate_finding_id_across_playbooks(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text((VALID / "router.yaml").read_text().replace("id: router", "id: router-two"))
    result = load_alone(VALID, other)
    assert list(result.playbooks) == ["lost-gpu", "router"]
    (problem,) = result.problems
    assert (problem.file, problem.line, problem.col) == (str(other), 25, 3)
    assert problem.message == (
        "finding id 'router.not-running' is already defined in "
        f"playbook 'router' ({VALID / 'router.yaml'})"
    )


def test_unreadable_files_are_problems_not_crashes(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"# " + b"x" * (1024 * 1024))
    missing = tmp_path / "nowhere"
    result = load_alone(binary, huge, missing)
    assert [(p.file, p.line, p.message) for p in result.problems] == [
        (str(binary), 0, "not UTF-8 text (byte 0)"),
        (str(huge), 0, "1048578 bytes: bigger than a playbook can be (1048576)"),
        (str(missing), 0, "no such playbook file or directory"),
    ]


def test_parse_file_checks_one_file_without_cross_references() -> None:
    parsed = parse_file(VALID / "router.yaml", known_facts=KNOWN)
    assert parsed.problems == []
    assert parsed.playbook is not None and parsed.playbook.id == "router"
    assert [t.raw for _, t in parsed.sites] == ["lost-gpu", "lost-gpu/reboot", "router.not-running"]


# -- layering: shipped, user config dir, --playbooks ------------------------------------------


def _shipped_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the valid fixtures the 'shipped' playbooks (the loader reads this function)."""
    from gputriage.playbook import loader

    monkeypatch.setattr(loader, "shipped_sources", lambda: loader._sources_in(VALID, []))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "gputriage" / "playbooks"


def test_user_config_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_config_dir() == tmp_path / "gputriage" / "playbooks"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert user_config_dir() == Path.home() / ".config" / "gputriage" / "playbooks"


def test_user_playbook_overrides_shipped_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _shipped_stand_in(tmp_path, monkeypatch)
    config.mkdir(parents=True)
    text = (VALID / "router.yaml").read_text()
    (config / "router.yaml").write_text(text.replace("title: Fixture router", "title: Mine"))
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "router.yaml").write_text(text.replace("title: Fixture router", "title: Extra"))
    result = load_playbooks([extra], known_facts=KNOWN)
    assert result.problems == ()
    assert list(result.playbooks) == ["lost-gpu", "router"]
    # --playbooks beats the config dir, which beats the shipped file.
    assert result.playbooks["router"].title == "Extra"
    assert result.playbooks["router"].shipped is False
    assert result.playbooks["lost-gpu"].shipped is True
    assert load_playbooks(known_facts=KNOWN).playbooks["router"].title == "Mine"


def test_broken_user_playbook_is_skipped_and_shipped_ones_keep_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _shipped_stand_in(tmp_path, monkeypatch)
    config.mkdir(parents=True)
    text = (VALID / "router.yaml").read_text()
    (config / "router.yaml").write_text(
        text.replace('pod.phase == "Running"', 'pod.phase == "Running')
    )
    (config / "mine.yaml").write_text(
        text.replace("id: router", "id: mine")
        .replace("router.not-running", "mine.not-running")
        .replace("goto: lost-gpu/reboot", "goto: lost-gpu/rebot")
    )
    result = load_playbooks(known_facts=KNOWN)
    assert list(result.playbooks) == ["lost-gpu", "router"]
    assert result.playbooks["router"].shipped is True  # the shipped one is back in place
    assert [(Path(p.file).name, p.line, p.col, p.message) for p in result.problems] == [
        ("mine.yaml", 20, 15, "'goto' names a step of 'lost-gpu' that does not exist: 'rebot'"),
        ("router.yaml", 15, 28, "CEL syntax error: token recognition error at: '\"Running'"),
    ]


OVERRIDE_WITHOUT_REBOOT = """\
format_version: 1
id: lost-gpu
title: Site-specific lost-GPU check
start: xid
steps:
  xid:
    prompt: Any Xid?
    branches:
      - when: size(kernel.xids) > 0
        because: Xid errors
        conclude: lost.site-xid
    otherwise:
      conclude: lost.site-xid
findings:
  lost.site-xid:
    requires: kernel.known
    severity: high
    title: Xid errors
    summary: Call the site team.
    fix:
      summary: Page hardware on-call.
"""


def test_override_that_drops_a_step_a_shipped_playbook_needs_is_blamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _shipped_stand_in(tmp_path, monkeypatch)
    config.mkdir(parents=True)
    # Valid on its own, but without the 'reboot' step that shipped 'router' goes to.
    (config / "lost.yaml").write_text(OVERRIDE_WITHOUT_REBOOT)
    result = load_playbooks(known_facts=KNOWN)
    assert list(result.playbooks) == ["lost-gpu", "router"]
    assert result.playbooks["lost-gpu"].shipped is True
    (problem,) = result.problems
    assert problem.file == str(config / "lost.yaml")
    assert (problem.line, problem.col) == (2, 5)
    assert problem.message == (
        "overrides shipped playbook 'lost-gpu' but has no step 'reboot', which shipped "
        f"playbook 'router' goes to ({VALID / 'router.yaml'}:20:15)"
    )


# -- never raises -----------------------------------------------------------------------------

_KEYS = sorted({k for shape in SHAPES.values() for k in shape.keys} | {"xid", "lost.x"})
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.sampled_from(
        ["kernel.xids.exists(x, x.code == 79)", "xid", "lost.x", "critical", "{{node.name}}", "(("]
    ),
)
_DATA = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_problems_not_exceptions(text: str) -> None:
    data, smap, problems = parse_yaml(text, "fuzz.yaml")
    if not problems:
        parse_playbook(data, smap, FactPaths(KNOWN))


@settings(max_examples=150, deadline=None)
@given(_DATA)
def test_any_structure_gives_problems_not_exceptions(data: object) -> None:
    text = yaml.safe_dump(data)
    parsed_data, smap, problems = parse_yaml(text, "fuzz.yaml")
    assert problems == []
    result = parse_playbook(parsed_data, smap, FactPaths(KNOWN))
    assert result.playbook is not None or result.problems
