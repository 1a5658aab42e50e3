"""ResourceQuota admission for pods and Jobs, transcribed from upstream's own tests, then ours.

Upstream: ``plugin/pkg/admission/resourcequota/admission_test.go`` as data in
``tests/data/quota_admission_cases.json``; ``pkg/quota/v1/evaluator/core/pods_test.go``
(TestPodConstraintsFunc, TestPodEvaluatorMatchingScopes, TestPodEvaluatorUsageStats) below.
Our own cases (the demo, GPUs, Jobs, warnings, status, balance) follow, each saying what it pins.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from jupyter_quota import quota as Q
from jupyter_quota.errors import AdmissionDenied, Invalid
from jupyter_quota.quantity import Quantity

CASES = json.loads((Path(__file__).parent / "data" / "quota_admission_cases.json").read_text())


def rq(name, hard, used=None, scopes=None, selector=None):
    """A synced ResourceQuota: spec.hard = status.hard, status.used as given (zeros by default)."""
    spec = {"hard": dict(hard)}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    used = dict.fromkeys(hard, "0") if used is None else used
    status = {"hard": dict(hard), "used": dict(used)}
    return {"metadata": {"name": name, "namespace": "team"}, "spec": spec, "status": status}


def pod(requests=None, limits=None, name="nb", **spec):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"containers": [{"name": name, "resources": resources}], **spec},
    }


def job(name="train", gpus="1", parallelism=1, completions=1, **spec):
    container = {"name": "train", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            **spec,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def used(quotas, name):
    return next(q for q in quotas if (q.get("metadata") or {}).get("name") == name)["status"]["used"]


# -- admission_test.go ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: f"{c['upstream']}/{c['name']}")
def test_upstream_admission(case):
    """The ResourceQuota plugin's Validate on a pod CREATE, as in admission_test.go."""
    quotas = copy.deepcopy(case["quotas"])
    expect = case["expect"]
    check = lambda: Q.charge_quotas(case["pod"], quotas, limited_resources=case.get("limitedResources"))  # noqa: E731
    if "error" in expect:
        with pytest.raises(AdmissionDenied) as err:
            check()
        assert err.value.message == expect["error"]
        assert err.value.reason == expect["reason"]
        assert expect["error"] in Q.forbidden_message("pods", case["pod"]["metadata"]["name"], err.value)
        return
    after = check()
    for quota_name, expected in expect.get("used", {}).items():
        actual = used(after, quota_name)
        assert {k: actual[k] for k in expected} == expected
    assert quotas == case["quotas"], "the input quotas are not modified"


def test_upstream_case_count():
    assert len(CASES["cases"]) == 36


