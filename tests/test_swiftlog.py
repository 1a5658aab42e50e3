"""``swiftlog``: reading real ms-swift 4.6 logs (captured from a CPU run of the tiny Qwen2 model)."""

from __future__ import annotations

import pytest

from jupyter_quota.swiftlog import TrainProgress, parse_duration, parse_log, parse_log_dict

# The tail of a real ``swift sft ... --max_steps 3 --logging_steps 1`` log (ms-swift 4.6.0), with
# its carriage returns: tqdm redraws and log dicts share "lines".
REAL_TAIL = (
    "[INFO:swift] output_dir: /tmp/tiny1/out/v0-20261129-093022\n"
    "  super().__init__(loader)\n"
    "[INFO:swift] use_logits_to_keep: True\n"
    "\r                                            \r{'loss': '6.015', 'grad_norm': '1.273', 'learning_rate': '7.5e-05', 'token_acc': '0', 'epoch': '0.03125', 'global_step/max_steps': '1/3', 'elapsed_time': '0s', 'remaining_time': '0s', 'train_speed(s/it)': '0.02843'}\n"
    "\rTrain:  33%|███▎      | 1/3 [00:00<00:00, 34.51it/s]\rTrain:  33%|███▎      | 1/3 [00:00<00:00, 34.37it/s]\r                                                    \r{'loss': '6.009', 'grad_norm': '1.272', 'learning_rate': '2.5e-05', 'token_acc': '0', 'epoch': '0.0625', 'global_step/max_steps': '2/3', 'elapsed_time': '0s', 'remaining_time': '0s', 'train_speed(s/it)': '0.02248'}\n"
    "\rTrain:  67%|██████▋   | 2/3 [00:00<00:00, 44.15it/s]\rTrain:  67%|██████▋   | 2/3 [00:00<00:00, 44.07it/s]\r                                                    \r{'loss': '6.085', 'grad_norm': '1.731', 'learning_rate': '0', 'token_acc': '0', 'epoch': '0.09375', 'global_step/max_steps': '3/3', 'elapsed_time': '0s', 'remaining_time': '0s', 'train_speed(s/it)': '0.01993'}\n"
    "\rTrain: 100%|██████████| 3/3 [00:00<00:00, 49.90it/s]\rTrain: 100%|██████████| 3/3 [00:00<00:00, 49.82it/s][INFO:swift] Saving model checkpoint to /tmp/tiny1/out/v0-20261129-093022/checkpoint-3\n"
    "\r                                                    \r{'train_runtime': '0.087', 'train_samples_per_second': '34.49', 'train_steps_per_second': '34.49', 'train_loss': '6.037', 'epoch': '0.09375', 'global_step/max_steps': '3/3', 'elapsed_time': '0s', 'remaining_time': '0s', 'train_speed(s/it)': '0.02867'}\n"
    "\rTrain: 100%|██████████| 3/3 [00:00<00:00, 34.76it/s]\rTrain: 100%|██████████| 3/3 [00:00<00:00, 34.73it/s]\rTrain: 100%|██████████| 3/3 [00:00<00:00, 34.57it/s]\n"
    "[INFO:swift] last_model_checkpoint: /tmp/tiny1/out/v0-20261129-093022/checkpoint-3\n"
    "[INFO:swift] best_model_checkpoint: None\n"
    "[INFO:swift] End time of running main: 2026-11-29 09:30:23.808012\n"
    "\n"
)

# The end of a real failed run (``--template`` left out on a model that matches several).
REAL_FAILURE = (
    "Traceback (most recent call last):\n"
    '  File "/work/main/.venv/lib/python3.11/site-packages/swift/cli/sft.py", line 20, in <module>\n'
    "    sft_main()\n"
    '  File "/work/main/.venv/lib/python3.11/site-packages/swift/template/register.py", line 43, in get_template_meta\n'
    "    raise ValueError(\n"
    "ValueError: Failed to automatically match `template_type` for `/tmp/tiny1/model`. Multiple possible types found: ['qwen', 'qwen2_5', 'qwen2_5_math', 'marco_o1', 'qwq_preview', 'qwq', 'deepseek_r1']. Please specify `template_type` manually via `--template`. See documentation: https://swift.readthedocs.io/en/latest/Instruction/Supported-models-and-datasets.html\n"
    "\n"
)


def test_real_log_steps_losses_and_checkpoint():
    progress = parse_log(REAL_TAIL)
    assert progress.steps == [1, 2, 3]
    assert progress.losses == [6.015, 6.009, 6.085]
    assert (progress.step, progress.max_steps, progress.fraction) == (3, 3, 1.0)
    assert progress.output_dir == "/tmp/tiny1/out/v0-20261129-093022"
    assert progress.checkpoints == ["/tmp/tiny1/out/v0-20261129-093022/checkpoint-3"]
    assert progress.last_checkpoint == "/tmp/tiny1/out/v0-20261129-093022/checkpoint-3"
    assert progress.best_checkpoint is None  # logged as "None"
    assert progress.summary["train_loss"] == 6.037
    assert progress.finished and progress.error is None
    assert progress.records[2]["learning_rate"] == 2.5e-05
    assert progress.remaining == 0.0


