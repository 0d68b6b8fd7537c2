"""Uploaded traffic files kept in the store for shared links (`profile=<digest>`, views/_state.py).

A link's digest is the SHA-256 of the file's bytes and its reading options (profiles.traffic.options.upload_digest),
as in earlier versions, so their links still open. The bytes are stored once per file (calibration.store's
traffic_files, keyed by the SHA-256 of the bytes alone); each reading of a file is a small row of traffic_links.
The files share a quota (bytes, $SPECPLAN_KEPT_TRAFFIC_MAX_BYTES, 1 GiB by default): keeping a file evicts the least
recently used ones in the same transaction, and a file larger than the quota is not kept (its link will not open).
A profile read for a link marks it used (at most once a minute).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy import delete, func, inspect, select, text, update
from sqlalchemy.engine import Connection

from calibration.store import (
    Store,
    StoreError,
    default_url,
    insert_or_ignore,
    legacy_traffic_profiles,
    traffic_files,
    traffic_links,
)
from profiles.traffic import ParseOptions
from profiles.traffic.options import options_from_json, options_json, upload_digest

MAX_BYTES_ENV = "SPECPLAN_KEPT_TRAFFIC_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
# Serialises keeping files on PostgreSQL, so the quota check and its eviction see every committed file
# (pg_advisory_xact_lock key; any constant). SQLite serialises writers itself.
_PG_TRAFFIC_LOCK = 0x5BEC_7AFF
# A read marks a link used at most this often: a link opened by many sessions writes once a minute.
TOUCH_EVERY_S = 60.0
NAME_CHARS = 255
_STORES_KEPT = 4  # Store objects (one engine each) reused per store URL
_CHECKPOINT_BYTES = 4 * 2**20  # SQLite: a file at least this large is checkpointed at once


class NotKept(ValueError):
    """The upload was not kept for shared links (larger than the store's quota); the message says why, in words."""


@dataclass(frozen=True)
class KeptTraffic:
    """What put() did: whether the file is kept (False: larger than the quota, nothing written), the files evicted
    to make room (least recently used first) and the bytes the store's traffic files take afterwards."""

    kept: bool
    evicted_files: int
    evicted_bytes: int
    stored_bytes: int


def max_bytes() -> int:
    """The quota of kept traffic files per store: $SPECPLAN_KEPT_TRAFFIC_MAX_BYTES, else 1 GiB."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"${MAX_BYTES_ENV}={raw!r} not allowed: a whole number of bytes >= 0 (0 keeps nothing)")
    return value


_stores: OrderedDict[str, Store] = OrderedDict()
_stores_lock = threading.Lock()


def _store() -> Store:
    """The Store for $SPECPLAN_STORE_URL, one per URL in this process (one engine, not one per upload or link)."""
    url = default_url()
    with _stores_lock:
        s = _stores.pop(url, None) or Store(url)
        _stores[url] = s
        while len(_stores) > _STORES_KEPT:
            _stores.popitem(last=False)[1].close()
        return s


# ---- the app's calls ------------------------------------------------------------------------------------------
def keep(name: str, data: bytes, options: ParseOptions | None) -> str:
    """Store the upload (idempotent) and return its link digest. Raises NotKept when the file is larger than the
    quota, and what the store raises when it cannot write."""
    limit = max_bytes()
    if len(data) > limit:
        raise NotKept(f"'{name[:NAME_CHARS]}' is {len(data) / 2**20:,.1f} MiB, more than the {limit / 2**20:,.1f} MiB "
                      f"this server keeps for shared links (${MAX_BYTES_ENV}): a link will not reopen this profile")
    digest = upload_digest(data, options)
    put(_store(), digest, name, data, options_json(options), max_bytes=limit)
    return digest


def kept(digest: str) -> tuple[str, bytes, ParseOptions] | None:
    """(file name, bytes, reading options) of a kept upload, marked used; None when this store does not hold it."""
    s = _store()
    row = get(s, digest)
    if row is None:
        return None
    touch(digest)
    name, data, opts = row
    return name, data, options_from_json(opts)


def touch(digest: str) -> None:
    """Mark a link used (the LRU eviction keeps it longer); a store that cannot be written is left as it is."""
    try:
        mark_used(_store(), digest)
    except Exception:  # noqa: BLE001 - a read-only store still opens its links
        pass


# ---- on a given Store ---------------------------------------------------------------------------------------
def put(store: Store, digest: str, name: str, data: bytes, options_json_text: str, *, max_bytes: int | None = None,
        now: float | None = None) -> KeptTraffic:
    """Keep an upload for the link `digest` (idempotent, also when sessions keep the same file at once: every insert
    is INSERT ... ON CONFLICT DO NOTHING). The bytes are stored once per file whatever the reading options; with
    `max_bytes`, the least recently used files (and their links) are evicted in the same transaction until the
    files fit, and a file larger than `max_bytes` is not kept at all."""
    size = len(data)
    if max_bytes is not None and size > max_bytes:
        return KeptTraffic(kept=False, evicted_files=0, evicted_bytes=0, stored_bytes=stored_bytes(store))
    now = time.time() if now is None else now
    file_digest = hashlib.sha256(data).hexdigest()
    link = dict(digest=digest, file_digest=file_digest, name=name[:NAME_CHARS], options_json=options_json_text,
                created_at=now, last_used_at=now)
    has_file = select(traffic_files.c.file_digest).where(traffic_files.c.file_digest == file_digest)
    total = select(func.coalesce(func.sum(traffic_files.c.size_bytes), 0))
    lru = (select(traffic_files.c.file_digest, traffic_files.c.size_bytes)
           .where(traffic_files.c.file_digest != file_digest)
           .order_by(traffic_files.c.last_used_at, traffic_files.c.file_digest))

    def fn(c: Connection) -> KeptTraffic:
        if c.dialect.name == "postgresql":
            c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_TRAFFIC_LOCK})
        else:  # SQLite: take the write lock before reading (pysqlite begins a transaction only at the first
            # write, so without this the reads below could see a file another writer evicts before this commit,
            # leaving a link without its file)
            c.execute(text("UPDATE traffic_files SET last_used_at = last_used_at WHERE 0"))
        if c.execute(has_file).first() is None:  # the bytes travel only when the file is new
            c.execute(insert_or_ignore(c.dialect.name, traffic_files, ("file_digest",)).values(
                file_digest=file_digest, data=data, size_bytes=size, created_at=now, last_used_at=now))
        c.execute(insert_or_ignore(c.dialect.name, traffic_links, ("digest",)).values(**link))
        _touch(c, digest, file_digest, now)
        stored = int(c.execute(total).scalar_one())
        victims: list[str] = []
        freed = 0
        if max_bytes is not None and stored > max_bytes:
            for fd, fsize in c.execute(lru).all():
                if stored - freed <= max_bytes:
                    break
                victims.append(fd)
                freed += int(fsize)
            for i in range(0, len(victims), 500):
                chunk = victims[i:i + 500]
                c.execute(delete(traffic_links).where(traffic_links.c.file_digest.in_(chunk)))
                c.execute(delete(traffic_files).where(traffic_files.c.file_digest.in_(chunk)))
        return KeptTraffic(kept=True, evicted_files=len(victims), evicted_bytes=freed, stored_bytes=stored - freed)

    _move_legacy(store)
    result = store._write("keep the traffic profile", fn)
    if store.engine.dialect.name == "sqlite" and size >= _CHECKPOINT_BYTES:
        try:  # the file's pages into the database now, and the -wal file back to zero (no second copy on disk)
            with store.engine.connect() as c:
                c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        except Exception:  # noqa: BLE001 - a busy store checkpoints later by itself
            pass
    return result


def get(store: Store, digest: str) -> tuple[str, bytes, str] | None:
    """(name, bytes, options JSON) of a kept profile, or None when the store does not hold it (a store written by an
    earlier version is read too). Reading writes nothing: mark_used does."""
    q = (select(traffic_links.c.name, traffic_links.c.options_json, traffic_files.c.data)
         .join(traffic_files, traffic_files.c.file_digest == traffic_links.c.file_digest)
         .where(traffic_links.c.digest == digest))
    row = store._read("read a traffic profile", "traffic_links", lambda c: c.execute(q).mappings().first(), None)
    if row is None:
        old = select(legacy_traffic_profiles).where(legacy_traffic_profiles.c.digest == digest)
        try:
            row = store._read("read a traffic profile", legacy_traffic_profiles.name,
                              lambda c: c.execute(old).mappings().first(), None)
        except StoreError:  # the old table was moved and dropped since this Store last listed the tables
            store._tables_seen.discard(legacy_traffic_profiles.name)
            row = None
    return None if row is None else (row["name"], bytes(row["data"]), row["options_json"])


def mark_used(store: Store, digest: str, *, now: float | None = None, every_s: float = TOUCH_EVERY_S) -> bool:
    """Mark a link and its file used at `now`, unless the link was marked less than `every_s` ago; returns whether
    the store holds the link."""
    now = time.time() if now is None else now
    q = select(traffic_links.c.file_digest, traffic_links.c.last_used_at).where(traffic_links.c.digest == digest)
    row = store._read("read a traffic profile", "traffic_links", lambda c: c.execute(q).first(), None)
    if row is None and _has_legacy(store):
        _move_legacy(store)
        row = store._read("read a traffic profile", "traffic_links", lambda c: c.execute(q).first(), None)
    if row is None:
        return False
    if now - float(row[1]) >= every_s:
        store._write("mark a traffic profile used", lambda c: _touch(c, digest, row[0], now))
    return True


def stored_bytes(store: Store) -> int:
    """Bytes the store's kept traffic files take (each file once)."""
    q = select(func.coalesce(func.sum(traffic_files.c.size_bytes), 0))
    return int(store._read("read the kept traffic size", "traffic_files", lambda c: c.execute(q).scalar_one(), 0))


def _touch(c: Connection, digest: str, file_digest: str, now: float) -> None:
    c.execute(update(traffic_links).where(traffic_links.c.digest == digest).values(last_used_at=now))
    c.execute(update(traffic_files).where(traffic_files.c.file_digest == file_digest).values(last_used_at=now))


def _has_legacy(store: Store) -> bool:
    return store._read("read the kept traffic tables", legacy_traffic_profiles.name, lambda c: True, False)


def _move_legacy(store: Store) -> None:
    """Move the profiles of the earlier one-table layout (a full copy of the bytes per link) into files and links,
    one transaction per profile, then drop the old table; safe when several processes do it at once. A failed move
    changes nothing that reads need (get() still reads the old table) and is tried again by the next write."""
    old = legacy_traffic_profiles

    def digests(c: Connection) -> list[str]:
        if old.name not in inspect(c).get_table_names():
            return []
        return [r[0] for r in c.execute(select(old.c.digest).order_by(old.c.created_at))]

    def move(c: Connection, digest: str) -> None:
        row = c.execute(select(old).where(old.c.digest == digest)).mappings().first()
        if row is None:  # another process moved it
            return
        data = bytes(row["data"])
        fd = hashlib.sha256(data).hexdigest()
        c.execute(insert_or_ignore(c.dialect.name, traffic_files, ("file_digest",)).values(
            file_digest=fd, data=data, size_bytes=len(data), created_at=row["created_at"],
            last_used_at=row["created_at"]))
        c.execute(insert_or_ignore(c.dialect.name, traffic_links, ("digest",)).values(
            digest=digest, file_digest=fd, name=row["name"], options_json=row["options_json"],
            created_at=row["created_at"], last_used_at=row["created_at"]))
        c.execute(delete(old).where(old.c.digest == digest))

    if not _has_legacy(store):
        return
    try:
        for d in store._write("list the earlier kept traffic profiles", digests):
            store._write("move an earlier kept traffic profile", lambda c, d=d: move(c, d))
        store._write("drop the earlier kept traffic table", lambda c: old.drop(c, checkfirst=True))
    except Exception:  # noqa: BLE001 - reads still find the old table's profiles; the next write tries again
        return
    store._tables_seen.discard(old.name)
