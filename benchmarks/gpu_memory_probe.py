"""Measure torch.cuda.max_memory_reserved for a handful of configurations on a lent GPU.

Builds a 0.5B or 1.5B Qwen2.5 model from its catalog config with random weights (nothing is
downloaded), runs a few real training steps per configuration (HF transformers + PEFT, bf16,
AdamW, the code paths ms-swift uses), records the peak reserved memory (what ms-swift logs as
``memory(GiB)``) beside the estimator's figure, and appends rows, with the date and the GPU name,
to ``benchmarks/data/gpu_memory.tsv``. Without CUDA it says so and exits 0.

Run: ``.venv/bin/python benchmarks/gpu_memory_probe.py [--quick]`` (a few minutes on one GPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jupyter_quota.estimator import estimate  # noqa: E402
from jupyter_quota.estimator.catalog import lookup  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "gpu_memory.tsv"
HEADER = (
    "date\tgpu\ttorch\ttransformers\tmodel\ttuner\tmax_length\tbatch\tgrad_ckpt\tattn_impl\t"
    "liger\tmeasured_reserved_gib\tmeasured_allocated_gib\testimate_gib\terror\n"
)
# (model, tuner, max_length, batch, gradient_checkpointing, attn_impl)
CONFIGS = [
    ("Qwen/Qwen2.5-0.5B-Instruct", "full", 2048, 1, True, "sdpa"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "full", 2048, 4, True, "sdpa"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "full", 1024, 2, False, "sdpa"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "lora", 2048, 2, True, "sdpa"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "lora", 1024, 2, False, "eager"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "full", 2048, 1, True, "sdpa"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "lora", 4096, 2, True, "sdpa"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "lora", 2048, 1, False, "sdpa"),
]


def run_one(torch, model_id, tuner, max_length, batch, ckpt, attn, steps=3):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(lookup(model_id)["config"])
    config = AutoConfig.for_model(**cfg)
    config._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    if tuner == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear"))
    if ckpt:
        model.gradient_checkpointing_enable()
        if tuner == "lora":
            model.enable_input_require_grads()
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    ids = torch.randint(0, cfg["vocab_size"], (batch, max_length), device="cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    reserved = torch.cuda.max_memory_reserved() / 1024**3
    allocated = torch.cuda.max_memory_allocated() / 1024**3
    del model, opt, ids, loss
    torch.cuda.empty_cache()
    return reserved, allocated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the first three configurations")
    parser.add_argument("--out", type=Path, default=OUT)
    opts = parser.parse_args()
    try:
        import torch
        import transformers
    except ImportError:
        print("torch/transformers not installed: nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing measured")
        return 0
    gpu = torch.cuda.get_device_name(0)
    today = dt.date.today().isoformat()
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not opts.out.exists()
    configs = CONFIGS[:3] if opts.quick else CONFIGS
    with open(opts.out, "a", encoding="utf-8") as f:
        if new_file:
            f.write(HEADER)
        for model_id, tuner, max_length, batch, ckpt, attn in configs:
            argv = [
                "--model",
                model_id,
                "--tuner_type",
                tuner,
                "--max_length",
                str(max_length),
                "--per_device_train_batch_size",
                str(batch),
                "--torch_dtype",
                "bfloat16",
                "--gradient_checkpointing",
                "true" if ckpt else "false",
                "--attn_impl",
                attn,
            ]
            est = estimate(argv).peak_bytes_per_gpu / 1024**3
            started = time.time()
            try:
                reserved, allocated = run_one(torch, model_id, tuner, max_length, batch, ckpt, attn)
            except torch.cuda.OutOfMemoryError:
                print(f"OOM: {' '.join(argv)}")
                torch.cuda.empty_cache()
                continue
            err = est / reserved - 1
            print(
                f"{model_id:28} {tuner:4} len {max_length:5} b {batch} ckpt {ckpt!s:5} {attn:6} "
                f"reserved {reserved:6.2f} GiB  estimate {est:6.2f} GiB  {err:+.1%}  "
                f"({time.time() - started:.0f} s)"
            )
            f.write(
                f"{today}\t{gpu}\t{torch.__version__}\t{transformers.__version__}\t{model_id}\t"
                f"{tuner}\t{max_length}\t{batch}\t{ckpt}\t{attn}\tfalse\t{reserved:.3f}\t"
                f"{allocated:.3f}\t{est:.3f}\t{err:+.4f}\n"
            )
            f.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