# -- pods_test.go ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "containers, inits, required, level, expected",
    [
        (
            [],
            [{"name": "dummy", "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}}],
            {"memory"},
            None,
            "must specify memory for: dummy",
        ),
        (
            [],
            [{"name": n, "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}} for n in ("foo", "bar")],
            {"memory"},
            None,
            "must specify memory for: bar,foo",
        ),
        (
            [{"name": "dummy", "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}}],
            [],
            {"memory"},
            None,
            "must specify memory for: dummy",
        ),
        (
            [{"name": n, "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}} for n in ("foo", "bar")],
            [],
            {"memory"},
            None,
            "must specify memory for: bar,foo",
        ),
        (
            [{"name": "foo"}, {"name": "bar"}],
            [],
            {"memory", "cpu"},
            None,
            "must specify cpu for: bar,foo; memory for: bar,foo",
        ),
        ([{"name": "foo"}, {"name": "bar"}], [], {"memory", "cpu"}, {"requests": {"cpu": "1m"}}, ""),
    ],
    ids=[
        "init container resource missing",
        "multiple init container resource missing",
        "container resource missing",
        "multiple container resource missing",
        "container resource missing multiple",
        "pod-level resource set, container-level required resources missing",
    ],
)
def test_pod_constraints_func(containers, inits, required, level, expected):
    """TestPodConstraintsFunc (pods_test.go); PodLevelResources on, its default since v1.34."""
    spec = {"containers": containers, "initContainers": inits}
    if level:
        spec["resources"] = level
    assert Q.constraint_error({"spec": spec}, required) == expected


ALL_SELECTORS = [
    {"scopeName": "Terminating"},
    {"scopeName": "NotTerminating"},
    {"scopeName": "BestEffort"},
    {"scopeName": "NotBestEffort"},
    {"scopeName": "PriorityClass", "operator": "In", "values": ["class1"]},
    {"scopeName": "CrossNamespacePodAffinity"},
]
TERM = {"scopeName": "Terminating"}


@pytest.mark.parametrize(
    "spec, selectors, wanted",
    [
        ({}, None, ["NotTerminating", "BestEffort"]),
        ({"priorityClassName": "class1"}, None, ["NotTerminating", "BestEffort", "PriorityClass"]),
        (
            {
                "containers": [
                    {
                        "resources": {
                            "requests": {"cpu": "1", "memory": "50M", "example.com/dongle": "1"},
                            "limits": {"cpu": "2", "memory": "100M", "example.com/dongle": "1"},
                        }
                    }
                ]
            },
            None,
            ["NotTerminating", "NotBestEffort"],
        ),
        ({"activeDeadlineSeconds": 30}, None, ["Terminating", "BestEffort"]),
        ({"activeDeadlineSeconds": 30}, [TERM], ["Terminating"]),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {}, "namespaces": ["ns1"], "namespaceSelector": {}}
                        ]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "namespaces": ["ns1"]}]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"podAffinityTerm": {"labelSelector": {}, "namespaces": ["ns2"], "namespaceSelector": {}}}
                        ]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {}}}
                        ]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {}}}
                        ]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
        (
            {
                "activeDeadlineSeconds": 30,
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "namespaces": ["ns3"]}]
                    }
                },
            },
            None,
            ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
        ),
    ],
    ids=[
        "EmptyPod",
        "PriorityClass",
        "NotBestEffort",
        "Terminating",
        "OnlyTerminating",
        "CrossNamespaceRequiredAffinity",
        "CrossNamespaceRequiredAffinityWithSlice",
        "CrossNamespacePreferredAffinity",
        "CrossNamespacePreferredAffinityWithSelector",
        "CrossNamespacePreferredAntiAffinity",
        "CrossNamespaceRequiredAntiAffinity",
    ],
)
def test_pod_evaluator_matching_scopes(spec, selectors, wanted):
    """TestPodEvaluatorMatchingScopes (pods_test.go)."""
    matched = [s["scopeName"] for s in (selectors or ALL_SELECTORS) if Q.scope_matches(s, {"spec": spec})]
    assert matched == wanted


def usage_stats_pod(name, priority_class, cpu, phase):
    resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}} if cpu else {}
    spec = {"containers": [{"resources": resources}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


HIGH = [{"scopeName": "PriorityClass", "operator": "In", "values": ["high-priority"]}]
MIXED = [
    usage_stats_pod("p1", "high-priority", "1", "Running"),
    usage_stats_pod("p2", "high-priority", "1", "Succeeded"),
    usage_stats_pod("p3", "low-priority", "1", "Running"),
]


@pytest.mark.parametrize(
    "pods, scopes, selector, want",
    [
        ([], None, None, {}),
        (
            [usage_stats_pod("p1", "", "1", "Running"), usage_stats_pod("p2", "", "1", "Running")],
            None,
            None,
            {"pods": "2", "count/pods": "2", "cpu": "2", "requests.cpu": "2", "limits.cpu": "2"},
        ),
        (
            [usage_stats_pod("p1", "", "1", "Running"), usage_stats_pod("p2", "", "1", "Succeeded")],
            None,
            None,
            {"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"},
        ),
        (MIXED, None, HIGH, {"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"}),
        (
            MIXED,
            ["PriorityClass"],
            HIGH,
            {"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"},
        ),
        (
            MIXED + [usage_stats_pod("p4", "high-priority", None, "Failed")],
            ["PriorityClass", "BestEffort"],
            HIGH,
            {"count/pods": "1"},
        ),
    ],
    ids=[
        "nil case",
        "all pods in running state",
        "one pods in terminal state",
        "partial pods matching quotaScopeSelector",
        "partial pods matching quotaScopeSelector - w/ scopeName specified",
        "partial pods matching quotaScopeSelector - w/ multiple scopeNames specified",
    ],
)
def test_pod_evaluator_usage_stats(pods, scopes, selector, want):
    """TestPodEvaluatorUsageStats (pods_test.go) through the quota controller's status.

    The quota tracks every key upstream may report; keys upstream leaves out are "0" here,
    as the controller seeds each tracked key at zero.
    """
    keys = ("pods", "count/pods", "cpu", "requests.cpu", "limits.cpu")
    quota = {"metadata": {"name": "q"}, "spec": {"hard": dict.fromkeys(keys, "100")}}
    if scopes:
        quota["spec"]["scopes"] = scopes
    if selector:
        quota["spec"]["scopeSelector"] = {"matchExpressions": selector}
    status = Q.quota_status(quota, pods)["status"]
    assert {k: Quantity(v) for k, v in status["used"].items()} == {k: Quantity(want.get(k, "0")) for k in keys}
    assert status["hard"] == quota["spec"]["hard"]


# -- the demo, GPUs and Jobs ------------------------------------------------------------------------------

TEAM_ALPHA = rq("team-alpha", {"requests.nvidia.com/gpu": "2", "limits.memory": "128Gi", "requests.cpu": "8"})
DEFAULTS = {
    "metadata": {"name": "defaults"},
    "spec": {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": "2", "memory": "8Gi"},
                "defaultRequest": {"cpu": "1", "memory": "4Gi"},
            }
        ]
    },
}
DEMO_MESSAGE = (
    "exceeded quota: team-alpha, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=0, "
    "limited: requests.nvidia.com/gpu=2"
)


