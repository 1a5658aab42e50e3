"""Retention of finished jobs (``retention``): pruned past their age or count, kept in history."""

from __future__ import annotations

import json
import sqlite3

from local_testing import NO_GPUS, NS, UNTIL_CANCELLED, Profile, make_job, phase_is, wait_for

from jupyter_quota.backends.local import retention


def _history(ledger_path):
    con = sqlite3.connect(ledger_path)
    con.row_factory = sqlite3.Row
    try:
        return {r["name"]: dict(r) for r in con.execute("SELECT * FROM job_history")}
    finally:
        con.close()


def test_finished_jobs_past_their_retention_are_pruned_with_their_logs_and_kept_in_history(make_backend):
    backend, profile = make_backend(retention_seconds=3600, retention_count=-1), Profile()
    backend.submit(profile, make_job("done", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "done", phase_is("Succeeded"))
    backend.submit(profile, make_job("recent", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "recent", phase_is("Succeeded"))
    backend.submit(profile, make_job("live", *UNTIL_CANCELLED), owner="alice")
    done_dir = make_backend.state_dir / "jobs" / NS / "done"
    assert done_dir.is_dir()
    assert backend.prune() == 0  # nothing finished an hour ago yet
    con = sqlite3.connect(make_backend.ledger_path)
    with con:  # as if "done" had finished two hours ago
        con.execute("UPDATE jobs SET finished_at = '2000-01-01T00:00:00Z' WHERE name = 'done'")
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
    assert backend.prune() == 1
    assert [j["name"] for j in backend.list_jobs(profile)] == ["live", "recent"]
    assert not done_dir.exists()
    kept = _history(make_backend.ledger_path)["done"]
    assert (kept["namespace"], kept["team"], kept["owner"], kept["phase"], kept["exit_code"]) == (
        NS,
        "a",
        "alice",
        "Succeeded",
        0,
    )
    assert kept["finished_at"] == "2000-01-01T00:00:00Z" and kept["started_at"] and kept["created_at"]
    assert kept["gpus"] == 1 and json.loads(kept["gpu_indices"]) == [0]
    assert json.loads(kept["resources"])["requests"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert json.loads(kept["usage"])["requests.nvidia.com/gpu"] == "1"
    again = backend.submit(profile, make_job("done", "--lines", "1"), owner="alice")  # the name is free again
    assert again["phase"] == "Running"


def test_a_job_submitted_under_a_pruned_name_keeps_its_directory(make_backend, monkeypatch, tmp_path):
    """A submit of the same name lands between the prune's commit (the name is free) and the
    removal of the pruned job's directory: the new job's log and exit record survive."""
    backend, profile = make_backend(retention_seconds=-1, retention_count=0), Profile()
    backend.submit(profile, make_job("reused", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "reused", phase_is("Succeeded"))
    go = tmp_path / "go"
    remove, resubmitted = retention._remove, []

    def submit_then_remove(directory, log):
        if not resubmitted:  # the name is free once the prune has committed
            job = backend.submit(profile, make_job("reused", "--lines", "1", "--until-file", str(go)), owner="bob")
            resubmitted.append(job)
        remove(directory, log)

    monkeypatch.setattr(retention, "_remove", submit_then_remove)
    assert backend.prune() == 1
    assert resubmitted and resubmitted[0]["phase"] == "Running", resubmitted
    go.touch()
    job = wait_for(backend, profile, "reused", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["owner"]) == ("Succeeded", "bob"), job
    assert "exiting with 0" in backend.logs(profile, "reused")


def test_a_pruned_jobs_directory_left_behind_by_a_crash_is_removed_by_the_next_prune(make_backend):
    backend, profile = make_backend(retention_seconds=-1, retention_count=0), Profile()
    left = make_backend.state_dir / "jobs" / ".pruned" / "7"  # moved aside, then the server died
    left.mkdir(parents=True)
    (left / "output.log").write_text("old\n")
    backend.submit(profile, make_job("kept", *UNTIL_CANCELLED), owner="alice")  # live: not pruned
    assert backend.prune() == 0
    assert not left.exists()
    assert (make_backend.state_dir / "jobs" / NS / "kept").is_dir()


def test_each_namespace_keeps_its_newest_finished_jobs_pruned_in_bounded_batches(make_backend):
    backend = make_backend(NO_GPUS, retention_seconds=-1, retention_count=2, prune_batch=2)
    a, b = Profile(), Profile(team="b", namespace="team-b")
    for i in range(5):
        backend.submit(a, make_job(f"a-{i}"), owner="alice")
        backend.cancel(a, f"a-{i}", by="alice")
    backend.submit(a, make_job("waiting"), owner="alice")
    backend.submit(b, make_job("b-0", namespace="team-b"), owner="bob")
    backend.cancel(b, "b-0", by="bob")
    assert backend.prune() == 2  # a batch at most
    assert backend.prune() == 1
    assert backend.prune() == 0
    assert [j["name"] for j in backend.list_jobs(a)] == ["waiting", "a-4", "a-3"]
    assert [j["name"] for j in backend.list_jobs(b)] == ["b-0"]
    assert sorted(_history(make_backend.ledger_path)) == ["a-0", "a-1", "a-2"]
    assert _history(make_backend.ledger_path)["a-0"]["reason"] == "Cancelled"
