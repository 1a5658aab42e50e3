"""Pod aggregates, quota usage and resource validation, transcribed from upstream's own tests.

Upstream: ``staging/src/k8s.io/component-helpers/resource/helpers_test.go``
(TestPodRequestsAndLimits, TestPodRequestsAndLimitsWithoutOverhead, TestPodResourceRequests,
TestPodResourceLimits) and ``pkg/quota/v1/evaluator/core/pods_test.go`` (TestPodEvaluatorUsage),
as data in ``tests/data/pod_resources_cases.json``; ``pkg/apis/core/v1/validation/validation_test.go``
(TestValidateContainerResourceName, TestValidateResourceRequirements) for names and values.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from jupyter_quota import podresources as pr
from jupyter_quota.errors import Invalid, InvalidRequest
from jupyter_quota.quantity import Quantity

CASES = json.loads((Path(__file__).parent / "data" / "pod_resources_cases.json").read_text())
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def shown(resources: dict) -> dict:
    """Quantities compared by value, reported in canonical form."""
    return {k: Quantity(v) for k, v in resources.items()}


@pytest.mark.parametrize("case", CASES["aggregates"], ids=lambda c: f"{c['upstream'].split()[-1]}/{c['name']}")
def test_pod_requests_and_limits(case):
    """PodRequests/PodLimits: sums, init-container peaks, sidecars, overhead (helpers_test.go)."""
    if "requests" in case:
        assert shown(pr.pod_requests(case["pod"], overhead=case["overhead"])) == shown(case["requests"])
    if "limits" in case:
        assert shown(pr.pod_limits(case["pod"], overhead=case["overhead"])) == shown(case["limits"])


@pytest.mark.parametrize("case", CASES["usage"], ids=lambda c: c["name"])
def test_pod_evaluator_usage(case):
    """TestPodEvaluatorUsage (pods_test.go): the quota usage of one pod."""
    pod = json.loads(json.dumps(case["pod"]))
    if "deletedSecondsAgo" in case:
        stamp = NOW - timedelta(seconds=case["deletedSecondsAgo"])
        pod["metadata"]["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert shown(pr.pod_usage(pod, NOW)) == shown(case["usage"])


def test_case_counts():
    assert (len(CASES["aggregates"]), len(CASES["usage"])) == (28, 18)


def test_overhead_is_not_added_to_a_zero_limit():
    """PodLimits adds overhead only to limits that exist and are non-zero."""
    pod = {
        "spec": {
            "overhead": {"cpu": "1", "memory": "1Gi"},
            "containers": [{"resources": {"limits": {"cpu": "0", "memory": "2Gi"}}}],
        }
    }
    assert {k: str(v) for k, v in pr.pod_limits(pod).items()} == {"cpu": "0", "memory": "3Gi"}


def test_usage_strings_are_canonical():
    """Usage keeps the API server's rendering: 4 GPUs print "4", 1.5Gi prints "1536Mi"."""
    pod = {
        "spec": {
            "containers": [
                {
                    "resources": {
                        "requests": {"nvidia.com/gpu": "4", "memory": "1.5Gi"},
                        "limits": {"nvidia.com/gpu": "4"},
                    }
                }
            ]
        }
    }
    usage = {k: str(v) for k, v in pr.pod_usage(pod).items()}
    assert usage == {
        "count/pods": "1",
        "pods": "1",
        "memory": "1536Mi",
        "requests.memory": "1536Mi",
        "requests.nvidia.com/gpu": "4",
    }


def test_terminal_phases():
    assert pr.is_terminal({"status": {"phase": "Succeeded"}})
    assert pr.is_terminal({"status": {"phase": "Failed"}})
    for phase in ("Pending", "Running", "Unknown", None):
        assert not pr.is_terminal({"status": {"phase": phase}})


def test_terminating_pod_is_charged_until_grace_has_passed():
    """QuotaV1Pod: a deleted pod is charged until deletionTimestamp + deletionGracePeriodSeconds."""
    pod = {"metadata": {"deletionTimestamp": "2026-01-01T11:59:30Z", "deletionGracePeriodSeconds": 30}}
    assert not pr.is_terminal(pod, NOW)
    assert pr.is_terminal(pod, NOW + timedelta(seconds=1))


@pytest.mark.parametrize(
    "pod, best_effort",
    [
        ({"spec": {"containers": [{}]}}, True),
        ({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}, True),
        ({"spec": {"containers": [{"resources": {"requests": {"cpu": "0"}}}]}}, True),
        ({"spec": {"containers": [{}], "initContainers": [{"resources": {"requests": {"memory": "1Mi"}}}]}}, False),
        ({"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}}}]}}, False),
        ({"spec": {"resources": {"requests": {"cpu": "1"}}, "containers": [{}]}}, False),
        (
            {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}, "status": {"qosClass": "BestEffort"}},
            True,
        ),
    ],
    ids=["empty", "gpu-only", "zero-cpu", "init-memory", "cpu-limit", "pod-level", "status-wins"],
)
def test_best_effort(pod, best_effort):
    """GetPodQOS: only positive cpu/memory requests or limits leave BestEffort; a GPU alone does not."""
    assert pr.is_best_effort(pod) is best_effort


# -- validation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["cpu", "memory", "hugepages-2Mi", "kubernetes.io/resource-foo", "my.org/resource-bar"]
)
def test_validate_container_resource_name_success(name):
    """TestValidateContainerResourceName successCase."""
    assert pr.container_resource_name_errors(name, name) == []


