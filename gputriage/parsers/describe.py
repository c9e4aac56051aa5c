"""Turn pasted ``kubectl describe pod`` text into a pod dict and its events.

SREs paste describe output into tickets far more often than JSON, so the bundle reader accepts
it for ``pod`` (``pod.describe.txt``). :func:`parse_pod_describe` returns a dict shaped like
``kubectl get pod -o json`` (only the fields describe prints) and the Events table as v1 Event
dicts, each with an extra ``_line`` (1-based line of the row in the text) so verdicts can cite
it, and ``_age`` / ``_first_age`` (the ages kubectl printed; describe shows no timestamps).

The layout follows kubectl's ``describePod`` (k8s.io/kubectl ``pkg/describe/describe.go``,
1.2x-1.3x): top-level ``Key:<tab>value`` lines at column 0, containers at two spaces, their
fields at four, sub-fields at six, all aligned by a tabwriter. Two quirks matter:

* multi-line values (a terminated container's ``Message:``, an event message) continue at
  column 0, because kubectl's prefix writer indents only the first line;
* ``Labels``, ``Annotations``, ``Node-Selectors`` and ``Tolerations`` continue on lines
  indented to the value column, without a key.

Junk never raises: unknown lines are skipped and whatever was understood is returned.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

Lines = list[tuple[int, str]]  # (1-based line number, text)

_TOP_KEYS = frozenset(
    {
        "Name",
        "Namespace",
        "Priority",
        "Priority Class Name",
        "PriorityClassName",
        "Runtime Class Name",
        "Service Account",
        "Node",
        "Start Time",
        "Labels",
        "Annotations",
        "Status",
        "Termination Grace Period",
        "Reason",
        "Message",
        "SeccompProfile",
        "LocalhostProfile",
        "IP",
        "IPs",
        "Controlled By",
        "NominatedNodeName",
        "Resources",
        "Init Containers",
        "Containers",
        "Ephemeral Containers",
        "Readiness Gates",
        "Conditions",
        "Volumes",
        "QoS Class",
        "Node-Selectors",
        "Tolerations",
        "Topology Spread Constraints",
        "Events",
    }
)
_CONTAINER_KEYS = frozenset(
    {
        "Container ID",
        "Image",
        "Image ID",
        "Port",
        "Ports",
        "Host Port",
        "Host Ports",
        "SeccompProfile",
        "Command",
        "Args",
        "State",
        "Last State",
        "Ready",
        "Restart Count",
        "Limits",
        "Requests",
        "Liveness",
        "Readiness",
        "Startup",
        "Environment Variables from",
        "Environment",
        "Mounts",
        "Devices",
    }
)
_STATE_KEYS = frozenset({"Reason", "Message", "Exit Code", "Signal", "Started", "Finished"})

_TOP_LINE = re.compile(r"^(?P<key>[A-Z][A-Za-z -]*):(?:[ \t]+(?P<value>.*?))?\s*$")
_KEY_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]*):(?:\s+(?P<value>.*?))?\s*$")
_CONTAINER_NAME = re.compile(r"^  (?P<name>[a-z0-9]([-a-z0-9.]*[a-z0-9])?):\s*$")
_VOLUME_NAME = re.compile(r"^  (?P<name>[A-Za-z0-9]([-A-Za-z0-9._]*[A-Za-z0-9])?):\s*$")
_RESOURCE_LINE = re.compile(r"^\s+(?P<name>[A-Za-z0-9][\w./-]*):\s+(?P<value>\S+)\s*$")
_MOUNT_LINE = re.compile(r"^\s+(?P<path>\S+) from (?P<name>\S+) \((?P<flags>[^)]*)\)\s*$")
_ENV_LINE = re.compile(r"^ {6}(?P<name>[A-Za-z_][A-Za-z0-9_.-]*):(?:\s+(?P<value>.*?))?\s*$")
_CONDITION_ROW = re.compile(r"^\s+(?P<type>[A-Za-z][\w.-]*)\s+(?P<status>True|False|Unknown)\s*$")
_AGE = r"(?:<unknown>|<invalid>|\d+[smhdy](?:\d+[smhdy])?)"
_EVENT_ROW = re.compile(
    r"^\s{1,4}(?P<type>Normal|Warning|[A-Z][a-z]+)\s{2,}(?P<reason>\S+)\s{2,}"
    rf"(?P<age>{_AGE})(?: \(x(?P<count>\d+) over (?P<over>{_AGE})\))?"
    r"(?:\s{2,}(?P<source>[^\s,]+(?:, \S+)?))?(?:\s{2,}(?P<message>.*?))?\s*$"
)
_TOLERATION = re.compile(
    r"^(?P<key>[^=:\s]*)(?:=(?P<value>[^:\s]*))?(?::(?P<effect>[A-Za-z]+))?"
    r"(?:\s*op=(?P<op>Exists))?(?: for (?P<seconds>-?\d+)s)?$"
)
_OWNER_API = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Node": "v1",
    "ReplicationController": "v1",
}
_VOLUME_TYPES = {
    "EmptyDir": "emptyDir",
    "HostPath": "hostPath",
    "PersistentVolumeClaim": "persistentVolumeClaim",
    "ConfigMap": "configMap",
    "Secret": "secret",
    "Projected": "projected",
    "EphemeralVolume": "ephemeral",
    "DownwardAPI": "downwardAPI",
    "CSI": "csi",
}


def parse_pod_describe(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(pod dict shaped like ``kubectl get pod -o json``, Event dicts with ``_line``)."""
    parser = _PodDescribe()
    # A paste must never crash triage: on a surprise keep what was understood so far.
    with contextlib.suppress(Exception):
        parser.parse(text if isinstance(text, str) else "")
    return parser.pod, parser.events


