"""``%swift_deploy``: translation, refusals as one line, and an endpoint served, called with the
``openai`` client through the Jupyter URL, and stopped, against a real server process whose
``deploy_command`` is the stand-in server (tests/fake_deploy.py; the real ``swift deploy`` is in
tests/e2e/test_swift_deploy_endpoint.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from quota_testing import ipython_shell
from server_process import ServerProcess

from jupyter_quota.magics import Endpoint, QuotaMagics
from jupyter_quota.magics.client import QuotaClient

FAKE_DEPLOY = Path(__file__).resolve().parent / "fake_deploy.py"


@pytest.fixture(scope="module")
def ip():
    return ipython_shell()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy-magic-server")
    extra = f"c.JupyterQuota.deploy_command = [{sys.executable!r}, {str(FAKE_DEPLOY)!r}]\n"
    process = ServerProcess(root / "state", root, extra_config=extra).start()
    yield process
    process.stop()


@pytest.fixture
def magics(ip, server):
    instance = QuotaMagics(shell=ip, connect_fn=lambda: QuotaClient(f"http://127.0.0.1:{server.port}/", server.token))
    instance.poll_interval = 0.1
    ip.register_magics(instance)
    return instance


def test_dry_run_translates_older_names_and_starts_nothing(magics, ip, server):
    with capture_output() as out:
        result = ip.run_line_magic("swift_deploy", "--dry-run --model_id_or_path ./tiny --max_model_len 512")
    assert result is None
    assert "--model_id_or_path -> --model" in out.stdout and "--max_model_len -> --vllm_max_model_len" in out.stdout
    assert "swift deploy --model ./tiny --vllm_max_model_len 512" in out.stdout
    assert server.call("GET", "/namespaces/team-alpha/endpoints") == (200, {"endpoints": []})


def test_refusals_are_one_line(magics, ip):
    with pytest.raises(UsageError, match="--model is required"):
        ip.run_line_magic("swift_deploy", "--infer_backend transformers")
    with pytest.raises(UsageError, match="--port is set by the service"):
        ip.run_line_magic("swift_deploy", "--model ./tiny --port 8000")


def test_an_endpoint_is_served_called_with_openai_and_stopped(magics, ip, server):
    with capture_output() as out:
        ep = ip.run_line_magic("swift_deploy", "--name chat --model /models/tiny-chat")
    assert isinstance(ep, Endpoint) and ep.phase == "Ready", (ep, out.stdout)
    assert ep.name.startswith("chat-") and ep.models == ["tiny-chat"]
    assert "Starting" in out.stdout or "Pending" in out.stdout
    assert ep.url == f"http://127.0.0.1:{server.port}/quota/v1/namespaces/team-alpha/endpoints/{ep.name}/v1/"
    answer = ep.openai(max_retries=0).chat.completions.create(
        model="tiny-chat", messages=[{"role": "user", "content": "hi there"}]
    )
    assert answer.choices[0].message.content == "echo: hi there"
    ep.stop()
    deadline = time.monotonic() + 60
    while ep.refresh().phase != "Stopped":
        assert time.monotonic() < deadline, ep
        time.sleep(0.1)
    _, balance = server.call("GET", "/namespaces/team-alpha/balance")
    assert balance["resources"]["requests.cpu"]["used"] == "0"


def test_a_finished_fine_tune_is_served_by_its_job_name(magics, ip, server, tmp_path):
    """``--job NAME``: the server adds the base model and the job's last checkpoint."""
    train = ["--model", "/models/tiny-base", "--steps", "2", "--save-to", str(tmp_path / "out")]
    status, job = server.call("POST", "/namespaces/team-alpha/jobs", {"generateName": "tune-", "args": train})
    assert status == 201, job
    deadline = time.monotonic() + 60
    while server.call("GET", f"/namespaces/team-alpha/jobs/{job['name']}")[1]["phase"] != "Succeeded":
        assert time.monotonic() < deadline, "the fine-tune never succeeded"
        time.sleep(0.1)
    with pytest.raises(UsageError, match="leave out --model and --adapters"):
        ip.run_line_magic("swift_deploy", f"--job {job['name']} --model ./tiny")
    with capture_output() as out:
        ep = ip.run_line_magic("swift_deploy", f"--job={job['name']} --infer_backend pt")
    assert isinstance(ep, Endpoint) and ep.phase == "Ready", (ep, out.stdout)
    assert ep.models == ["tiny-base"]
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert f"Serving job {job['name']}: swift deploy --model /models/tiny-base --adapters {checkpoint}" in out.stdout
    assert "--infer_backend pt -> transformers" in out.stdout, "the user's arguments are translated as always"
    ep.stop()
