"""Isolation: nothing ann's own code can reach changes quota state or holds the service's credentials.

A real JupyterHub whose servers run as their users' own OS accounts (LocalProcessSpawner, the
hub's default spawner; with SimpleLocalProcessSpawner every server runs as the hub's user and a
kernel could read anything). The quota service runs as root, the hub's user, with its state
directory 0700. From a kernel in ann's server, opened through her server's REST API and run over
its websocket, the probe (isolation_probe.py) tries every way in we know of: the state directory
and the ledger (files and sqlite3), the service's and the hub's process (environ, memory, fds,
signals, ptrace), her own environment, direct calls to the service and to the hub with her token,
no token or a forged one. Each answer must be the refusal a secure setup gives (EACCES/EPERM, or a
403 carrying the API's body); one success of a forbidden action fails the test. ``pytest -s``
prints the table.

Accounts: ``jq{ann,bob,cat}<suffix>``, in the demo's groups (ann ml-alpha, bob ml-beta, cat both),
made with ``useradd`` and removed after; this needs root (a skip says so otherwise).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import isolation_probe
import os_accounts
import pytest
import requests
from hub_kernel import run_in_kernel
from hub_process import FAKE_TRAINER, ROOT, HubProcess, wait_for

GROUPS = {"ann": ["ml-alpha"], "bob": ["ml-beta"], "cat": ["ml-alpha", "ml-beta"]}
OWN, FOREIGN = "team-alpha", "team-beta"
#: a job that runs until cancelled (the fake trainer, not swift)
LONG_JOB = {"args": ["--sleep", "3600"], "gpus": 1}
ACTIVE = ("Pending", "Running")
#: ann's own job writes who it runs as into its working directory (her home, when it runs as her)
WHOAMI = "whoami.json"
OWN_JOB = {"args": ["--whoami", WHOAMI, "--sleep", "3600"], "gpus": 1}


# -- the hub: servers as their users' OS accounts ----------------------------------------------


@pytest.fixture(scope="module")
def accounts():
    if os.geteuid() != 0:
        pytest.skip(
            "needs root: LocalProcessSpawner switches each server to its user's OS account, and "
            "the test makes those accounts with useradd"
        )
    if not (shutil.which("useradd") and shutil.which("userdel")):
        pytest.skip("needs useradd and userdel (the passwd package) to make the users' OS accounts")
    made = os_accounts.make(tuple(GROUPS), ROOT, {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": "/"})
    try:
        yield made
    finally:
        os_accounts.remove(made)


def hub_config(accounts) -> str:
    """The demo hub, but each server runs as its user's account with a Python the account can run."""
    names, python = accounts.names, accounts.python
    venv = os.path.dirname(python)
    return f"""
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{python!r}, "-m", "jupyterhub.singleuser"]
_env = dict(c.Spawner.environment)
_env["PATH"] = {venv!r} + ":" + _env["PATH"]
# the tests' environment's Jupyter settings (server extensions enabled) when the Python is another venv's
_env["JUPYTER_CONFIG_PATH"] += ":" + {os.path.join(sys.prefix, "etc", "jupyter")!r}
_env["JUPYTER_PATH"] = {os.path.join(sys.prefix, "share", "jupyter")!r}
c.Spawner.environment = _env
c.Authenticator.allowed_users = set(c.Authenticator.allowed_users) | {set(names.values())!r}
for _role, _groups in {GROUPS!r}.items():
    for _group in _groups:
        c.JupyterHub.load_groups[_group]["users"].append({names!r}[_role])
"""


@pytest.fixture(scope="module")
def hub(accounts):
    """This module's own hub (not the session's demo hub): servers as their users' accounts."""
    root = accounts.base / "hub"
    root.mkdir(mode=0o755)
    # jobs run the fake trainer with a Python their account can run (as their owner, under RUNAS)
    process = HubProcess(
        root,
        hub_config=hub_config(accounts),
        server_config=(f"c.JupyterQuota.job_command = [{accounts.python!r}, {str(FAKE_TRAINER)!r}]\n"),
    )
    process.config_file.chmod(0o600)  # it holds the test driver's token, an admin's
    try:
        yield process.start()
    finally:
        try:
            if process.proc is not None and process.proc.poll() is None:
                cancel_every_job(process)
        finally:
            process.stop()


