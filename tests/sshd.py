"""A real OpenSSH server on 127.0.0.1 acting as a GPU node, for tests and ``bench/``.

``SshLab(tmp_path)`` builds, under one temp dir:

* a client key, and two ``sshd`` instances started from ``/usr/sbin/sshd``: ``node`` (runs
  commands) and ``bastion`` (tunnels only, the ProxyJump hop);
* a ``ForceCommand`` dispatcher on the node that records every command the client sent (to
  ``commands.log``), then runs it with ``PATH`` = fixture tools (``node-bin``) + a few core
  utilities (``node-core``) only, and an empty ``HOME``;
* fixture tools (``journalctl``, ``dmesg``, ``nvidia-smi``, ``lsmod``, ``containerd``, ``sudo``)
  that print fixture files from ``node-data`` (kubelet journal in ``-o short-iso``, kernel lines
  in the real Xid 79 shape, an ``nvidia-smi -q -x`` document, lsmod, a containerd config);
* ``client/config`` (ssh_config): ``Host bastion`` and ``Host gpu-node-*`` with
  ``ProxyJump bastion``, so the node NAME reaches 127.0.0.1 while the node object's InternalIP
  (a private 10.x address) is never dialled; ``client/known_hosts`` with both host keys;
* optionally a :class:`CountingProxy` in front of the bastion, which counts TCP connections and
  the bytes the client received.

Usage::

    with SshLab(tmp_path) as lab:
        source = SshNodeSource(lab.settings())
        evidence = source.collect(Key.DMESG, lab.query(), timeout=10)
        assert lab.node.commands()  # what reached the node
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SSHD = "/usr/sbin/sshd"
NODE_NAME = "gpu-node-1"
#: The node object's InternalIP: private, never to be dialled by a test.
NODE_PRIVATE_IP = "10.0.0.7"
#: Core utilities the node scripts may use; everything else comes from the fixture tools.
CORE_TOOLS = (
    "sh",
    "cat",
    "grep",
    "tail",
    "head",
    "ls",
    "printf",
    "echo",
    "env",
    "sleep",
    "yes",
    "awk",
    "rm",
    "touch",
)
_RECORD_SEP = "\x1e"

KUBELET_LOG = """\
2026-03-05T10:02:11+0000 gpu-node-1 kubelet[1187]: I0305 10:02:11.482113    1187 server.go:144] "Got registration request from device plugin with resource" resourceName="nvidia.com/gpu"
2026-03-05T10:02:11+0000 gpu-node-1 kubelet[1187]: I0305 10:02:11.490311    1187 manager.go:230] "Volume mounted" volume="kube-api-access-9q2xl" pod="kube-system/coredns-7db6d8ff4d-2lq8v"
2026-03-05T10:03:40+0000 gpu-node-1 kubelet[1187]: I0305 10:03:40.120044    1187 kubelet.go:2407] "SyncLoop ADD" source="api" pods=["web/frontend-5d9c7b7f4-x2p9k"]
2026-03-05T10:04:02+0000 gpu-node-1 kubelet[1187]: E0305 10:04:02.771290    1187 pod_workers.go:1298] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"trainer\\" with CrashLoopBackOff" pod="ml/trainer-0" podUID="6b1f0a6e-2f8e-4b8a-9d53-0c4a4c6f1b2e"
2026-03-05T10:05:13+0000 gpu-node-1 kubelet[1187]: I0305 10:05:13.002817    1187 kubelet_node_status.go:514] "Fast updating node status as it just became ready"
2026-03-05T10:06:55+0000 gpu-node-1 kubelet[1187]: E0305 10:06:55.318822    1187 manager.go:1105] "Failed to allocate device plugin resource" err="no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu" resource="nvidia.com/gpu"
"""

KERNEL_LOG = """\
2026-03-05T09:58:01+0000 gpu-node-1 kernel: e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: None
2026-03-05T09:58:03+0000 gpu-node-1 kernel: nvidia-nvlink: Nvlink Core is being initialized, major device number 507
2026-03-05T09:58:03+0000 gpu-node-1 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024
2026-03-05T10:01:17+0000 gpu-node-1 kernel: cali5f1e9a3b2c4: link becomes ready
2026-03-05T10:06:41+0000 gpu-node-1 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c
2026-03-05T10:06:41+0000 gpu-node-1 kernel: NVRM: GPU Board Serial Number: 1652923017935
2026-03-05T10:06:41+0000 gpu-node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
2026-03-05T10:06:41+0000 gpu-node-1 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
2026-03-05T10:07:02+0000 gpu-node-1 kernel: audit: type=1400 audit(1709633222.114:312): apparmor="STATUS" operation="profile_load"
"""

DMESG_T = """\
[Tue Mar  5 10:06:41 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[Tue Mar  5 10:06:41 2026] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
[Tue Mar  5 10:07:02 2026] audit: type=1400 audit(1709633222.114:312): apparmor="STATUS"
"""

NVIDIA_SMI_XML = """\
<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
    <timestamp>Tue Mar  5 10:08:00 2026</timestamp>
    <driver_version>535.183.01</driver_version>
    <cuda_version>12.2</cuda_version>
    <attached_gpus>1</attached_gpus>
    <gpu id="00000000:3B:00.0">
        <product_name>NVIDIA A100-SXM4-80GB</product_name>
        <mig_mode>
            <current_mig>Disabled</current_mig>
            <pending_mig>Disabled</pending_mig>
        </mig_mode>
        <serial>1652923017935</serial>
        <uuid>GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c</uuid>
        <pci>
            <pci_bus_id>00000000:3B:00.0</pci_bus_id>
        </pci>
        <fb_memory_usage>
            <total>81920 MiB</total>
            <reserved>556 MiB</reserved>
            <used>0 MiB</used>
            <free>81363 MiB</free>
        </fb_memory_usage>
        <ecc_mode>
            <current_ecc>Enabled</current_ecc>
            <pending_ecc>Enabled</pending_ecc>
        </ecc_mode>
        <remapped_rows>
            <remapped_row_corr>0</remapped_row_corr>
            <remapped_row_unc>2</remapped_row_unc>
            <remapped_row_pending>Yes</remapped_row_pending>
            <remapped_row_failure>No</remapped_row_failure>
        </remapped_rows>
        <processes>
        </processes>
    </gpu>
</nvidia_smi_log>
"""

NVIDIA_SMI_DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n"
)

#: ``nvidia-smi topo -m`` of a 2-socket PCIe box (tab-separated, as the tool prints it).
NVIDIA_SMI_TOPO = (
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tSYS\t0-23\t0\t\tN/A\n"
    "GPU1\tSYS\t X \t24-47\t1\t\tN/A\n\n"
    "Legend:\n\n  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)\n"
)
#: ``nvidia-smi nvlink -s`` of a GPU without NVLink peers (PCIe card): no links listed.
NVIDIA_SMI_NVLINK = (
    "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c)\n"
)

LSMOD = """\
Module                  Size  Used by
nvidia_uvm           1531904  0
nvidia_drm             77824  0
nvidia_modeset       1306624  1 nvidia_drm
nvidia              56725504  2 nvidia_uvm,nvidia_modeset
overlay               151552  12
br_netfilter           32768  0
"""

CONTAINERD_DUMP = """\
version = 2
root = "/var/lib/containerd"

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
  SystemdCgroup = true
"""

#: Fixture tools: each prints its fixture file. $DATA is the node's data dir.
#: The kubelet's device-plugin checkpoint the node's ``cat`` serves (real format, see
#: tests/fixtures/node/README.md).
CHECKPOINT_PATH = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
DEVICE_CHECKPOINT = (
    Path(__file__).parent / "fixtures" / "node" / "kubelet_internal_checkpoint"
).read_text()

TOOLS: dict[str, str] = {
    # cat from node-core, except for the kubelet's checkpoint path (a fixture file).
    "cat": f"""\
PATH="${{0%/*}}/../node-core"  # the real cat, named cat in its own messages
if [ "$1" = {CHECKPOINT_PATH} ]; then exec cat "$DATA/kubelet_internal_checkpoint"; fi
exec cat "$@"
""",
    "journalctl": """\
printf '%s\\n' "$@" > "$DATA/journalctl.args"
case " $* " in
  *" -k "*) exec cat "$DATA/kernel.log" ;;
  *" -u kubelet "*) exec cat "$DATA/kubelet.log" ;;
