"""The servers every live benchmark runs against, with the same injected latency for all.

* the test Kubernetes API (``tests/kubeapi``: HTTPS, bearer token, the standard GPU cluster)
  answering every request after ``latency`` seconds;
* a real OpenSSH node (``tests/sshd.SshLab``) whose command dispatcher sleeps ``latency``
  seconds before running each command, as a distant node would;
* a kubeconfig, and an ssh_config reaching the node directly (no bastion) that both
  gputriage and the OpenSSH client read, so they dial the same server the same way.

The pod under triage is ``ml/trainer-0`` on ``gpu-node-1``: a restarting 8-GPU trainer with
events, a previous container log, a device plugin that saw Xid 79 and a kubelet journal.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from bench._util import PYTHON, ROOT
from tests.kubeapi import KubeAPI
from tests.kubeapi.cluster import gpu_cluster
from tests.sshd import NODE_NAME, SshLab

NAMESPACE = "ml"
POD = "trainer-0"
CONTAINER = "trainer"


class Lab:
    """Start with ``with Lab(latency=0.02) as lab:``."""

    def __init__(self, latency: float, installed: Path | None = None) -> None:
        self.latency = latency
        #: The console script of an installed gputriage (:mod:`bench._install`); None runs
        #: the source tree's.
        self.installed = installed
        self._tmp = tempfile.TemporaryDirectory(prefix="gputriage-bench-")
        self.dir = Path(self._tmp.name)
        self.api = KubeAPI(gpu_cluster())
        self.ssh: SshLab | None = None

    def __enter__(self) -> Lab:
        self.api.start()
        if self.latency:
            self.api.delay(".*", self.latency)
        self.kubeconfig = self.api.write_kubeconfig(self.dir / "kubeconfig")
        self.ssh = SshLab(self.dir / "ssh")
        self._slow_node(self.ssh)
        self.ssh_config = self._direct_config(self.ssh)
        self.kubecache = self.dir / "kubecache"
        self.kubecache.mkdir()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.ssh is not None:
            self.ssh.close()
        self.api.stop()
        self._tmp.cleanup()

    def _slow_node(self, lab: SshLab) -> None:
        """Make the node's command dispatcher wait ``latency`` before each command."""
        dispatcher = lab.tmp / "dispatch.sh"
        lines = dispatcher.read_text().splitlines()
        lines.insert(1, f"sleep {self.latency:.3f}")
        dispatcher.write_text("\n".join(lines) + "\n")

    def _direct_config(self, lab: SshLab) -> Path:
        config = self.dir / "ssh_config"
        config.write_text(
            "Host gpu-node-*\n"
            "  HostName 127.0.0.1\n"
            f"  Port {lab.node.port}\n"
            "  User root\n"
            f"  IdentityFile {lab.client_key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {lab.known_hosts}\n"
            "  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n"
            "  LogLevel ERROR\n"
        )
        return config

    # -- command lines ---------------------------------------------------------------------

    @property
    def known_hosts(self) -> Path:
        assert self.ssh is not None
        return self.ssh.known_hosts

    def triage_args(self, *extra: str) -> list[str]:
        """``gputriage trainer-0 ...`` arguments against this lab (no program name)."""
        return [
            "triage",
            POD,
            "-n",
            NAMESPACE,
            "--kubeconfig",
            str(self.kubeconfig),
            "--ssh-config",
            str(self.ssh_config),
            "--known-hosts",
            str(self.known_hosts),
            *extra,
        ]

    def gputriage(self) -> list[str]:
        if self.installed is not None:
            return [str(self.installed)]
        exe = Path(PYTHON).with_name("gputriage")
        return [str(exe)] if exe.exists() else [PYTHON, "-m", "gputriage"]

    def manual_chain(self) -> list[list[str]]:
        """The commands an SRE runs today, one after the other, for the same evidence."""
        kubectl = ["kubectl", "--kubeconfig", str(self.kubeconfig)]
        ssh = ["ssh", "-F", str(self.ssh_config), NODE_NAME]
        return [
            [*kubectl, "-n", NAMESPACE, "describe", "pod", POD],
            [*kubectl, "get", "node", NODE_NAME, "-o", "json"],
            [*kubectl, "-n", NAMESPACE, "logs", POD, "-c", CONTAINER],
            [*ssh, "journalctl", "-u", "kubelet", "--no-pager"],
            [*ssh, "dmesg", "-T"],
            [*ssh, "nvidia-smi", "-q", "-x"],
        ]

    def env(self) -> dict[str, str]:
        """The environment of every command: a home of its own (so the playbook cache in
        ``~/.cache`` starts cold with each lab and is then warm, as on a user's machine)."""
        env = {
            "KUBECACHEDIR": str(self.kubecache),
            "PYTHONPATH": str(ROOT),
            "HOME": str(self.dir),
            "XDG_CONFIG_HOME": str(self.dir / "config"),
            "XDG_STATE_HOME": str(self.dir / "state"),
            "XDG_CACHE_HOME": str(self.dir / "cache"),
            "PATH": os.environ.get("PATH", ""),
        }
        if self.installed is not None:  # the installed package, not the source tree
            env["PYTHONPATH"] = ""
        return env


def tools_missing() -> list[str]:
    """External programs the live benchmarks need that are not installed."""
    needed = {
        "kubectl": "kubectl",
        "ssh": "ssh",
        "ssh-keygen": "ssh-keygen",
        "sshd": "/usr/sbin/sshd",
    }
    return [
        name
        for name, path in needed.items()
        if not (shutil.which(path) or os.access(path, os.X_OK))
    ]
