"""SshNodeSource against real sshd instances: a node reached through a ProxyJump bastion."""

from __future__ import annotations

import glob
import shlex
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gputriage.evidence.model import Key, Status
from gputriage.evidence.sources import NODE_KEYS
from gputriage.evidence.ssh import SshNodeSource
from tests.conftest import require_tool
from tests.sshd import KUBELET_LOG, NODE_NAME, NODE_PRIVATE_IP, NVIDIA_SMI_DRIVER_ERROR, SshLab

pytestmark = pytest.mark.integration


def collect_all(source: SshNodeSource, lab: SshLab, **query: object) -> dict[Key, object]:
    return {key: source.collect(key, lab.query(**query), timeout=20) for key in NODE_KEYS}


def test_every_node_key_through_the_proxyjump_bastion(lab: SshLab, dials: list) -> None:
    source = SshNodeSource(lab.settings())
    try:
        ev = {key: source.collect(key, lab.query(), timeout=20) for key in NODE_KEYS}
    finally:
        source.close()
    assert {k: e.status for k, e in ev.items()} == {k: Status.OK for k in NODE_KEYS}, {
        k.value: e.detail for k, e in ev.items()
    }

    kubelet = ev[Key.KUBELET_LOG]
    assert kubelet.source == (
        f"ssh {NODE_NAME}: journalctl -u kubelet --no-pager --since -2h -o short-iso"
    )
    assert len(kubelet.lines()) == 3  # plugin registration, the pod's error, allocation failure
    assert 'resourceName="nvidia.com/gpu"' in kubelet.lines()[0]
    assert 'pod="ml/trainer-0"' in kubelet.lines()[1]
    assert "no healthy devices present" in kubelet.lines()[2]
    assert "coredns" not in kubelet.raw and "frontend" not in kubelet.raw  # filtered on the node

    kernel = ev[Key.DMESG]
    assert kernel.source.endswith("journalctl -k --no-pager --since -2h -o short-iso")
    assert len(kernel.lines()) == 6
    assert (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
        "the bus."
    ) in kernel.raw
    assert "e1000e" not in kernel.raw and "apparmor" not in kernel.raw

    smi = ev[Key.NVIDIA_SMI]
    assert smi.format == "xml" and smi.source.endswith("nvidia-smi -q -x")
    assert "<uuid>GPU-4a1b7c2e-9d3f-5e6a-8b0c-1d2e3f4a5b6c</uuid>" in smi.raw
    assert "nvidia_uvm           1531904  0" in ev[Key.LSMOD].raw
    assert ev[Key.NVIDIA_TOPO].source.endswith("nvidia-smi topo -m")
    assert "GPU1\tSYS\t X \t24-47\t1" in ev[Key.NVIDIA_TOPO].raw
    assert ev[Key.NVLINK].source.endswith("nvidia-smi nvlink -s")
    dev = ev[Key.DEV_NVIDIA]
    if not glob.glob("/dev/nvidia*"):  # the lab node is this machine: no GPU device nodes
        assert "cannot access '/dev/nvidia*': No such file or directory" in dev.raw
        assert "ls -l /dev/nvidia* exited 2" in dev.detail
    containerd = ev[Key.CONTAINERD_CONFIG]
    if not Path("/etc/containerd/config.toml").exists():
        assert containerd.source == f"ssh {NODE_NAME}: containerd config dump"
        assert (
            "cat /etc/containerd/config.toml: cat: /etc/containerd/config.toml: No such "
            "file or directory" in containerd.detail
        )
        assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in containerd.raw
        # one per key, but containerd had three (run at once: the files are cheap to read)
        assert len(lab.node.commands()) == len(NODE_KEYS) + 2
    checkpoint = ev[Key.DEVICE_CHECKPOINT]
    assert checkpoint.source == (
        f"ssh {NODE_NAME}: cat /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
    )
    assert '"PodDeviceEntries"' in checkpoint.raw

    # Only the bastion was dialled; the node's private InternalIP and its sshd port never were.
    assert dials == [("127.0.0.1", lab.bastion.port)]
    assert NODE_PRIVATE_IP not in lab.node.log()
    assert "direct-tcpip" in lab.bastion.log()
    assert sum("nvidia-smi -q -x" in c for c in lab.node.commands()) == 1


