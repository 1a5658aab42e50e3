"""Reading ``deploy/z2jh-values.yaml`` as Zero to JupyterHub does (shared by the z2jh tests)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "deploy" / "z2jh-values.yaml"
RBAC = ROOT / "deploy" / "rbac.yaml"
CHART = Path(__file__).resolve().parent / "data" / "z2jh"
CONFIG_FILE = "jupyter-quota-config"


def values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def service_config() -> dict:
    """The quota service's config file (``hub.extraFiles``), as the hub pod gets it."""
    return values()["hub"]["extraFiles"][CONFIG_FILE]["data"]


def write_service_config(directory: Path) -> Path:
    path = directory / "jupyter_quota_config.json"
    path.write_text(json.dumps(service_config()))
    return path


def rbac_file_objects() -> list[dict]:
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
