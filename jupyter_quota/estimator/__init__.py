"""GPU memory estimator for ``swift sft``: peak bytes per device, a breakdown, and assumptions.

``estimate(args, gpus)`` takes ms-swift 4.x arguments (an argv or ``SftArgs``; older names are
translated by ``jupyter_quota.swift``) and returns an ``Estimate`` targeting the figure ms-swift
logs, ``torch.cuda.max_memory_reserved``. ``device="cpu"`` drops what only CUDA adds (workspaces,
caching-allocator fragmentation), for comparison with tensor memory measured on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidRequest
from ..swift import SftArgs, parse_sft_args
from .memory import GIB, compute
from .model import ModelSpec, resolve_model
from .ranges import Range, interval, regime_of

__all__ = ["BREAKDOWN_KEYS", "Estimate", "ModelSpec", "estimate", "resolve_model"]

BREAKDOWN_KEYS = (
    "weights",
    "gradients",
    "optimizer",
    "activations",
    "logits",
    "vision",
    "parallel",
    "buckets",
    "evaluation",
    "allocator",
    "overhead",
)


@dataclass(frozen=True)
class Estimate:
    """Peak memory per device of one ``swift sft`` run, with its parts and assumptions."""

    peak_bytes_per_gpu: int
    breakdown: dict
    assumptions: list = field(default_factory=list)
    model: ModelSpec | None = None
    args: SftArgs | None = None
    gpus: int = 1
    device: str = "cuda"
    #: where measured peaks of this regime fell around such an estimate (docs/estimator.md §9.1)
    range: Range | None = None
    #: learning.Correction.to_json() when finished jobs corrected this estimate (docs/estimator.md §13)
    correction: dict | None = None

    @property
    def approximate(self) -> bool:
        """The model's architecture is a guess from its size (no config.json facts): docs/estimator.md §12."""
        return bool(self.model and self.model.approximate)

    @property
    def peak_gib_per_gpu(self) -> float:
        return round(self.peak_bytes_per_gpu / GIB, 2)

    @property
    def allocated_bytes_per_gpu(self) -> int:
        """The peak of ``torch.cuda.max_memory_allocated`` (live tensor blocks, what PyTorch's
        "active" and "allocated" peaks report): the estimate less the caching allocator's reserve,
        the only term that is cached rather than allocated (docs/estimator.md §8)."""
        return self.peak_bytes_per_gpu - int(self.breakdown.get("allocator", 0))

    @property
    def upper_bytes_per_gpu(self) -> int:
        """The range's upper end: what a plan must fit by default (the peak without a range)."""
        return self.range.high if self.range else self.peak_bytes_per_gpu

    def to_json(self) -> dict:
        """The REST body of ``POST estimate`` (openapi.yaml's ``Estimate``: camelCase keys)."""
        return {
            "peakBytesPerGpu": self.peak_bytes_per_gpu,
            "peakGibPerGpu": self.peak_gib_per_gpu,
            "breakdown": dict(self.breakdown),
            "assumptions": list(self.assumptions),
            "model": self.model.to_json() if self.model else None,
            "approximate": self.approximate,
            "gpus": self.gpus,
            "args": self.args.to_argv() if self.args else [],
            "rangeBytesPerGpu": [self.range.low, self.range.high] if self.range else None,
            "rangeGibPerGpu": [round(self.range.low / GIB, 2), round(self.range.high / GIB, 2)] if self.range else None,
            "regime": self.range.regime if self.range else None,
            "correction": self.correction,
        }


def estimate(
    args: SftArgs | list[str], gpus: int = 1, *, device: str = "cuda", model_size: str | None = None
) -> Estimate:
    """Estimate the peak memory per GPU of ``swift sft <args>`` on ``gpus`` GPUs.

    ``device="cpu"``: tensor memory only (no CUDA workspaces, no allocator fragmentation).
    ``model_size`` (``8B``, ``30B-A3B``): the size of a model whose facts the estimator cannot
    find (catalog, config.json, hub caches); the estimate is then approximate.
    Raises ``InvalidRequest`` for bad arguments, an unknown model, or a bad GPU count.
    """
    if not isinstance(args, SftArgs):
        args = parse_sft_args(list(args))
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1 or gpus > 4096:
        raise InvalidRequest(f"gpus must be a whole number from 1 to 4096, got {gpus!r}")
    if device not in ("cuda", "cpu"):
        raise InvalidRequest(f"device must be 'cuda' or 'cpu', got {device!r}")
    spec = resolve_model(args.model, model_size)
    breakdown, notes = compute(spec, args, gpus, device)
    assumptions = [f"model {spec.name}: {spec.params / 1e9:.2f}B parameters ({spec.source})"]
    if spec.approximate:
        assumptions.append(
            "approximate: no config.json facts for this model, so its architecture is guessed from its "
            "size (docs/estimator.md §12); give a local folder with its config.json for a real estimate"
        )
    elif model_size is not None:
        assumptions.append(f"--model_size {model_size} not used: the model's facts come from {spec.source}")
    assumptions += list(args.notes) + notes
    if args.unknown:
        assumptions.append(f"not modelled (passed through): {', '.join('--' + u for u in args.unknown)}")
    peak = sum(breakdown.values())
    span = interval(peak, regime_of(spec, args, gpus), spec.approximate)  # approximate facts: a wider range
    return Estimate(
        peak_bytes_per_gpu=peak,
        breakdown=breakdown,
        assumptions=assumptions,
        model=spec,
        args=args,
        gpus=gpus,
        device=device,
        range=span,
    )
