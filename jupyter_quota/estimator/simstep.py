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
ms-swift accumulates gradients by default (16 / batch / GPUs micro-batches per step), so the
gradients of a step's earlier micro-batches are alive through its later ones: ``Regime.accumulate``.
With ``steps=2`` a whole step runs (it creates the optimizer states), then the next step's last
micro-batches; all of it is measured, and the trace the allocator replays covers it all, as a real
run's first steps. ``steps=1`` creates the states (and the accumulated gradients) from zeros and
measures one micro-batch and the update: a third of the time, the same live-tensor peak.

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

import contextlib
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
    targets: tuple = ("all-linear",)
    #: gradient accumulation (ms-swift's default: 16 / batch / GPUs micro-batches per step): the
    #: gradients of the step's earlier micro-batches are alive through the later ones
    accumulate: bool = True

    @property
    def key(self) -> str:
        ckpt = "ckpt" if self.grad_ckpt else "nockpt"
        rank = f"/r{self.lora_rank}" if self.tuner == "lora" else ""
        if self.tuner == "lora" and tuple(self.targets) != ("all-linear",):
            rank += "/" + "+".join(self.targets)
        accumulate = "" if self.accumulate else "/noaccum"
        return f"{self.tuner}{rank}/{ckpt}/{self.attn}/b{self.batch}/t{self.tokens}{accumulate}"

    def argv(self) -> list[str]:
        """The ``swift sft`` arguments of this regime (the model excepted)."""
        argv = ["--tuner_type", self.tuner, "--max_length", str(self.tokens)]
        argv += ["--per_device_train_batch_size", str(self.batch), "--attn_impl", self.attn]
        argv += ["--gradient_checkpointing", "true" if self.grad_ckpt else "false"]
        if self.tuner == "lora":
            argv += ["--lora_rank", str(self.lora_rank), "--target_modules", *self.targets]
        if not self.accumulate:
            argv += ["--gradient_accumulation_steps", "1"]
        return [*argv, "--optim", "adamw_torch_fused"]  # the optimizer the step runs (``simulate``)


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


def versions(names: tuple[str, ...] = ("torch", "transformers", "peft")) -> dict:
    """The installed version of each package in ``names`` (None where it is missing)."""
    import importlib.metadata as md

    out = {}
    for name in names:
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

        def restart(self) -> None:
            """Forget the trace so far: the live storages become its first allocations."""
            self.events = [("a", key, nbytes) for key, (nbytes, _phase) in sorted(self.live.items())]

        def key(self, tensor) -> int | None:
            return self.key_of.get(id(tensor.untyped_storage()))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in tree_flatten(out)[0]:
                self.track(tensor)
            return out

    return StorageTrace


