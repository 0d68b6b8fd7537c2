"""Files kept for shared links (traffic files and model configs), on SQLite and PostgreSQL: each visitor's share of
the store's quota (calibration.storage.kept_quota's rule), bytes checked against their SHA-256 on read, and stores
written by an earlier version (no owner, size or last-use columns) gaining them on the first write."""

from __future__ import annotations

import hashlib
import logging

import pytest
from sqlalchemy import create_engine, text

from calibration.storage import kept_models as M
from calibration.storage import kept_traffic as K
from calibration.storage.kept_quota import Quota, owner_of
from calibration.storage.store import Store


def _file(i: int, size: int = 94) -> bytes:
    return (f"file {i}:".encode() + bytes(range(256)) * (size // 256 + 1))[:size]


def _link(data: bytes) -> str:
    return hashlib.sha256(data + b"\0{}").hexdigest()


def _keep(store: Store, data: bytes, visitor: str, now: float) -> K.KeptTraffic:
    return K.put(store, _link(data), "t.csv", data, "{}", max_bytes=1024, visitor_max_bytes=256,
                 owner=owner_of(visitor), now=now)


def _sql(url: str, sql: str) -> list[tuple]:
    eng = create_engine(url)
    try:
        with eng.begin() as c:
            res = c.execute(text(sql))
            return [tuple(r) for r in res] if res.returns_rows else []
    finally:
        eng.dispose()


def test_one_visitor_filling_the_store_evicts_only_their_own_files(any_store: Store):
    """The issue's case scaled down: eleven 94-byte uploads by one visitor into a 1,024-byte quota (11 x 94 MiB into
    1 GiB). The visitor keeps at most their share (256 bytes: two files), and every other visitor's profile stays."""
    others = {f"10.0.0.{i}": _file(100 + i) for i in range(4)}
    for t, (who, data) in enumerate(others.items()):
        assert _keep(any_store, data, who, now=10.0 + t).kept
    results = [_keep(any_store, _file(i), "203.0.113.7", now=100.0 + i) for i in range(11)]
    assert all(r.kept for r in results)
    assert [r.evicted_files for r in results] == [0, 0] + [1] * 9  # from the third on, each replaces their oldest
    assert all(K.get(any_store, _link(d)) is not None for d in others.values())
    assert [K.get(any_store, _link(_file(i))) is not None for i in range(11)] == [False] * 9 + [True] * 2
    assert K.stored_bytes(any_store) == 6 * 94


def test_the_store_quota_evicts_anyone_least_recently_used_when_the_visitor_is_within_their_share(any_store: Store):
    """Five visitors each within their share pass the store's quota together: the least recently used file goes,
    whoever kept it."""
    quota = dict(max_bytes=400, visitor_max_bytes=200)
    files = [_file(i, 100) for i in range(5)]
    for i, data in enumerate(files):
        r = K.put(any_store, _link(data), f"{i}.csv", data, "{}", owner=owner_of(f"192.0.2.{i}"), now=1.0 + i,
                  **quota)
        assert r.kept and r.evicted_files == (1 if i == 4 else 0)
    assert [K.get(any_store, _link(d)) is not None for d in files] == [False, True, True, True, True]


def test_a_file_larger_than_the_visitors_share_is_not_kept(any_store: Store, monkeypatch):
    small = _file(1)
    _keep(any_store, small, "198.51.100.1", now=1.0)
    big = _file(2, 300)
    r = _keep(any_store, big, "198.51.100.1", now=2.0)
    assert (r.kept, r.evicted_files, r.stored_bytes) == (False, 0, 94)
    assert K.get(any_store, _link(big)) is None and K.get(any_store, _link(small)) is not None
    monkeypatch.setenv("SPECPLAN_STORE_URL", any_store.url)
    monkeypatch.setenv(K.MAX_BYTES_ENV, "1200")
    assert K.quota() == Quota(1200, 300)  # a quarter of the quota by default
    monkeypatch.setenv(K.PER_VISITOR_ENV, "250")
    with pytest.raises(K.NotKept, match=rf"'big.csv' is 0.0 MiB, more than the 0.0 MiB .*\${K.PER_VISITOR_ENV}"):
        K.keep("big.csv", big, None, visitor="198.51.100.1")
    assert K.kept(K.keep("big.csv", big, None)) is not None  # no visitor (the CLI): the store's quota alone


def test_an_ipv6_visitor_counts_by_its_network():
    assert owner_of("2001:db8:1:2::1") == owner_of("2001:db8:1:2:ffff::9")
    assert owner_of("2001:db8:1:2::1") != owner_of("2001:db8:1:3::1")
    assert owner_of("::ffff:192.0.2.1") == owner_of("192.0.2.1")
    assert owner_of("") == "" and len(owner_of("unknown")) == 32 and "192.0.2.1" not in owner_of("192.0.2.1")


def test_traffic_bytes_that_do_not_match_their_hash_are_removed_on_read(any_store: Store, caplog):
    data = _file(5, 2000)
    K.put(any_store, _link(data), "t.csv", data, "{}")
    K.put(any_store, hashlib.sha256(data + b"\0other").hexdigest(), "t.csv", data, "other")
    eng = create_engine(any_store.url)
    try:
        with eng.begin() as c:  # a disk error, or an edit by hand
            c.execute(text("UPDATE traffic_files SET data = :d"), {"d": data[:-1] + b"!"})
    finally:
        eng.dispose()
    with caplog.at_level(logging.WARNING, logger="calibration.storage.kept_traffic"):
        assert K.get(any_store, _link(data)) is None
    assert "does not match its SHA-256: removed" in caplog.text
    assert _sql(any_store.url, "SELECT count(*) FROM traffic_files")[0][0] == 0
    assert _sql(any_store.url, "SELECT count(*) FROM traffic_links")[0][0] == 0  # every reading of it went too


def test_model_configs_share_a_byte_quota_and_a_new_one_always_keeps(any_store: Store):
    configs = [b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80) for i in range(6)]
    digests = [hashlib.sha256(d).hexdigest()[:16] for d in configs]
    size = len(configs[0])
    quota = Quota(store_bytes=3 * size, visitor_bytes=2 * size)
    for i, (d, data) in enumerate(zip(digests, configs, strict=True)):
        r = M.put(any_store, d, data, quota=quota, owner=owner_of(f"192.0.2.{i % 2}"), now=10.0 + i)
        assert r.kept
    # visitors .0 and .1 alternate; the store holds three: the three most recently kept
    assert [M.get(any_store, d) is not None for d in digests] == [False, False, False, True, True, True]
    M.mark_used(any_store, digests[3], now=100.0)  # opened by a link: no longer the oldest
    extra = b'{"n": 9, "pad": "%s"}' % (b"y" * 80)  # the same size
    M.put(any_store, hashlib.sha256(extra).hexdigest()[:16], extra, quota=quota, owner=owner_of("192.0.2.9"),
          now=101.0)
    assert [M.get(any_store, d) is not None for d in digests[3:]] == [True, False, True]


def test_a_model_config_that_does_not_match_its_digest_is_removed_on_read(any_store: Store, caplog):
    data = b'{"hidden_size": 64}'
    digest = hashlib.sha256(data).hexdigest()[:16]
    M.put(any_store, digest, data)
    M.put(any_store, "00000000000000ab", data)
    assert M.get(any_store, digest) == data
    with caplog.at_level(logging.WARNING, logger="calibration.storage.kept_models"):
        assert M.get(any_store, "00000000000000ab") is None
    assert "00000000000000ab" in caplog.text and "removed" in caplog.text
    assert _sql(any_store.url, "SELECT digest FROM kept_models") == [(digest,)]
    # a GPU spec (calibration.storage.kept_hardware) is checked by the hex after its kind
    spec = b"label: My GPU"
    M.put(any_store, "hw-" + hashlib.sha256(spec).hexdigest()[:12], spec)
    M.put(any_store, "hw-0123456789ab", spec)
    assert M.get(any_store, "hw-" + hashlib.sha256(spec).hexdigest()[:12]) == spec
    assert M.get(any_store, "hw-0123456789ab") is None


def test_a_store_of_the_earlier_version_gains_the_new_columns_on_the_first_write(any_store_url: str):
    """kept_models without sizes, last use or owner, traffic_files without owner (as earlier versions wrote them):
    the first write adds and fills the columns; the earlier rows are read, counted and evicted like the new ones."""
    old = b'{"old": true, "pad": "' + b"o" * 100 + b'"}'
    old_digest = hashlib.sha256(old).hexdigest()[:16]
    _sql(any_store_url, "CREATE TABLE kept_models (digest VARCHAR(64) PRIMARY KEY, data BYTEA NOT NULL, "
                        "created_at FLOAT NOT NULL)".replace("BYTEA", "BLOB" if "sqlite" in any_store_url else "BYTEA"))
    eng = create_engine(any_store_url)
    try:
        with eng.begin() as c:
            c.execute(text("INSERT INTO kept_models VALUES (:d, :b, 5.0)"), {"d": old_digest, "b": old})
    finally:
        eng.dispose()
    s = Store(any_store_url)
    assert M.get(s, old_digest) == old  # read before anything is written
    new = b'{"new": true}'
    r = M.put(s, hashlib.sha256(new).hexdigest()[:16], new, quota=Quota(len(old) + len(new), 10_000), now=10.0)
    assert (r.kept, r.evicted_files, r.stored_bytes) == (True, 0, len(old) + len(new))
    assert _sql(any_store_url, "SELECT size_bytes, last_used_at, owner FROM kept_models WHERE digest = "
                               f"'{old_digest}'") == [(len(old), 5.0, "")]
    newer = b'{"newer": true}'
    r = M.put(Store(any_store_url), hashlib.sha256(newer).hexdigest()[:16], newer,
              quota=Quota(len(old) + len(new), 10_000), now=20.0)
    assert (r.evicted_files, r.evicted_bytes) == (1, len(old))  # the earlier row was the least recently used


def test_traffic_files_of_the_earlier_version_are_charged_to_nobody(any_store_url: str):
    blob = "BLOB" if "sqlite" in any_store_url else "BYTEA"
    _sql(any_store_url, f"CREATE TABLE traffic_files (file_digest VARCHAR(64) PRIMARY KEY, data {blob} NOT NULL, "
                        "size_bytes BIGINT NOT NULL, created_at FLOAT NOT NULL, last_used_at FLOAT NOT NULL)")
    old = _file(50, 200)
    eng = create_engine(any_store_url)
    try:
        with eng.begin() as c:
            c.execute(text("INSERT INTO traffic_files VALUES (:f, :d, 200, 1.0, 1.0)"),
                      {"f": hashlib.sha256(old).hexdigest(), "d": old})
    finally:
        eng.dispose()
    s = Store(any_store_url)
    mine = [_file(i, 100) for i in range(3)]
    for i, data in enumerate(mine):  # one visitor, share 200: their own oldest go, never the earlier file
        K.put(s, _link(data), "m.csv", data, "{}", max_bytes=10_000, visitor_max_bytes=200,
              owner=owner_of("192.0.2.1"), now=10.0 + i)
    assert _sql(any_store_url, "SELECT owner, size_bytes FROM traffic_files ORDER BY last_used_at") == [
        ("", 200), (owner_of("192.0.2.1"), 100), (owner_of("192.0.2.1"), 100)]