esac
echo "journalctl (fixture): unexpected arguments: $*" >&2; exit 1
""",
    "dmesg": """\
case " $* " in
  *" -T "*) exec cat "$DATA/dmesg-T.log" ;;
esac
exec cat "$DATA/dmesg.log"
""",
    "nvidia-smi": """\
case " $* " in
  *" -x "*) exec cat "$DATA/nvidia-smi.xml" ;;
  *" topo "*) exec cat "$DATA/nvidia-smi-topo.txt" ;;
  *" nvlink "*) exec cat "$DATA/nvidia-smi-nvlink.txt" ;;
esac
exec cat "$DATA/nvidia-smi.txt"
""",
    "lsmod": 'exec cat "$DATA/lsmod.txt"\n',
    "containerd": """\
[ "$1 $2" = "config dump" ] && exec cat "$DATA/containerd-dump.toml"
echo "containerd (fixture): unexpected arguments: $*" >&2; exit 1
""",
    # sudo shim: only the non-interactive form is allowed; records what it ran.
    "sudo": """\
if [ "$1" != "-n" ] || [ -e "$DATA/sudo-needs-password" ]; then
  echo "sudo: a password is required" >&2; exit 1
fi
shift
printf '%s\\n' "$*" >> "$DATA/sudo.log"
exec "$@"
""",
}


@dataclass
class Sshd:
    """One running ``sshd`` on 127.0.0.1."""

    name: str
    root: Path
    port: int
    host_key_pub: str  # "ssh-ed25519 AAAA..."
    proc: subprocess.Popen[bytes]
    log_path: Path
    command_log: Path | None = None

    @property
    def host_key_name(self) -> str:
        return f"[127.0.0.1]:{self.port}"

    def known_hosts_line(self, port: int | None = None) -> str:
        """This server's known_hosts entry (for ``port`` when reached through a relay)."""
        name = f"[127.0.0.1]:{port}" if port else self.host_key_name
        return f"{name} {self.host_key_pub}\n"

    def fingerprint(self) -> str:
        """``SHA256:...`` of the host key, as ``ssh-keygen -l`` computes it."""
        out = subprocess.run(
            ["ssh-keygen", "-l", "-f", str(self.root / "host_key.pub")],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()[1]

    def commands(self) -> list[str]:
        """Every command the node received, verbatim (in order)."""
        if self.command_log is None or not self.command_log.exists():
            return []
        text = self.command_log.read_text(encoding="utf-8", errors="replace")
        return [c for c in text.split(_RECORD_SEP) if c]

    def logins(self) -> int:
        """Successful logins (``Accepted publickey``) so far."""
        return self.log().count("Accepted publickey")

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path, comment: str = "gputriage-test") -> str:
    """A fresh ed25519 key at ``path``; returns the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def start_sshd(
    root: Path,
    name: str,
    authorized_keys: str,
    *,
    force_command: str | None = None,
    set_env: dict[str, str] | None = None,
    log_level: str = "INFO",
    max_sessions: int = 20,
) -> Sshd:
    """Start ``sshd -D -e`` under ``root/name`` on a free port; waits until it accepts."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    host_pub = keygen(d / "host_key", f"{name}-host")
    (d / "authorized_keys").write_text(authorized_keys + "\n")
    port = free_port()
    lines = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {d / 'host_key'}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "StrictModes no",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding yes",
        "PermitTunnel no",
        "X11Forwarding no",
        "PrintMotd no",
        "UseDNS no",
        f"MaxSessions {max_sessions}",
        f"LogLevel {log_level}",
    ]
    if set_env:
        lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in set_env.items()))
    if force_command:
        lines.append(f"ForceCommand {force_command}")
    cfg = d / "sshd_config"
    cfg.write_text("\n".join(lines) + "\n")
    os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir (sshd runs as root)
    check = subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True, text=True)
    if check.returncode:
        raise RuntimeError(f"sshd -t rejected {cfg}: {check.stderr}")
    log_path = d / "sshd.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd {name} did not start: {log_path.read_text()}") from None
            time.sleep(0.02)
    return Sshd(name, d, port, host_pub, proc, log_path)


