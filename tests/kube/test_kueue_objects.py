"""Kueue's objects from ``profiles render --kueue`` on a real API server with Kueue's own CRDs.

What is tested: Kueue v0.19.2's CRDs (``tests/data/kueue/``, see its README) install on the test
API server, and the API server accepts every object ``kueue.kueue_objects`` renders, stores each
field as sent (the structural schema *prunes* unknown fields silently, so a misspelt field would be
dropped, not refused: every field sent is compared with the stored object), and refuses objects
that break the schema (enums, quantity patterns, required fields). The Jobs the kube backend
creates with ``JupyterQuota.kueue_queue`` carry Kueue's labels and their priority's class, and the
API server's Priority admission gives their pods the class's value.

What is not tested: Kueue's controller and webhooks are not built here, so no ClusterQueue
becomes active, no Workload is created, nothing is admitted, borrowed or preempted by Kueue; the
CRDs' CEL rules (``x-kubernetes-validations``, e.g. "borrowingLimit must be nil when cohort is
empty") need Kubernetes 1.25+ and are not enforced by the 1.20 test API server, and neither is
Kueue's webhook validation; Job suspension (``spec.suspend``) arrived in Kubernetes 1.21, so the
1.20 API server drops it (on a newer cluster, ``JUPYTER_QUOTA_TEST_KUBECONFIG``, the test checks
that it is stored).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import kubecluster
import pytest
import yaml
from kubecluster import team_profile, until
from kubernetes import client
from kubernetes.client.rest import ApiException

from jupyter_quota import errors, jobspec, kueue, labels
from jupyter_quota.backends.kube import apply_profiles

CRDS = Path(__file__).resolve().parents[1] / "data" / "kueue"
#: Kueue's kinds we render, by their resource (plural) names.
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
KINDS = tuple(PLURALS.values())
GROUP, VERSION = kueue.API_VERSION.split("/")


@pytest.fixture(scope="module")
def kueue_crds(kube_cluster):
    """Kueue's CRDs installed once (kept for the session), each Established and served."""
    patches = kubecluster.CACHE / "bin" / "PATCHES"
    if not kube_cluster.external and "reflect2-v1.0.2" not in (patches.read_text() if patches.exists() else ""):
        # an API server built before the fix dies on the first custom resource, and with it the
        # session's cluster that every other kube test shares
        pytest.fail(f"{kubecluster.CACHE} was built without reflect2 v1.0.2: run scripts/build-kube.sh", pytrace=False)
    api = kube_cluster.api_client()
    extensions = client.ApiextensionsV1Api(api)
    for plural in KINDS:
        crd = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as e:
            if e.status != 409:  # installed by an earlier module of this run
                raise
    objects = client.CustomObjectsApi(api)

    def served():
        for plural in KINDS:
            try:
                objects.list_cluster_custom_object(GROUP, VERSION, plural, limit=1)
            except ApiException:
                return False
        return True

    until(served, 60, "Kueue's CRDs to be served")
    return api


@pytest.fixture
def cluster_scoped(kueue_crds):
    """Creates cluster-scoped objects and deletes them after the test."""
    made = []
    objects = client.CustomObjectsApi(kueue_crds)
    scheduling = client.SchedulingV1Api(kueue_crds)

    def create(obj: dict) -> dict:
        if obj["kind"] == "PriorityClass":
            made.append(lambda: scheduling.delete_priority_class(obj["metadata"]["name"]))
            return kueue_crds.sanitize_for_serialization(scheduling.create_priority_class(obj))
        plural = PLURALS[obj["kind"]]
        made.append(lambda: objects.delete_cluster_custom_object(GROUP, VERSION, plural, obj["metadata"]["name"]))
        return objects.create_cluster_custom_object(GROUP, VERSION, plural, obj)

    yield create
    for delete in reversed(made):
        try:
            delete()
        except ApiException:
            pass  # already gone