def service(hub: HubProcess, method: str, path: str, user: str, **kwargs) -> requests.Response:
    return requests.request(
        method,
        f"{hub.service_url}quota/v1{path}",
        timeout=60,
        headers={"Authorization": f"token {hub.token(user)}"},
        **kwargs,
    )


def cancel_every_job(hub: HubProcess) -> None:
    """As ada (a hub admin): cancel every job and wait until none runs, so the accounts can go."""
    for team in (OWN, FOREIGN):
        for job in service(hub, "GET", f"/namespaces/{team}/jobs", "ada").json().get("jobs", []):
            service(hub, "DELETE", f"/namespaces/{team}/jobs/{job['name']}", "ada")
    wait_for(
        "every job to end",
        lambda: (
            not any(
                job["phase"] in ACTIVE
                for team in (OWN, FOREIGN)
                for job in service(hub, "GET", f"/namespaces/{team}/jobs", "ada").json().get("jobs", [])
            )
        ),
        120,
        hub.log,
    )


def service_process(hub: HubProcess) -> int:
    """The quota service's pid, as root sees it: the hub's child running `jupyter_quota serve`."""
    return _child_of(hub.proc.pid, lambda argv: b"jupyter_quota" in argv and b"serve" in argv)


def server_process(hub: HubProcess) -> int:
    """A user's single-user server: the hub's child running `jupyterhub.singleuser` (one runs here)."""
    return _child_of(hub.proc.pid, lambda argv: b"jupyterhub.singleuser" in argv)


def _child_of(parent: int, match) -> int:
    for pid in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == parent and match(argv):
            return int(pid)
    raise AssertionError(f"no such child of the hub (pid {parent})")


def environ_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


# -- a kernel in a user's server -----------------------------------------------------------------


def probe(hub: HubProcess, user: str, params: dict) -> dict:
    code = (
        Path(isolation_probe.__file__).read_text()
        + f"\nprint(MARK + json.dumps(attempts(json.loads({json.dumps(params)!r}))))\n"
    )
    stdout = run_in_kernel(hub, user, code)
    lines = [line for line in stdout.splitlines() if line.startswith(isolation_probe.MARK)]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len(isolation_probe.MARK) :])


# -- what each answer must be --------------------------------------------------------------------


def errno_is(*names):
    return lambda got: got["kind"] == "errno" and got["value"] in names


def sqlite_cannot_open(got):
    return got["kind"] == "error" and got["value"] == "OperationalError: unable to open database file"


def api_refusal(status=403):
    """The quota API's own refusal: the status and a ``{"reason", "message"}`` body that says why."""
    return lambda got: (
        got["kind"] == "http"
        and got["value"] == status
        and isinstance(got["body"], dict)
        and got["body"].get("reason")
        and got["body"].get("message")
    )


def hub_refusal(got):
    """JupyterHub's refusal: 403 with ``{"status": 403, "message"}``."""
    return (
        got["kind"] == "http"
        and got["value"] == 403
        and isinstance(got["body"], dict)
        and got["body"].get("status") == 403
        and got["body"].get("message")
    )


