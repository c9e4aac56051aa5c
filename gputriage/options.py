"""Typed options: what the SRE asked for, built once by the command layer.

``gputriage.commands.options`` turns the command line into these frozen dataclasses; nothing
below ``commands/`` sees argparse. Every default lives here, once, and the command line's
``--help`` reads it from here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

#: Time window for journals and kernel logs read from a node (``--since``).
DEFAULT_SINCE = "2h"
#: Seconds each Kubernetes API call may take (``--request-timeout``).
DEFAULT_REQUEST_TIMEOUT = 10.0
#: Candidate nodes of an unscheduled pod whose node evidence is read (``--nodes``).
DEFAULT_CANDIDATE_NODES = 3
#: The namespace used when neither ``-n`` nor the kubeconfig context names one.
DEFAULT_NAMESPACE = "default"

ReportFormat = Literal["md", "text", "json"]


def _frozen(pairs: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(pairs or {}))


@dataclass(frozen=True)
class MetricsAccess:
    """Where the GPU metrics history lives (``--prometheus`` and friends); all optional."""

    url: str = ""
    """Prometheus base URL or ``svc:NS/NAME:PORT``; '' reads ``$GPUTRIAGE_PROMETHEUS_URL``."""
    token_file: str = ""
    """File holding a bearer token ('' reads ``$GPUTRIAGE_PROMETHEUS_TOKEN``)."""
    user: str = ""
    """Basic-auth user."""
    password_file: str = ""
    """File holding the basic-auth password."""
    ca_file: str = ""
    """CA bundle that signs Prometheus's TLS certificate."""
    insecure: bool = False
    """Skip TLS verification (never the default)."""
    window: str = "7d"
    """How far back to query (``--metrics-window``)."""


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach the Kubernetes API (``-n``, ``--context``, ``--kubeconfig``...)."""

    namespace: str | None = None
    """Namespace of the target; None: the context's, else :data:`DEFAULT_NAMESPACE`."""
    context: str | None = None
    """kubeconfig context; None: the current-context."""
    kubeconfig: str | None = None
    """kubeconfig file; None: ``$KUBECONFIG`` or ``~/.kube/config``."""
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    """Seconds for each API call; node transports get twice as long."""
    metrics: MetricsAccess = field(default_factory=MetricsAccess)
    """The optional Prometheus (DCGM exporter) history."""


@dataclass(frozen=True)
class NodeAccess:
    """How to read evidence from the node itself (SSH, or this machine with ``--local``)."""

    ssh: bool = True
    """Read node evidence over SSH (``--ssh auto``); False for ``--ssh off``."""
    ssh_config: str | None = None
    """ssh_config file; None: ``~/.ssh/config``."""
    ssh_user: str | None = None
    """User for node SSH; None: from ssh_config, else ``$USER``."""
    node_addresses: Mapping[str, str] = field(default_factory=_frozen)
    """``--node-address NODE=HOST``: where to connect for a node instead of its InternalIP."""
    known_hosts: str | None = None
    """known_hosts file; None: ``~/.ssh/known_hosts``."""
    accept_new_host_key: bool = False
    """Trust a host key not yet in known_hosts (never a changed one)."""
    sudo: bool = False
    """Run node commands with ``sudo -n``."""
    candidate_nodes: int = DEFAULT_CANDIDATE_NODES
    """``--nodes K``: for an unscheduled pod, read node evidence from at most K of the GPU nodes
    it could land on, the troubled ones first (0: none)."""
    since: str = DEFAULT_SINCE
    """Time window for journals and kernel logs."""
    local: bool = False
    """gputriage runs on the node itself: read NVML and logs locally instead of over SSH."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_addresses", _frozen(self.node_addresses))


@dataclass(frozen=True)
class WalkOptions:
    """What shapes the walk and the summary, in the TUI and headless alike."""

    playbook_dirs: tuple[Path, ...] = ()
    """Extra playbook directories (``--playbooks``), adding to or overriding shipped ones."""
    notes_file: Path | None = None
    """``--notes FILE``: read-only notes included in the summary."""


@dataclass(frozen=True)
class ReportOptions:
    """The headless walk (``--report md|json``)."""

    format: ReportFormat = "md"
    """Markdown (tickets), plain text (chat) or JSON (bots)."""
    output: Path | None = None
    """Write the summary there (atomically); None: stdout (``-o -`` too)."""
    answers: Mapping[str, str] = field(default_factory=_frozen)
    """``--answer STEP=CHOICE``: answers to ``ask`` steps."""
    overrides: Mapping[str, str] = field(default_factory=_frozen)
    """``--override STEP=TARGET``: other branches taken."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", _frozen(self.answers))
        object.__setattr__(self, "overrides", _frozen(self.overrides))


@dataclass(frozen=True)
class TuiOptions:
    """The interactive walk."""

    export_dir: Path = Path(".")
    """Where ``e`` (export) writes the incident summary."""


@dataclass(frozen=True)
class TriageOptions:
    """Everything a triage command was given, apart from its target."""

    cluster: ClusterAccess = field(default_factory=ClusterAccess)
    node: NodeAccess = field(default_factory=NodeAccess)
    walk: WalkOptions = field(default_factory=WalkOptions)
    report: ReportOptions | None = None
    """None: the TUI."""
    tui: TuiOptions = field(default_factory=TuiOptions)
    bundle: Path | None = None
    """``--from DIR``: replay this bundle instead of reading the live cluster."""
