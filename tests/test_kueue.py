"""``jupyter_quota/kueue.py``: Kueue's objects for the profiles, and the Job's part when Kueue is in use.

The same objects are created on a real API server with Kueue's CRDs in
``tests/kube/test_kueue_objects.py``; here, what they say.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from jupyter_quota import labels
from jupyter_quota.errors import InvalidRequest
from jupyter_quota.jobspec import JobRequest, JobSettings, build_job
from jupyter_quota.kueue import KueueSettings, kueue_objects
from jupyter_quota.profiles import TeamProfile

GPU = "nvidia.com/gpu"


def alpha(**fields) -> TeamProfile:
    fields.setdefault("hard", {"requests.nvidia.com/gpu": "4", "requests.cpu": "32", "limits.memory": "256Gi"})
    return TeamProfile(team="alpha", users=["alice"], **fields)


def beta(**fields) -> TeamProfile:
    fields.setdefault("hard", {"requests.nvidia.com/gpu": "2"})
    return TeamProfile(team="beta", users=["bob"], **fields)


def by_kind(objects: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds


def test_each_team_gets_a_cluster_queue_in_one_cohort_and_a_local_queue_in_its_namespace():
    objects = kueue_objects([alpha(), beta()], KueueSettings(cohort="research", queue="jobs"))
    kinds = by_kind(objects)
    assert [o["kind"] for o in objects] == [
        *["PriorityClass"] * 3,
        *["WorkloadPriorityClass"] * 3,
        "ResourceFlavor",
        "ClusterQueue",
        "ClusterQueue",
        "LocalQueue",
        "LocalQueue",
    ]
    queues = {q["metadata"]["name"]: q["spec"] for q in kinds["ClusterQueue"]}
    assert {spec["cohortName"] for spec in queues.values()} == {"research"}
    assert queues["team-alpha"]["namespaceSelector"] == {"matchLabels": {labels.TEAM: "alpha"}}
    local = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"] for q in kinds["LocalQueue"]}
    assert local == {
        ("team-alpha", "jobs"): {"clusterQueue": "team-alpha"},
        ("team-beta", "jobs"): {"clusterQueue": "team-beta"},
    }


def test_nominal_quota_is_the_hard_gpu_cpu_and_memory_and_nothing_is_borrowed_unless_the_profile_says():
    [alpha_queue] = by_kind(kueue_objects([alpha(borrowingLimit={"requests.nvidia.com/gpu": "2"})]))["ClusterQueue"]
    [group] = alpha_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", GPU]
    assert group["flavors"] == [
        {
            "name": "default-flavor",
            "resources": [
                # Kueue reads a null borrowingLimit as "no limit": the profile's empty one is "0"
                {"name": "cpu", "nominalQuota": "32", "borrowingLimit": "0"},
                # a limits-only memory bound caps requests too (requests <= limits)
                {"name": "memory", "nominalQuota": "256Gi", "borrowingLimit": "0"},
                {"name": GPU, "nominalQuota": "4", "borrowingLimit": "2"},
            ],
        }
    ]


def test_lending_limit_and_preemption_policies():
    [queue] = by_kind(kueue_objects([beta(lendingLimit={"requests.nvidia.com/gpu": "1"})]))["ClusterQueue"]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": GPU, "nominalQuota": "2", "borrowingLimit": "0", "lendingLimit": "1"}
    ]
    assert queue["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        # a borrowing job may preempt only other teams' best-effort workloads (value 10)
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
        "withinClusterQueue": "LowerPriority",
    }


@pytest.mark.parametrize(
    ("profile", "words"),
    [
        (
            lambda: beta(lendingLimit={"requests.nvidia.com/gpu": "3"}),
            "lendingLimit nvidia.com/gpu 3 is more than its hard 2",
        ),
        (
            lambda: beta(borrowingLimit={"requests.cpu": "4"}),
            "borrowingLimit names cpu, which its hard quota does not bound",
        ),
    ],
)
def test_limits_kueue_would_refuse_are_refused_naming_the_team_and_field(profile, words):
    with pytest.raises(InvalidRequest, match="profile 'beta'") as e:
        kueue_objects([profile()])
    assert words in e.value.message


def test_one_priority_class_per_priority_with_the_profiles_names_and_values_that_order_them():
    kinds = by_kind(kueue_objects([alpha(), beta(priorityClasses={"high": "beta-urgent"})]))
    values = {c["metadata"]["name"]: c["value"] for c in kinds["WorkloadPriorityClass"]}
    assert values == {
        "jupyter-quota-high": 1000,
        "jupyter-quota-normal": 100,
        "jupyter-quota-best-effort": 10,
        "beta-urgent": 1000,
    }
    assert {c["metadata"]["name"]: c["value"] for c in kinds["PriorityClass"]} == values
    never = [c["metadata"]["name"] for c in kinds["PriorityClass"] if c.get("preemptionPolicy") == "Never"]
    assert never == ["jupyter-quota-best-effort"]


def test_one_class_name_for_two_priorities_is_refused():
    with pytest.raises(InvalidRequest, match="'shared' is used for both 'high' and 'normal'"):
        kueue_objects([alpha(priorityClasses={"high": "shared", "normal": "shared"})])


def test_a_flavor_per_node_selector_named_by_its_values():
    kinds = by_kind(kueue_objects([alpha(nodeSelector={"gpu-model": "A100"}), beta()]))
    assert [(f["metadata"]["name"], f["spec"]) for f in kinds["ResourceFlavor"]] == [
        ("a100", {"nodeLabels": {"gpu-model": "A100"}}),
        ("default-flavor", {}),
    ]
    flavors = [q["spec"]["resourceGroups"][0]["flavors"][0]["name"] for q in kinds["ClusterQueue"]]
    assert flavors == ["a100", "default-flavor"]


# -- the Job's part ---------------------------------------------------------------------------------


def job(profile: TeamProfile, priority: str = "normal", **settings) -> dict:
    request = JobRequest(name="sft-1", args=["--model", "m"], priority=priority)
    return build_job(profile, request, "alice", ["swift", "sft"], JobSettings(image="img", **settings))


@pytest.mark.parametrize(
    ("priority", "klass"),
    [("high", "alpha-high"), ("normal", "jupyter-quota-normal"), ("best-effort", "jupyter-quota-best-effort")],
)
def test_with_kueue_a_job_is_suspended_and_labelled_with_its_queue_and_priority_class(priority, klass):
    built = job(alpha(priorityClasses={"high": "alpha-high"}), priority, kueue_queue="team-queue")
    assert built["spec"]["suspend"] is True
    assert built["metadata"]["labels"][labels.KUEUE_QUEUE_NAME] == "team-queue"
    assert built["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] == klass
    assert built["spec"]["template"]["spec"]["priorityClassName"] == klass
    # the pod template is not Kueue's business: only the Job is labelled
    assert labels.KUEUE_QUEUE_NAME not in built["spec"]["template"]["metadata"]["labels"]


def test_without_kueue_a_job_runs_at_once_with_the_profiles_class_for_its_priority():
    profile = alpha(priorityClasses={"best-effort": "spot"}, priorityClassName="team")
    assert "suspend" not in job(profile)["spec"]
    assert not {labels.KUEUE_QUEUE_NAME, labels.KUEUE_PRIORITY_CLASS} & set(job(profile)["metadata"]["labels"])
    assert job(profile, "best-effort")["spec"]["template"]["spec"]["priorityClassName"] == "spot"
    assert job(profile, "high")["spec"]["template"]["spec"]["priorityClassName"] == "team"
    assert "priorityClassName" not in job(alpha())["spec"]["template"]["spec"]


# -- the command line -------------------------------------------------------------------------------


def test_profiles_render_kueue_appends_kueue_objects_after_the_team_objects(tmp_path):
    config = tmp_path / "jupyter_server_config.py"
    config.write_text(
        "c.JupyterQuota.kueue_queue = 'gpu-jobs'\n"
        "c.JupyterQuota.kueue_cohort = 'lab'\n"
        "c.JupyterQuota.profiles = [\n"
        "  {'team': 'alpha', 'users': ['alice'], 'hard': {'requests.nvidia.com/gpu': '2'},\n"
        "   'borrowingLimit': {'requests.nvidia.com/gpu': '2'}},\n"
        "  {'team': 'beta', 'users': ['bob'], 'hard': {'requests.nvidia.com/gpu': '2'}},\n"
        "]\n"
    )
    run = [sys.executable, "-m", "jupyter_quota", "profiles", "render", "--config", str(config)]
    plain = list(yaml.safe_load_all(subprocess.run(run, capture_output=True, text=True, check=True, timeout=60).stdout))
    docs = list(
        yaml.safe_load_all(
            subprocess.run([*run, "--kueue"], capture_output=True, text=True, check=True, timeout=60).stdout
        )
    )
    assert docs[: len(plain)] == plain
    added = docs[len(plain) :]
    assert added == kueue_objects(
        [alpha(hard={"requests.nvidia.com/gpu": "2"}, borrowingLimit={"requests.nvidia.com/gpu": "2"}), beta()],
        KueueSettings(cohort="lab", queue="gpu-jobs"),
    )
