"""Real ``swift sft`` steps on a lent GPU: ms-swift's own ``memory(GiB)`` beside the estimate, as calibration rows.

Issue 22's GPU truth, prepared to run as one call on a device machine. For each regime in ``REGIMES``:

1. **A model directory** is built from the catalog entry's published config
   (``jupyter_quota/estimator/catalog.json``) with random weights, and a small byte-level tokenizer
   with the chat template's special tokens. Nothing is downloaded. The logits still span the
   config's whole vocabulary, so the memory is the real model's.
2. **A chat dataset** whose every sample is longer than ``--max_length`` and is cut to exactly that
   many tokens (``--truncation_strategy right``): the tokens in each step are known, unlike the
   published rows whose real sample lengths are not (``docs/estimator.md`` §9.2).
3. **The run:** ``python -m swift.cli.main sft`` (what the ``swift sft`` command runs; one process on
   one GPU) for ``--max_steps`` steps, with a callback plugin that writes the step's
   ``torch.cuda.max_memory_reserved`` and ``max_memory_allocated`` to a JSONL file.
4. **The row:** the reserved peak (what ms-swift logs as ``memory(GiB)``, checked against its
   ``logging.jsonl``) in ``benchmarks/data/estimator_calibration.tsv``'s columns, with the date, the
   GPU and the versions in its source. The estimate of the same arguments
   (``jupyter_quota.estimator.estimate``, the ``jupyter quota estimate`` path) is printed beside it.

Rows go to ``--out`` (default ``$OUT/gpu_truth.tsv`` on a device machine, else
``benchmarks/data/gpu_truth.tsv``) as each regime ends, so a run cut short keeps what it measured.
``--append`` then adds them to the calibration table, where ``benchmarks/estimator_calibration.py``
scores them with the rest (held out by source: one run of this script is one source).

On the device machine ms-swift is not installed: ``scripts/device-wheels`` downloads it and the
packages its image lacks into ``.whl`` (see the device README's install line). Run there:
``python benchmarks/gpu_truth.py --budget-s 480``. Without CUDA, ``--cpu-check`` runs the first
regime's model cut to 2 layers on the CPU for ``--max-steps 2``: the plumbing, not a measurement
(the row's measured figure is ``NA``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))  # tiny_swift: the byte-level tokenizer the e2e tests build

from jupyter_quota.estimator import estimate  # noqa: E402
from jupyter_quota.estimator.catalog import lookup  # noqa: E402
from jupyter_quota.estimator.model import resolve_model  # noqa: E402
from jupyter_quota.estimator.simstep import versions  # noqa: E402

GIB = 1024**3
CALIBRATION = ROOT / "benchmarks" / "data" / "estimator_calibration.tsv"
#: the calibration table's own header: a row written here is a row of it
COLUMNS = CALIBRATION.read_text(encoding="utf-8").partition("\n")[0].split("\t")


@dataclass(frozen=True)
class Regime:
    """One ``swift sft`` run: the model and the arguments that decide its memory."""

    model: str  # a catalog id
    tuner: str  # full or lora
    max_length: int
    batch: int
    checkpointing: bool = True
    attn: str = "sdpa"

    @property
    def name(self) -> str:
        ckpt = "ckpt" if self.checkpointing else "nockpt"
        return f"{self.model.split('/')[-1]} {self.tuner} len {self.max_length} b{self.batch} {ckpt} {self.attn}"

    def swift_args(self) -> list[str]:
        """The arguments that decide memory, shared by the run and the estimate (``--model`` aside).

        Gradient accumulation is left at ms-swift's default (16 samples a step), as in the published
        rows these runs stand beside."""
        args = [
            "--tuner_type",
            self.tuner,
            "--max_length",
            str(self.max_length),
            "--per_device_train_batch_size",
            str(self.batch),
            "--gradient_checkpointing",
            str(self.checkpointing).lower(),
            "--attn_impl",
            self.attn,
        ]
        if self.tuner == "lora":
            args += ["--lora_rank", "8", "--lora_alpha", "32", "--target_modules", "all-linear"]
        return args


#: cheapest first, so a run cut short by its time budget has measured the most regimes; the 7B rows
#: repeat two published ms-swift rows with known lengths (calibration lines 2 and 13: 22 and 76 GiB)
REGIMES = [
    Regime("Qwen/Qwen2.5-0.5B-Instruct", "lora", 2048, 1),
    Regime("Qwen/Qwen2.5-0.5B-Instruct", "full", 2048, 1),
    Regime("Qwen/Qwen2.5-0.5B-Instruct", "full", 1024, 2, checkpointing=False),
    Regime("Qwen/Qwen2.5-0.5B-Instruct", "lora", 1024, 2, checkpointing=False, attn="eager"),
    Regime("Qwen/Qwen2.5-1.5B-Instruct", "lora", 4096, 2),
    Regime("Qwen/Qwen2.5-1.5B-Instruct", "full", 2048, 1),
    Regime("Qwen/Qwen2.5-1.5B-Instruct", "lora", 2048, 1, checkpointing=False),
    Regime("Qwen/Qwen2.5-3B-Instruct", "full", 4096, 1),
    Regime("Qwen/Qwen2.5-7B-Instruct", "lora", 2048, 1),
    Regime("Qwen/Qwen2.5-7B-Instruct", "full", 2048, 1),
]

#: the ``--external_plugins`` callback: each step's CUDA peaks, appended to $JQ_PEAKS as it ends
PEAKS_PLUGIN = """\
import json
import os

