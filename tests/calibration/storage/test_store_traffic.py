"""Uploaded traffic profiles kept for shared links, on SQLite and PostgreSQL: the bytes once per file whatever the
reading options, a per-store quota with least-recently-used eviction, and stores written by the earlier one-table
layout still opening their links."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import Column, Float, LargeBinary, MetaData, String, Table, Text, create_engine, inspect, text

from calibration.storage import kept_traffic as K
from calibration.storage.store import Store


def _file(i: int, size: int = 1000) -> bytes:
    return (f"file {i}:".encode() + bytes(range(256)) * (size // 256 + 1))[:size]


def _digest(data: bytes, opts: str) -> str:
    """A link's digest as every version computed it: SHA-256 of the bytes, a zero byte and the options JSON."""
    return hashlib.sha256(data + b"\0" + opts.encode()).hexdigest()


def _count(url: str, table: str) -> int:
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return int(c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        eng.dispose()


def test_a_kept_profile_comes_back_byte_for_byte_and_once(any_store: Store):
    data = bytes(range(256)) * 40  # binary-safe (a Parquet or xlsx upload)
    digest = _digest(data, '{"delimiter": ""}')
    assert K.get(any_store, digest) is None
    assert K.put(any_store, digest, "trace.parquet", data, '{"delimiter": ""}').kept
    K.put(any_store, digest, "trace.parquet", data, '{"delimiter": ""}')  # idempotent
    assert K.get(any_store, digest) == ("trace.parquet", data, '{"delimiter": ""}')
    assert K.get(Store(any_store.url), "f" * 64) is None
    assert K.stored_bytes(any_store) == len(data)


def test_each_reading_of_a_file_adds_a_link_not_another_copy(any_store: Store):
    data = _file(1, 50_000)
    readings = [json.dumps({"delimiter": d}) for d in ("", ";", "|")]
    for opts in readings:
        K.put(any_store, _digest(data, opts), "trace.csv", data, opts)
    assert K.stored_bytes(any_store) == 50_000
    assert _count(any_store.url, "traffic_files") == 1
    assert _count(any_store.url, "traffic_links") == 3
    for opts in readings:  # each link reopens its own reading of the one file
        assert K.get(any_store, _digest(data, opts)) == ("trace.csv", data, opts)


def test_the_least_recently_used_files_go_when_the_quota_is_passed(any_store: Store):
    files = {i: _file(i) for i in range(4)}
    links = {i: _digest(f, "{}") for i, f in files.items()}
    for i in range(3):
        r = K.put(any_store, links[i], f"f{i}.csv", files[i], "{}", max_bytes=3000, now=100.0 + i)
        assert (r.kept, r.evicted_files, r.stored_bytes) == (True, 0, 1000 * (i + 1))
    # file 0 is opened again (a shared link): file 1 is now the least recently used
    assert K.mark_used(any_store, links[0], now=200.0, every_s=0.0)
    r = K.put(any_store, links[3], "f3.csv", files[3], "{}", max_bytes=3000, now=300.0)
    assert (r.kept, r.evicted_files, r.evicted_bytes, r.stored_bytes) == (True, 1, 1000, 3000)
    assert K.get(any_store, links[1]) is None
    assert [K.get(any_store, links[i]) is not None for i in (0, 2, 3)] == [True, True, True]
    assert _count(any_store.url, "traffic_links") == 3  # the evicted file's links went with it
    # a smaller quota: the two least recently used go, the file just kept stays
    r = K.put(any_store, links[3], "f3.csv", files[3], "{}", max_bytes=1500, now=400.0)
    assert (r.evicted_files, r.stored_bytes) == (2, 1000)
    assert [K.get(any_store, links[i]) is not None for i in range(4)] == [False, False, False, True]


def test_a_read_marks_a_link_used_at_most_once_a_minute(any_store: Store):
    a, b, c = _file(1), _file(2), _file(3)
    K.put(any_store, _digest(a, "{}"), "a.csv", a, "{}", max_bytes=2000, now=1000.0)
    K.put(any_store, _digest(b, "{}"), "b.csv", b, "{}", max_bytes=2000, now=1001.0)
    K.mark_used(any_store, _digest(a, "{}"), now=1030.0)  # 30 s after it was kept: not written
    K.put(any_store, _digest(c, "{}"), "c.csv", c, "{}", max_bytes=2000, now=1040.0)
    assert K.get(any_store, _digest(a, "{}")) is None  # still the least recently used
    K.mark_used(any_store, _digest(b, "{}"), now=1100.0)  # 99 s: written
    K.put(any_store, _digest(a, "{}"), "a.csv", a, "{}", max_bytes=2000, now=1101.0)
    assert K.get(any_store, _digest(b, "{}")) is not None
    assert K.get(any_store, _digest(c, "{}")) is None
    assert not K.mark_used(any_store, "e" * 64)


def test_a_file_larger_than_the_quota_is_not_kept_and_the_user_is_told(any_store: Store, monkeypatch):
    small = _file(1)
    K.put(any_store, _digest(small, "{}"), "small.csv", small, "{}", max_bytes=1500)
    big = _file(2, 2000)
    r = K.put(any_store, _digest(big, "{}"), "big.csv", big, "{}", max_bytes=1500)
    assert (r.kept, r.evicted_files, r.stored_bytes) == (False, 0, 1000)
    assert K.get(any_store, _digest(big, "{}")) is None
    assert K.get(any_store, _digest(small, "{}")) is not None  # nothing was evicted for it

    monkeypatch.setenv("SPECPLAN_STORE_URL", any_store.url)
    monkeypatch.setenv(K.MAX_BYTES_ENV, "1500")
    with pytest.raises(K.NotKept, match=r"'big.csv' is 0.0 MiB, more than .*SPECPLAN_KEPT_TRAFFIC_MAX_BYTES.*link"):
        K.keep("big.csv", big, None)
    assert K.kept(_digest(big, '{"columns": []}')) is None
    monkeypatch.setenv(K.MAX_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match=r"SPECPLAN_KEPT_TRAFFIC_MAX_BYTES='lots' not allowed: a whole number"):
        K.keep("small.csv", small, None)


def test_the_default_quota_is_one_gib(monkeypatch):
    monkeypatch.delenv(K.MAX_BYTES_ENV, raising=False)
    assert K.max_bytes() == 2**30


def _old_store(url: str, rows: list[tuple[str, str, bytes, str]]) -> None:
    """A store as the earlier version wrote it: a traffic_profiles table holding each link's full bytes."""
    md = MetaData()
    old = Table("traffic_profiles", md, Column("digest", String(64), primary_key=True),
                Column("name", String(255), nullable=False), Column("data", LargeBinary, nullable=False),
                Column("options_json", Text, nullable=False), Column("created_at", Float, nullable=False))
    eng = create_engine(url)
    try:
        with eng.begin() as c:
            md.create_all(c)
            c.execute(old.insert(), [dict(digest=d, name=n, data=b, options_json=o, created_at=1.0 + i)
                                     for i, (d, n, b, o) in enumerate(rows)])
    finally:
        eng.dispose()


def test_a_store_written_by_the_earlier_version_still_opens_its_links(any_store_url: str):
    data = _file(7, 20_000)
    rows = [(_digest(data, o), "trace.csv", data, o) for o in ('{"delimiter": ""}', '{"delimiter": ";"}')]
    _old_store(any_store_url, rows)
    s = Store(any_store_url)
    for d, n, b, o in rows:  # read before anything is written: straight from the old table
        assert K.get(s, d) == (n, b, o)
    other = _file(8)
    K.put(s, _digest(other, "{}"), "other.csv", other, "{}")  # the first write moves the old table
    fresh = Store(any_store_url)
    for d, n, b, o in rows:
        assert K.get(fresh, d) == (n, b, o)
    assert K.stored_bytes(fresh) == 20_000 + 1000  # the two copies became one
    eng = create_engine(any_store_url)
    try:
        with eng.connect() as c:
            assert "traffic_profiles" not in inspect(c).get_table_names()
    finally:
        eng.dispose()


def test_opening_a_link_moves_an_earlier_store(any_store_url: str):
    data = _file(9)
    _old_store(any_store_url, [(_digest(data, "{}"), "t.csv", data, "{}")])
    s = Store(any_store_url)
    assert K.mark_used(s, _digest(data, "{}"), now=10_000.0)
    assert K.get(Store(any_store_url), _digest(data, "{}")) == ("t.csv", data, "{}")
    assert _count(any_store_url, "traffic_links") == 1