def unique_profiles(**alpha_fields):
    """Two teams in fresh namespaces, with classes of their own (cluster-scoped names are shared)."""
    tag = uuid.uuid4().hex[:6]
    classes = {p: f"jq-{tag}-{p}" for p in ("high", "normal", "best-effort")}
    alpha = team_profile(
        f"jq-kueue-a-{tag}",
        hard={"requests.nvidia.com/gpu": "4", "requests.cpu": "32", "limits.memory": "256Gi"},
        borrowingLimit={"requests.nvidia.com/gpu": "2"},
        lendingLimit={"requests.nvidia.com/gpu": "1"},
        priorityClasses=classes,
        nodeSelector={"jupyter-quota-test/gpu-model": "h100"},
        # pods that state only GPUs get the CPU and memory the quota requires them to state
        limitRange={"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
        **alpha_fields,
    )
    beta = team_profile(f"jq-kueue-b-{tag}", priorityClasses=classes)
    return [alpha, beta], kueue.KueueSettings(cohort=f"cohort-{tag}", queue="team-queue")


def contains(stored, sent, path="") -> list[str]:
    """Where ``stored`` lacks or changed a field of ``sent`` (defaults the server added are fine)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{path}: {stored!r} is not an object"]
        return [p for k, v in sent.items() for p in contains(stored.get(k, _MISSING), v, f"{path}.{k}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [f"{path}: {stored!r} != {sent!r}"]
        return [p for i, (a, b) in enumerate(zip(stored, sent, strict=True)) for p in contains(a, b, f"{path}[{i}]")]
    return [] if stored == sent else [f"{path}: stored {stored!r}, sent {sent!r}"]


_MISSING = "<missing: pruned by the schema>"


def test_the_api_server_with_kueues_crds_stores_every_rendered_object_as_sent(kube, kueue_crds, cluster_scoped):
    profiles, settings = unique_profiles()
    apply_profiles(profiles, kube)  # the namespaces the LocalQueues live in
    objects = client.CustomObjectsApi(kueue_crds)
    rendered = kueue.kueue_objects(profiles, settings)
    assert {o["kind"] for o in rendered} == {
        "PriorityClass",
        "WorkloadPriorityClass",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    }
    try:
        for obj in rendered:
            meta = obj["metadata"]
            if obj["kind"] == "LocalQueue":
                stored = objects.create_namespaced_custom_object(GROUP, VERSION, meta["namespace"], "localqueues", obj)
            else:
                stored = cluster_scoped(obj)
            assert contains(stored, obj) == [], f"{obj['kind']} {meta['name']} was not stored as sent"
        # what the scheduler and Kueue will read back: the team's quota and preemption policies
        queue = objects.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", profiles[0].namespace)
        assert queue["spec"]["cohortName"] == settings.cohort
        assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2] == {
            "name": "nvidia.com/gpu",
            "nominalQuota": "4",
            "borrowingLimit": "2",
            "lendingLimit": "1",
        }
        assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    finally:
        for p in profiles:
            kube.delete(f"/api/v1/namespaces/{p.namespace}")


def rendered_queue() -> dict:
    profiles, settings = unique_profiles()
    return next(o for o in kueue.kueue_objects(profiles, settings) if o["kind"] == "ClusterQueue")


@pytest.mark.parametrize(
    ("break_it", "field"),
    [
        (
            lambda q: q["spec"]["preemption"].update(reclaimWithinCohort="Sometimes"),
            "spec.preemption.reclaimWithinCohort",
        ),
        (
            lambda q: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota="lots"),
            "nominalQuota",
        ),
        (lambda q: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop("name"), "name"),
        (lambda q: q["spec"]["resourceGroups"][0]["flavors"].clear(), "spec.resourceGroups.flavors"),
    ],
    ids=["unknown-policy", "not-a-quantity", "no-resource-name", "no-flavors"],
)
def test_a_broken_cluster_queue_is_refused_naming_the_field(kueue_crds, break_it, field):
    queue = rendered_queue()
    break_it(queue)
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(kueue_crds).create_cluster_custom_object(GROUP, VERSION, "clusterqueues", queue)
    assert refused.value.status == 422
    assert field in json.loads(refused.value.body)["message"]


def test_a_misspelt_field_is_pruned_not_refused_which_is_why_stored_objects_are_compared(kueue_crds, cluster_scoped):
    queue = rendered_queue()
    queue["spec"]["cohort"] = queue["spec"].pop("cohortName")  # v1beta1's name for the field
    stored = cluster_scoped(queue)
    assert contains(stored, queue) == [f".spec.cohort: stored {_MISSING!r}, sent {queue['spec']['cohort']!r}"]


def test_a_kueue_job_carries_its_queue_and_priority_class_and_its_pods_get_the_class_value(
    kube, kube_cluster, kueue_crds, cluster_scoped, make_kube_backend
):
    profiles, settings = unique_profiles()
    alpha = profiles[0]
    apply_profiles([alpha], kube)
    for obj in kueue.kueue_objects(profiles, settings):
        if obj["kind"] == "PriorityClass":
            cluster_scoped(obj)
    backend = make_kube_backend(kueue_queue=settings.queue)
    try:
        request = jobspec.parse_job_request({"name": "urgent", "args": ["--sleep", "600"], "gpus": 1}, alpha)
        request = replace(request, priority="high")  # as parse_job_request reads {"priority": "high"}
        job = backend.build_job(alpha, request, "alice", kubecluster.JOB_COMMAND)
        assert job["spec"]["suspend"] is True
        created = backend.submit(alpha, job, "alice")
        assert created["name"] == "urgent"
        stored = kube.get(f"/apis/batch/v1/namespaces/{alpha.namespace}/jobs/urgent")
        assert stored["metadata"]["labels"][labels.KUEUE_QUEUE_NAME] == settings.queue
        assert stored["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] == alpha.priorityClasses["high"]
        pod_class = stored["spec"]["template"]["spec"]["priorityClassName"]
        assert pod_class == alpha.priorityClasses["high"]
        if kube_cluster.external and "suspend" in stored["spec"]:
            assert stored["spec"]["suspend"] is True  # a 1.21+ cluster: Kueue unsuspends it
            return
        # Kubernetes 1.20 has no Job suspension and drops the field; the job controller makes the
        # pod at once, and the Priority admission plugin resolves its class to the class's value.
        assert "suspend" not in stored["spec"]
        pods = until(
            lambda: kube.get(f"/api/v1/namespaces/{alpha.namespace}/pods", labelSelector=f"{labels.JOB}=urgent")[
                "items"
            ],
            60,
            "the job controller's pod for the Job",
        )
        assert pods[0]["spec"]["priority"] == kueue.PRIORITY_VALUES["high"]
    finally:
        kube.delete(f"/api/v1/namespaces/{alpha.namespace}")


def test_with_kueue_a_job_over_the_quota_left_is_queued_not_refused(kube, namespace_name, make_kube_backend):
    """Kueue decides admission (it may lend the team idle GPUs), so the submit skips the quota
    pre-check that refuses the same job without Kueue."""
    profile = team_profile(namespace_name)  # 2 GPUs
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    body = {"args": ["--sleep", "600"], "gpus": 4}

    plain = make_kube_backend()
    request = jobspec.parse_job_request({**body, "name": "plain"}, profile)
    with pytest.raises(errors.AdmissionDenied, match="exceeded quota"):
        plain.submit(profile, plain.build_job(profile, request, "alice", kubecluster.JOB_COMMAND), "alice")

    queued = make_kube_backend(kueue_queue="team-queue")
    request = jobspec.parse_job_request({**body, "name": "queued"}, profile)
    created = queued.submit(profile, queued.build_job(profile, request, "alice", kubecluster.JOB_COMMAND), "alice")
    assert (created["name"], created["phase"], created["gpus"]) == ("queued", "Pending", 4)
