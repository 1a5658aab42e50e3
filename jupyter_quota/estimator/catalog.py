"""The shipped model catalog (``catalog.json``): architecture facts of popular families.

Each ``models`` entry holds the keys of the model's Hugging Face ``config.json`` that the estimator
reads, under every hub id people type for it (base, instruct, distills that share the
architecture), and ``source``: where those facts were read. Hub ids of the same model in another
form resolve to their entry too (``resolve``): a quantized checkpoint (``-AWQ``, ``-GPTQ-Int4``,
``-FP8``: the entry's facts plus the ``quantization_config`` its publisher ships under that
suffix), and a variant tag that keeps the architecture (``-Instruct``, ``-Base``, ``-Chat``, ``-it``).

``sizes`` holds the published parameter count of models whose ids state none and whose facts the
catalog lacks (``GLM-4.6V``: 106B-A12B), each with its source: the estimator guesses their
architecture from it (``approx.py``). ``approximate`` holds that guess's anchors.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "Match",
    "approximate_anchors",
    "examples",
    "lookup",
    "names",
    "quantization_suffix",
    "resolve",
    "resolve_size",
]


class Match(NamedTuple):
    """A catalog entry for a hub id, with the quantization its name adds (None: as the entry)."""

    entry: dict
    quantization: dict | None
    quantization_source: str | None


@lru_cache(maxsize=1)
def _data() -> dict:
    """catalog.json, read once per process."""
    return json.loads((Path(__file__).with_name("catalog.json")).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _variant_tags() -> re.Pattern:
    return re.compile("(?:" + "|".join(_data()["variant_tags"]) + ")$", re.IGNORECASE)


@lru_cache(maxsize=1)
def _suffixes() -> tuple[tuple[re.Pattern, dict], ...]:
    return tuple((re.compile(rule["pattern"] + "$", re.IGNORECASE), rule) for rule in _data()["quantized_suffixes"])


@lru_cache(maxsize=2)
def _index(section: str) -> dict[str, dict]:
    """Each name of ``section``'s entries, without its organisation, and then without its variant
    tags (``Qwen2.5-Coder-14B`` finds ``Qwen2.5-Coder-14B-Instruct``): names as listed win."""
    index: dict[str, dict] = {}
    stripped: list[tuple[str, dict]] = []
    for entry in _data()[section]:
        for name in entry["names"]:
            low = name.lower()
            index.setdefault(low, entry)
            stem = low.split("/", 1)[-1]
            index.setdefault(stem, entry)
            while (cut := _variant_tags().sub("", stem)) not in (stem, ""):
                stripped.append((cut, entry))
                stem = cut
    for stem, entry in stripped:
        index.setdefault(stem, entry)
    return index


def _get(name: str, section: str) -> dict | None:
    low = name.strip().lower().rstrip("/")
    index = _index(section)
    return index.get(low) or index.get(low.split("/", 1)[-1])


def _find(name: str, section: str) -> Match | None:
    """``name`` as listed, or after taking off a quantization suffix and then variant tags
    (``Qwen3-8B-Instruct-AWQ`` -> ``Qwen3-8B`` + AWQ 4-bit)."""
    entry = _get(name, section)
    if entry is not None:
        return Match(entry, None, None)
    stem, quantization, source = name.strip().rstrip("/"), None, None
    for pattern, rule in _suffixes():
        cut = pattern.sub("", stem)
        if cut != stem:
            stem, quantization, source = cut, rule["quantization_config"], rule["source"]
            break
    tags = _variant_tags()
    while True:
        entry = _get(stem, section)
        if entry is not None:
            return Match(entry, quantization, source)
        cut = tags.sub("", stem)
        if cut == stem or not cut or cut.endswith("/"):
            return None
        stem = cut


def quantization_suffix(name: str) -> tuple[dict, str] | None:
    """The ``quantization_config`` (and its source) a hub id's suffix states, if any."""
    for pattern, rule in _suffixes():
        if pattern.search(name.strip().rstrip("/")):
            return rule["quantization_config"], rule["source"]
    return None


def lookup(name: str) -> dict | None:
    """The catalog entry for a hub id as listed (case-insensitive; the organisation may be left out)."""
    return _get(name, "models")


@lru_cache(maxsize=4096)
def resolve(name: str) -> Match | None:
    """The catalog entry for ``name``, its quantized checkpoints and variants included."""
    return _find(name, "models")


@lru_cache(maxsize=4096)
def resolve_size(name: str) -> Match | None:
    """The ``sizes`` entry (``{"names", "size", "source"}``) for a model the catalog has no facts for."""
    return _find(name, "sizes")


def names() -> list[str]:
    """Every hub id the catalog knows, as spelled on the hub."""
    return [n for entry in _data()["models"] for n in entry["names"]]


def approximate_anchors() -> dict:
    """The size-only guess's anchors: ``{"families": ..., "dense": {family: [names]}, "moe": {...}}``."""
    return _data()["approximate"]


def examples() -> list[str]:
    return ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct"]
