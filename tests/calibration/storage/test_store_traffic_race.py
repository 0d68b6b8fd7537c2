"""Sessions in several server processes keeping uploads into one real SQLite file at once: the same file kept by all
of them is one file row and one link (no "UNIQUE constraint failed"), and different files kept at once under a
quota leave the store within it."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
from pathlib import Path

from sqlalchemy import create_engine, text

from calibration.storage import kept_traffic as K
from calibration.storage.store import Store
from profiles.traffic.options import upload_digest

SAME = b"timestamp,workload,prompt_tokens,output_tokens\n" + b"2026-11-01T00:00:00Z,chat,900,200\n" * 2000


def _keep_same(url: str, start, out) -> None:
    s = Store(url)
    start.wait(30)
    try:
        K.put(s, upload_digest(SAME, None), "same.csv", SAME, "{}", max_bytes=10**9)
        out.put("ok")
    except Exception as exc:  # noqa: BLE001 - the parent reports what the store raised
        out.put(f"{type(exc).__name__}: {exc}")


def _keep_many(url: str, worker: int, start, out) -> None:
    s = Store(url)
    start.wait(30)
    try:
        for i in range(5):
            data = (f"{worker}-{i}:".encode() + b"x" * 1000)[:1000]
            K.put(s, upload_digest(data, None), f"w{worker}-{i}.csv", data, "{}", max_bytes=4000)
        out.put("ok")
    except Exception as exc:  # noqa: BLE001
        out.put(f"{type(exc).__name__}: {exc}")


def _run(target, args_per_proc: list[tuple]) -> list[str]:
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(len(args_per_proc)), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a[:1], *a[1:], start, out)) for a in args_per_proc]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    return results


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_processes_keeping_the_same_file_at_once_all_succeed(tmp_path: Path):
    path = tmp_path / "cal.db"
    url = f"sqlite:///{path}"
    assert _run(_keep_same, [(url,)] * 4) == ["ok"] * 4  # the first write (and the schema) raced too
    assert (_count(path, "traffic_files"), _count(path, "traffic_links")) == (1, 1)
    assert K.get(Store(url), upload_digest(SAME, None))[1] == SAME


def test_threads_keeping_files_at_once_through_one_store(any_store_url: str):
    """Eight threads keep the same file while eight keep files of their own under a quota of four: no error, the
    same file once, and the store within its quota (SQLite, and PostgreSQL's advisory lock)."""
    s = Store(any_store_url)
    barrier, errors = threading.Barrier(16), []

    def one(i: int) -> None:
        data = SAME if i < 8 else (f"own {i}:".encode() + b"y" * len(SAME))[:len(SAME)]
        barrier.wait()
        try:
            K.put(s, upload_digest(data, None), f"{i}.csv", data, "{}", max_bytes=4 * len(SAME))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert K.stored_bytes(s) == 4 * len(SAME)  # nine files kept, the five least recently used evicted
    eng = create_engine(any_store_url)
    try:
        with eng.connect() as c:  # each kept file with its one link, none left without its file
            assert [c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                    for t in ("traffic_files", "traffic_links")] == [4, 4]
    finally:
        eng.dispose()


def test_processes_keeping_different_files_stay_within_the_quota(tmp_path: Path):
    path = tmp_path / "cal.db"
    url = f"sqlite:///{path}"
    assert _run(_keep_many, [(url, w) for w in range(4)]) == ["ok"] * 4
    assert K.stored_bytes(Store(url)) == 4000  # 20 files of 1000 bytes kept, the 16 least recently used evicted
    assert (_count(path, "traffic_files"), _count(path, "traffic_links")) == (4, 4)
