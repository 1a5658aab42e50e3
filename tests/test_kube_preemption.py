"""The pure side of preemption on Kubernetes (``backends/kube/preemption.py``) and of resuming
(``resume.py``): which scheduler event preempted which Job, the requeued Job, the job as shown.
The real scheduler, kubelet and swift run in ``tests/kube/test_real_node.py``."""

from __future__ import annotations

import json

from jupyter_quota import jobspec, labels, reasons, resume
from jupyter_quota.backends.kube import jobview, preemption
from jupyter_quota.profiles import TeamProfile

PROFILE = TeamProfile(team="a", namespace="team-a", users=["alice"], priorityClasses={"best-effort": "low"})
ARGS = ["--model", "m", "--output_dir", "/work/out"]


def stored_job(name="tune", created="2026-12-02T03:00:00Z", history=None, args=ARGS) -> dict:
    """``build_job``'s Job as the API server gives it back: uid, selector, controller labels."""
    request = jobspec.JobRequest(name=name, args=list(args), priority="best-effort")
    job = jobspec.build_job(PROFILE, request, "alice", ["swift", "sft"])
    job["metadata"].update(uid="uid-1", creationTimestamp=created, resourceVersion="7")
    job["spec"]["selector"] = {"matchLabels": {labels.CONTROLLER_UID: "uid-1"}}
    job["spec"]["template"]["metadata"]["labels"].update({labels.CONTROLLER_UID: "uid-1", labels.JOB_NAME: name})
    if history is not None:
        job["metadata"]["annotations"][labels.HISTORY] = json.dumps(history)
    job["status"] = {"active": 1}
    return job


def event(pod: str, at="2026-12-02T03:01:00.123456Z", reason=reasons.PREEMPTED, kind="Pod") -> dict:
    return {
        "reason": reason,
        "message": f"Preempted by team-b/mine-x7k2p on node jq-node ({pod})",
        "involvedObject": {"kind": kind, "name": pod, "namespace": "team-a"},
        "eventTime": at,
    }


def test_the_event_about_a_pod_of_the_job_is_its_preemption_and_no_other_is():
    job = stored_job()
    assert preemption.preemption(job, [event("tune-ab3cd")])["involvedObject"]["name"] == "tune-ab3cd"
    assert preemption.preemption(job, [event("tune-x-ab3cd")]) is None  # job "tune-x"'s pod
    assert preemption.preemption(job, [event("tune-ab3cdef")]) is None
    assert preemption.preemption(job, [event("tune-ab3cd", kind="Job")]) is None
    assert preemption.preemption(job, [event("tune-ab3cd", reason="Scheduled")]) is None
    # older than the Job: about an earlier Job of the same name
    assert preemption.preemption(job, [event("tune-ab3cd", at="2026-12-02T02:59:59.9Z")]) is None
    # the same second as the Job's creation still counts (the Job's stamp has whole seconds)
    assert preemption.preemption(job, [event("tune-ab3cd", at="2026-12-02T03:00:00.5Z")]) is not None
    # answered already: its pod is in the Job's history
    answered = stored_job(history=[{"event": "Preempted", "at": "x", "pod": "tune-ab3cd"}])
    assert preemption.preemption(answered, [event("tune-ab3cd")]) is None
    newest = preemption.preemption(
        job, [event("tune-ab3cd"), event("tune-zz9zz", at="2026-12-02T03:05:00Z"), event("tune-qq1qq")]
    )
    assert newest["involvedObject"]["name"] == "tune-zz9zz"


def test_endpoints_and_kueue_jobs_are_not_requeued_by_the_service():
    job = stored_job()
    assert preemption.requeued_here(job)
    job["metadata"]["labels"][labels.KIND] = labels.KIND_ENDPOINT
    assert not preemption.requeued_here(job)
    job = stored_job()
    job["metadata"]["labels"][labels.KUEUE_QUEUE_NAME] = "team-a"
    assert not preemption.requeued_here(job)


