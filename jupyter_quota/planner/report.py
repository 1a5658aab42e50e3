"""Plain-text views of an estimate and a plan, for ``jupyter quota estimate|plan`` and notebooks."""

from __future__ import annotations

import json
import shlex

from ..estimator import BREAKDOWN_KEYS as BREAKDOWN
from .context import GIB


def range_phrase(estimate: dict) -> str:
    """``, range 17.5-23.5 GiB (regime lora/single/dense)``, or nothing for an estimate without one."""
    span = estimate.get("rangeGibPerGpu")
    if not span:
        return ""
    approximate = ", approximate model" if estimate.get("approximate") else ""
    return f", range {span[0]:.1f}-{span[1]:.1f} GiB (regime {estimate.get('regime')}{approximate})"


def command_line(args: list[str], gpus: int) -> str:
    """A ready-to-copy shell command, with ``NPROC_PER_NODE`` as the submitted job gets it."""
    from ..jobspec import processes_per_node

    processes = processes_per_node(gpus, args)
    return (f"NPROC_PER_NODE={processes} " if processes else "") + shlex.join(["swift", "sft", *args])


def estimate_text(estimate: dict, notes=()) -> str:
    """The peak per GPU, a breakdown table in GiB that adds up to it, the assumptions."""
    gpus = estimate.get("gpus") or 1
    model = estimate.get("model")
    name = model.get("name") if isinstance(model, dict) else model
    lines = [
        f"{name or 'model'} on {gpus} GPU{'s' if gpus != 1 else ''}: "
        f"peak {_gib(estimate['peakBytesPerGpu'])} GiB per GPU{range_phrase(estimate)}"
        + (" (approximate: the architecture is guessed from the model's size)" if estimate.get("approximate") else ""),
        "",
    ]
    lines += _breakdown_table(estimate, indent="  ")
    lines += _bullets("notes", notes)
    lines += _bullets("assumptions", estimate.get("assumptions") or [])
    return "\n".join(lines)


def plan_text(result: dict) -> str:
    """The recommended plan as a command, the alternatives as a table, the rejected with reasons."""
    lines = [
        f"{result['namespace']} (team {result['team']}): {result['gpusFree']} GPU"
        f"{'s' if result['gpusFree'] != 1 else ''} left, {_gi(result['gpuMemory'])} per GPU "
        f"({_gi(result['usableGpuMemory'])} usable with the {result['margin'] * 100:g}% margin)"
    ]
    request = result["request"]
    lines.append(
        f"request: {shlex.join(request['args'])} on {request['gpus']} GPU"
        f"{'s' if request['gpus'] != 1 else ''} "
        f"(estimated {request['estimate']['peakGibPerGpu']:.1f} GiB per GPU{range_phrase(request['estimate'])}, "
        "effective batch "
        f"{request['effectiveBatch']})"
    )
    lines.append("")
    best = result["recommended"]
    if best is None:
        lines.append("No plan fits now.")
    else:
        lines.append(f"Recommended: {best['summary']}")
        for c in best["changes"]:
            lines.append(f"  {c['field']}: {_shown(c['from'])} -> {_shown(c['to'])}  ({c['why']})")
        if not best["changes"]:
            lines.append("  (your request as given fits)")
        lines.append("")
        lines += _breakdown_table(best["estimate"], indent="  ")
        res = best["resources"] or {}
        lines.append("")
        lines.append(
            f"  pod resources: requests {_quantities(res.get('requests'))}; limits {_quantities(res.get('limits'))}"
        )
        lines.append("")
        lines.append("  command:")
        lines.append(f"    {command_line(best['args'], best['gpus'])}")
        body = {"args": best["args"], "gpus": best["gpus"], "resources": res}
        lines.append(f"  or submit: POST quota/v1/namespaces/{result['namespace']}/jobs {json.dumps(body)}")
    others = result["candidates"][1:]
    if others:
        lines += ["", "Alternatives:"]
        width = max(len(p["summary"]) for p in others)
        lines.append(f"  {'plan':<{width}}  {'time':>5}")
        for p in others:
            lines.append(f"  {p['summary']:<{width}}  {p['relativeStepTime']:>5.2f}")
        lines.append("  (time: one optimizer step relative to the request as given; a rough guide)")
    if result["rejected"]:
        lines += ["", "Rejected:"]
        for r in result["rejected"]:
            lines.append(f"  - {r['plan']['summary']}")
            lines.append(f"      {r['reason']}")
    lines += _bullets("notes", result.get("notes") or [])
    lines += _bullets("assumptions", result.get("assumptions") or [])
    return "\n".join(lines)


def _breakdown_table(estimate: dict, indent: str) -> list[str]:
    breakdown = estimate.get("breakdown") or {}
    keys = [k for k in BREAKDOWN if k in breakdown] + sorted(k for k in breakdown if k not in BREAKDOWN)
    rows = [f"{indent}{'part':<12} {'GiB':>8}"]
    rows += [f"{indent}{k:<12} {_gib(breakdown[k]):>8.2f}" for k in keys]
    rows.append(f"{indent}{'peak':<12} {_gib(estimate['peakBytesPerGpu']):>8.2f}")
    if estimate.get("rangeGibPerGpu"):
        low, high = estimate["rangeGibPerGpu"]
        rows.append(f"{indent}{'range':<12} {low:>8.2f} - {high:.2f}  ({estimate.get('regime')})")
    return rows


def _bullets(title: str, items) -> list[str]:
    items = list(items)
    return ["", f"{title}:", *[f"  - {i}" for i in items]] if items else []


def _quantities(values: dict | None) -> str:
    return " ".join(f"{k}={v}" for k, v in (values or {}).items()) or "none"


def _gib(n) -> float:
    return round(n / GIB, 2)


def _gi(quantity: str) -> str:
    return quantity[:-2] + " GiB" if quantity.endswith("Gi") else quantity


def _shown(value) -> str:
    return "default" if value is None else str(value)
