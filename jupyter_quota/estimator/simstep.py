"""A simulated training step: the real model code run on fake tensors, its memory counted.

The estimator's formulas (``memory.py``) predict what a ``swift sft`` step keeps alive; this module
runs such a step instead, with no GPU and no weights: the transformers model built from the
architecture's ``config.json`` facts, under PyTorch's ``FakeTensorMode`` (every tensor has its
shape, dtype and device, no data), trained as ms-swift's trainer does by default: the model in its
dtype (bfloat16), the forward pass under ``torch.autocast`` (the HF Trainer's ``bf16`` mixed
precision through accelerate), PEFT LoRA (rank 8, alpha 32, dropout 0.05, all linear layers but
the output: ms-swift's defaults, adapters in float32 as PEFT creates them), gradient checkpointing
(transformers' own, non-reentrant), the attention implementation asked for, the loss of
``ForCausalLM`` on every token, and torch's AdamW as the trainer's default optimizer creates it.
Two steps run: the first creates the optimizer states, the second is measured.

A ``TorchDispatchMode`` (the method of ``torch.distributed._tools.mem_tracker.MemTracker``, whose
module hooks cannot follow PEFT's frozen parameters) sees every tensor storage each operator
creates and, through a weak reference, when it is freed. It keeps the order of those events (the
allocation trace, replayed through ``allocator.CachingAllocator``) and the live storages at the
peak, filed by category: parameters (and buffers), gradients, optimizer states, activations (made
in the forward pass and still alive) and temporaries (made in the backward pass or the optimizer
step, gradients excepted).

What it does not run: bitsandbytes' 4- and 8-bit layers (their kernels need CUDA; a QLoRA step is
refused), liger's Triton kernels (refused), DeepSpeed and DDP (one device only), MoE layers whose
routing depends on data (fake tensors have none: refused with the error). Tensors are fake tensors
on the CPU device: the kernels PyTorch picks on CPU for sdpa (its flash kernel, which keeps the
logsumexp as the CUDA ones do) and for the optimizer (``foreach``) are assumed to allocate what the
CUDA ones allocate; workspaces inside kernels (cuBLAS) are not tensors and are not seen.

torch is imported lazily: importing this module costs nothing; ``simulate`` needs torch,
transformers and peft (ms-swift's own requirements).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from .allocator import replay

CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "temporaries")


@dataclass(frozen=True)
class Regime:
    """What one simulated step trains and how: the argv facts that change its memory."""

    tuner: str = "full"  # full | lora
    tokens: int = 512  # per sample
    batch: int = 1
    grad_ckpt: bool = True
    attn: str = "sdpa"  # sdpa | eager
    lora_rank: int = 8

    @property
    def key(self) -> str:
        ckpt = "ckpt" if self.grad_ckpt else "nockpt"
        rank = f"/r{self.lora_rank}" if self.tuner == "lora" else ""
        return f"{self.tuner}{rank}/{ckpt}/{self.attn}/b{self.batch}/t{self.tokens}"

    def argv(self) -> list[str]:
        """The ``swift sft`` arguments of this regime (the model excepted)."""
        argv = ["--tuner_type", self.tuner, "--max_length", str(self.tokens)]
        argv += ["--per_device_train_batch_size", str(self.batch), "--attn_impl", self.attn]
        argv += ["--gradient_checkpointing", "true" if self.grad_ckpt else "false"]
        if self.tuner == "lora":
            argv += ["--lora_rank", str(self.lora_rank)]
        return argv


@dataclass
class SimResult:
    """One simulated step: the peak of live tensor bytes, its parts, and the allocator's replay."""

    peak_bytes: int
    breakdown: dict  # category -> live bytes at the peak
    peak_phase: str  # forward | backward | optimizer
    allocator: dict  # allocator.CachingAllocator.stats() over both steps
    events: int
    seconds: float
    versions: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


