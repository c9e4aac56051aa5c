"""A small, faithful Kubernetes API server for tests (HTTPS, bearer tokens, RBAC, selectors).

``server.KubeAPI`` serves a ``cluster.Cluster`` of plain JSON objects the way kube-apiserver
does for the read paths gputriage, kubectl get/describe/logs and client-go use: discovery,
GET/list with field and label selectors and pagination, pod logs, the node log query, and
``Status`` objects for 401/403/404. It refuses every non-GET method (405) and records it, so a
test can prove gputriage only ever reads.
"""

from tests.kubeapi.cluster import Cluster
from tests.kubeapi.server import KubeAPI, KubeContext, User

__all__ = ["Cluster", "KubeAPI", "KubeContext", "User"]
