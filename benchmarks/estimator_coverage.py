"""Coverage of the estimator against the model ids ms-swift itself registers.

Reads every id (ModelScope and Hugging Face spellings) of the installed ms-swift's model registry
(``swift.model.MODEL_MAPPING``: each model type's groups of ``Model(ms_model_id, hf_model_id)``),
resolves each the way ``jupyter quota estimate --model <id>`` does, with the local hub caches
pointed at an empty folder (so the figure does not depend on what this machine downloaded), and
prints the share answered and the share answered from real facts (catalog or config.json, not a
guess from the size). ``tests/test_estimator_coverage.py`` holds both.

    PYTHONPATH=$PWD python benchmarks/estimator_coverage.py [--list refused|approximate|real]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def registered_ids() -> dict[str, str]:
    """Every model id ms-swift registers -> its ms-swift model type (first registration wins)."""
    import swift.model.models  # noqa: F401 - registers every model type
    from swift.model import MODEL_MAPPING

    ids: dict[str, str] = {}
    for model_type, meta in MODEL_MAPPING.items():
        for group in meta.model_groups:
            for model in group.models:
                for model_id in (model.ms_model_id, model.hf_model_id):
                    if model_id:
                        ids.setdefault(model_id, model_type)
    return ids


def resolve_all(ids) -> dict[str, tuple[str, str]]:
    """id -> (outcome, detail): outcome "real", "approximate" or "refused"; the source or the error."""
    from jupyter_quota.errors import InvalidRequest
    from jupyter_quota.estimator.model import resolve_model

    empty = tempfile.mkdtemp(prefix="coverage-cache-")
    saved = {k: os.environ.get(k) for k in ("HF_HUB_CACHE", "MODELSCOPE_CACHE", "JUPYTER_QUOTA_HUB_LOOKUP")}
    os.environ.update(HF_HUB_CACHE=empty, MODELSCOPE_CACHE=empty, JUPYTER_QUOTA_HUB_LOOKUP="0")
    try:
        out = {}
        for model_id in ids:
            try:
                spec = resolve_model(model_id)
            except InvalidRequest as exc:
                out[model_id] = ("refused", exc.message if hasattr(exc, "message") else str(exc))
                continue
            out[model_id] = ("approximate" if spec.approximate else "real", spec.source)
        return out
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        os.rmdir(empty)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", choices=("refused", "approximate", "real"), help="print the ids with this outcome")
    args = parser.parse_args()
    import importlib.metadata

    ids = registered_ids()
    results = resolve_all(ids)
    counts = Counter(outcome for outcome, _ in results.values())
    total = len(results)
    answered = counts["real"] + counts["approximate"]
    print(f"ms-swift {importlib.metadata.version('ms-swift')}: {total} registered model ids")
    print(f"answered:               {answered:5d}  {answered / total:6.1%}")
    print(f"answered from facts:    {counts['real']:5d}  {counts['real'] / total:6.1%}")
    print(f"approximate (size):     {counts['approximate']:5d}  {counts['approximate'] / total:6.1%}")
    print(f"refused:                {counts['refused']:5d}  {counts['refused'] / total:6.1%}")
    if args.list:
        for model_id, (outcome, detail) in sorted(results.items()):
            if outcome == args.list:
                print(f"{ids[model_id]:24s} {model_id:60s} {detail[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
