"""The admission's copy of each namespace's quota usage, so that an admission costs what changed.

Admission used to read every live job of its namespace, parse its pod and sum its usage for
every quota, so each admission cost time linear in the namespace's live jobs. This copy holds,
per live job of the namespaces it has seen, the usage of its pod (``quota.pod_usage``, parsed
once: a job's pod never changes after admission, only its phase, which does not change what a
live pod charges), and per quota scope the running sums of the jobs that scope selects
(``quota.quota_matches_pod``): about 2 KB per live job, not its pod. Quotas with scopes not
summed yet (a changed profile) read the namespace anew. ``refresh``, inside the admission's write transaction, brings it
up to date from the rows whose ``rev`` is past the generation it last saw
(``ledger.changed_since``), as ``livejobs`` does, so a job admitted, started or ended by any
thread or server process is counted at the next admission.

``quotas_with_status`` gives what ``admission.quotas_with_status`` gives for the same ledger:
``quota.quota_status`` sets every key but the pod keys' sums, which come from the copy. A sum
is the same Quantity as ``quota_status``'s (format included; see ``_Sum``). A namespace holding
a job whose usage cannot be read once and for all (a pod that does not parse, or one with a
``deletionTimestamp``, which is charged only until its grace period ends) is counted the old
way, from the ledger's rows.

The copy may hold rows the current transaction wrote: whoever runs the transaction drops the
copy when the transaction is rolled back (``lifecycle``).
"""

from __future__ import annotations

import json
import sqlite3

from ... import quota
from ...podresources import qsum
from ...quantity import Quantity
from ...quotaspec import matching_resources, scope_selectors
from . import admission, ledger


class QuotaUsage:
    """Live usage per namespace as of ledger generation ``generation`` (None: not read yet)."""

    def __init__(self):
        self.generation: int | None = None
        self._namespaces: dict[str, _Namespace] = {}

    def quotas_with_status(self, con: sqlite3.Connection, namespace: str, quotas: list[dict]) -> list[dict]:
        """The namespace's quotas with ``status`` as the quota controller sets them, from the copy."""
        self.refresh(con)
        scopes = {_scope_key(q): scope_selectors(q) for q in quotas}
        usage = self._namespaces.get(namespace)
        if usage is None or not scopes.keys() <= usage.scopes.keys():  # new, or quotas with new scopes
            scopes = {**(usage.scopes if usage else {}), **scopes}
            usage = self._namespaces[namespace] = _Namespace(ledger.live_in_namespace(con, namespace), scopes)
        if usage.irregular:
            return admission.quotas_with_status(quotas, ledger.live_in_namespace(con, namespace))
        counts = {admission.JOB_COUNT: len(usage.jobs)}
        out = []
        for q in quotas:
            status = quota.quota_status(q, [], counts)  # every key but the pod keys' sums
            sums = usage.sums[_scope_key(q)]
            used = status["status"]["used"]
            for key in matching_resources(status["status"]["hard"]):  # the pod keys, as quota_status
                if key in sums and sums[key].count:
                    used[key] = str(sums[key].total())
            out.append(status)
        return out

    def refresh(self, con: sqlite3.Connection) -> None:
        """Catch up with the ledger as ``con`` sees it (the rows this transaction wrote included)."""
        seen = ledger.generation(con)
        if self.generation is not None and self._namespaces:
            # Even at the same generation: this transaction may have written rows (admissions).
            for row in ledger.changed_since(con, self.generation):
                usage = self._namespaces.get(row["namespace"])
                if usage is not None:
                    usage.apply(row)
        self.generation = seen


class _Job:
    """What one live job charges: its pod's usage, and which quota scopes select it."""

    __slots__ = ("selected", "usage")

    def __init__(self, row: sqlite3.Row, scopes: dict[str, list[dict]]):
        pod = admission.live_pods([row])[0]
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            raise ValueError("charged until its deletion grace period ends")
        self.usage = quota.pod_usage(pod)
        self.selected = [scope for scope, selectors in scopes.items() if _selects(selectors, pod)]