import torch
from swift.callbacks import TrainerCallback, callbacks_map


class RecordPeaks(TrainerCallback):
    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        # the encoded samples' token counts, as the run will see them: the row's length is checked, not assumed
        dataset = train_dataloader.dataset
        lengths = [len(dataset[i]["input_ids"]) for i in range(min(len(dataset), 8))]
        with open(os.environ["JQ_PEAKS"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"lengths": lengths}) + "\\n")

    def on_step_end(self, args, state, control, **kwargs):
        cuda = torch.cuda.is_available()
        peaks = {
            "step": state.global_step,
            "reserved": torch.cuda.max_memory_reserved() if cuda else None,
            "allocated": torch.cuda.max_memory_allocated() if cuda else None,
        }
        with open(os.environ["JQ_PEAKS"], "a", encoding="utf-8") as f:
            f.write(json.dumps(peaks) + "\\n")


callbacks_map["jq_peaks"] = RecordPeaks
"""

SENTENCE = "quota keeps a shared machine fair between teams and every job runs with its own log"
WORDS = SENTENCE.split()


def build_model_dir(directory: Path, model_id: str, layers: int | None, device: str) -> Path:
    """The catalog config with random bf16 weights and a byte-level tokenizer, saved to ``directory``."""
    import torch
    from tiny_swift import build_tokenizer
    from transformers import AutoConfig, AutoModelForCausalLM

    fast = build_tokenizer(directory, [SENTENCE], vocab_size=300)

    config = dict(lookup(model_id)["config"])
    if layers is not None:
        config["num_hidden_layers"] = layers
    config.update(eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None)
    hf_config = AutoConfig.for_model(**config)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
    model.save_pretrained(directory)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return directory


def build_dataset(path: Path, rows: int, max_length: int) -> Path:
    """``rows`` chat samples, each far longer than ``max_length`` tokens (cut to it by the run)."""
    # about one token a word with this tokenizer; twice the length, so every sample is cut
    answer = " ".join(WORDS[i % len(WORDS)] for i in range(2 * max_length))
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            sample = {"messages": [{"role": "user", "content": f"tell me about quota {i}"}]}
            sample["messages"].append({"role": "assistant", "content": answer})
            f.write(json.dumps(sample) + "\n")
    return path


def run_swift(regime: Regime, model_dir: Path, work: Path, steps: int, cpu: bool) -> dict:
    """One real ``swift sft`` run; the peaks its plugin recorded and what ms-swift itself logged."""
    data = build_dataset(work / "data.jsonl", rows=steps * regime.batch + regime.batch, max_length=regime.max_length)
    plugin = work / "jq_peaks_plugin.py"
    plugin.write_text(PEAKS_PLUGIN)
    peaks_file = work / "peaks.jsonl"
    peaks_file.unlink(missing_ok=True)
    out = work / "output"
    argv = [sys.executable, "-m", "swift.cli.main", "sft", "--model", str(model_dir), "--model_type", "qwen2"]
    argv += ["--template", "qwen2_5", "--dataset", str(data), "--truncation_strategy", "right"]
    argv += regime.swift_args()
    argv += ["--torch_dtype", "float32" if cpu else "bfloat16", "--max_steps", str(steps), "--logging_steps", "1"]
    argv += ["--split_dataset_ratio", "0", "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none"]
    argv += ["--dataloader_num_workers", "0", "--check_model", "false", "--output_dir", str(out)]
    argv += ["--external_plugins", str(plugin), "--callbacks", "jq_peaks"]
    env = dict(os.environ, JQ_PEAKS=str(peaks_file), PYTHONUNBUFFERED="1")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    log = work / "swift.log"
    with open(log, "w", encoding="utf-8") as f:
        code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work).returncode
    if code != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"swift sft exited {code}; the end of {log}:\n{tail}")
    records = [json.loads(line) for line in peaks_file.read_text().splitlines()]
    lengths = next((r["lengths"] for r in records if "lengths" in r), [])
    if not lengths or set(lengths) != {regime.max_length}:
        raise RuntimeError(f"the samples were not cut to {regime.max_length} tokens: {lengths}")
    peaks = [r for r in records if "step" in r]
    logged = [json.loads(line) for p in out.rglob("logging.jsonl") for line in p.read_text().splitlines()]
    swift_gib = max((entry["memory(GiB)"] for entry in logged if "memory(GiB)" in entry), default=None)
    return {"peaks": peaks, "swiftMemoryGiB": swift_gib, "steps": max(p["step"] for p in peaks)}


def calibration_row(regime: Regime, run: dict, source: str, gpu: str, layers: int | None = None) -> dict:
    """The run in ``estimator_calibration.tsv``'s columns."""
    spec = resolve_model(regime.model)
    reserved = max((p["reserved"] or 0) for p in run["peaks"]) / GIB
    allocated = max((p["allocated"] or 0) for p in run["peaks"]) / GIB
    measured = f"{reserved:.2f}" if reserved else "NA"
    notes = (
        f"every sample cut to exactly {regime.max_length} tokens (truncation_strategy right); random weights "
        f"from the catalog config; {run['steps']} steps; ms-swift memory(GiB) {run['swiftMemoryGiB']}; "
        f"allocated peak {allocated:.2f} GiB (the figure is the reserved one); AdamW torch, bf16 params"
    )
    if layers is not None:
        notes += f"; --cpu-check: cut to {layers} layers, float32 on the CPU, not a measurement"
    return {
        "source": source,
        "model": regime.model.split("/")[-1],
        "params_b": f"{spec.params / 1e9:.2f}",
        "hidden": spec.hidden_size,
        "layers": spec.num_layers,
        "heads": spec.num_heads,
        "kv_heads": spec.num_kv_heads,
        "intermediate": spec.intermediate_size,
        "vocab": spec.vocab_size,
        "tied": str(spec.tie_word_embeddings).lower(),
        "train_type": regime.tuner,
        "lora_rank": 8 if regime.tuner == "lora" else 0,
        "quant_bits": 0,
        "dtype": "bf16",
        "max_length": regime.max_length,
        "batch_size": regime.batch,
        "grad_ckpt": str(regime.checkpointing).lower(),
        "attn_impl": regime.attn,
        "deepspeed": "none",
        "n_gpus": 1,
        "gpu": gpu,
        "measured_gib_per_gpu": measured,
        "notes": notes,
    }