def test_demo_job_asking_four_gpus_is_refused():
    """The demo: 2 GPUs of quota, a LimitRange defaulting cpu/memory, a job asking for 4 GPUs."""
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_job(job(gpus="4"), [TEAM_ALPHA], [DEFAULTS])
    assert err.value.reason == "ExceededQuota"
    assert err.value.message == DEMO_MESSAGE
    assert (err.value.resource, err.value.name) == ("pods", "train-")
    full = Q.forbidden_message(err.value.resource, err.value.name, err.value)
    assert full == f'pods "train-" is forbidden: {DEMO_MESSAGE}'


def test_demo_job_within_quota_is_admitted_with_defaults():
    admission = Q.admit_job(job(gpus="2"), [TEAM_ALPHA], [DEFAULTS])
    assert admission.pods == 1
    assert {k: str(v) for k, v in admission.usage.items()} == {
        "count/jobs.batch": "1",
        "count/pods": "1",
        "pods": "1",
        "cpu": "1",
        "requests.cpu": "1",
        "limits.cpu": "2",
        "memory": "4Gi",
        "requests.memory": "4Gi",
        "limits.memory": "8Gi",
        "requests.nvidia.com/gpu": "2",
    }
    container = admission.pod["spec"]["containers"][0]
    assert container["resources"] == {
        "limits": {"nvidia.com/gpu": "2", "cpu": "2", "memory": "8Gi"},
        "requests": {"nvidia.com/gpu": "2", "cpu": "1", "memory": "4Gi"},
    }
    assert admission.pod["metadata"]["generateName"] == "train-"
    assert admission.pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container train; cpu, memory limit for container train"
    )


def test_fractional_gpu_is_refused_as_an_integer():
    """0.001 GPU: pod validation (422), before quota: request defaulted from the limit, both reported."""
    with pytest.raises(Invalid) as err:
        Q.admit_job(job(gpus="0.001"), [TEAM_ALPHA], [DEFAULTS])
    assert err.value.message == (
        '[spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1m": must be an integer, '
        'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "1m": must be an integer]'
    )
    assert Q.invalid_message("Pod", err.value.name, err.value).startswith('Pod "train-" is invalid: [spec.containers')


def test_three_pod_job_that_fits_two_is_refused_with_the_third_pods_message():
    """All or nothing: pods 1 and 2 fit 2 GPUs; the third is refused as the API server would refuse it."""
    quota = rq("team-gpu", {"requests.nvidia.com/gpu": "2"})
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_job(job(gpus="1", parallelism=3, completions=3), [quota], [])
    assert err.value.message == (
        "exceeded quota: team-gpu, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )
    admission = Q.admit_job(job(gpus="1", parallelism=2, completions=3), [quota], [])
    assert admission.pods == 2 and str(admission.usage["requests.nvidia.com/gpu"]) == "2"


@pytest.mark.parametrize(
    "spec, pods",
    [
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 2, "completions": None}, 2),
        ({"parallelism": None, "completions": 5}, 1),
        ({"parallelism": 0, "completions": 3}, 0),
        ({"parallelism": 3, "completions": 3, "suspend": True}, 0),
    ],
)
def test_pods_started_at_once(spec, pods):
    """min(parallelism, completions or parallelism); parallelism defaults to 1; a suspended Job starts none."""
    j = job(gpus="1")
    j["spec"].update(spec)
    assert Q.admit_job(j, [], []).pods == pods


