"""What a headless bundle replay imports: exactly the modules it runs, and no more.

A fresh ``gputriage POD --from BUNDLE --report json`` (the playbook cache warm, as on every run
after the first) is listed module by module. A gputriage module or a third-party package that
is not in the lists below fails the test: importing it costs every run start-up time
(issue 16). If the replay path really needs it, add it here in the same change, and say why in
the commit; if it is only needed sometimes, import it where it is used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "gputriage" / "scenarios" / "lost-xid79"

#: Third-party top-level packages a replay may import: the compiled CEL extension only
#: (``cel.cel``, without the package's CLI). Not yaml (playbooks come from the cache, bundles
#: here are JSON), kubernetes, paramiko, textual, rich, urllib3, pynvml.
THIRD_PARTY = frozenset({"cel"})
#: Exactly these submodules of the third-party packages above.
THIRD_PARTY_MODULES = frozenset({"cel.cel"})

#: gputriage modules a replay may import (the CLI imports each command module to list its
#: options; those import nothing heavy). A JSON report needs no other renderer.
GPUTRIAGE = frozenset(
    {
        "gputriage",
        "gputriage.cli",
        "gputriage.errors",
        "gputriage.session",
        "gputriage.options",
        "gputriage.pipeline",
        "gputriage.prepared_walk",
        "gputriage.textsafe",
        # node evidence, GPU placement, jobs and GPU metrics history: facts every walk builds
        "gputriage.evidence.candidate_model",
        "gputriage.evidence.nodes",
        "gputriage.evidence.sources",
        "gputriage.facts.candidates",
        "gputriage.facts.gpu_assignment",
        "gputriage.facts.gpu_operator",
        "gputriage.facts.gpu_perf",
        "gputriage.facts.gpu_topology",
        "gputriage.facts.job",
        "gputriage.facts.lineref",
        "gputriage.facts.metrics",
        "gputriage.parsers.kubelet_checkpoint",
        "gputriage.parsers.nvidia_smi_perf",
        "gputriage.parsers.prom_series",
        "gputriage.report.gpu_section",
        # which sources do not apply to this pod (left out of "could not see"): job kinds
        "gputriage.report.source_states",
        "gputriage.evidence.job_target",
        "gputriage.commands",
        "gputriage.commands.collect",
        "gputriage.commands.demo",
        "gputriage.commands.facts",
        "gputriage.commands.node",
        "gputriage.commands.options",
        "gputriage.commands.playbooks",
        "gputriage.commands.scan",
        "gputriage.commands.triage",
        "gputriage.commands.xid",
        "gputriage.evidence",
        "gputriage.evidence.bundle",
        "gputriage.evidence.loose_files",
        "gputriage.evidence.model",
        "gputriage.facts",
        "gputriage.facts.build",
        "gputriage.facts.cluster",
        "gputriage.facts.container_log",
        "gputriage.facts.device_plugin",
        "gputriage.facts.dra",
        "gputriage.facts.events",
        "gputriage.facts.evidence_clock",
        "gputriage.facts.gpu_resources",
        "gputriage.facts.gpu_stack",
        "gputriage.facts.gpus",
        "gputriage.facts.host",
        "gputriage.facts.kernel",
        "gputriage.facts.kube_objects",
        "gputriage.facts.kubelet",
        "gputriage.facts.model",
        "gputriage.facts.node",
        "gputriage.facts.node_affinity",
        "gputriage.facts.owner_events",
        "gputriage.facts.pod",
        "gputriage.facts.quota",
        "gputriage.facts.registry",
        "gputriage.facts.scheduler",
        "gputriage.facts.tolerations",
        "gputriage.parsers",
        "gputriage.parsers.container_log",
        "gputriage.parsers.device_plugin",
        "gputriage.parsers.gpu_record",
        "gputriage.parsers.host",
        "gputriage.parsers.journal",
        "gputriage.parsers.kernel",
        "gputriage.parsers.nvidia_smi",
        "gputriage.parsers.nvidia_smi_table",
        "gputriage.parsers.nvidia_smi_text",
        "gputriage.parsers.nvidia_smi_values",
        "gputriage.parsers.nvidia_smi_xml",
        "gputriage.parsers.quantity",
        "gputriage.parsers.runtime_errors",
        "gputriage.parsers.scheduler",
        "gputriage.playbook",
        "gputriage.playbook.cel_runtime",
        "gputriage.playbook.conditions",
        "gputriage.playbook.engine",
        "gputriage.playbook.fix_render",
        "gputriage.playbook.load_cache",
        "gputriage.playbook.loader",
        "gputriage.playbook.mutating",
        "gputriage.playbook.model",
        "gputriage.playbook.parse",
        "gputriage.playbook.problems",
        "gputriage.playbook.references",
        "gputriage.playbook.source_map",
        "gputriage.playbook.templating",
        "gputriage.playbook.transcript",
        "gputriage.report",
        "gputriage.report.json",
        "gputriage.report.notes",
        "gputriage.report.redact",
        "gputriage.report.render",
        "gputriage.report.summary",
        "gputriage.report.write",
        "gputriage.xid",
        "gputriage.xid.catalog",
        "gputriage.xid.decode",
    }
)

_CHILD = """
import json, sys
from gputriage.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


def _replay(tmp_path: Path) -> tuple[int, list[str]]:
    meta = json.loads((SCENARIO / "pod.json").read_text())["metadata"]
    argv = [
        "triage",
        meta["name"],
        "-n",
        meta["namespace"],
        "--from",
        str(SCENARIO),
        "--report",
        "json",
        "-o",
        str(tmp_path / "report.json"),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return int(result["rc"]), list(result["modules"])


def test_a_headless_replay_imports_only_what_it_runs(tmp_path: Path) -> None:
    _replay(tmp_path)  # the first run fills the playbook cache
    rc, modules = _replay(tmp_path)
    assert rc == 0  # lost-xid79 concludes with a finding
    own = {m for m in modules if m.split(".")[0] == "gputriage"}
    others = {
        m
        for m in modules
        if m.split(".")[0] not in sys.stdlib_module_names
        and m.split(".")[0] not in ("gputriage", "__main__", "_distutils_hack")
    }
    assert "gputriage.playbook.engine" in own and "gputriage.report.json" in own
    assert sorted(own - GPUTRIAGE) == [], "new gputriage modules on the replay path"
    tops = {m.split(".")[0] for m in others}
    assert sorted(tops - THIRD_PARTY) == [], "new third-party packages on the replay path"
    assert sorted(others - THIRD_PARTY - THIRD_PARTY_MODULES) == [], (
        "new third-party modules on the replay path"
    )
