"""What a user's own code tries against the quota service: run as a cell in the user's kernel.

Standard library only (it runs in the kernel, as the user's OS account). ``attempts(params)``
tries each action once and returns ``{label: outcome}``; an outcome is
``{"kind": "errno", "value": "EACCES"}``, ``{"kind": "http", "value": 403, "body": ...}``,
``{"kind": "ok", "value": ...}`` or ``{"kind": "error", "value": "TypeName: message"}``. It judges
nothing: tests/hub/test_hub_isolation.py holds what each answer must be.

``params``: ``state_dir`` and ``ledger`` (the service's, as an attacker who guessed them would
know), ``hub_dir`` (the hub's database, cookie secret, config, log and the state dir), ``hub_pid``,
``service_pid``, ``profile`` (a valid body for ``PUT /profiles/alpha``), ``own_team``,
``foreign_team``, ``foreign_jobs`` (``{"same team": [ns, name], "other team": [ns, name]}``, jobs of
other users), ``user`` and ``server_url`` (the user's server through the hub's proxy).
"""

import ctypes
import errno
import json
import os
import signal
import sqlite3
import urllib.error
import urllib.request

MARK = "ISOLATION-PROBE-RESULT "
PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def outcome(action):
    try:
        value = action()
    except OSError as e:
        if e.errno is not None:
            return {"kind": "errno", "value": errno.errorcode.get(e.errno, str(e.errno)), "detail": str(e)}
        return {"kind": "error", "value": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 (every failure is an answer to record)
        return {"kind": "error", "value": f"{type(e).__name__}: {e}"}
    if isinstance(value, dict) and value.get("kind") == "http":
        return value
    return {"kind": "ok", "value": value}


def http(method, url, token=None, body=None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        answer = json.loads(raw or b"null")
    except ValueError:
        answer = raw.decode(errors="replace")[:300]
    return {"kind": "http", "value": status, "body": answer}


def read(path):
    with open(path, "rb") as f:
        return len(f.read())


def read_text(path):
    with open(path) as f:
        return f.read()


def write_ledger(path):
    with open(path, "r+b") as f:
        f.write(b"\0" * 16)
    return "wrote 16 bytes"


def create_in(folder):
    with open(os.path.join(folder, "mine"), "x") as f:
        f.write("x")
    return "created"


def sqlite_change(path):
    db = sqlite3.connect(f"file:{path}?mode=rw", uri=True)
    try:
        db.execute("DELETE FROM jobs")  # what someone over quota would like to do
        db.commit()
        return "deleted every job row"
    finally:
        db.close()


def sqlite_read(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    finally:
        db.close()


def ptrace_attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return "attached"


def service_pids():
    """Quota services, found as any user can: every process's command line is public."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"jupyter_quota" in argv and b"serve" in argv:
            found.append(int(pid))
    return sorted(found)


def walk(top):
    """Every file under ``top``: those she can read (with their size), and the errno of the others."""
    readable, refused = {}, {}

    def refuse(e):
        refused[e.filename] = errno.errorcode.get(e.errno, str(e.errno))

    for folder, _, files in os.walk(top, onerror=refuse):
        for name in files:
            path = os.path.join(folder, name)
            try:
                readable[path] = read(path)
            except OSError as e:
                refused[path] = errno.errorcode.get(e.errno, str(e.errno))
    return {"readable": readable, "refused": refused}


def attempts(p):
    state, ledger = p["state_dir"], p["ledger"]
    svc = p["service_pid"]  # one of service_pids(): this hub's (the machine may run others)
    hub = p["hub_pid"]
    env = dict(os.environ)
    token = env.get("JUPYTERHUB_API_TOKEN", "")
    service = env.get("JUPYTER_QUOTA_SERVICE_URL", "").rstrip("/") + "/quota/v1"
    hub_api = env.get("JUPYTERHUB_API_URL", "")
    me = p["user"]
    own, foreign = p["own_team"], p["foreign_team"]
    (same_ns, same_job), (other_ns, other_job) = p["foreign_jobs"]["same team"], p["foreign_jobs"]["other team"]
    forwarder = p["server_url"].rstrip("/") + "/quota/v1"
    a = {}
    # who am I
    a["kernel runs as"] = outcome(lambda: {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid()})
    a["find quota services in /proc"] = outcome(service_pids)
    # the state directory and the ledger
    a["list the state dir"] = outcome(lambda: os.listdir(state))
    a["read the ledger"] = outcome(lambda: read(ledger))
    a["write the ledger"] = outcome(lambda: write_ledger(ledger))
    a["delete the ledger"] = outcome(lambda: os.unlink(ledger))
    a["create a file in the state dir"] = outcome(lambda: create_in(state))
    a["read profiles.json"] = outcome(lambda: read(os.path.join(state, "profiles.json")))
    a["chmod the state dir 0777"] = outcome(lambda: os.chmod(state, 0o777))
    a["rename the state dir"] = outcome(lambda: os.rename(state, state + ".mine"))
    a["remove the state dir"] = outcome(lambda: os.rmdir(state))
    a["sqlite3: open the ledger read-write, DELETE FROM jobs"] = outcome(lambda: sqlite_change(ledger))
    a["sqlite3: open the ledger read-only"] = outcome(lambda: sqlite_read(ledger))
    # the service's process: environment, memory, signals
    a["read /proc/<service>/environ"] = outcome(lambda: read(f"/proc/{svc}/environ"))
    a["read /proc/<service>/cmdline"] = outcome(lambda: read_text(f"/proc/{svc}/cmdline").split("\0"))
    a["read /proc/<service>/mem"] = outcome(lambda: read(f"/proc/{svc}/mem"))
    a["list /proc/<service>/fd"] = outcome(lambda: os.listdir(f"/proc/{svc}/fd"))
    a["readlink /proc/<service>/cwd"] = outcome(lambda: os.readlink(f"/proc/{svc}/cwd"))
    a["read every file under the hub's directory"] = outcome(lambda: walk(p["hub_dir"]))
    a["read /proc/<hub>/environ"] = outcome(lambda: read(f"/proc/{hub}/environ"))
    a["os.kill(service, 0)"] = outcome(lambda: os.kill(svc, 0))
    a["os.kill(service, SIGTERM)"] = outcome(lambda: os.kill(svc, signal.SIGTERM))
    a["os.kill(hub, SIGTERM)"] = outcome(lambda: os.kill(hub, signal.SIGTERM))
    a["ptrace(PTRACE_ATTACH, service)"] = outcome(lambda: ptrace_attach(svc))
    # her own environment
    a["her environment"] = outcome(lambda: env)
    a["~/.kube/config or a service account token"] = outcome(
        lambda: [
            path
            for path in (os.path.expanduser("~/.kube/config"), "/var/run/secrets/kubernetes.io/serviceaccount/token")
            if os.path.exists(path)
        ]
    )
    a["hub: whose is JUPYTERHUB_API_TOKEN"] = outcome(lambda: http("GET", f"{hub_api}/user", token))
    # the service, directly, with her token
    a["service: GET /identity (her token)"] = outcome(lambda: http("GET", f"{service}/identity", token))
    a["service: PUT /profiles/alpha"] = outcome(lambda: http("PUT", f"{service}/profiles/alpha", token, p["profile"]))
    a[f"service: POST /namespaces/{foreign}/jobs"] = outcome(
        lambda: http("POST", f"{service}/namespaces/{foreign}/jobs", token, {"args": [], "gpus": 1})
    )
    a[f"service: GET /namespaces/{foreign}/jobs"] = outcome(
        lambda: http("GET", f"{service}/namespaces/{foreign}/jobs", token)
    )
    a[f"service: GET /namespaces/{foreign}/balance"] = outcome(
        lambda: http("GET", f"{service}/namespaces/{foreign}/balance", token)
    )
    a["service: DELETE a teammate's job"] = outcome(
        lambda: http("DELETE", f"{service}/namespaces/{same_ns}/jobs/{same_job}", token)
    )
    a["service: DELETE another team's job"] = outcome(
        lambda: http("DELETE", f"{service}/namespaces/{other_ns}/jobs/{other_job}", token)
    )
    a["service: GET /identity, no token"] = outcome(lambda: http("GET", f"{service}/identity"))
    a["service: PUT /profiles/alpha, forged token"] = outcome(
        lambda: http("PUT", f"{service}/profiles/alpha", "f0" * 16, p["profile"])
    )
    a["service: GET /identity, forged token"] = outcome(lambda: http("GET", f"{service}/identity", "f0" * 16))
    # the same through her own server's forwarder (the sidebar's and the magics' route)
    a["her server: PUT /profiles/alpha"] = outcome(
        lambda: http("PUT", f"{forwarder}/profiles/alpha", token, p["profile"])
    )
    a["her server: DELETE another team's job"] = outcome(
        lambda: http("DELETE", f"{forwarder}/namespaces/{other_ns}/jobs/{other_job}", token)
    )
    # the hub, to escalate
    a["hub: PATCH /users/<her> admin=true"] = outcome(
        lambda: http("PATCH", f"{hub_api}/users/{me}", token, {"admin": True})
    )
    a[f"hub: POST /groups/ml-{foreign.split('-')[-1]}/users (add herself)"] = outcome(
        lambda: http("POST", f"{hub_api}/groups/ml-{foreign.split('-')[-1]}/users", token, {"users": [me]})
    )
    a["hub: POST /users/<her>/tokens with role jupyter-quota-admin"] = outcome(
        lambda: http("POST", f"{hub_api}/users/{me}/tokens", token, {"roles": ["jupyter-quota-admin"]})
    )
    a["hub: POST /users/<her>/tokens with scope custom:jupyter-quota:admin"] = outcome(
        lambda: http("POST", f"{hub_api}/users/{me}/tokens", token, {"scopes": ["custom:jupyter-quota:admin"]})
    )
    # what she may do: her own team, through the service
    a[f"service: POST /namespaces/{own}/jobs (her own team)"] = outcome(
        lambda: http("POST", f"{service}/namespaces/{own}/jobs", token, p["own_job"])
    )
    return a
