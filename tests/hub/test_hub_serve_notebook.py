"""End to end under a real JupyterHub: ``examples/serve_tuned_model.ipynb`` in ann's kernel of her
own server, cell by cell in one kernel as Run All does, with the real commands: a real ``swift
sft`` of the tiny model (run by the quota service), its adapters served by a real ``swift deploy
--infer_backend transformers`` on CPUs, one chat completion from the ``openai`` client through
her Jupyter URL (``/user/ann/quota/v1/...``), and the endpoint stopped with its quota back.

Before the notebook stops it, the endpoint is called by cat, ann's teammate, through cat's own
server (200), and by bob, of another team only, through his (403): sharing follows the team.

A hub of its own (the session's hub runs the fake trainer), on the same fixtures.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hub_kernel import kernel_of
from hub_process import HubProcess

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "serve_tuned_model.ipynb"
SWIFT = shutil.which("swift", path=os.path.dirname(sys.executable))
MARK = "ENDPOINT:"
#: Runs the cells given as JSON in this kernel as Run All does: in order, magics and all, and
#: stops at the first that fails (its error is the kernel's, so the test shows the traceback).
RUN_CELLS = r"""
import json
from IPython import get_ipython
for source in json.loads({cells!r}):
    result = get_ipython().run_cell(source)
    if not result.success:
        result.raise_error()
"""


@pytest.fixture(scope="module")
def swift_hub(tmp_path_factory):
    process = HubProcess(
        tmp_path_factory.mktemp("servehub"),
        server_config="c.JupyterQuota.job_command = ['swift', 'sft']\nc.JupyterQuota.reap_interval = 0.5\n",
    )
    try:
        process.start()
        process.start_servers(("ann", "bob", "cat"))
        yield process
    finally:
        process.stop()


def _cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.skipif(
    SWIFT is None or importlib.util.find_spec("swift") is None or importlib.util.find_spec("openai") is None,
    reason="ms-swift and openai are not installed here (pip install 'jupyter_quota[swift,test]')",
)
def test_the_serving_notebook_runs_in_anns_kernel_and_her_team_shares_the_endpoint(swift_hub):
    hub = swift_hub
    cells = _cells(json.loads(NOTEBOOK.read_text()))
    stop = next(i for i, source in enumerate(cells) if source.startswith("ep.stop()"))
    with kernel_of(hub, "ann") as execute:
        served = execute(RUN_CELLS.format(cells=json.dumps(cells[:stop])), timeout=1200)
        print(served[-3000:])
        assert "completion: '" in served, served
        name = execute(f'print("{MARK}" + ep.name)').strip().removeprefix(MARK)
        endpoint = hub.quota("ann", "GET", f"/namespaces/team-alpha/endpoints/{name}").json()
        assert endpoint["phase"] == "Ready" and "--adapters" in endpoint["args"], endpoint
        assert endpoint["url"] == f"/user/ann/quota/v1/namespaces/team-alpha/endpoints/{name}/v1/"
        [model] = endpoint["models"]

        # cat, ann's teammate, through her own server; bob, of team beta only, through his
        api = f"/namespaces/team-alpha/endpoints/{name}/v1"
        r = hub.quota("cat", "GET", f"{api}/models")
        assert r.status_code == 200 and r.json()["data"][0]["id"] == model, r.text
        chat = {"model": model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}
        r = hub.quota("cat", "POST", f"{api}/chat/completions", chat)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant", r.text
        for path in (f"{api}/models", f"/namespaces/team-alpha/endpoints/{name}"):
            r = hub.quota("bob", "GET", path)
            assert r.status_code == 403 and r.json()["reason"] == "Forbidden", r.text

        stopped = execute(RUN_CELLS.format(cells=json.dumps(cells[stop:])), timeout=300)
    print(stopped)
    assert f"Endpoint team-alpha/{name}: Stopped" in stopped
    endpoint = hub.quota("ann", "GET", f"/namespaces/team-alpha/endpoints/{name}").json()
    assert endpoint["phase"] == "Stopped", endpoint
    balance = hub.quota("ann", "GET", "/namespaces/team-alpha/balance").json()
    assert balance["resources"]["requests.cpu"]["used"] == "0", balance