class _PodDescribe:
    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.spec: dict[str, Any] = {}
        self.status: dict[str, Any] = {}
        self.pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.meta,
            "spec": self.spec,
            "status": self.status,
        }
        self.events: list[dict[str, Any]] = []

    def parse(self, text: str) -> None:
        handlers: dict[str, Callable[[str, Lines], None]] = {
            "Labels": self._labels,
            "Annotations": self._annotations,
            "Node": self._node,
            "Status": self._status,
            "Message": self._message,
            "Controlled By": self._owner,
            "Start Time": lambda v, _b: self.status.__setitem__("startTime", _rfc3339(v)),
            "IPs": self._ips,
            "Resources": self._pod_resources,
            "Init Containers": lambda _v, b: self._containers(b, init=True),
            "Containers": lambda _v, b: self._containers(b, init=False),
            "Conditions": self._conditions,
            "Volumes": self._volumes,
            "Node-Selectors": self._node_selector,
            "Tolerations": self._tolerations,
            "Events": self._events,
            "Termination Grace Period": self._grace,
            "Priority": self._priority,
        }
        simple = {
            "Name": (self.meta, "name"),
            "Namespace": (self.meta, "namespace"),
            "Priority Class Name": (self.spec, "priorityClassName"),
            "PriorityClassName": (self.spec, "priorityClassName"),  # kubectl <= 1.14
            "Runtime Class Name": (self.spec, "runtimeClassName"),
            "Service Account": (self.spec, "serviceAccountName"),
            "Reason": (self.status, "reason"),
            "IP": (self.status, "podIP"),
            "NominatedNodeName": (self.status, "nominatedNodeName"),
            "QoS Class": (self.status, "qosClass"),
        }
        for key, value, body in _sections(text):
            if key in simple and _present(value):
                target, name = simple[key]
                target[name] = value
            elif key in handlers:
                handlers[key](value, body)

    # -- top-level sections ------------------------------------------------------------------

    def _priority(self, value: str, _body: Lines) -> None:
        if re.fullmatch(r"-?\d+", value):
            self.spec["priority"] = int(value)

    def _node(self, value: str, _body: Lines) -> None:
        if not _present(value):
            return
        name, _, host_ip = value.partition("/")
        self.spec["nodeName"] = name
        if host_ip:
            self.status["hostIP"] = host_ip

    def _status(self, value: str, _body: Lines) -> None:
        m = re.fullmatch(r"Terminating \(lasts (?P<age>[^)]*)\)", value)
        if m:
            # describe hides the phase of a terminating pod and prints only an age; keep the
            # age as the (non-timestamp) marker that a deletion is under way.
            self.meta["deletionTimestamp"] = f"lasts {m['age']}"
        elif _present(value):
            self.status["phase"] = value

    def _grace(self, value: str, _body: Lines) -> None:
        m = re.fullmatch(r"(\d+)s", value)
        if m:
            self.meta["deletionGracePeriodSeconds"] = int(m.group(1))

    def _message(self, value: str, body: Lines) -> None:
        parts = [value] + [line.rstrip() for _, line in body]
        message = "\n".join(parts).strip()
        if message:
            self.status["message"] = message

    def _labels(self, value: str, body: Lines) -> None:
        labels = _pairs(value, body, "=")
        if labels:
            self.meta["labels"] = labels

    def _annotations(self, value: str, body: Lines) -> None:
        annotations = _pairs(value, body, ": ")
        if annotations:
            self.meta["annotations"] = annotations

    def _node_selector(self, value: str, body: Lines) -> None:
        selector = _pairs(value, body, "=")
        if selector:
            self.spec["nodeSelector"] = selector

    def _owner(self, value: str, _body: Lines) -> None:
        kind, sep, name = value.partition("/")
        if sep and kind and name:
            self.meta["ownerReferences"] = [
                {
                    "apiVersion": _OWNER_API.get(kind, ""),
                    "kind": kind,
                    "name": name,
                    "controller": True,
                }
            ]

    def _ips(self, _value: str, body: Lines) -> None:
        ips = []
        for _, line in body:
            m = re.match(r"^\s+IP:\s+(\S+)", line)
            if m:
                ips.append({"ip": m.group(1)})
        if ips:
            self.status["podIPs"] = ips

    def _pod_resources(self, _value: str, body: Lines) -> None:
        resources = _resources([(n, line) for n, line in body])
        if resources:
            self.spec["resources"] = resources

    def _tolerations(self, value: str, body: Lines) -> None:
        items = [value] + [line.strip() for _, line in body]
        tolerations = [t for t in (_toleration(i) for i in items if _present(i)) if t]
        if tolerations:
            self.spec["tolerations"] = tolerations

    def _conditions(self, _value: str, body: Lines) -> None:
        conditions = []
        for _, line in body:
            m = _CONDITION_ROW.match(line)
            if m and m["type"] != "Type":
                conditions.append({"type": m["type"], "status": m["status"]})
        if conditions:
            self.status["conditions"] = conditions

    def _volumes(self, _value: str, body: Lines) -> None:
        volumes: list[dict[str, Any]] = []
        source: dict[str, Any] | None = None
        for _, line in body:
            name = _VOLUME_NAME.match(line)
            if name:
                volumes.append({"name": name["name"]})
                source = None
                continue
            kv = _KEY_LINE.match(line)
            if not volumes or not kv:
                continue
            key, value = kv["key"], (kv["value"] or "").strip()
            if key == "Type":
                word = value.split(" ", 1)[0]
                field = _VOLUME_TYPES.get(word, word[:1].lower() + word[1:])
                source = volumes[-1].setdefault(field, {}) if field else None
            elif source is not None:
                _volume_field(source, key, value)
        if volumes:
            self.spec["volumes"] = volumes

    # -- containers --------------------------------------------------------------------------

    def _containers(self, body: Lines, *, init: bool) -> None:
        specs: list[dict[str, Any]] = []
        statuses: list[dict[str, Any]] = []
        reader = _ContainerReader(specs, statuses)
        for _, line in body:
            reader.feed(line)
        # describe prints status lines only for containers the kubelet reported on.
        statuses = [s for s in statuses if s.keys() & {"containerID", "state", "restartCount"}]
        if specs:
            self.spec["initContainers" if init else "containers"] = specs
        if statuses:
            self.status["initContainerStatuses" if init else "containerStatuses"] = statuses

    # -- events ------------------------------------------------------------------------------

    def _events(self, _value: str, body: Lines) -> None:
        current: dict[str, Any] | None = None
        for lineno, line in body:
            if not line.strip() or re.match(r"^\s+(Type\s+Reason|----\s)", line):
                continue
            m = _EVENT_ROW.match(line)
            if m:
                current = self._event(m, lineno)
                self.events.append(current)
            elif current is not None:
                # kubectl prints the rest of a multi-line message from column 0.
                current["message"] = f"{current['message']}\n{line.rstrip()}".strip()

    def _event(self, m: re.Match[str], lineno: int) -> dict[str, Any]:
        source: dict[str, str] = {}
        if m["source"]:
            component, _, host = m["source"].partition(", ")
            source["component"] = component
            if host:
                source["host"] = host
        involved = {
            "kind": "Pod",
            "name": self.meta.get("name", ""),
            "namespace": self.meta.get("namespace", ""),
        }
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "type": m["type"],
            "reason": m["reason"],
            "message": (m["message"] or "").strip(),
            "count": int(m["count"] or 1),
            "source": source,
            "involvedObject": involved,
            "metadata": {"namespace": involved["namespace"]},
            "_line": lineno,
            "_age": m["age"],
            "_first_age": m["over"] or m["age"],
        }