def expectations(accounts, facts) -> dict:
    """{label: (what a secure setup answers, check)} for every attempt of the probe."""
    ann = accounts.names["ann"]
    uid = accounts.uid("ann")
    secrets_ = facts["service secrets"]
    eacces = ("EACCES", errno_is("EACCES"))
    eperm = ("EPERM", errno_is("EPERM"))
    refused = ("403 + the API's body", api_refusal())
    hub_403 = ("403 (hub)", hub_refusal)
    return {
        "kernel runs as": (
            f"ann's uid {uid}",
            lambda g: g["value"] == {"uid": uid, "euid": uid, "gid": g["value"]["gid"]} and g["value"]["gid"] != 0,
        ),
        "find quota services in /proc": (
            "this hub's among them (command lines are public)",
            lambda g: g["kind"] == "ok" and facts["service pid"] in g["value"],
        ),
        "list the state dir": eacces,
        "read the ledger": eacces,
        "write the ledger": eacces,
        "delete the ledger": eacces,
        "create a file in the state dir": eacces,
        "read profiles.json": eacces,
        "chmod the state dir 0777": eperm,
        "rename the state dir": eacces,
        "remove the state dir": eacces,
        "sqlite3: open the ledger read-write, DELETE FROM jobs": ("sqlite3: unable to open", sqlite_cannot_open),
        "sqlite3: open the ledger read-only": ("sqlite3: unable to open", sqlite_cannot_open),
        "read /proc/<service>/environ": eacces,
        "read /proc/<service>/cmdline": (
            "readable (public), no secret in it",
            lambda g: g["kind"] == "ok" and not any(s in arg for s in secrets_ for arg in g["value"]),
        ),
        "read /proc/<service>/mem": eacces,
        "list /proc/<service>/fd": eacces,
        "readlink /proc/<service>/cwd": eacces,
        "read every file under the hub's directory": (
            "state dir, cookie secret, hub config: EACCES; no secret in what she can read",
            lambda g: g["kind"] == "ok" and _hub_files_hold_no_secret(g["value"], facts),
        ),
        "read /proc/<hub>/environ": eacces,
        "os.kill(service, 0)": eperm,
        "os.kill(service, SIGTERM)": eperm,
        "os.kill(hub, SIGTERM)": eperm,
        "ptrace(PTRACE_ATTACH, service)": eperm,
        "her environment": (
            "her server's token; no service secret, no state dir, no kube credentials",
            lambda g: (
                g["kind"] == "ok"
                and _clean_environment(g["value"], secrets_)
                and g["value"]["JUPYTERHUB_API_TOKEN"] == facts["her server's token"]
            ),
        ),
        "~/.kube/config or a service account token": ("none", lambda g: g == {"kind": "ok", "value": []}),
        "hub: whose is JUPYTERHUB_API_TOKEN": (
            "ann's server token, no admin scope",
            lambda g: (
                g["kind"] == "http"
                and g["value"] == 200
                and g["body"]["name"] == ann
                and g["body"]["kind"] == "user"
                and not g["body"]["admin"]
                and "custom:jupyter-quota:admin" not in g["body"]["scopes"]
                and g["body"]["session_id"] is None
            ),
        ),
        "service: GET /identity (her token)": (
            "200: ann, team-alpha only",
            lambda g: (
                g["kind"] == "http"
                and g["value"] == 200
                and g["body"]["name"] == ann
                and g["body"]["namespaces"] == [OWN]
                and not g["body"]["admin"]
            ),
        ),
        "service: PUT /profiles/alpha": refused,
        f"service: POST /namespaces/{FOREIGN}/jobs": refused,
        f"service: GET /namespaces/{FOREIGN}/jobs": refused,
        f"service: GET /namespaces/{FOREIGN}/balance": refused,
        "service: DELETE a teammate's job": refused,
        "service: DELETE another team's job": refused,
        "service: GET /identity, no token": refused,
        "service: PUT /profiles/alpha, forged token": refused,
        "service: GET /identity, forged token": refused,
        "her server: PUT /profiles/alpha": refused,
        "her server: DELETE another team's job": refused,
        "hub: PATCH /users/<her> admin=true": hub_403,
        "hub: POST /groups/ml-beta/users (add herself)": hub_403,
        "hub: POST /users/<her>/tokens with role jupyter-quota-admin": hub_403,
        "hub: POST /users/<her>/tokens with scope custom:jupyter-quota:admin": hub_403,
        f"service: POST /namespaces/{OWN}/jobs (her own team)": (
            "201: allowed, owner ann",
            lambda g: g["kind"] == "http" and g["value"] == 201 and g["body"]["owner"] == ann,
        ),
    }


