"""The machine's inventory (``inventory``): from nvidia-smi, or the declaration."""

from __future__ import annotations

import pytest
from local_testing import INVENTORY

from jupyter_quota.backends.local import detect_inventory, parse_nvidia_smi

NVIDIA_SMI_SAMPLE = """\
0, NVIDIA A100-SXM4-80GB, 81920, GPU-3a9b4c1e-8a0f-2b6c-9d1e-4f5a6b7c8d9e
1, NVIDIA A100-SXM4-80GB, 81920, GPU-7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b
"""


def test_nvidia_smi_output_is_parsed():
    assert parse_nvidia_smi(NVIDIA_SMI_SAMPLE) == [
        {
            "index": 0,
            "model": "NVIDIA A100-SXM4-80GB",
            "memory": "80Gi",
            "uuid": "GPU-3a9b4c1e-8a0f-2b6c-9d1e-4f5a6b7c8d9e",
        },
        {
            "index": 1,
            "model": "NVIDIA A100-SXM4-80GB",
            "memory": "80Gi",
            "uuid": "GPU-7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        },
    ]
    assert parse_nvidia_smi("") == []
    with pytest.raises(ValueError, match="garbage"):
        parse_nvidia_smi("garbage")


def _fake_nvidia_smi(tmp_path, script):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return str(bindir)


def test_inventory_comes_from_nvidia_smi_when_it_answers(tmp_path, monkeypatch):
    sample = NVIDIA_SMI_SAMPLE.replace("\n", "\\n")
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path, f'printf "{sample}"\n'))
    inventory = detect_inventory({"gpus": 8, "cpu": "16", "memory": "64Gi"})
    assert inventory["source"] == "nvidia-smi"
    assert [g["index"] for g in inventory["gpus"]] == [0, 1]
    assert (inventory["cpu"], inventory["memory"]) == ("16", "64Gi")


def test_inventory_falls_back_to_the_declaration(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path, "echo 'NVML: driver not loaded' >&2; exit 9\n"))
    declared = {"gpus": 4, "gpuModel": "A100 80GB", "gpuMemory": "80Gi", "cpu": "32", "memory": "256Gi"}
    assert detect_inventory(declared) == {
        "source": "declared",
        "gpus": [{"index": i, "model": "A100 80GB", "memory": "80Gi"} for i in range(4)],
        "cpu": "32",
        "memory": "256Gi",
    }
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bare = detect_inventory(None)
    assert bare["source"] == "declared" and bare["gpus"] == []
    assert int(bare["cpu"]) >= 1 and bare["memory"] not in ("0", "")


def test_backend_reports_its_inventory(make_backend):
    backend = make_backend()
    assert backend.inventory() == INVENTORY
    backend.inventory()["gpus"].clear()
    assert len(backend.inventory()["gpus"]) == 2