@contextlib.contextmanager
def _moves_in_place():
    """``Module.to`` that changes nothing returns the module, as it does on real tensors.

    On fake tensors ``Module._apply`` always swaps each parameter for its converted copy, and the
    swap fails for a parameter that a weak reference watches; PEFT and transformers call ``.to``
    with the device and dtype the module has already.
    """
    import torch

    original = torch.nn.Module.to

    def to(self, *args, **kwargs):
        device, dtype, _non_blocking, _fmt = torch._C._nn._parse_to(*args, **kwargs)
        tensors = list(self.parameters()) + list(self.buffers())
        if all(
            (device is None or t.device.type == torch.device(device).type)
            and (dtype is None or t.dtype == dtype or not t.is_floating_point())
            for t in tensors
        ):
            return self
        return original(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = original


def all_linear_targets(model) -> list[str]:
    """The leaf names ms-swift gives PEFT for ``--target_modules all-linear``: every module whose
    class name holds "linear", lm_head and classifier heads left out (``find_all_linears`` in
    swift/utils/transformers_utils.py; tests/test_estimator_moe_lora.py compares the two). PEFT's own
    "all-linear" string differs on transformers 5's MoE models: it adds the stacked experts."""
    skip = ("lm_head", "score", "v_head", "classifier", "lora_A", "lora_B", "base_layer")
    names = {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if "linear" in type(module).__name__.lower() and name and not any(part in name for part in skip)
    }
    return sorted(names)


def simulate(facts: dict, regime: Regime, *, steps: int = 2, capacity: int | None = None) -> SimResult:
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
        raise UnsupportedStep(f"transformers has no config class for model_type {model_type!r}") from exc
    config.use_cache = False
    tracker = _tracker_class()()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    fake.cache_enabled = False  # each op of a step is new to the cache: hashing its key costs more than it saves
    try:
        with fake, tracker, _moves_in_place():
            tracker.phase = "setup"
            try:
                model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=regime.attn)
            except ValueError as exc:
                raise UnsupportedStep(f"transformers has no causal-LM class for {model_type!r}") from exc
            for t in list(model.parameters()) + list(model.buffers()):
                tracker.track(t)
            if regime.tuner == "lora":
                from peft import LoraConfig, get_peft_model
                from peft.tuners.tuners_utils import BaseTunerLayer

                # PEFT moves each new adapter to the base layer's device and dtype (bfloat16), then
                # upcasts it to float32; on fake tensors the move must swap tensors, which fails. The
                # adapters are made on the same (fake CPU) device in float32 already: the same result.
                move = BaseTunerLayer._move_adapter_to_device_of_base_layer
                BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
                try:
                    targets = list(regime.targets)
                    if targets == ["all-linear"]:
                        targets = all_linear_targets(model)
                    model = get_peft_model(
                        model, LoraConfig(r=regime.lora_rank, lora_alpha=32, lora_dropout=0.05, target_modules=targets)
                    )
                finally:
                    BaseTunerLayer._move_adapter_to_device_of_base_layer = move
                for t in model.parameters():
                    tracker.track(t)
            elif regime.tuner != "full":
                raise UnsupportedStep(f"tuner {regime.tuner!r} is not simulated (full, lora)")
            if regime.grad_ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                if regime.tuner == "lora":
                    model.enable_input_require_grads()
            model.train()
            # the trace starts with the model as loaded: each parameter and buffer allocated once, in
            # its final dtype (from_pretrained loads weights that way; building from the config on fake
            # tensors made and freed float32 copies a real load never puts on the GPU)
            tracker.restart()
            trained = [p for p in model.parameters() if p.requires_grad]
            # the HF Trainer's default optimizer with torch >= 2.8 (transformers 5: adamw_torch_fused)
            optimizer = torch.optim.AdamW(trained, lr=1e-4, weight_decay=0.0, fused=True)
            ids = torch.randint(0, config.vocab_size, (regime.batch, regime.tokens))
            tracker.track(ids)
            grad_keys: set = set()

            def micro_batch(update: bool) -> None:
                tracker.phase = "forward"
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype != torch.float32):
                    loss = model(input_ids=ids, labels=ids).loss
                tracker.phase = "backward"
                loss.backward()
                del loss
                grad_keys.update(tracker.key(p.grad) for p in trained if p.grad is not None)
                if update:
                    tracker.phase = "optimizer"
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

            if steps < 2:
                # the optimizer states as the first step creates them, without running that step; under
                # gradient accumulation the gradients of the step's earlier micro-batches stay alive
                for p in trained:
                    p.grad = torch.zeros_like(p)
                grad_keys.update(tracker.key(p.grad) for p in trained)
                optimizer.step()
                if not regime.accumulate:
                    optimizer.zero_grad(set_to_none=True)
                tracker.restart()
                tracker.measuring = True
                micro_batch(update=True)
            else:
                # a whole first step (it creates the optimizer states), then the second step's last two
                # micro-batches when gradients accumulate, else the second step: all of it measured, as
                # a real run's peak is the highest of its first steps
                tracker.measuring = True
                micro_batch(update=True)
                if regime.accumulate:
                    micro_batch(update=False)
                micro_batch(update=True)
            param_keys = {tracker.key(t) for t in list(model.parameters()) + list(model.buffers())}
            opt_keys = {
                tracker.key(t)
                for state in optimizer.state.values()
                for t in state.values()
                if isinstance(t, torch.Tensor)
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
    alloc = replay(tracker.events, capacity)
    return SimResult(
        peak_bytes=tracker.peak,
        breakdown=breakdown,
        peak_phase=tracker.peak_phase,
        allocator=alloc.stats(),
        events=len(tracker.events),
        seconds=round(time.time() - started, 1),
        versions=versions(),
    )


def with_layers(facts: dict, layers: int) -> dict:
    """The same ``config.json`` facts with ``layers`` decoder layers (per-layer lists cut to match)."""
    facts = dict(facts)
    total = facts.get("num_hidden_layers")
    if not isinstance(total, int) or total <= layers:
        return facts
    facts["num_hidden_layers"] = layers
    for key, value in list(facts.items()):
        if isinstance(value, list) and len(value) == total:
            facts[key] = value[:layers]
    if isinstance(facts.get("first_k_dense_replace"), int):
        facts["first_k_dense_replace"] = min(facts["first_k_dense_replace"], layers - 1)
    return facts


def extrapolate(small: dict, large: dict, small_layers: int, large_layers: int, layers: int) -> dict:
    """A result at ``layers`` layers from two results (``SimResult.to_json``) at fewer, linearly.

    Exact for every byte count that is a sum over layers plus a constant: parameters, gradients,
    optimizer states, the checkpointed layer inputs, all layers' activations without checkpointing,
    and so the peak of live tensors when it falls at the same point of the step in both (the
    ``peak_phase`` says where). The allocator's reserved peak is not such a sum; extrapolated the
    same way it is an approximation.
    """

    def line(a, b):
        if isinstance(a, dict):
            return {k: line(a[k], b[k]) for k in a}
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return round(a + (b - a) * (layers - small_layers) / (large_layers - small_layers))
        return b

    out = line(small, large)
    out["peak_phase"] = large["peak_phase"] if small["peak_phase"] == large["peak_phase"] else "mixed"
    out["seconds"] = small["seconds"] + large["seconds"]
    out["layers"] = layers
    out["extrapolatedFrom"] = [small_layers, large_layers]
    return out


def simulate_scaled(
    facts: dict, regime: Regime, *, steps: int = 2, layers: tuple | None = (2, 3), capacity: int | None = None
) -> dict:
    """``simulate`` of a deep model from two shallow copies of it (``extrapolate``); a JSON result.
    ``layers=None``: the whole depth, once (the allocator's replay then needs no extrapolation)."""
    total = facts.get("num_hidden_layers")
    if layers is None or not isinstance(total, int) or total <= layers[1]:
        return simulate(facts, regime, steps=steps, capacity=capacity).to_json()
    small = simulate(with_layers(facts, layers[0]), regime, steps=steps).to_json()
    large = simulate(with_layers(facts, layers[1]), regime, steps=steps).to_json()
    return extrapolate(small, large, layers[0], layers[1], total)
