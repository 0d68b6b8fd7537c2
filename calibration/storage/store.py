"""Persistent store for calibration runs, group records, step-time samples, fits and nightly history.

SQLite file by default (WAL journal, so readers never block the writing job), any SQLAlchemy URL via
$SPECPLAN_STORE_URL (e.g. postgresql+psycopg://... for a shared team store). Each finished group is
committed on its own, so a job that dies mid-run leaves its finished groups readable.

Reliability rules:
- Opening a store writes nothing: the schema (and SQLite's WAL mode) is created by the first write, so a
  read-only store (a file this process cannot write, a read-only database role) can still be listed.
- Every database failure surfaces as one `StoreError` line naming the store with its password hidden.
- A running job touches its heartbeat every HEARTBEAT_S; whoever reads a run whose heartbeat is older than
  STALE_AFTER_S marks it failed (the job process died: SIGKILL, out of memory, machine gone).
- The first terminal state wins: a job, its runner and a reader can race to finish a run; later writes of
  another terminal state are ignored.
- A SQLite file removed or replaced while a Store lives (the app keeps one for hours) is noticed before the next
  read or write and before a pooled connection is used: the old connections are closed, the old file's -wal and -shm
  are removed before a connection opens the new file (SQLite would replay them into it: calibration.storage.store_file),
  and a write creates the schema again in the file that exists.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Table, create_engine, event, insert, inspect, select, text, update
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, SQLAlchemyError

from calibration.storage.records import RUN_STATES, GroupRecord
from calibration.storage.store_file import FileWatch, file_id
from calibration.storage.store_schema import (  # noqa: F401 - the tables, re-exported for the modules that read them
    ADDED_COLUMNS,
    fits,
    group_records,
    history,
    history_once,
    kept_models,
    legacy_traffic_profiles,
    metadata,
    runs,
    step_samples,
    traffic_files,
    traffic_links,
)

# A running job touches its heartbeat at least every HEARTBEAT_S; a run silent for STALE_AFTER_S is dead
# (3 missed beats: tolerant of a slow engine start or a busy store, quick to notice a SIGKILL).
HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0
ACTIVE_STATES = ("queued", "running")
# Serialises schema creation between processes on PostgreSQL (pg_advisory_xact_lock key; any constant).
_PG_SCHEMA_LOCK = 0x5BEC_C0DE
STORE_URL_ENV = "SPECPLAN_STORE_URL"
WAL_SIZE_LIMIT_BYTES = 16 * 2**20

T = TypeVar("T")


class StoreError(RuntimeError):
    """The store cannot be opened, read or written. The message is one line: the store (password hidden),
    what was being done, and the database's own reason."""


def default_url() -> str:
    env = os.environ.get(STORE_URL_ENV)
    if env:
        return env
    path = Path.home() / ".local" / "share" / "specplan" / "calibration.db"
    return f"sqlite:///{path}"


def display_url(url: str) -> str:
    """The URL as it may be shown or logged: any password replaced by '***' (SQLAlchemy's own rendering)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparseable URL is not echoed back: it may hold a secret
        return "<unparseable store URL>"


def _password(url: str) -> str | None:
    try:
        pw = make_url(url).password
    except Exception:  # noqa: BLE001
        return None
    return str(pw) if pw else None


@dataclass(frozen=True)
class RunRow:
    run_id: str
    kind: str
    status: str  # as stored; a run found dead on reading is "failed"
    message: str
    spec: dict[str, Any]
    created_at: float
    heartbeat_at: float
    finished_at: float | None


def insert_or_ignore(dialect: str, table: Table, keys: tuple[str, ...]):
    """INSERT that does nothing when a row with the same `keys` exists (SQLite and PostgreSQL: ON CONFLICT DO
    NOTHING); other dialects get a plain INSERT."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        return insert(table)
    return dialect_insert(table).on_conflict_do_nothing(index_elements=list(keys))


_SHARED_STORES_KEPT = 4  # Store objects (one engine each) shared per store URL
_shared: OrderedDict[str, Store] = OrderedDict()
_shared_lock = threading.Lock()


def shared_store() -> Store:
    """The Store for $SPECPLAN_STORE_URL, one per URL in this process (one engine and its compiled statements, not
    one per upload or link): for the app's many short calls (calibration.storage.kept_traffic, kept_models)."""
    url = default_url()
    with _shared_lock:
        s = _shared.pop(url, None) or Store(url)
        _shared[url] = s
        while len(_shared) > _SHARED_STORES_KEPT:
            _shared.popitem(last=False)[1].close()
        return s