def test_indexed_job_pods_are_named_with_their_index():
    quota = rq("team-gpu", {"requests.nvidia.com/gpu": "1"})
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_job(job(gpus="1", parallelism=2, completions=2, completionMode="Indexed"), [quota], [])
    assert err.value.name == "train-1-"


def test_job_object_count_is_checked_first():
    """count/jobs.batch is charged for the Job before any pod; the refusal names the Job."""
    quotas = [
        rq("objects", {"count/jobs.batch": "3"}, {"count/jobs.batch": "3"}),
        rq("team-gpu", {"requests.nvidia.com/gpu": "0"}),
    ]
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_job(job(), quotas, [])
    assert err.value.message == (
        "exceeded quota: objects, requested: count/jobs.batch=1, used: count/jobs.batch=3, limited: count/jobs.batch=3"
    )
    full = Q.forbidden_message(err.value.resource, err.value.name, err.value)
    assert full.startswith('jobs.batch "train" is forbidden: ')
    quotas[0]["status"]["used"]["count/jobs.batch"] = "2"
    quotas[1]["status"]["hard"]["requests.nvidia.com/gpu"] = "1"
    assert str(Q.admit_job(job(), quotas, []).usage["count/jobs.batch"]) == "1"


def test_scoped_quota_never_counts_jobs():
    """generic.MatchesNoScopeFunc: a scoped quota's count/jobs.batch does not apply to Jobs."""
    quota = rq("scoped", {"count/jobs.batch": "0", "pods": "10"}, scopes=["NotTerminating"])
    assert Q.admit_job(job(), [quota], []).pods == 1


def test_count_pods_is_charged_per_pod():
    quota = rq("objects", {"count/pods": "1"})
    with pytest.raises(AdmissionDenied, match=r"^exceeded quota: objects, requested: count/pods=1, used: count/pods=1"):
        Q.admit_job(job(parallelism=2, completions=2), [quota], [])


# -- check_quotas: reasons and messages --------------------------------------------------------------------


def test_first_failing_quota_in_list_order_wins():
    a = rq("a", {"requests.cpu": "1"})
    b = rq("b", {"requests.cpu": "1"})
    with pytest.raises(AdmissionDenied, match=r"^exceeded quota: b,"):
        Q.check_quotas(pod({"cpu": "2"}), [b, a])


def test_only_exceeded_keys_are_listed_sorted():
    quota = rq(
        "q",
        {"requests.memory": "10Gi", "requests.cpu": "1", "limits.cpu": "2", "pods": "10"},
        {"requests.memory": "9Gi", "requests.cpu": "0", "limits.cpu": "0", "pods": "0"},
    )
    with pytest.raises(AdmissionDenied) as err:
        Q.check_quotas(pod({"cpu": "2", "memory": "2Gi"}, {"cpu": "3", "memory": "2Gi"}), [quota])
    assert err.value.message == (
        "exceeded quota: q, requested: limits.cpu=3,requests.cpu=2,requests.memory=2Gi, "
        "used: limits.cpu=0,requests.cpu=0,requests.memory=9Gi, "
        "limited: limits.cpu=2,requests.cpu=1,requests.memory=10Gi"
    )


def test_failed_quota_names_containers_sorted():
    """The frozen validationSet: every container and init container must state each cpu/memory key."""
    quota = rq("q", {"limits.cpu": "10", "requests.memory": "10Gi", "requests.nvidia.com/gpu": "4"})
    p = {
        "spec": {
            "containers": [
                {"name": "zeta", "resources": {"requests": {"memory": "1Gi"}}},
                {"name": "alpha", "resources": {"limits": {"cpu": "1"}}},
            ],
            "initContainers": [{"name": "setup"}],
        }
    }
    with pytest.raises(AdmissionDenied) as err:
        Q.check_quotas(p, [quota])
    assert err.value.reason == "FailedQuota"
    assert (
        err.value.message
        == "failed quota: q: must specify limits.cpu for: setup,zeta; requests.memory for: alpha,setup"
    )


def test_gpu_and_ephemeral_storage_keys_do_not_require_every_container():
    quota = rq("q", {"requests.nvidia.com/gpu": "4", "requests.ephemeral-storage": "10Gi"})
    Q.check_quotas(pod({}, {}), [quota])


