"""Which node transport the options ask for, and which address a node is reached at."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gputriage.errors import GputriageError
from gputriage.evidence.sources import NodeSource
from gputriage.options import NodeAccess

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
            raise GputriageError(
                f"--node-address wants NODE=HOST (e.g. gpu-7=10.0.3.7 or "
                f"gpu-7=gpu-7.example.net), got {value!r}",
                title="bad --node-address",
            )
        result[node.strip()] = host.strip()
    return result


def node_source(access: NodeAccess) -> NodeSource | None:
    """The node transport ``access`` asks for, or None for none.

    ``local`` reads this machine (NVML plus local commands); otherwise SSH unless ``ssh`` is
    off. Nothing connects here: connections are made on the first ``collect``.
    """
    if access.local:
        from gputriage.evidence.local import LocalNodeSource

        return LocalNodeSource(sudo=access.sudo)
    if not access.ssh:
        return None
    from gputriage.evidence.ssh import SshNodeSource, SshSettings

    return SshNodeSource(
        SshSettings(
            config_path=access.ssh_config,
            user=access.ssh_user,
            overrides=dict(access.node_addresses),
            known_hosts=access.known_hosts,
            accept_new_host_key=access.accept_new_host_key,
            sudo=access.sudo,
        )
    )
