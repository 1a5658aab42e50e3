"""A job request becomes a batch/v1 Job: validation of untrusted input, and the Job's shape."""

from __future__ import annotations

import pytest

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.jobspec import build_job, job_args, job_pod, label_value, parse_job_request
from jupyter_quota.profiles import TeamProfile


@pytest.fixture
def profile():
    return TeamProfile(team="alpha", namespace="team-alpha", hard={"requests.nvidia.com/gpu": "2"},
                       nodeSelector={"gpu": "a100"}, priorityClassName="training",
                       tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])


def test_gpus_shorthand_sets_request_and_limit(profile):
    request = parse_job_request({"args": ["--model", "m"], "gpus": 2}, profile)
    assert request.resources == {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}


def test_quantities_come_back_canonical(profile):
    request = parse_job_request({"resources": {"requests": {"cpu": "1.5", "memory": "1.5Gi"}}}, profile)
    assert request.resources["requests"] == {"cpu": "1500m", "memory": "1536Mi"}


def test_generated_names_are_valid_and_distinct(profile):
    names = {parse_job_request({}, profile).name for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("sft-") and len(n) == 12 for n in names)


def test_the_job_carries_argv_labels_and_profile_placement(profile):
    request = parse_job_request({"name": "j1", "args": ["--dataset", "a b; rm -rf ~"], "gpus": 1}, profile)
    job = build_job(profile, request, "alice@example.org", ["swift", "sft"], image="img:1")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["swift", "sft", "--dataset", "a b; rm -rf ~"]
    assert container["image"] == "img:1"
    assert job["metadata"]["labels"]["jupyter-quota/user"] == "alice_example.org"
    assert job["metadata"]["annotations"]["jupyter-quota/owner"] == "alice@example.org"
    spec = job["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"gpu": "a100"} and spec["priorityClassName"] == "training"
    assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert job_args(job) == ["--dataset", "a b; rm -rf ~"]
    pod = job_pod(job)
    assert pod["metadata"]["generateName"] == "j1-" and pod["spec"]["containers"][0]["name"] == "train"


@pytest.mark.parametrize("text, expected", [("alice", "alice"), ("a@b.c", "a_b.c"), ("--x--", "x"),
                                            ("", "unknown"), ("é" * 100, "unknown"), ("a" * 80, "a" * 63)])
def test_label_values_are_valid(text, expected):
    assert label_value(text) == expected


@pytest.mark.parametrize("body", [{"gpus": 0.001}, {"gpus": "1.5"}, {"resources": {"limits": {"nvidia.com/gpu": "100m"}}}])
def test_fractional_gpus_are_refused(profile, body):
    with pytest.raises(InvalidRequest, match="whole"):
        parse_job_request(body, profile)


def test_a_profile_with_another_gpu_resource_accepts_it(profile):
    amd = TeamProfile(team="amd", gpuResource="amd.com/gpu")
    assert parse_job_request({"gpus": 1}, amd).resources["limits"] == {"amd.com/gpu": "1"}
    with pytest.raises(InvalidRequest, match="unknown resource"):
        parse_job_request({"resources": {"limits": {"nvidia.com/gpu": "1"}}}, amd)


@pytest.mark.parametrize("gpus, args, expected", [(2, [], "2"), (4, ["--deepspeed", "zero3"], "4"),
                                                  (1, ["--deepspeed", "zero2"], "1"), (1, ["--deepspeed=zero2"], "1"),
                                                  (1, [], None), (0, [], None)])
def test_multi_gpu_and_deepspeed_jobs_get_one_rank_per_gpu(profile, gpus, args, expected):
    job = build_job(profile, parse_job_request({"args": args, "gpus": gpus}, profile), "u", ["swift", "sft"])
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    assert env.get("NPROC_PER_NODE") == expected
