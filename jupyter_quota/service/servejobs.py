"""Endpoints from finished fine-tunes: the ``"job"`` of ``POST .../endpoints`` made into ``swift
deploy`` arguments from the job's own record and log, and model paths inside another team's job
output refused (``servejob`` decides; this reads the jobs and their logs).
"""

from __future__ import annotations

from .. import swiftlog
from ..errors import Forbidden, InvalidRequest, NotFound
from ..identity import Identity
from ..profiles import TeamProfile
from ..resume import newest_named
from ..servejob import JOB_FIELD, deploy_args_for, inside, job_name, model_paths, output_roots

#: how much of a job's log is read for its checkpoints (as the local backend's resume reads)
LOG_LINES = 5000


class ServedJobs:
    def __init__(self, registry, backend):
        self.registry = registry
        self.backend = backend

    def body_for(self, profile: TeamProfile, body):
        """``body`` with its ``"job"`` replaced by the ``args`` that serve that job's last
        checkpoint (a job of ``profile``'s namespace; 404 if there is none of that name)."""
        if not isinstance(body, dict) or JOB_FIELD not in body:
            return body
        name = job_name(body[JOB_FIELD])
        args = body.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise InvalidRequest('"args" must be a list of strings: the swift deploy arguments besides the job\'s')
        try:
            job = self.backend.get_job(profile, name)
        except NotFound:
            raise NotFound(
                f'job "{name}" not found in namespace {profile.namespace}: name a finished fine-tune of this '
                "namespace (the jobs list shows them)"
            ) from None
        checkpoint = None
        if job["phase"] == "Succeeded" and not job.get("kind"):
            checkpoint = newest_named(self._progress(profile, name))  # as a preempted job resumes
        args = deploy_args_for(job, checkpoint, args)
        rest = {k: v for k, v in body.items() if k != JOB_FIELD}
        return {**rest, "args": args}

    def check_paths(self, who: Identity, args: list[str]) -> None:
        """403 when ``--model`` or ``--adapters`` lies in what a job of a team ``who`` is not a
        member of wrote: serving it would hand that team's work to another."""
        paths = model_paths(args)
        if not paths:
            return
        mine = {p.team for p in self.registry.teams_of(who)}
        for profile in self.registry.all():
            if profile.team in mine:
                continue
            for job in self.backend.list_jobs(profile):
                if job.get("kind"):
                    continue
                roots = output_roots(job, self._progress(profile, job["name"]))
                for path in paths:
                    if roots and inside(path, roots):
                        raise Forbidden(
                            f"{path} is in the output of a fine-tune of another team, which you are not a "
                            'member of: serve your own team\'s fine-tunes ("job": NAME), or ask that team '
                            "to share the model"
                        )

    def _progress(self, profile: TeamProfile, name: str) -> swiftlog.TrainProgress:
        return swiftlog.parse_log(self.backend.logs(profile, name, LOG_LINES))
