"""Uploaded traffic files kept in the store by a digest of their bytes and reading options, so a shared link
(`profile=<digest>`) reopens the profile the sender saw."""

from __future__ import annotations

from profiles.traffic import ParseOptions
from profiles.traffic.options import options_from_json, options_json, upload_digest


def keep(name: str, data: bytes, options: ParseOptions | None) -> str:
    """Store the upload (idempotent) and return its digest; raises what the store raises when it cannot."""
    from calibration.store import Store

    digest = upload_digest(data, options)
    Store().put_traffic(digest, name, data, options_json(options))
    return digest


def kept(digest: str) -> tuple[str, bytes, ParseOptions] | None:
    """(file name, bytes, reading options) of a kept upload; None when this store does not hold it."""
    from calibration.store import Store

    row = Store().get_traffic(digest)
    if row is None:
        return None
    name, data, opts = row
    return name, data, options_from_json(opts)