class _Namespace:
    """The live jobs of one namespace and, per quota scope, the sums of what they charge.

    The scopes are fixed: quotas with other scopes (a changed profile) read the namespace anew.
    """

    def __init__(self, rows: list[sqlite3.Row], scopes: dict[str, list[dict]]):
        self.scopes = scopes  # scope key -> the scope selectors
        self.jobs: dict[int, _Job | None] = {}  # id -> job; None: its usage cannot be cached
        self.irregular = 0  # how many jobs are None
        self.sums: dict[str, dict[str, _Sum]] = {scope: {} for scope in scopes}  # scope -> quota key -> sum
        for row in rows:
            self.apply(row)

    def apply(self, row: sqlite3.Row) -> None:
        """Take a row's current state: a live job is counted once, a finished one no more."""
        job_id = row["id"]
        if row["phase"] not in ledger.LIVE:
            self._remove(job_id)
            return
        if job_id in self.jobs:  # a live job's pod never changes: only new ones are read
            return
        try:
            job = _Job(row, self.scopes)
        except Exception:  # noqa: BLE001 - counted from the ledger, which raises as it always did
            self.jobs[job_id] = None
            self.irregular += 1
            return
        self.jobs[job_id] = job
        for scope in job.selected:
            _add(self.sums[scope], job_id, job.usage)

    def _remove(self, job_id: int) -> None:
        if job_id not in self.jobs:
            return
        job = self.jobs.pop(job_id)
        if job is None:
            self.irregular -= 1
            return
        for scope in job.selected:
            sums = self.sums[scope]
            for key, amount in job.usage.items():
                sums[key].remove(job_id, amount)


class _Sum:
    """One quota key summed over jobs, kept up to date as jobs come and go.

    ``quota_status`` adds the usages up in id order with ``podresources.qsum``: the first
    amount as it is, then Go's Quantity.Add, which keeps the format of the running total (of the
    right operand while the total is zero). So a single amount is itself (its text verbatim),
    and amounts of one format sum to the canonical text in that format whatever their order. The
    rare mixed formats are summed again in id order, from the amounts kept here.
    """

    __slots__ = ("amounts", "formats", "value")

    def __init__(self):
        self.amounts: dict[int, Quantity] = {}
        self.value = Quantity(0)  # exact; its format is not the sum's
        self.formats: dict[str, int] = {}  # format -> how many amounts have it

    @property
    def count(self) -> int:
        return len(self.amounts)

    def add(self, job_id: int, amount: Quantity) -> None:
        self.amounts[job_id] = amount
        self.value = self.value + amount
        self.formats[amount.format] = self.formats.get(amount.format, 0) + 1

    def remove(self, job_id: int, amount: Quantity) -> None:
        del self.amounts[job_id]
        self.value = self.value - amount
        self.formats[amount.format] -= 1
        if not self.formats[amount.format]:
            del self.formats[amount.format]

    def total(self) -> Quantity:
        if len(self.amounts) == 1:
            return next(iter(self.amounts.values()))
        if len(self.formats) == 1:
            # ``value`` comes from arithmetic, so it keeps no verbatim text: the canonical one
            return Quantity(self.value, next(iter(self.formats)))
        total = None
        for job_id in sorted(self.amounts):
            amount = self.amounts[job_id]
            total = amount if total is None else qsum(total, amount)
        return total


def _scope_key(q: dict) -> str:
    return json.dumps(scope_selectors(q), sort_keys=True)


def _selects(selectors: list[dict], pod: dict) -> bool:
    """``quota.quota_matches_pod`` for a quota with these scope selectors."""
    return all(quota.scope_matches(selector, pod) for selector in selectors)


def _add(sums: dict[str, _Sum], job_id: int, usage: dict) -> None:
    for key, amount in usage.items():
        total = sums.get(key)
        if total is None:
            total = sums[key] = _Sum()
        total.add(job_id, amount)