def _hub_files_hold_no_secret(seen: dict, facts: dict) -> bool:
    """The private files were refused, and no file she could read holds a secret (read here, as root)."""
    refused, private = seen["refused"], facts["private files"]
    if any(refused.get(path) != "EACCES" for path in private):
        return False
    secrets_ = facts["service secrets"] | facts["hub secrets"]
    return not any(s.encode() in Path(path).read_bytes() for path in seen["readable"] for s in secrets_)


def _clean_environment(env: dict, secrets_: set) -> bool:
    return not any(s in v for s in secrets_ for v in env.values()) and not any(
        k.startswith("KUBE") or k == "JUPYTER_QUOTA_STATE_DIR" for k in env
    )


def show(outcome: dict) -> str:
    if outcome["kind"] == "http":
        body = outcome["body"]
        text = body.get("message") if isinstance(body, dict) and body.get("message") else json.dumps(body)
        return f"{outcome['value']} {text}"
    value = outcome["value"]
    if outcome["kind"] == "ok" and isinstance(value, dict) and "JUPYTERHUB_API_TOKEN" in value:
        return "keys: " + " ".join(sorted(value))
    if outcome["kind"] == "ok" and isinstance(value, dict) and "readable" in value:
        top = os.path.commonpath(list(value["readable"]) + list(value["refused"]))
        short = lambda paths: ", ".join(sorted(os.path.relpath(p, top) for p in paths))  # noqa: E731
        return f"under {top}: read {short(value['readable'])}; EACCES {short(value['refused'])}"
    return f"{outcome['kind']}: {json.dumps(outcome['value'])}"[:300]


# -- the test ------------------------------------------------------------------------------------


def test_nothing_in_anns_kernel_reaches_quota_state_or_the_services_credentials(hub, accounts):
    names = accounts.names
    ann, bob, cat = names["ann"], names["bob"], names["cat"]
    hub.start_servers([ann])
    svc = service_process(hub)
    state_dir = os.path.join(hub.run_dir, "state")
    ledger = os.path.join(state_dir, "ledger.sqlite3")
    svc_env = environ_of(svc)
    assert svc_env.get("JUPYTERHUB_API_TOKEN") and os.stat(svc_pid_dir := f"/proc/{svc}").st_uid == 0, svc_pid_dir
    secrets_ = {v for k, v in svc_env.items() if any(w in k for w in ("TOKEN", "SECRET", "KEY")) and len(v) >= 8}
    assert oct(os.stat(state_dir).st_mode & 0o777) == "0o700" and os.path.exists(ledger)

    # an admin's PUT of the same profile: profiles.json exists, and the body is one a PUT accepts
    profile = service(hub, "GET", "/profiles/alpha", "ada").json()
    assert service(hub, "PUT", "/profiles/alpha", "ada", json=profile).status_code == 200
    # jobs of others: cat's in ann's own team, bob's in the other
    cat_job = service(hub, "POST", f"/namespaces/{OWN}/jobs", cat, json=LONG_JOB)
    bob_job = service(hub, "POST", f"/namespaces/{FOREIGN}/jobs", bob, json=LONG_JOB)
    assert cat_job.status_code == bob_job.status_code == 201, (cat_job.text, bob_job.text)
    before = _quota_state(hub, ann)

    got = probe(
        hub,
        ann,
        {
            "state_dir": state_dir,
            "ledger": ledger,
            "hub_pid": hub.proc.pid,
            "service_pid": svc,
            "hub_dir": str(hub.root),
            "profile": profile,
            "user": ann,
            "own_team": OWN,
            "foreign_team": FOREIGN,
            "own_job": OWN_JOB,
            "foreign_jobs": {
                "same team": [OWN, cat_job.json()["name"]],
                "other team": [FOREIGN, bob_job.json()["name"]],
            },
            "server_url": f"{hub.url}/user/{ann}/",
        },
    )
    expected = expectations(
        accounts,
        {
            "service pid": svc,
            "service secrets": secrets_,
            "hub secrets": {hub.driver_token, hub.password},
            "her server's token": environ_of(server_process(hub))["JUPYTERHUB_API_TOKEN"],
            "private files": [state_dir, str(hub.config_file), os.path.join(hub.run_dir, "jupyterhub_cookie_secret")],
        },
    )
    rows = [
        (label, want, show(got[label]) if label in got else "(not tried)", label in got and check(got[label]))
        for label, (want, check) in expected.items()
    ]
    rows.append(_own_job_row(accounts, got))
    _print_table(rows)
    assert set(got) == set(expected), set(got) ^ set(expected)
    assert all(ok for *_, ok in rows), "\n".join(f"{label}: {answer}" for label, _, answer, ok in rows if not ok)

    # and, seen as root: the service is the same process, the state as it was, ann still ann
    assert service_process(hub) == svc
    after = _quota_state(hub, ann)
    assert after["profiles"] == before["profiles"] and after["ann"] == before["ann"]
    assert {j["name"] for j in before["jobs"]} <= {j["name"] for j in after["jobs"]}
    assert oct(os.stat(state_dir).st_mode & 0o777) == "0o700" and os.stat(ledger).st_uid == 0