def test_status_unknown_until_the_controller_fills_used():
    quota = rq("fresh", {"requests.cpu": "8", "pods": "10", "services": "2"}, used={})
    with pytest.raises(AdmissionDenied) as err:
        Q.check_quotas(pod({"cpu": "1"}), [quota])
    assert err.value.reason == "QuotaStatusUnknown"
    assert err.value.message == "status unknown for quota: fresh, resources: pods,requests.cpu"


def test_negative_usage_is_refused():
    with pytest.raises(AdmissionDenied) as err:
        Q.check_quotas(pod({"cpu": "-1"}), [rq("q", {"pods": "10"})])
    assert (err.value.reason, err.value.message) == (
        "QuotaUsageNegative",
        "quota usage is negative for resource(s): cpu,requests.cpu",
    )


def test_no_quotas_admits_everything():
    Q.check_quotas(pod({"cpu": "-1"}), [])


def test_quota_without_status_hard_falls_back_to_spec():
    """A quota never synced has no status.hard; we enforce spec.hard (upstream would skip it)."""
    quota = {
        "metadata": {"name": "q"},
        "spec": {"hard": {"requests.cpu": "1"}},
        "status": {"used": {"requests.cpu": "0"}},
    }
    with pytest.raises(AdmissionDenied, match=r"^exceeded quota: q, requested: requests\.cpu=2"):
        Q.check_quotas(pod({"cpu": "2"}), [quota])


def test_used_keeps_quantity_formats():
    """quota.Add: a used "0" takes the request's format, so memory stays binary."""
    after = Q.charge_quotas(pod({"memory": "3Gi"}), [rq("q", {"requests.memory": "10Gi"})])
    assert used(after, "q") == {"requests.memory": "3Gi"}


def test_sidecars_and_overhead_are_charged():
    p = {
        "spec": {
            "overhead": {"cpu": "250m"},
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "fetch", "resources": {"requests": {"cpu": "4"}}},
            ],
            "containers": [{"name": "train", "resources": {"requests": {"cpu": "2"}}}],
        }
    }
    # max(2 + 0.5, 4 + 0.5) + 0.25
    assert str(Q.pod_requests(p)["cpu"]) == "4750m"
    with pytest.raises(AdmissionDenied, match=r"requested: requests\.cpu=4750m"):
        Q.check_quotas(p, [rq("q", {"requests.cpu": "4"})])


# -- keys, warnings and validation ---------------------------------------------------------------------------


def test_tracked_keys():
    quota = rq(
        "q",
        {
            "requests.nvidia.com/gpu": "1",
            "nvidia.com/gpu": "1",
            "limits.nvidia.com/gpu": "1",
            "pods": "1",
            "count/pods": "1",
            "hugepages-2Mi": "1Gi",
            "services": "1",
            "count/jobs.batch": "1",
        },
    )
    assert Q.tracked_keys(quota) == ["count/pods", "hugepages-2Mi", "pods", "requests.nvidia.com/gpu"]


def test_unenforced_keys_warn_with_what_to_write():
    quota = rq(
        "q",
        {
            "nvidia.com/gpu": "4",
            "limits.nvidia.com/gpu": "4",
            "requests.nvidia.com/gpu": "4",
            "count/jobs.batch": "3",
            "fast.storageclass.storage.k8s.io/requests.storage": "1Ti",
            "example.com/widgets-total": "2",
            "cpu": "4",
        },
    )
    warnings = Q.unenforced_keys(quota)
    assert [w["resource"] for w in warnings] == ["example.com/widgets-total", "limits.nvidia.com/gpu", "nvidia.com/gpu"]
    by_key = {w["resource"]: w["message"] for w in warnings}
    assert "write requests.nvidia.com/gpu" in by_key["nvidia.com/gpu"]
    assert "write requests.nvidia.com/gpu" in by_key["limits.nvidia.com/gpu"]
    assert "never enforced" in by_key["limits.nvidia.com/gpu"]


def test_unenforced_keys_are_really_unenforced():
    """The warning is true: a 0-GPU quota on nvidia.com/gpu admits a GPU pod, requests.nvidia.com/gpu does not."""
    gpu_pod = pod({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})
    Q.check_quotas(gpu_pod, [rq("bare", {"nvidia.com/gpu": "0", "limits.nvidia.com/gpu": "0"})])
    with pytest.raises(AdmissionDenied):
        Q.check_quotas(gpu_pod, [rq("right", {"requests.nvidia.com/gpu": "0"})])


