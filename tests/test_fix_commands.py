"""Fix commands as data, and templates that never leak a ``<placeholder>`` (issue 14).

* every shipped fix command is a record with ``run`` and ``mutates`` (read from the YAML as
  written, not from the loaded objects, so a default cannot hide a missing key);
* the mutating-verb check the loader applies (:mod:`gputriage.playbook.mutating`);
* rendering: ``run: node`` gets ``ssh NODE`` with the node quoted, a command whose facts are
  unknown uses its ``if_unknown`` variant or is left out with the facts it needed;
* the walk over every shipped case (tests/playbook_cases) renders every text and command of
  every finding reached, every visit's reason, and finds no ``<group.field>`` and no ``{{``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputriage.playbook.fix_render import render_command
from gputriage.playbook.model import CommandSpec
from gputriage.playbook.mutating import mutating_reason
from tests.test_playbook_cases import CASES, run_case

PLAYBOOKS = Path(__file__).resolve().parent.parent / "playbooks"
PLACEHOLDER = re.compile(r"<[a-z_]+(?:\.[A-Za-z0-9_]+)+>|\{\{")


def _shipped_commands() -> list[tuple[str, str, Any]]:
    out = []
    for file in sorted(PLAYBOOKS.glob("*.yaml")):
        data = yaml.safe_load(file.read_text())
        for fid, finding in (data.get("findings") or {}).items():
            for i, command in enumerate(finding["fix"].get("commands") or ()):
                out.append((file.name, f"{fid}[{i}]", command))
    return out


SHIPPED = _shipped_commands()


def test_every_shipped_command_is_a_record_with_run_and_mutates() -> None:
    assert len(SHIPPED) > 300
    bad = [
        f"{f} {where}"
        for f, where, c in SHIPPED
        if not isinstance(c, dict)
        or c.get("run") not in ("local", "node", "cluster")
        or not isinstance(c.get("mutates"), bool)
    ]
    assert bad == []


def test_every_shipped_mutating_command_says_why() -> None:
    """A command that changes state carries its reason or caveat for the SRE."""
    missing = [
        f"{f} {where}: {c['cmd']}" for f, where, c in SHIPPED if c["mutates"] and not c.get("why")
    ]
    assert missing == []


def test_node_commands_are_written_without_ssh() -> None:
    """``run: node`` gets ``ssh NODE`` when rendered; a hand-written one would be doubled."""
    assert [
        c["cmd"] for _, _, c in SHIPPED if c["run"] == "node" and c["cmd"].startswith("ssh ")
    ] == []


@pytest.mark.parametrize(
    "command",
    [
        "kubectl -n ml delete pod trainer-0",
        "kubectl --context prod cordon gpu-7",
        "kubectl drain gpu-7 --ignore-daemonsets",
        "kubectl label node gpu-7 nvidia.com/mig.config=all-1g.10gb --overwrite",
        "kubectl -n gpu-operator set env ds/nvidia-device-plugin-daemonset X=1",
        "helm install nvdp nvdp/nvidia-device-plugin",
        "sudo systemctl restart containerd",
        "sudo nvidia-smi --gpu-reset -i 0000:3b:00.0",
        "nvidia-smi -i 0 -mig 1",
        "sudo modprobe nvidia-uvm",
        "printf 'nvidia\\n' | sudo tee /etc/modules-load.d/nvidia.conf",
        "sudo nvidia-ctk runtime configure --runtime=containerd",
        "echo 1 > /proc/sys/vm/drop_caches",
        "sudo reboot",
        "ls /tmp && rm -rf /tmp/x",
        "kubectl -n gpu-operator exec ds/nvidia-driver-daemonset -- nvidia-smi -r",
        "sudo dkms autoinstall",
    ],
)
def test_mutating_commands_are_recognised(command: str) -> None:
    assert mutating_reason(command)


@pytest.mark.parametrize(
    "command",
    [
        "kubectl -n ml get pod trainer-0 -o yaml",
        'kubectl describe node gpu-7 | grep -A8 -E "^(Capacity|Allocatable)"',
        "kubectl -n ml logs trainer-0 --previous --tail=200",
        "sudo journalctl -k --since -6h --no-pager --grep 'NVRM|Xid'",
        "nvidia-smi --query-gpu=index,uuid,pci.bus_id,serial --format=csv",
        "nvidia-smi -q -d ECC,ROW_REMAPPER",
        "nvidia-ctk cdi list",
        "sudo containerd config dump | grep -n -A4 runtimes.nvidia",
        "dkms status",
        "kubectl -n gpu-operator exec ds/nvidia-driver-daemonset -- nvidia-smi -L",
        "grep -n '>' /etc/containerd/config.toml",
        "systemctl status nvidia-fabricmanager",
    ],
)
def test_read_only_commands_are_not_flagged(command: str) -> None:
    assert mutating_reason(command) == ""


def _context(**groups: dict[str, Any]) -> dict[str, Any]:
    return {name: {"known": True, **values} for name, values in groups.items()}


def test_node_command_gets_ssh_and_a_quoted_node_name() -> None:
    hostile = "gpu-7; rm -rf ~"
    spec = CommandSpec("sudo journalctl -k --grep 'Xid|NVRM'", run="node")
    out = render_command(spec, _context(pod={"node": hostile}))
    words = shlex.split(out.text)
    assert words[:2] == ["ssh", hostile]  # one word, however hostile
    assert words[2:] == ["sudo journalctl -k --grep 'Xid|NVRM'"]  # one remote argument
    assert out.run == "node" and not out.mutates


def test_node_command_prefers_node_name_and_falls_back_to_a_placeholder() -> None:
    spec = CommandSpec("nvidia-smi -L", run="node")
    assert (
        render_command(spec, _context(node={"name": "gpu-1"}, pod={"node": "gpu-2"})).text
        == "ssh gpu-1 nvidia-smi -L"
    )
    assert render_command(spec, {"pod": {"known": False}}).text == "ssh NODE nvidia-smi -L"


def test_command_with_an_unknown_fact_uses_its_variant_or_is_left_out() -> None:
    spec = CommandSpec(
        "kubectl -n {{device_plugin.pod_namespace}} logs {{device_plugin.pod_name}}",
        run="cluster",
        if_unknown="kubectl get pods -A -o wide --field-selector spec.nodeName={{pod.node}}",
    )
    ctx = _context(pod={"node": "gpu-3"}, device_plugin={"pod_name": "", "pod_namespace": ""})
    assert (
        render_command(spec, ctx).text
        == "kubectl get pods -A -o wide --field-selector spec.nodeName=gpu-3"
    )
    bare = CommandSpec(spec.cmd, run="cluster", mutates=True, why="restart it")
    out = render_command(bare, ctx)
    assert out.text == ""
    assert out.missing == ("device_plugin.pod_namespace", "device_plugin.pod_name")
    assert out.mutates and out.why == "restart it"


def test_template_alternatives_pick_the_first_known_value() -> None:
    from gputriage.playbook.templating import render

    text = "cordon {{node.name|pod.node|NODE}} ({{node.capacity|not collected}})"
    assert render(text, _context(pod={"node": "gpu-9"})) == "cordon gpu-9 (not collected)"
    assert render(text, {}) == "cordon NODE (not collected)"


def _outputs(tr: Any) -> list[str]:
    texts = [tr.entry_reason]
    for f in tr.findings:
        texts += [
            f.title,
            f.summary,
            f.fix.summary,
            *f.fix.commands,
            *(r.why for r in f.fix.records),
            *f.collect_next,
        ]
    for v in tr.visits:
        texts += [v.prompt, v.because]
    if tr.question is not None:
        texts += [tr.question.prompt, tr.question.help, *(c.label for c in tr.question.choices)]
    return texts


def test_no_placeholder_reaches_the_output_of_any_shipped_case(tmp_path: Path) -> None:
    """Every finding reached by every shipped case renders total: no ``<fact>``, no ``{{``."""
    leaks: list[str] = []
    reached: set[str] = set()
    for n, (label, case) in enumerate(CASES):
        tr = run_case(case, tmp_path / str(n))
        reached |= {f.id for f in tr.findings}
        leaks += [f"{label}: {m}" for t in _outputs(tr) for m in PLACEHOLDER.findall(t or "")]
    assert len(reached) > 100  # the walk really reached the shipped findings
    assert leaks == []