class CountingProxy:
    """A TCP relay on 127.0.0.1 that counts connections and bytes sent to the client."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.connections = 0
        self.bytes_to_client = 0
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._socks += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_client: bool) -> None:
        try:
            while data := src.recv(65536):
                if to_client:
                    with self._lock:
                        self.bytes_to_client += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):  # the other side closed first
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for s in self._socks:
                s.close()


@dataclass
class SshLab:
    """A node behind a bastion, both real sshd on 127.0.0.1 (see the module docstring)."""

    tmp: Path
    proxy: bool = False
    #: The node's sshd MaxSessions (command channels at once on one connection).
    max_sessions: int = 20
    node: Sshd = field(init=False)
    bastion: Sshd = field(init=False)
    counting: CountingProxy | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.client_dir = self.tmp / "client"
        self.client_dir.mkdir()
        self.client_key = self.client_dir / "id_ed25519"
        self.client_pub = keygen(self.client_key, "gputriage-client")
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.bin = self.tmp / "node-bin"
        self.core = self.tmp / "node-core"
        self.data = self.tmp / "node-data"
        for d in (self.bin, self.core, self.data):
            d.mkdir()
        for tool in CORE_TOOLS:
            found = shutil.which(tool)
            if found:
                (self.core / tool).symlink_to(found)
        self.reset_node()
        path = f"{self.bin}:{self.core}"
        dispatcher = self.tmp / "dispatch.sh"
        command_log = self.tmp / "commands.log"
        dispatcher.write_text(
            "#!/bin/sh\n"
            f"printf '%s\\036' \"$SSH_ORIGINAL_COMMAND\" >> {command_log}\n"
            f"PATH={path}; HOME={self.home}; DATA={self.data}; export PATH HOME DATA\n"
            'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
        )
        dispatcher.chmod(0o755)
        env = {"PATH": path, "HOME": str(self.home)}
        self.node = start_sshd(
            self.tmp,
            "node",
            self.client_pub,
            force_command=str(dispatcher),
            set_env=env,
            max_sessions=self.max_sessions,
        )
        self.node.command_log = command_log
        # The bastion only tunnels: a session on it would be a test bug.
        self.bastion = start_sshd(
            self.tmp,
            "bastion",
            self.client_pub,
            force_command="/bin/false",
            set_env=env,
            log_level="DEBUG1",
        )
        if self.proxy:
            self.counting = CountingProxy(self.bastion.port)
        self.known_hosts = self.client_dir / "known_hosts"
        self.known_hosts.write_text(
            self.node.known_hosts_line() + self.bastion.known_hosts_line(self.bastion_port)
        )
        self.config = self.client_dir / "config"
        self.write_config()

    # -- the node's fixture tools and data ---------------------------------------------------

    def cli_flags(self, kubeconfig: Path, namespace: str = "ml") -> list[str]:
        """Command-line flags for a kubeconfig and this lab's ssh_config and known_hosts."""
        return [
            "-n",
            namespace,
            "--kubeconfig",
            str(kubeconfig),
            "--ssh-config",
            str(self.config),
            "--known-hosts",
            str(self.known_hosts),
        ]

    def reset_node(self) -> None:
        """(Re)write every fixture tool and fixture file."""
        for name, body in TOOLS.items():
            self.write_tool(name, body)
        files = {
            "kubelet.log": KUBELET_LOG,
            "kernel.log": KERNEL_LOG,
            "dmesg-T.log": DMESG_T,
            "dmesg.log": DMESG_T,
            "nvidia-smi.xml": NVIDIA_SMI_XML,
            "nvidia-smi.txt": NVIDIA_SMI_XML,
            "lsmod.txt": LSMOD,
            "nvidia-smi-topo.txt": NVIDIA_SMI_TOPO,
            "nvidia-smi-nvlink.txt": NVIDIA_SMI_NVLINK,
            "containerd-dump.toml": CONTAINERD_DUMP,
            "kubelet_internal_checkpoint": DEVICE_CHECKPOINT,
        }
        for name, text in files.items():
            (self.data / name).write_text(text)

    def write_tool(self, name: str, body: str) -> Path:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\nDATA={self.data}\n{body}")
        path.chmod(0o755)
        return path

    def remove_tool(self, name: str) -> None:
        (self.bin / name).unlink()

    def write_data(self, name: str, text: str) -> None:
        (self.data / name).write_text(text)

    # -- client side ---------------------------------------------------------------------------

    @property
    def bastion_port(self) -> int:
        return self.counting.port if self.counting else self.bastion.port

    def write_config(self, *, node_extra: str = "", identity: Path | None = None) -> Path:
        identity = identity or self.client_key
        self.config.write_text(
            f"Host bastion\n"
            f"  HostName 127.0.0.1\n  Port {self.bastion_port}\n  User root\n"
            f"  IdentityFile {identity}\n"
            f"Host gpu-node-*\n"
            f"  HostName 127.0.0.1\n  Port {self.node.port}\n  User root\n"
            f"  IdentityFile {identity}\n  ProxyJump bastion\n{node_extra}"
        )
        return self.config

    def settings(self, **kw: Any) -> Any:
        from gputriage.evidence.ssh import SshSettings

        kw.setdefault("config_path", str(self.config))
        kw.setdefault("known_hosts", str(self.known_hosts))
        kw.setdefault("connect_timeout", 10.0)
        return SshSettings(**kw)

    def query(self, **kw: Any) -> Any:
        from gputriage.evidence.sources import NodeQuery

        kw.setdefault("node", NODE_NAME)
        kw.setdefault("address", NODE_PRIVATE_IP)
        kw.setdefault("namespace", "ml")
        kw.setdefault("pod", "trainer-0")
        kw.setdefault("pod_uid", "6b1f0a6e-2f8e-4b8a-9d53-0c4a4c6f1b2e")
        return NodeQuery(**kw)

    def node_object(self) -> dict[str, Any]:
        return {
            "kind": "Node",
            "metadata": {"name": NODE_NAME},
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": NODE_PRIVATE_IP},
                    {"type": "Hostname", "address": NODE_NAME},
                ]
            },
        }

    def close(self) -> None:
        if self.counting:
            self.counting.close()
        self.node.stop()
        self.bastion.stop()

    def __enter__(self) -> SshLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
