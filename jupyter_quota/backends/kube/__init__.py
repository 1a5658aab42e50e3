"""The Kubernetes backend: batch/v1 Jobs under the cluster's ResourceQuota and LimitRange.

``KubeBackend`` (backend.py) reads from a watch-fed cache (cache.py) over a thin JSON layer on
the official client (client.py); ``apply_profiles`` (apply.py) writes teams' Namespace,
ResourceQuota and LimitRange objects.
"""

from .apply import apply_profiles
from .backend import KubeBackend, LogsUnavailable
from .client import ClusterUnavailable, Kube, KubeError, load_api_client

__all__ = [
    "ClusterUnavailable",
    "Kube",
    "KubeBackend",
    "KubeError",
    "LogsUnavailable",
    "apply_profiles",
    "load_api_client",
]