def _add_columns(c: Connection) -> None:
    """Add the columns of ADDED_COLUMNS an older store lacks, fill its rows, and create their indexes."""
    have: dict[str, set[str]] = {}
    changed: dict[str, Table] = {}
    for table, column, fill in ADDED_COLUMNS:
        if table.name not in have:
            have[table.name] = {col["name"] for col in inspect(c).get_columns(table.name)}
        if column in have[table.name]:
            continue
        col = table.c[column]
        c.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column} {col.type.compile(c.dialect)}"))
        c.execute(text(f"UPDATE {table.name} SET {column} = {fill} WHERE {column} IS NULL"))
        have[table.name].add(column)
        changed[table.name] = table
    for table in changed.values():  # the indexes that came with the columns (create_all makes only new tables')
        for index in table.indexes:
            index.create(c, checkfirst=True)


def _watch_connections(engine: Engine, watch: FileWatch) -> None:
    """Each connection records the file it opened; a connection to a file since replaced is discarded when checked
    out (the pool opens a new one), and the old file's -wal and -shm are removed before a connection opens the new
    file. A connection returned to the pool notes the -wal beside its file (calibration.storage.store_file)."""

    @event.listens_for(engine, "do_connect")
    def _before_open(_dialect: Any, record: Any, _cargs: Any, _cparams: Any) -> None:
        now = file_id(watch.path)
        if watch.file_id is not None and now != watch.file_id:
            watch.drop_stale_side_files()
        record.info["file_id"] = now

    @event.listens_for(engine, "connect")
    def _after_open(_dbapi_conn: Any, record: Any) -> None:
        if file_id(watch.path) != record.info.get("file_id"):  # created or replaced while it opened: unknown
            record.info["file_id"] = None

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if record.info.get("file_id") != file_id(watch.path):
            raise DisconnectionError(f"{watch.path} was replaced or removed since this connection opened it")

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        if record is not None and record.info.get("file_id") == watch.file_id:
            watch.note_side_files()


