"""GaLore's optimizer states: ms-swift 4.x ``--use_galore`` (swift/optimizers/galore; docs/estimator.md §4.7).

GaLore projects the gradient of each targeted linear (every decoder linear: ms-swift's
``find_all_linears``) onto ``--galore_rank`` directions (``GaLoreProjector``, ``proj_type`` std: the
larger side is kept) and keeps AdamW's two moments of the projected gradient, r x max(m, n) each,
plus the projection, r x min(m, n), all in the gradient's dtype. Every other trained parameter
(embeddings, lm_head, norms) keeps AdamW's whole states. Gradients stay whole until the step:
``--galore_optim_per_parameter`` gives each parameter its own optimizer, but the wrapper steps them
all after the backward pass (``GaloreOptimizerWrapper``). At a projection update
``torch.linalg.svd`` runs on a float32 copy of one gradient; that copy and its U factor are the
step's largest buffers (``GaLoreAdamW`` steps one parameter at a time: no foreach buffer).

``--galore_quantization`` (Q-GaLore) swaps only the optimizer in ms-swift: q_galore_torch's
``QGaLoreAdamW8bit``, a bitsandbytes 8-bit AdamW (one byte per moment) over the same projected
gradients and the other trained parameters. ms-swift does not quantize the weights (Q-GaLore's INT8
weights belong to its authors' own training script), and without ``--galore_proj_quant`` the
projections stay in the gradient's dtype.

Modelled only where those facts hold: a dense text model, AdamW (torch), proj_type std, the default
targets, unquantized projections, one GPU or DDP. Anything else (DeepSpeed, MoE experts, towers, ...)
is estimated as a full fine-tune, an upper bound, and the note says why.
"""

from __future__ import annotations

from typing import NamedTuple

from ..swift import SftArgs
from .features import extra_value
from .lora import attention_dims, mlp_dims
from .model import ModelSpec

DEFAULT_RANK = 128  # ms-swift's --galore_rank default
_ROLES = frozenset({"q", "k", "v", "o", "gate", "up", "down"})
_ADAMW = (None, "", "adamw_torch", "adamw_torch_fused", "adamw_hf")


class Galore(NamedTuple):
    rank: int
    params: int  # weights GaLore projects (all decoder linears)
    state_elements: int  # AdamW's two moments of the projected gradients
    projector_elements: int  # the projections, r x min(m, n) each
    largest: int  # elements of the largest projected weight (its SVD at a projection update)
    moment_bytes: int  # bytes per AdamW moment: 1 for Q-GaLore's 8-bit AdamW, else the dtype's (0)


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1", "yes")


def galore_of(spec: ModelSpec, args: SftArgs, full: bool, distributed: bool, notes: list[str]) -> Galore | None:
    """GaLore's facts for this run, or None (not asked, or not modelled: then a note says so)."""
    if not _truthy(extra_value(args, "use_galore")):
        return None
    why = ""
    if not full:
        why = "GaLore applies to a full fine-tune (--tuner_type full)"
    elif _truthy(extra_value(args, "galore_proj_quant")):
        why = "--galore_proj_quant (quantized projections) is not modelled"
    elif (extra_value(args, "galore_proj_type") or "std") != "std":
        why = "--galore_proj_type other than std is not modelled"
    elif extra_value(args, "galore_target_modules") or _truthy(extra_value(args, "galore_with_embedding")):
        why = "GaLore targets other than ms-swift's default (every decoder linear) are not modelled"
    elif (args.optim or "").lower() not in _ADAMW:
        why = f"GaLore with --optim {args.optim} is not modelled (only AdamW)"
    elif spec.is_moe or spec.tower_params or spec.linear_attention_params:
        why = "GaLore is modelled for dense text models only (not MoE experts, towers or linear attention)"
    elif distributed:
        why = "GaLore under DeepSpeed or FSDP is not modelled"
    if why:
        notes.append(f"{why}: estimated as a full fine-tune (upper bound)")
        return None
    rank_text = extra_value(args, "galore_rank")
    rank = int(rank_text) if rank_text and rank_text.isdigit() else DEFAULT_RANK
    params = states = projectors = largest = 0
    dims = attention_dims(spec, _ROLES) + mlp_dims(spec, _ROLES, False)
    for fan_in, fan_out, count in dims:
        r = min(rank, fan_in, fan_out)
        params += count * fan_in * fan_out
        states += count * 2 * r * max(fan_in, fan_out)
        projectors += count * r * min(fan_in, fan_out)
        largest = max(largest, fan_in * fan_out)
    layers = spec.num_layers
    quantized = _truthy(extra_value(args, "galore_quantization"))
    galore = Galore(rank, params * layers, states * layers, projectors * layers, largest, 1 if quantized else 0)
    notes.append(
        f"GaLore rank {rank} on every decoder linear ({galore.params / 1e9:.2f}B weights): AdamW's moments of "
        "the projected gradients (r x max(m, n) each) and the projections (r x min(m, n)); embeddings, "
        "lm_head and norms keep whole AdamW states; gradients whole until the step"
    )
    if quantized:
        notes.append(
            "Q-GaLore (--galore_quantization): ms-swift swaps in QGaLoreAdamW8bit, bitsandbytes 8-bit AdamW "
            "states (one byte per moment); the weights stay in the model dtype"
        )
    return galore
