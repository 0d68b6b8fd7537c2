"""Whether a calibration job may start: one running job per user and a cap on the jobs running at once.

A job takes the machine (a CPU engine uses every core), so the runners (calibration.run.runners) admit a job only
while fewer than `max_running_jobs()` jobs are active, and never a second one for the same user. Both are counted
in the store, so they hold across page reruns, across sessions and server processes, and for jobs the CLI
started. A user is a session and a client address (`JobOwner`): a new tab from the same address is the same user.
Only digests of the session id and the address are stored with the run.

Active: queued or running (a running job that stopped heartbeating is marked failed by the store when read); a
run still queued QUEUED_COUNTS_S after it was created never started (its runner died first) and no longer counts.

Two processes that admit at once can both pass the first check; each then counts again after recording its run
and withdraws (cancelled, with the reason) when it sees more than allowed: of two concurrent starts the later
writer always sees the other, so the cap is never exceeded (at worst both withdraw). Within one server process
a lock makes the check and the record one step.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_RUNNING_JOBS_ENV = "SPECPLAN_MAX_RUNNING_JOBS"
DEFAULT_MAX_RUNNING_JOBS = 1  # a CPU calibration job takes every core of the machine
MAX_RUNNING_JOBS_LIMIT = 64
QUEUED_COUNTS_S = 900.0
ACTIVE = ("queued", "running")
_LOCK = threading.Lock()


class JobRefused(ValueError):
    """A start request refused by a cap; `run_id` names the running job that holds the place."""

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


def _digest(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JobOwner:
    """Who started a job: digests of the session id and of the client address."""

    session: str
    client: str

    @classmethod
    def of(cls, *, session_id: str, client: str) -> JobOwner:
        if not session_id or not client:
            raise ValueError(f"session_id={session_id!r}, client={client!r} not allowed: both non-empty")
        return cls(session=_digest("session", session_id), client=_digest("client", client))

    def to_dict(self) -> dict[str, str]:
        return {"session": self.session, "client": self.client}

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> JobOwner | None:
        o = spec.get("owner") if isinstance(spec, dict) else None
        if isinstance(o, dict) and isinstance(o.get("session"), str) and isinstance(o.get("client"), str):
            return cls(session=o["session"], client=o["client"])
        return None

    def same_user(self, other: JobOwner | None) -> bool:
        return other is not None and (other.session == self.session or other.client == self.client)


def max_running_jobs(env: dict[str, str] | None = None) -> int:
    """The server-wide cap: $SPECPLAN_MAX_RUNNING_JOBS (1..64), else DEFAULT_MAX_RUNNING_JOBS."""
    raw = (os.environ if env is None else env).get(MAX_RUNNING_JOBS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_RUNNING_JOBS
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_RUNNING_JOBS_LIMIT:
        raise ValueError(f"${MAX_RUNNING_JOBS_ENV}={raw[:40]!r} not allowed: an integer 1..{MAX_RUNNING_JOBS_LIMIT}")
    return int(raw)


def active_jobs(rows: Iterable[Any], *, now: float | None = None) -> list[Any]:
    """The runs (store RunRows) that hold a place: running, or queued for less than QUEUED_COUNTS_S."""
    now = time.time() if now is None else now
    return [r for r in rows if r.status == "running"
            or (r.status == "queued" and now - r.created_at < QUEUED_COUNTS_S)]


def own_job(active: Iterable[Any], owner: JobOwner | None) -> Any | None:
    """The user's active run (the oldest one), or None."""
    if owner is None:
        return None
    mine = [r for r in active if owner.same_user(JobOwner.from_spec(r.spec))]
    return min(mine, key=lambda r: (r.created_at, r.run_id)) if mine else None


def describe(row: Any) -> str:
    return f"job {row.run_id} ({row.kind}, {row.status})"


def refusal(*, active: list[Any], owner: JobOwner | None, limit: int) -> JobRefused | None:
    """Why a new job may not start next to the `active` runs, or None: the user's own running job first, then
    the server-wide cap."""
    mine = own_job(active, owner)
    if mine is not None:
        return JobRefused(f"you already have {describe(mine)}: one job per user at a time; wait for it to "
                          "end or cancel it", mine.run_id)
    if len(active) >= limit:
        first = min(active, key=lambda r: (r.created_at, r.run_id))
        return JobRefused(f"the server runs at most {limit} calibration job{'s' if limit != 1 else ''} at a time "
                          f"(setting {MAX_RUNNING_JOBS_ENV}) and {describe(first)}"
                          f"{f' and {len(active) - 1} more' if len(active) > 1 else ''} "
                          f"{'is' if len(active) == 1 else 'are'} running: try again when "
                          f"{'it ends' if len(active) == 1 else 'one ends'}", first.run_id)
    return None


def store_active_jobs(store: Any, kinds: Iterable[str]) -> list[Any]:
    """Active runs of the job `kinds` in `store`, whoever started them."""
    return active_jobs([r for k in kinds for r in store.list_runs(kind=k)])


def admit(store: Any, kind: str, stored_spec: dict[str, Any], *, kinds: Iterable[str], owner: JobOwner | None,
          run_id: str | None = None, limit: int | None = None) -> str:
    """Record a queued run for a new job when the caps allow it; returns its run id or raises JobRefused."""
    kinds = tuple(kinds)
    limit = max_running_jobs() if limit is None else limit
    with _LOCK:
        why = refusal(active=store_active_jobs(store, kinds), owner=owner, limit=limit)
        if why is not None:
            raise why
        spec = {**stored_spec, "owner": owner.to_dict()} if owner is not None else stored_spec
        run_id = store.create_run(kind, spec, run_id=run_id)
        others = [r for r in store_active_jobs(store, kinds) if r.run_id != run_id]
        why = refusal(active=others, owner=owner, limit=limit)
        if why is not None:  # another process recorded its job at the same time
            store.set_status(run_id, "cancelled", f"refused at start: {why}")
            raise why
    return run_id
