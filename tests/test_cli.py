"""``jupyter quota`` and ``python -m jupyter_quota``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import yaml
from quota_testing import DEMO_CONFIG


def run(*args, check=True):
    return subprocess.run(
        [sys.executable, "-m", "jupyter_quota", *args], capture_output=True, text=True, check=check, timeout=60
    )


def test_profiles_render_prints_the_kubernetes_objects():
    out = run("profiles", "render", "--config", str(DEMO_CONFIG)).stdout
    docs = list(yaml.safe_load_all(out))
    kinds = [(d["kind"], d["metadata"].get("namespace", d["metadata"]["name"])) for d in docs]
    team = ["Namespace", "ResourceQuota", "LimitRange", "Role", "RoleBinding"]
    assert kinds == [(k, "team-alpha") for k in team] + [(k, "team-beta") for k in team]
    assert docs[1]["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"
    # the quota service's account (JupyterQuota.kube_service_account, default: z2jh's hub account)
    assert docs[4]["subjects"] == [{"kind": "ServiceAccount", "name": "hub", "namespace": "jupyterhub"}]


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


# -- estimate and plan ------------------------------------------------------------------------------

GAMMA_CONFIG = """
exec(open({demo!r}).read())
c.JupyterQuota.profiles = list(c.JupyterQuota.profiles) + [{{
    "team": "gamma", "namespace": "team-gamma", "users": [demo_user],
    "hard": {{"requests.nvidia.com/gpu": "1", "requests.cpu": "8", "limits.memory": "64Gi"}},
    "limitRange": demo_limit_range, "gpuModel": "RTX 4090", "gpuMemory": "24Gi",
}}]
c.JupyterQuota.state_dir = {state!r}
"""

TINY_QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def gamma_config(tmp_path):
    path = tmp_path / "gamma_config.py"
    path.write_text(GAMMA_CONFIG.format(demo=str(DEMO_CONFIG), state=str(tmp_path / "state")))
    return str(path)


def test_estimate_json_offline_for_a_local_config_folder(tmp_path):
    import json

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_QWEN2))
    out = run("estimate", "--json", "--", "--model", str(folder), "--tuner_type", "lora", "--max_length", "2048")
    body = json.loads(out.stdout)
    assert set(body) >= {"peakBytesPerGpu", "peakGibPerGpu", "breakdown", "assumptions"}
    assert sum(body["breakdown"].values()) == body["peakBytesPerGpu"]
    assert body["gpus"] == 1


def test_estimate_prints_a_breakdown_table():
    out = run("estimate", "--gpus", "2", "--", "--model", "Qwen/Qwen2.5-7B-Instruct", "--deepspeed", "zero3").stdout
    assert "on 2 GPUs: peak" in out
    for part in ("weights", "gradients", "optimizer", "activations", "logits", "overhead", "peak"):
        assert part in out
    assert "assumptions:" in out


def test_estimate_needs_the_double_dash_and_whole_gpus():
    bad = run("estimate", "--model", "Qwen/Qwen2.5-7B-Instruct", check=False)
    assert bad.returncode == 2 and "after --" in bad.stderr
    bad = run("estimate", "--gpus", "1.5", "--", "--model", "Qwen/Qwen2.5-7B-Instruct", check=False)
    assert bad.returncode == 1 and "whole" in bad.stderr
    bad = run("estimate", "--", "--model", "nobody/no-such-model", check=False)
    assert bad.returncode == 1 and "nobody/no-such-model" in bad.stderr and "--model_size" in bad.stderr


def test_estimate_of_an_unknown_model_by_its_size():
    """A model the estimator has no facts for is estimated from --model_size, or from the size in its
    name, and says it is approximate; a malformed size is refused with how to write one."""
    out = json.loads(run("estimate", "--model_size", "13B", "--json", "--", "--model", "nobody/no-such-model").stdout)
    assert out["approximate"] is True and out["model"]["approximate"] is True
    assert abs(out["model"]["params"] / 1e9 - 13) < 0.7 and "--model_size" in out["model"]["source"]
    text = run("estimate", "--", "--model", "nobody/no-such-model-13b").stdout
    assert "(approximate: the architecture is guessed from the model's size)" in text
    bad = run("estimate", "--model_size", "thirteen", "--", "--model", "nobody/no-such-model", check=False)
    assert bad.returncode == 1 and "--model_size 'thirteen'" in bad.stderr and "30B-A3B" in bad.stderr


def test_plan_classic_scenario_prints_the_command(tmp_path):
    out = run(
        "plan",
        "--namespace",
        "team-gamma",
        "--config",
        gamma_config(tmp_path),
        "--",
        "--model",
        "Qwen/Qwen-VL-Chat",
        "--tuner_type",
        "full",
    ).stdout
    assert "team-gamma (team gamma): 1 GPU left, 24 GiB per GPU (21.6 GiB usable" in out
    assert "Recommended: QLoRA" in out
    assert "    swift sft --model Qwen/Qwen-VL-Chat --tuner_type lora --quant_method bnb" in out
    assert "Rejected:" in out and "a GPU has 24 GiB (21.6 GiB with the 10% margin)" in out


def test_plan_json_and_access_rules(tmp_path):
    import json

    config = gamma_config(tmp_path)
    out = run(
        "plan",
        "-n",
        "team-alpha",
        "--json",
        "--config",
        config,
        "--",
        "--model",
        "Qwen/Qwen2.5-7B-Instruct",
        "--tuner_type",
        "full",
        "--max_length",
        "2048",
    )
    body = json.loads(out.stdout)
    assert set(body) >= {"recommended", "candidates", "rejected", "assumptions", "notes"}
    assert body["recommended"]["gpus"] in (1, 2)
    foreign = run(
        "plan", "-n", "team-beta", "--config", config, "--", "--model", "Qwen/Qwen2.5-7B-Instruct", check=False
    )
    assert foreign.returncode == 1 and 'may not use namespace "team-beta"' in foreign.stderr
    several = run("plan", "--config", config, "--", "--model", "Qwen/Qwen2.5-7B-Instruct", check=False)
    assert several.returncode == 1 and "--namespace" in several.stderr


def test_python_plan_reads_the_configured_state(tmp_path):
    import jupyter_quota

    result = jupyter_quota.plan(
        ["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"], namespace="team-gamma", config=gamma_config(tmp_path)
    ).to_json()
    assert result["namespace"] == "team-gamma" and result["gpusFree"] == 1
    assert result["recommended"] is not None
