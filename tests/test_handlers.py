"""The REST API on a real jupyter-server with the demo teams (local backend), in both modes:
the server as the quota authority, and the server forwarding to a quota service."""

from __future__ import annotations

import getpass
import re

import pytest
from quota_testing import QUOTA_MODES, wait_for_phase

from jupyter_quota.quantity import Quantity

GPU = "requests.nvidia.com/gpu"


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


async def test_namespaces_lists_only_the_callers_teams(api):
    status, body = await api("GET", "namespaces")
    assert status == 200
    names = [n["name"] for n in body["namespaces"]]
    assert names == ["team-alpha"], f"{getpass.getuser()} is in alpha only: {names}"
    balance = body["namespaces"][0]["balance"]
    assert balance["resources"][GPU] == {"hard": "2", "used": "0", "remaining": "2"}
    assert balance["resources"]["limits.memory"]["hard"] == "128Gi"
    assert balance["stale"] is False


async def test_foreign_namespace_is_refused_on_every_route(api):
    for method, path, body in [
        ("GET", ("namespaces", "team-beta", "balance"), None),
        ("GET", ("namespaces", "team-beta", "jobs"), None),
        ("POST", ("namespaces", "team-beta", "jobs"), {"args": [], "gpus": 1}),
        ("GET", ("namespaces", "team-beta", "jobs", "x"), None),
        ("GET", ("namespaces", "team-beta", "jobs", "x", "logs"), None),
        ("DELETE", ("namespaces", "team-beta", "jobs", "x"), None),
    ]:
        status, answer = await api(method, *path, body=body)
        assert status == 403, (method, path, answer)
        assert answer["reason"] == "Forbidden"
        assert "team-beta" in answer["message"] and "team-alpha" in answer["message"]
        assert "resources" not in answer and "jobs" not in answer


async def test_unknown_namespace_is_404(api):
    status, answer = await api("GET", "namespaces", "kube-system", "balance")
    assert status == 404 and answer["reason"] == "NotFound"


async def test_four_gpus_get_the_api_servers_exceeded_quota_text(api):
    status, answer = await api(
        "POST", "namespaces", "team-alpha", "jobs", body={"args": ["--model", "Qwen/Qwen2.5-0.5B"], "gpus": 4}
    )
    assert status == 403
    assert answer == {
        "reason": "ExceededQuota",
        "message": "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=4, "
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2",
    }
    status, jobs = await api("GET", "namespaces", "team-alpha", "jobs")
    assert jobs["jobs"] == []


@pytest.mark.parametrize("gpus", [0.001, "0.001", "1500m", 0.5])
async def test_fractional_gpus_are_refused_as_whole(api, gpus):
    status, answer = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": [], "gpus": gpus})
    assert status == 400, answer
    assert "whole" in answer["message"] and "nvidia.com/gpu" in answer["message"]


async def test_submit_runs_a_job_to_success_and_releases_quota(api, tmp_path):
    # The job ends when the test has seen it charged (a file), not after 0.2 s that a loaded
    # machine spends before the balance is read.
    release = tmp_path / "release"
    status, job = await api(
        "POST",
        "namespaces",
        "team-alpha",
        "jobs",
        body={"name": "ok-1", "args": ["--env", "--lines", "3", "--until-file", str(release)], "gpus": 1},
    )
    assert status == 201, job
    assert job["name"] == "ok-1" and job["owner"] == getpass.getuser() and job["gpus"] == 1
    # The LimitRange defaults filled what the request left out.
    assert job["resources"]["requests"]["cpu"] == "2"
    assert job["resources"]["limits"]["memory"] == "32Gi"
    _, balance = await api("GET", "namespaces", "team-alpha", "balance")
    assert balance["resources"][GPU]["used"] == "1"
    assert balance["resources"]["requests.cpu"]["used"] == "2"
    release.touch()
    done = await wait_for_phase(api, "team-alpha", "ok-1", {"Succeeded", "Failed"})
    assert done["phase"] == "Succeeded", done
    status, logs = await api("GET", "namespaces", "team-alpha", "jobs", "ok-1", "logs", params={"tailLines": "50"})
    assert status == 200 and f"CUDA_VISIBLE_DEVICES={','.join(map(str, done['gpuIndices']))}" in logs["logs"]
    assert len(done["gpuIndices"]) == 1
    _, balance = await api("GET", "namespaces", "team-alpha", "balance")
    assert balance["resources"][GPU]["used"] == "0"


