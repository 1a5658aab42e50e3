"""Each catalog entry's parameter count against the count its publisher states, where one is readable.

tests/data/published_param_counts.tsv names, per row, a hub id, the published figure (a count, or
billions as printed: ``7.61B``) and where it was read. A figure printed to k decimals holds the
estimator's count to half a unit of its last digit, or 1% of it (cards round, and count norms and
biases differently), whichever is wider. A wrong ``tie_word_embeddings`` or a tower part counted
twice moves a model by far more than that.
"""

import csv
from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_quota.estimator import resolve_model

DATA = Path(__file__).parent / "data" / "published_param_counts.tsv"


def _rows() -> list[dict]:
    with open(DATA, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def published(text: str) -> tuple[float, float]:
    """(count, tolerance) of a published figure: ``1060897792`` or ``7.61B``."""
    if not text.endswith("B"):
        return float(text), 0.0
    value = Decimal(text[:-1])
    half_unit = Decimal(1).scaleb(value.as_tuple().exponent) / 2
    return float(value) * 1e9, float(half_unit) * 1e9


def test_the_data_names_its_sources():
    rows = _rows()
    assert len(rows) >= 15
    assert all(r["model"] and r["published"] and len(r["source"]) > 20 for r in rows)


@pytest.fixture(autouse=True)
def no_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    monkeypatch.delenv("JUPYTER_QUOTA_HUB_LOOKUP", raising=False)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['model']}={r['published']}")
def test_catalog_parameter_count_matches_the_published_count(row):
    spec = resolve_model(row["model"])
    assert spec.source == "catalog" and not spec.approximate
    count, half_unit = published(row["published"])
    tolerance = max(half_unit, 0.01 * count)
    assert abs(spec.params - count) <= tolerance, (
        f"{row['model']}: the catalog gives {spec.params / 1e9:.3f}B, {row['source']} says "
        f"{row['published']} (tolerance {tolerance / 1e9:.3f}B)"
    )


# -- tower parts as transformers builds them (issue 22's findings) --------------------------------
def test_glm4v_vision_mlp_is_out_hidden_size_wide_and_intermediate_size_is_the_mergers():
    # transformers Glm4vVisionModel: blocks' Glm4VisionMlp of out_hidden_size; the merger is
    # Glm4vVisionPatchMerger(dim=out_hidden_size, context_dim=vision_config.intermediate_size)
    for name in ("zai-org/GLM-4.1V-9B-Thinking", "zai-org/GLM-4.5V"):
        spec = resolve_model(name)
        width, mlp, out, merger, depth = 1536, 4096, 4096, 13696, 24
        blocks = depth * (4 * width * width + 3 * width * mlp + 4 * width)
        projector = width * 4 * out + out * out + 3 * out * merger
        patch_embed = 3 * 2 * 14 * 14 * width
        assert spec.vision_intermediate == mlp
        assert spec.vision_params == blocks + projector + patch_embed


def test_qwen3_vl_counts_its_deepstack_mergers():
    # Qwen3VLVisionModel.deepstack_merger_list: one patch merger per deepstack_visual_indexes entry
    spec = resolve_model("Qwen/Qwen3-VL-8B-Instruct")
    width, mlp, out, depth = 1152, 4304, 4096, 27
    blocks = depth * (4 * width * width + 2 * width * mlp + 4 * width)
    merger = (4 * width) ** 2 + 4 * width * out
    patch_embed = 3 * 2 * 16 * 16 * width
    assert spec.vision_params == blocks + 4 * merger + patch_embed  # the merger and 3 DeepStack ones


def test_gemma3_projector_is_one_matrix_not_a_resampler():
    # Gemma3MultiModalProjector: mm_soft_emb_norm (vision width) and mm_input_projection_weight
    spec = resolve_model("google/gemma-3-27b-it")
    width, mlp, out, depth = 1152, 4304, 5376, 27
    blocks = depth * (4 * width * width + 2 * width * mlp + 4 * width)
    patch_embed = 3 * 14 * 14 * width
    assert spec.vision_params == blocks + width * out + width + patch_embed
