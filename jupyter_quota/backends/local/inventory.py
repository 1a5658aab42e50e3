"""What this machine offers to jobs: its GPUs (as ``nvidia-smi`` reports them), CPUs and memory.

A machine without GPUs or without ``nvidia-smi`` is a normal case: the inventory then comes
from what the admin declared in config (marked ``"source": "declared"``), or holds no GPUs.
The result is a plain dict, the shape ``GET .../inventory`` shows:
``{"source", "gpus": [{"index", "model", "memory", "uuid"?}], "cpu", "memory"}``.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ...quantity import Quantity

NVIDIA_SMI_QUERY = [
    "--query-gpu=index,name,memory.total,uuid",
    "--format=csv,noheader,nounits",
]
UTILIZATION_QUERY = ["--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"]
NVIDIA_SMI_TIMEOUT = 10.0


def detect_inventory(declared: dict | None = None) -> dict:
    """The machine's inventory: GPUs from ``nvidia-smi`` when it answers, else ``declared``.

    ``declared`` looks like ``{"gpus": 4, "gpuModel": "A100 80GB", "gpuMemory": "80Gi",
    "cpu": "32", "memory": "256Gi"}``; its cpu and memory win over the machine's own (an admin
    may set aside part of the box), and default to ``os.cpu_count()`` and the machine's memory.
    """
    declared = declared or {}
    gpus = _query_nvidia_smi()
    source = "nvidia-smi"
    if gpus is None:
        gpus = _declared_gpus(declared)
        source = "declared"  # an empty declaration declares no GPUs
    return {
        "source": source,
        "gpus": gpus,
        "cpu": str(Quantity(str(declared.get("cpu") or _machine_cpus()))),
        "memory": str(Quantity(str(declared.get("memory") or _machine_memory()))),
    }


def parse_nvidia_smi(output: str) -> list[dict]:
    """Parse ``index, name, memory.total (MiB), uuid`` CSV lines into GPU dicts, by index."""
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        # The model name may itself hold commas: index first, memory and uuid last.
        index, model, memory, uuid = fields[0], ", ".join(fields[1:-2]), fields[-2], fields[-1]
        gpus.append(
            {
                "index": int(index),
                "model": model,
                "memory": str(Quantity(f"{int(memory)}Mi")) if memory.isdigit() else None,
                "uuid": uuid,
            }
        )
    return sorted(gpus, key=lambda g: g["index"])


def _query_nvidia_smi() -> list[dict] | None:
    """The GPUs ``nvidia-smi`` lists, or None when it is absent or fails."""
    try:
        output = _nvidia_smi(NVIDIA_SMI_QUERY)
        return None if output is None else parse_nvidia_smi(output)
    except ValueError:
        return None


def gpu_utilization() -> dict[int, float] | None:
    """Each GPU's utilisation in percent (index to percent), or None without ``nvidia-smi``."""
    try:
        output = _nvidia_smi(UTILIZATION_QUERY)
        return None if output is None else parse_utilization(output)
    except ValueError:
        return None


def parse_utilization(output: str) -> dict[int, float]:
    """Parse ``index, utilization.gpu`` CSV lines (no units); a GPU that says ``[N/A]`` is left out."""
    found = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        index, _, percent = (f.strip() for f in line.partition(","))
        if not index.isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        try:
            found[int(index)] = float(percent)
        except ValueError:
            continue  # "[N/A]", "[Not Supported]": not measured, so never idle
    return found


def _nvidia_smi(args) -> str | None:
    """``nvidia-smi``'s output for ``args``, or None when it is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, *args],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _declared_gpus(declared: dict) -> list[dict]:
    count = int(declared.get("gpus") or 0)
    model = declared.get("gpuModel") or "GPU"
    memory = declared.get("gpuMemory")
    memory = str(Quantity(str(memory))) if memory else None
    return [{"index": i, "model": model, "memory": memory} for i in range(count)]


def _machine_cpus() -> int:
    """CPUs this process may run on (respects cpusets), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _machine_memory() -> str:
    """Physical memory as a quantity string, from /proc/meminfo or sysconf."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1])}Ki"
    except (OSError, ValueError, IndexError):
        pass
    try:
        return f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 1024}Ki"
    except (ValueError, OSError, AttributeError):
        return "0"
