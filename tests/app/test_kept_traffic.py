"""Uploads kept for shared links: two sessions keeping the same file at once both succeed (one row)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from calibration.storage import kept_traffic
from calibration.storage.store import Store
from profiles.traffic.options import options_json, upload_digest

DATA = (b"timestamp,workload,prompt_tokens,output_tokens\n"
        + b"".join(f"2026-11-01T00:{i:02d}:00Z,chat,{900 + i},{200 + i}\n".encode() for i in range(30)))


def _db_path() -> str:
    return os.environ["SPECPLAN_STORE_URL"].removeprefix("sqlite:///")


def _rows(path: str) -> int:
    with sqlite3.connect(path) as c:
        return c.execute("SELECT count(*) FROM traffic_links").fetchone()[0]


def test_many_sessions_keep_the_same_upload_at_once():
    kept_traffic.put(Store(), "0" * 64, "warm.csv", b"x", "{}")  # the schema exists: the race is on the row
    barrier = threading.Barrier(8)

    def one(_):
        barrier.wait()
        return kept_traffic.keep("same.csv", DATA, None)

    with ThreadPoolExecutor(8) as pool:
        digests = list(pool.map(one, range(8)))
    assert digests == [upload_digest(DATA, None)] * 8
    assert _rows(_db_path()) == 2
    name, data, _opts = kept_traffic.kept(digests[0])
    assert (name, data) == ("same.csv", DATA)


def test_keeping_waits_for_a_session_that_is_inserting_the_same_row():
    """Another session has inserted the same digest but not committed yet: a check-then-insert sees no row, then
    collides on the primary key once the other commits ("UNIQUE constraint failed"); the store's insert must not."""
    kept_traffic.put(Store(), "0" * 64, "warm.csv", b"x", "{}")
    digest = upload_digest(DATA, None)
    other = sqlite3.connect(_db_path(), timeout=30, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    now = time.time()
    other.execute("INSERT INTO traffic_files (file_digest, data, size_bytes, created_at, last_used_at) "
                  "VALUES (?, ?, ?, ?, ?)", (hashlib.sha256(DATA).hexdigest(), DATA, len(DATA), now, now))
    other.execute("INSERT INTO traffic_links (digest, file_digest, name, options_json, created_at, last_used_at) "
                  "VALUES (?, ?, ?, ?, ?, ?)", (digest, hashlib.sha256(DATA).hexdigest(), "same.csv",
                                                 options_json(None), now, now))
    result: dict = {}

    def keep():
        try:
            result["digest"] = kept_traffic.keep("same.csv", DATA, None)
        except Exception as exc:  # noqa: BLE001 - the test reports what the store raised
            result["error"] = exc

    t = threading.Thread(target=keep)
    t.start()
    time.sleep(1.0)  # the keeper has looked for the row and is now waiting for the write lock
    other.execute("COMMIT")
    other.close()
    t.join(timeout=60)
    assert "error" not in result, result.get("error")
    assert result["digest"] == digest
    assert _rows(_db_path()) == 2
