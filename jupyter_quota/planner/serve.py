"""The serving planner: the best ``swift deploy`` that fits what a team has left.

Pure (no I/O). ``plan_serve(args, gpus_remaining, gpu_memory)`` keeps what the user asked for
(model, adapters, a context length ``--vllm_max_model_len``, a concurrency ``--vllm_max_num_seqs``)
and chooses the rest: the backend (vLLM on GPUs, transformers on CPU when no GPU is left), the GPUs
and tensor parallel (a divisor of the attention heads), the memory fraction from the budget, merged
LoRA or adapters, and quantization. When the ask does not fit it lowers ``max_model_len``, then
quantizes the weights to fp8, and says why in
``rejected`` and ``notes``, as the training planner does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..deploy import DeployArgs, parse_deploy_args
from ..errors import InvalidRequest
from ..estimator.serving import ServeEstimate, check_tensor_parallel, estimate_serve

__all__ = ["ServePlan", "plan_serve"]

#: the share of a GPU's memory a serving plan leaves to others (CUDA context, fragmentation)
MARGIN = 0.05
#: the shortest context a plan offers before it gives up on a configuration
MIN_CONTEXT = 2048
#: the concurrency a plan aims for when the user names none
DEFAULT_CONCURRENCY = 8


@dataclass
class ServePlan:
    recommended: dict | None
    rejected: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"recommended": self.recommended, "rejected": self.rejected, "notes": self.notes}


def plan_serve(args: DeployArgs | list[str], gpus_remaining: int, gpu_memory: int) -> ServePlan:
    """The ``swift deploy`` argv that serves ``args``' model in ``gpus_remaining`` GPUs of
    ``gpu_memory`` bytes, or the reasons nothing does."""
    asked = args if isinstance(args, DeployArgs) else parse_deploy_args(list(args))
    from ..estimator.model import resolve_model

    spec = resolve_model(asked.model)
    asked_len = asked.vllm_max_model_len or asked.sglang_context_length or asked.max_length
    want_len = asked_len or spec.max_position_embeddings or 4096
    want_seqs = asked.vllm_max_num_seqs if "vllm_max_num_seqs" in asked.explicit else DEFAULT_CONCURRENCY
    # a concurrency asked for (or, when neither is asked, DEFAULT_CONCURRENCY) must fit; a context
    # asked for is kept as long as quantizing makes room, and lowered (to MIN_CONTEXT) only then
    target = want_seqs if "vllm_max_num_seqs" in asked.explicit or not asked_len else 1
    rejected: list[dict] = []
    notes: list[str] = []
    fallback = None
    if gpus_remaining < 1:
        chosen = asked.replace(infer_backend="transformers")
        notes.append("no GPU left in the quota: transformers on CPU (slow, but it needs no GPU)")
        return ServePlan(_plan(estimate_serve(chosen, 1, gpu_memory), chosen, 0), rejected, notes)
    budget = int(gpu_memory * (1 - MARGIN))
    for tp in (n for n in (1, 2, 4, 8) if n <= gpus_remaining):
        try:
            check_tensor_parallel(spec, tp)
        except InvalidRequest as e:
            rejected.append({"plan": {"tensorParallel": tp}, "reason": str(e)})
            continue
        for quant, length in _tries(want_len, bool(asked_len)):
            base = asked.replace(
                infer_backend="vllm",
                vllm_tensor_parallel_size=tp,
                vllm_max_model_len=length,
                vllm_gpu_memory_utilization=round(budget / gpu_memory, 2),
                vllm_max_num_seqs=want_seqs,
                **({"merge_lora": True} if len(asked.adapters) == 1 else {}),
                **({"vllm_quantization": quant} if quant else {}),
            )
            est = estimate_serve(base, tp, gpu_memory)
            starts = est.refusal is None and est.max_concurrent_sequences >= 1
            if starts and fallback is None:
                fallback = (est, base, tp)
            if starts and est.max_concurrent_sequences >= target:
                if est.max_concurrent_sequences < want_seqs:
                    notes.append(
                        f"{est.max_concurrent_sequences} sequence(s) of {length} tokens fit at once, "
                        f"not the {want_seqs} asked: the others wait in vLLM's queue"
                    )
                if length < want_len:
                    notes.append(f"max_model_len lowered from {want_len} to {length} to fit the KV cache")
                if quant:
                    notes.append("fp8 weights: the 16-bit weights leave too little room for the KV cache")
                if base.merge_lora:
                    notes.append("one adapter: merged into the weights (no LoRA buffers, no per-request cost)")
                return ServePlan(_plan(est, base, tp), rejected, notes)
            rejected.append(
                {
                    "plan": {"tensorParallel": tp, "maxModelLen": length, "quantization": quant},
                    "reason": est.refusal
                    or f"{est.max_concurrent_sequences} sequence(s) of {length} tokens fit, {target} asked",
                }
            )
    if fallback is not None:
        est, base, tp = fallback
        notes.append(
            f"only {est.max_concurrent_sequences} sequence(s) of {est.max_model_len} tokens fit at once, not the "
            f"{target} aimed for; ask for a shorter --vllm_max_model_len or a smaller --vllm_max_num_seqs"
        )
        return ServePlan(_plan(est, base, tp), rejected, notes)
    notes.append(
        f"nothing fits {gpus_remaining} GPU(s) of {gpu_memory / 2**30:g} GiB: the rejected plans say what each needed"
    )
    return ServePlan(None, rejected, notes)


def _tries(length: int, keep_length: bool) -> list[tuple[str | None, int]]:
    """(quantization, max_model_len) in the order tried: a context asked for is kept as long as
    quantizing helps (16-bit, then fp8, then shorter); otherwise shorter contexts come first."""
    lengths = [length]
    while lengths[-1] > MIN_CONTEXT:
        lengths.append(max(MIN_CONTEXT, lengths[-1] // 2))
    if keep_length:
        return [(q, n) for n in lengths for q in (None, "fp8")]
    return [(q, n) for q in (None, "fp8") for n in lengths]


def _plan(est: ServeEstimate, args: DeployArgs, gpus: int) -> dict:
    return {"args": args.to_argv(), "gpus": gpus, "estimate": est.to_json()}