def test_one_connection_serves_concurrent_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_tool("sshd", "/usr/sbin/sshd")
    sockets: list[socket.socket] = []
    real = socket.create_connection

    def keep(*args: object, **kw: object) -> socket.socket:
        sock = real(*args, **kw)  # type: ignore[arg-type]
        sockets.append(sock)
        return sock

    with SshLab(tmp_path / "lab", proxy=True) as lab:
        monkeypatch.setattr(socket, "create_connection", keep)
        source = SshNodeSource(lab.settings())
        with ThreadPoolExecutor(len(NODE_KEYS)) as pool:
            results = list(pool.map(lambda k: source.collect(k, lab.query(), 20), NODE_KEYS))
        again = source.collect(Key.LSMOD, lab.query(), 20)
        ours = [s for s in sockets if s.getpeername()[1] == lab.bastion_port]
        assert len(ours) == 1
        assert ours[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        source.close()
        assert [e.status for e in results] == [Status.OK] * len(NODE_KEYS)
        assert again.ok
        assert lab.counting is not None
        assert lab.counting.connections == 1  # one TCP connection (to the bastion)
        assert lab.node.logins() == 1 and lab.bastion.logins() == 1
        assert source.connections_opened == 2  # bastion + node, once each


def test_shell_metacharacters_reach_the_node_only_quoted(lab: SshLab, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    pod = f"$(touch {canary}-pod)"
    namespace = f"ml;touch {canary}-ns"
    uid = f"`touch {canary}-uid`"
    since = f"2h' ; touch {canary}-since ; '"
    hostile = (
        f'2026-03-05T10:09:00+0000 gpu-node-1 kubelet[1187]: E0305 "Error syncing pod" '
        f'pod="{namespace}/{pod}"\n'
    )
    lab.write_data("kubelet.log", KUBELET_LOG + hostile)
    source = SshNodeSource(lab.settings())
    ev = source.collect(
        Key.KUBELET_LOG, lab.query(pod=pod, namespace=namespace, pod_uid=uid, since=since), 20
    )
    source.close()

    assert ev.status is Status.OK, ev.detail
    assert hostile.strip() in ev.lines()  # the filter matched the literal text
    assert list(tmp_path.glob("canary*")) == []  # nothing the user typed was executed
    (command,) = lab.node.commands()
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3
    script = argv[2]
    assert f"-e {shlex.quote(f'{namespace}/{pod}')}" in script
    assert f"-e {shlex.quote(uid)}" in script
    assert f"--since {shlex.quote(since)}" in script
    # journalctl received the --since value as one argument, byte for byte.
    args = (lab.data / "journalctl.args").read_text().splitlines()
    assert args[args.index("--since") + 1] == since


def test_sudo_runs_every_command_through_sudo_n(lab: SshLab) -> None:
    source = SshNodeSource(lab.settings(sudo=True))
    dmesg = source.collect(Key.DMESG, lab.query(), 20)
    lsmod = source.collect(Key.LSMOD, lab.query(), 20)
    source.close()
    assert dmesg.ok and lsmod.ok
    assert "Xid (PCI:0000:3b:00): 79" in dmesg.raw
    commands = lab.node.commands()
    assert len(commands) == 2
    assert all(shlex.split(c)[:4] == ["sudo", "-n", "sh", "-c"] for c in commands)
    ran = (lab.data / "sudo.log").read_text().splitlines()
    assert len(ran) == 2 and ran[0].startswith("sh -c LC_ALL=C;")


def test_sudo_needing_a_password_is_forbidden(lab: SshLab) -> None:
    lab.write_data("sudo-needs-password", "")
    source = SshNodeSource(lab.settings(sudo=True))
    ev = source.collect(Key.LSMOD, lab.query(), 20)
    source.close()
    assert ev.status is Status.FORBIDDEN
    assert "sudo -n refused on the node (sudo: a password is required)" in ev.detail
    assert "NOPASSWD" in ev.detail


def test_missing_commands_are_named_unknowns(lab: SshLab) -> None:
    for tool in ("lsmod", "nvidia-smi", "journalctl", "dmesg"):
        lab.remove_tool(tool)
    source = SshNodeSource(lab.settings())
    ev = {
        k: source.collect(k, lab.query(), 20)
        for k in (Key.LSMOD, Key.NVIDIA_SMI, Key.KUBELET_LOG, Key.DMESG)
    }
    source.close()
    assert ev[Key.LSMOD].status is Status.UNAVAILABLE
    assert ev[Key.LSMOD].detail == "lsmod is not installed on the node (command not found)"
    assert ev[Key.NVIDIA_SMI].status is Status.UNAVAILABLE
    assert ev[Key.NVIDIA_SMI].detail.startswith(
        "nvidia-smi is not installed on the node (command not found)"
    )
    assert ev[Key.KUBELET_LOG].detail == (
        "journalctl is not installed on the node (command not found)"
    )
    kernel = ev[Key.DMESG]
    assert kernel.status is Status.UNAVAILABLE
    assert (
        "dmesg is not installed" in kernel.detail and "journalctl is not installed" in kernel.detail
    )


def test_permission_errors_are_forbidden_with_the_reason(lab: SshLab) -> None:
    lab.write_tool(
        "journalctl",
        'echo "No journal files were opened due to insufficient permissions." >&2; exit 1\n',
    )
    lab.write_tool(
        "dmesg", 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1\n'
    )
    source = SshNodeSource(lab.settings())
    kernel = source.collect(Key.DMESG, lab.query(), 20)
    kubelet = source.collect(Key.KUBELET_LOG, lab.query(), 20)
    source.close()
    assert kernel.status is Status.FORBIDDEN
    assert "dmesg -T: dmesg: read kernel buffer failed: Operation not permitted" in kernel.detail
    assert "--sudo" in kernel.detail
    assert len(lab.node.commands()) == 4  # journalctl -k, dmesg -T, dmesg, journalctl -u
    assert kubelet.status is Status.FORBIDDEN
    assert "No journal files were opened due to insufficient permissions." in kubelet.detail


def test_kernel_log_falls_back_to_dmesg_without_a_journal(lab: SshLab) -> None:
    lab.write_tool("journalctl", 'echo "No journal files were found." >&2; exit 1\n')
    source = SshNodeSource(lab.settings())
    ev = source.collect(Key.DMESG, lab.query(), 20)
    source.close()
    assert ev.ok and ev.source == f"ssh {NODE_NAME}: dmesg -T"
    assert ev.lines()[0].startswith("[Tue Mar  5 10:06:41 2026] NVRM: Xid (PCI:0000:3b:00): 79")
    assert len(ev.lines()) == 2  # the audit line was filtered out on the node
    assert "no systemd journal on the node" in ev.detail


def test_nvidia_smi_error_text_is_the_evidence(lab: SshLab) -> None:
    lab.write_data("driver-error.txt", NVIDIA_SMI_DRIVER_ERROR)
    lab.write_tool("nvidia-smi", 'cat "$DATA/driver-error.txt"; exit 9\n')
    source = SshNodeSource(lab.settings())
    ev = source.collect(Key.NVIDIA_SMI, lab.query(), 20)
    source.close()
    assert ev.status is Status.OK and ev.format == "text"
    assert ev.raw == NVIDIA_SMI_DRIVER_ERROR
    assert ev.source.endswith(": nvidia-smi -q -x")
    assert "nvidia-smi -q -x exited 9: NVIDIA-SMI has failed" in ev.detail
    # -q was tried after -q -x failed, and did no better.
    assert [shlex.split(c)[2].count("nvidia-smi -q -x") for c in lab.node.commands()] == [1, 0]


def test_nvidia_smi_falls_back_to_plain_q(lab: SshLab) -> None:
    lab.write_tool(
        "nvidia-smi",
        """\
case " $* " in *" -x "*) echo "Invalid combination of input arguments."; exit 2 ;; esac
printf '==============NVSMI LOG==============\\n\\nDriver Version : 470.74\\n'
""",
    )
    source = SshNodeSource(lab.settings())
    ev = source.collect(Key.NVIDIA_SMI, lab.query(), 20)
    source.close()
    assert ev.ok and ev.source.endswith(": nvidia-smi -q") and ev.format == "text"
    assert "Driver Version : 470.74" in ev.raw


def test_unreachable_node_fails_fast_and_once(lab: SshLab, dials: list) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    lab.write_config(node_extra=f"Host dead-node\n  HostName 127.0.0.1\n  Port {port}\n")
    source = SshNodeSource(lab.settings())
    first = source.collect(Key.DMESG, lab.query(node="dead-node"), 20)
    second = source.collect(Key.LSMOD, lab.query(node="dead-node"), 20)
    source.close()
    assert first.status is Status.UNAVAILABLE
    assert f"cannot reach 127.0.0.1:{port} over SSH" in first.detail
    assert "refused" in first.detail.lower()
    assert (second.status, second.detail) == (first.status, first.detail)
    assert dials == [("127.0.0.1", port)]  # the failure is remembered, not retried


def test_silent_server_times_out_within_the_budget(lab: SshLab) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never sends a banner
    port = silent.getsockname()[1]
    lab.write_config(node_extra=f"Host mute-node\n  HostName 127.0.0.1\n  Port {port}\n")
    source = SshNodeSource(lab.settings(connect_timeout=1.0))
    started = time.monotonic()
    ev = source.collect(Key.LSMOD, lab.query(node="mute-node"), 5)
    elapsed = time.monotonic() - started
    source.close()
    silent.close()
    assert ev.status is Status.TIMEOUT
    assert ev.detail.startswith(f"SSH to root@mute-node (127.0.0.1):{port} timed out after 1 s")
    assert elapsed < 4


def test_command_that_outlives_the_timeout(lab: SshLab) -> None:
    lab.write_tool("lsmod", 'sleep 5; cat "$DATA/lsmod.txt"\n')
    source = SshNodeSource(lab.settings())
    started = time.monotonic()
    ev = source.collect(Key.LSMOD, lab.query(), 1.5)
    elapsed = time.monotonic() - started
    source.close()
    assert ev.status is Status.TIMEOUT
    assert ev.detail == "lsmod did not finish in time"
    assert elapsed < 3


def test_node_address_override_wins_over_config(lab: SshLab, dials: list) -> None:
    lab.write_config(
        node_extra=f"Host via-override\n  HostName 127.0.0.1\n  Port "
        f"{lab.node.port}\n  User root\n  IdentityFile "
        f"{lab.client_key}\n"
    )
    source = SshNodeSource(lab.settings(overrides={NODE_NAME: "via-override"}))
    ev = source.collect(Key.LSMOD, lab.query(), 20)
    source.close()
    assert ev.ok
    assert dials == [("127.0.0.1", lab.node.port)]  # direct: the override has no ProxyJump


def test_two_hop_proxyjump_with_user_host_port_hop(lab: SshLab, dials: list) -> None:
    # bastion, then the bastion again as "root@127.0.0.1:PORT" (a hop written inline), then
    # the node: two tunnels deep.
    lab.write_config(
        node_extra=(
            f"Host chained-node\n  HostName 127.0.0.1\n  Port {lab.node.port}\n  User root\n"
            f"  IdentityFile {lab.client_key}\n"
            f"  ProxyJump bastion,root@127.0.0.1:{lab.bastion.port}\n"
            f"Host 127.0.0.1\n  IdentityFile {lab.client_key}\n"
        )
    )
    source = SshNodeSource(lab.settings())
    route = source.route_for(lab.query(node="chained-node"))
    ev = source.collect(Key.DMESG, lab.query(node="chained-node"), 20)
    source.close()
    assert [(h.hostname, h.port) for h in route.hops] == [
        ("127.0.0.1", lab.bastion.port),
        ("127.0.0.1", lab.bastion.port),
        ("127.0.0.1", lab.node.port),
    ]
    assert ev.ok and "Xid (PCI:0000:3b:00): 79" in ev.raw
    assert dials == [("127.0.0.1", lab.bastion.port)]
    assert lab.bastion.logins() == 2 and lab.node.logins() == 1


def test_broken_config_and_missing_address_are_named(lab: SshLab, tmp_path: Path) -> None:
    source = SshNodeSource(lab.settings(config_path=str(tmp_path / "no-such-config")))
    ev = source.collect(Key.LSMOD, lab.query(), 5)
    assert (ev.status, ev.detail) == (
        Status.ERROR,
        f"ssh_config: ssh_config file {tmp_path / 'no-such-config'} does not exist",
    )
    ev = SshNodeSource(lab.settings()).collect(Key.LSMOD, lab.query(node="", address=""), 5)
    assert ev.status is Status.UNAVAILABLE and "--node-address" in ev.detail


@pytest.mark.parametrize("max_sessions", [1, 3])
def test_a_server_allowing_fewer_channels_still_answers_every_key(
    tmp_path: Path, max_sessions: int
) -> None:
    """OpenSSH refuses a channel past its MaxSessions ("administratively prohibited"): the
    connection keeps to what the server allows and the other commands wait their turn."""
    require_tool("sshd", "/usr/sbin/sshd")
    with SshLab(tmp_path / "lab", max_sessions=max_sessions) as lab:
        source = SshNodeSource(lab.settings())
        try:
            with ThreadPoolExecutor(len(NODE_KEYS)) as pool:
                results = dict(
                    zip(
                        NODE_KEYS,
                        pool.map(lambda k: source.collect(k, lab.query(), 20), NODE_KEYS),
                        strict=True,
                    )
                )
        finally:
            source.close()
        assert {k: e.status for k, e in results.items()} == {k: Status.OK for k in NODE_KEYS}, {
            k.value: e.detail for k, e in results.items()
        }
        assert lab.node.logins() == 1


def test_an_aead_cipher_is_negotiated_where_the_server_offers_one(lab: SshLab) -> None:
    """AES-GCM is checked in compiled code; the CTR ciphers' MAC is compared in Python."""
    source = SshNodeSource(lab.settings())
    try:
        assert source.collect(Key.LSMOD, lab.query(), timeout=20).ok
        (conn,) = source._connections.values()
        ciphers = {
            (c.get_transport().local_cipher, c.get_transport().remote_cipher) for c in conn.clients
        }
    finally:
        source.close()
    assert ciphers == {("aes128-gcm@openssh.com", "aes128-gcm@openssh.com")}
