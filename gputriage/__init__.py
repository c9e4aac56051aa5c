"""gputriage: guided triage of stuck or dying GPU workloads on Kubernetes.

This module must stay import-light: it is imported by every entry point, so it holds the
version and nothing that pulls a heavy dependency.
"""

__version__ = "0.1.0"
