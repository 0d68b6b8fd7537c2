"""Uploaded traffic profiles kept by content hash (shared links), on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib

from calibration.store import Store


def test_a_kept_profile_comes_back_byte_for_byte_and_once(any_store: Store):
    data = bytes(range(256)) * 40  # binary-safe (a Parquet or xlsx upload)
    digest = hashlib.sha256(data).hexdigest()
    assert any_store.get_traffic(digest) is None
    any_store.put_traffic(digest, "trace.parquet", data, '{"delimiter": ""}')
    any_store.put_traffic(digest, "trace.parquet", data, '{"delimiter": ""}')  # idempotent
    name, back, opts = any_store.get_traffic(digest)
    assert (name, back, opts) == ("trace.parquet", data, '{"delimiter": ""}')
    assert Store(any_store.url).get_traffic("f" * 64) is None