class _ContainerReader:
    """Feeds the lines of a ``Containers:`` block into spec and status dicts."""

    def __init__(self, specs: list[dict[str, Any]], statuses: list[dict[str, Any]]) -> None:
        self.specs = specs
        self.statuses = statuses
        self.field = ""
        self.state: dict[str, Any] | None = None  # the state being described
        self.text_holder: tuple[dict[str, Any], str] | None = None  # where continuations go

    def feed(self, line: str) -> None:
        if not line.strip():
            return
        indent = len(line) - len(line.lstrip(" "))
        name = _CONTAINER_NAME.match(line)
        if name:
            self.specs.append({"name": name["name"]})
            self.statuses.append({"name": name["name"]})
            self.field, self.state, self.text_holder = "", None, None
            return
        if not self.specs:
            return
        kv = _KEY_LINE.match(line)
        if indent == 4 and kv and kv["key"] in _CONTAINER_KEYS:
            self._field(kv["key"], (kv["value"] or "").strip())
        elif indent >= 6 and self._sub(line):
            return
        elif self.text_holder is not None:
            holder, key = self.text_holder
            holder[key] = f"{holder[key]}\n{line.rstrip()}"

    def _field(self, key: str, value: str) -> None:
        spec, status = self.specs[-1], self.statuses[-1]
        self.field, self.state, self.text_holder = key, None, None
        if key == "Image":
            spec["image"] = value
            status["image"] = value
        elif key == "Container ID":
            status["containerID"] = value
        elif key == "Image ID":
            status["imageID"] = value
        elif key in ("State", "Last State"):
            state: dict[str, Any] = {}
            kind = value.lower() if value in ("Running", "Waiting", "Terminated") else "waiting"
            state[kind] = {}
            status["state" if key == "State" else "lastState"] = state
            self.state = state[kind]
        elif key == "Ready":
            status["ready"] = value == "True"
        elif key == "Restart Count" and value.isdigit():
            status["restartCount"] = int(value)
        elif key in ("Limits", "Requests"):
            spec.setdefault("resources", {}).setdefault(key.lower(), {})

    def _sub(self, line: str) -> bool:
        """Handle a line under the current field; False when it is not one of its shapes."""
        spec = self.specs[-1]
        if self.state is not None:
            kv = _KEY_LINE.match(line)
            if not kv or kv["key"] not in _STATE_KEYS:
                return False
            self._state_field(kv["key"], (kv["value"] or "").strip())
            return True
        if self.field in ("Limits", "Requests"):
            m = _RESOURCE_LINE.match(line)
            if m:
                spec["resources"][self.field.lower()][m["name"]] = m["value"]
            return m is not None
        if self.field == "Mounts":
            m = _MOUNT_LINE.match(line)
            if m:
                mount: dict[str, Any] = {"name": m["name"], "mountPath": m["path"]}
                flags = m["flags"].split(",")
                if "ro" in flags:
                    mount["readOnly"] = True
                sub = next((f[6:-1] for f in flags if f.startswith('path="')), "")
                if sub:
                    mount["subPath"] = sub
                spec.setdefault("volumeMounts", []).append(mount)
            return m is not None
        if self.field in ("Command", "Args"):
            spec.setdefault(self.field.lower(), []).append(line.strip())
            return True
        if self.field == "Environment":
            m = _ENV_LINE.match(line)
            if m:
                env = {"name": m["name"], "value": m["value"] or ""}
                spec.setdefault("env", []).append(env)
                self.text_holder = (env, "value")
                return True
            return False
        return True  # probes, env-from, devices: nothing we keep

    def _state_field(self, key: str, value: str) -> None:
        assert self.state is not None
        self.text_holder = None
        if key == "Reason":
            self.state["reason"] = value
        elif key == "Message":
            self.state["message"] = value
            self.text_holder = (self.state, "message")
        elif key in ("Exit Code", "Signal") and re.fullmatch(r"-?\d+", value):
            self.state["exitCode" if key == "Exit Code" else "signal"] = int(value)
        elif key in ("Started", "Finished"):
            self.state["startedAt" if key == "Started" else "finishedAt"] = _rfc3339(value)


