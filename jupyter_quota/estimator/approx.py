"""An architecture guessed from a parameter count, for a model known only by its size.

The size comes from the hub id (``Qwen3-8B``, ``Foo-30B-A3B``, ``bar-0.5b``, ``Qwen-1_8B``,
``Mixtral-8x22B``, ``SmolLM-135M``) or from ``--model_size``. The guess takes the nearest catalog
model of the same family by size (the anchors in ``catalog.json``'s ``approximate``), keeps its
width, heads, MLP width and vocabulary, and sets the layer count so that the parameters add up to
the size; an MoE size (``30B-A3B``) also sets the experts a token visits so that the active
parameters add up (docs/estimator.md §12). Pure arithmetic on catalog facts.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import NamedTuple

from ..errors import InvalidRequest

__all__ = ["Size", "guess", "parse_model_size", "size_in_name"]

_UNIT = {"m": 1e6, "b": 1e9, "t": 1e12}
_NUM = r"(\d+(?:[._]\d+)?)"
#: a size token: not glued to a letter or digit before it, nor to a letter or digit after it
_EDGE_L, _EDGE_R = r"(?<![A-Za-z0-9.])", r"(?![A-Za-z0-9])"
_MOE = re.compile(_EDGE_L + _NUM + r"([bt])[-_]?a" + _NUM + r"([bm])" + _EDGE_R, re.IGNORECASE)
_EXPERTS = re.compile(_EDGE_L + r"(\d+)x" + _NUM + r"([bm])" + _EDGE_R, re.IGNORECASE)
_EXPERTS_AFTER = re.compile(_EDGE_L + _NUM + r"([bm])x(\d+)" + _EDGE_R, re.IGNORECASE)  # "7bx8"
_DENSE = re.compile(_EDGE_L + _NUM + r"([bmt])" + _EDGE_R, re.IGNORECASE)
#: a Mixtral-style ``8x7B`` name: share of each 7B "expert model" in its MLP, and experts per token
#: (Mixtral-8x7B in the catalog: 46.7B total, 12.9B active, 2 of 8 experts)
_MIXTRAL_MLP_SHARE, _MIXTRAL_TOP_K = 0.8, 2


class Size(NamedTuple):
    total: float  # parameters
    active: float | None  # an MoE's parameters per token; None for a dense model
    text: str  # as written


def _num(text: str) -> float:
    return float(text.replace("_", "."))


def _parse(text: str) -> Size | None:
    m = _MOE.search(text)
    if m:
        return Size(_num(m[1]) * _UNIT[m[2].lower()], _num(m[3]) * _UNIT[m[4].lower()], m[0])
    m = _EXPERTS.search(text)
    after = _EXPERTS_AFTER.search(text) if m is None else None
    if m or after:
        experts, each = (
            (int(m[1]), _num(m[2]) * _UNIT[m[3].lower()])
            if m
            else (int(after[3]), _num(after[1]) * _UNIT[after[2].lower()])
        )
        shared = each * (1 - _MIXTRAL_MLP_SHARE)
        total = shared + experts * each * _MIXTRAL_MLP_SHARE
        active = shared + min(experts, _MIXTRAL_TOP_K) * each * _MIXTRAL_MLP_SHARE
        return Size(total, active, (m or after)[0])
    found = [(_num(m[1]) * _UNIT[m[2].lower()], m[0]) for m in _DENSE.finditer(text)]
    # "-7B-Instruct-1M": the billions are the size, the millions a context length
    big = [f for f in found if f[0] >= 1e9] or found
    return Size(big[0][0], None, big[0][1]) if big else None


def size_in_name(name: str) -> Size | None:
    """The parameter count a hub id states (its last path part), if any."""
    return _parse(name.rstrip("/").rsplit("/", 1)[-1])


def parse_model_size(text) -> Size:
    """``--model_size``: ``8B``, ``0.5B``, ``135M``, ``30B-A3B`` (MoE: total and active) or ``8x7B``."""
    size = _parse(str(text).strip()) if isinstance(text, str) else None
    if size is None or size.text.lower() != str(text).strip().lower() or size.total <= 0:
        raise InvalidRequest(
            f"--model_size {text!r}: give the parameter count as in model names, e.g. 8B, 0.5B, 135M, "
            "or total-active for a mixture of experts, e.g. 30B-A3B"
        )
    if size.total > 1e13 or (size.active is not None and not 0 < size.active <= size.total):
        raise InvalidRequest(f"--model_size {text!r}: the active parameters must be above 0 and at most the total")
    return size


def _family(name: str, families: dict) -> str:
    low = name.lower()
    for family, keys in families.items():
        if any(k in low for k in keys):
            return family
    return "default"


def guess(name: str, size: Size, anchors: dict, spec_of) -> tuple:
    """A ModelSpec-like guess for ``name`` of ``size``; ``spec_of(catalog_name)`` builds an anchor's spec.

    Returns ``(spec, anchor name)``: the anchor's architecture with the layer count (and, for an
    MoE, the experts per token) set so the parameters add up to ``size``.
    """
    kind = "moe" if size.active is not None and size.active < size.total else "dense"
    family = _family(name, anchors["families"])
    candidates = anchors[kind].get(family) or anchors[kind]["default"]
    specs = [(spec_of(n), n) for n in candidates]
    anchor, anchor_name = min(specs, key=lambda s: abs(math.log(s[0].llm_params / size.total)))
    per_layer = anchor.layer_params[-1]
    fixed = anchor.llm_params - sum(anchor.layer_params)  # embeddings, lm_head, final norm
    dense_layers = min(anchor.num_dense_layers, anchor.num_layers) if anchor.is_moe else 0
    fixed += dense_layers * (anchor.layer_params[0] - per_layer)
    layers = max(1, round((size.total - fixed) / per_layer))
    spec = replace(anchor, num_layers=layers, num_dense_layers=min(dense_layers, layers))
    if anchor.is_moe and size.active is not None:
        expert = 3 * anchor.hidden_size * anchor.moe_intermediate_size
        moe_layers = layers - spec.num_dense_layers
        always = spec.llm_params - moe_layers * anchor.num_experts * expert  # everything but the routed experts
        top_k = round((size.active - always) / (max(1, moe_layers) * expert))
        spec = replace(spec, num_experts_per_tok=max(1, min(anchor.num_experts, top_k)))
    return spec, anchor_name