def test_validate_quota_spec_accepts_valid():
    Q.validate_quota_spec(
        {
            "hard": {
                "requests.nvidia.com/gpu": "2",
                "limits.memory": "128Gi",
                "requests.cpu": "8",
                "count/jobs.batch": "10",
                "pods": "20",
            },
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
            },
        }
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"hard": {"gpu": "1"}},
            '[spec.hard[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified, '
            'spec.hard[gpu]: Invalid value: "gpu": must be a standard resource for quota]',
        ),
        ({"hard": {"nvidia.com/gpu": "1.5"}}, 'spec.hard[nvidia.com/gpu]: Invalid value: "1500m": must be an integer'),
        (
            {"hard": {"count/jobs.batch": "0.5"}},
            'spec.hard[count/jobs.batch]: Invalid value: "500m": must be an integer',
        ),
        ({"hard": {"pods": "-1"}}, 'spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0'),
        (
            {"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]},
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating", "NotTerminating"}: conflicting scopes',
        ),
        (
            {"hard": {"requests.cpu": "1"}, "scopes": ["BestEffort"]},
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to resource',
        ),
        (
            {"hard": {"pods": "1"}, "scopes": ["Gold"]},
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"Gold"}: unsupported scope',
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]},
            },
            "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is "
            "'In' or 'NotIn' for scope selector",
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]},
            },
            "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' when scope is any of "
            "ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
            "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists", "values": ["x"]}]
                },
            },
            'spec.scopeSelector.matchExpressions.values: Invalid value: []string{"x"}: must be no value when `operator` is '
            "'Exist' or 'DoesNotExist' for scope selector",
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Has"}]},
            },
            'spec.scopeSelector.matchExpressions.operator: Invalid value: "Has": not a valid selector operator',
        ),
        (
            {
                "hard": {"requests.memory": "1Gi"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "BestEffort", "operator": "Exists"}]},
            },
            "spec.scopeSelector.matchExpressions: Invalid value: core.ScopeSelector{MatchExpressions:[]core.ScopedResourceSelector"
            'Requirement{core.ScopedResourceSelectorRequirement{ScopeName:"BestEffort", Operator:"Exists", Values:[]string(nil)}}}: '
            "unsupported scope applied to resource",
        ),
    ],
    ids=[
        "not-standard",
        "fractional-extended",
        "fractional-count",
        "negative",
        "conflicting",
        "besteffort-cpu",
        "unknown-scope",
        "in-without-values",
        "exists-only",
        "exists-with-values",
        "bad-operator",
        "selector-besteffort-memory",
    ],
)
def test_validate_quota_spec_rejects(spec, message):
    """ValidateResourceQuotaSpec texts (validation.go; hard keys visited sorted)."""
    with pytest.raises(Invalid) as err:
        Q.validate_quota_spec(spec)
    assert err.value.message == message


def test_requests_extended_quota_value_need_not_be_whole():
    """IsIntegerResourceName is false for requests.<name>: upstream accepts requests.nvidia.com/gpu: 1.5."""
    Q.validate_quota_spec({"hard": {"requests.nvidia.com/gpu": "1.5"}})


# -- status and balance ----------------------------------------------------------------------------------------


def test_quota_status_counts_live_pods_only():
    """Terminal pods free compute quota at once but still count in count/pods; object counts come in."""
    quota = {
        "metadata": {"name": "team-alpha"},
        "spec": {
            "hard": {
                "requests.nvidia.com/gpu": "4",
                "pods": "10",
                "count/pods": "10",
                "count/jobs.batch": "5",
                "nvidia.com/gpu": "4",
            }
        },
    }

    def gpu(phase):
        return {
            "spec": {
                "containers": [
                    {
                        "resources": {
                            "limits": {"nvidia.com/gpu": "2"},
                            "requests": {"nvidia.com/gpu": "2"},
                        }
                    }
                ]
            },
            "status": {"phase": phase},
        }

    status = Q.quota_status(
        quota, [gpu("Running"), gpu("Succeeded"), gpu("Failed"), gpu("Pending")], {"count/jobs.batch": 3}
    )["status"]
    assert status["hard"] == quota["spec"]["hard"]
    assert status["used"] == {"requests.nvidia.com/gpu": "4", "pods": "2", "count/pods": "4", "count/jobs.batch": "3"}
    assert "status" not in quota


