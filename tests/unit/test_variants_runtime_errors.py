"""Container-runtime failure wordings (containerd, CRI-O, Docker; runc and NVIDIA hooks; CDI).

Each message is a real string copied from the public source in the comment beside it. The same
table is checked three ways, because the same runtime error reaches gputriage three ways:
the shared parser (:mod:`gputriage.parsers.runtime_errors`), an event (``facts.events``), and
the kubelet journal, where the kubelet quotes the runtime's error inside its own structured
``"Error syncing pod, skipping" err="..."`` line (format of kubernetes/kubernetes
pkg/kubelet/pod_workers.go, k8s-messages.md 4.3), so the journal rows wrap the real message
the way the kubelet does (Go ``%q``) instead of inventing a journal line.
"""

from __future__ import annotations

import json
import time

import pytest

from gputriage.facts.events import summarise
from gputriage.parsers.journal import parse_kubelet_journal
from gputriage.parsers.runtime_errors import (
    cdi_devices,
    container_cli_errors,
    hook_errors,
    missing_runtime_handler,
)
from tests.events import event_record

# --- missing runtime handler: (id, event reason, message, handler) -----------------------------
HANDLER_VARIANTS: list[tuple[str, str, str, str]] = [
    # containerd 1.x CRI: NVIDIA/gpu-operator#549, #730
    (
        "containerd-1",
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox "
        'runtime: no runtime for "nvidia" is configured',
        "nvidia",
    ),
    # containerd 2.x CRI: NVIDIA/gpu-operator#2168 (must-gather events)
    (
        "containerd-2",
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = unable to get OCI runtime "
        'for sandbox "18073b779521b77e3cbc7752dd5c2f63064efe24cec18807e917cd29f31fdf50": no runtime '
        'for "nvidia" is configured',
        "nvidia",
    ),
    # CRI-O: NVIDIA/NVSentinel#442
    (
        "cri-o",
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to find runtime "
        "handler nvidia from runtime list map[crun:0xc00047e300 runc:0xc00047ef00]",
        "nvidia",
    ),
    # dockershim (k8s <= 1.23): NVIDIA/gpu-operator#250 ("Failed create pod sandbox", sic)
    (
        "dockershim",
        "FailedCreatePodSandBox",
        'Failed create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "nvidia" not '
        "supported",
        "nvidia",
    ),
    # cri-dockerd: sgl-project/sglang#5515
    (
        "cri-dockerd",
        "FailedCreatePodSandBox",
        'Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "nvidia" not '
        "supported",
        "nvidia",
    ),
]

