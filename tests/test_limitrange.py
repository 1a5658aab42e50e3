"""LimitRange admission, transcribed from upstream's own tests.

Upstream: ``plugin/pkg/admission/limitranger/admission_test.go`` (TestPodLimitFunc as data in
``tests/data/limitranger_cases.json``, TestDefaultContainerResourceRequirements,
TestMergePodResourceRequirements, TestPodLimitFuncApplyDefault, TestLimitRangerAdmitPod),
``pkg/apis/core/v1/defaults_test.go`` (TestSetDefaultLimitRangeItem, TestSetDefaultRequestsPod)
and ``pkg/apis/core/validation`` (ValidateLimitRange). Each test names its upstream test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from jupyter_quota import limitrange, quota
from jupyter_quota.errors import AdmissionDenied, Invalid
from jupyter_quota.podresources import aggregate
from jupyter_quota.quantity import Quantity

CASES = json.loads((Path(__file__).parent / "data" / "limitranger_cases.json").read_text())


def valid_pod(name, n, requests=None, limits=None):
    """validPod: ``n`` containers named foo-0.. sharing one resource requirement."""
    return {
        "metadata": {"name": name, "namespace": "test"},
        "spec": {
            "containers": [
                {
                    "name": f"foo-{i}",
                    "image": f"foo:V{i}",
                    "resources": {"requests": dict(requests or {}), "limits": dict(limits or {})},
                }
                for i in range(n)
            ]
        },
    }


def with_init(pod, *resources):
    """validPodInit."""
    pod["spec"]["initContainers"] = [
        {"name": f"foo-{i}", "image": f"foo:V{i}", "resources": copy.deepcopy(r)} for i, r in enumerate(resources)
    ]
    return pod


def valid_limit_range(defaults=True):
    """validLimitRange / validLimitRangeNoDefaults."""
    container = {"type": "Container", "max": {"cpu": "100m", "memory": "2Gi"}, "min": {"cpu": "25m", "memory": "1Mi"}}
    if defaults:
        container |= {"default": {"cpu": "75m", "memory": "10Mi"}, "defaultRequest": {"cpu": "50m", "memory": "5Mi"}}
    return {
        "metadata": {"name": "abc", "namespace": "test"},
        "spec": {
            "limits": [
                {"type": "Pod", "max": {"cpu": "200m", "memory": "4Gi"}, "min": {"cpu": "50m", "memory": "2Mi"}},
                container,
            ]
        },
    }


def same(resources, expected):
    """apiequality.Semantic.DeepEqual on requirements: quantities compare by value, empty maps by absence."""

    def norm(part):
        return {k: Quantity(v) for k, v in ((resources or {}).get(part) or {}).items()}

    return all(norm(p) == {k: Quantity(v) for k, v in (expected.get(p) or {}).items()} for p in ("requests", "limits"))


# -- TestPodLimitFunc ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES["success"], ids=lambda c: c["name"])
def test_pod_limit_func_success(case):
    """TestPodLimitFunc successCases: PodMutateLimitFunc then PodValidateLimitFunc give no error."""
    pod = copy.deepcopy(case["pod"])
    spec = case["limitRange"]["spec"]
    limitrange.mutate_pod(pod, spec)
    assert limitrange.validate_pod(pod, spec) == []


@pytest.mark.parametrize("case", CASES["error"], ids=lambda c: c["name"])
def test_pod_limit_func_error(case):
    """TestPodLimitFunc errorCases: an error (upstream), with the text minConstraint & co. print (ours)."""
    pod = copy.deepcopy(case["pod"])
    spec = case["limitRange"]["spec"]
    limitrange.mutate_pod(pod, spec)
    errors = limitrange.validate_pod(pod, spec)
    assert errors and aggregate(errors) == case["message"]


def test_case_counts_match_upstream():
    """Guard against a truncated data file: upstream has 37 success and 42 error cases."""
    assert (len(CASES["success"]), len(CASES["error"])) == (37, 42)


# -- defaults -----------------------------------------------------------------------------------------


def test_default_container_resource_requirements():
    """TestDefaultContainerResourceRequirements."""
    assert limitrange.container_defaults(valid_limit_range()["spec"]) == (
        {"cpu": "50m", "memory": "5Mi"},
        {"cpu": "75m", "memory": "10Mi"},
    )


def test_merge_pod_resource_requirements_empty():
    """TestMergePodResourceRequirements: a pod with no resources gets every default."""
    pod = valid_pod("empty-resources", 1)
    limitrange.mutate_pod(pod, valid_limit_range()["spec"])
    assert same(
        pod["spec"]["containers"][0]["resources"],
        {"requests": {"cpu": "50m", "memory": "5Mi"}, "limits": {"cpu": "75m", "memory": "10Mi"}},
    )
    assert pod["metadata"]["annotations"][limitrange.ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container foo-0; cpu, memory limit for container foo-0"
    )


def test_merge_pod_resource_requirements_partial():
    """TestMergePodResourceRequirements: only what is missing is merged, in containers and init containers.

    Deviation: upstream's expected annotation lacks the init-container entries only because
    its container and init container share one Go map (validPodInit reuses ``input``), so the
    init container already looks defaulted. With separate maps, as in any real pod, upstream
    writes the entries shown here.
    """
    requirements = {"requests": {"memory": "512Mi"}, "limits": {}}
    pod = with_init(valid_pod("limit-memory", 1, **requirements), requirements)
    limitrange.mutate_pod(pod, valid_limit_range()["spec"])
    expected = {"requests": {"cpu": "50m", "memory": "512Mi"}, "limits": {"cpu": "75m", "memory": "10Mi"}}
    assert same(pod["spec"]["containers"][0]["resources"], expected)
    assert same(pod["spec"]["initContainers"][0]["resources"], expected)
    assert pod["metadata"]["annotations"][limitrange.ANNOTATION] == (
        "LimitRanger plugin set: cpu request for container foo-0; cpu, memory limit for container foo-0; "
        "cpu request for init container foo-0; cpu, memory limit for init container foo-0"
    )


def test_merge_pod_resource_requirements_complete():
    """TestMergePodResourceRequirements: a pod with everything set is untouched and not annotated."""
    pod = with_init(
        valid_pod("limit-memory", 1, {"cpu": "100m", "memory": "512Mi"}, {"cpu": "200m", "memory": "1G"}),
        {"requests": {"cpu": "200m", "memory": "1G"}, "limits": {"cpu": "400m", "memory": "2G"}},
    )
    before = copy.deepcopy(pod)
    limitrange.mutate_pod(pod, valid_limit_range()["spec"])
    assert pod == before
    assert "annotations" not in pod["metadata"]


def test_pod_limit_func_apply_default():
    """TestPodLimitFuncApplyDefault: containers and init containers get 75m/10Mi limits, 50m/5Mi requests."""
    pod = with_init(valid_pod("foo", 1), {"requests": {}, "limits": {}})
    limitrange.mutate_pod(pod, valid_limit_range()["spec"])
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        resources = container["resources"]
        shown = {p: {k: str(Quantity(v)) for k, v in resources[p].items()} for p in ("limits", "requests")}
        assert shown == {"limits": {"cpu": "75m", "memory": "10Mi"}, "requests": {"cpu": "50m", "memory": "5Mi"}}


def test_limit_ranger_admit_pod():
    """TestLimitRangerAdmitPod: mutation passes, validation refuses a pod with no resources.

    Upstream asserts only an error; the aggregate text is ours, derived from admission.go with
    the min/max keys visited sorted.
    """
    lr = valid_limit_range(defaults=False)
    pod = valid_pod("testPod", 1)
    mutated = limitrange.apply_limit_ranges(pod, [lr])
    with pytest.raises(AdmissionDenied) as err:
        limitrange.check_limit_ranges(pod, [lr])
    assert err.value.reason == "LimitRangeViolation"
    assert err.value.message == (
        "[minimum cpu usage per Pod is 50m.  No request is specified, "
        "minimum memory usage per Pod is 2Mi.  No request is specified, "
        "maximum cpu usage per Pod is 200m.  No limit is specified, "
        "maximum memory usage per Pod is 4Gi.  No limit is specified, "
        "minimum cpu usage per Container is 25m.  No request is specified, "
        "minimum memory usage per Container is 1Mi.  No request is specified, "
        "maximum cpu usage per Container is 100m.  No limit is specified, "
        "maximum memory usage per Container is 2Gi.  No limit is specified]"
    )
    # the stored LimitRange is defaulted (SetDefaults_LimitRangeItem), so apply_limit_ranges fills
    # max as the default limit and request; the pod then passes
    assert mutated["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "100m", "memory": "2Gi"},
        "requests": {"cpu": "100m", "memory": "2Gi"},
    }
    limitrange.check_limit_ranges(mutated, [lr])


def test_set_default_limit_range_item():
    """TestSetDefaultLimitRangeItem (defaults_test.go): default <- max, defaultRequest <- default, then min."""
    spec = {
        "limits": [
            {
                "type": "Container",
                "max": {"cpu": "100m"},
                "min": {"memory": "100Mi"},
                "default": {},
                "defaultRequest": {},
            }
        ]
    }
    item = limitrange.default_limit_range(spec)["limits"][0]
    assert item["default"] == {"cpu": "100m"}
    assert item["defaultRequest"] == {"cpu": "100m", "memory": "100Mi"}
    assert spec["limits"][0]["default"] == {}, "the input is not modified"


def test_default_limit_range_leaves_pod_items():
    """SetDefaults_LimitRangeItem touches only Container items."""
    spec = {"limits": [{"type": "Pod", "max": {"cpu": "2"}}]}
    assert limitrange.default_limit_range(spec) == spec


def test_set_default_requests_pod():
    """TestSetDefaultRequestsPod (defaults_test.go): requests default to limits; an explicit 0 stays."""
    resources = {"requests": {"memory": "0"}, "limits": {"cpu": "100m", "memory": "1Gi"}}
    pod = {
        "spec": {
            "containers": [{"resources": copy.deepcopy(resources)}],
            "initContainers": [{"resources": copy.deepcopy(resources)}],
        }
    }
    defaulted = limitrange.apply_limit_ranges(pod, [])
    for container in defaulted["spec"]["containers"] + defaulted["spec"]["initContainers"]:
        assert container["resources"]["requests"] == {"memory": "0", "cpu": "100m"}
    bare = limitrange.apply_limit_ranges({"spec": {"containers": [{}]}}, [])
    assert "cpu" not in (bare["spec"]["containers"][0].get("resources") or {}).get("requests", {})


def test_ordering_trap_request_above_default_limit():
    """Defaulting before LimitRanger: a request above the default limit becomes an invalid pod."""
    lr = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]}}
    pod = quota.apply_limit_ranges(
        {"spec": {"containers": [{"name": "nb", "resources": {"requests": {"cpu": "4"}}}]}}, [lr]
    )
    with pytest.raises(Invalid) as err:
        quota.validate_pod_resources(pod)
    assert err.value.message == (
        'spec.containers[0].resources.requests: Invalid value: "4": must be less than or equal to cpu limit of 2'
    )


def test_multiple_limit_ranges_apply_in_turn():
    """Each LimitRange mutates in turn; the annotation is the last one that set something."""
    first = {"spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}
    second = {
        "spec": {"limits": [{"type": "Container", "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "512Mi"}}]}
    }
    pod = quota.apply_limit_ranges({"spec": {"containers": [{"name": "nb"}]}}, [first, second])
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "1Gi"},
        "requests": {"cpu": "100m", "memory": "512Mi"},
    }
    assert pod["metadata"]["annotations"][limitrange.ANNOTATION] == (
        "LimitRanger plugin set: memory request for container nb; memory limit for container nb"
    )


def test_first_breached_limit_range_reports_all_its_breaches():
    """runLimitFunc stops at the first LimitRange with errors; that one's errors are aggregated."""
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "16Gi"},
                        "limits": {"cpu": "50m", "memory": "16Gi"},
                    },
                }
            ]
        }
    }
    loose = {"spec": {"limits": [{"type": "Container", "max": {"memory": "32Gi"}}]}}
    strict = {"spec": {"limits": [{"type": "Container", "min": {"cpu": "100m"}, "max": {"memory": "8Gi"}}]}}
    other = {"spec": {"limits": [{"type": "Container", "max": {"cpu": "10m"}}]}}
    with pytest.raises(AdmissionDenied) as err:
        quota.check_limit_ranges(pod, [loose, strict, other])
    assert err.value.message == (
        "[minimum cpu usage per Container is 100m, but request is 50m, "
        "maximum memory usage per Container is 8Gi, but limit is 16Gi]"
    )


