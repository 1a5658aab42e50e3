"""``benchmarks/gpu_truth.py``, the GPU truth run prepared for a lent GPU: its plumbing on the CPU.

No GPU here, so nothing is measured: ``--cpu-check`` runs a real ``swift sft`` on the first regime's
model cut to 2 layers, and the tests check what a GPU run relies on: the samples are exactly the
regime's length, every step is recorded, and the row it writes is estimated by the calibration
benchmark exactly as the run printed it, compared with the reserved figure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import estimator_calibration  # noqa: E402
import gpu_truth  # noqa: E402

from jupyter_quota.estimator import estimate  # noqa: E402


def _rows(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]


def test_the_cpu_check_runs_a_real_swift_sft_on_samples_of_exactly_the_regimes_length(tmp_path):
    pytest.importorskip("swift", reason="ms-swift is installed by scripts/install-swift.sh")
    out = tmp_path / "truth.tsv"
    assert gpu_truth.main(["--cpu-check", "--out", str(out), "--work", str(tmp_path / "work")]) == 0

    regime = gpu_truth.REGIMES[0]
    records = [json.loads(line) for line in (tmp_path / "work" / "r1" / "peaks.jsonl").read_text().splitlines()]
    lengths = records[0]["lengths"]
    assert lengths and set(lengths) == {regime.max_length}
    assert [r["step"] for r in records[1:]] == [1, 2]

    (row,) = _rows(out)
    assert list(row) == gpu_truth.COLUMNS
    assert row["model"] == regime.model.split("/")[-1]
    assert row["measured_gib_per_gpu"] == "NA"  # a CPU run measures no GPU memory
    assert "cut to 2 layers" in row["notes"] and "2 steps" in row["notes"]
    assert "benchmarks/gpu_truth.py" in row["source"] and "ms-swift 4." in row["source"]


@pytest.mark.parametrize("regime", gpu_truth.REGIMES, ids=lambda r: r.name)
def test_each_regimes_row_is_estimated_by_the_calibration_as_the_run_printed(regime):
    run = {"peaks": [{"step": 3, "reserved": 12 * 1024**3, "allocated": 11 * 1024**3}], "swiftMemoryGiB": 12.0}
    row = {k: str(v) for k, v in gpu_truth.calibration_row(regime, dict(run, steps=3), "src", "GPU").items()}
    argv, gpus, tags = estimator_calibration.row_to_argv(row)

    printed = estimate(["--model", regime.model, *regime.swift_args(), "--torch_dtype", "bfloat16"])
    assert estimate(argv).peak_bytes_per_gpu == printed.peak_bytes_per_gpu
    assert (gpus, tags) == (1, [])  # fitted like any modelled one-GPU row
    assert estimator_calibration.measures(row) == "reserved"  # like ms-swift's memory(GiB)
    assert row["measured_gib_per_gpu"] == "12.00"


def test_append_adds_only_measured_rows_to_the_calibration_table(tmp_path, monkeypatch):
    table = tmp_path / "calibration.tsv"
    table.write_text("\t".join(gpu_truth.COLUMNS) + "\n")
    monkeypatch.setattr(gpu_truth, "CALIBRATION", table)
    out = tmp_path / "truth.tsv"
    run = {"peaks": [{"step": 3, "reserved": None, "allocated": None}], "swiftMemoryGiB": None, "steps": 3}
    measured = dict(run, peaks=[{"step": 3, "reserved": 5 * 1024**3, "allocated": 4 * 1024**3}])
    with open(out, "w", encoding="utf-8") as f:
        f.write("\t".join(gpu_truth.COLUMNS) + "\n")
        for r in (run, measured):
            row = gpu_truth.calibration_row(gpu_truth.REGIMES[0], r, "src", "GPU")
            f.write("\t".join(str(row[c]) for c in gpu_truth.COLUMNS) + "\n")

    gpu_truth.append_measured(out)

    (added,) = _rows(table)
    assert added["measured_gib_per_gpu"] == "5.00"