# --- nvidia-container-cli through every hook wrapper: (id, message, kind, detail) -------------
CLI_VARIANTS: list[tuple[str, str, str, str]] = [
    # Docker + runc container_linux.go, "running prestart hook 0 caused", exec command form:
    # AliyunContainerService/gpushare-scheduler-extender#42
    (
        "runc-old-exec-command",
        r'Error: failed to start container "binpack-1": Error response from daemon: OCI runtime '
        r"create failed: container_linux.go:345: starting container process caused "
        r'"process_linux.go:430: container init caused \"process_linux.go:413: running prestart '
        r"hook 0 caused \\\"error running hook: exit status 1, stdout: , stderr: exec command: "
        r"[/usr/bin/nvidia-container-cli --load-kmods configure --ldconfig=@/sbin/ldconfig.real "
        r"--device=no-gpu-has-8000MiB-to-run --compute --utility --require=cuda>=8.0 --pid=21752 "
        r"/var/lib/docker/overlay2/8369b3190a5635953e23ae948b86d753da09a8d2f81610ac279582b5f9412b7b"
        r"/merged]\\\\nnvidia-container-cli: device error: unknown device id: "
        r'no-gpu-has-8000MiB-to-run\\\\n\\\"\"": unknown',
        "device",
        "unknown device id: no-gpu-has-8000MiB-to-run",
    ),
    # same wrapper, requirement with spaces (nvidia-container-cli 1.0): NVIDIA/nvidia-docker#536
    (
        "runc-old-requirement-spaces",
        r'container_linux.go:265: starting container process caused "process_linux.go:368: '
        r"container init caused \"process_linux.go:351: running prestart hook 1 caused \\\"error "
        r"running hook: exit status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli"
        r" --load-kmods configure --ldconfig=@/sbin/ldconfig.real --device=all --compute --utility "
        r"--require=cuda>=9.0 --pid=4781 /var/lib/docker/overlay2/7c70a2548b24e6186519dded1f09ac9b7"
        r"cb30115195d7673cd081df76f8ab327/merged]\\\\nnvidia-container-cli: requirement error: "
        r'unsatisfied condition: cuda >= 9.0\\\\n\\\"\""',
        "requirement",
        "unsatisfied condition: cuda >= 9.0",
    ),
    # NVIDIA/nvidia-docker#577 (detection, nvml "not found")
    (
        "runc-old-detection-not-found",
        r"stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods configure "
        r"--ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --require=cuda>=6.5 "
        r"--pid=4577 /var/lib/docker/overlay2/bc75a7b9ef60ec49d2b794db7c12abe96ece0d95a8b1620ed3c05"
        r"303b95eee0a/merged]\\\\nnvidia-container-cli: detection error: nvml error: not found"
        r'\\\\n\\\"\""',
        "detection",
        "nvml error: not found",
    ),
    # NVIDIA/nvidia-docker#1252 (initialization, driver RPC)
    (
        "runc-old-driver-error",
        r"docker: Error response from daemon: OCI runtime create failed: container_linux.go:349: "
        r'starting container process caused "process_linux.go:449: container init caused '
        r"\"process_linux.go:432: running prestart hook 1 caused \\\"error running hook: exit status "
        r"1, stdout: , stderr: nvidia-container-cli: initialization error: driver error: failed to "
        r'process request\\\\n\\\"\"": unknown.',
        "initialization",
        "driver error: failed to process request",
    ),
    # operator-installed toolkit (.real), CoreOS: NVIDIA/nvidia-docker#1225
    (
        "operator-real-binary",
        r"/run/torcx/bin/docker: Error response from daemon: OCI runtime create failed: "
        r'container_linux.go:348: starting container process caused "process_linux.go:402: container '
        r"init caused \"process_linux.go:385: running prestart hook 1 caused \\\"error running hook: "
        r"exit status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: driver "
        r'error: failed to process request\\\\n\\\"\"": unknown.',
        "initialization",
        "driver error: failed to process request",
    ),
    # NVIDIA/nvidia-docker#839 (cuda error)
    (
        "runc-old-cuda-error",
        r'\\\\nnvidia-container-cli: initialization error: cuda error: unknown error\\\\n\\\"\"": '
        r"unknown.",
        "initialization",
        "cuda error: unknown error",
    ),
    # docker/for-linux#846 (driver requirement)
    (
        "runc-old-driver-requirement",
        r"\\\\nnvidia-container-cli: requirement error: unsatisfied condition: driver >= 410\\\\n"
        r'\\\"\"": unknown.',
        "requirement",
        "unsatisfied condition: driver >= 410",
    ),
    # runc 1.0 "Running hook #0::": NVIDIA/nvidia-docker#1505, NVIDIA/nvidia-container-toolkit#292
    (
        "runc-1.0-running-hook",
        "docker: Error response from daemon: OCI runtime create failed: container_linux.go:367: "
        "starting container process caused: process_linux.go:495: container init caused: Running "
        "hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
        "detection error: nvml error: unknown error: unknown.",
        "detection",
        "nvml error: unknown error",
    ),
    # runc 1.0 + containerd shim: NVIDIA/nvidia-container-toolkit#260
    (
        "runc-1.0-shim-driver-not-loaded",
        "docker: Error response from daemon: failed to create shim: OCI runtime create failed: "
        "container_linux.go:380: starting container process caused: process_linux.go:545: container "
        "init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: "
        "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.",
        "initialization",
        "nvml error: driver not loaded",
    ),
    # runc 1.1 "error running hook #0", toolkit >= 1.14 "Auto-detected mode" prefix, real newline:
    # NVIDIA/nvidia-container-toolkit#416
    (
        "runc-1.1-auto-detected",
        "docker: Error response from daemon: failed to create task for container: failed to create "
        "shim task: OCI runtime create failed: runc create failed: unable to start container "
        "process: error during container init: error running hook #0: error running hook: exit "
        "status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: "
        "detection error: nvml error: unknown error: unknown.",
        "detection",
        "nvml error: unknown error",
    ),
    # same, device index unknown: NVIDIA/nvidia-container-toolkit#632
    (
        "runc-1.1-device-index",
        "Cannot start service htdet: failed to create shim task: OCI runtime create failed: runc "
        "create failed: unable to start container process: error during container init: error "
        "running hook #1: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as "
        "'legacy'\nnvidia-container-cli: device error: 2: unknown device: unknown",
        "device",
        "2: unknown device",
    ),
    # same, missing driver libraries, joined on one line: Atinoda/text-generation-webui-docker#20
    (
        "runc-1.1-load-library-one-line",
        "Error response from daemon: failed to create shim task: OCI runtime create failed: runc "
        "create failed: unable to start container process: error during container init: error "
        "running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode "
        "as 'legacy' nvidia-container-cli: initialization error: load library failed: "
        "libnvidia-ml.so.1: cannot open shared object file: no such file or directory: unknown",
        "initialization",
        "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or "
        "directory",
    ),
    # operator toolkit on Kubernetes: NVIDIA/gpu-operator#511 (title)
    (
        "operator-real-load-library",
        "nvidia-container-cli.real: initialization error: load library failed: libnvidia-ml.so.1: "
        "cannot open shared object file: no such file or directory: unknown",
        "initialization",
        "load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or "
        "directory",
    ),
    # runc 1.2 on Kubernetes (containerd task), driver upgraded under the running kernel
    # module: NVIDIA/k8s-device-plugin#1431; same text as a StartError, NVIDIA/gpu-operator#898
    (
        "runc-1.2-containerd-version-mismatch",
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
        "runc create failed: unable to start container process: error during container init: "
        "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as "
        "'legacy'\nnvidia-container-cli: initialization error: nvml error: driver/library version "
        "mismatch: unknown",
        "initialization",
        "nvml error: driver/library version mismatch",
    ),
    # runc 1.2 "error running prestart hook #0": MauriceNino/dashdot#1226
    (
        "runc-1.2-prestart-hook",
        "Error response from daemon: failed to create task for container: failed to create shim "
        "task: OCI runtime create failed: runc create failed: unable to start container process: "
        "error during container init: error running prestart hook #0: exit status 1, stdout: , "
        "stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: "
        "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an "
        "earlier cuda container: unknown",
        "requirement",
        "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an "
        "earlier cuda container",
    ),
]

