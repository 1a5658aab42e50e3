"""Which linears LoRA wraps, and how many adapter parameters that makes (docs/estimator.md §2.3).

A ``--target_modules`` name selects a role (q, k, v, o, gate, up, down, or a fused qkv / gate-up
linear) under the spellings of HF, Qwen-1, ChatGLM and InternLM2 modelling code. Each wrapped
linear of shape (fan_in, fan_out) gets an adapter of ``rank * (fan_in + fan_out)`` parameters.
"""

from __future__ import annotations

from functools import lru_cache

from .model import ModelSpec

ROLE_NAMES = {
    # role: the module names that select it (HF, Qwen-1, ChatGLM, InternLM2 spellings)
    "q": {"q_proj", "query", "wq"},
    "k": {"k_proj", "key", "wk"},
    "v": {"v_proj", "value", "wv"},
    "qkv": {"c_attn", "query_key_value", "wqkv", "qkv_proj", "qkv"},
    "o": {"o_proj", "c_proj", "dense", "wo", "out_proj"},  # Qwen-1/GPT-2 c_proj: see _roles_of
    "gate": {"gate_proj", "w1", "w3"},
    "up": {"up_proj"},
    "gateup": {"dense_h_to_4h", "gate_up_proj"},
    "down": {"down_proj", "w2", "dense_4h_to_h"},
}
ALL_LINEAR = ("q", "k", "v", "o", "gate", "up", "down")


def lora_roles(targets: tuple[str, ...], notes: list[str]) -> frozenset[str]:
    """The roles ``targets`` select; an unknown name counts as all-linear (an upper bound, noted)."""
    roles, unknown = _lora_roles_cached(tuple(targets))
    for target in unknown:
        notes.append(f"target module {target!r} not recognised: counted as all-linear (upper bound)")
    return roles


@lru_cache(maxsize=256)
def _lora_roles_cached(targets: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    roles: set[str] = set()
    unknown: list[str] = []
    for target in targets:
        low = target.lower()
        if low in ("all-linear", "all", "all_linear"):
            roles.update(ALL_LINEAR)
            continue
        found = _roles_of(low)
        if not found:
            unknown.append(target)
            roles.update(ALL_LINEAR)
        roles.update(found)  # a fused qkv / gate-up linear gets one adapter: counted as such
    return frozenset(roles), tuple(unknown)


def _roles_of(name: str) -> list[str]:
    """Roles a target selects. PEFT matches a name as a suffix of module paths, so ``c_proj`` (Qwen-1,
    GPT-2) selects the attention output and the MLP's down projection; ``attn.c_proj`` only the first."""
    prefix, _, last = name.rpartition(".")
    found = [role for role, names in ROLE_NAMES.items() if last in names]
    if last == "c_proj":
        found = ["o"] if "attn" in prefix else ["down"] if "mlp" in prefix else ["o", "down"]
    return found


# The planner calls ``estimate`` 20-100 times per plan with the same model and targets: the per-layer
# LoRA shapes and counts are cached on the (frozen, hashable) ModelSpec and role set.
@lru_cache(maxsize=256)
def attention_dims(spec: ModelSpec, roles: frozenset[str]) -> tuple[tuple[int, int, int], ...]:
    """(fan_in, fan_out, count) of each LoRA-wrapped attention linear of one layer."""
    hidden = spec.hidden_size
    q_width, kv_width = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    shapes = (
        ("q", hidden, q_width),
        ("k", hidden, kv_width),
        ("v", hidden, kv_width),
        ("qkv", hidden, q_width + 2 * kv_width),
        ("o", q_width, hidden),
    )
    return tuple((fan_in, fan_out, 1) for role, fan_in, fan_out in shapes if role in roles)


@lru_cache(maxsize=512)
def mlp_dims(spec: ModelSpec, roles: frozenset[str], moe: bool) -> tuple[tuple[int, int, int], ...]:
    """(fan_in, fan_out, count) of each LoRA-wrapped MLP linear of one dense (or MoE) layer; an MoE
    layer's experts count ``num_experts`` times, its shared expert once. Experts that transformers 5
    stacks in one parameter (``spec.fused_experts``) are no linears: ms-swift's ``find_all_linears``
    (a class name with "linear" in it) and PEFT wrap only the shared expert's, unless PEFT converts
    the MLP names to the stacked experts (``spec.converted_experts``, ``_converted_dims``)."""
    hidden = spec.hidden_size
    if moe and _converted(spec, roles):
        return _converted_dims(spec, roles)
    widths = [(spec.intermediate_size, 1)]
    if moe:
        widths = [] if spec.fused_experts else [(spec.moe_intermediate_size, spec.num_experts)]
        if spec.shared_expert_intermediate_size:
            widths.append((spec.shared_expert_intermediate_size, 1))
    dims = []
    for width, count in widths:
        for role, fan_in, fan_out in (
            ("gate", hidden, width),
            ("up", hidden, width),
            ("gateup", hidden, 2 * width),
            ("down", width, hidden),
        ):
            if role in roles:
                dims.append((fan_in, fan_out, count))
    return tuple(dims)


def _converted(spec: ModelSpec, roles: frozenset[str]) -> bool:
    return spec.converted_experts and bool(roles & {"gate", "up", "down"})


def _converted_dims(spec: ModelSpec, roles: frozenset[str]) -> tuple[tuple[int, int, int], ...]:
    """PEFT's conversion of the MLP names to the stacked experts (``spec.converted_experts``): one
    ``ParamWrapper`` adapter per expert on ``down_proj`` (E x h x I) and one at twice the rank on
    ``gate_up_proj`` (E x 2I x h, rank_pattern 2r: counted as 2E adapters of rank r); the dense and
    shared-expert linears of those names keep none."""
    hidden, width, experts = spec.hidden_size, spec.moe_intermediate_size, spec.num_experts
    dims = []
    if {"gate", "up"} <= roles:
        dims.append((hidden, 2 * width, 2 * experts))
    if "down" in roles:
        dims.append((width, hidden, experts))
    return tuple(dims)


@lru_cache(maxsize=512)
def adapter_params(spec: ModelSpec, roles: frozenset[str], rank: int) -> int:
    """LoRA parameters over all layers: ``rank * (fan_in + fan_out)`` per wrapped linear."""
    attention = sum(count * (fan_in + fan_out) for fan_in, fan_out, count in attention_dims(spec, roles))
    # the dense layers' MLP names moved to the experts with PEFT's conversion: no dense adapters
    dense_dims = () if _converted(spec, roles) else mlp_dims(spec, roles, False)
    dense = sum(count * (fan_in + fan_out) for fan_in, fan_out, count in dense_dims)
    moe = (
        sum(count * (fan_in + fan_out) for fan_in, fan_out, count in mlp_dims(spec, roles, True)) if spec.is_moe else 0
    )
    moe_layers = max(0, spec.num_layers - spec.num_dense_layers) if spec.is_moe else 0
    return rank * (spec.num_layers * attention + (spec.num_layers - moe_layers) * dense + moe_layers * moe)