def test_the_requeued_job_is_the_same_job_resuming_from_the_checkpoint_with_its_history():
    job = stored_job()
    progress = preemption.Progress()
    progress.update(
        "{'loss': 2.0, 'global_step/max_steps': '3/30'}\n"
        "Saving model checkpoint to /work/out/v0-1/checkpoint-2\n"
        "{'loss': 1.9, 'global_step/max_steps': '5/30'}\n"
        "Saving model checkpoint to /work/out/v0-1/checkpoint-4\n"
    )
    again = preemption.answer(job, event("tune-ab3cd"), progress, "2026-12-02T03:01:02Z")
    assert again["metadata"] == {
        "name": "tune",
        "namespace": "team-a",
        "labels": job["metadata"]["labels"],
        "annotations": {
            **job["metadata"]["annotations"],
            labels.HISTORY: again["metadata"]["annotations"][labels.HISTORY],
        },
    }
    assert "selector" not in again["spec"] and "status" not in again
    template = again["spec"]["template"]
    assert (
        labels.CONTROLLER_UID not in template["metadata"]["labels"]
        and labels.JOB_NAME not in template["metadata"]["labels"]
    )
    assert template["spec"]["priorityClassName"] == "low"
    # the folders are not visible here: the log is taken at its word
    assert template["spec"]["containers"][0]["command"] == [
        "swift",
        "sft",
        *ARGS,
        "--resume_from_checkpoint",
        "/work/out/v0-1/checkpoint-4",
    ]
    history = preemption.history(again)
    assert [e["event"] for e in history] == ["Preempted", "Requeued"]
    assert history[0]["step"] == 5 and history[0]["reason"] == "Preempted" and history[0]["pod"] == "tune-ab3cd"
    assert history[0]["message"] == (
        "the scheduler deleted its pod at step 5 for a higher-priority pod "
        "(Preempted by team-b/mine-x7k2p on node jq-node (tune-ab3cd))"
    )
    assert history[1]["checkpoint"] == "/work/out/v0-1/checkpoint-4"
    assert history[1]["message"].endswith("requeued: it resumes from /work/out/v0-1/checkpoint-4 when GPUs free up")

    # preempted again: the newer checkpoint replaces the earlier resume point; history goes on
    again["metadata"].update(uid="uid-2", creationTimestamp="2026-12-02T03:01:02Z")
    later = preemption.Progress(step=9, checkpoints=["/work/out/v1-2/checkpoint-8"])
    third = preemption.answer(again, event("tune-zz9zz", at="2026-12-02T03:09:00Z"), later, "2026-12-02T03:09:01Z")
    assert third["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == [
        "--resume_from_checkpoint",
        "/work/out/v1-2/checkpoint-8",
    ]
    assert third["spec"]["template"]["spec"]["containers"][0]["command"].count("--resume_from_checkpoint") == 1
    assert [e["event"] for e in preemption.history(third)] == ["Preempted", "Requeued", "Preempted", "Requeued"]


def test_a_users_own_resume_flag_is_kept_and_no_checkpoint_means_from_the_beginning():
    own = [*ARGS, "--resume_from_checkpoint", "/mine"]
    job = stored_job(args=own)
    again = preemption.answer(job, event("tune-ab3cd"), preemption.Progress(step=1), "t")
    assert again["spec"]["template"]["spec"]["containers"][0]["command"] == ["swift", "sft", *own]
    plain = preemption.answer(stored_job(), event("tune-ab3cd"), preemption.Progress(), "t")
    assert plain["spec"]["template"]["spec"]["containers"][0]["command"] == ["swift", "sft", *ARGS]
    assert preemption.history(plain)[-1]["message"].endswith(
        "it starts again from the beginning when GPUs free up (no checkpoint was saved)"
    )


def test_the_newest_whole_checkpoint_is_resumed_from(tmp_path):
    whole, cut = tmp_path / "checkpoint-2", tmp_path / "checkpoint-4"
    whole.mkdir()
    cut.mkdir()
    (whole / resume.TRAINER_STATE).write_text("{}")
    assert resume.newest_whole([str(whole), str(cut)]) == str(whole)  # killed while saving 4
    assert resume.newest_whole([]) is None
    assert resume.resume_args(["--resume_from_checkpoint=/x"], "/y") == []
    assert resume.resume_args([], None) == []


def test_the_job_view_says_preempted_then_requeued_then_resumed():
    job = stored_job()
    pod = {
        "metadata": {
            "name": "tune-ab3cd",
            "labels": {labels.JOB_NAME: "tune"},
            "deletionTimestamp": "x",
            "creationTimestamp": "2026-12-02T03:00:01Z",
        },
        "status": {"phase": "Running", "startTime": "2026-12-02T03:00:02Z"},
    }
    shown = jobview.job_json(job, [pod], [], preemptions=[event("tune-ab3cd")])
    assert (shown["phase"], shown["reason"]) == ("Pending", "Preempted"), shown
    assert shown["message"].endswith("; it is being requeued")

    # the Job controller counted the killed pod as failed: still Preempted, not Failed
    job["status"] = {
        "failed": 1,
        "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
    }
    assert jobview.job_json(job, [pod], [], preemptions=[event("tune-ab3cd")])["reason"] == "Preempted"

    again = preemption.answer(
        stored_job(), event("tune-ab3cd"), preemption.Progress(step=5, checkpoints=["/c/checkpoint-4"]), "t"
    )
    again["metadata"].update(uid="uid-2", creationTimestamp="2026-12-02T03:01:02Z")
    waiting = {
        "metadata": {
            "name": "tune-qq1qq",
            "labels": {labels.JOB_NAME: "tune"},
            "creationTimestamp": "2026-12-02T03:01:03Z",
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
                }
            ],
        },
    }
    shown = jobview.job_json(again, [waiting], [], preemptions=[event("tune-ab3cd")])
    assert (shown["phase"], shown["reason"]) == ("Pending", "Requeued"), shown
    assert "it resumes from /c/checkpoint-4 when GPUs free up; 0/1 nodes are available" in shown["message"]
    assert [e["event"] for e in shown["history"]] == ["Preempted", "Requeued"]

    waiting["status"] = {"phase": "Running", "startTime": "2026-12-02T03:04:00Z"}
    shown = jobview.job_json(again, [waiting], [], preemptions=[event("tune-ab3cd")])
    assert shown["phase"] == "Running" and "reason" not in shown
    assert shown["history"][-1] == {"event": "Resumed", "at": "2026-12-02T03:04:00Z", "checkpoint": "/c/checkpoint-4"}