# mount / ldcache classes: NVIDIA/nvidia-container-toolkit#295, hekmak/Conf-net#5
CLI_VARIANTS += [
    (
        "runc-old-mount-error",
        r"docker: Error response from daemon: OCI runtime create failed: container_linux.go:349: "
        r'starting container process caused "process_linux.go:449: container init caused '
        r"\"process_linux.go:432: running prestart hook 1 caused \\\"error running hook: exit status "
        r"1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods configure "
        r"--ldconfig=@/sbin/ldconfig.real --device=all --compute --compat32 --graphics --utility "
        r"--video --display --pid=9165 /var/lib/docker/overlay2/2a1a1c3555109e20c5ba2e386cc3ce69cbb8"
        r"0c3850663c1909db8c46ed565c0c/merged]\\\\nnvidia-container-cli: mount error: file creation "
        r"failed: /var/lib/docker/overlay2/2a1a1c3555109e20c5ba2e386cc3ce69cbb80c3850663c1909db8c46ed"
        r"565c0c/merged/usr/lib/aarch64-linux-gnu/libnvidia-fatbinaryloader.so.440.18: file exists"
        r'\\\\n\\\"\"": unknown',
        "mount",
        "file creation failed: /var/lib/docker/overlay2/2a1a1c3555109e20c5ba2e386cc3ce69cbb80c3850663"
        "c1909db8c46ed565c0c/merged/usr/lib/aarch64-linux-gnu/libnvidia-fatbinaryloader.so.440.18: "
        "file exists",
    ),
    (
        "runc-1.0-ldcache-error",
        "docker: Error response from daemon: OCI runtime create failed: container_linux.go:380: "
        "starting container process caused: process_linux.go:545: container init caused: Running "
        "hook #1:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
        "ldcache error: open failed: /sbin/ldconfig.real: no such file or directory: unknown.",
        "ldcache",
        "open failed: /sbin/ldconfig.real: no such file or directory",
    ),
]

