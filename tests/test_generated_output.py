"""What the demos generate in the tree is neither tracked nor linted: Run All of
examples/quota_and_swift_sft.ipynb writes its tiny model, tokenizer and dataset to
``examples/tiny-demo/`` (12 JSON files among them), and ``scripts/lint`` then still passes."""

from __future__ import annotations

import json
import subprocess

import pytest
from quota_testing import ROOT

GENERATED = [
    "examples/tiny-demo/model/config.json",
    "examples/tiny-demo/model/tokenizer.json",
    "examples/tiny-demo/out/v0-20261201-120000/checkpoint-20/trainer_state.json",
    "examples/tiny-demo/data.jsonl",
]
PRETTIER = ROOT / "node_modules" / ".bin" / "prettier"


@pytest.mark.parametrize("path", GENERATED)
def test_git_ignores_the_example_notebooks_output(path):
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, timeout=60)
    assert done.returncode == 0, f"{path} is not git-ignored"


@pytest.mark.skipif(not PRETTIER.exists(), reason="node_modules missing: run scripts/setup")
@pytest.mark.parametrize("path", [p for p in GENERATED if p.endswith(".json")])
def test_prettier_does_not_read_the_example_notebooks_output(path):
    done = subprocess.run(
        [str(PRETTIER), "--file-info", path], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout)["ignored"] is True


@pytest.mark.skipif(not PRETTIER.exists(), reason="node_modules missing: run scripts/setup")
def test_a_tracked_json_file_is_still_checked():
    """The ignore patterns name the output only: the project's own JSON is still linted."""
    done = subprocess.run(
        [str(PRETTIER), "--file-info", "package.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(done.stdout)["ignored"] is False
