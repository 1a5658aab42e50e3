"""``servejob``: the ``swift deploy`` arguments of a finished fine-tune, its checkpoint, and whose
output a path lies in (pure; the REST side is tests/test_endpoints_from_job.py)."""

from __future__ import annotations

import os

import pytest

from jupyter_quota import reasons
from jupyter_quota.errors import Conflict, InvalidRequest
from jupyter_quota.resume import newest_named as last_checkpoint
from jupyter_quota.servejob import deploy_args_for, inside, output_roots
from jupyter_quota.swiftlog import parse_log


def sft_job(args, phase="Succeeded", **fields):
    return {"name": "tune", "phase": phase, "args": args, **fields}


def test_lora_serves_the_base_model_with_the_checkpoint_as_adapters_and_carries_what_it_trained_with():
    job = sft_job(["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--template", "qwen", "--torch_dtype", "bf16"])
    args = deploy_args_for(job, "/out/v0/checkpoint-9", ["--infer_backend", "vllm", "--template", "chatml"])
    assert args == [
        "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--adapters", "/out/v0/checkpoint-9",
        "--torch_dtype", "bfloat16", "--infer_backend", "vllm", "--template", "chatml",
    ], "the user's --template wins; the training's dtype is carried"  # fmt: skip


def test_older_names_of_the_training_are_read_as_ms_swift_4_reads_them():
    job = sft_job(["--model_id_or_path", "/m/base", "--sft_type", "full"])
    assert deploy_args_for(job, "/o/checkpoint-3", []) == ["--model", "/o/checkpoint-3"]


@pytest.mark.parametrize(
    ("job", "checkpoint", "user", "error", "words"),
    [
        (sft_job(["--model", "m"], kind="endpoint"), "/c", [], InvalidRequest, "itself an endpoint"),
        (sft_job(["--model", "m"], phase="Failed", reason="OutOfMemory"), "/c", [], Conflict, r"d \(OutOfMemory\)"),
        (sft_job(["--model", "m"]), None, [], Conflict, "saved no checkpoint"),
        (sft_job(["--model", "m"]), "/c", ["--ckpt_dir", "/x"], InvalidRequest, "leave out --model"),
        (sft_job(["--dataset", "d"]), "/c", [], Conflict, "names no --model"),
    ],
)
def test_what_cannot_be_served_says_what_to_do(job, checkpoint, user, error, words):
    with pytest.raises(error, match=words) as raised:
        deploy_args_for(job, checkpoint, user)
    if error is Conflict:
        assert raised.value.reason == reasons.NOT_SERVABLE


def test_the_last_whole_checkpoint_is_served_and_a_partial_one_is_not(tmp_path):
    for step, whole in ((2, True), (4, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if whole:
            (folder / "trainer_state.json").write_text("{}")
    log = "".join(f"Saving model checkpoint to {tmp_path}/checkpoint-{s}\n" for s in (2, 4))
    assert last_checkpoint(parse_log(log)) == f"{tmp_path}/checkpoint-2"
    unseen = parse_log("Saving model checkpoint to /elsewhere/checkpoint-1\n")
    assert last_checkpoint(unseen) == "/elsewhere/checkpoint-1", "a folder this server cannot see: at its word"
    assert last_checkpoint(parse_log("no checkpoint here\n")) is None


def test_a_path_is_inside_a_jobs_output_however_it_is_spelt(tmp_path):
    out = tmp_path / "out"
    (out / "v0" / "checkpoint-1").mkdir(parents=True)
    os.symlink(out / "v0", tmp_path / "link")
    job = sft_job(["--model", "m", "--output_dir", str(out)])
    roots = output_roots(job, parse_log(""))
    assert inside(str(out / "v0" / "checkpoint-1"), roots)
    assert inside(str(tmp_path / "link" / "checkpoint-1"), roots), "a link into it"
    assert inside(f"{tmp_path}/other/../out/v0", roots), "a .. into it"
    assert not inside(str(tmp_path / "out-not"), roots), "a sibling sharing the prefix"
    assert output_roots(sft_job(["--output_dir", "relative/out"]), parse_log("")) == [], "only absolute paths"
