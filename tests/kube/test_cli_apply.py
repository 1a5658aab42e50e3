"""``jupyter quota profiles apply [--dry-run]`` against the real test cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jupyter_quota.backends.kube.client import KubeError


def run_apply(config_file, *extra):
    return subprocess.run(
        [sys.executable, "-m", "jupyter_quota", "profiles", "apply", "--config", str(config_file), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_dry_run_then_apply_then_nothing_to_do(kube_cluster, namespace_name, tmp_path):
    config = tmp_path / "jupyter_server_config.py"
    config.write_text(
        "c = get_config()\n"
        f"c.JupyterQuota.kube_config_file = {str(kube_cluster.kubeconfig)!r}\n"
        f"c.JupyterQuota.kube_in_cluster = 'false'\n"
        "c.JupyterQuota.profiles = [{'team': 'cli', 'namespace': %r, 'hard': {'requests.nvidia.com/gpu': '2'},\n"
        "  'limitRange': {'limits': [{'type': 'Container', 'default': {'cpu': '1'}}]}}]\n" % namespace_name
    )
    dry = run_apply(config, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"Namespace {namespace_name}: created (dry run)" in dry.stdout
    assert f"ResourceQuota {namespace_name}/team-quota: created (dry run)" in dry.stdout
    assert "+  hard:" in dry.stdout or "requests.nvidia.com/gpu" in dry.stdout
    with pytest.raises(KubeError) as absent:  # a dry run stores no namespace
        kube_cluster.kube().get(f"/api/v1/namespaces/{namespace_name}")
    assert absent.value.status == 404

    first = run_apply(config)
    assert first.returncode == 0, first.stderr
    assert f"LimitRange {namespace_name}/team-limits: created" in first.stdout
    assert f"RoleBinding {namespace_name}/jupyter-quota: created" in first.stdout
    quota = kube_cluster.kube().get(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}

    again = run_apply(config)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(": unchanged") == 5, again.stdout  # Namespace, quota, limits, Role, RoleBinding


def test_no_kubeconfig_is_a_clear_error(tmp_path):
    config = tmp_path / "c.py"
    config.write_text(
        "c = get_config()\nc.JupyterQuota.kube_config_file = '/nonexistent/kubeconfig'\n"
        "c.JupyterQuota.profiles = [{'team': 'x'}]\n"
    )
    out = run_apply(config)
    assert out.returncode == 1 and "cannot load the Kubernetes configuration" in out.stderr
    assert "Traceback" not in out.stderr
