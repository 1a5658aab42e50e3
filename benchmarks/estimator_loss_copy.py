"""Does the older causal-LM loss's copy of the shifted logits raise the step's peak? (docs/estimator.md §14.2)

Transformers up to 4.48 copies the shifted float32 logits (``logits[..., :-1, :].contiguous()``);
from 4.49.0 ``ForCausalLMLoss`` pads the labels instead. Both losses run here on real CPU tensors
behind a frozen bfloat16 ``lm_head`` (a LoRA step's loss), two steps, traced by the simulated step's
storage tracer (``simstep``) and replayed through the CUDA caching-allocator model
(``allocator.replay``). Printed per loss: bytes per logit at the peak of live tensors, and the
allocator model's allocated and reserved peaks. About a minute.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/estimator_loss_copy.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

from jupyter_quota.estimator.allocator import replay
from jupyter_quota.estimator.simstep import _tracker_class

TOKENS, VOCAB, HIDDEN = 1024, 32768, 128


def copies(logits, labels):
    """transformers 4.46-4.48 ``ForCausalLMLoss`` (each model's forward up to 4.45 alike)."""
    logits = logits.float()
    shifted = logits[..., :-1, :].contiguous()
    return nn.functional.cross_entropy(shifted.view(-1, VOCAB), labels[..., 1:].contiguous().view(-1))


def pads(logits, labels):
    """transformers 4.49.0 and later: the labels are padded, the logits read in place."""
    logits = logits.float()
    shifted = nn.functional.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    return nn.functional.cross_entropy(logits.view(-1, VOCAB), shifted.view(-1))


def measure(loss_fn) -> tuple[float, float, float]:
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16)
    hidden = torch.randn(1, TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, VOCAB, (1, TOKENS))
    tracer = _tracker_class()()
    tracer.measuring = True
    with tracer:
        for _ in range(2):  # the second step starts from the first one's cached blocks
            loss_fn(nn.functional.linear(hidden, weight), labels).backward()
            hidden.grad = None
    model = replay(tracer.events)
    logits = TOKENS * VOCAB
    return tracer.peak / logits, model.peak_allocated / logits, model.peak_reserved / logits


def main() -> None:
    print(f"{TOKENS} x {VOCAB} bfloat16 logits, frozen lm_head; bytes per logit at the peak")
    print(f"{'loss':34} {'live':>6} {'allocated':>10} {'reserved':>9}")
    for name, fn in (("copies shifted logits (<= 4.48)", copies), ("pads labels (>= 4.49)", pads)):
        live, allocated, reserved = measure(fn)
        print(f"{name:34} {live:6.2f} {allocated:10.2f} {reserved:9.2f}")


if __name__ == "__main__":
    main()
