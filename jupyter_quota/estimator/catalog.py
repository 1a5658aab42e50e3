"""The shipped model catalog (``catalog.json``): architecture facts of popular families.

Each entry holds the keys of the model's Hugging Face ``config.json`` that the estimator reads,
under every hub id people type for it (base, instruct, distills that share the architecture).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

__all__ = ["examples", "lookup", "names"]


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    """catalog.json's entries, read once per process."""
    data = json.loads((Path(__file__).with_name("catalog.json")).read_text(encoding="utf-8"))
    return tuple(data["models"])


@lru_cache(maxsize=1)
def _index() -> dict[str, dict]:
    index: dict[str, dict] = {}
    for entry in _entries():
        for name in entry["names"]:
            low = name.lower()
            index.setdefault(low, entry)
            index.setdefault(low.split("/", 1)[-1], entry)
    return index


def lookup(name: str) -> dict | None:
    """The catalog entry for a hub id (case-insensitive; the organisation may be left out)."""
    low = name.strip().lower().rstrip("/")
    index = _index()
    return index.get(low) or index.get(low.split("/", 1)[-1])


def names() -> list[str]:
    """Every hub id the catalog knows, as spelled on the hub."""
    return [n for entry in _entries() for n in entry["names"]]


def examples() -> list[str]:
    return ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct"]
