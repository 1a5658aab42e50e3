"""End to end: a notebook in a real kernel runs a real ``swift sft`` through a real server.

The tiny random Qwen2 model, its tokenizer and the dataset are built here (nothing is
downloaded). ``jupyter server`` runs with the demo teams on the local backend and the default job command,
``swift sft``, with the venv's ``bin`` left off PATH. The notebook (executed by nbclient in an ipykernel that finds
the server through jupyter-server's runtime files) runs ``%quota``, the tutorial command as a dry
run, and ``%swift_sft --gpus 0 ... --max_steps 3``; then it waits for the job and prints what the
Job handle and its widget received. It runs twice on one server, as a user runs a notebook again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from server_process import ServerProcess

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tiny_swift import build_dataset, build_tiny_model, swift_flags  # noqa: E402

SWIFT = shutil.which("swift", path=os.path.dirname(sys.executable))
TUTORIAL = (
    "swift sft --model_type qwen-vl-chat --sft_type qlora --dtype bnb_nf4 --dataset my_custom_data "
    "--batch_size 2 --use_flash_attn true --output_dir ./finetuned-model"
)
OFFLINE = {"USE_HF": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.mark.skipif(
    SWIFT is None or importlib.util.find_spec("swift") is None,
    reason="ms-swift is not installed in this environment (pip install 'jupyter_quota[swift]')",
)
def test_swift_sft_magic_runs_a_real_fine_tune_twice(tmp_path, monkeypatch):
    """The notebook, run twice on one server whose PATH lacks the venv's bin (a server started as
    ``.venv/bin/jupyter lab`` without activating the venv): the default ``swift sft`` resolves in the
    server's own environment, and ``--name`` is a prefix, so the second run is a new job."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    started = time.monotonic()
    root = tmp_path / "work"
    model = build_tiny_model(root / "tiny-qwen2")
    data = build_dataset(root / "data.jsonl")
    out = root / "out"
    path = os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and os.path.realpath(d) != os.path.realpath(os.path.dirname(SWIFT))
    )
    assert shutil.which("swift", path=path) is None, "this test needs a PATH on which swift is not found"
    for name, value in {
        **OFFLINE,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "CUDA_VISIBLE_DEVICES": "",
        "PATH": path,
    }.items():
        monkeypatch.setenv(name, value)
    for name in (
        "JUPYTER_QUOTA_URL",
        "JUPYTER_QUOTA_TOKEN",
        "JUPYTERHUB_SERVICE_URL",
        "JUPYTERHUB_API_TOKEN",
        "VIRTUAL_ENV",
    ):
        monkeypatch.delenv(name, raising=False)

    server = ServerProcess(
        tmp_path / "state", root, extra_config="c.JupyterQuota.job_command = ['swift', 'sft']\n"
    ).start()
    runs = []
    try:
        flags = " ".join(swift_flags(model, data, out))
        cells = [
            "%load_ext jupyter_quota",
            "%quota",
            f"%swift_sft --dry-run {TUTORIAL}",
            f"job = %swift_sft --gpus 0 --name tiny-sft {flags}",
            "phase = job.wait(timeout=600, interval=1)\nphase",
            "import json\nw = job.widget\n"
            "print('RESULT ' + json.dumps({'name': job.name, 'phase': phase, 'steps': job.steps,\n"
            "    'losses': job.losses, 'checkpoint': job.checkpoint,\n"
            "    'progress': [w.progress.value, w.progress.max, w.progress.bar_style],\n"
            "    'plot': [w.loss_plot.x, w.loss_plot.y], 'stats': w.stats.value,\n"
            "    'cancel_disabled': w.cancel_button.disabled}))",
        ]
        for _ in range(2):  # Run All, then Run All again
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
            nbclient.NotebookClient(
                nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(root)}}
            ).execute()
            name = json.loads(_text(nb.cells[5]).split("RESULT ", 1)[1])["name"]
            _, job = server.call("GET", f"/namespaces/team-alpha/jobs/{name}")
            _, logs = server.call("GET", f"/namespaces/team-alpha/jobs/{name}/logs?tailLines=10000")
            runs.append((nb, job, logs))
    finally:
        server.stop()
        (tmp_path / "e2e-seconds.txt").write_text(f"{time.monotonic() - started:.1f}\n")

    assert runs[0][1]["name"] != runs[1][1]["name"]
    checkpoints = sorted(out.glob("v*/checkpoint-3"))
    assert len(checkpoints) == 2 and all((c / "adapter_model.safetensors").is_file() for c in checkpoints)
    shown = {Path(_check_run(nb, job, logs, model)).resolve() for nb, job, logs in runs}
    assert shown == {c.resolve() for c in checkpoints}


def _check_run(nb, job, logs, model) -> str:
    """Check one run of the notebook; return the checkpoint its Job handle reported."""
    text = {i: _text(cell) for i, cell in enumerate(nb.cells)}
    # %quota: the demo team's balance
    assert "team-alpha (team alpha)" in text[1] and "0 of 2 used, 2 left" in text[1]
    assert {"application/vnd.jupyter.widget-view+json", "text/html", "text/plain"} <= set(
        nb.cells[1].outputs[0]["data"]
    )
    # the tutorial command, translated, planned, checked by ms-swift, not submitted
    assert "--sft_type qlora -> --tuner_type lora --quant_method bnb --quant_bits 4" in text[2]
    assert "Recommended: QLoRA 4-bit, 1 GPU" in text[2]
    assert "own parser accepts the final arguments" in text[2] and "Dry run: nothing submitted" in text[2]
    # a real swift sft ran as the job (its name made from the prefix), and ended Succeeded
    assert re.fullmatch(r"tiny-sft-[bcdfghjklmnpqrstvwxz2456789]{5}", job["name"]), job["name"]
    assert f"Submitted team-alpha/{job['name']}" in text[3]
    assert job["phase"] == "Succeeded", (job, logs["logs"][-3000:])
    assert job["args"][:2] == ["--model", str(model)] and job["gpus"] == 0
    assert "[INFO:swift]" in logs["logs"] and "last_model_checkpoint" in logs["logs"]
    # the Job handle and its widget received the steps and the losses
    result = json.loads(text[5].split("RESULT ", 1)[1])
    assert result["phase"] == "Succeeded"
    assert result["steps"] == [1, 2, 3] and len(result["losses"]) == 3
    assert all(isinstance(v, float) and v > 0 for v in result["losses"])
    assert result["progress"] == [3, 3, "success"] and result["cancel_disabled"]
    assert result["plot"] == [[1, 2, 3], result["losses"]]  # the loss plot's points
    # the widget's state as the notebook recorded it (nbclient keeps the kernel's widget models)
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    bars = [m["state"] for m in state.values() if m.get("model_name") == "IntProgressModel"]
    assert any(b.get("value") == 3 and b.get("max") == 3 for b in bars), bars
    return result["checkpoint"]


def _text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)
