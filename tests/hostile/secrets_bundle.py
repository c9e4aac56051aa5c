"""A real bundle (the lost-Xid-79 demo scenario) with a secret planted in every place and form.

The planted forms of :mod:`tests.hostile.secrets` go into the pod's env (a compact, one-line
``pod.json``, as ``kubectl get -o json | jq -c`` writes it), its annotations (a PEM key longer
than a citation is cut to), event messages (coloured) and the container log (each line, and
key blocks line by line), where the parsers and the walk pick them up.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gputriage.scenarios import scenario_path
from tests.hostile.secrets import BLOCKS, ENV, PEM, PLANTED

SCENARIO = "lost-xid79"


def write_secrets_bundle(root: Path) -> Path:
    bundle = root / "secrets-bundle"
    shutil.copytree(scenario_path(SCENARIO), bundle)
    pod = json.loads((bundle / "pod.json").read_text())
    container = pod["spec"]["containers"][0]
    container["env"] = [{"name": n, "value": v} for n, v in ENV] + container.get("env", [])
    container.setdefault("args", []).extend(["--api-key=ApiSECRET09", "--password", "PwSECRET08"])
    notes = pod["metadata"].setdefault("annotations", {})
    notes.update({f"example.com/planted-{i}": text for i, (text, _) in enumerate(PLANTED)})
    notes["example.com/tls-key"] = PEM
    (bundle / "pod.json").write_text(json.dumps(pod, separators=(",", ":")))  # one line

    events = json.loads((bundle / "events.json").read_text())
    template = events["items"][-1]
    for i, (text, _) in enumerate(PLANTED):
        events["items"].append(
            {
                **template,
                "metadata": {**template["metadata"], "name": f"planted.{i}"},
                "type": "Warning",
                "reason": "Failed",
                "message": f"\x1b[33mError: {text}\x1b[0m",
            }
        )
    (bundle / "events.json").write_text(json.dumps(events, separators=(",", ":")))

    lines = [f"\x1b[31mRuntimeError: CUDA error: {text}\x1b[0m" for text, _ in PLANTED]
    lines += [ln for block, _ in BLOCKS for ln in block.splitlines()]
    lines += ["RuntimeError: CUDA error: an illegal memory access was encountered"]
    with (bundle / "container.log").open("a") as fh:
        fh.write("".join(f"{line}\n" for line in lines))
    return bundle