@pytest.mark.parametrize(
    "name, errors",
    [
        (
            "cpu-core",
            [
                'cpu-core: Invalid value: "cpu-core": must be a standard resource type or fully qualified',
                'cpu-core: Invalid value: "cpu-core": must be a standard resource for containers',
            ],
        ),
        (
            "kubernetes.io/",
            [
                'kubernetes.io/: Invalid value: "kubernetes.io/": name part must be non-empty',
                'kubernetes.io/: Invalid value: "kubernetes.io/": name part must consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ],
        ),
        (
            "my.org-foo-resource",
            [
                'my.org-foo-resource: Invalid value: "my.org-foo-resource": must be a standard resource type or fully qualified',
                'my.org-foo-resource: Invalid value: "my.org-foo-resource": must be a standard resource for containers',
            ],
        ),
    ],
    ids=["invalid-standard", "invalid-namespaced", "invalid-extended"],
)
def test_validate_container_resource_name_error(name, errors):
    """TestValidateContainerResourceName errorCase (upstream asserts an error; the text is ours)."""
    assert pr.container_resource_name_errors(name, name) == errors


def container(requests=None, limits=None):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"spec": {"containers": [{"name": "c", "resources": resources}]}}


def test_requests_larger_than_limits():
    """TestValidateResourceRequirements "Requests Larger Than Limits": names and values in the errors."""
    pod = container(
        {"cpu": "10", "memory": "10G", "my.org/resource": "10m"}, {"cpu": "9", "memory": "9G", "my.org/resource": "9m"}
    )
    with pytest.raises(Invalid) as err:
        pr.validate_pod_resources(pod)
    base = "spec.containers[0].resources"
    assert err.value.message == (
        f'[{base}.limits[my.org/resource]: Invalid value: "9m": must be an integer, '
        f'{base}.requests: Invalid value: "10": must be less than or equal to cpu limit of 9, '
        f'{base}.requests: Invalid value: "10G": must be less than or equal to memory limit of 9G, '
        f'{base}.requests[my.org/resource]: Invalid value: "10m": must be an integer, '
        f'{base}.requests: Invalid value: "10m": must be equal to my.org/resource limit of 9m]'
    )


@pytest.mark.parametrize(
    "pod",
    [
        container({"cpu": "10", "memory": "10G"}, {"cpu": "10", "memory": "10G"}),
        container(None, {"cpu": "10", "memory": "10G", "my.org/resource": "10"}),
        container(
            {"cpu": "9", "memory": "9G", "my.org/resource": "9"}, {"cpu": "10", "memory": "10G", "my.org/resource": "9"}
        ),
    ],
    ids=["equal", "only-limits", "requests-less"],
)
def test_valid_requirements(pod):
    """TestValidateResourceRequirements successCase (the core validator rejects an extended request
    without a limit, so 'Resources with only Requests' is left out: it tests the v1 helper)."""
    pr.validate_pod_resources(pod)


@pytest.mark.parametrize(
    "pod, message",
    [
        (
            container({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}),
            'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2',
        ),
        (
            container({"nvidia.com/gpu": "1"}),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        ),
        (
            container({"nvidia.com/gpu": "0.001"}, {"nvidia.com/gpu": "0.001"}),
            '[spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1m": must be an integer, '
            'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "1m": must be an integer]',
        ),
        (
            container(None, {"cpu": "-1"}),
            'spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            container({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"}),
            "spec.containers[0].resources: Forbidden: HugePages require cpu or memory",
        ),
        (
            container({"cpu": "1", "hugepages-2Mi": "3Mi"}, {"hugepages-2Mi": "3Mi"}),
            '[spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer '
            'multiple of hugepages-2Mi, spec.containers[0].resources.requests[hugepages-2Mi]: Invalid value: "3Mi": '
            "3Mi is not positive integer multiple of hugepages-2Mi]",
        ),
    ],
    ids=[
        "gpu-request-below-limit",
        "gpu-request-no-limit",
        "fractional-gpu",
        "negative",
        "hugepages-alone",
        "hugepages-indivisible",
    ],
)
def test_invalid_requirements(pod, message):
    """ValidateResourceRequirements texts (validation.go): request must equal limit for GPUs, whole GPUs, ..."""
    with pytest.raises(Invalid) as err:
        pr.validate_pod_resources(pod)
    assert err.value.message == message


def test_init_containers_and_overhead_are_validated():
    pod = {
        "spec": {
            "containers": [{"name": "a"}],
            "initContainers": [{"name": "i", "resources": {"requests": {"example.com/fpga": "1"}}}],
            "overhead": {"cpu": "-1"},
        }
    }
    with pytest.raises(Invalid) as err:
        pr.validate_pod_resources(pod)
    assert err.value.message == (
        "[spec.initContainers[0].resources.limits: Required value: Limit must be set for non overcommitable resources, "
        'spec.overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0]'
    )


def test_invalid_message_prefix():
    assert pr.invalid_message("Pod", "nb-0", Invalid("x: y")) == 'Pod "nb-0" is invalid: x: y'


def test_unparsable_quantity_is_a_bad_request():
    with pytest.raises(InvalidRequest, match=r"spec\.containers\[0\]\.resources\.requests\[cpu\]"):
        pr.pod_requests(container({"cpu": "1K"}))


def test_aggregate_drops_duplicates():
    """utilerrors.NewAggregate: a repeated message is shown once and then needs no brackets."""
    assert pr.aggregate(["a", "a"]) == "a"
    assert pr.aggregate(["a", "b", "a"]) == "[a, b]"


@pytest.mark.parametrize("value", ["example.com\n/gpu", "example.com/gpu\n"])
def test_a_qualified_name_ending_a_part_in_a_newline_is_refused(value):
    # Go's regexp anchors ``$`` at the very end; Python's ``$`` also matches before a final newline.
    assert pr.qualified_name_errors(value) != []
