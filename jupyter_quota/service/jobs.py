"""Jobs as use cases: submit (admission counted in the metrics, the estimate kept beside the
job), list, get, logs and cancel, each within the caller's teams."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .. import jobmemory, paging
from ..errors import AdmissionDenied, Forbidden, InvalidRequest
from ..identity import Identity
from ..jobspec import create_named, parse_job_request
from ..profiles import TeamProfile

MAX_TAIL_LINES = 10_000


class Jobs:
    def __init__(
        self,
        registry,
        backend,
        memory,
        metrics,
        profile_for: Callable[[Identity, str], TeamProfile],
        *,
        job_command: list[str],
        job_list_limit: int,
        log_tail_lines: int,
    ):
        """``profile_for(who, namespace)``: the namespace's profile with its effective hard quota,
        if ``who`` may use it (``QuotaService.profile_for``); the keywords are ``JupyterQuota``'s."""
        self.registry = registry
        self.backend = backend
        self.memory = memory
        self.metrics = metrics
        self.profile_for = profile_for
        self.job_command = job_command
        self.job_list_limit = job_list_limit
        self.log_tail_lines = log_tail_lines

    def submit(self, who: Identity, namespace: str, body) -> dict:
        profile = self.profile_for(who, namespace)
        request = parse_job_request(body, profile)

        def create(named):
            job = self.backend.build_job(profile, named, who.name, list(self.job_command))
            try:
                created = self.backend.submit(profile, job, who.name)
            except AdmissionDenied as refusal:
                self.metrics.admission(profile, refusal.reason)
                raise
            self.metrics.admission(profile)
            return created

        job = create_named(request, create)
        try:
            self.memory.on_submit(profile, job)
        except Exception:  # noqa: BLE001 - the job was created and runs: a 500 would make its user submit it twice
            jobmemory.log.exception("job %s/%s: its estimate could not be recorded", namespace, job["name"])
        return self.memory.decorate(profile, job)

    def list_jobs(self, who: Identity, namespace: str, limit=None, token=None) -> dict:
        """A page of the namespace's jobs, newest first; ``limit`` and ``token`` as in ``paging``."""
        profile = self.registry.for_namespace(who, namespace)
        size = paging.parse_limit(limit, self.job_list_limit)
        page = self.backend.page_jobs(profile, size, paging.decode(token))
        page = dataclasses.replace(page, items=[self.memory.decorate(profile, job) for job in page.items])
        return paging.list_json("jobs", page)

    def get_job(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        return self.memory.decorate(profile, self.backend.get_job(profile, name))

    def logs(self, who: Identity, namespace: str, name: str, tail_lines=None) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        lines = self._tail_lines(tail_lines)
        return {
            "name": name,
            "namespace": namespace,
            "tailLines": lines,
            "logs": self.backend.logs(profile, name, lines),
        }

    def cancel(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        job = self.backend.get_job(profile, name)
        if job["owner"] != who.name and not who.admin:
            raise Forbidden(f'job "{name}" belongs to {job["owner"]}; only its owner or an admin may cancel it')
        return self.backend.cancel(profile, name, who.name)

    def _tail_lines(self, raw) -> int:
        if raw is None:
            return self.log_tail_lines
        if not isinstance(raw, int) and not (
            isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 18
        ):
            raise InvalidRequest(
                f"tailLines must be a whole number from 1 to {MAX_TAIL_LINES} in ASCII digits, not {str(raw)[:32]!r}"
            )
        lines = int(raw)
        if not 1 <= lines <= MAX_TAIL_LINES:
            raise InvalidRequest(f"tailLines must be from 1 to {MAX_TAIL_LINES}, not {lines}")
        return lines
