"""Every model id the installed ms-swift registers gets an estimate (benchmarks/estimator_coverage.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import estimator_coverage

#: the share answered from real facts (catalog or config.json) that the catalog reached against
#: ms-swift 4.6.0's 1,620 ids: 821 (50.68%); the floor is that figure, rounded down
REAL_FACTS_FLOOR = 0.506


def test_every_id_ms_swift_registers_is_answered():
    ids = estimator_coverage.registered_ids()
    assert len(ids) > 1000, "ms-swift's model registry was not read"
    results = estimator_coverage.resolve_all(ids)
    refused = {model_id: detail for model_id, (outcome, detail) in results.items() if outcome == "refused"}
    assert not refused, f"{len(refused)} registered ids refused, e.g. {sorted(refused.items())[:3]}"
    real = sum(outcome == "real" for outcome, _ in results.values())
    assert real / len(results) >= REAL_FACTS_FLOOR, f"{real} of {len(results)} from real facts"
