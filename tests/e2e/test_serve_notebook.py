"""End to end: ``examples/serve_tuned_model.ipynb``, Run All, on a real server process with the
default commands (``swift sft``, ``swift deploy``): a real fine-tune of the tiny model, its
adapters served by a real ``swift deploy --infer_backend transformers`` on CPUs, one chat
completion from the ``openai`` client through the Jupyter URL, and the endpoint stopped with its
quota back."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest
from server_process import ServerProcess

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "serve_tuned_model.ipynb"
SWIFT = shutil.which("swift", path=os.path.dirname(sys.executable))
OFFLINE = {"USE_HF": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _text(cell) -> str:
    return "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)


@pytest.mark.skipif(
    SWIFT is None or importlib.util.find_spec("swift") is None or importlib.util.find_spec("openai") is None,
    reason="ms-swift and openai are not installed here (pip install 'jupyter_quota[swift,test]')",
)
def test_the_serving_notebook_runs_all(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    environment = {**OFFLINE, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "CUDA_VISIBLE_DEVICES": ""}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for name in ("JUPYTER_QUOTA_URL", "JUPYTER_QUOTA_TOKEN", "JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "work"
    root.mkdir()
    server = ServerProcess(tmp_path / "state", root, extra_config="c.JupyterQuota.job_command = ['swift', 'sft']\n")
    server.start()
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nbclient.NotebookClient(
            nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(root)}}
        ).execute()
        _, endpoints = server.call("GET", "/namespaces/team-alpha/endpoints")
        _, balance = server.call("GET", "/namespaces/team-alpha/balance")
    finally:  # an endpoint outlives its server (as a job does): never leave one running
        _, left = server.call("GET", "/namespaces/team-alpha/endpoints")
        for endpoint in (left or {}).get("endpoints", []):
            server.call("DELETE", f"/namespaces/team-alpha/endpoints/{endpoint['name']}")
        server.stop()
    text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    print(text[-3000:])
    [endpoint] = endpoints["endpoints"]
    assert endpoint["name"].startswith("tiny-chat-") and endpoint["phase"] == "Stopped", endpoint
    assert "--adapters" in endpoint["args"]
    assert "Ready" in text and "completion: '" in text
    assert f"Endpoint team-alpha/{endpoint['name']}: Stopped" in text
    assert balance["resources"]["requests.cpu"]["used"] == "0"