class UnsupportedStep(Exception):
    """The step cannot be simulated on fake tensors (the reason says why)."""


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for name in ("torch", "transformers", "peft"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _tracker_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class StorageTrace(TorchDispatchMode):
        """Every storage an operator creates: an ordered alloc/free trace, and the live set at the peak."""

        def __init__(self):
            super().__init__()
            self.phase = "setup"
            self.live: dict[int, tuple[int, str]] = {}  # key -> (nbytes, phase)
            self.refs: dict[int, object] = {}  # key -> weakref of the storage
            self.key_of: dict[int, int] = {}  # id(storage) -> key
            self.events: list[tuple[str, int, int]] = []
            self.current = 0
            self.peak = 0
            self.peak_live: dict[int, tuple[int, str]] = {}
            self.peak_phase = ""
            self.measuring = False
            self._next = 0

        def track(self, tensor) -> None:
            if not isinstance(tensor, torch.Tensor):
                return
            storage = tensor.untyped_storage()
            sid = id(storage)
            if sid in self.key_of:
                return
            nbytes = storage.nbytes()
            if nbytes == 0:
                return
            key = self._next
            self._next += 1
            import weakref

            def freed(_ref, key=key, sid=sid):
                entry = self.live.pop(key, None)
                if entry is not None:
                    self.current -= entry[0]
                    self.events.append(("f", key, entry[0]))
                self.key_of.pop(sid, None)
                self.refs.pop(key, None)

            self.refs[key] = weakref.ref(storage, freed)
            self.key_of[sid] = key
            self.live[key] = (nbytes, self.phase)
            self.events.append(("a", key, nbytes))
            self.current += nbytes
            if self.measuring and self.current > self.peak:
                self.peak = self.current
                self.peak_live = dict(self.live)
                self.peak_phase = self.phase

        def key(self, tensor) -> int | None:
            return self.key_of.get(id(tensor.untyped_storage()))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in tree_flatten(out)[0]:
                self.track(tensor)
            return out

    return StorageTrace


def simulate(facts: dict, regime: Regime, *, steps: int = 2) -> SimResult:
    """Run ``steps`` training steps of the model of ``facts`` (a ``config.json`` dict) on fake tensors."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoConfig, AutoModelForCausalLM

    started = time.time()
    facts = dict(facts)
    model_type = facts.pop("model_type", None)
    if not model_type:
        raise UnsupportedStep("config facts have no model_type")
    for drop in ("architectures", "auto_map", "quantization_config"):
        facts.pop(drop, None)
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[
        str(facts.pop("torch_dtype", facts.pop("dtype", "bfloat16")) or "bfloat16")
    ]
    try:
        config = AutoConfig.for_model(model_type, **facts)
    except (ValueError, KeyError) as exc:
        raise UnsupportedStep(f"transformers has no config class for model_type {model_type!r}: {exc}") from exc
    config.use_cache = False
    tracker = _tracker_class()()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with fake, tracker:
            tracker.phase = "setup"
            try:
                model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype, attn_implementation=regime.attn)
            except ValueError as exc:
                raise UnsupportedStep(f"no causal-LM class for {model_type!r}: {exc}") from exc
            for t in list(model.parameters()) + list(model.buffers()):
                tracker.track(t)
            if regime.tuner == "lora":
                from peft import LoraConfig, get_peft_model

                model = get_peft_model(
                    model,
                    LoraConfig(r=regime.lora_rank, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear"),
                )
                for t in model.parameters():
                    tracker.track(t)
            elif regime.tuner != "full":
                raise UnsupportedStep(f"tuner {regime.tuner!r} is not simulated (full, lora)")
            if regime.grad_ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                if regime.tuner == "lora":
                    model.enable_input_require_grads()
            model.train()
            trained = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(trained, lr=1e-4, weight_decay=0.0)
            ids = torch.randint(0, config.vocab_size, (regime.batch, regime.tokens))
            tracker.track(ids)
            grad_keys: set = set()
            for step in range(steps):
                tracker.measuring = step == steps - 1
                tracker.phase = "forward"
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype != torch.float32):
                    loss = model(input_ids=ids, labels=ids).loss
                tracker.phase = "backward"
                loss.backward()
                del loss
                grad_keys = {tracker.key(p.grad) for p in trained if p.grad is not None}
                tracker.phase = "optimizer"
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            param_keys = {tracker.key(t) for t in list(model.parameters()) + list(model.buffers())}
            opt_keys = {
                tracker.key(t) for state in optimizer.state.values() for t in state.values() if isinstance(t, torch.Tensor)
            }
    except UnsupportedStep:
        raise
    except Exception as exc:  # data-dependent shapes (MoE routing), kernels fake tensors cannot run
        raise UnsupportedStep(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from exc
    breakdown = dict.fromkeys(CATEGORIES, 0)
    for key, (nbytes, phase) in tracker.peak_live.items():
        if key in param_keys:
            cat = "parameters"
        elif key in grad_keys:
            cat = "gradients"
        elif key in opt_keys:
            cat = "optimizer"
        elif phase == "forward":
            cat = "activations"
        else:
            cat = "temporaries"
        breakdown[cat] += nbytes
    alloc = replay(tracker.events)
    return SimResult(
        peak_bytes=tracker.peak,
        breakdown=breakdown,
        peak_phase=tracker.peak_phase,
        allocator=alloc.stats(),
        events=len(tracker.events),
        seconds=round(time.time() - started, 1),
        versions=versions(),
    )
