"""The run an estimate is for: the model, the arguments, and what they decide once for every term.

The dtype, the tokens per sample and the trained parameters (docs/estimator.md §2), each with the
assumption it makes appended to ``notes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..swift import SftArgs
from .features import eval_tokens, extra_value, image_patches, sequence_parallel_degrees
from .fsdp import Fsdp, fsdp_of
from .galore import Galore, galore_of
from .lisa import frozen_params, lisa_layers
from .lora import adapter_params, lora_roles
from .model import ModelSpec

#: tokens per sample when --max_length is not given (docs/estimator.md §2.1)
DEFAULT_TOKENS = 2048

#: tuners that train every parameter, estimated as a full fine-tune (docs/estimator.md §2.2)
_FULL_TYPES = {"full", "lisa", "galore", "q-galore"}
#: PEFT tuners estimated as LoRA without a note
_LORA_TYPES = ("lora", "longlora", "adalora", "dora")


@dataclass(frozen=True)
class Run:
    """What every term reads: the model, the arguments, and the facts derived from them once."""

    spec: ModelSpec
    args: SftArgs
    gpus: int
    cuda: bool
    dtype_bytes: int  # bytes per element of the model's dtype: 2 (bfloat16, float16) or 4 (float32)
    seq_len: int  # tokens per sample on one device, after sequence parallelism splits it
    tuner: str
    full: bool  # every parameter is trained
    quant_bits: (
        int | None
    )  # bitsandbytes 4 or 8, or a pre-quantized checkpoint's; None unquantized (a full fine-tune drops it)
    train_vit: bool
    lora_roles: frozenset[str]  # the linears LoRA wraps (empty for a full fine-tune)
    lora_params: int  # adapter parameters, kept in float32
    saved_params: int  # modules_to_save: trainable copies of the embeddings or lm_head
    new_block_params: int  # LLaMA Pro's added decoder blocks, trained in full
    trainable: int  # every trained parameter
    zero_stage: int  # DeepSpeed ZeRO stage, 0 without DeepSpeed
    offload: bool  # DeepSpeed CPU offload
    train_llm: bool = True  # --freeze_llm false (ms-swift's default)
    ulysses: int = 1  # Ulysses degree of --sequence_parallel_size (splits attention heads)
    ring: int = 1  # ring-attention degree: what the heads cannot split
    fixed_shapes: bool = False  # --packing: every micro-batch has the same shape
    eval_tokens: int = 0  # tokens of one eval micro-batch on one device; 0 without an eval phase
    image_patches: int = 0  # vision-tower patches per sample (one image)
    fsdp: Fsdp | None = None  # --fsdp's settings (docs/estimator.md §4.6); None without it or with DeepSpeed
    galore: Galore | None = None  # --use_galore's projected optimizer states (docs/estimator.md §4.7)
    lisa_layers: int = 0  # --lisa_activated_layers: decoder layers trained at a time (docs/estimator.md §4.8)

    @property
    def batch(self) -> int:
        return self.args.per_device_train_batch_size

    @property
    def gradient_params(self) -> int:
        """Trained parameters that hold a gradient at once: all of them, but under LISA only the
        active layers and what is never frozen."""
        return self.trainable - frozen_params(self.spec, self.lisa_layers)

    @property
    def hqq(self) -> bool:
        """Quantized on load by HQQ (--quant_method hqq), not bitsandbytes (docs/estimator.md §3)."""
        return bool(self.quant_bits) and (self.args.quant_method or "").lower() == "hqq"

    @property
    def tokens(self) -> int:
        """Tokens in one micro-batch on one device."""
        return self.batch * self.seq_len

    @property
    def shards(self) -> int:
        """How many ways ZeRO splits what it partitions."""
        return max(1, self.gpus)

    @property
    def mlp_width(self) -> int:
        """The MLP width one token passes through: dense, or its top-k experts plus the shared one."""
        spec = self.spec
        if not spec.is_moe:
            return spec.intermediate_size
        return spec.moe_intermediate_size * max(1, spec.num_experts_per_tok) + spec.shared_expert_intermediate_size


def describe_run(spec: ModelSpec, args: SftArgs, gpus: int, device: str, notes: list[str]) -> Run:
    """The dtype, tokens and trained parameters of the run (docs/estimator.md §2)."""
    dtype = args.torch_dtype or spec.torch_dtype
    if args.torch_dtype is None:
        notes.append(f"torch_dtype from the model's config: {dtype}")
    seq_len = _tokens_per_sample(spec, args, notes)
    tuner = (args.tuner_type or "lora").lower()
    full = tuner in _FULL_TYPES
    quant_bits = args.quantized_bits or spec.quant_bits or None  # bnb, else a pre-quantized checkpoint
    if quant_bits and full:
        notes.append("a quantized model cannot be fully fine-tuned; estimated without quantization")
        quant_bits = None
    train_vit = not args.freeze_vit and spec.tower_params > 0
    train_llm = not (args.freeze_llm and spec.tower_params > 0)  # ms-swift: for multimodal models only
    trained = _trained_parameters(spec, args, tuner, full, train_vit, train_llm, dtype, notes)
    stage, offload = args.deepspeed_stage
    fsdp = None if stage or args.deepspeed else fsdp_of(args)
    if fsdp and fsdp.activation_checkpointing and not args.gradient_checkpointing:
        # ms-swift keeps FSDP's own checkpointing of every decoder layer: the activations are checkpointed
        notes.append("--fsdp's fsdp_config sets activation_checkpointing: every decoder layer is checkpointed")
        args = args.replace(gradient_checkpointing=True)
    ulysses, ring = sequence_parallel_degrees(spec, args, gpus, notes)
    galore = galore_of(spec, args, full, bool(stage) or fsdp is not None, notes)
    lisa = lisa_layers(spec, args, full, bool(stage) or fsdp is not None, notes)
    return Run(
        spec=spec,
        args=args,
        gpus=gpus,
        cuda=device != "cpu",
        dtype_bytes=4 if dtype == "float32" else 2,
        seq_len=seq_len,
        tuner=tuner,
        full=full,
        quant_bits=quant_bits,
        train_vit=train_vit,
        zero_stage=stage,
        offload=offload,
        fsdp=fsdp,
        galore=galore,
        lisa_layers=lisa,
        train_llm=train_llm,
        ulysses=ulysses,
        ring=ring,
        fixed_shapes=bool(args.packing),
        eval_tokens=eval_tokens(args, seq_len, notes),
        image_patches=image_patches(spec, args, seq_len * max(1, args.sequence_parallel_size), notes)
        if spec.vision_params
        else 0,
        **trained._asdict(),
    )


def _tokens_per_sample(spec: ModelSpec, args: SftArgs, notes: list[str]) -> int:
    """Tokens of one sample on one device: --max_length (or DEFAULT_TOKENS), split by sequence
    parallelism (docs/estimator.md §2.1)."""
    max_length = args.max_length
    if max_length is None:
        max_length = DEFAULT_TOKENS
        notes.append(
            f"--max_length not given: ms-swift truncates at the model's maximum "
            f"({spec.max_position_embeddings}); estimated for {DEFAULT_TOKENS}-token "
            "samples (memory follows the longest sample; pass --max_length to bound it)"
        )
    packing_length = extra_value(args, "packing_length") if args.packing else None
    if packing_length and packing_length.isdigit() and int(packing_length) > 0:
        max_length = int(packing_length)  # packed rows are --packing_length long (default: max_length)
    seq_len = max(1, math.ceil(max_length / max(1, args.sequence_parallel_size)))
    batch = args.per_device_train_batch_size
    if args.packing:
        notes.append(f"packing: every micro-batch is {batch} x {seq_len} tokens")
    elif args.padding_free:
        notes.append(f"padding_free: at most {batch * seq_len} real tokens per micro-batch (upper bound)")
    else:
        notes.append(f"{batch} sample(s) x {seq_len} tokens per micro-batch (padded to the longest)")
    return seq_len


class Trained(NamedTuple):
    """The trained parameters, by kind (a full fine-tune has only ``trainable``)."""

    lora_roles: frozenset[str]
    lora_params: int
    saved_params: int
    new_block_params: int
    trainable: int


def _trained_parameters(
    spec: ModelSpec,
    args: SftArgs,
    tuner: str,
    full: bool,
    train_vit: bool,
    train_llm: bool,
    dtype: str,
    notes: list[str],
) -> Trained:
    """What the tuner trains: every parameter, or LoRA adapters, trainable copies of embeddings or
    lm_head (modules_to_save) and LLaMA Pro's new blocks; --freeze_vit / --freeze_llm choose the
    towers (docs/estimator.md §2.2, §2.3)."""
    if spec.tower_params:
        notes.append(
            f"multimodal: language model {'trained' if train_llm else 'frozen (--freeze_llm true)'}, "
            f"vision tower {'trained (--freeze_vit false)' if train_vit else 'frozen (--freeze_vit, default true)'}"
        )
    if full:
        trainable = (spec.llm_params if train_llm else 0) + (spec.tower_params if train_vit else 0)
        if tuner != "full":
            notes.append(f"tuner_type {tuner}: estimated as a full fine-tune (upper bound)")
        notes.append(
            f"full fine-tune: {trainable / 1e9:.2f}B trainable parameters in {dtype}, "
            "AdamW states in the parameter dtype (no fp32 master copy, as in HF Trainer)"
        )
        return Trained(frozenset(), 0, 0, 0, trainable)
    roles = lora_roles(args.target_modules, notes)
    lora_params = adapter_params(spec, roles, args.lora_rank) if train_llm else 0
    if train_vit and "all-linear" in args.target_modules:
        # ms-swift's all-linear wraps the vision tower's linears too when it is trained
        # (swift/utils/transformers_utils.py get_multimodal_target_regex): qkv, proj, fc1, fc2
        lora_params += args.lora_rank * spec.vision_layers * (8 * spec.vision_hidden + 2 * spec.vision_intermediate)
    new_block_params = 0
    if tuner == "llamapro":
        new_block_params = args.llamapro_num_new_blocks * spec.layer_params[0]
        notes.append(f"llamapro: {args.llamapro_num_new_blocks} new decoder blocks trained in full")
        lora_params = 0
    elif tuner not in _LORA_TYPES:
        notes.append(f"tuner_type {tuner}: estimated as LoRA of the same rank")
    if spec.converted_experts and lora_params and roles & {"gate", "up", "down"}:
        notes.append(
            "PEFT converts the MLP target names to transformers 5's stacked experts for this model: the "
            "experts get adapters (gate_up_proj at twice the rank), the dense and shared-expert MLPs none"
            + (
                f"; with --lora_dropout {args.lora_dropout:g} the run stops at setup (lora.ParamWrapper does "
                "not work with lora_dropout != 0): pass --lora_dropout 0"
                if args.lora_dropout > 0
                else ""
            )
        )
    saved_params = _saved_module_params(spec, args.modules_to_save)
    if saved_params:
        notes.append(
            f"modules_to_save: {saved_params / 1e6:.0f}M parameters trained in full "
            "(PEFT keeps a trainable copy beside the frozen original)"
        )
    notes.append(
        f"{tuner}: rank {args.lora_rank} on {', '.join(args.target_modules)}: "
        f"{lora_params / 1e6:.1f}M adapter parameters in float32 (PEFT upcasts adapters "
        "of 16-bit models)"
    )
    return Trained(roles, lora_params, saved_params, new_block_params, lora_params + saved_params + new_block_params)


def _saved_module_params(spec: ModelSpec, modules: tuple[str, ...]) -> int:
    """Parameters of the embeddings or lm_head named in --modules_to_save (docs/estimator.md §2.2)."""
    params = 0
    for module in modules:
        low = module.lower()
        if "embed" in low or low == "wte":
            params += spec.embed_params
        elif "lm_head" in low or low == "output":
            params += spec.lm_head_params or spec.embed_params
    return params
