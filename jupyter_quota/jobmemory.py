"""Learning from real jobs, as the service uses it (docs/estimator.md §13).

- At submit, a job's ms-swift arguments are estimated (corrected by what earlier jobs taught) and
  the estimate is kept beside the job (``peaks``).
- When an ended job is first read, its log is read once: ms-swift's logged peak ``memory(GiB)`` and
  whether it died of CUDA out-of-memory are stored. The job then shows ``memory`` and, when it ran
  out of memory, ``reason: OutOfMemory``.
- Estimates and plans apply the bounded correction per model family and regime.
- A job that ran out of memory can be re-planned: the same search, with its own configuration
  known not to fit, offers the next plan down.
"""

from __future__ import annotations

import logging
import threading
import time

from . import audit, peaks, reasons
from .errors import InvalidRequest, QuotaError
from .estimator.learning import Correction, corrected, corrections, error_table
from .records import open_records
from .swiftlog import parse_log

ENDED = ("Succeeded", "Failed")
LOG_LINES = 5000  # of an ended job's log read once: ms-swift logs memory(GiB) with every log dict
FIXES_TTL = 10.0  # seconds a computed set of corrections is reused
log = logging.getLogger(__name__)


class JobMemory:
    def __init__(self, state_dir: str, backend, shared: dict[tuple[str, str], Correction] | None = None):
        self.state_dir = state_dir
        self.backend = backend
        #: the corrections an admin approved for every team (``learning.shared_corrections``)
        self.shared = dict(shared or {})
        self._fixes: dict[frozenset[str], tuple[float, dict[tuple[str, str], Correction]]] = {}
        self._lock = threading.Lock()

    # -- estimates -------------------------------------------------------------------------
    def fixes(self, teams: frozenset[str]) -> dict[tuple[str, str], Correction]:
        """The corrections for ``teams``' estimates: what their own measured jobs taught, else the
        shared ones (recomputed at most every FIXES_TTL s). Another team's jobs never count."""
        with self._lock:
            at, fixes = self._fixes.get(teams, (0.0, {}))
            if time.monotonic() - at > FIXES_TTL:
                fixes = {**self.shared, **corrections(peaks.measured(self.state_dir, set(teams)))}
                self._fixes[teams] = (time.monotonic(), fixes)
            return fixes

    def forget_fixes(self) -> None:
        with self._lock:
            self._fixes = {}

    def estimate(self, args, gpus: int, model_size: str | None = None, teams: frozenset[str] = frozenset()):
        """``estimator.estimate``, with what finished jobs of ``teams`` in its family and regime taught."""
        from .estimator import estimate

        return corrected(estimate(args, gpus=gpus, model_size=model_size), self.fixes(teams))

    # -- jobs ------------------------------------------------------------------------------
    def on_submit(self, profile, job: dict) -> None:
        """Keep the estimate a new job runs under; nothing for a job that is not an estimable
        ``swift sft`` (another command, an unknown model)."""
        from .estimator import estimate

        try:
            raw = estimate(job.get("args") or [], gpus=max(1, int(job.get("gpus") or 1)))
        except (InvalidRequest, ValueError):
            return
        peaks.remember(self.state_dir, job, profile, corrected(raw, self.fixes(frozenset({profile.team}))), raw)

    def decorate(self, profile, job: dict) -> dict:
        """The job with its ``memory`` field, learning from its log the first time it is seen ended."""
        record = peaks.find(self.state_dir, job["namespace"], job["name"])
        if record is None:
            return job
        if job.get("phase") in ENDED and record["learned_at"] is None:
            record = self._learn(profile, job) or record
        job["memory"] = peaks.memory_json(record)
        if record["out_of_memory"] and job.get("phase") == "Failed" and job.get("reason") != reasons.CANCELLED:
            job["reason"] = reasons.OUT_OF_MEMORY
            job["message"] = out_of_memory_message(job["memory"], job.get("message"))
        return job

    def _learn(self, profile, job: dict) -> dict | None:
        try:
            text = self.backend.logs(profile, job["name"], LOG_LINES)
        except QuotaError:
            text = ""  # the log is gone (a deleted pod): nothing measured, learned once
        progress = parse_log(text)
        record = peaks.learn(
            self.state_dir, job["namespace"], job["name"], progress.peak_memory_gib, progress.out_of_memory
        )
        self.forget_fixes()
        if progress.peak_memory_gib or progress.out_of_memory:
            log.info(
                "job %s/%s: measured peak %s GiB%s",
                job["namespace"],
                job["name"],
                progress.peak_memory_gib,
                ", CUDA out of memory" if progress.out_of_memory else "",
            )
        return record

    def replan_estimate(self, job: dict, card_bytes: int, teams: frozenset[str] = frozenset()):
        """The estimator a re-plan of an out-of-memory ``job`` uses: as usual (for ``teams``), except
        that the job's own configuration is known to need more than its GPU (``card_bytes``)."""
        from dataclasses import replace

        from .swift import parse_sft_args

        failed = (tuple(parse_sft_args(list(job["args"])).to_argv()), int(job["gpus"]))

        def estimate(args, gpus):
            est = self.estimate(args, gpus, teams=teams)
            if (tuple(args.to_argv()), gpus) != failed or est.peak_bytes_per_gpu > card_bytes:
                return est
            note = "this configuration ran out of GPU memory in job " + job["name"]
            more = card_bytes + 1 - est.peak_bytes_per_gpu
            changes = {
                "peak_bytes_per_gpu": card_bytes + 1,
                "breakdown": dict(est.breakdown, overhead=est.breakdown["overhead"] + more),
                "assumptions": [*est.assumptions, note],
            }
            if est.range is not None:  # what a plan is fitted to: the range's upper end
                changes["range"] = est.range._replace(
                    low=max(est.range.low, card_bytes + 1), high=max(est.range.high, card_bytes + 1)
                )
            return replace(est, **changes)

        return estimate

    def audit_shared(self) -> None:
        """Record each shared correction in the audit log once (who approved it, the factor, why),
        so a correction that changes every team's estimates is on the record."""
        if not self.shared:
            return
        with open_records(self.state_dir).write() as con:
            done = {
                (r["target"], r["detail"])
                for r in con.execute("SELECT target, detail FROM audit WHERE action = ?", (audit.CORRECTION_SHARED,))
            }
            for (family, regime), fix in sorted(self.shared.items()):
                target, detail = f"correction/{family}/{regime}", f"x{fix.factor:g}: {fix.reason}".rstrip(": ")
                if (target, detail) not in done:
                    audit.append(con, fix.approved_by, audit.CORRECTION_SHARED, target, detail)

    def error_table(self, teams: set[str] | None = None) -> list[dict]:
        return error_table(peaks.measured(self.state_dir, teams))


def out_of_memory_message(memory: dict, message: str | None) -> str:
    estimated = f"estimated {memory['estimatedGib']} GiB per GPU"
    if memory.get("rangeGib"):
        estimated += f" (range {memory['rangeGib'][0]}-{memory['rangeGib'][1]})"
    measured = f", measured peak {memory['measuredGib']} GiB before it failed" if memory.get("measuredGib") else ""
    gpu = f" on {memory['gpu']}" if memory.get("gpu") else ""
    text = f"CUDA out of memory{gpu}: {estimated}{measured}. Re-plan it for the next plan down (job.retry())"
    return f"{text}; {message}" if message else text
