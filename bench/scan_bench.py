#!/usr/bin/env python3
"""``gputriage scan -A`` next to ``kubectl get pods -A -o json`` on a big cluster (DESIGN 4).

Serves a generated cluster (``tests/kubeapi/generate.py``, default 5,000 nodes and 100,000
pods, planted troubles included) from the HTTPS test API in this process, then runs, each in a
fresh process and one after the other:

* ``gputriage scan -A --report json`` (nodes and pods, paginated, streamed into small rows);
* ``kubectl get pods -A -o json`` (pods only, paginated by kubectl's default ``--chunk-size``,
  ``KUBECACHEDIR`` in a temp dir; its output is written to a file, as a user's would be).

For each: wall time and peak RSS, read with ``resource.getrusage(RUSAGE_CHILDREN)`` by a small
wrapper process whose only child is the command. Prints a table; asserts only that the scan
found exactly the planted troubles (a fast wrong answer is no result).

    .venv/bin/python bench/scan_bench.py [--nodes 5000] [--pods 100000] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Runs one command, then prints its wall time and the peak RSS of its process tree.
WRAPPER = r"""
import json, resource, subprocess, sys, time
out = open(sys.argv[1], "wb")
t = time.perf_counter()
rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
print(json.dumps({"rc": rc, "wall_s": wall,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure(argv: list[str], output: Path, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(output), *argv],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    result["output_mib"] = output.stat().st_size / 2**20
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1)
    opts = parser.parse_args()

    from tests.kubeapi import KubeAPI
    from tests.kubeapi.generate import generate

    started = time.perf_counter()
    cluster, planted = generate(opts.nodes, opts.pods, now=time.time())
    pods = len(cluster.objects[("", "pods")])
    print(
        f"generated {len(cluster.objects[('', 'nodes')])} nodes and {pods} pods "
        f"in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    kubectl = shutil.which("kubectl")
    rows: list[tuple[str, dict[str, float]]] = []
    with KubeAPI(cluster) as api, tempfile.TemporaryDirectory(prefix="scan-bench-") as tmp:
        work = Path(tmp)
        config = api.write_kubeconfig(work / "kubeconfig")
        env = {**os.environ, "KUBECACHEDIR": str(work / "kube-cache"), "HOME": str(work)}
        scan = [
            sys.executable,
            "-m",
            "gputriage",
            "scan",
            "-A",
            "--report",
            "json",
            "--kubeconfig",
            str(config),
            "--request-timeout",
            "60",
        ]
        for run in range(opts.runs):
            result = measure(scan, work / "scan.json", env)
            report = json.loads((work / "scan.json").read_text())
            found_pods = {
                (t["namespace"], t["name"]): frozenset(t["troubles"])
                for t in report["troubles"]
                if t["kind"] == "pod"
            }
            found_nodes = {
                t["name"]: frozenset(t["troubles"])
                for t in report["troubles"]
                if t["kind"] == "node"
            }
            assert result["rc"] == 3, result
            assert found_pods == planted.pods and found_nodes == planted.nodes, (
                "the scan did not find exactly the planted troubles"
            )
            rows.append((f"gputriage scan -A --report json (run {run + 1})", result))
            if kubectl:
                result = measure(
                    [
                        kubectl,
                        "get",
                        "pods",
                        "-A",
                        "-o",
                        "json",
                        "--kubeconfig",
                        str(config),
                        "--request-timeout",
                        "60s",
                    ],
                    work / "pods.json",
                    env,
                )
                assert result["rc"] == 0, result
                rows.append((f"kubectl get pods -A -o json (run {run + 1})", result))
        requests = api.requests
    print(f"\n{'command':<46} {'wall s':>8} {'peak RSS MiB':>13} {'output MiB':>11}")
    for name, r in rows:
        print(f"{name:<46} {r['wall_s']:>8.2f} {r['peak_rss_mib']:>13.0f} {r['output_mib']:>11.2f}")
    if not kubectl:
        print("(kubectl not found: only the scan was timed)")
    lists = [r for r in requests if r.agent.startswith("gputriage/")]
    print(
        f"\ngputriage made {len(lists)} requests, all GET with limit="
        f"{sorted({r.param('limit') for r in lists})}; planted: {len(planted.pods)} pods, "
        f"{len(planted.nodes)} nodes (found exactly)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
