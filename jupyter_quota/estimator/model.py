"""Which model an estimate is for: ``resolve_model`` finds its facts, or guesses them from its size.

``resolve_model`` takes a local folder holding a ``config.json``, a catalog name (hub ids users
type, case-insensitive, with or without the organisation, also quantized checkpoints and variants
of a catalog model, see :mod:`.catalog`), or any other hub id whose ``config.json`` is in the local
Hugging Face or ModelScope cache, or on the hub when lookups are enabled (see :mod:`.hub`). Any
other id is estimated from its size, in the name or given as ``model_size``, with a guessed
architecture (:mod:`.approx`), and says so (``approximate``). Everything but the hub works offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from functools import lru_cache

from ..errors import InvalidRequest
from . import approx, catalog, hub
from .configjson import quantization_fields, spec_from_config
from .spec import ModelSpec

__all__ = ["ModelSpec", "catalog_models", "resolve_model", "spec_from_config"]


def local_config(name_or_path: str) -> str | None:
    """The ``config.json`` a ``--model`` names on this machine: a folder's, or a path ending in
    ``config.json``; None for any other name (catalog, hub id). The file may not exist."""
    if os.path.isdir(name_or_path):
        return os.path.join(name_or_path, "config.json")
    return name_or_path if name_or_path.endswith("config.json") else None


def resolve_model(name_or_path: str | None, model_size: str | None = None) -> ModelSpec:
    """A ``ModelSpec`` for a catalog name, a local folder (or file) with ``config.json``, a hub id
    with a cached ``config.json``, or else a guess from ``model_size`` or the size in the name."""
    if not name_or_path or not isinstance(name_or_path, str):
        raise InvalidRequest(
            "--model is missing: give a model name (e.g. Qwen/Qwen2.5-7B-Instruct) or a local folder with a config.json"
        )
    size = approx.parse_model_size(model_size) if model_size is not None else None
    path = local_config(name_or_path)
    if path is not None:
        if not os.path.isfile(path):
            raise InvalidRequest(
                f"{name_or_path}: no config.json there; give a folder that holds the model's Hugging Face config.json"
            )
        return _spec_from_file(path, name_or_path, "config.json")
    match = catalog.resolve(name_or_path)
    if match is not None:
        return _catalog_spec(match.entry["names"][0], name_or_path if match.quantization else None)
    if hub.is_repo_id(name_or_path):
        path = hub.cached_config(name_or_path)
        if path is not None:
            return _spec_from_file(path, name_or_path, "config.json in the local hub cache")
        if hub.lookup_enabled():
            return _spec_from_file(hub.fetch_config(name_or_path), name_or_path, "config.json from the hub")
    sized = catalog.resolve_size(name_or_path)
    if size is None and sized is not None:
        size, where = approx.parse_model_size(sized.entry["size"]), sized.entry["source"]
    else:
        where = "--model_size" if size is not None else "the name"
        size = size or approx.size_in_name(name_or_path)
    if size is not None:
        return _approximate_spec(name_or_path, size, where)
    raise InvalidRequest(
        f"unknown model {name_or_path!r}: it is not in the catalog, not a local folder, not in the "
        "local hub caches, and its name states no size. Give its size with --model_size (e.g. 8B, "
        "or 30B-A3B for a mixture of experts; the estimate is then approximate), a local folder "
        "holding the model's config.json (only config.json is needed), one of the catalog names, "
        f"e.g. {', '.join(catalog.examples())}, or set {hub.LOOKUP_ENV}=1 on the server to fetch "
        "config.json from the Hugging Face hub"
    )


@lru_cache(maxsize=256)
def _approximate_spec(name: str, size: approx.Size, where: str) -> ModelSpec:
    """A guessed architecture of ``size`` parameters (approx.py), marked approximate, with the
    quantization a checkpoint suffix states (``-AWQ``, ``-FP8``)."""
    spec, anchor = approx.guess(name, size, catalog.approximate_anchors(), _catalog_spec)
    active = f", {size.active / 1e9:.3g}B active" if size.active else ""
    experts = f" and {spec.num_experts_per_tok} of {spec.num_experts} experts per token" if spec.is_moe else ""
    quant = catalog.quantization_suffix(name)
    return replace(
        spec,
        name=name,
        source=(
            f"approximate: {size.total / 1e9:.3g}B{active} from {where}; the architecture of {anchor} "
            f"with {spec.num_layers} layers{experts}" + (f"; {quant[1]}" if quant else "")
        ),
        approximate=True,
        **(quantization_fields({"quantization_config": quant[0]}, {}) if quant else {}),
    )


def _spec_from_file(path: str, name: str, source: str) -> ModelSpec:
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(config, dict):
        raise InvalidRequest(f"{path}: expected a JSON object")
    return spec_from_config(config, name=name, source=source)


@lru_cache(maxsize=1)
def catalog_models() -> tuple[dict, ...]:
    """Every hub id of the catalog with the facts a model picker shows (``GET /models``)."""
    out = []
    for name in catalog.names():
        spec = _catalog_spec(name)
        out.append(
            {
                "id": name,
                "params": spec.params,
                "layers": spec.num_layers,
                "hidden": spec.hidden_size,
                "experts": spec.num_experts,
                "vision": spec.vision_params > 0,
                "maxLength": spec.max_position_embeddings,
            }
        )
    return tuple(out)


@lru_cache(maxsize=256)
def _catalog_spec(name: str, quantized_as: str | None = None) -> ModelSpec:
    """Catalog entries never change while the process runs: build each ModelSpec once.
    ``quantized_as``: a quantized checkpoint's hub id, whose suffix adds a ``quantization_config``."""
    if quantized_as is None:
        entry = catalog.lookup(name)
        return spec_from_config(entry["config"], name=entry["names"][0], source="catalog")
    match = catalog.resolve(quantized_as)
    config = {**match.entry["config"], "quantization_config": match.quantization}
    source = f"catalog: {match.entry['names'][0]} with {match.quantization_source}"
    return spec_from_config(config, name=quantized_as, source=source)
