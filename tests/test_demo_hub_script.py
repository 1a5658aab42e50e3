"""``scripts/demo-hub``'s command line (the hub it runs is the one tests/hub/ runs: binder/jupyterhub_config.py)."""

from __future__ import annotations

import subprocess

import pytest
from quota_testing import ROOT

SCRIPT = ROOT / "scripts" / "demo-hub"


def run(*args):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_help_says_what_it_runs_and_sets_nothing_up():
    done = run("--help")
    assert done.returncode == 0
    for words in (
        "--port PORT",
        "default 8000",
        "JUPYTER_QUOTA_DEMO_PASSWORD",
        "ann",
        "ml-alpha",
        "ada",
        "JUPYTER_CONFIG_PATH",
        "binder/jupyterhub_config.py",
        "jupyter-quota",
    ):
        assert words in done.stdout
    assert "==>" not in done.stdout  # scripts/setup did not run


@pytest.mark.parametrize("args", [["--port", "http"], ["--port", "70000"], ["--port"], ["--bogus"]])
def test_bad_arguments_are_refused_before_any_setup(args):
    done = run(*args)
    assert done.returncode == 2
    assert "scripts/demo-hub" in done.stderr or "--port needs" in done.stderr
    assert "==>" not in done.stdout