def default_out() -> Path:
    out = os.environ.get("OUT")  # the device machine's folder that comes back
    return Path(out) / "gpu_truth.tsv" if out else ROOT / "benchmarks" / "data" / "gpu_truth.tsv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="TSV to write the rows to (see above)")
    parser.add_argument("--only", metavar="TEXT", help="only the regimes whose name contains TEXT")
    parser.add_argument("--max-steps", type=int, default=3, help="optimizer steps a run (default 3)")
    parser.add_argument("--budget-s", type=float, default=None, help="start no regime after this many seconds")
    parser.add_argument("--work", type=Path, default=Path("/tmp/jq-gpu-truth"), help="scratch folder")
    parser.add_argument("--cpu-check", action="store_true", help="no GPU: the first regime, 2 layers, on the CPU")
    parser.add_argument("--append", action="store_true", help="also append the rows to the calibration table")
    opts = parser.parse_args(argv)
    import torch

    cpu = opts.cpu_check
    if not cpu and not torch.cuda.is_available():
        print("no CUDA device: nothing measured (--cpu-check runs the plumbing on the CPU)")
        return 0
    regimes = [r for r in REGIMES if not opts.only or opts.only in r.name]
    if cpu:
        regimes = regimes[:1]
    gpu = "CPU" if cpu else torch.cuda.get_device_name(0)
    found = versions(("torch", "transformers", "peft", "ms-swift"))
    stack = ", ".join(f"{name} {version or 'missing'}" for name, version in found.items())
    source = f"jupyter_quota benchmarks/gpu_truth.py ({dt.date.today().isoformat()}, {gpu}, {stack})"
    out = opts.out or default_out()
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = not out.exists()
    started = time.monotonic()
    print(f"{source}\n{len(regimes)} regimes; rows to {out}", flush=True)
    with open(out, "a", encoding="utf-8") as f:
        if fresh:
            f.write("\t".join(COLUMNS) + "\n")
        for i, regime in enumerate(regimes, 1):
            spent = time.monotonic() - started
            if opts.budget_s is not None and spent > opts.budget_s:
                print(f"time budget spent ({spent:.0f} s): {len(regimes) - i + 1} regimes not run", flush=True)
                break
            work = opts.work / f"r{i}"
            work.mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            model_dir = build_model_dir(work / "model", regime.model, 2 if cpu else None, "cpu" if cpu else "cuda")
            try:
                run = run_swift(regime, model_dir, work, opts.max_steps if not cpu else 2, cpu)
            except RuntimeError as exc:
                print(f"[{i}/{len(regimes)}] {regime.name}: FAILED\n{exc}", flush=True)
                continue
            row = calibration_row(regime, run, source, gpu, layers=2 if cpu else None)
            f.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")
            f.flush()
            est = estimate(["--model", regime.model, *regime.swift_args(), "--torch_dtype", "bfloat16"])
            ours = est.peak_bytes_per_gpu / GIB
            measured = row["measured_gib_per_gpu"]
            error = f"{ours / float(measured) - 1:+.1%}" if measured != "NA" else "n/a on a CPU"
            print(
                f"[{i}/{len(regimes)}] {regime.name}: measured {measured} GiB reserved "
                f"(ms-swift memory(GiB) {run['swiftMemoryGiB']}), estimate {ours:.2f} GiB, {error} "
                f"({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
    if opts.append:
        print(f"{append_measured(out)} measured rows appended to {CALIBRATION}")
    return 0


def append_measured(out: Path) -> int:
    """Append ``out``'s measured rows (not a CPU check's ``NA``) to the calibration table."""
    measured_at = COLUMNS.index("measured_gib_per_gpu")
    rows = [line for line in out.read_text(encoding="utf-8").splitlines()[1:] if line.split("\t")[measured_at] != "NA"]
    with open(CALIBRATION, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in rows)
    return len(rows)


if __name__ == "__main__":
    raise SystemExit(main())
