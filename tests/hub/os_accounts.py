"""Throwaway OS accounts for a hub whose servers run as their users (LocalProcessSpawner), and a
Python those accounts may run.

LocalProcessSpawner starts each server as the OS account of the hub user's name
(``pwd.getpwnam(user.name)``), so the accounts carry the hub names. They get a random suffix, so a
run never touches an account it did not make, and homes under a world-searchable folder of /tmp
(pytest's tmp_path, under /tmp/pytest-of-root, is root's alone).

The tests' interpreter may be one the accounts cannot run: a venv made from a Python under
/root (pyenv, say) links to it, and /root is 0700. Then a venv is made from another interpreter of
the same version that the accounts can run (Debian's /usr/bin/python3), whose one ``.pth`` file
adds the tests' site-packages: the same packages, run by an interpreter the accounts can reach.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

#: what a server and its kernels import, and where this checkout's jupyter_quota must come from
IMPORT_CHECK = "import sys, jupyterhub.singleuser, ipykernel, jupyter_quota; sys.stdout.write(jupyter_quota.__file__)"


@dataclass
class Accounts:
    base: Path
    names: dict[str, str]  # role (ann, bob, ...) -> account and hub user name
    python: str  # an interpreter every account may run, with the tests' packages

    def uid(self, role: str) -> int:
        return pwd.getpwnam(self.names[role]).pw_uid


def make(roles, checkout: Path, env: dict) -> Accounts:
    """Create one account per role (root only; the caller skips otherwise) and find their Python."""
    base = Path(tempfile.mkdtemp(prefix="jq-accounts-", dir="/tmp"))
    os.chmod(base, 0o755)
    suffix = uuid.uuid4().hex[:6]
    accounts = Accounts(base, {}, "")
    try:
        for role in roles:
            name = f"jq{role}{suffix}"
            subprocess.run(
                [
                    "useradd",
                    "--home-dir",
                    str(base / name),
                    "--create-home",
                    "--user-group",
                    "--shell",
                    "/usr/sbin/nologin",
                    name,
                ],
                check=True,
                capture_output=True,
            )
            accounts.names[role] = name
        accounts.python = _python_for(pwd.getpwnam(accounts.names[roles[0]]), base, checkout, env)
    except BaseException:
        remove(accounts)
        raise
    return accounts


def remove(accounts: Accounts) -> None:
    """Delete the accounts (their leftover processes first: all are this run's) and their homes."""
    for name in accounts.names.values():
        _kill_processes_of(name)
        subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)
    shutil.rmtree(accounts.base, ignore_errors=True)


def _python_for(account: pwd.struct_passwd, base: Path, checkout: Path, env: dict) -> str:
    """The tests' interpreter if ``account`` can run it with every import, else a venv of another one."""
    tried = []
    for python in (sys.executable, _venv_of_another_python(base)):
        if python is None:
            continue
        failure = _import_failure(python, account, checkout, env)
        if failure is None:
            return python
        tried.append(f"{python}: {failure}")
    closed = sorted(
        {
            blocker
            for path in (sys.executable, sysconfig.get_paths()["purelib"], str(checkout))
            if (blocker := _closed_ancestor(path))
        }
    )
    pytest.skip(
        "no Python that a non-root account may run with jupyterhub, ipykernel and this checkout's "
        "jupyter_quota (servers run as their users' accounts here): "
        + "; ".join(tried)
        + (f"; folders other accounts cannot enter: {', '.join(closed)}" if closed else "")
    )


def _closed_ancestor(path: str) -> str | None:
    """The first folder on the way to ``path`` that other accounts may not enter (no o+x)."""
    parts = Path(os.path.realpath(path)).parents
    for folder in reversed(parts):
        if not os.stat(folder).st_mode & 0o001:
            return f"{folder} ({oct(os.stat(folder).st_mode & 0o777)})"
    return None


def _import_failure(python: str, account: pwd.struct_passwd, checkout: Path, env: dict) -> str | None:
    try:  # the account's uid and gid alone, as its server will have (not root's groups)
        done = subprocess.run(
            [python, "-c", IMPORT_CHECK],
            user=account.pw_uid,
            group=account.pw_gid,
            extra_groups=[],
            cwd="/",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except PermissionError as e:
        return f"cannot run it ({e})"
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    if not done.stdout.startswith(str(checkout)):
        return f"imports jupyter_quota from {done.stdout}, not from {checkout} (is the checkout readable?)"
    return None


def _venv_of_another_python(base: Path) -> str | None:
    """A venv of /usr/bin/python3 (when it is this Python's version) that sees this site-packages."""
    other = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    if other is None or os.path.realpath(other) == os.path.realpath(sys.executable):
        return None
    venv = base / "venv"
    subprocess.run([other, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # `import` lines of a .pth run at start-up; addsitedir also reads that folder's .pth files
    Path(site, "jq_tests_site.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return str(venv / "bin" / "python")


def _kill_processes_of(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    os.kill(int(pid), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass
