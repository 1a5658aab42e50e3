"""LISA: ms-swift 4.x ``--lisa_activated_layers N`` (swift/callbacks/lisa.py; docs/estimator.md §4.8).

A full fine-tune whose decoder layers are all frozen but N, drawn again every
``--lisa_step_interval`` steps; the embeddings, ``lm_head`` and the final norm stay trained. So
gradients exist only for those N layers and the rest (a frozen parameter's gradient is freed by
``zero_grad``), and torch's foreach AdamW step works on them alone. The optimizer was built over
every parameter before the callback froze them, and AdamW makes a parameter's moments when it
first has a gradient and keeps them: after enough draws every layer has been active, so the
optimizer states are counted whole, an upper bound whatever the run's length (a short run that has
touched a few layers holds less).

Modelled on one GPU or DDP; under DeepSpeed or FSDP LISA is estimated as the full fine-tune it is
an upper bound of, and the note says so.
"""

from __future__ import annotations

from ..swift import SftArgs
from .features import extra_value
from .model import ModelSpec


def lisa_layers(spec: ModelSpec, args: SftArgs, full: bool, distributed: bool, notes: list[str]) -> int:
    """Decoder layers LISA trains at once (0: no LISA, or not modelled; then a note says so)."""
    text = extra_value(args, "lisa_activated_layers")
    layers = int(text) if text and text.isdigit() else 0
    if layers <= 0 or not full:
        return 0
    if distributed:
        notes.append("LISA under DeepSpeed or FSDP is not modelled: estimated as a full fine-tune (upper bound)")
        return 0
    layers = min(layers, spec.num_layers)
    notes.append(
        f"LISA: {layers} of {spec.num_layers} decoder layers trained at a time, with the embeddings, lm_head "
        "and norms: gradients and the optimizer step for those only; AdamW states counted for every "
        "parameter (each layer keeps its states once it has been active: an upper bound)"
    )
    return layers


def frozen_params(spec: ModelSpec, layers: int) -> int:
    """Parameters of the decoder layers LISA leaves frozen at any one time: all but the ``layers``
    largest (the largest active is the upper bound of what holds gradients)."""
    if not layers:
        return 0
    sizes = sorted(spec.layer_params)
    return sum(sizes[: max(0, len(sizes) - layers)])
