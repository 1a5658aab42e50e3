"""The planner: candidates, ranking, margin, reasons in numbers, effective batch, admission.

Most tests use a stand-in estimator with round numbers (``fake_estimate``) so that what they
check is the planner's logic, not the estimator's calibration; the scenario tests at the end use
the real estimator and catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

import jupyter_quota
from jupyter_quota import quota
from jupyter_quota.errors import InvalidRequest
from jupyter_quota.jobspec import JobRequest, build_job
from jupyter_quota.planner import CANDIDATE_CAP, REJECTED_CAP, context_from_balance, plan
from jupyter_quota.planner.search import CANDIDATE_CAP as SEARCH_CANDIDATE_CAP
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.swift import parse_sft_args

GIB = 1024**3
GPU = "requests.nvidia.com/gpu"
LIMIT_RANGE = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "4", "memory": "32Gi"},
            "defaultRequest": {"cpu": "2", "memory": "16Gi"},
            "max": {"cpu": "16", "memory": "128Gi"},
        }
    ]
}


# -- a stand-in estimator with round numbers ---------------------------------------------------------


@dataclass
class FakeEstimate:
    peak_bytes_per_gpu: int
    breakdown: dict
    gpus: int = 1
    assumptions: list = field(default_factory=lambda: ["fake"])
    model: object = None  # .params: what the planner reads for an offload plan's host memory

    def to_json(self):
        return {
            "peakBytesPerGpu": self.peak_bytes_per_gpu,
            "peakGibPerGpu": round(self.peak_bytes_per_gpu / GIB, 2),
            "breakdown": self.breakdown,
            "assumptions": self.assumptions,
            "model": None,
            "gpus": self.gpus,
            "args": [],
        }


#: model -> billions of parameters; the fake's GiB figures are multiples of it
SIZES = {"fake/7b": 7, "fake/1b": 1, "fake/30b": 30}


def fake_estimate(args, gpus):
    """Weights 2/1/0.5 bytes a parameter (16-bit, 8-bit, 4-bit); full: bf16 grads + 4-byte Adam;
    ZeRO-1+ shards the optimizer, 2+ the gradients, 3 the weights; CPU offload keeps the optimizer
    and gradients (and with ZeRO-3 the weights) off the GPU; activations 1 GiB a sample (4 GiB
    without checkpointing, twice that with eager attention); 1 GiB overhead. The model has
    SIZES x 2**30 parameters (so offload's host memory is a whole number of GiB)."""
    if args.model not in SIZES:
        raise InvalidRequest(f"unknown model {args.model!r}")
    p = SIZES[args.model] * GIB
    stage, offload = args.deepspeed_stage
    bits = args.quantized_bits
    weights = p * {None: 2, 8: 1, 4: 0.5}[bits] / (gpus if stage == 3 else 1)
    full = args.tuner_type == "full"
    gradients = (2 * p / (gpus if stage >= 2 else 1)) if full else 0
    optimizer = (4 * p / (gpus if stage >= 1 else 1)) if full else 0
    if offload:
        gradients = optimizer = 0
        weights = 0 if stage == 3 else weights
    activations = args.per_device_train_batch_size * GIB * (1 if args.gradient_checkpointing else 4)
    activations *= 2 if args.attn_impl == "eager" else 1
    parts = {
        "weights": int(weights),
        "gradients": int(gradients),
        "optimizer": int(optimizer),
        "activations": int(activations),
        "logits": 0,
        "overhead": GIB,
    }
    return FakeEstimate(sum(parts.values()), parts, gpus, model=SimpleNamespace(params=p))


def profile(gpus="2", memory="80Gi", **extra):
    hard = {GPU: gpus, "limits.memory": "128Gi", "requests.cpu": "8", **extra.pop("hard", {})}
    return TeamProfile(
        team="t",
        namespace="team-t",
        hard=hard,
        limitRange=extra.pop("limitRange", LIMIT_RANGE),
        gpuMemory=memory,
        **extra,
    )


def balance_of(p: TeamProfile, used: dict | None = None) -> dict:
    """The balance a backend reports for ``p`` with ``used`` already taken."""
    quotas = []
    for rq in p.resource_quotas():
        status_used = {k: (used or {}).get(k, "0") for k in rq["spec"]["hard"]}
        quotas.append(quota.quota_status({**rq, "status": {"used": status_used}}, []))
        quotas[-1]["status"]["used"] = status_used
    return {"namespace": p.namespace, "team": p.team, **quota.balance(quotas)}


def run(argv, p=None, used=None, gpus=None, margin=0.10, estimate=fake_estimate):
    p = p or profile()
    context = context_from_balance(balance_of(p, used), p, margin=margin)
    return plan(argv, context, gpus=gpus, estimate=estimate).to_json()


def argv_value(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def peak_gib(p) -> float:
    return p["estimate"]["peakBytesPerGpu"] / GIB


# -- the request itself ---------------------------------------------------------------------------


def test_a_request_that_fits_is_recommended_unchanged():
    result = run(["--model", "fake/1b", "--tuner_type", "full"])
    best = result["recommended"]
    assert best["changes"] == [] and best["gpus"] == 1
    assert best["args"] == ["--model", "fake/1b", "--tuner_type", "full"]
    assert peak_gib(best) == 1 * 8 + 1 + 1  # weights 2 + grads 2 + Adam 4, activations, overhead
    assert result["rejected"] == [] or all(r["plan"]["args"] != best["args"] for r in result["rejected"])


def test_full_fine_tune_that_needs_more_gpus_moves_to_zero_on_two():
    # fake/7b full on one GPU: 14 + 14 + 28 + 1 + 1 = 58 GiB; a 48 GiB GPU leaves 43.2 usable
    result = run(["--model", "fake/7b", "--tuner_type", "full"], profile(memory="48Gi"))
    asked = result["rejected"][0]
    assert asked["plan"]["args"] == ["--model", "fake/7b", "--tuner_type", "full"]
    assert asked["reason"] == "needs 58 GiB per GPU; a GPU has 48 GiB (43.2 GiB with the 10% margin)"
    best = result["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "full" and best["gpus"] == 2
    assert argv_value(best["args"], "--deepspeed") == "zero2"  # fits (37 GiB) and is faster than zero3
    fields = [c["field"] for c in best["changes"]]
    assert fields == ["gpus", "deepspeed", "batch"]
    assert all(c["why"] for c in best["changes"])


def test_reasons_carry_numbers_when_the_team_lacks_gpus():
    # one free GPU of 24 GiB: fake/7b full needs 4 GPUs x ~17 GiB with zero3
    result = run(["--model", "fake/7b", "--tuner_type", "full"], profile(memory="24Gi"), used={GPU: "1"})
    reasons = [r["reason"] for r in result["rejected"]]
    method = next(r for r in reasons if r.startswith("full fine-tune needs"))
    m = re.fullmatch(r"full fine-tune needs (\d) GPUs x ([\d.]+) GiB with zero3; team-t has 1 GPU left", method)
    assert m, method
    gpus, gib = int(m.group(1)), float(m.group(2))
    assert gib <= 24 * 0.9 and gpus > 1
    # LoRA fits (14 + 1 + 1 = 16 GiB): recommended, with the full fine-tune's numbers as its why,
    # and why CPU offload does not help (it fits the GPU but not the pod's memory)
    best = result["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "lora" and "--quant_method" not in best["args"]
    change = best["changes"][0]
    assert (change["field"], change["from"], change["to"]) == ("method", "full fine-tune", "LoRA")
    assert change["why"] == method + "; with CPU offload " + next(
        r["reason"] for r in result["rejected"] if r["reason"].startswith("zero2_offload needs 168 GiB of host memory")
    )


def test_nothing_bigger_than_eight_gpus_is_reported_with_both_ends():
    result = run(["--model", "fake/30b", "--tuner_type", "full"], profile(memory="24Gi"))
    full = next(r["reason"] for r in result["rejected"] if r["reason"].startswith("full fine-tune"))
    assert re.fullmatch(
        r"full fine-tune needs 242 GiB per GPU on 1 GPU and [\d.]+ GiB even on 8 GPUs with zero3; "
        r"a GPU has 24 GiB \(21.6 GiB with the 10% margin\)",
        full,
    ), full


# -- ranking ----------------------------------------------------------------------------------------


def test_qlora_8_and_4_bit_share_a_quality_tier_so_speed_picks_4_bit():
    # LoRA asked on fake/30b (60 GiB weights) with a 48 GiB GPU: it does not fit; full (one class
    # up) does not either; QLoRA 8-bit (30 GiB) and 4-bit (15 GiB) fit, one tier: 4-bit is faster.
    result = run(["--model", "fake/30b"], profile(memory="48Gi", gpus="1"))
    labels = [c["summary"].split(",")[0] for c in result["candidates"]]
    assert labels[0] == "QLoRA 4-bit" and "QLoRA 8-bit" in labels
    eight = next(c for c in result["candidates"] if c["summary"].startswith("QLoRA 8-bit"))
    assert eight["relativeStepTime"] > result["candidates"][0]["relativeStepTime"]
    method = result["recommended"]["changes"][0]
    assert method["field"] == "method" and method["to"] == "QLoRA 4-bit"
    assert method["why"].startswith("LoRA needs ")
    assert "; full fine-tune needs 6 GPUs x 42 GiB with zero3; team-t has 1 GPU left; " in method["why"]
    assert round(peak_gib(eight)) == 32
    assert method["why"].endswith(
        "; QLoRA 8-bit also fits (32 GiB per GPU) but trains to the same quality "
        "(QLoRA paper: 4-bit NF4 matches 16-bit adapters) and more slowly"
    )


def test_qlora_8_bit_asked_and_fitting_is_kept():
    result = run(
        ["--model", "fake/30b", "--quant_method", "bnb", "--quant_bits", "8"], profile(memory="48Gi", gpus="1")
    )
    assert result["recommended"]["changes"] == []
    assert argv_value(result["recommended"]["args"], "--quant_bits") == "8"


def test_closeness_keeps_the_users_gpu_count_before_speed():
    result = run(["--model", "fake/1b"], gpus=1)
    assert result["recommended"]["gpus"] == 1 and result["recommended"]["changes"] == []
    faster = [c for c in result["candidates"] if c["gpus"] == 2]
    assert faster and all(c["relativeStepTime"] < 1 for c in faster)


def test_checkpointing_off_is_kept_when_it_fits_and_turned_on_when_not():
    fits = run(["--model", "fake/1b", "--gradient_checkpointing", "false", "--per_device_train_batch_size", "2"])
    assert fits["recommended"]["changes"] == []
    # 30b QLoRA 4-bit: 15 + 1 GiB + 2 samples x 4 GiB activations = 24 > 21.6: checkpointing goes on
    tight = run(
        [
            "--model",
            "fake/30b",
            "--quant_method",
            "bnb",
            "--quant_bits",
            "4",
            "--gradient_checkpointing",
            "false",
            "--per_device_train_batch_size",
            "2",
        ],
        profile(memory="24Gi"),
    )
    best = tight["recommended"]
    changed = {c["field"]: c for c in best["changes"]}
    assert "method" not in changed
    assert set(changed) & {"gradient_checkpointing", "batch"}
    assert peak_gib(best) <= 24 * 0.9


def test_eager_attention_is_replaced_when_it_does_not_fit():
    result = run(
        [
            "--model",
            "fake/7b",
            "--attn_impl",
            "eager",
            "--gradient_checkpointing",
            "false",
            "--per_device_train_batch_size",
            "2",
        ],
        profile(memory="24Gi"),
    )
    # 14 + 1 + 2 x 4 x 2 = 31 GiB eager; sdpa 23 GiB; checkpointing 17 GiB
    best = result["recommended"]
    assert "method" not in [c["field"] for c in best["changes"]]
    assert peak_gib(best) <= 21.6


# -- margin -----------------------------------------------------------------------------------------


def test_the_safety_margin_decides_a_close_fit():
    # fake/7b LoRA: 14 + 1 + 1 = 16 GiB on a 17 GiB GPU: fits raw, not with 10% kept free
    p = profile(memory="17Gi", gpus="1")
    strict = run(["--model", "fake/7b"], p)
    assert strict["rejected"][0]["reason"] == "needs 16 GiB per GPU; a GPU has 17 GiB (15.3 GiB with the 10% margin)"
    assert strict["recommended"]["changes"][0]["field"] == "method"
    loose = run(["--model", "fake/7b"], p, margin=0.05)
    assert loose["recommended"]["changes"] == [] and loose["margin"] == 0.05
    assert any("10% safety margin" in a for a in strict["assumptions"])


# -- effective batch --------------------------------------------------------------------------------


def test_effective_batch_is_kept_across_gpu_counts():
    result = run(["--model", "fake/1b", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "4"])
    assert result["request"]["effectiveBatch"] == 16
    for p in result["candidates"]:
        b, a = (
            int(argv_value(p["args"], "--per_device_train_batch_size")),
            int(argv_value(p["args"], "--gradient_accumulation_steps")),
        )
        assert b * a * p["gpus"] == p["effectiveBatch"] == 16, p["summary"]


def test_default_accumulation_is_ms_swifts_and_an_inexact_split_is_flagged():
    p = profile(gpus="3", hard={"requests.cpu": "24"})
    result = run(["--model", "fake/1b"], p, gpus=1)
    assert result["request"]["effectiveBatch"] == 16  # ms-swift: ceil(16 / 1 / 1)
    three = [c for c in result["candidates"] if c["gpus"] == 3]
    for c in three:
        batch = next(ch for ch in c["changes"] if ch["field"] == "batch")
        assert "instead of 16" in batch["why"]
    assert all(c["effectiveBatch"] == 16 for c in result["candidates"] if c["gpus"] in (1, 2))


# -- resources and admission ------------------------------------------------------------------------


def test_every_plan_passes_the_real_admission():
    p = profile()
    result = run(["--model", "fake/7b", "--tuner_type", "full"], p)
    context = context_from_balance(balance_of(p), p)
    assert result["candidates"]
    for c in result["candidates"]:
        res = c["resources"]
        assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == str(c["gpus"])
        job = build_job(p, JobRequest(name="check", args=c["args"], resources=res), "u", ["swift", "sft"])
        quota.admit_job(job, list(context.quotas), list(context.limit_ranges))  # raises if refused


def test_resources_scale_with_gpus_within_the_quota():
    result = run(["--model", "fake/1b"], gpus=2)
    two = result["recommended"]
    assert two["gpus"] == 2
    assert two["resources"]["requests"] == {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2"}
    assert two["resources"]["limits"] == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}
    # with 5 of 8 CPUs used, 2 GPUs get the LimitRange defaults (2 CPUs), which still fit
    tight = run(["--model", "fake/1b"], used={"requests.cpu": "5"}, gpus=2)["recommended"]
    assert tight["resources"]["requests"]["cpu"] == "3"


def test_cpu_quota_spent_refuses_with_the_api_servers_text():
    result = run(["--model", "fake/1b"], used={"requests.cpu": "7"})
    assert result["recommended"] is None
    assert result["rejected"][0]["reason"] == (
        "the pod would be refused: exceeded quota: team-quota, requested: requests.cpu=2, used: requests.cpu=7, "
        "limited: requests.cpu=8"
    )


def test_no_free_gpu_means_no_plan_and_says_so():
    result = run(["--model", "fake/1b"], used={GPU: "2"})
    assert result["recommended"] is None and result["candidates"] == [] and result["gpusFree"] == 0
    assert "asks for 1 GPU; team-t has 0 GPUs left" in result["rejected"][0]["reason"]
    assert "exceeded quota: team-quota" in result["rejected"][0]["reason"]
    assert any("nothing fits" in n for n in result["notes"])


# -- bounds, errors, inputs -------------------------------------------------------------------------


def test_lists_are_bounded_and_say_so():
    assert CANDIDATE_CAP == SEARCH_CANDIDATE_CAP
    p = profile(gpus="8", hard={"requests.cpu": "64", "limits.memory": "1Ti"})
    result = run(["--model", "fake/1b", "--tuner_type", "full"], p)
    assert len(result["candidates"]) == CANDIDATE_CAP
    assert len(result["rejected"]) <= REJECTED_CAP
    assert any("more fitting plans are not listed" in n for n in result["notes"])
    keys = [(tuple(c["args"]), c["gpus"]) for c in result["candidates"]]
    assert len(keys) == len(set(keys))


def test_unknown_gpu_memory_is_a_clear_error():
    p = TeamProfile(team="t", namespace="team-t", hard={GPU: "1"})
    with pytest.raises(InvalidRequest) as e:
        context_from_balance(balance_of(p), p)
    assert e.value.reason == "GpuMemoryUnknown" and "gpuMemory" in e.value.message
    context = context_from_balance(balance_of(p), p, inventory={"gpus": [{"index": 0, "memory": "40Gi"}]})
    assert context.gpu_memory == 40 * GIB


def test_a_bare_balance_dict_is_enough():
    balance = {"namespace": "team-x", "resources": {GPU: {"hard": "4", "used": "3", "remaining": "1"}}}
    context = context_from_balance(balance, gpu_memory="24Gi")
    assert context.gpus_remaining == 1 and context.gpu_memory == 24 * GIB
    result = plan(["--model", "fake/1b"], context, estimate=fake_estimate).to_json()
    assert result["recommended"]["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_older_argument_names_are_translated_with_notes():
    result = run(["--model", "fake/1b", "--sft_type", "full", "--batch_size", "2"])
    assert result["request"]["args"][:4] == ["--model", "fake/1b", "--tuner_type", "full"]
    assert any("--sft_type" in n for n in result["notes"])


def test_unknown_model_is_invalid():
    # a name stating no size, with no --model_size: nothing to estimate from (one with a size is approximate)
    with pytest.raises(InvalidRequest):
        run(["--model", "nobody/nothing"], estimate=None)


def test_parsed_args_work_too():
    asked = parse_sft_args(["--model", "fake/1b"])
    assert run(asked)["recommended"]["changes"] == []


# -- the real estimator: the scenarios of the issue -------------------------------------------------


def gamma_profile() -> TeamProfile:
    """The test profile beside the demo teams: one free 24 GiB GPU."""
    return TeamProfile(
        team="gamma",
        namespace="team-gamma",
        hard={GPU: "1", "requests.cpu": "8", "limits.memory": "64Gi"},
        limitRange=LIMIT_RANGE,
        gpuModel="RTX 4090",
        gpuMemory="24Gi",
    )


def test_classic_qwen_vl_full_on_one_24gib_gpu_is_refused_and_qlora_4_bit_is_recommended():
    p = gamma_profile()
    result = plan(["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"], context_from_balance(balance_of(p), p))
    result = result.to_json()
    asked = result["rejected"][0]
    assert asked["plan"]["args"] == ["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"]
    m = re.fullmatch(
        r"needs ([\d.]+) GiB \(the upper end of its range ([\d.]+)-([\d.]+); estimate ([\d.]+)\) per GPU; "
        r"a GPU has 24 GiB \(21.6 GiB with the 10% margin\)",
        asked["reason"],
    )
    assert m and float(m.group(1)) > 24, asked["reason"]
    need, low, high, point = map(float, m.groups())
    assert need == high and low <= point <= high
    assert need == round(asked["plan"]["estimate"]["rangeBytesPerGpu"][1] / 1024**3, 1)
    full = next(r["reason"] for r in result["rejected"] if r["reason"].startswith("full fine-tune needs"))
    assert "GiB" in full
    best = result["recommended"]
    assert argv_value(best["args"], "--quant_method") == "bnb" and argv_value(best["args"], "--tuner_type") == "lora"
    assert argv_value(best["args"], "--quant_bits") == "4"
    assert peak_gib(best) <= 24 * 0.9
    why = best["changes"][0]["why"]
    assert best["changes"][0]["field"] == "method" and why.startswith(full + "; with CPU offload zero")
    assert re.search(r"; with CPU offload zero[23]_offload needs [\d.]+ GiB of host memory \(DeepSpeed's estimate", why)
    assert (
        "the pod may have at most 128Gi (the LimitRange's max) and team-gamma has 64Gi of limits.memory left; "
        "LoRA needs "
    ) in why
    # no measured vision QLoRA run checks its range (docs/estimator.md §9.1): it is approximate and wider,
    # so 8-bit's upper end no longer fits where 4-bit's does
    assert best["estimate"]["regime"] == "approximate (qlora/single/*)"
    eight_bit = next(r for r in result["rejected"] if argv_value(r["plan"]["args"], "--quant_bits") == "8")
    assert re.match(r"QLoRA 8-bit needs ([\d.]+) GiB per GPU on 1 GPU", eight_bit["reason"])
    assert eight_bit["plan"]["estimate"]["rangeBytesPerGpu"][1] > best["estimate"]["rangeBytesPerGpu"][1]
    assert best["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_a_model_whose_code_ignores_attn_impl_gets_no_attention_changes():
    # Qwen-VL's modeling code computes attention eagerly whatever --attn_impl says
    p = gamma_profile()
    result = plan(["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"], context_from_balance(balance_of(p), p))
    result = result.to_json()
    plans = [*result["candidates"], *(r["plan"] for r in result["rejected"])]
    assert plans and not any("--attn_impl" in c["args"] for c in plans)
    assert not any("flash_attn" in r["reason"] for r in result["rejected"])
    # a model that honours it still gets flash_attn in its leanest variant
    other = plan(
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full"], context_from_balance(balance_of(p), p)
    ).to_json()
    assert any(argv_value(r["plan"]["args"], "--attn_impl") == "flash_attn" for r in other["rejected"])


def test_7b_full_fine_tune_on_team_alpha_gets_a_fitting_plan():
    from quota_testing import demo_config

    alpha = TeamProfile(**demo_config().JupyterQuota.profiles[0])
    result = plan(
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"],
        context_from_balance(balance_of(alpha), alpha),
    ).to_json()
    best = result["recommended"]
    assert best is not None and peak_gib(best) <= 80 * 0.9
    assert best["gpus"] <= 2
    assert result["search"]["estimates"] < 200


def test_python_entry_point_with_a_balance():
    p = gamma_profile()
    result = jupyter_quota.plan(
        "--model Qwen/Qwen2.5-0.5B-Instruct --tuner_type full", balance=balance_of(p), profile=p
    )
    assert result.to_json()["recommended"]["changes"] == []
    assert "Recommended:" in str(result)
    est = jupyter_quota.estimate(["--model", "Qwen/Qwen2.5-0.5B-Instruct"], gpus=1).to_json()
    assert est["peakBytesPerGpu"] == sum(est["breakdown"].values())


def test_a_fitting_request_on_its_only_gpu_gets_no_rejection_for_its_method():
    result = run(["--model", "fake/1b", "--tuner_type", "full"], profile(gpus="1"))
    assert result["recommended"]["changes"] == []
    assert not any("None" in r["reason"] or r["reason"].startswith("full fine-tune") for r in result["rejected"])


# -- DeepSpeed CPU offload: host memory against the pod's limit and the quota ----------------------
#
# fake/7b full on one free 48 GiB GPU (43.2 usable): 58 GiB plain; no second GPU for ZeRO.
# zero2_offload: 14 + 1 + 1 = 16 GiB on the GPU and, by DeepSpeed's estimate, 7 x 2**30
# parameters x 16 bytes x 1.5 = 168 GiB of host memory; zero3_offload: 2 GiB and 18 x 1.5 =
# 189 GiB.

FULL_7B = ["--model", "fake/7b", "--tuner_type", "full"]


def roomy(memory_max="256Gi", limits_memory="256Gi", **hard):
    limit_range = {"limits": [{**LIMIT_RANGE["limits"][0], "max": {"cpu": "16", "memory": memory_max}}]}
    return profile(gpus="1", memory="48Gi", limitRange=limit_range, hard={"limits.memory": limits_memory, **hard})


def offload_reasons(result) -> dict:
    return {
        argv_value(r["plan"]["args"], "--deepspeed"): r["reason"]
        for r in result["rejected"]
        if "offload" in str(argv_value(r["plan"]["args"], "--deepspeed"))
    }


def test_offload_is_chosen_for_a_full_fine_tune_when_host_memory_fits():
    p = roomy()
    result = run(FULL_7B, p)
    best = result["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "full"
    assert argv_value(best["args"], "--deepspeed") == "zero2_offload" and best["gpus"] == 1
    assert peak_gib(best) == 16 and best["hostMemory"] == "168Gi"
    # the pod's memory request and limit are raised to the host need, and admission takes them
    assert best["resources"]["requests"]["memory"] == best["resources"]["limits"]["memory"] == "168Gi"
    context = context_from_balance(balance_of(p), p)
    job = build_job(p, JobRequest(name="check", args=best["args"], resources=best["resources"]), "u", ["swift", "sft"])
    quota.admit_job(job, list(context.quotas), list(context.limit_ranges))
    deepspeed = next(c for c in best["changes"] if c["field"] == "deepspeed")
    assert "168 GiB" in deepspeed["why"] and "host memory" in deepspeed["why"]
    assert any("estimate_zero2_model_states_mem_needs" in a for a in result["assumptions"])
    assert "168 GiB host memory" in best["summary"]
    # zero3_offload (189 GiB) fits the 256Gi too; slower, so it comes after
    labels = [argv_value(c["args"], "--deepspeed") for c in result["candidates"]]
    assert labels[:2] == ["zero2_offload", "zero3_offload"]


def test_offload_is_refused_with_numbers_when_the_pod_may_not_have_the_memory():
    result = run(FULL_7B, roomy(memory_max="128Gi", limits_memory="128Gi"))
    reasons = offload_reasons(result)
    assert reasons["zero2_offload"] == (
        "zero2_offload needs 168 GiB of host memory (DeepSpeed's estimate for ZeRO-2 with optimizer offload: "
        "7.52B parameters x max(4 x 1 GPU, 16) = 16 bytes x 1.5); the pod may have at most 128Gi (the "
        "LimitRange's max) and team-t has 128Gi of limits.memory left"
    )
    assert reasons["zero3_offload"].startswith(
        "zero3_offload needs 189 GiB of host memory (DeepSpeed's estimate "
        "for ZeRO-3 with parameter and optimizer offload: 7.52B parameters x "
        "18 bytes x 1.5)"
    )
    best = result["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "lora"
    assert "with CPU offload " + reasons["zero2_offload"] in best["changes"][0]["why"]


def test_offload_counts_what_the_quota_has_left():
    # the LimitRange allows 256Gi but 100Gi of limits.memory is taken: 156Gi left, enough for
    # zero2_offload (168 GiB)? no; with 70Gi taken (186Gi left) zero2 fits and zero3 (189) does not
    short = run(FULL_7B, roomy(), used={"limits.memory": "100Gi"})
    assert offload_reasons(short)["zero2_offload"].endswith(
        "the pod may have at most 256Gi (the LimitRange's max) and team-t has 156Gi of limits.memory left"
    )
    assert argv_value(short["recommended"]["args"], "--tuner_type") == "lora"
    split = run(FULL_7B, roomy(), used={"limits.memory": "70Gi"})
    assert argv_value(split["recommended"]["args"], "--deepspeed") == "zero2_offload"
    assert offload_reasons(split)["zero3_offload"].endswith("team-t has 186Gi of limits.memory left")
    # a requests.memory quota is read too
    requests = run(FULL_7B, roomy(**{"requests.memory": "160Gi"}))
    assert offload_reasons(requests)["zero2_offload"].endswith(
        "team-t has 256Gi of limits.memory and 160Gi of requests.memory left"
    )


def test_offload_is_tried_only_when_no_plain_strategy_fits():
    # fake/7b full on two 48 GiB GPUs: zero2 fits (37 GiB), so no offload is tried
    result = run(FULL_7B, profile(memory="48Gi", hard={"limits.memory": "512Gi"}))
    seen = [c["args"] for c in result["candidates"]] + [r["plan"]["args"] for r in result["rejected"]]
    assert not any("offload" in str(argv_value(a, "--deepspeed")) for a in seen)
    assert not any("offload" in a for a in result["assumptions"])
    # and only for a full fine-tune: LoRA asked on the fake 30b (fits nowhere; QLoRA does) gets no
    # LoRA offload plan
    lora = run(["--model", "fake/30b"], profile(memory="48Gi", gpus="1", hard={"limits.memory": "2Ti"}))
    assert not any(
        "offload" in str(argv_value(c["args"], "--deepspeed"))
        for c in lora["candidates"]
        if argv_value(c["args"], "--tuner_type") != "full"
    )


def test_full_with_offload_ranks_above_lora_and_after_plain_at_equal_method():
    from jupyter_quota.planner.options import BatchSplit, methods_for
    from jupyter_quota.planner.search import Evaluated, Search

    result = run(FULL_7B, roomy())
    methods = [
        (argv_value(c["args"], "--tuner_type"), argv_value(c["args"], "--deepspeed")) for c in result["candidates"]
    ]
    first_lora = methods.index(next(m for m in methods if m[0] == "lora"))
    assert all(m[0] == "full" and "offload" in m[1] for m in methods[:first_lora])
    # at equal method, an added offload ranks after any plain plan, even one that changes more
    p = profile(memory="48Gi")
    asked = parse_sft_args(FULL_7B)
    search = Search(asked, 1, context_from_balance(balance_of(p), p), fake_estimate)
    full = methods_for(asked)[0]
    plain = Evaluated(
        asked.replace(deepspeed="zero3", per_device_train_batch_size=1, gradient_accumulation_steps=8),
        2,
        full,
        BatchSplit(1, 8, True),
        fake_estimate(asked, 2),
    )
    offload = Evaluated(
        asked.replace(deepspeed="zero2_offload"), 1, full, BatchSplit(1, 16, True), fake_estimate(asked, 1)
    )
    for ev in (plain, offload):
        search._finish(ev)
    assert len(plain.changes) > len(offload.changes) and plain.key < offload.key
    # ... unless the user asked for offload: then it is what they asked
    result = run([*FULL_7B, "--deepspeed", "zero2_offload"], roomy())
    assert result["recommended"]["changes"] == [] and result["recommended"]["hostMemory"] == "168Gi"


def test_an_offload_request_that_the_pod_cannot_hold_is_refused_with_numbers():
    result = run([*FULL_7B, "--deepspeed", "zero3_offload"], roomy(memory_max="128Gi", limits_memory="128Gi"))
    asked = result["rejected"][0]
    assert asked["plan"]["args"] == [*FULL_7B, "--deepspeed", "zero3_offload"]
    assert asked["reason"].startswith("zero3_offload needs 189 GiB of host memory")
    assert result["recommended"] is not None and "offload" not in result["recommended"]["summary"]


def test_offload_host_memory_follows_deepspeeds_formulas():
    from jupyter_quota.planner.resources import offload_host_bytes

    p = 7_000_000_000
    args = parse_sft_args(["--model", "fake/7b", "--tuner_type", "full", "--deepspeed", "zero2_offload"])
    assert offload_host_bytes(args, p, 1)[0] == int(p * 16 * 1.5)  # max(4 x 1, 16)
    assert offload_host_bytes(args, p, 8)[0] == int(p * 32 * 1.5)  # max(4 x 8, 16)
    z3 = args.replace(deepspeed="zero3_offload")
    assert offload_host_bytes(z3, p, 1)[0] == offload_host_bytes(z3, p, 4)[0] == int(p * 18 * 1.5)
    assert offload_host_bytes(args.replace(deepspeed="zero3"), p, 2) == (0, "")


def test_7b_full_on_team_alpha_offload_needs_more_host_memory_than_the_demo_allows():
    """The demo's team-alpha (128Gi LimitRange max and limits.memory): a 7B full fine-tune fits the
    GPU with offload, but DeepSpeed's host estimate (170 GiB for zero2_offload) does not fit the pod."""
    from quota_testing import demo_config

    alpha = TeamProfile(**demo_config().JupyterQuota.profiles[0])
    argv = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"]
    result = plan(argv, context_from_balance(balance_of(alpha), alpha)).to_json()
    reasons = offload_reasons(result)
    m = re.fullmatch(
        r"zero2_offload needs ([\d.]+) GiB of host memory \(DeepSpeed's estimate for ZeRO-2 with "
        r"optimizer offload: 7.62B parameters x max\(4 x 1 GPU, 16\) = 16 bytes x 1.5\); the pod may "
        r"have at most 128Gi \(the LimitRange's max\) and team-alpha has 128Gi of limits.memory left",
        reasons["zero2_offload"],
    )
    assert m and float(m.group(1)) > 128, reasons
    assert reasons["zero3_offload"].startswith("zero3_offload needs ")
    best = result["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "lora"
    assert "with CPU offload zero2_offload needs" in best["changes"][0]["why"]

    # the same team with 256Gi for a pod and in its quota: full fine-tune with zero2_offload
    demo = demo_config().JupyterQuota.profiles[0]
    limit_range = {
        "limits": [
            {**demo["limitRange"]["limits"][0], "max": {**demo["limitRange"]["limits"][0]["max"], "memory": "256Gi"}}
        ]
    }
    big = TeamProfile(**{**demo, "limitRange": limit_range, "hard": {**demo["hard"], "limits.memory": "256Gi"}})
    context = context_from_balance(balance_of(big), big)
    best = plan(argv, context).to_json()["recommended"]
    assert argv_value(best["args"], "--tuner_type") == "full"
    assert argv_value(best["args"], "--deepspeed") == "zero2_offload"
    assert peak_gib(best) <= 80 * 0.9
    need = float(m.group(1))
    assert best["resources"]["limits"]["memory"] == best["resources"]["requests"]["memory"] == f"{int(-(-need // 1))}Gi"
    job = build_job(
        big, JobRequest(name="check", args=best["args"], resources=best["resources"]), "u", ["swift", "sft"]
    )
    quota.admit_job(job, list(context.quotas), list(context.limit_ranges))


def test_an_fsdp_request_keeps_fsdp_and_never_gets_deepspeed_beside_it():
    # ms-swift refuses --fsdp with --deepspeed; FSDP shards as ZeRO-3 does, so more GPUs help
    from jupyter_quota.estimator import estimate as real_estimate

    argv = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--fsdp", "fsdp2"]
    result = run(argv, profile(gpus="4", memory="48Gi"), estimate=real_estimate)
    plans = [result["recommended"], *result["candidates"], *(r["plan"] for r in result["rejected"])]
    assert plans and all("--deepspeed" not in p["args"] and "--fsdp" in p["args"] for p in plans)
    best = result["recommended"]
    assert best["gpus"] > 1 and "FSDP" in best["summary"]


def test_lora_on_an_moe_model_peft_converts_is_planned_with_the_dropout_its_setup_accepts():
    # docs/estimator.md §2.3: GLM-4.7-Flash's MLP names move to the stacked experts, whose PEFT
    # ParamWrapper refuses ms-swift's default lora_dropout 0.05 (tests/test_estimator_moe_lora.py)
    big = profile(gpus="8", memory="141Gi")
    real = jupyter_quota.estimate
    converted = run(["--model", "zai-org/GLM-4.7-Flash", "--tuner_type", "lora"], big, estimate=real)
    plain = run(["--model", "Qwen/Qwen3-30B-A3B", "--tuner_type", "lora"], big, estimate=real)

    best = converted["recommended"]
    assert argv_value(best["args"], "--lora_dropout") == "0.0"
    assert {k: best["changes"][0][k] for k in ("field", "from", "to")} == {
        "field": "lora_dropout",
        "from": 0.05,
        "to": 0.0,
    }
    assert "ParamWrapper" in best["changes"][0]["why"] and any("--lora_dropout 0" in n for n in converted["notes"])
    assert converted["request"]["args"] == ["--model", "zai-org/GLM-4.7-Flash", "--tuner_type", "lora"]
    assert "--lora_dropout" not in plain["recommended"]["args"]
