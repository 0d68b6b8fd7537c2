"""Users' GPU specs (profiles/hardware_spec.py) kept in the store by content hash, so a link that names the GPU
`spec:<digest>` reopens it (views/sidebar/hardware_box.py). The bytes sit in the kept-configs table under `hw-<digest>`
(calibration.storage.kept_models: one table of uploaded documents shared with the model configs, under the same byte
quota, visitor shares and least-recently-used eviction, and checked against their SHA-256 when read)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from planner.types import Hardware
from profiles.hardware_spec import SPEC_PREFIX, HardwareSpecError, is_spec_name, parse_hardware_spec

KEY_PREFIX = "hw-"  # store key = KEY_PREFIX + the name's digest (a model config's key is its bare digest)
_CACHE_SIZE = 256
_cache: OrderedDict[tuple[str, str], Hardware] = OrderedDict()
_lock = threading.Lock()


def keep(data: bytes, *, visitor: str = "") -> tuple[Hardware, str]:
    """Parse `data` (raises HardwareSpecError) and keep it for links, charged to `visitor` (their client key,
    views/sidebar/client.py; "" for none); (the GPU, "" or why a link will not reopen it)."""
    from calibration.storage import kept_models
    from calibration.storage.kept_quota import owner_of
    from calibration.storage.store import StoreError, shared_store

    hw = parse_hardware_spec(data, where="your GPU spec")
    store = shared_store()
    why = ""
    try:
        r = kept_models.put(store, KEY_PREFIX + hw.name[len(SPEC_PREFIX):], bytes(data), quota=kept_models.quota(),
                            owner=owner_of(visitor))
        if not r.kept:
            why = (f"the spec is {len(data):,} bytes, more than this server keeps per visitor "
                   f"({kept_models.MAX_BYTES_ENV})")
    except StoreError as exc:
        why = f"the store could not keep it ({exc})"
    _remember(store.url, hw)
    return hw, why


def _remember(url: str, hw: Hardware) -> None:
    with _lock:
        _cache[(url, hw.name)] = hw
        _cache.move_to_end((url, hw.name))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def resolve(name: object) -> Hardware | None:
    """The kept GPU a `spec:<digest>` name refers to; None for other names, digests this store does not hold, or a
    store that cannot be read."""
    if not is_spec_name(name):
        return None
    from calibration.storage import kept_models
    from calibration.storage.store import StoreError, shared_store

    store = shared_store()
    key = KEY_PREFIX + name[len(SPEC_PREFIX):]
    with _lock:
        hit = _cache.get((store.url, name))
    if hit is not None:
        kept_models.touch(store, key)  # a link opened: the least-recently-used eviction keeps it longer
        return hit
    try:
        data = kept_models.get(store, key)
    except StoreError:
        return None
    if data is None:
        return None
    try:
        hw = parse_hardware_spec(data, where="your GPU spec")
    except HardwareSpecError:  # kept under an older reader that accepted it
        return None
    if hw.name != name:  # the bytes under this digest are not the ones it names
        return None
    _remember(store.url, hw)
    kept_models.touch(store, key)
    return hw