# --- any OCI hook, NVIDIA's toolkit hooks included: (id, message, stage, hook's words) ---------
HOOK_VARIANTS: list[tuple[str, str, str, str]] = [
    # nvidia-ctk / nvidia-cdi-hook create-symlinks (toolkit 1.17.0, CDI mode), logrus msg:
    # NVIDIA/nvidia-container-toolkit#772
    (
        "cdi-hook-create-link",
        "failed to create task for container: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: error during container "
        "init: error running hook #1: error running hook: exit status 1, stdout: , stderr: "
        'time="yyyy-mm-ddThh:mm:ss+hh:mm" level=error msg="failed to create link '
        "[libGLX_nvidia.so.535.183.01 /usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0]: failed to "
        'check if link exists: unexpected link target: libGLX_mesa.so.0": unknown"',
        "",
        "failed to create link [libGLX_nvidia.so.535.183.01 "
        "/usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0]: failed to check if link exists: "
        "unexpected link target: libGLX_mesa.so.0",
    ),
    # a hook binary that is not the NVIDIA hook, quoted by dockerd:
    # NVIDIA/nvidia-container-toolkit#14
    (
        "hook-wrong-binary",
        r"Handler for POST /v1.41/containers/31dc8c5a195f/start returned error: OCI runtime create "
        r"failed: container_linux.go:380: starting container process caused: process_linux.go:545: "
        r"container init caused: Running hook #1:: error running hook: exit status 3, stdout: , "
        r"stderr: time=\"2022-02-13T11:11:05+11:00\" level=error msg=\"No help topic for "
        r"'prestart'\\n\": unknown",
        "",
        "No help topic for 'prestart'",
    ),
    # the runtime could not even add its hook (nvidia-container-runtime log):
    # NVIDIA/nvidia-docker#1017
    (
        "runtime-inject-hook",
        "2019/07/23 14:19:45 ERROR: inject NVIDIA hook: stat /usr/bin/nvidia-container-runtime-hook: "
        "no such file or directory",
        "",
        "inject NVIDIA hook: stat /usr/bin/nvidia-container-runtime-hook: no such file or "
        "directory",
    ),
    # runc 1.2 names the stage: MauriceNino/dashdot#1226
    (
        "runc-1.2-prestart-stage",
        CLI_VARIANTS[[i for i, *_ in CLI_VARIANTS].index("runc-1.2-prestart-hook")][1],
        "prestart",
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update "
        "your driver to a newer version, or use an earlier cuda container",
    ),
    # runc <= 1.0-rc9, exec command form: the cli line, not the command, is the hook's word
    (
        "runc-old-exec-command-stage",
        CLI_VARIANTS[0][1],
        "prestart",
        "nvidia-container-cli: device error: unknown device id: no-gpu-has-8000MiB-to-run",
    ),
]

# --- CDI: (id, message, devices) ---------------------------------------------------------------
CDI_VARIANTS: list[tuple[str, str, list[str]]] = [
    # NVIDIA runtime modifier under containerd (k8s event): NVIDIA/nvidia-container-toolkit#1239
    (
        "nvidia-runtime-modifier",
        "Error: failed to create containerd task: failed to create shim task: OCI runtime create "
        "failed: could not apply required modification to OCI specification: error modifying OCI "
        "spec: failed to inject CDI devices: unresolvable CDI devices "
        "management.nvidia.com/gpu=GPU-e78e68c0-4e6a-737e-f9cc-4223fe50aead",
        ["management.nvidia.com/gpu=GPU-e78e68c0-4e6a-737e-f9cc-4223fe50aead"],
    ),
    # containerd native CDI (DRA driver): kubernetes-sigs/dra-driver-nvidia-gpu#736
    (
        "containerd-native",
        "Error: failed to create containerd container: CDI device injection failed: unresolvable "
        "CDI devices k8s.gpu.nvidia.com/device=gpu-1",
        ["k8s.gpu.nvidia.com/device=gpu-1"],
    ),
    # Docker native CDI: moby/moby#47633
    (
        "docker-native",
        "docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices "
        "spidernet.io/test=demo1.",
        ["spidernet.io/test=demo1"],
    ),
    # toolkit container log (operator): NVIDIA/gpu-operator#531
    (
        "operator-toolkit-log",
        "unresolvable CDI devices management.nvidia.com/gpu=all: unknown",
        ["management.nvidia.com/gpu=all"],
    ),
]


def _journal_line(
    inner: str,
    pod: str = "gpu-pod",
    ns: str = "default",
    uid: str = "3f0c1e52-4a8b-4a55-9d3c-1c2f1a0b9e77",
) -> str:
    """``inner`` as the kubelet's pod worker logs it: err="failed to \\"StartContainer\\" ...",
    each level Go-quoted (kubernetes/kubernetes pkg/kubelet/pod_workers.go)."""
    err = f'failed to "StartContainer" for "main" with RunContainerError: {json.dumps(inner)}'
    return (
        f"Mar 05 10:12:00 gpu-node-7 kubelet[1234]: E0305 10:12:00.000000    1234 "
        f'pod_workers.go:1298] "Error syncing pod, skipping" err={json.dumps(err)} '
        f'pod="{ns}/{pod}" podUID="{uid}"'
    )


