"""End to end: a real ``swift deploy --infer_backend transformers`` (CPU) on the tiny model, as an
endpoint of the local backend behind a real jupyter-server: it reaches Ready when its ``/health``
answers, shows the model ``/v1/models`` names, answers one chat completion from the ``openai``
client through the proxied URL (with the server's token, as a notebook would), and DELETE gives
its quota back. Waits are on the phase and the balance the API reports.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from quota_testing import eventually  # noqa: E402
from tiny_swift import build_tiny_model  # noqa: E402

SWIFT = shutil.which("swift", path=os.path.dirname(sys.executable))
OFFLINE = {"USE_HF": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
NS = "team-alpha"
CPU = "requests.cpu"


async def _wait(api, check, what: str, timeout: float):
    """Ask ``check()`` until it answers something true, and return that."""
    return await eventually(check, bool, lambda _: f"timed out waiting for {what}", timeout, pause=0.5)


@pytest.mark.skipif(
    SWIFT is None or importlib.util.find_spec("swift") is None or importlib.util.find_spec("openai") is None,
    reason="ms-swift and openai are not installed here (pip install 'jupyter_quota[swift,test]')",
)
async def test_a_real_swift_deploy_serves_the_tiny_model_through_the_jupyter_url(
    api, jp_serverapp, jp_http_port, tmp_path, monkeypatch
):
    for name, value in OFFLINE.items():  # the endpoint's process inherits the server's environment
        monkeypatch.setenv(name, value)
    model = build_tiny_model(tmp_path / "tiny-qwen2")
    args = ["--model", str(model), "--model_type", "qwen2", "--template", "qwen"]
    args += ["--infer_backend", "transformers", "--torch_dtype", "float32"]
    status, created = await api("POST", "namespaces", NS, "endpoints", body={"name": "tiny", "args": args})
    assert status == 201, created
    _, balance = await api("GET", "namespaces", NS, "balance")
    assert balance["resources"][CPU]["used"] == "2", "the endpoint holds its quota from admission"

    async def ready():
        status, endpoint = await api("GET", "namespaces", NS, "endpoints", "tiny")
        assert status == 200 and endpoint["phase"] in ("Pending", "Starting", "Ready"), endpoint
        return endpoint if endpoint["phase"] == "Ready" else None

    try:
        await _serve_and_stop(api, ready, jp_serverapp, jp_http_port)
    finally:  # an endpoint outlives its server (as a job does): never leave one running
        await api("DELETE", "namespaces", NS, "endpoints", "tiny")


async def _serve_and_stop(api, ready, jp_serverapp, jp_http_port) -> None:
    import openai

    try:
        endpoint = await _wait(api, ready, "the endpoint to be Ready", timeout=600)
    except AssertionError:
        _, logs = await api("GET", "namespaces", NS, "jobs", "tiny", "logs")
        raise AssertionError(f"not Ready; its log:\n{logs['logs']}") from None
    assert endpoint["models"] == ["tiny-qwen2"], endpoint

    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{jp_http_port}{endpoint['url']}",
        api_key=jp_serverapp.identity_provider.token,  # sent as "Authorization: Bearer <token>"
        max_retries=0,
    )
    completion = await asyncio.to_thread(
        client.chat.completions.create,
        model="tiny-qwen2",
        messages=[{"role": "user", "content": "Hello, how can I help you today?"}],
        max_tokens=8,
        timeout=120,
    )
    print("completion text:", repr(completion.choices[0].message.content))
    assert completion.choices[0].message.role == "assistant"
    assert completion.usage.completion_tokens > 0

    status, _ = await api("DELETE", "namespaces", NS, "endpoints", "tiny")
    assert status == 200

    async def freed():
        _, balance = await api("GET", "namespaces", NS, "balance")
        return balance["resources"][CPU]["used"] == "0"

    await _wait(api, freed, "the quota to come back", timeout=120)
    _, stopped = await api("GET", "namespaces", NS, "endpoints", "tiny")
    assert stopped["phase"] == "Stopped", stopped
