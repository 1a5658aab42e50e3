"""``scripts/setup`` is idempotent: run three times in one fresh clone, as the README's order does
(demo, demo-hub, test: each runs it), every run succeeds and none writes into the source tree.

The clone's ``.venv`` sees this environment's packages (a ``.pth`` line), so set-up installs only
jupyter_quota itself (editable, with its npm build) and the clone's own ``jupyter`` commands; the
editable install and ``jupyter labextension develop`` are the real ones. Slow (minutes: ``npm ci``
and the extension build in the clone).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from quota_testing import ROOT

RUNS = 3
#: the most one run of scripts/setup may take (npm ci and the extension build on a slow machine)
RUN_TIMEOUT = 1500
pytestmark = [pytest.mark.slow, pytest.mark.timeout(RUNS * RUN_TIMEOUT + 600)]
#: The packages whose console scripts set-up calls: ``jupyter labextension`` (which runs
#: ``jupyter-builder``) and ``jupyter server``.
JUPYTER_COMMANDS = ("jupyter_core", "jupyter_server", "jupyterlab", "jupyter_builder")


def test_setup_runs_three_times_in_one_clone_and_leaves_the_tree_clean(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    env = _clean_env(tmp_path)
    _venv_over_this_one(clone / ".venv", env)
    link = clone / ".venv" / "share" / "jupyter" / "labextensions" / "jupyter-quota"
    timings = []
    for run in range(1, RUNS + 1):
        started = time.monotonic()
        done = subprocess.run(
            [str(clone / "scripts" / "setup")], cwd=clone, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        timings.append(round(time.monotonic() - started))
        assert done.returncode == 0, f"run {run} of scripts/setup failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "setup done" in done.stdout
        assert link.is_symlink(), f"run {run}: the venv's labextension is not `labextension develop`'s link"
        # The editable install once wrote its shared data through that link into the source tree.
        assert not (clone / "jupyter_quota" / "labextension" / "install.json").exists(), f"run {run}"
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
        ).stdout
        assert status == "", f"run {run} of scripts/setup changed the clone:\n{status}"
    print(f"scripts/setup run {RUNS} times: {timings} s")


def _clean_env(tmp_path: Path) -> dict:
    """This environment without its venv, its PYTHONPATH and its Jupyter paths."""
    outer_bin = str(Path(sys.prefix) / "bin")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_QUOTA_VENV"} and not k.startswith("JUPYTER_")
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != outer_bin)
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "jupyter-config")
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter-data")
    return env


def _venv_over_this_one(venv: Path, env: dict) -> None:
    """A venv at ``venv`` that imports this environment's packages after its own, with its own
    ``jupyter`` commands (their console scripts, at this environment's versions)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    Path(purelib, "outer-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pins = [f"{name}=={version(name)}" for name in JUPYTER_COMMANDS]
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-installed", *pins],
        check=True,
        timeout=600,
        env=env,
    )