class Store:
    """One store URL. Construction does no I/O; reads never write the schema; see the module docstring."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.display_url = display_url(self.url)
        self._engine: Engine | None = None
        self._ro_engine: Engine | None = None  # SQLite read-only fallback
        self._schema_ready = False  # created or verified by this instance
        self._tables_seen: set[str] = set()
        # SQLite: the file this instance's engines opened, and the -wal beside it (calibration.storage.store_file). A
        # file removed or replaced while this instance lives (an app keeps one Store for hours) is noticed on next
        # access.
        self._watch: FileWatch | None = None
        self._lock = threading.RLock()

    # ---- connection and errors --------------------------------------------------------------------
    def _url(self) -> URL:
        with self._guard("parse the URL"):
            return make_url(self.url)

    def _sqlite_path(self) -> Path | None:
        u = self._url()
        if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
            return None
        db = u.database.removeprefix("file:").split("?", 1)[0]
        return Path(db).expanduser()

    def _file_watch(self) -> FileWatch | None:
        """The watch on this instance's SQLite file (calibration.storage.store_file); None for other stores."""
        path = self._sqlite_path()
        if path is None:
            return None
        with self._lock:
            if self._watch is None or self._watch.path != path:
                self._watch = FileWatch(path)
            return self._watch

    def _check_file(self) -> None:
        """Before every access: when the SQLite file this instance opened was removed or replaced, close the engines
        (their connections still hold the old file, whose writes nobody would ever read), remove the old file's
        -wal and -shm before any connection opens the new file (calibration.storage.store_file: SQLite would read them
        as the new file's), and forget the schema, so the next write creates it again in a file that exists."""
        watch = self._file_watch()
        if watch is None:
            return
        now_id = file_id(watch.path)
        with self._lock:
            if now_id == watch.file_id:
                return
            if watch.file_id is not None:
                self._reset_engines()
                watch.drop_stale_side_files()
                if now_id is None:  # no file: a journal left behind would be replayed into the next one created
                    for suffix in ("-wal", "-shm", "-journal"):
                        Path(f"{watch.path}{suffix}").unlink(missing_ok=True)
            watch.file_id = now_id

    def close(self) -> None:
        """Close this instance's connections (a later access opens new ones)."""
        with self._lock:
            self._reset_engines()

    def _reset_engines(self) -> None:
        for eng in (self._engine, self._ro_engine):
            if eng is not None:
                eng.dispose()
        self._engine = None
        self._ro_engine = None
        self._schema_ready = False
        self._tables_seen = set()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            with self._lock, self._guard("open"):
                if self._engine is not None:
                    return self._engine
                self._engine = create_engine(self._url(), future=True)
                if self._engine.dialect.name == "sqlite":

                    @event.listens_for(self._engine, "connect")
                    def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
                        cur = dbapi_conn.cursor()
                        # Several processes (app, job, CLI) share the file; wait for a writer instead of
                        # failing. Per-connection settings: they write nothing to the file.
                        cur.execute("PRAGMA busy_timeout=30000")
                        cur.execute("PRAGMA synchronous=NORMAL")
                        # A checkpointed WAL shrinks back to this size: a kept 90 MiB upload would otherwise leave
                        # a 90 MiB -wal file beside the store for good.
                        cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
                        cur.close()

                    watch = self._file_watch()
                    if watch is not None:
                        _watch_connections(self._engine, watch)
        return self._engine

    def _reason(self, e: BaseException) -> str:
        orig = e.orig if isinstance(e, DBAPIError) and e.orig is not None else e
        lines = [x.strip() for x in str(orig).splitlines() if x.strip()]
        reason = lines[0] if lines else type(orig).__name__
        pw = _password(self.url)
        if pw:
            reason = reason.replace(pw, "***")
        return reason.replace(self.url, self.display_url)

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except (SQLAlchemyError, ImportError, OSError, ValueError) as e:
            raise StoreError(f"calibration store {self.display_url}: cannot {action}: {self._reason(e)}") from e

    def _readonly_fallback(self, e: BaseException) -> bool:
        """Switch reads to a read-only, immutable SQLite connection when the file cannot be written: a
        WAL database needs its -shm file, which a reader without write access cannot create."""
        msg = str(getattr(e, "orig", e)).lower()
        path = self._sqlite_path()
        if self._ro_engine is not None or path is None or not path.is_file():
            return False
        if "readonly" not in msg and "read-only" not in msg and "unable to open" not in msg:
            return False
        self._ro_engine = create_engine(f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true", future=True)
        return True

    # ---- the public surface for modules that keep their own tables here (calibration.storage.kept_traffic,
    # kept_models) ---
    def read(self, action: str, table: str, fn: Callable[[Connection], T], empty: T) -> T:
        """Run `fn` on a connection; `empty` when the store or `table` does not exist yet (reading never creates
        them). `action` names what is done in a StoreError ("read a traffic profile")."""
        with self._guard(action):
            self._check_file()
            path = self._sqlite_path()
            if not self._schema_ready and path is not None and not path.exists():
                return empty
            try:
                return self._read_on(self._ro_engine or self.engine, table, fn, empty)
            except SQLAlchemyError as e:
                if not self._readonly_fallback(e):
                    raise
                assert self._ro_engine is not None
                return self._read_on(self._ro_engine, table, fn, empty)

    def _read_on(self, engine: Engine, table: str, fn: Callable[[Connection], T], empty: T) -> T:
        with engine.connect() as c:
            if table not in self._tables_seen:
                self._tables_seen |= set(inspect(c).get_table_names())
                if table not in self._tables_seen:
                    return empty
            return fn(c)

    def write(self, action: str, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one transaction, after creating the schema if this store has none yet."""
        with self._guard(action):
            self._check_file()
            self._ensure_schema()
            with self.engine.begin() as c:
                return fn(c)

    def forget_table(self, table: str) -> None:
        """A table another process dropped: the next read of it looks for it again."""
        self._tables_seen.discard(table)

    @property
    def dialect(self) -> str:
        """The database's kind: "sqlite", "postgresql", ..."""
        return self.engine.dialect.name

    def checkpoint(self) -> None:
        """SQLite: copy the write-ahead log into the file now and empty it (a large write leaves no second copy on
        disk); a busy store checkpoints later by itself. Nothing on other databases."""
        if self.dialect != "sqlite":
            return
        try:
            with self.engine.connect() as c:
                c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        except SQLAlchemyError:
            pass

    def _ensure_schema(self) -> None:
        """Create the tables (and SQLite's WAL mode) before the first write; safe when several processes
        do it at once (PostgreSQL: an advisory lock; SQLite: retry after losing the race)."""
        if self._schema_ready:
            return
        path = self._sqlite_path()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                with self.engine.begin() as c:
                    if c.dialect.name == "postgresql":
                        c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
                    metadata.create_all(c)
                    _add_columns(c)
                break
            except SQLAlchemyError:
                if attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))  # another process created a table (or column) since the check
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as c:
                # Persistent in the file: readers never block the writing job.
                c.exec_driver_sql("PRAGMA journal_mode=WAL")
        try:  # stores created before the index existed; one with duplicate history rows keeps going without
            with self.engine.begin() as c:
                history_once.create(c, checkfirst=True)
        except SQLAlchemyError:
            pass
        self._schema_ready = True
        self._tables_seen |= set(metadata.tables)
        watch = self._file_watch()
        if watch is not None:
            watch.file_id = file_id(watch.path)

    # ---- runs -------------------------------------------------------------------------------------
    @staticmethod
    def new_run_id() -> str:
        return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"

    def create_run(self, kind: str, spec: dict[str, Any], run_id: str | None = None, status: str = "queued") -> str:
        if status not in RUN_STATES:
            raise ValueError(f"status={status!r} not allowed; allowed: {RUN_STATES}")
        run_id = run_id or self.new_run_id()
        now = time.time()
        self.write("create a run", lambda c: c.execute(insert(runs).values(
            run_id=run_id, kind=kind, status=status, message="", spec_json=json.dumps(spec),
            created_at=now, heartbeat_at=now, finished_at=None,
        )))
        return run_id

    def set_status(self, run_id: str, status: str, message: str = "") -> bool:
        """Move a run to `status`; returns whether it moved. Only a queued or running run moves: the first
        terminal state (succeeded, failed, cancelled, timed_out) wins."""
        if status not in RUN_STATES:
            raise ValueError(f"status={status!r} not allowed; allowed: {RUN_STATES}")
        now = time.time()
        values: dict[str, Any] = {"status": status, "heartbeat_at": now}
        if message:
            values["message"] = message
        if status not in ACTIVE_STATES:
            values["finished_at"] = now
        q = update(runs).where(runs.c.run_id == run_id, runs.c.status.in_(ACTIVE_STATES)).values(**values)
        return bool(self.write("set a run's status", lambda c: c.execute(q).rowcount))

    def heartbeat(self, run_id: str, message: str | None = None) -> bool:
        """Touch a running (or queued) run; returns False when the run is no longer active (finished,
        stopped, or marked dead by a reader): its job should stop."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if message is not None:
            values["message"] = message
        q = update(runs).where(runs.c.run_id == run_id, runs.c.status.in_(ACTIVE_STATES)).values(**values)
        return bool(self.write("record a heartbeat", lambda c: c.execute(q).rowcount))

    def get_run(self, run_id: str, now: float | None = None) -> RunRow:
        row = self.read("read a run", "runs", lambda c: c.execute(
            select(runs).where(runs.c.run_id == run_id)).mappings().first(), None)
        if row is None:
            raise KeyError(f"run_id={run_id!r} not found in store {self.display_url}")
        return self._settle_dead([row], now)[0]

    def list_runs(self, kind: str | None = None, limit: int = 200, now: float | None = None) -> list[RunRow]:
        q = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        if kind:
            q = q.where(runs.c.kind == kind)
        rows = self.read("list runs", "runs", lambda c: list(c.execute(q).mappings()), [])
        return self._settle_dead(rows, now)

    def _settle_dead(self, rows: list[Any], now: float | None) -> list[RunRow]:
        """Rows as RunRows; a running run whose heartbeat is stale is marked failed in the store (when the
        store can be written) and returned as failed either way."""
        now = time.time() if now is None else now
        out = []
        for r in rows:
            row = RunRow(
                run_id=r["run_id"], kind=r["kind"], status=r["status"], message=r["message"] or "",
                spec=json.loads(r["spec_json"] or "{}"), created_at=r["created_at"],
                heartbeat_at=r["heartbeat_at"], finished_at=r["finished_at"],
            )
            if row.status == "running" and now - row.heartbeat_at > STALE_AFTER_S:
                msg = (f"no heartbeat for {now - row.heartbeat_at:.0f} s: the job process died (killed, out of "
                       f"memory, or its machine stopped); last message: {row.message or '-'}")
                q = (update(runs).where(runs.c.run_id == row.run_id, runs.c.status == "running",
                                        runs.c.heartbeat_at < now - STALE_AFTER_S)
                     .values(status="failed", message=msg, finished_at=now))
                try:
                    self.write("mark a dead run failed", lambda c, q=q: c.execute(q))
                except StoreError:
                    pass  # a read-only store: report it as failed without recording it
                row = RunRow(row.run_id, row.kind, "failed", msg, row.spec, row.created_at, row.heartbeat_at, now)
            out.append(row)
        return out

    # ---- records ----------------------------------------------------------------------------------
    def add_group(self, rec: GroupRecord) -> None:
        """Commit one finished group at once (its own transaction) and touch the run's heartbeat."""
        now = time.time()

        def fn(c: Connection) -> None:
            c.execute(insert(group_records).values(
                run_id=rec.run_id, schema_version=rec.schema_version, config_label=rec.config_label,
                workload=rec.workload, method=rec.method, k=rec.k, record_json=json.dumps(rec.to_dict()),
                created_at=now,
            ))
            c.execute(update(runs).where(runs.c.run_id == rec.run_id).values(heartbeat_at=now))

        self.write("add a group record", fn)

    def groups(self, run_ids: list[str] | None = None) -> list[GroupRecord]:
        q = select(group_records.c.record_json).order_by(group_records.c.id)
        if run_ids is not None:
            q = q.where(group_records.c.run_id.in_(run_ids))
        raw = self.read("read group records", "group_records", lambda c: [r[0] for r in c.execute(q)], [])
        return [GroupRecord.from_dict(json.loads(x)) for x in raw]

    def add_step_samples(self, run_id: str, samples: list[dict[str, Any]]) -> None:
        if samples:
            self.write("add step-time samples", lambda c: c.execute(
                insert(step_samples), [{"run_id": run_id, "sample_json": json.dumps(s)} for s in samples]))

    def step_samples(self, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        q = select(step_samples.c.sample_json).order_by(step_samples.c.id)
        if run_ids is not None:
            q = q.where(step_samples.c.run_id.in_(run_ids))
        raw = self.read("read step-time samples", "step_samples", lambda c: [r[0] for r in c.execute(q)], [])
        return [json.loads(x) for x in raw]

    # ---- fits -------------------------------------------------------------------------------------
    def save_fit(self, name: str, kind: str, result: dict[str, Any]) -> int:
        q = insert(fits).values(name=name, kind=kind, result_json=json.dumps(result), created_at=time.time())
        return int(self.write("save a fit", lambda c: c.execute(q).inserted_primary_key[0]))

    def fits(self, kind: str | None = None) -> list[dict[str, Any]]:
        q = select(fits).order_by(fits.c.id.desc())
        if kind:
            q = q.where(fits.c.kind == kind)
        rows = self.read("read fits", "fits", lambda c: [dict(r) for r in c.execute(q).mappings()], [])
        return [{"id": r["id"], "name": r["name"], "kind": r["kind"], "created_at": r["created_at"],
                 "result": json.loads(r["result_json"])} for r in rows]

    # ---- nightly history --------------------------------------------------------------------------
    def add_history(self, *, series: str, workload: str, run_id: str, acceptance_length: float, low: float,
                    high: float, regression: bool, message: str = "", created_at: float | None = None) -> bool:
        """Append one point; returns False (and adds nothing) when the series already has this run's
        point for this workload: a repeated `regress` adds no duplicate history."""
        exists = (select(history.c.id).where(history.c.series == series, history.c.workload == workload,
                                             history.c.run_id == run_id).limit(1))
        row = dict(series=series, workload=workload, run_id=run_id, acceptance_length=acceptance_length, low=low,
                   high=high, regression=int(regression), message=message,
                   created_at=time.time() if created_at is None else created_at)

        def fn(c: Connection) -> bool:
            if c.execute(exists).first() is not None:
                return False
            c.execute(insert(history).values(**row))
            return True

        try:
            return self.write("add a history point", fn)
        except StoreError as e:
            if isinstance(e.__cause__, IntegrityError):  # a concurrent writer added the same point first
                return False
            raise

    def history(self, series: str | None = None) -> list[dict[str, Any]]:
        q = select(history).order_by(history.c.created_at, history.c.id)
        if series:
            q = q.where(history.c.series == series)
        return self.read("read the history", "history", lambda c: [dict(r) for r in c.execute(q).mappings()], [])
