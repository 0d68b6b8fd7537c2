"""Uploaded model configs (a Hugging Face config.json) kept in the store by content hash, so a link that names the
model `config:<digest>` reopens it (views/sidebar/model_box.py registers `resolve` with the catalogue).

A kept config is at most MAX_KEPT_CONFIG_BYTES (a real config.json is 1-60 kB; a larger one is used on this server,
and the page says its link will not reopen it). The configs share a byte quota ($SPECPLAN_KEPT_MODELS_MAX_BYTES,
64 MiB by default), each visitor a quarter of it, with the least-recently-used eviction of
calibration.storage.kept_quota: a new config is always kept (evicting the oldest), never refused because the store is
full. A config read for a link marks it used (at most once a minute per server), and its bytes are checked against the
digest that names them: a config that does not match is removed, and its link opens nothing.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from calibration.storage.kept_quota import Kept, Quota, env_bytes, lock_for_keeping, owner_of, victims
from calibration.storage.store import Store, StoreError, insert_or_ignore, kept_models, shared_store
from planner.types import ModelSpec
from profiles.model_config import DIGEST_CHARS, NAME_PREFIX, ParsedModel, is_config_name, parse_model_config

MAX_KEPT_CONFIG_BYTES = 100_000  # a real config.json is 1-60 kB (profiles.model_config; quantisation lists the most)
MAX_BYTES_ENV = "SPECPLAN_KEPT_MODELS_MAX_BYTES"
DEFAULT_MAX_BYTES = 64 * 2**20  # 670 configs at the largest kept size, thousands of real ones
VISITOR_SHARE_DIVISOR = 4  # one visitor may fill a quarter of the quota (as kept traffic files)
TOUCH_EVERY_S = 60.0  # a config opened by many sessions is marked used once a minute
_CACHE_SIZE = 256  # parsed models held per server (found ones only: a config kept later is found on the next look)
_cache: OrderedDict[tuple[str, str], ParsedModel] = OrderedDict()
_touched: OrderedDict[tuple[str, str], float] = OrderedDict()  # when this server last marked a config used
_lock = threading.Lock()
log = logging.getLogger(__name__)


def quota() -> Quota:
    """The store's quota of kept configs ($SPECPLAN_KEPT_MODELS_MAX_BYTES, else 64 MiB) and one visitor's share."""
    store = env_bytes(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)
    return Quota(store, store // VISITOR_SHARE_DIVISOR)


def keep(data: bytes, *, visitor: str = "", file_name: str = "") -> tuple[ParsedModel, str]:
    """Parse `data` (raises ModelConfigError) and keep it in the store for links, charged to `visitor` (their client
    key, views/sidebar/client.py; "" for none); (the parsed model, "" or why a link will not reopen it). The model is
    usable on this server either way (held in memory by its name). `file_name` (an upload's) names a model whose config
    does not (profiles.model_config.name_from_file); the store keeps the bytes alone, so a link that reopens the
    config on another server names it by its class."""
    parsed = parse_model_config(data, file_name=file_name)
    store = shared_store()
    why = ""
    q = quota()
    share = q.visitor_bytes if visitor else q.store_bytes
    if len(data) > MAX_KEPT_CONFIG_BYTES:
        why = (f"the config is {len(data):,} bytes, more than the {MAX_KEPT_CONFIG_BYTES:,} bytes this server keeps "
               "for a model's link (a real config.json is under 100 kB)")
    elif len(data) > share:
        why = f"the config is {len(data):,} bytes, more than the {share:,} bytes this server keeps ({MAX_BYTES_ENV})"
    else:
        try:
            put(store, parsed.digest[:DIGEST_CHARS], data, quota=q, owner=owner_of(visitor))
        except StoreError as exc:
            why = f"the store could not keep it ({exc})"
    _remember(store.url, parsed.spec.name, parsed)
    return parsed, why


def put(store: Store, digest: str, data: bytes, *, quota: Quota | None = None, owner: str = "",
        now: float | None = None) -> Kept:
    """Keep a config's bytes under `digest` (idempotent; a config kept again is marked used), charged to `owner`
    (calibration.storage.kept_quota.owner_of) when new; with `quota`, configs are evicted in the same transaction by
    calibration.storage.kept_quota's rule, and a new config larger than the share (or the quota) is not kept."""
    now = time.time() if now is None else now
    q = quota or Quota(1 << 62, 1 << 62)
    limit = q.visitor_bytes if owner else q.store_bytes
    row = kept_models.c
    total = select(func.coalesce(func.sum(row.size_bytes), 0))

    def fn(c: Connection) -> Kept:
        lock_for_keeping(c, kept_models)
        if c.execute(select(row.digest).where(row.digest == digest)).first() is not None:
            c.execute(update(kept_models).where(row.digest == digest).values(last_used_at=now))
        elif len(data) > limit:
            return Kept(kept=False, evicted_files=0, evicted_bytes=0, stored_bytes=int(c.execute(total).scalar_one()))
        else:
            c.execute(insert_or_ignore(c.dialect.name, kept_models, ("digest",)).values(
                digest=digest, data=data, created_at=now, size_bytes=len(data), last_used_at=now, owner=owner))
        gone, freed, stored = victims(c, key=row.digest, size=row.size_bytes, used=row.last_used_at,
                                      owner_col=row.owner, keep=digest, owner=owner,
                                      quota=Quota(q.store_bytes, q.visitor_bytes if owner else q.store_bytes))
        for i in range(0, len(gone), 500):
            c.execute(delete(kept_models).where(row.digest.in_(gone[i:i + 500])))
        return Kept(kept=True, evicted_files=len(gone), evicted_bytes=freed, stored_bytes=stored)

    return store.write("keep the model config", fn)


def get(store: Store, digest: str) -> bytes | None:
    """The bytes kept under `digest` (a config's SHA-256 prefix; a GPU spec's behind its kind, `hw-<prefix>`:
    calibration.storage.kept_hardware), or None when the store does not hold it. Bytes whose SHA-256 does not begin with
    that prefix are not the document the name stands for: removed (with a logged warning), and None."""
    q = select(kept_models.c.data).where(kept_models.c.digest == digest)
    row = store.read("read a model config", kept_models.name, lambda c: c.execute(q).first(), None)
    if row is None:
        return None
    data = bytes(row[0])
    hex_part = digest.rpartition("-")[2]
    if hashlib.sha256(data).hexdigest()[:len(hex_part)] != hex_part:
        log.warning("kept model config %s in %s does not match its SHA-256: removed (its links open nothing)",
                    digest, store.display_url)
        try:
            store.write("remove a damaged model config",
                        lambda c: c.execute(delete(kept_models).where(kept_models.c.digest == digest)))
        except StoreError:  # a read-only store: the link opens nothing either way
            pass
        return None
    return data


def mark_used(store: Store, digest: str, *, now: float | None = None) -> None:
    """Mark a kept config used (the least-recently-used eviction keeps it longer)."""
    now = time.time() if now is None else now
    q = update(kept_models).where(kept_models.c.digest == digest).values(last_used_at=now)
    store.write("mark a model config used", lambda c: c.execute(q))


def _remember(url: str, name: str, parsed: ParsedModel) -> None:
    with _lock:
        _cache[(url, name)] = parsed
        _cache.move_to_end((url, name))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def touch(store: Store, digest: str) -> None:
    """Mark what is kept under `digest` used in the store, at most once every TOUCH_EVERY_S from this server; a store
    that cannot be written is left as it is."""
    now = time.time()
    key = (store.url, digest)
    with _lock:
        if now - _touched.get(key, float("-inf")) < TOUCH_EVERY_S:
            return
        _touched[key] = now
        _touched.move_to_end(key)
        while len(_touched) > _CACHE_SIZE:
            _touched.popitem(last=False)
    try:
        mark_used(store, digest, now=now)
    except StoreError:
        pass


def parsed_model(name: str) -> ParsedModel | None:
    """The kept model a `config:<digest>` name refers to; None for other names and for digests this store does not
    hold (or a store that cannot be read: the name is then unknown, as in a store without it)."""
    if not is_config_name(name):
        return None
    from profiles.model_config import ModelConfigError

    store = shared_store()
    with _lock:
        hit = _cache.get((store.url, name))
    if hit is not None:
        touch(store, name[len(NAME_PREFIX):])
        return hit
    try:
        data = get(store, name[len(NAME_PREFIX):])
    except StoreError:
        return None
    if data is None:
        return None
    try:
        parsed = parse_model_config(data)
    except ModelConfigError:  # kept under an older parser that accepted it
        return None
    if parsed.spec.name != name:  # the bytes under this digest are not the ones it names
        return None
    _remember(store.url, name, parsed)
    touch(store, name[len(NAME_PREFIX):])
    return parsed


def resolve(name: str) -> ModelSpec | None:
    """The ModelSpec a kept `config:<digest>` name stands for (None when the store does not keep it); the app adds
    it to the session's catalogue with Catalog.with_models (views/sidebar/model_box.py)."""
    parsed = parsed_model(name)
    return None if parsed is None else parsed.spec
