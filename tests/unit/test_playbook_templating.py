"""``{{group.field}}`` templates: filled from facts, placeholders for what is missing, and
shell-quoted where they land in commands."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from gputriage.playbook.templating import lookup, quoted_templates, render, template_refs

CONTEXT = {
    "pod": {
        "known": True,
        "reason": "",
        "name": "trainer-0",
        "namespace": "ml",
        "gpu_resources": {"nvidia.com/gpu": 2},
        "containers": [{"name": "main"}],
        "restarts": 0,
        "ready": False,
        "node": "",
    },
    "kernel": {
        "known": True,
        "reason": "",
        "latest_xid": {"code": 79, "pci": "0000:3b:00"},
        "codes": [79, 48],
    },
    "gpus": {"known": False, "reason": "nvidia-smi: timeout", "count": 0},
}


def test_values_fill_in_and_missing_ones_become_placeholders() -> None:
    text = (
        "{{pod.namespace}}/{{pod.name}} on {{pod.node}} xid {{kernel.latest_xid.code}} at "
        "{{kernel.latest_xid.pci}}; {{gpus.count}} GPUs; first {{pod.containers.0.name}}, "
        "{{pod.containers.5.name}}, {{nope.x}}"
    )
    assert render(text, CONTEXT) == (
        "ml/trainer-0 on <pod.node> xid 79 at 0000:3b:00; <gpus.count> GPUs; first main, "
        "<pod.containers.5.name>, <nope.x>"
    )


def test_scalars_maps_and_lists_in_words() -> None:
    assert (
        render("{{pod.restarts}} {{pod.ready}} {{pod.gpu_resources}} {{kernel.codes}}", CONTEXT)
        == "0 false nvidia.com/gpu=2 79, 48"
    )
    assert render("{{pod.containers}}", CONTEXT) == '[{"name":"main"}]'


def test_commands_shell_quote_every_value() -> None:
    hostile = {
        "pod": {"known": True, "name": "x; rm -rf / #", "namespace": "$(id)", "node": "gpu-7"}
    }
    command = render(
        "kubectl -n {{pod.namespace}} logs {{pod.name}} --field={{pod.node}}", hostile, shell=True
    )
    assert command == "kubectl -n '$(id)' logs 'x; rm -rf / #' --field=gpu-7"
    assert shlex.split(command) == [
        "kubectl",
        "-n",
        "$(id)",
        "logs",
        "x; rm -rf / #",
        "--field=gpu-7",
    ]


@given(st.text(min_size=1, max_size=40))
def test_any_value_stays_one_shell_word(value: str) -> None:
    ctx = {"pod": {"known": True, "name": value}}
    words = shlex.split(render("kubectl logs {{pod.name}}", ctx, shell=True))
    assert words == ["kubectl", "logs", value]


def test_lookup_of_unknown_group_or_empty_value_is_none() -> None:
    assert lookup(CONTEXT, "gpus.count") is None
    assert lookup(CONTEXT, "pod.node") is None
    assert lookup(CONTEXT, "pod.restarts") == 0


def test_template_refs_and_their_errors() -> None:
    refs, errors = template_refs("a {{ pod.name }} b {{pod}} c {{x.y")
    assert [(r.path, r.offset, r.length) for r in refs] == [("pod.name", 2, 14)]
    assert [(e.offset, e.length, e.message) for e in errors] == [
        (19, 7, "template '{{pod}}' is not a fact path like '{{pod.namespace}}'"),
        (29, 2, "unclosed template: '{{' without '}}'"),
    ]


def test_templates_inside_quotes_are_found() -> None:
    command = (
        "ssh {{pod.node}} 'journalctl | grep {{pod.name}}' \"{{pod.uid}}\" it\\'s {{pod.namespace}}"
    )
    assert [r.path for r in quoted_templates(command)] == ["pod.name", "pod.uid"]
