"""As whom, and where, a local job runs: its owner's OS account when the server may switch to it.

A server running as root (a quota service that JupyterHub starts, as LocalProcessSpawner setups
run it) runs each job as the account named like the job's owner, so the dataset it reads and the
output it writes are theirs. ``JupyterQuota.job_user`` says when (``POLICIES``):

- ``auto``: the owner's account when the server runs as root and the account exists, else the
  server's own user;
- ``server``: always the server's own user;
- ``owner``: always the owner's account; a job whose owner has none (or that a server which is
  neither root nor that account cannot switch to) is refused.

The switch itself happens in the supervisor, just before exec (see ``supervise``): it keeps root
to manage the job's cgroup and signal every process of the job. Pure look-ups, no side effects.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

AUTO, SERVER, OWNER = "auto", "server", "owner"
POLICIES = (AUTO, SERVER, OWNER)
#: Variables of the server's environment a job never gets: they carry the hub credentials of the
#: server (a quota service's own token would let a job skip every check the service makes).
CREDENTIALS = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_COOKIE_SECRET")


class Refused(Exception):
    """A job of this owner cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class Account:
    """An OS account, with the supplementary groups ``os.initgroups`` would give it."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def run_as(self) -> str:
        """The supervisor's ``--run-as`` value: ``UID:GID:G1,G2,...``."""
        return f"{self.uid}:{self.gid}:{','.join(str(g) for g in self.groups)}"


@dataclass(frozen=True)
class Placement:
    """As whom and where one job runs; ``account`` None means the server's own user."""

    account: Account | None
    workdir: str


@dataclass(frozen=True)
class Policy:
    """``job_user`` (one of ``POLICIES``); ``workdir``: ``JupyterQuota.job_workdir``, which may
    hold ``{username}`` (the job's owner) and ``{home}`` (the home directory of the account the
    job runs as); ``server_dir``: where jobs of the server's own user run when ``workdir`` is
    empty (the server's root directory). A job run as its owner's account runs in its home
    directory when ``workdir`` is empty."""

    job_user: str = SERVER
    workdir: str = ""
    server_dir: str = ""

    def __post_init__(self):
        if self.job_user not in POLICIES:
            raise ValueError(f"job_user must be one of {', '.join(POLICIES)}, not {self.job_user!r}")

    def place(self, owner: str) -> Placement:
        """As whom and where ``owner``'s job runs; raises :class:`Refused`."""
        account = self._account(owner)
        if self.workdir:
            if "{username}" in self.workdir and (owner in ("", ".", "..") or "/" in owner):
                raise Refused(
                    f"the user name {owner!r} cannot name a directory (JupyterQuota.job_workdir holds {{username}})"
                )
            home = account.home if account else os.path.expanduser("~")
            workdir = self.workdir.replace("{username}", owner).replace("{home}", home)
        else:
            workdir = account.home if account else (self.server_dir or os.getcwd())
        workdir = os.path.abspath(workdir)
        if not os.path.isdir(workdir):
            whose = (
                f"the home directory of the account {account.user!r}"
                if account and not self.workdir
                else ("JupyterQuota.job_workdir" if self.workdir else "the server's root directory")
            )
            raise Refused(
                f"the job's working directory {workdir} ({whose}) does not exist or is not a "
                "directory; ask the admin to create it, or to set JupyterQuota.job_workdir"
            )
        return Placement(account, workdir)

    def _account(self, owner: str) -> Account | None:
        if self.job_user == SERVER:
            return None
        try:
            entry = pwd.getpwnam(owner)
        except (KeyError, ValueError):  # ValueError: a name with a NUL byte
            entry = None
        server_uid = os.geteuid()
        if self.job_user == AUTO:
            # Only a switch to another account: the server's own (a single-user server's owner,
            # root's own jobs) runs its jobs where it always did, its root directory.
            switch = entry is not None and server_uid == 0 and entry.pw_uid != server_uid
            return _account(entry) if switch else None
        if entry is not None and server_uid in (0, entry.pw_uid):
            return _account(entry)
        if entry is None:
            raise Refused(
                f"user {owner!r} has no account on this machine, and every job runs as its "
                "owner's account here (JupyterQuota.job_user = 'owner'); ask the admin to "
                "create the account"
            )
        raise Refused(
            f"the quota server runs as {_name(server_uid)}, not root, so it "
            f"cannot run jobs as {owner!r} (JupyterQuota.job_user = 'owner'); ask the admin "
            "to run it as root or set JupyterQuota.job_user = 'auto'"
        )


def job_environment(env: dict[str, str], account: Account | None) -> dict[str, str]:
    """``env`` without the server's credentials, with ``account``'s ``HOME``, ``USER`` and ``LOGNAME``."""
    env = {k: v for k, v in env.items() if k not in CREDENTIALS}
    if account is not None:
        env.update(HOME=account.home, USER=account.user, LOGNAME=account.user)
    return env


def _account(entry: pwd.struct_passwd) -> Account:
    groups = os.getgrouplist(entry.pw_name, entry.pw_gid)  # what os.initgroups would set
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(groups), entry.pw_dir)


def _name(uid: int) -> str:
    try:
        return repr(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return f"uid {uid}"
