"""Which node transport the command line asks for, and which address a node is reached at."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from gputriage.errors import GputriageError
from gputriage.evidence.sources import NodeSource

#: Node address types in the order they are tried (as ``kubectl get node -o wide`` lists them).
ADDRESS_PREFERENCE = ("InternalIP", "Hostname", "InternalDNS", "ExternalIP", "ExternalDNS")


def node_address(node: Mapping[str, Any], overrides: Mapping[str, str]) -> str:
    """Where to connect for ``node`` (a Node object): the ``--node-address`` override, else
    its InternalIP, else its Hostname (then DNS/external addresses), else its name."""
    meta = node.get("metadata") if isinstance(node, Mapping) else None
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    if name and overrides.get(name):
        return overrides[name]
    status = node.get("status") if isinstance(node, Mapping) else None
    addresses = status.get("addresses") if isinstance(status, Mapping) else None
    found: dict[str, str] = {}
    for item in addresses if isinstance(addresses, list) else []:
        if isinstance(item, Mapping) and item.get("address"):
            found.setdefault(str(item.get("type", "")), str(item["address"]))
    for kind in ADDRESS_PREFERENCE:
        if kind in found:
            return found[kind]
    return name


def parse_node_addresses(values: Iterable[str]) -> dict[str, str]:
    """``--node-address NODE=HOST`` values -> ``{NODE: HOST}``."""
    result: dict[str, str] = {}
    for value in values:
        node, sep, host = value.partition("=")
        if not sep or not node.strip() or not host.strip():
            raise GputriageError(f"--node-address wants NODE=HOST (e.g. gpu-7=10.0.3.7 or "
                                 f"gpu-7=gpu-7.example.net), got {value!r}",
                                 title="bad --node-address")
        result[node.strip()] = host.strip()
    return result


def node_source_from_args(args: argparse.Namespace) -> NodeSource | None:
    """The node transport the options ask for (``commands/options.py``), or None for none.

    ``--local`` reads this machine (NVML plus local commands); otherwise SSH unless
    ``--ssh off``. Nothing connects here: connections are made on the first ``collect``.
    """
    sudo = bool(getattr(args, "sudo", False))
    if getattr(args, "local", False):
        from gputriage.evidence.local import LocalNodeSource

        return LocalNodeSource(sudo=sudo)
    if getattr(args, "ssh", "auto") == "off":
        return None
    from gputriage.evidence.ssh import SshNodeSource, SshSettings

    return SshNodeSource(SshSettings(
        config_path=getattr(args, "ssh_config", None),
        user=getattr(args, "ssh_user", None),
        overrides=parse_node_addresses(getattr(args, "node_address", None) or []),
        known_hosts=getattr(args, "known_hosts", None),
        accept_new_host_key=bool(getattr(args, "accept_new_host_key", False)),
        sudo=sudo,
    ))
