"""Measure real training steps on CPU and compare with the estimator's CPU mode.

Small random-initialised Llama-architecture models (HF transformers ``LlamaForCausalLM``, the code
path ms-swift uses for Llama/Qwen-style decoders) of several shapes (vocabulary, width, depth,
sequence, batch), trained in full or with PEFT LoRA (all-linear, r=8, dropout 0.05, as ms-swift's
defaults), gradient checkpointing on and off, float32, AdamW.

Measured: the peak of live tensor memory over one whole training step (forward, loss, backward,
optimizer step), after a warm-up step has created the optimizer states. ``StorageTracker`` is a
``TorchDispatchMode`` that counts every tensor storage an op creates and uncounts it through a weak
reference when it is freed (the method of PyTorch's ``torch.distributed._tools.mem_tracker``,
whose module hooks cannot handle PEFT's frozen parameters); parameters, gradients and optimizer
states alive at the start are counted first. The optimizer uses ``foreach=True``,
the path the estimator assumes (one parameter-sized temporary at the step).

Compared with ``estimate(argv, device="cpu")`` for a local folder holding the model's config.json.
Run: ``.venv/bin/python benchmarks/estimator_cpu.py`` (about a minute).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import weakref  # noqa: E402

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from jupyter_quota.estimator import estimate  # noqa: E402

# (vocab, hidden, intermediate, layers, heads, kv, seq, batch)
SHAPES = [
    (4000, 256, 688, 2, 4, 2, 256, 2),
    (32000, 256, 688, 2, 4, 2, 256, 2),
    (4000, 512, 1376, 2, 8, 4, 256, 2),
    (4000, 256, 688, 8, 4, 2, 256, 2),
    (4000, 256, 688, 4, 4, 2, 1024, 1),
    (8000, 384, 1024, 4, 6, 2, 512, 4),
    (16000, 512, 1408, 6, 8, 8, 512, 2),
]
MODES = [("full", True), ("full", False), ("lora", True), ("lora", False)]


class StorageTracker(TorchDispatchMode):
    """Live bytes of distinct tensor storages, and their peak, while the mode is active."""

    def __init__(self, tensors):
        super().__init__()
        self.live: dict[int, tuple[int, weakref.ref]] = {}
        self.current = self.peak = 0
        for tensor in tensors:
            self._add(tensor)

    def _add(self, tensor) -> None:
        if not isinstance(tensor, torch.Tensor):
            return
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self.live or storage.nbytes() == 0:
            return
        size = storage.nbytes()

        def freed(_ref, key=key, size=size):
            if key in self.live:
                del self.live[key]
                self.current -= size

        self.live[key] = (size, weakref.ref(storage, freed))
        self.current += size
        self.peak = max(self.peak, self.current)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            self._add(tensor)
        return out


def build(shape, folder: Path):
    vocab, hidden, inter, layers, heads, kv, _seq, _batch = shape
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
    )
    folder.mkdir(parents=True, exist_ok=True)
    data = config.to_dict()
    data["torch_dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(data, default=str))
    torch.manual_seed(0)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config).float()


def measure(shape, tuner: str, ckpt: bool, folder: Path) -> int:
    model = build(shape, folder)
    if tuner == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear"))
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if tuner == "lora":
            model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    vocab, *_rest, seq, batch = shape
    ids = torch.randint(0, vocab, (batch, seq))

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    start = list(model.parameters()) + list(model.buffers())
    start += [t for state in opt.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
    tracker = StorageTracker(start)
    with tracker:
        step()
    return tracker.peak


def main() -> list[float]:
    errors = []
    by_mode: dict[str, list[float]] = {}
    started = time.time()
    print(
        f"{'vocab':>6} {'h':>4} {'L':>2} {'seq':>5} {'b':>2} {'tuner':5} {'ckpt':5} "
        f"{'measured MiB':>12} {'estimate MiB':>12} {'error':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for i, shape in enumerate(SHAPES):
            for tuner, ckpt in MODES:
                folder = Path(tmp) / f"m{i}"
                measured = measure(shape, tuner, ckpt, folder)
                argv = [
                    "--model",
                    str(folder),
                    "--tuner_type",
                    tuner,
                    "--torch_dtype",
                    "float32",
                    "--max_length",
                    str(shape[6]),
                    "--per_device_train_batch_size",
                    str(shape[7]),
                    "--gradient_checkpointing",
                    "true" if ckpt else "false",
                    "--attn_impl",
                    "sdpa",
                ]
                est = estimate(argv, device="cpu").peak_bytes_per_gpu
                err = est / measured - 1
                errors.append(err)
                by_mode.setdefault(f"{tuner} ckpt={'on' if ckpt else 'off'}", []).append(err)
                print(
                    f"{shape[0]:>6} {shape[1]:>4} {shape[3]:>2} {shape[6]:>5} {shape[7]:>2} "
                    f"{tuner:5} {ckpt!s:5} {measured / 2**20:12.1f} {est / 2**20:12.1f} "
                    f"{err:+7.1%}"
                )
    print()
    print(f"{'subset':18} {'n':>3} {'median |err|':>12} {'p90 |err|':>10} {'under >10%':>10}")
    for name, subset in [("all", errors)] + sorted(by_mode.items()):
        absolute = sorted(abs(e) for e in subset)
        p90 = absolute[min(len(absolute) - 1, round(0.9 * (len(absolute) - 1)))]
        under = sum(1 for e in subset if e < -0.10) / len(subset)
        print(f"{name:18} {len(subset):>3} {statistics.median(absolute):12.1%} {p90:10.1%} {under:10.0%}")
    print(f"\n{len(errors)} configurations in {time.time() - started:.0f} s (torch {torch.__version__})")
    return errors


if __name__ == "__main__":
    main()
