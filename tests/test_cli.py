"""``jupyter quota`` and ``python -m jupyter_quota``."""

from __future__ import annotations

import shutil
import subprocess
import sys

import yaml

from conftest import DEMO_CONFIG


def run(*args, check=True):
    return subprocess.run([sys.executable, "-m", "jupyter_quota", *args], capture_output=True, text=True,
                          check=check, timeout=60)


def test_profiles_render_prints_the_kubernetes_objects():
    out = run("profiles", "render", "--config", str(DEMO_CONFIG)).stdout
    docs = list(yaml.safe_load_all(out))
    kinds = [(d["kind"], d["metadata"].get("namespace", d["metadata"]["name"])) for d in docs]
    assert kinds == [("Namespace", "team-alpha"), ("ResourceQuota", "team-alpha"), ("LimitRange", "team-alpha"),
                     ("Namespace", "team-beta"), ("ResourceQuota", "team-beta"), ("LimitRange", "team-beta")]
    assert docs[1]["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"


def test_render_one_team_and_unknown_team():
    docs = list(yaml.safe_load_all(run("profiles", "render", "--config", str(DEMO_CONFIG), "--team", "beta").stdout))
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"team-beta"}
    bad = run("profiles", "render", "--config", str(DEMO_CONFIG), "--team", "zeta", check=False)
    assert bad.returncode == 1 and "unknown team(s) zeta" in bad.stderr


def test_missing_config_file_is_a_clear_error(tmp_path):
    bad = run("profiles", "render", "--config", str(tmp_path / "nope.py"), check=False)
    assert bad.returncode == 1 and "does not exist" in bad.stderr


def test_help_lists_the_commands():
    out = run("--help").stdout
    assert "profiles" in out and "jupyter quota" in out
    assert "render" in run("profiles", "render", "--help").stdout


def test_jupyter_quota_entry_point():
    jupyter = shutil.which("jupyter", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert jupyter, "the jupyter command is installed beside this Python"
    out = subprocess.run([jupyter, "quota", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "profiles" in out.stdout
