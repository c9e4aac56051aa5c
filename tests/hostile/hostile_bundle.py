"""A real bundle (the lost-Xid-79 demo scenario) laced with hostile text everywhere it can be.

Markup, terminal escapes (colours, an OSC title change, an OSC 52 clipboard write, an 8-bit
CSI, screen clears), a carriage return, and Markdown that tries to break out of its block, in:
the pod's name, its events, the container log, the kubelet journal, the kernel log (as an Xid
line's process name) and the device-plugin log. Each hostile line keeps the shape that makes
the parsers pick it up, so it reaches the facts, the walk, the tables and the exports.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from gputriage.scenarios import scenario_path

MARKUP = "[bold red]boom[/]"
#: Terminal escapes whose payloads ("pwned", "ZXZpbA==") must never reach a terminal.
ESCAPES = (
    "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x9b6n "
    "\x1b[2J\x1b[H \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \rback"
)
#: Markdown that would add a heading, raw HTML and a link if it escaped its code block.
MARKDOWN = "```\n# injected-heading\n<img src=x onerror=alert(1)>\n[click](https://evil.example)"
#: Live escape sequences that must not appear anywhere a terminal or a ticket renders them.
#: (Their text, as a JSON line cites it with ``\\u001b`` spelled out, is inert and may.)
PAYLOADS = ("\x1b]0;pwned", "\x1b]52;", "\x07", "\x9b", "\x1b[2J", "\x1b]8;;https://evil")
#: Not a valid Kubernetes name, but a hand-assembled or pasted bundle can hold anything.
POD_NAME = f"llama-{MARKUP}-[x](https://evil.example)-3"
SCENARIO = "lost-xid79"


def _event(pod: dict[str, Any], name: str, reason: str, message: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": 3,
        "metadata": {"name": f"hostile.{name}", "namespace": meta["namespace"]},
        "involvedObject": {
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "firstTimestamp": "2024-08-13T10:41:00Z",
        "lastTimestamp": "2024-08-13T10:41:20Z",
        "source": {"component": "kubelet", "host": "gpu-h100-07"},
    }


def write_hostile_bundle(root: Path) -> Path:
    """Copy the scenario to ``root/hostile-bundle`` and lace it; returns the bundle dir."""
    bundle = root / "hostile-bundle"
    shutil.copytree(scenario_path(SCENARIO), bundle)
    pod = json.loads((bundle / "pod.json").read_text())
    old_name = pod["metadata"]["name"]
    pod["metadata"]["name"] = POD_NAME
    pod["metadata"]["labels"]["hostile"] = MARKUP
    (bundle / "pod.json").write_text(json.dumps(pod, indent=2))

    events = json.loads((bundle / "events.json").read_text().replace(old_name, POD_NAME))
    events["items"] += [
        _event(pod, "a", "BackOff", f"Back-off restarting {MARKUP} {ESCAPES} done"),
        _event(pod, "b", "Failed", f"Error: {MARKDOWN}"),
    ]
    (bundle / "events.json").write_text(json.dumps(events, indent=2))

    def append(name: str, *lines: str) -> None:
        path = bundle / name
        text = path.read_text().replace(old_name, POD_NAME) if path.exists() else ""
        path.write_text(text + "".join(f"{line}\n" for line in lines))

    append(
        "container.log",
        f"RuntimeError: CUDA error: an illegal memory access was encountered {MARKUP} {ESCAPES}",
        f"torch.OutOfMemoryError: CUDA out of memory. {MARKDOWN}",
    )
    ns = pod["metadata"]["namespace"]
    append(
        "kubelet.log",
        f"2024-08-13T10:41:17+0000 gpu-h100-07 kubelet[1688]: E0813 10:41:17.000001    1688 "
        f'manager.go:1105] "Failed to allocate device plugin resource" err="no healthy '
        f'devices present {MARKUP} {ESCAPES}" pod="{ns}/{POD_NAME}" '
        f'resource="nvidia.com/gpu"',
    )
    append(
        "dmesg.log",
        f"[Tue Aug 13 10:41:30 2024] NVRM: Xid (PCI:0000:b8:00): 79, pid=4242, "
        f"name={MARKUP}{ESCAPES}, GPU has fallen off the bus.",
    )
    append(
        "device-plugin.log",
        f"I0813 10:41:31.000000       1 health.go:177] XidCriticalError: Xid=79 on Device="
        f"GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8 {MARKUP} {ESCAPES}; marking device as "
        f"unhealthy.",
    )
    return bundle
