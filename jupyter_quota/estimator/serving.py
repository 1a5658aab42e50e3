"""GPU memory of ``swift deploy``: what each engine takes per GPU and what its KV cache holds.

``estimate_serve(args, gpus, gpu_memory)`` takes ``swift deploy`` arguments (an argv or
``DeployArgs``) and returns a ``ServeEstimate``: the peak per GPU, its breakdown (``SERVE_KEYS``),
the KV bytes per token at the served dtype and the sequences of ``max_model_len`` that fit. Each
engine sizes itself its own way (docs/serving-estimate.md):

- vLLM takes ``gpu_memory_utilization`` x the GPU's memory and gives the KV cache what is left
  after weights, the profiled peak activations and non-torch memory; it refuses to start when the
  KV cache cannot hold one sequence of ``max_model_len``.
- SGLang keeps ``mem_fraction_static`` of the memory for weights and the KV pool; activations and
  CUDA graphs use the rest.
- transformers pre-allocates nothing: the cache grows with the batch (``--max_batch_size``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..deploy import DeployArgs, parse_deploy_args
from ..errors import InvalidRequest
from .kvcache import VLLM_BLOCK_SIZE, KvLayout, kv_layout, sglang_tokens, vllm_cache
from .model import resolve_model
from .spec import ModelSpec

__all__ = ["SERVE_KEYS", "ServeEstimate", "estimate_serve"]

GIB = 1024**3
SERVE_KEYS = ("weights", "adapters", "kvCache", "activations", "cudaGraphs", "reserve")
#: the GPU's memory when the caller does not say (an 80 GiB A100/H100)
DEFAULT_GPU_MEMORY = 80 * GIB
#: vLLM's ``max_num_batched_tokens`` for an OpenAI server on a GPU of 70 GiB or more
#: (``EngineArgs._set_default_args``; 2048 below); its profile run takes this many tokens
VLLM_BATCHED_TOKENS = 8192
#: SGLang's ``mem_fraction_static`` when ms-swift leaves it unset: SGLang's server arguments pick
#: about this on an 80 GiB GPU (less on smaller ones); a guess, said so in the assumptions
SGLANG_DEFAULT_FRACTION = 0.88
#: the runtime's own memory outside torch's tensors: CUDA context, cuBLAS workspaces, and NCCL
#: buffers when tensor parallel (the "non-torch memory" vLLM's profile reports)
RESERVE = int(0.5 * GIB)
RESERVE_TP = int(0.25 * GIB)
#: CUDA graphs of the decode batch sizes (vLLM logs "Graph capturing finished ... took 0.3-1 GiB")
CUDA_GRAPHS = int(0.5 * GIB)
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class ServeEstimate:
    """Memory per GPU of one ``swift deploy``, with what its KV cache holds."""

    peak_bytes_per_gpu: int
    breakdown: dict
    kv_cache_bytes_per_token: int
    max_model_len: int
    max_concurrent_sequences: int
    kv_cache_tokens: int
    kv_cache_blocks: int | None
    backend: str
    gpus: int
    tensor_parallel: int
    gpu_memory: int
    model: ModelSpec
    args: DeployArgs
    #: what the engine would say when it refuses to start (None: it starts)
    refusal: str | None = None
    assumptions: list = field(default_factory=list)

    def to_json(self) -> dict:
        """The REST body of ``POST estimate/serve`` (openapi.yaml's ``ServeEstimate``)."""
        return {
            "peakBytesPerGpu": self.peak_bytes_per_gpu,
            "peakGibPerGpu": round(self.peak_bytes_per_gpu / GIB, 2),
            "breakdown": dict(self.breakdown),
            "kvCacheBytesPerToken": self.kv_cache_bytes_per_token,
            "kvCacheTokens": self.kv_cache_tokens,
            "kvCacheBlocks": self.kv_cache_blocks,
            "maxModelLen": self.max_model_len,
            "maxConcurrentSequences": self.max_concurrent_sequences,
            "backend": self.backend,
            "gpus": self.gpus,
            "tensorParallel": self.tensor_parallel,
            "gpuMemory": f"{self.gpu_memory / GIB:g}Gi",
            "refusal": self.refusal,
            "assumptions": list(self.assumptions),
            "model": self.model.to_json(),
            "args": self.args.to_argv(),
        }


def estimate_serve(
    args: DeployArgs | list[str], gpus: int | None = None, gpu_memory: int = DEFAULT_GPU_MEMORY
) -> ServeEstimate:
    """Estimate ``swift deploy <args>`` on ``gpus`` GPUs of ``gpu_memory`` bytes each.

    ``gpus`` defaults to the tensor-parallel size (1 for transformers). Raises ``InvalidRequest``
    for a context longer than the model's, a tensor-parallel size that does not divide the
    attention heads or exceeds the GPUs, or an unknown model.
    """
    if not isinstance(args, DeployArgs):
        args = parse_deploy_args(list(args))
    spec = resolve_model(args.model)
    tp = args.tensor_parallel
    check_tensor_parallel(spec, tp)
    if gpus is None:
        gpus = tp
    if gpus < tp:
        raise InvalidRequest(f"tensor parallel {tp} needs {tp} GPUs, but {gpus} were given; give gpus >= {tp}")
    max_len = _max_model_len(spec, args)
    if args.infer_backend == "vllm" and len(args.adapters) > 1 and not args.merge_lora:
        # ms-swift's VllmEngine asserts 'Only one adapter is supported for now' (max_loras 1)
        raise InvalidRequest(
            f"--adapters: ms-swift's vLLM engine serves one adapter, {len(args.adapters)} were given; "
            "give one, or merge them into the weights with --merge_lora true"
        )
    dtype = args.torch_dtype or spec.torch_dtype
    a = _DTYPE_BYTES.get(dtype, 2)
    kv_bytes_elem = 1 if args.infer_backend == "sglang" and "fp8" in (args.sglang_kv_cache_dtype or "") else a
    layout = kv_layout(spec, kv_bytes_elem, tp)
    notes = [f"model {spec.name}: {spec.params / 1e9:.2f}B parameters ({spec.source})", *args.notes]
    weights = _weights(spec, args, a, tp, notes)
    adapters = _adapters(spec, args, a, tp, notes)
    reserve = RESERVE + (RESERVE_TP if tp > 1 else 0)
    engine = {"vllm": _vllm, "sglang": _sglang}.get(args.infer_backend, _transformers)
    return engine(spec, args, gpus, tp, gpu_memory, max_len, a, layout, weights, adapters, reserve, notes)


def check_servable(args: DeployArgs) -> None:
    """The refusals of :func:`estimate_serve` that need no GPU: a tensor-parallel size that does
    not divide the heads, a context longer than the model's. Only for a model whose config the
    estimator reads (catalog, local folder, hub cache): of an unknown or guessed one, the server
    is the judge."""
    try:
        spec = resolve_model(args.model)
    except InvalidRequest:
        return
    if spec.approximate:
        return
    check_tensor_parallel(spec, args.tensor_parallel)
    _max_model_len(spec, args)


def check_tensor_parallel(spec: ModelSpec, tp: int) -> None:
    """vLLM's and SGLang's rule: the attention heads split evenly over the ranks, and so do the KV
    heads, or the ranks over the KV heads (replicated then)."""
    if tp < 1:
        raise InvalidRequest("tensor parallel must be at least 1")
    if spec.num_heads % tp:
        fits = [n for n in range(1, min(spec.num_heads, 64) + 1) if spec.num_heads % n == 0 and n <= 8]
        raise InvalidRequest(
            f"tensor parallel {tp} does not divide {spec.name}'s {spec.num_heads} attention heads; "
            f"use one of {', '.join(map(str, fits))}"
        )
    kv = spec.num_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise InvalidRequest(f"tensor parallel {tp} and {spec.name}'s {kv} KV heads: one must divide the other")


def _max_model_len(spec: ModelSpec, args: DeployArgs) -> int:
    """The context asked for, at most the model's; the model's own when none is asked for."""
    model_len = spec.max_position_embeddings or 4096
    asked = args.max_model_len
    if asked is None:
        return model_len
    if asked > model_len:
        name = {"vllm": "--vllm_max_model_len", "sglang": "--sglang_context_length"}.get(
            args.infer_backend, "--max_length"
        )
        raise InvalidRequest(
            f"{name} {asked} is longer than {spec.name}'s context of {model_len} tokens "
            f"(max_position_embeddings); give at most {model_len}"
        )
    return asked


def _weights(spec: ModelSpec, args: DeployArgs, a: int, tp: int, notes: list[str]) -> int:
    """The weights on one rank: linears quantized as asked (a pre-quantized checkpoint's own
    format, ``--vllm_quantization fp8``, or bitsandbytes ``--quant_bits``), the rest at the served
    dtype; the language model split over the ranks, the vision and audio towers whole on each."""
    linear = spec.linear_params
    rest = spec.llm_params - linear
    towers = spec.tower_params
    per_weight = float(a)
    if spec.quant_bits:
        per_weight = spec.quant_bytes_per_weight
        notes.append(
            f"{spec.quant_method.upper()} {spec.quant_bits}-bit checkpoint: {per_weight:.3f} bytes per linear weight"
        )
    elif (args.vllm_quantization or args.sglang_quantization or "").lower().startswith("fp8"):
        per_weight = 1.0
        notes.append("fp8 weights (online quantization): 1 byte per linear weight")
    elif args.quant_bits:
        per_weight = 0.5 + 1 / 64 if args.quant_bits == 4 else 1 + 4 / spec.hidden_size
        notes.append(f"bitsandbytes {args.quant_bits}-bit: {per_weight:.3f} bytes per linear weight")
    total = (linear * per_weight + rest * a) / tp + towers * a
    if tp > 1:
        notes.append(f"tensor parallel {tp}: the language model's weights split {tp} ways; vision/audio towers whole")
    return math.ceil(total)


def _adapters(spec: ModelSpec, args: DeployArgs, a: int, tp: int, notes: list[str]) -> int:
    """LoRA served unmerged: vLLM and SGLang pre-allocate A and B of ``max_lora_rank`` for every
    linear of every layer, per adapter slot (vLLM's ``max_loras``: ms-swift's VllmEngine serves one
    adapter, ``max_loras=1``); merged (``--merge_lora true``: ms-swift merges on the CPU before it
    starts the engine) they cost nothing."""
    if not args.adapters:
        return 0
    if args.merge_lora:
        notes.append("adapters merged into the weights (--merge_lora true): no adapter memory")
        return 0
    h, d, width = spec.hidden_size, spec.head_dim, spec.intermediate_size
    if spec.is_moe:
        width = spec.moe_intermediate_size * spec.num_experts + spec.shared_expert_intermediate_size
    attention = (h + spec.num_heads * d) * 2 + (h + spec.num_kv_heads * d) * 2
    per_layer = attention + 3 * (h + width)
    rank = args.vllm_max_lora_rank
    slots = 1 if args.infer_backend == "vllm" else len(args.adapters)
    notes.append(
        f"{slots} LoRA adapter(s) unmerged at rank {rank} (--vllm_max_lora_rank; an adapter of a higher "
        "rank is refused at load): A and B buffers for every linear of every layer"
    )
    return math.ceil(slots * rank * per_layer * spec.num_layers * a / tp)


def _activations(spec: ModelSpec, tokens: int, seqs: int, a: int, tp: int) -> int:
    """The profile run's peak: one layer's working set for ``tokens`` tokens (qkv, attention
    output, the MLP's gate-up and down, residuals) and the sampler's float32 logits and
    probabilities of ``seqs`` sequences."""
    h, d = spec.hidden_size, spec.head_dim
    width = spec.intermediate_size
    if spec.is_moe:
        width = spec.num_experts_per_tok * spec.moe_intermediate_size + spec.shared_expert_intermediate_size
    qkv = (spec.num_heads + 2 * spec.num_kv_heads) * d
    per_token = a * (4 * h + (qkv + 3 * width) / tp)
    return math.ceil(tokens * per_token + seqs * spec.vocab_size * 4 * 2)


def _vllm(spec, args, gpus, tp, gpu_memory, max_len, a, layout: KvLayout, weights, adapters, reserve, notes):
    util = args.vllm_gpu_memory_utilization
    budget = int(util * gpu_memory)
    seqs = args.vllm_max_num_seqs
    tokens = VLLM_BATCHED_TOKENS
    activations = _activations(spec, tokens, seqs, a, tp)
    graphs = 0 if args.vllm_enforce_eager else CUDA_GRAPHS
    kv = budget - weights - adapters - activations - graphs - reserve
    cache = vllm_cache(layout, max(kv, 0), max_len, tokens)
    concurrency = min(int(cache.max_concurrency), seqs)
    notes += [
        f"vLLM: gpu_memory_utilization {util:g} x {gpu_memory / GIB:g} GiB = {budget / GIB:.2f} GiB per GPU; the "
        "KV cache gets what is left after weights, adapters, the profile run's peak activations, CUDA graphs and "
        "non-torch memory",
        f"profile run at max_num_batched_tokens {tokens} (vLLM's server default on a 70+ GiB GPU) and "
        f"max_num_seqs {seqs}",
        f"KV cache: {cache.num_blocks} blocks of {VLLM_BLOCK_SIZE} tokens = {cache.tokens} tokens; "
        f"{cache.max_concurrency:.2f} sequences of {max_len} tokens (vLLM's 'Maximum concurrency'), "
        f"at most max_num_seqs {seqs} at once",
    ]
    refusal = None
    if kv <= 0:
        refusal = (
            f"no memory left for the KV cache: {budget / GIB:.2f} GiB (gpu_memory_utilization {util:g}) is "
            f"less than the weights and activations ({(budget - kv) / GIB:.2f} GiB); raise "
            "--vllm_gpu_memory_utilization, quantize, or use more GPUs"
        )
    elif cache.max_concurrency < 1:
        need = cache.blocks_per_request * layout.layer_bytes_per_token * VLLM_BLOCK_SIZE
        refusal = (
            f"one sequence of {max_len} tokens needs more KV cache than the {kv / GIB:.2f} GiB left; vLLM refuses "
            f"to start: lower --vllm_max_model_len or raise --vllm_gpu_memory_utilization (about {need / GIB:.2f} GiB "
            "per sequence before grouping)"
        )
    breakdown = _breakdown(weights, adapters, max(kv, 0), activations, graphs, reserve)
    return ServeEstimate(
        peak_bytes_per_gpu=max(budget, sum(breakdown.values())),
        breakdown=breakdown,
        kv_cache_bytes_per_token=layout.bytes_per_token,
        max_model_len=max_len,
        max_concurrent_sequences=concurrency,
        kv_cache_tokens=cache.tokens,
        kv_cache_blocks=cache.num_blocks,
        backend="vllm",
        gpus=gpus,
        tensor_parallel=tp,
        gpu_memory=gpu_memory,
        model=spec,
        args=args,
        refusal=refusal,
        assumptions=notes,
    )


def _sglang(spec, args, gpus, tp, gpu_memory, max_len, a, layout: KvLayout, weights, adapters, reserve, notes):
    fraction = args.sglang_mem_fraction_static
    if fraction is None:
        fraction = SGLANG_DEFAULT_FRACTION
        notes.append(f"--sglang_mem_fraction_static unset: SGLang picks its own; assumed {fraction:g}")
    static = int(fraction * gpu_memory)
    kv = static - weights - adapters - reserve
    tokens = sglang_tokens(layout, max(kv, 0))
    chunk = 8192
    activations = _activations(spec, chunk, 1, a, tp)
    graphs = 0 if args.sglang_disable_cuda_graph else CUDA_GRAPHS
    concurrency = tokens // max_len
    notes += [
        f"SGLang: mem_fraction_static {fraction:g} x {gpu_memory / GIB:g} GiB = {static / GIB:.2f} GiB for weights "
        f"and the KV pool; {tokens} KV tokens (max_total_num_tokens), {concurrency} sequences of {max_len}",
        f"activations of a {chunk}-token prefill chunk and CUDA graphs use the other {1 - fraction:.0%}",
    ]
    refusal = None
    if kv <= 0:
        refusal = (
            f"mem_fraction_static {fraction:g} leaves no memory for the KV pool after the weights "
            f"({weights / GIB:.2f} GiB): raise --sglang_mem_fraction_static or quantize"
        )
    breakdown = _breakdown(weights, adapters, max(kv, 0), activations, graphs, reserve)
    return ServeEstimate(
        peak_bytes_per_gpu=sum(breakdown.values()),
        breakdown=breakdown,
        kv_cache_bytes_per_token=layout.bytes_per_token,
        max_model_len=max_len,
        max_concurrent_sequences=concurrency,
        kv_cache_tokens=tokens,
        kv_cache_blocks=None,
        backend="sglang",
        gpus=gpus,
        tensor_parallel=tp,
        gpu_memory=gpu_memory,
        model=spec,
        args=args,
        refusal=refusal,
        assumptions=notes,
    )


def _transformers(spec, args, gpus, tp, gpu_memory, max_len, a, layout: KvLayout, weights, adapters, reserve, notes):
    batch = args.max_batch_size
    # the dynamic cache grows with the sequences; a sliding layer's cache is as long as the sequence
    # in transformers' DynamicCache unless the model uses a sliding cache, so every layer counts whole
    kv = layout.layer_bytes_per_token * (layout.full_layers + layout.sliding_layers) * batch * max_len
    activations = _activations(spec, batch * max_len, batch, a, 1)
    notes.append(
        f"transformers: no KV pre-allocation; the cache grows to --max_batch_size {batch} x {max_len} tokens; "
        "runs on CPU when no GPU is given"
    )
    breakdown = _breakdown(weights, adapters, kv, activations, 0, reserve)
    return ServeEstimate(
        peak_bytes_per_gpu=sum(breakdown.values()),
        breakdown=breakdown,
        kv_cache_bytes_per_token=layout.bytes_per_token,
        max_model_len=max_len,
        max_concurrent_sequences=batch,
        kv_cache_tokens=batch * max_len,
        kv_cache_blocks=None,
        backend="transformers",
        gpus=gpus,
        tensor_parallel=1,
        gpu_memory=gpu_memory,
        model=spec,
        args=args,
        assumptions=notes,
    )


def _breakdown(weights, adapters, kv, activations, graphs, reserve) -> dict:
    values = (weights, adapters, kv, activations, graphs, reserve)
    return {key: int(v) for key, v in zip(SERVE_KEYS, values, strict=True)}
