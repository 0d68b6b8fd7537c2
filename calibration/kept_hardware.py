"""Users' GPU specs (profiles/hardware_spec.py) kept in the store by content hash, so a link that names the GPU
`spec:<digest>` reopens it (views/_hardware_box.py). The bytes sit in the kept-configs table under `hw-<digest>`
(calibration/store.py's kept_models: one bounded table of uploaded documents, shared with the model configs)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from planner.types import Hardware
from profiles.hardware_spec import SPEC_PREFIX, HardwareSpecError, is_spec_name, parse_hardware_spec

KEY_PREFIX = "hw-"  # store key = KEY_PREFIX + the name's digest (a model config's key is its bare digest)
MAX_KEPT = 10_000  # documents the kept-configs table holds (calibration.kept_models.MAX_KEPT_MODELS)
_CACHE_SIZE = 256
_cache: OrderedDict[tuple[str, str], Hardware] = OrderedDict()
_lock = threading.Lock()


def keep(data: bytes) -> tuple[Hardware, str]:
    """Parse `data` (raises HardwareSpecError) and keep it for links; (the GPU, "" or why a link will not reopen it)."""
    from calibration.store import Store, StoreError

    hw = parse_hardware_spec(data, where="your GPU spec")
    store = Store()
    why = ""
    try:
        if not store.put_model(KEY_PREFIX + hw.name[len(SPEC_PREFIX):], bytes(data), max_rows=MAX_KEPT):
            why = f"the store already keeps {MAX_KEPT:,} uploaded configs and specs"
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
    from calibration.store import Store, StoreError

    store = Store()
    with _lock:
        hit = _cache.get((store.url, name))
    if hit is not None:
        return hit
    try:
        data = store.get_model(KEY_PREFIX + name[len(SPEC_PREFIX):])
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
    return hw
