"""The embedded local backend: a SQLite ledger, this machine's GPUs, jobs as local processes."""

from .backend import LocalBackend
from .inventory import detect_inventory, parse_nvidia_smi

__all__ = ["LocalBackend", "detect_inventory", "parse_nvidia_smi"]