@pytest.mark.parametrize(
    ("reason", "message", "handler"),
    [(r, m, h) for _, r, m, h in HANDLER_VARIANTS],
    ids=[i for i, *_ in HANDLER_VARIANTS],
)
def test_missing_runtime_handler_variant(reason: str, message: str, handler: str) -> None:
    assert missing_runtime_handler(message) == handler
    values, cites = summarise([event_record(reason, message)])
    assert values["runtime_handler_missing"] is True
    assert values["runtime_handler"] == handler
    assert values["sandbox_errors"] == [message]
    assert cites["runtime_handler_missing"][0].line == 1
    journal = parse_kubelet_journal(_journal_line(message), namespace="default", pod="gpu-pod")
    assert journal.runtime_handler is not None
    assert journal.runtime_handler[0] == handler


@pytest.mark.parametrize(
    ("message", "kind", "detail"),
    [(m, k, d) for _, m, k, d in CLI_VARIANTS],
    ids=[i for i, *_ in CLI_VARIANTS],
)
def test_container_cli_variant(message: str, kind: str, detail: str) -> None:
    expected = f"nvidia-container-cli: {kind} error: {detail}"
    errors = container_cli_errors(message)
    assert [(e.kind, e.message) for e in errors] == [(kind, expected)]
    values, _ = summarise([event_record("Failed", message)])
    assert values["nvidia_container_cli_errors"] == [{"kind": kind, "message": expected}]
    assert values["container_errors"] == [message]
    journal = parse_kubelet_journal(_journal_line(message), namespace="default", pod="gpu-pod")
    assert [(s.kind, s.message) for s in journal.container_cli_errors] == [(kind, expected)]


@pytest.mark.parametrize(
    ("message", "stage", "detail"),
    [(m, s, d) for _, m, s, d in HOOK_VARIANTS],
    ids=[i for i, *_ in HOOK_VARIANTS],
)
def test_oci_hook_variant(message: str, stage: str, detail: str) -> None:
    assert [(h.stage, h.detail) for h in hook_errors(message)] == [(stage, detail)]
    values, _ = summarise([event_record("Failed", message)])
    assert values["oci_hook_errors"] == [{"stage": stage, "message": detail}]
    journal = parse_kubelet_journal(_journal_line(message), namespace="default", pod="gpu-pod")
    assert [(s.kind, s.message) for s in journal.hook_errors] == [(stage, detail)]


@pytest.mark.parametrize(
    ("message", "devices"), [(m, d) for _, m, d in CDI_VARIANTS], ids=[i for i, *_ in CDI_VARIANTS]
)
def test_cdi_variant(message: str, devices: list[str]) -> None:
    assert cdi_devices(message) == devices
    journal = parse_kubelet_journal(_journal_line(message), namespace="default", pod="gpu-pod")
    assert len(journal.cdi_errors) == 1
    assert journal.cdi_errors[0].devices == devices


def test_unrelated_runtime_errors_are_not_misread() -> None:
    """Runtime errors of other kinds name no handler and no nvidia-container-cli class."""
    # NVIDIA/gpu-operator#549: containerd socket down while the toolkit restarts it
    other = (
        "Failed to create pod sandbox: rpc error: code = Unavailable desc = connection error: "
        'desc = "transport: Error while dialing dial unix /run/containerd/containerd.sock: '
        'connect: connection refused"'
    )
    assert missing_runtime_handler(other) is None
    assert container_cli_errors(other) == []
    assert hook_errors(other) == []
    values, _ = summarise([event_record("FailedCreatePodSandBox", other)])
    assert values["runtime_handler_missing"] is False
    assert values["sandbox_errors"] == [other]


def test_hostile_repetition_does_not_hang() -> None:
    """Hook wrappers without a stderr, repeated over a 64 KiB journal line (the longest the
    journal parser reads), are scanned in bounded time (a generous bound: "does not hang")."""
    text = "error running hook #1: " * 3000 + "running prestart hook 0 caused " * 2000
    started = time.monotonic()
    assert hook_errors(text) == []
    assert container_cli_errors("nvidia-container-cli: x error: " * 3000) != []
    assert time.monotonic() - started < 10
