"""The API resources the test server serves, as discovery documents describe them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    """One API resource: where it lives and how discovery names it."""

    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "log" for pods, "proxy" for nodes

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def discovery(self) -> list[dict[str, Any]]:
        """This resource's entries in an ``APIResourceList`` (itself plus its subresources)."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(READ_VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        subs = [
            {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": "Pod" if sub == "log" else f"{self.kind}ProxyOptions",
                "verbs": ["get"],
            }
            for sub in self.subresources
        ]
        return [entry, *subs]


CORE: tuple[Resource, ...] = (
    Resource("", "v1", "pods", "pod", "Pod", True, ("po",), ("log",)),
    Resource("", "v1", "events", "event", "Event", True, ("ev",)),
    Resource("", "v1", "nodes", "node", "Node", False, ("no",), ("proxy",)),
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, ("ns",)),
    Resource("", "v1", "services", "service", "Service", True, ("svc",), ("proxy",)),
    Resource("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", True, ("quota",)),
)

GROUPS: tuple[Resource, ...] = (
    Resource("apps", "v1", "deployments", "deployment", "Deployment", True, ("deploy",)),
    Resource("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, ("rs",)),
    Resource("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, ("sts",)),
    Resource("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, ("ds",)),
    Resource("batch", "v1", "jobs", "job", "Job", True),
    Resource("batch", "v1", "cronjobs", "cronjob", "CronJob", True, ("cj",)),
    Resource("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", False),
    Resource("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    # The NVIDIA GPU Operator's CRD (served with no objects unless a test adds one).
    Resource("nvidia.com", "v1", "clusterpolicies", "clusterpolicy", "ClusterPolicy", False),
    # Kubeflow's training operator (served with no objects unless a test adds one).
    Resource("kubeflow.org", "v1", "pytorchjobs", "pytorchjob", "PyTorchJob", True),
)


def dra_resources(version: str) -> tuple[Resource, ...]:
    """``resource.k8s.io`` at ``version`` (v1beta1 before 1.33, v1 from 1.34)."""
    g = "resource.k8s.io"
    return (
        Resource(g, version, "resourceclaims", "resourceclaim", "ResourceClaim", True),
        Resource(
            g,
            version,
            "resourceclaimtemplates",
            "resourceclaimtemplate",
            "ResourceClaimTemplate",
            True,
        ),
        Resource(g, version, "resourceslices", "resourceslice", "ResourceSlice", False),
        Resource(g, version, "deviceclasses", "deviceclass", "DeviceClass", False),
    )


#: Field selectors the real apiserver accepts per resource (others are a 400 BadRequest).
#: Every resource also accepts metadata.name and metadata.namespace.
FIELD_LABELS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "nodes": frozenset({"spec.unschedulable"}),
    "resourceslices": frozenset({"spec.nodeName", "spec.driver"}),
}

#: Field paths that do not map 1:1 onto the object.
FIELD_ALIASES: dict[tuple[str, str], str] = {
    ("events", "source"): "source.component",
}