def test_overlapping_tails_do_not_duplicate_steps():
    progress = TrainProgress()
    lines = [line + "\n" for line in REAL_TAIL.split("\n")]  # file lines (\r stays inside)
    progress.feed("".join(lines[:5]))
    assert progress.steps == [1, 2] and progress.max_steps == 3 and not progress.finished
    progress.feed("".join(lines[3:]))  # the next tail repeats some lines
    progress.feed(REAL_TAIL)
    assert progress.steps == [1, 2, 3]
    assert len(progress.losses) == 3


def test_tqdm_bar_between_log_steps_moves_the_step_and_eta():
    progress = parse_log("Train:  40%|████      | 4/10 [01:02<1:03:04, 1.2s/it]")
    assert (progress.step, progress.max_steps) == (4, 10)
    assert progress.elapsed == 62.0 and progress.remaining == 3784.0
    assert progress.steps == []  # no loss logged yet
    assert parse_log("Train:   0%|          | 0/3 [00:00<?, ?it/s]").remaining is None


def test_an_older_bar_does_not_move_the_step_back():
    progress = parse_log(REAL_TAIL)
    progress.feed("\rTrain:  33%|###   | 1/3 [00:00<00:00, 34.51it/s]")
    assert progress.step == 3


def test_failure_is_read_from_the_traceback():
    progress = parse_log(REAL_FAILURE)
    assert progress.error.startswith("ValueError: Failed to automatically match `template_type`")
    assert progress.step is None and not progress.finished


def test_other_bars_and_dicts_are_ignored():
    progress = parse_log(
        "Map: 100%|██████████| 32/32 [00:00<00:00, 1000 examples/s]\n[INFO:swift] args: {'a': 1}\n{'model': 'x'}\n"
    )
    assert progress.step is None and progress.records == {}


def test_eval_records_are_kept_apart():
    progress = parse_log(
        "{'eval_loss': 1.5, 'eval_runtime': 0.1, 'global_step/max_steps': '5/10'}\n"
        "{'loss': 2.0, 'global_step/max_steps': '5/10', 'elapsed_time': '1m 5s', "
        "'remaining_time': '1h 2m 3s'}"
    )
    assert progress.evals[5]["eval_loss"] == 1.5
    assert progress.losses == [2.0]  # numbers (ms-swift < 4.6) as well as strings
    assert progress.elapsed == 65.0 and progress.remaining == 3723.0


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("0s", 0.0),
        ("59s", 59.0),
        ("2m 3s", 123.0),
        ("1h 0m 1s", 3601.0),
        ("1d 1h 0m 0s", 90000.0),
        ("soon", None),
        (None, None),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_parse_log_dict_rejects_what_is_not_a_literal_dict():
    assert parse_log_dict("{'loss': __import__('os')}") is None
    assert parse_log_dict("{'loss': '1.5', 'percentage': '50.00%'}") == {"loss": 1.5, "percentage": "50.00%"}


# A GPU run's log dicts carry ``memory(GiB)`` (swift/trainers/patcher.py: max_memory_reserved so
# far); values are strings in 4.6, numbers before.
GPU_RECORDS = (
    "{'loss': '1.2', 'global_step/max_steps': '1/3', 'memory(GiB)': '14.37', 'elapsed_time': '1s'}\n"
    "{'loss': 1.1, 'global_step/max_steps': '2/3', 'memory(GiB)': 15.02, 'elapsed_time': '2s'}\n"
    "{'eval_loss': '1.0', 'global_step/max_steps': '2/3', 'memory(GiB)': '15.40'}\n"
    "{'loss': '1.0', 'global_step/max_steps': '3/3', 'memory(GiB)': '15.11', 'elapsed_time': '3s'}\n"
)

CUDA_OOM = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1553, in _call_impl\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 79.15 GiB of which 1.02 GiB is free.\n"
)


def test_peak_memory_is_the_highest_logged_including_eval():
    progress = parse_log(GPU_RECORDS)
    assert progress.peak_memory_gib == 15.40
    assert progress.to_json()["peak_memory_gib"] == 15.40
    assert parse_log(REAL_TAIL).peak_memory_gib is None  # a CPU run logs none


def test_cuda_out_of_memory_is_recognised():
    progress = parse_log(GPU_RECORDS + CUDA_OOM)
    assert progress.out_of_memory
    assert progress.error.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert not parse_log(REAL_FAILURE).out_of_memory
    assert parse_log("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB").out_of_memory
