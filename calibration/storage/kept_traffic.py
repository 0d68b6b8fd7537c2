"""Uploaded traffic files kept in the store for shared links (`profile=<digest>`, views/sidebar/state.py).

A link's digest is the SHA-256 of the file's bytes and its reading options (profiles.traffic.options.upload_digest),
as in earlier versions, so their links still open. The bytes are stored once per file (calibration.storage.store's
traffic_files, keyed by the SHA-256 of the bytes alone); each reading of a file is a small row of traffic_links.
The files share a quota (bytes, $SPECPLAN_KEPT_TRAFFIC_MAX_BYTES, 1 GiB by default), and each visitor a share of it
($SPECPLAN_KEPT_TRAFFIC_PER_VISITOR_MAX_BYTES, a quarter of the quota by default): keeping a file evicts, in the same
transaction, the visitor's own least recently used files while theirs pass their share, then anyone's least recently
used ones while the store passes its quota (calibration.storage.kept_quota states the rule). A file larger than the
share or the quota is not kept (its link will not open). A profile read for a link marks it used (at most once a
minute), and its bytes are checked against their SHA-256: a file that does not match is removed, and its link opens
nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time

from sqlalchemy import delete, func, inspect, select, update
from sqlalchemy.engine import Connection

from calibration.storage.kept_quota import Kept, Quota, env_bytes, lock_for_keeping, owner_of, victims
from calibration.storage.store import (
    Store,
    StoreError,
    insert_or_ignore,
    legacy_traffic_profiles,
    shared_store,
    traffic_files,
    traffic_links,
)
from profiles.traffic import ParseOptions
from profiles.traffic.options import options_from_json, options_json, upload_digest

MAX_BYTES_ENV = "SPECPLAN_KEPT_TRAFFIC_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
PER_VISITOR_ENV = "SPECPLAN_KEPT_TRAFFIC_PER_VISITOR_MAX_BYTES"
VISITOR_SHARE_DIVISOR = 4  # one visitor may fill a quarter of the quota: three others keep room for their links
# A read marks a link used at most this often: a link opened by many sessions writes once a minute.
TOUCH_EVERY_S = 60.0
NAME_CHARS = 255
_CHECKPOINT_BYTES = 4 * 2**20  # SQLite: a file at least this large is checkpointed at once


log = logging.getLogger(__name__)
KeptTraffic = Kept  # what put() did (calibration.storage.kept_quota.Kept)


class NotKept(ValueError):
    """The upload was not kept for shared links (larger than the visitor's share or the store's quota); the message
    says why, in words."""


def max_bytes() -> int:
    """The quota of kept traffic files per store: $SPECPLAN_KEPT_TRAFFIC_MAX_BYTES, else 1 GiB."""
    return env_bytes(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)


def quota() -> Quota:
    """The store's quota and one visitor's share of it ($SPECPLAN_KEPT_TRAFFIC_PER_VISITOR_MAX_BYTES, else a quarter
    of the quota; never more than the quota)."""
    store = max_bytes()
    return Quota(store, min(store, env_bytes(PER_VISITOR_ENV, store // VISITOR_SHARE_DIVISOR)))


# ---- the app's calls ------------------------------------------------------------------------------------------
def keep(name: str, data: bytes, options: ParseOptions | None, *, visitor: str = "") -> str:
    """Store the upload (idempotent) for `visitor` (their client key, views/sidebar/client.py; "" for none) and return
    its link digest. Raises NotKept when the file is larger than the visitor's share or the store's quota, and what the
    store raises when it cannot write."""
    q = quota()
    limit, per, env = ((q.visitor_bytes, " per visitor", PER_VISITOR_ENV) if visitor
                       else (q.store_bytes, "", MAX_BYTES_ENV))
    if len(data) > limit:
        raise NotKept(f"'{name[:NAME_CHARS]}' is {len(data) / 2**20:,.1f} MiB, more than the {limit / 2**20:,.1f} MiB "
                      f"this server keeps{per} for shared links (${env}): a link will not reopen this profile")
    digest = upload_digest(data, options)
    r = put(shared_store(), digest, name, data, options_json(options), max_bytes=q.store_bytes,
            visitor_max_bytes=q.visitor_bytes if visitor else None, owner=owner_of(visitor))
    if not r.kept:  # a new file over the share or quota that put() read: nothing was written
        raise NotKept(f"'{name[:NAME_CHARS]}' was not kept for shared links: a link will not reopen this profile")
    return digest


def kept(digest: str) -> tuple[str, bytes, ParseOptions] | None:
    """(file name, bytes, reading options) of a kept upload, marked used; None when this store does not hold it."""
    s = shared_store()
    row = get(s, digest)
    if row is None:
        return None
    touch(digest)
    name, data, opts = row
    return name, data, options_from_json(opts)


def touch(digest: str) -> None:
    """Mark a link used (the LRU eviction keeps it longer); a store that cannot be written is left as it is."""
    try:
        mark_used(shared_store(), digest)
    except Exception:  # noqa: BLE001 - a read-only store still opens its links
        pass


# ---- on a given Store ---------------------------------------------------------------------------------------
def put(store: Store, digest: str, name: str, data: bytes, options_json_text: str, *, max_bytes: int | None = None,
        visitor_max_bytes: int | None = None, owner: str = "", now: float | None = None) -> KeptTraffic:
    """Keep an upload for the link `digest` (idempotent, also when sessions keep the same file at once: every insert
    is INSERT ... ON CONFLICT DO NOTHING). The bytes are stored once per file whatever the reading options, charged
    to `owner` (calibration.storage.kept_quota.owner_of; "" for nobody) when the file is new. With `max_bytes` (and
    `visitor_max_bytes` for an owner), files are evicted in the same transaction by calibration.storage.kept_quota's
    rule until they fit, and a new file larger than either is not kept at all."""
    size = len(data)
    limits = [x for x in (max_bytes, visitor_max_bytes if owner else None) if x is not None]
    store_quota = max_bytes if max_bytes is not None else 1 << 62  # no quota: nothing is ever evicted for the store
    share = visitor_max_bytes if owner and visitor_max_bytes is not None else store_quota
    now = time.time() if now is None else now
    file_digest = hashlib.sha256(data).hexdigest()
    link = dict(digest=digest, file_digest=file_digest, name=name[:NAME_CHARS], options_json=options_json_text,
                created_at=now, last_used_at=now)
    has_file = select(traffic_files.c.file_digest).where(traffic_files.c.file_digest == file_digest)
    total = select(func.coalesce(func.sum(traffic_files.c.size_bytes), 0))

    def fn(c: Connection) -> KeptTraffic:
        lock_for_keeping(c, traffic_files)
        if c.execute(has_file).first() is None:  # the bytes travel only when the file is new
            if limits and size > min(limits):
                return KeptTraffic(kept=False, evicted_files=0, evicted_bytes=0,
                                   stored_bytes=int(c.execute(total).scalar_one()))
            c.execute(insert_or_ignore(c.dialect.name, traffic_files, ("file_digest",)).values(
                file_digest=file_digest, data=data, size_bytes=size, created_at=now, last_used_at=now, owner=owner))
        c.execute(insert_or_ignore(c.dialect.name, traffic_links, ("digest",)).values(**link))
        _touch(c, digest, file_digest, now)
        gone, freed, stored = victims(c, key=traffic_files.c.file_digest, size=traffic_files.c.size_bytes,
                                      used=traffic_files.c.last_used_at, owner_col=traffic_files.c.owner,
                                      keep=file_digest, owner=owner, quota=Quota(store_quota, share))
        _remove(c, gone)
        return KeptTraffic(kept=True, evicted_files=len(gone), evicted_bytes=freed, stored_bytes=stored)

    _move_legacy(store)
    result = store.write("keep the traffic profile", fn)
    if size >= _CHECKPOINT_BYTES:  # the file's pages into the database now, and the -wal back to zero
        store.checkpoint()
    return result


def _remove(c: Connection, file_digests: list[str]) -> None:
    """Remove files and every link that reads them."""
    for i in range(0, len(file_digests), 500):
        chunk = file_digests[i:i + 500]
        c.execute(delete(traffic_links).where(traffic_links.c.file_digest.in_(chunk)))
        c.execute(delete(traffic_files).where(traffic_files.c.file_digest.in_(chunk)))


def get(store: Store, digest: str) -> tuple[str, bytes, str] | None:
    """(name, bytes, options JSON) of a kept profile, or None when the store does not hold it (a store written by an
    earlier version is read too). Reading writes nothing: mark_used does."""
    q = (select(traffic_links.c.name, traffic_links.c.options_json, traffic_files.c.data, traffic_files.c.file_digest)
         .join(traffic_files, traffic_files.c.file_digest == traffic_links.c.file_digest)
         .where(traffic_links.c.digest == digest))
    row = store.read("read a traffic profile", "traffic_links", lambda c: c.execute(q).mappings().first(), None)
    if row is not None and hashlib.sha256(row["data"]).hexdigest() != row["file_digest"]:
        log.warning("kept traffic file %s in %s does not match its SHA-256: removed (its links open nothing)",
                    row["file_digest"][:12], store.display_url)
        try:
            store.write("remove a damaged traffic file", lambda c: _remove(c, [row["file_digest"]]))
        except StoreError:  # a read-only store: the link opens nothing either way
            pass
        return None
    if row is None:
        old = select(legacy_traffic_profiles).where(legacy_traffic_profiles.c.digest == digest)
        try:
            row = store.read("read a traffic profile", legacy_traffic_profiles.name,
                             lambda c: c.execute(old).mappings().first(), None)
        except StoreError:  # the old table was moved and dropped since this Store last listed the tables
            store.forget_table(legacy_traffic_profiles.name)
            row = None
    return None if row is None else (row["name"], bytes(row["data"]), row["options_json"])


def mark_used(store: Store, digest: str, *, now: float | None = None, every_s: float = TOUCH_EVERY_S) -> bool:
    """Mark a link and its file used at `now`, unless the link was marked less than `every_s` ago; returns whether
    the store holds the link."""
    now = time.time() if now is None else now
    q = select(traffic_links.c.file_digest, traffic_links.c.last_used_at).where(traffic_links.c.digest == digest)
    row = store.read("read a traffic profile", "traffic_links", lambda c: c.execute(q).first(), None)
    if row is None and _has_legacy(store):
        _move_legacy(store)
        row = store.read("read a traffic profile", "traffic_links", lambda c: c.execute(q).first(), None)
    if row is None:
        return False
    if now - float(row[1]) >= every_s:
        store.write("mark a traffic profile used", lambda c: _touch(c, digest, row[0], now))
    return True


def stored_bytes(store: Store) -> int:
    """Bytes the store's kept traffic files take (each file once)."""
    q = select(func.coalesce(func.sum(traffic_files.c.size_bytes), 0))
    return int(store.read("read the kept traffic size", "traffic_files", lambda c: c.execute(q).scalar_one(), 0))


def _touch(c: Connection, digest: str, file_digest: str, now: float) -> None:
    c.execute(update(traffic_links).where(traffic_links.c.digest == digest).values(last_used_at=now))
    c.execute(update(traffic_files).where(traffic_files.c.file_digest == file_digest).values(last_used_at=now))


def _has_legacy(store: Store) -> bool:
    return store.read("read the kept traffic tables", legacy_traffic_profiles.name, lambda c: True, False)


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
            last_used_at=row["created_at"], owner=""))
        c.execute(insert_or_ignore(c.dialect.name, traffic_links, ("digest",)).values(
            digest=digest, file_digest=fd, name=row["name"], options_json=row["options_json"],
            created_at=row["created_at"], last_used_at=row["created_at"]))
        c.execute(delete(old).where(old.c.digest == digest))

    if not _has_legacy(store):
        return
    try:
        for d in store.write("list the earlier kept traffic profiles", digests):
            store.write("move an earlier kept traffic profile", lambda c, d=d: move(c, d))
        store.write("drop the earlier kept traffic table", lambda c: old.drop(c, checkfirst=True))
    except Exception:  # noqa: BLE001 - reads still find the old table's profiles; the next write tries again
        return
    store.forget_table(old.name)
