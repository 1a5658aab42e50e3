"""The estimator returns exactly the recorded outputs of tests/data/estimator_golden.json (see
tests/estimator_golden.py for the cases and how to regenerate the file when a change is meant)."""

import json

import pytest
from estimator_golden import BREAKDOWN_KEYS, GOLDEN, cases, run


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_golden_file_covers_every_case_in_order(golden):
    recorded = [(row["argv"], row["gpus"], row["device"], row.get("config")) for row in golden["cases"]]
    expected = [(" ".join(c["argv"]), c["gpus"], c["device"], c.get("config")) for c in cases()]
    assert recorded == expected
    assert len(recorded) > 1500


def test_every_estimate_is_bit_for_bit_the_recorded_one(golden, tmp_path):
    notes = golden["notes"]
    differ = []
    for case, row in zip(cases(), golden["cases"], strict=True):
        result = run(case, tmp_path)
        breakdown = [result["breakdown"][key] for key in BREAKDOWN_KEYS]
        assumptions = [notes[i] for i in row["assumptions"]]
        if breakdown != row["breakdown"] or result["assumptions"] != assumptions:
            differ.append(
                (
                    row["argv"],
                    row["gpus"],
                    row["device"],
                    breakdown,
                    row["breakdown"],
                    [a for a in result["assumptions"] if a not in assumptions],
                )
            )
    assert not differ, f"{len(differ)} of {len(golden['cases'])} cases differ; first: {differ[:3]}"