def _sections(text: str) -> list[tuple[str, str, Lines]]:
    """Top-level ``Key: value`` sections of the first pod in ``text``, with their body lines."""
    sections: list[tuple[str, str, Lines]] = []
    in_events = False
    for lineno, raw in enumerate(text.expandtabs(8).splitlines(), 1):
        m = _TOP_LINE.match(raw)
        key = m["key"] if m else ""
        if m and key in _TOP_KEYS and (not in_events or key == "Name"):
            if key == "Name" and any(s[0] == "Name" for s in sections):
                break  # `kubectl describe pods` prints several pods; triage the first
            sections.append((key, (m["value"] or "").strip(), []))
            in_events = key == "Events"
        elif sections:
            sections[-1][2].append((lineno, raw))
    return sections


def _present(value: str) -> bool:
    return bool(value) and value not in ("<none>", "<unset>", "<nil>")


def _pairs(value: str, body: Lines, sep: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in [value] + [line.strip() for _, line in body]:
        if _present(item) and sep in item:
            key, _, val = item.partition(sep)
            out[key.strip()] = val.strip()
    return out


def _toleration(text: str) -> dict[str, Any] | None:
    if text.strip() == "op=Exists":  # empty key and effect: tolerates every taint
        return {"operator": "Exists"}
    m = _TOLERATION.match(text.strip())
    if not m:
        return None
    tol: dict[str, Any] = {}
    if m["key"]:
        tol["key"] = m["key"]
    tol["operator"] = "Exists" if m["op"] else "Equal"
    if m["value"]:
        tol["value"] = m["value"]
    if m["effect"]:
        tol["effect"] = m["effect"]
    if m["seconds"]:
        tol["tolerationSeconds"] = int(m["seconds"])
    return tol


def _resources(lines: Lines) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    section = ""
    for _, line in lines:
        kv = _KEY_LINE.match(line)
        if kv and kv["key"] in ("Limits", "Requests") and not kv["value"]:
            section = kv["key"].lower()
            out[section] = {}
            continue
        m = _RESOURCE_LINE.match(line)
        if section and m:
            out[section][m["name"]] = m["value"]
    return out


def _volume_field(source: dict[str, Any], key: str, value: str) -> None:
    names = {
        "Medium": "medium",
        "SizeLimit": "sizeLimit",
        "Path": "path",
        "HostPathType": "type",
        "ClaimName": "claimName",
        "SecretName": "secretName",
        "Name": "name",
        "Driver": "driver",
    }
    if key in names and _present(value):
        source[names[key]] = value
    elif key == "ReadOnly" and value in ("true", "false"):
        source["readOnly"] = value == "true"


def _rfc3339(value: str) -> str:
    """RFC 1123Z (``Mon, 10 Jun 2024 10:00:00 +0000``) as ``2024-06-10T10:00:00Z``."""
    try:
        parsed = datetime.strptime(value.strip(), "%a, %d %b %Y %H:%M:%S %z")
    except ValueError:
        return value
    out = parsed.isoformat()
    return out[:-6] + "Z" if out.endswith("+00:00") else out