def test_quota_status_only_counts_scope_matching_pods():
    quota = {"metadata": {"name": "high"}, "spec": {"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": HIGH}}}
    status = Q.quota_status(quota, MIXED)["status"]
    assert status["used"] == {"pods": "1"}


def test_balance_takes_the_tightest_quota_and_warns():
    quotas = [
        rq(
            "team",
            {"requests.nvidia.com/gpu": "8", "requests.cpu": "32", "nvidia.com/gpu": "8"},
            {"requests.nvidia.com/gpu": "3", "requests.cpu": "40"},
        ),
        rq("gpu-cap", {"requests.nvidia.com/gpu": "4"}, {"requests.nvidia.com/gpu": "3"}),
        rq("besteffort", {"pods": "1"}, {"pods": "1"}, scopes=["BestEffort"]),
    ]
    result = Q.balance(quotas)
    assert result["resources"] == {
        "nvidia.com/gpu": {"hard": "8", "used": "0", "remaining": "8"},
        "requests.cpu": {"hard": "32", "used": "40", "remaining": "0"},
        "requests.nvidia.com/gpu": {"hard": "4", "used": "3", "remaining": "1"},
    }
    assert [q["name"] for q in result["quotas"]] == ["team", "gpu-cap", "besteffort"]
    assert result["quotas"][2]["scopes"] == ["BestEffort"]
    assert result["quotas"][2]["resources"] == {"pods": {"hard": "1", "used": "1", "remaining": "0"}}
    assert [(w["quota"], w["resource"]) for w in result["warnings"]] == [("team", "nvidia.com/gpu")]


def test_balance_for_a_specific_pod():
    """A pod in a priority class also answers to that class's quota."""
    quotas = [
        rq("high", {"requests.cpu": "2"}, {"requests.cpu": "1"}, selector=HIGH),
        rq("team", {"requests.cpu": "10"}),
    ]
    assert Q.balance(quotas)["resources"]["requests.cpu"]["remaining"] == "10"
    high_pod = pod({"cpu": "1"}, priorityClassName="high-priority")
    assert Q.balance(quotas, high_pod)["resources"]["requests.cpu"]["remaining"] == "1"


def test_quota_matches_pod_ands_scopes_and_selector():
    quota = rq("q", {"pods": "1"}, scopes=["NotBestEffort"], selector=HIGH)
    assert Q.quota_matches_pod(quota, pod({"cpu": "1"}, priorityClassName="high-priority"))
    assert not Q.quota_matches_pod(quota, pod({}, priorityClassName="high-priority"))
    assert not Q.quota_matches_pod(quota, pod({"cpu": "1"}))


@pytest.mark.parametrize(
    "operator, values, priority_class, matches",
    [
        ("In", ["a"], "a", True),
        ("In", ["a"], "", False),
        ("NotIn", ["a"], "", True),
        ("NotIn", ["a"], "a", False),
        ("Exists", [], "b", True),
        ("Exists", [], "", False),
        ("DoesNotExist", [], "", True),
        ("DoesNotExist", [], "b", False),
    ],
)
def test_priority_class_selector(operator, values, priority_class, matches):
    """podMatchesSelector: the class is a label "PriorityClass" present only when set."""
    selector = {"scopeName": "PriorityClass", "operator": operator, "values": values}
    assert Q.scope_matches(selector, {"spec": {"priorityClassName": priority_class}}) is matches


def test_admit_pod_runs_the_whole_pipeline_in_order():
    """Defaulting, LimitRanger mutation, validation, LimitRanger validation, then quota."""
    lr = {"spec": {"limits": [{"type": "Container", "max": {"memory": "16Gi"}, "default": {"memory": "8Gi"}}]}}
    admitted = Q.admit_pod(pod(), [rq("q", {"limits.memory": "64Gi"})], [lr])
    assert admitted["spec"]["containers"][0]["resources"]["limits"] == {"memory": "8Gi"}
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_pod(pod(None, {"memory": "32Gi"}), [rq("q", {"limits.memory": "64Gi"})], [lr])
    assert err.value.reason == "LimitRangeViolation"
    with pytest.raises(AdmissionDenied) as err:
        Q.admit_pod(pod(None, {"memory": "16Gi"}), [rq("q", {"limits.memory": "8Gi"})], [lr])
    assert err.value.reason == "ExceededQuota"
