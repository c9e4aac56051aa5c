"""ClusterRole rules from a manifest, and which recorded requests they would not allow."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.kubeapi.server import Request, User


def load_rbac_rules(path: Path, *, roles: Sequence[str] = ()) -> list[Mapping[str, Any]]:
    """The rules of every ClusterRole in ``path`` (or only those named in ``roles``)."""
    rules: list[Mapping[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") != "ClusterRole":
            continue
        if roles and doc["metadata"]["name"] not in roles:
            continue
        rules.extend(doc.get("rules") or [])
    return rules


def request_attributes(req: Request) -> tuple[str, str, str, str, str] | None:
    """(verb, group, resource, namespace, name) of a resource request; None for discovery
    and other non-resource paths."""
    parts = [p for p in req.path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    name = rest[1] if len(rest) >= 2 else ""
    verb = "get" if name else ("watch" if req.param("watch") == "true" else "list")
    return verb, group, resource, namespace, name


def uncovered(requests: Iterable[Request], rules: Sequence[Mapping[str, Any]]) -> list[str]:
    """Requests (as "verb group/resource") that ``rules`` do not grant."""
    user = User("rbac-check", tuple(rules))
    missing: set[str] = set()
    for req in requests:
        attrs = request_attributes(req)
        if attrs is None:
            continue
        verb, group, resource, namespace, name = attrs
        if not user.allows(verb, group, resource, namespace, name):
            missing.add(f"{verb} {group or 'core'}/{resource}")
    return sorted(missing)