async def test_cancel_stops_the_job_and_frees_its_gpus(api, hold):
    status, job = await api(
        "POST", "namespaces", "team-alpha", "jobs", body={"name": "long-1", "args": hold, "gpus": 2}
    )
    assert status == 201, job
    await wait_for_phase(api, "team-alpha", "long-1", {"Running"})
    status, answer = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": [], "gpus": 1})
    assert status == 403 and answer["reason"] == "ExceededQuota"
    status, cancelled = await api("DELETE", "namespaces", "team-alpha", "jobs", "long-1")
    assert status == 200, cancelled
    done = await wait_for_phase(api, "team-alpha", "long-1", {"Failed"})
    assert done["reason"] == "Cancelled"
    status, job = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": [], "gpus": 2})
    assert status == 201, job


async def test_duplicate_name_is_409(api):
    body = {"name": "same", "args": ["--sleep", "5"], "gpus": 0}
    assert (await api("POST", "namespaces", "team-alpha", "jobs", body=body))[0] == 201
    status, answer = await api("POST", "namespaces", "team-alpha", "jobs", body=body)
    assert status == 409 and 'jobs.batch "same" already exists' in answer["message"]


async def test_generate_name_lets_the_same_request_run_again(api):
    body = {"generateName": "tiny-demo-", "args": [], "gpus": 0}
    names = []
    for _ in range(2):
        status, job = await api("POST", "namespaces", "team-alpha", "jobs", body=body)
        assert status == 201, job
        names.append(job["name"])
        assert (await wait_for_phase(api, "team-alpha", job["name"], {"Succeeded", "Failed"}))["phase"] == "Succeeded"
    assert names[0] != names[1]
    assert all(re.fullmatch(r"tiny-demo-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in names), names


@pytest.mark.parametrize(
    "body, words",
    [
        ("{not json", "not valid JSON"),
        ([], "JSON object"),
        ({"args": "--model x"}, "list of strings"),
        ({"args": ["ok", 3]}, "args[1]"),
        ({"args": ["a\x00b"]}, "control character"),
        ({"args": ["x" * 9000]}, "at most"),
        ({"args": ["x"] * 600}, "at most"),
        ({"name": "Bad_Name"}, "not a valid job name"),
        ({"name": "a" * 64}, "at most 63"),
        ({"name": "x; rm -rf /"}, "not a valid job name"),
        ({"gpus": -1}, "greater than or equal to 0"),
        ({"gpus": True}, "whole number"),
        ({"gpus": "two"}, "not a number"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "not a Kubernetes quantity"),
        ({"resources": {"requests": {"cpu": "-1"}}}, "greater than or equal to 0"),
        ({"resources": {"requests": {"amd.com/gpu": "1"}}}, "unknown resource"),
        ({"resources": {"requests": {"nvidia.com/gpu": "0.5"}}}, "whole"),
        ({"resources": {"claims": []}}, "requests"),
        ({"gpus": 1, "resources": {"limits": {"nvidia.com/gpu": "2"}}}, "disagrees"),
        ({"args": [], "queue": "high"}, "unknown field"),
        ({"args": [], "priority": "urgent"}, 'priority must be "high", "normal" or "best-effort"'),
    ],
)
async def test_bad_input_is_400_with_a_message(api, body, words):
    status, answer = await api("POST", "namespaces", "team-alpha", "jobs", body=body)
    assert status == 400, answer
    assert set(answer) == {"reason", "message"}
    assert words in answer["message"], answer["message"]
    _, jobs = await api("GET", "namespaces", "team-alpha", "jobs")
    assert jobs["jobs"] == []


async def test_request_beyond_the_limit_range_gets_limitranger_text(api):
    status, answer = await api(
        "POST", "namespaces", "team-alpha", "jobs", body={"gpus": 1, "resources": {"limits": {"memory": "200Gi"}}}
    )
    assert status == 403
    assert answer["reason"] == "LimitRangeViolation"
    assert answer["message"] == "maximum memory usage per Container is 128Gi, but limit is 200Gi"


async def test_request_above_limit_is_invalid(api):
    status, answer = await api(
        "POST", "namespaces", "team-alpha", "jobs", body={"resources": {"requests": {"cpu": "6"}}}
    )
    assert status == 400 and answer["reason"] == "Invalid"
    assert "must be less than or equal to cpu limit of 4" in answer["message"]


async def test_logs_tail_lines_is_validated(api):
    await api("POST", "namespaces", "team-alpha", "jobs", body={"name": "lg", "args": [], "gpus": 0})
    for bad in ("0", "abc", "100000", "\x02", "", "\uff11\uff10", " 5"):  # control, empty, full-width, padded: 400
        status, answer = await api("GET", "namespaces", "team-alpha", "jobs", "lg", "logs", params={"tailLines": bad})
        assert status == 400, answer


async def test_jobs_are_listed_in_pages_with_a_continue_token(api):
    for name in ("page-1", "page-2", "page-3"):
        status, job = await api("POST", "namespaces", "team-alpha", "jobs", body={"name": name, "args": [], "gpus": 0})
        assert status == 201, job
    status, first = await api("GET", "namespaces", "team-alpha", "jobs", params={"limit": "2"})
    assert status == 200, first
    assert [j["name"] for j in first["jobs"]] == ["page-3", "page-2"]
    assert first["metadata"]["remainingItemCount"] == 1
    status, last = await api(
        "GET", "namespaces", "team-alpha", "jobs", params={"limit": "2", "continue": first["metadata"]["continue"]}
    )
    assert status == 200 and [j["name"] for j in last["jobs"]] == ["page-1"]
    assert last["metadata"] == {}
    status, every = await api("GET", "namespaces", "team-alpha", "jobs")  # the default page holds 100
    assert [j["name"] for j in every["jobs"]] == ["page-3", "page-2", "page-1"] and every["metadata"] == {}
    for params, text in (
        ({"continue": "garbage"}, "invalid continue token: continue key is not valid"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 1000"),
        ({"limit": "99999"}, "limit must be a whole number from 1 to 1000"),
    ):
        status, refused = await api("GET", "namespaces", "team-alpha", "jobs", params=params)
        assert status == 400 and refused["reason"] == "BadRequest" and text in refused["message"], refused


async def test_unknown_job_is_404(api):
    for method in ("GET", "DELETE"):
        status, answer = await api(method, "namespaces", "team-alpha", "jobs", "nope")
        assert status == 404 and answer["reason"] == "NotFound"


async def test_identity_and_inventory(api):
    status, me = await api("GET", "identity")
    assert status == 200 and me["name"] == getpass.getuser() and me["namespaces"] == ["team-alpha"]
    assert me["admin"] is False and me["backend"] == "local"
    status, inventory = await api("GET", "inventory")
    assert inventory["source"] == "declared" and len(inventory["gpus"]) == 4
    assert Quantity(inventory["memory"]) == Quantity("256Gi")


async def test_models_lists_the_estimators_catalog(api):
    from jupyter_quota.estimator.catalog import names

    status, answer = await api("GET", "models")
    assert status == 200
    ids = [m["id"] for m in answer["models"]]
    assert ids == names() and len(ids) > 100
    by_id = {m["id"]: m for m in answer["models"]}
    assert 7.5e9 < by_id["Qwen/Qwen2.5-7B-Instruct"]["params"] < 7.7e9
    assert by_id["Qwen/Qwen-VL-Chat"]["vision"] is True and by_id["Qwen/Qwen3-30B-A3B"]["experts"] == 128
    # each listed id is accepted by the estimator as is
    status, estimate = await api("POST", "estimate", body={"args": ["--model", ids[-1]], "gpus": 1})
    assert status == 200 and estimate["peakBytesPerGpu"] > 0


async def test_profiles_need_an_admin(api):
    status, answer = await api("GET", "profiles")
    assert status == 403 and "admin" in answer["message"]
    status, answer = await api("PUT", "profiles", "alpha", body={"hard": {"requests.nvidia.com/gpu": "8"}})
    assert status == 403
    _, balance = await api("GET", "namespaces", "team-alpha", "balance")
    assert balance["resources"][GPU]["hard"] == "2"


@pytest.mark.parametrize(
    "resources, words",
    [
        (
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            "must be equal to nvidia.com/gpu limit of 2",
        ),
        ({"requests": {"nvidia.com/gpu": "1"}}, "Limit must be set for non overcommitable resources"),
    ],
)
async def test_gpu_request_must_equal_its_limit(api, resources, words):
    status, answer = await api("POST", "namespaces", "team-alpha", "jobs", body={"resources": resources})
    assert status == 400 and answer["reason"] == "Invalid", answer
    assert words in answer["message"]


async def test_a_gpu_limit_alone_is_charged_as_the_request(api, hold):
    status, job = await api(
        "POST",
        "namespaces",
        "team-alpha",
        "jobs",
        body={"args": hold, "resources": {"limits": {"nvidia.com/gpu": "2"}}},
    )
    assert status == 201, job
    assert job["gpus"] == 2 and job["resources"]["requests"]["nvidia.com/gpu"] == "2"
    _, balance = await api("GET", "namespaces", "team-alpha", "balance")
    assert balance["resources"][GPU]["used"] == "2"


async def test_tornados_own_400_is_bad_request(api):
    """A query argument that is not UTF-8 is refused by tornado itself (400), in the API's shape."""
    status, answer = await api("GET", "namespaces", "team-alpha", "jobs", params={"limit": b"\xff"})
    assert status == 400 and answer["reason"] == "BadRequest", answer


@pytest.mark.parametrize(
    "method, path, allowed",
    [
        ("PATCH", ("namespaces", "team-alpha", "jobs"), {"GET", "POST"}),
        ("POST", ("metrics",), {"GET"}),
        ("PUT", ("namespaces",), {"GET"}),
    ],
)
async def test_a_405_names_the_allowed_methods(jp_fetch, method, path, allowed):
    response = await jp_fetch(
        "quota", "v1", *path, method=method, body="{}", raise_error=False, allow_nonstandard_methods=True
    )
    assert response.code == 405
    assert {m.strip() for m in response.headers.get("Allow", "").split(",")} == allowed  # RFC 9110 15.5.6


async def test_an_unchanged_increase_list_is_a_304_in_both_modes(api, jp_fetch):
    first = await jp_fetch("quota", "v1", "increases", raise_error=False)
    assert first.code == 200 and first.headers.get("Etag"), first.body
    again = await jp_fetch(
        "quota", "v1", "increases", headers={"If-None-Match": first.headers["Etag"]}, raise_error=False
    )
    assert again.code == 304 and not again.body
    status, made = await api(
        "POST", "namespaces", "team-alpha", "increases", body={"resources": {GPU: "1"}, "hours": 1, "reason": "x"}
    )
    assert status == 201, made
    changed = await jp_fetch(
        "quota", "v1", "increases", headers={"If-None-Match": first.headers["Etag"]}, raise_error=False
    )
    assert changed.code == 200 and made["name"] in changed.body.decode()
