"""A job runs as its owner's OS account when the server runs as root (``JupyterQuota.job_user``).

Real accounts, real processes: a module fixture makes a throwaway account with ``useradd`` (its
own home directory and one supplementary group, removed after), because no stock Debian account
has both a home directory that exists and a supplementary group; ``nobody`` (home
``/nonexistent``) is used for the missing home. Each job runs ``fake_trainer.py --whoami``,
which writes who and where it ran; a test waits for the job to end, then reads the file.
Needs root (as the quota service runs under a hub with LocalProcessSpawner); skipped otherwise.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from fake_trainer import RUN, run_processes
from local_testing import (  # noqa: F401 (make_backend is a fixture)
    TRAINER,
    UNTIL_CANCELLED,
    Profile,
    ledger_rows,
    make_backend,
    make_job,
    phase_is,
    wait_for,
    wait_log,
)
from test_orphans import CGROUPS, cgroups, run  # noqa: F401 (cgroups and run are fixtures)

from jupyter_quota import config, errors
from jupyter_quota.backends import make_backend as make_backend_from_config
from jupyter_quota.backends.local import account as account_mod
from jupyter_quota.backends.local import cgroup

NO_ACCOUNT = f"no-such-user-{uuid.uuid4().hex[:6]}"


def test_the_config_trait_and_the_backend_know_the_same_policies():
    assert set(config.JOB_USERS) == set(account_mod.POLICIES)


def test_job_user_from_the_config_reaches_the_backend(tmp_path):
    settings = config.JupyterQuota(job_user="owner", state_dir=str(tmp_path / "state"), inventory={"gpus": 2})
    backend = make_backend_from_config(settings, root_dir=str(tmp_path))
    with pytest.raises(errors.Forbidden, match=r"JupyterQuota\.job_user = 'owner'"):
        backend.submit(Profile(), make_job("cfg", gpus=0), owner=NO_ACCOUNT)


@pytest.fixture(scope="module")
def account():
    """A throwaway account: home directory under a world-searchable temp dir, one extra group."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd: jobs run as their owner's account only under root")
    name = f"jq{uuid.uuid4().hex[:8]}"
    base = tempfile.mkdtemp(prefix="jq-account-", dir="/tmp")
    os.chmod(base, 0o755)  # tmp_path (under /tmp/pytest-of-root, 0700) is root's alone
    home = os.path.join(base, name)
    subprocess.run(["groupadd", f"{name}x"], check=True)
    try:
        subprocess.run(
            [
                "useradd",
                "--home-dir",
                home,
                "--create-home",
                "--user-group",
                "--groups",
                f"{name}x",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
            check=True,
        )
        try:
            entry = pwd.getpwnam(name)
            yield entry, _interpreter(entry.pw_uid)
        finally:
            subprocess.run(["userdel", name], check=True)
    finally:
        subprocess.run(["groupdel", f"{name}x"], check=False)
        shutil.rmtree(base)


def _interpreter(uid: int) -> str:
    """A Python the account may run ``fake_trainer.py`` with: the tests' own may sit under root's
    private home."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            if subprocess.run([python, TRAINER], user=uid, capture_output=True, cwd="/").returncode == 0:
                return python
        except PermissionError:
            continue
    pytest.skip(f"no Python interpreter with which a non-root account may run {TRAINER}")


def whoami_job(name, python, *args, env=()):
    job = make_job(name, gpus=0, command=[python, TRAINER, "--whoami", "whoami.json", *args])
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in env]
    return job


def run_to_end(backend, name, python, owner, *args):
    profile = Profile()
    backend.submit(profile, whoami_job(name, python, *args), owner=owner)
    return wait_for(backend, profile, name, phase_is("Succeeded", "Failed"), timeout=60)


def test_a_job_runs_as_its_owners_account_in_its_home(make_backend, account, monkeypatch):
    entry, python = account
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-servers-own-token")
    backend = make_backend(workdir="", job_user="auto")
    job = run_to_end(backend, "mine", python, entry.pw_name)
    assert job["phase"] == "Succeeded", job
    out = os.path.join(entry.pw_dir, "whoami.json")
    seen = json.loads(Path(out).read_text())
    assert (seen["uid"], seen["euid"], seen["gid"], seen["egid"]) == (entry.pw_uid,) * 2 + (entry.pw_gid,) * 2
    extra = grp.getgrnam(f"{entry.pw_name}x").gr_gid
    assert set(seen["groups"]) == set(os.getgrouplist(entry.pw_name, entry.pw_gid)) == {entry.pw_gid, extra}
    assert seen["cwd"] == seen["HOME"] == entry.pw_dir
    assert seen["USER"] == seen["LOGNAME"] == entry.pw_name
    assert seen["JUPYTERHUB_API_TOKEN"] is None  # the server's credentials stay with the server
    st = os.stat(out)
    assert (st.st_uid, st.st_gid) == (entry.pw_uid, entry.pw_gid)  # the output is theirs
    group_file = make_backend.state_dir / "jobs" / Profile().namespace / "mine" / "cgroup"
    if CGROUPS:  # it joined its cgroup (root's to write) before it became the account
        assert os.path.basename(seen["cgroup"]) == os.path.basename(group_file.read_text())
        assert os.path.basename(seen["cgroup"]).startswith(cgroup.PREFIX)


def test_job_workdir_expands_the_owner_and_home_and_must_exist(make_backend, account):
    entry, python = account
    backend = make_backend(workdir="{home}/runs/{username}", job_user="auto")
    wanted = os.path.join(entry.pw_dir, "runs", entry.pw_name)
    with pytest.raises(errors.Forbidden, match=f"working directory {wanted} .*does not exist"):
        backend.submit(Profile(), whoami_job("early", python), owner=entry.pw_name)
    assert ledger_rows(make_backend.ledger_path) == []  # refused before admission
    os.makedirs(wanted)
    for path in (os.path.dirname(wanted), wanted):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    job = run_to_end(backend, "there", python, entry.pw_name)
    assert job["phase"] == "Succeeded", job
    seen = json.loads(Path(wanted, "whoami.json").read_text())
    assert (seen["uid"], seen["cwd"]) == (entry.pw_uid, wanted)


def test_with_job_user_server_a_job_runs_as_the_server(make_backend, account, tmp_path):
    entry, python = account
    backend = make_backend(workdir="", server_dir=str(tmp_path), job_user="server")
    job = run_to_end(backend, "root", python, entry.pw_name)
    assert job["phase"] == "Succeeded", job
    seen = json.loads((tmp_path / "whoami.json").read_text())
    assert (seen["uid"], seen["gid"], seen["cwd"]) == (0, 0, str(tmp_path))
    assert seen["HOME"] == os.environ.get("HOME")


def test_an_owner_without_an_account_runs_as_the_server_under_auto_and_is_refused_under_owner(
    make_backend, account, tmp_path
):
    _, python = account
    backend = make_backend(workdir="", server_dir=str(tmp_path), job_user="auto")
    job = run_to_end(backend, "anon", python, NO_ACCOUNT)
    assert job["phase"] == "Succeeded", job
    seen = json.loads((tmp_path / "whoami.json").read_text())
    assert (seen["uid"], seen["cwd"]) == (0, str(tmp_path))
    strict = make_backend(workdir="", server_dir=str(tmp_path), job_user="owner")
    with pytest.raises(errors.Forbidden, match=f"user '{NO_ACCOUNT}' has no account on this machine"):
        strict.submit(Profile(), whoami_job("refused", python), owner=NO_ACCOUNT)
    assert [r["name"] for r in ledger_rows(make_backend.ledger_path)] == ["anon"]


def test_an_account_whose_home_does_not_exist_is_refused(make_backend, account):
    _, python = account
    nobody = pwd.getpwnam("nobody")
    if os.path.exists(nobody.pw_dir):
        pytest.skip(f"nobody's home {nobody.pw_dir} exists here")
    backend = make_backend(workdir="", job_user="auto")
    with pytest.raises(errors.Forbidden, match=f"{nobody.pw_dir} .*home directory of the account 'nobody'"):
        backend.submit(Profile(), whoami_job("nowhere", python), owner="nobody")


def test_a_workdir_the_account_cannot_enter_fails_the_job_at_start(make_backend, account, tmp_path):
    entry, python = account
    private = tmp_path / "roots-only"  # under /tmp/pytest-of-root (0700)
    private.mkdir()
    backend = make_backend(workdir=str(private), job_user="auto")
    job = run_to_end(backend, "shut", python, entry.pw_name)
    assert (job["phase"], job["reason"]) == ("Failed", "StartError"), job
    assert f"uid {entry.pw_uid} cannot enter the working directory {private}: Permission denied" in job["message"]


def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except OSError:
        return None


def test_cancel_kills_every_process_of_a_job_run_as_another_account(make_backend, account, cgroups, run):
    entry, python = account
    backend, profile = make_backend(workdir="", job_user="auto", grace_period=2.0, cgroups=cgroups), Profile()
    spawn = ["--spawn", "ignore-term", "--spawn", "setsid", "--pid-dir", entry.pw_dir, *UNTIL_CANCELLED]
    backend.submit(profile, whoami_job("tree", python, *spawn, env=[(RUN, run)]), owner=entry.pw_name)
    wait_log(backend, profile, "tree", "ready", timeout=60)
    supervisor = ledger_rows(make_backend.ledger_path)[0]["pid"]
    # supervisor, main process, the SIGTERM-ignoring child, the setsid grandchild: all started by
    # "ready", but a process between its setuid and its exec may not show its environment yet
    deadline = time.monotonic() + 30
    while len(procs := [p["pid"] for p in run_processes(run)]) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(procs) >= 4, procs
    assert {_uid(p) for p in procs if p != supervisor} == {entry.pw_uid} and _uid(supervisor) == 0
    backend.cancel(profile, "tree", by="admin")
    job = wait_for(backend, profile, "tree", phase_is("Succeeded", "Failed"), timeout=60)
    assert (job["phase"], job["reason"]) == ("Failed", "Cancelled")
    assert run_processes(run) == []


def test_a_user_name_that_is_not_a_directory_name_is_refused_in_job_workdir(tmp_path):
    policy = account_mod.Policy(account_mod.SERVER, str(tmp_path / "{username}"))
    for owner in ("..", "a/b", ""):
        with pytest.raises(account_mod.Refused, match="cannot name a directory"):
            policy.place(owner)


_AS_NOBODY = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("account", sys.argv[1])
account = importlib.util.module_from_spec(spec)
sys.modules["account"] = account
spec.loader.exec_module(account)
out = {}
for policy, owner in (("auto", "root"), ("owner", "root"), ("owner", "no-such-user-x")):
    try:
        place = account.Policy(policy, "/tmp").place(owner)
        out[f"{policy} {owner}"] = place.account and place.account.user
    except account.Refused as e:
        out[f"{policy} {owner}"] = str(e)
print(json.dumps(out))
"""


def test_a_server_that_is_not_root_runs_every_job_as_itself_or_refuses_under_owner():
    """The policy as a non-root server applies it: ``account.py`` (standard library only) loaded
    by path into a Python run as ``nobody``."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as nobody")
    nobody = pwd.getpwnam("nobody")
    python = _interpreter(nobody.pw_uid)
    done = subprocess.run(
        [python, "-I", "-c", _AS_NOBODY, account_mod.__file__],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["auto root"] is None  # the server's own user
    assert "runs as 'nobody', not root, so it cannot run jobs as 'root'" in seen["owner root"]
    assert "'no-such-user-x' has no account on this machine" in seen["owner no-such-user-x"]
