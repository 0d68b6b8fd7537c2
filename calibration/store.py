"""Persistent store for calibration runs, group records, step-time samples, fits and nightly history.

SQLite file by default (WAL journal, so readers never block the writing job), any SQLAlchemy URL via
$SPECPLAN_STORE_URL (e.g. postgresql+psycopg://... for a shared team store). Each finished group is
committed on its own, so a job that dies mid-run leaves its finished groups readable; its run row stays
"running" with a heartbeat that stops moving, and readers report it as "crashed".
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine

from calibration.records import RUN_STATES, GroupRecord

# A running job touches its heartbeat at least every HEARTBEAT_S; a run silent for STALE_AFTER_S is
# reported as crashed (3 missed beats: tolerant of a slow engine start, quick to notice a SIGKILL).
HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0

metadata = MetaData()
runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),  # engine | import | microbench | regress
    Column("status", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("spec_json", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("finished_at", Float),
)
group_records = Table(
    "group_records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("schema_version", Integer, nullable=False),
    Column("config_label", String(128), nullable=False),
    Column("workload", String(64), nullable=False),
    Column("method", String(32), nullable=False),
    Column("k", Integer, nullable=False),
    Column("record_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
step_samples = Table(
    "step_samples",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("sample_json", Text, nullable=False),
)
fits = Table(
    "fits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, index=True),
    Column("kind", String(32), nullable=False),  # acceptance | step_time | profile
    Column("result_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
history = Table(
    "history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("series", String(128), nullable=False, index=True),  # e.g. "smollm2-135m/ngram-k4"
    Column("workload", String(64), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("acceptance_length", Float, nullable=False),
    Column("low", Float, nullable=False),
    Column("high", Float, nullable=False),
    Column("regression", Integer, nullable=False, default=0),
    Column("message", Text, nullable=False, default=""),
    Column("created_at", Float, nullable=False),
)


def default_url() -> str:
    env = os.environ.get("SPECPLAN_STORE_URL")
    if env:
        return env
    path = Path.home() / ".local" / "share" / "specplan" / "calibration.db"
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class RunRow:
    run_id: str
    kind: str
    status: str  # as stored, except a silent "running" run reads as "crashed"
    message: str
    spec: dict[str, Any]
    created_at: float
    heartbeat_at: float
    finished_at: float | None


class Store:
    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        if self.url.startswith("sqlite:///"):
            Path(self.url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(self.url, future=True)
        if self.engine.dialect.name == "sqlite":

            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                # Several processes (app, job, CLI) share the file; wait for a writer instead of failing.
                cur.execute("PRAGMA busy_timeout=30000")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()

        metadata.create_all(self.engine)

    # ---- runs -------------------------------------------------------------------------------------
    def create_run(self, kind: str, spec: dict[str, Any], run_id: str | None = None, status: str = "queued") -> str:
        if status not in RUN_STATES:
            raise ValueError(f"status={status!r} not allowed; allowed: {RUN_STATES}")
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        with self.engine.begin() as c:
            c.execute(insert(runs).values(
                run_id=run_id, kind=kind, status=status, message="", spec_json=json.dumps(spec),
                created_at=now, heartbeat_at=now, finished_at=None,
            ))
        return run_id

    def set_status(self, run_id: str, status: str, message: str = "") -> None:
        if status not in RUN_STATES:
            raise ValueError(f"status={status!r} not allowed; allowed: {RUN_STATES}")
        now = time.time()
        values: dict[str, Any] = {"status": status, "heartbeat_at": now}
        if message:
            values["message"] = message
        if status not in ("queued", "running"):
            values["finished_at"] = now
        with self.engine.begin() as c:
            c.execute(update(runs).where(runs.c.run_id == run_id).values(**values))

    def heartbeat(self, run_id: str, message: str | None = None) -> None:
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if message is not None:
            values["message"] = message
        with self.engine.begin() as c:
            c.execute(update(runs).where(runs.c.run_id == run_id).values(**values))

    def get_run(self, run_id: str, now: float | None = None) -> RunRow:
        with self.engine.connect() as c:
            row = c.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if row is None:
            raise KeyError(f"run_id={run_id!r} not found in store {self.url}")
        return self._row(row, now)

    def list_runs(self, kind: str | None = None, limit: int = 200) -> list[RunRow]:
        q = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        if kind:
            q = q.where(runs.c.kind == kind)
        with self.engine.connect() as c:
            return [self._row(r) for r in c.execute(q).mappings()]

    @staticmethod
    def _row(row: Any, now: float | None = None) -> RunRow:
        status = row["status"]
        now = time.time() if now is None else now
        if status == "running" and now - row["heartbeat_at"] > STALE_AFTER_S:
            status = "crashed"
        return RunRow(
            run_id=row["run_id"], kind=row["kind"], status=status, message=row["message"] or "",
            spec=json.loads(row["spec_json"] or "{}"), created_at=row["created_at"],
            heartbeat_at=row["heartbeat_at"], finished_at=row["finished_at"],
        )

    # ---- records ----------------------------------------------------------------------------------
    def add_group(self, rec: GroupRecord) -> None:
        """Commit one finished group at once (its own transaction) and touch the run's heartbeat."""
        now = time.time()
        with self.engine.begin() as c:
            c.execute(insert(group_records).values(
                run_id=rec.run_id, schema_version=rec.schema_version, config_label=rec.config_label,
                workload=rec.workload, method=rec.method, k=rec.k, record_json=json.dumps(rec.to_dict()),
                created_at=now,
            ))
            c.execute(update(runs).where(runs.c.run_id == rec.run_id).values(heartbeat_at=now))

    def groups(self, run_ids: list[str] | None = None) -> list[GroupRecord]:
        q = select(group_records.c.record_json).order_by(group_records.c.id)
        if run_ids is not None:
            q = q.where(group_records.c.run_id.in_(run_ids))
        with self.engine.connect() as c:
            return [GroupRecord.from_dict(json.loads(r[0])) for r in c.execute(q)]

    def add_step_samples(self, run_id: str, samples: list[dict[str, Any]]) -> None:
        with self.engine.begin() as c:
            if samples:
                c.execute(insert(step_samples), [{"run_id": run_id, "sample_json": json.dumps(s)} for s in samples])

    def step_samples(self, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        q = select(step_samples.c.sample_json).order_by(step_samples.c.id)
        if run_ids is not None:
            q = q.where(step_samples.c.run_id.in_(run_ids))
        with self.engine.connect() as c:
            return [json.loads(r[0]) for r in c.execute(q)]

    # ---- fits -------------------------------------------------------------------------------------
    def save_fit(self, name: str, kind: str, result: dict[str, Any]) -> int:
        with self.engine.begin() as c:
            res = c.execute(insert(fits).values(
                name=name, kind=kind, result_json=json.dumps(result), created_at=time.time()
            ))
            return int(res.inserted_primary_key[0])

    def fits(self, kind: str | None = None) -> list[dict[str, Any]]:
        q = select(fits).order_by(fits.c.id.desc())
        if kind:
            q = q.where(fits.c.kind == kind)
        with self.engine.connect() as c:
            return [
                {"id": r["id"], "name": r["name"], "kind": r["kind"], "created_at": r["created_at"],
                 "result": json.loads(r["result_json"])}
                for r in c.execute(q).mappings()
            ]

    # ---- nightly history --------------------------------------------------------------------------
    def add_history(self, *, series: str, workload: str, run_id: str, acceptance_length: float, low: float,
                    high: float, regression: bool, message: str = "", created_at: float | None = None) -> None:
        with self.engine.begin() as c:
            c.execute(insert(history).values(
                series=series, workload=workload, run_id=run_id, acceptance_length=acceptance_length,
                low=low, high=high, regression=int(regression), message=message,
                created_at=time.time() if created_at is None else created_at,
            ))

    def history(self, series: str | None = None) -> list[dict[str, Any]]:
        q = select(history).order_by(history.c.created_at, history.c.id)
        if series:
            q = q.where(history.c.series == series)
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]
