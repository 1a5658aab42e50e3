"""What the backend reads back (``backend``): keyset pages of jobs, the balance and its cache."""

from __future__ import annotations

from local_testing import GPU_KEY, NO_GPUS, NS, Profile, make_job

from jupyter_quota.backends.local import ledger as ledger_mod


def test_pages_are_keyset_pages_a_job_submitted_meanwhile_shows_on_no_later_page(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "100"})
    other = Profile(team="b", namespace="team-b", hard={GPU_KEY: "100"})
    for i in range(7):
        backend.submit(profile, make_job(f"j-{i}"), owner="alice")
        backend.submit(other, make_job(f"o-{i}", namespace="team-b"), owner="bob")
    first = backend.page_jobs(profile, 3)
    assert [j["name"] for j in first.items] == ["j-6", "j-5", "j-4"] and first.remaining == 4
    backend.submit(profile, make_job("late"), owner="alice")
    backend.cancel(profile, "j-3", by="alice")
    second = backend.page_jobs(profile, 3, first.next_start)
    assert [(j["name"], j["phase"]) for j in second.items] == [
        ("j-3", "Failed"),
        ("j-2", "Pending"),
        ("j-1", "Pending"),
    ]
    assert second.remaining == 1
    third = backend.page_jobs(profile, 3, second.next_start)
    assert [j["name"] for j in third.items] == ["j-0"] and third.next_start is None
    assert [j["name"] for j in backend.page_jobs(profile, 1).items] == ["late"]


def test_balance_is_cached_and_revalidated_by_the_generation(make_backend, monkeypatch):
    backend = make_backend(NO_GPUS)
    profile = Profile(limits=[{"type": "Container", "max": {"nvidia.com/gpu": "2"}}])
    backend.submit(profile, make_job("ft-1"), owner="alice")
    scans = []
    real = ledger_mod.live_in_namespace
    monkeypatch.setattr(ledger_mod, "live_in_namespace", lambda con, ns: scans.append(ns) or real(con, ns))

    first = backend.balance(profile)
    assert set(first) == {"namespace", "team", "resources", "quotas", "warnings", "limitRange", "observedAt", "stale"}
    assert first["namespace"] == NS and first["team"] == "a" and first["stale"] is False
    assert first["limitRange"] == {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "2"}}]}
    assert first["observedAt"].endswith("Z")
    assert first["resources"][GPU_KEY]["used"] == "1"
    for _ in range(5):
        backend.balance(profile)
    assert scans == [NS]  # one scan, then served from the cache

    # Another server process (here: another backend object) writes the ledger: seen at once.
    other = make_backend(NO_GPUS)
    other.submit(profile, make_job("ft-2"), owner="bob")
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "2"
    other.cancel(profile, "ft-2", by="bob")
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "1"
    assert backend.balance(Profile())["limitRange"] is None