def test_limit_range_comparisons_are_milli_precise():
    """requestLimitEnforcedValues: 100.5m rounds up to 101m, so it meets a 101m minimum."""
    lr = {"spec": {"limits": [{"type": "Container", "min": {"cpu": "101m"}}]}}
    pod = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100.5m"}}}]}}
    quota.check_limit_ranges(pod, [lr])
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    with pytest.raises(AdmissionDenied, match="minimum cpu usage per Container is 101m, but request is 100m"):
        quota.check_limit_ranges(pod, [lr])


def test_ratio_message_prints_go_percent_f():
    """limitRequestRatioConstraint prints the observed ratio with %f (six decimals)."""
    lr = {"spec": {"limits": [{"type": "Container", "maxLimitRequestRatio": {"memory": "2"}}]}}
    pod = {
        "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"memory": "3Gi"}, "limits": {"memory": "7Gi"}}}]
        }
    }
    with pytest.raises(AdmissionDenied) as err:
        quota.check_limit_ranges(pod, [lr])
    assert err.value.message == "memory max limit to request ratio per Container is 2, but provided ratio is 2.333333"


def test_gpu_max_forces_a_limit():
    """A LimitRange max on nvidia.com/gpu requires every container to declare one (no default)."""
    lr = {"spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "1"}}]}}
    with pytest.raises(
        AdmissionDenied, match=r"^maximum nvidia.com/gpu usage per Container is 1.  No limit is specified$"
    ):
        limitrange.check_limit_ranges({"spec": {"containers": [{"name": "cpu-only"}]}}, [lr])


# -- ValidateLimitRange --------------------------------------------------------------------------------


def test_validate_limit_range_accepts_valid():
    limitrange.validate_limit_range_spec(valid_limit_range()["spec"])
    quota.validate_limit_range_spec({"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]})


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]},
            "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'",
        ),
        (
            {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]},
            '[spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1, '
            'spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default request value 1, '
            'spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1]',
        ),
        (
            {
                "limits": [
                    {"type": "Container", "default": {"nvidia.com/gpu": "2"}, "defaultRequest": {"nvidia.com/gpu": "1"}}
                ]
            },
            'spec.limits[0].defaultRequest[nvidia.com/gpu]: Invalid value: "1": '
            "default value 2 must equal to defaultRequest value 1 in nvidia.com/gpu",
        ),
        (
            {"limits": [{"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}]},
            'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1',
        ),
        (
            {
                "limits": [
                    {
                        "type": "Container",
                        "min": {"cpu": "1"},
                        "max": {"cpu": "2"},
                        "maxLimitRequestRatio": {"cpu": "3"},
                    }
                ]
            },
            'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "3": ratio 3 is greater than max/min = 2.000000',
        ),
        (
            {"limits": [{"type": "Container"}, {"type": "Container"}]},
            'spec.limits[1].type: Duplicate value: "Container"',
        ),
        (
            {"limits": [{"type": "Node"}]},
            'spec.limits[0].type: Invalid value: "Node": must be a standard limit type or fully qualified',
        ),
        (
            {"limits": [{"type": "Container", "max": {"gpu": "1"}}]},
            "["
            + ", ".join(
                f'spec.limits[0].{key}[gpu]: Invalid value: "gpu": {msg}'
                for key in ("max", "default", "defaultRequest")
                for msg in (
                    "must be a standard resource type or fully qualified",
                    "must be a standard resource for containers",
                )
            )
            + "]",
        ),
        (
            {"limits": [{"type": "PersistentVolumeClaim", "max": {"cpu": "1"}}]},
            "spec.limits[0].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
        ),
    ],
    ids=[
        "pod-default",
        "min-over-max",
        "gpu-default-request",
        "ratio-below-1",
        "ratio-over-max-min",
        "duplicate-type",
        "unknown-type",
        "bad-resource",
        "pvc-no-storage",
    ],
)
def test_validate_limit_range_rejects(spec, message):
    """ValidateLimitRange messages (validation.go; keys visited sorted, defaults applied first)."""
    with pytest.raises(Invalid) as err:
        limitrange.validate_limit_range_spec(spec)
    assert err.value.message == message
