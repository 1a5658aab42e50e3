"""``estimator.learning``: corrections from measured peaks, bounded, auditable, from enough jobs."""

from __future__ import annotations

import numpy
import pytest

from jupyter_quota.estimator import estimate
from jupyter_quota.estimator.learning import (
    MAX_LOWER,
    MAX_RAISE,
    MIN_JOBS,
    Measured,
    corrected,
    corrections,
    error_table,
    family_of,
    quantile,
    regime_of,
)


def jobs(family, regime, pairs):
    return [Measured(family, regime, e, m) for e, m in pairs]


def test_no_correction_from_fewer_than_min_jobs():
    records = jobs("qwen2", "lora/1", [(10.0, 12.0)] * (MIN_JOBS - 1))
    assert corrections(records) == {}
    assert len(corrections(records + jobs("qwen2", "lora/1", [(10.0, 12.0)]))) == 1


def test_factor_is_the_high_quantile_of_measured_over_estimated():
    ratios = [1.0, 1.05, 1.1, 1.2, 1.3]
    records = jobs("qwen2", "lora/1", [(10.0, 10.0 * r) for r in ratios])
    fix = corrections(records)[("qwen2", "lora/1")]
    assert fix.factor == pytest.approx(numpy.quantile(ratios, 0.9))
    assert fix.jobs == 5
    assert "5 finished jobs of qwen2 in regime lora/1" in fix.note()


def test_factor_is_clamped_both_ways():
    high = corrections(jobs("llama", "full/8", [(10.0, 30.0)] * 3))[("llama", "full/8")]
    low = corrections(jobs("llama", "qlora/1", [(10.0, 5.0)] * 3))[("llama", "qlora/1")]
    assert (high.factor, high.raw) == (MAX_RAISE, pytest.approx(3.0))
    assert (low.factor, low.raw) == (MAX_LOWER, pytest.approx(0.5))
    assert "clamped from x3.00" in high.note()


def test_regimes_and_families_learn_apart_and_bad_records_are_ignored():
    records = jobs("qwen2", "lora/1", [(10.0, 11.0)] * 3) + jobs("qwen2", "full/1", [(10.0, 10.0)] * 3)
    records += [Measured("qwen2", "lora/1", 0.0, 5.0), Measured("qwen2", "lora/1", 10.0, float("nan"))]
    fixes = corrections(records)
    assert fixes[("qwen2", "lora/1")].factor == pytest.approx(1.1)
    assert fixes[("qwen2", "full/1")].factor == pytest.approx(1.0)
    assert fixes[("qwen2", "lora/1")].jobs == 3


def test_corrected_scales_the_peak_and_keeps_the_breakdown_adding_up():
    est = estimate(["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "lora"])
    assert (family_of(est), regime_of(est)) == ("qwen2", "lora/single/dense")
    fixes = corrections(jobs("qwen2", "lora/single/dense", [(10.0, 12.0)] * 3))
    out = corrected(est, fixes)
    assert out.peak_bytes_per_gpu == pytest.approx(est.peak_bytes_per_gpu * 1.2, abs=1)
    assert sum(out.breakdown.values()) == out.peak_bytes_per_gpu
    assert sum(est.breakdown.values()) == est.peak_bytes_per_gpu  # the input is untouched
    body = out.to_json()
    assert body["correction"]["factor"] == pytest.approx(1.2)
    assert body["assumptions"][-1] == fixes[("qwen2", "lora/single/dense")].note()
    assert out.range.high == pytest.approx(est.range.high * 1.2, abs=1)  # the range moves with the peak
    assert body["rangeBytesPerGpu"] == [out.range.low, out.range.high]
    assert est.to_json()["correction"] is None
    other = estimate(["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full"])
    assert corrected(other, fixes) is other  # another regime learns nothing from these


def test_regime_is_the_ranges_regime_before_any_fallback():
    est = estimate(
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "lora", "--quant_bits", "4", "--deepspeed", "zero2"],
        gpus=2,
    )
    assert regime_of(est) == "qlora/zero2/dense"


def test_error_table_per_regime_and_over_all_rows():
    records = jobs("qwen2", "lora/1", [(10.0, 12.5), (10.0, 10.0), (10.0, 9.0)]) + jobs(
        "llama", "full/2", [(20.0, 19.0)]
    )
    table = error_table(records)
    assert [(r["family"], r["regime"], r["jobs"]) for r in table] == [
        ("llama", "full/2", 1),
        ("qwen2", "lora/1", 3),
        ("all", "all", 4),
    ]
    qwen = table[1]
    assert qwen["underPredictedOver10Pct"] == pytest.approx(1 / 3, abs=1e-3)  # 10 for 12.5 is -20%
    assert qwen["medianErrorPct"] == pytest.approx(100 * numpy.median([0.2, 0.0, 1 / 9]), abs=0.05)
    assert qwen["correction"] is not None and table[0]["correction"] is None


def test_quantile_matches_numpy():
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    for q in (0, 0.25, 0.5, 0.9, 1):
        assert quantile(values, q) == pytest.approx(numpy.quantile(values, q))
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