def _own_job_row(accounts, got) -> tuple:
    """Her job (the probe's last attempt) runs as her account, in her home, without a hub token:
    what it writes is hers. Read as root once the job has written it."""
    import pwd

    ann = pwd.getpwnam(accounts.names["ann"])
    path = Path(ann.pw_dir, WHOAMI)
    want = f"{path.name} in her home, owned by uid {ann.pw_uid}; job uid {ann.pw_uid}, no hub token"
    if got.get(f"service: POST /namespaces/{OWN}/jobs (her own team)", {}).get("value") != 201:
        return "her job's output file", want, "(no job)", False
    wait_for(f"{path} from her job", path.exists, 120)
    seen = json.loads(path.read_text())
    ok = (
        path.stat().st_uid == ann.pw_uid
        and seen["uid"] == seen["euid"] == ann.pw_uid
        and seen["cwd"] == ann.pw_dir
        and seen["JUPYTERHUB_API_TOKEN"] is None
    )
    answer = (
        f"file uid {path.stat().st_uid}; job uid {seen['uid']} gid {seen['gid']} cwd {seen['cwd']}, "
        f"JUPYTERHUB_API_TOKEN {seen['JUPYTERHUB_API_TOKEN']}"
    )
    return "her job's output file", want, answer, ok


def _quota_state(hub: HubProcess, ann: str) -> dict:
    user = hub.api("GET", f"/users/{ann}").json()
    return {
        "profiles": service(hub, "GET", "/profiles", "ada").json(),
        "jobs": [
            j
            for team in (OWN, FOREIGN)
            for j in service(hub, "GET", f"/namespaces/{team}/jobs", "ada").json()["jobs"]
            if j["phase"] in ACTIVE
        ],
        "ann": (user["admin"], sorted(user["groups"])),
        "ledger sha256": hashlib.sha256(Path(hub.run_dir, "state", "ledger.sqlite3").read_bytes()).hexdigest(),
    }


def _print_table(rows) -> None:
    print("\n\nIsolation: what ann's kernel tried, as her OS account (LocalProcessSpawner), against the quota service")
    print(f"{'attempt':<62} | {'a secure setup answers':<40} | {'got':<6} | answer")
    print("-" * 160)
    for label, want, answer, ok in rows:
        print(f"{label:<62} | {want:<40} | {'ok' if ok else 'FAIL':<6} | {answer}")
