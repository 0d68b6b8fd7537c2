"""Quotas of the files a store keeps for shared links (uploaded traffic files, model configs): per store, and per
visitor, so that one visitor's uploads cannot push everyone else's links out.

The rule, applied in the transaction that keeps a file (calibration.storage.kept_traffic,
calibration.storage.kept_models):
1. A file is charged to the visitor who kept it first (its owner); keeping a file the store already holds charges
   nothing. A visitor is the client key of the request (views/sidebar/client.py: the browser's address, or the address a
   trusted proxy reports; an IPv6 address counts by its /64 network, which one host may fill); the store holds a
   hash of it, never the address.
2. A new file larger than the visitor's share, or than the store's quota, is not kept (its link will not open).
3. When the visitor's own files pass their share, their own least recently used files go first (never the one just
   kept) until theirs fit.
4. Then, when all the files pass the store's quota, the least recently used files of anyone go until they fit.
So a visitor holds at most their share: once there, each new file of theirs replaces their own oldest, and they
can push other visitors' files out only while growing to their share. Files kept without a visitor (the CLI, files
kept before visitors had shares) are charged to nobody and go by rule 4 only.

Behind a reverse proxy every visitor has the proxy's address unless the proxy is listed in $SPECPLAN_TRUSTED_PROXIES:
they then share one share.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Table, func, select, text
from sqlalchemy.engine import Connection

# Serialises keeping files on PostgreSQL, so the quota check and its eviction see every committed file
# (pg_advisory_xact_lock key; any constant). SQLite serialises writers itself.
_PG_KEEP_LOCK = 0x5BEC_7AFF
OWNER_CHARS = 32  # hex characters of the SHA-256 of a visitor's key kept as a file's owner
_IPV6_NETWORK_BITS = 64  # one host is commonly given a whole /64 (RFC 4291's interface identifiers)


@dataclass(frozen=True)
class Quota:
    """Bytes of kept files a store holds (`store_bytes`) and one visitor may hold (`visitor_bytes`)."""

    store_bytes: int
    visitor_bytes: int


@dataclass(frozen=True)
class Kept:
    """What keeping a file did: whether it is kept (False: larger than the visitor's share or the store's quota,
    nothing written), the files evicted to make room (least recently used first) and the bytes the store's files
    of this kind take afterwards."""

    kept: bool
    evicted_files: int
    evicted_bytes: int
    stored_bytes: int


def env_bytes(name: str, default: int) -> int:
    """A byte count from the environment variable `name`, else `default`; ValueError naming it when it is not one."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"${name}={raw!r} not allowed: a whole number of bytes >= 0 (0 keeps nothing)")
    return value


def owner_of(visitor: str) -> str:
    """The owner recorded for files a visitor keeps: a hash of their client key (an IPv6 address by its /64
    network); "" for no visitor (charged to nobody)."""
    key = visitor.strip()
    if not key:
        return ""
    try:
        addr = ipaddress.ip_address(key)
    except ValueError:
        addr = None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is None:
        key = str(ipaddress.ip_network(f"{addr}/{_IPV6_NETWORK_BITS}", strict=False))
    elif isinstance(addr, ipaddress.IPv6Address):
        key = str(addr.ipv4_mapped)
    return hashlib.sha256(key.encode()).hexdigest()[:OWNER_CHARS]


def lock_for_keeping(c: Connection, table: Table) -> None:
    """Take the write lock before reading sizes: PostgreSQL an advisory lock; SQLite a no-op write (pysqlite begins
    a transaction only at the first write, so without it the reads could see a file another writer evicts before
    this commit, leaving a link without its file)."""
    if c.dialect.name == "postgresql":
        c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_KEEP_LOCK})
    else:
        c.execute(text(f"UPDATE {table.name} SET last_used_at = last_used_at WHERE 0 = 1"))


def victims(c: Connection, *, key: Column[Any], size: Column[Any], used: Column[Any], owner_col: Column[Any],
            keep: Any, owner: str, quota: Quota) -> tuple[list[Any], int, int]:
    """The files to evict after keeping `keep` for `owner`, by the module's rule: (their keys, the bytes they free,
    the bytes the files take once they are gone)."""
    total = int(c.execute(select(func.coalesce(func.sum(size), 0))).scalar_one())
    out: list[Any] = []
    freed = 0
    if owner:
        held = int(c.execute(select(func.coalesce(func.sum(size), 0)).where(owner_col == owner)).scalar_one())
        if held > quota.visitor_bytes:
            own = select(key, size).where(owner_col == owner, key != keep).order_by(used, key)
            for k, n in c.execute(own).all():
                if held <= quota.visitor_bytes:
                    break
                out.append(k)
                held -= int(n)
                freed += int(n)
    if total - freed > quota.store_bytes:
        gone = set(out)
        for k, n in c.execute(select(key, size).where(key != keep).order_by(used, key)).all():
            if total - freed <= quota.store_bytes:
                break
            if k in gone:
                continue
            out.append(k)
            freed += int(n)
    return out, freed, total - freed
