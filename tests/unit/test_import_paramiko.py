"""paramiko imported without ``invoke``, safely from many threads at once (a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import json, sys, threading
from gputriage.evidence.sshconfig import import_paramiko, load_config
seen = []
def use():
    mod = import_paramiko()
    seen.append(hasattr(mod, "SSHConfig") and hasattr(mod, "SSHClient"))
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
invoke_loaded = "invoke" in sys.modules
import paramiko.config
config = load_config(sys.argv[1])
host = config.lookup("gpu-node-1").get("hostname")
import invoke  # still importable for anyone else
print(json.dumps({"seen": seen, "invoke": invoke_loaded, "pconfig_invoke": paramiko.config.invoke is None, "host": host}))
"""


def test_paramiko_comes_whole_to_every_thread_and_without_invoke(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-node-*\n  HostName 127.0.0.1\n")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["seen"] == [True] * 8
    assert result["invoke"] is False
    assert result["pconfig_invoke"] is True  # gputriage runs Match exec itself
    assert result["host"] == "127.0.0.1"
