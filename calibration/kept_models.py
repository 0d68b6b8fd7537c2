"""Uploaded model configs (a Hugging Face config.json) kept in the store by content hash, so a link that names the
model `config:<digest>` reopens it (views/_model_box.py registers `resolve` with the catalogue)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from planner.types import ModelSpec
from profiles.model_config import DIGEST_CHARS, NAME_PREFIX, ParsedModel, is_config_name, parse_model_config

MAX_KEPT_MODELS = 10_000  # configs a store keeps for links (each at most profiles.model_config.MAX_CONFIG_BYTES)
_CACHE_SIZE = 256  # parsed models held per server (found ones only: a config kept later is found on the next look)
_cache: OrderedDict[tuple[str, str], ParsedModel] = OrderedDict()
_lock = threading.Lock()


def keep(data: bytes) -> tuple[ParsedModel, str]:
    """Parse `data` (raises ModelConfigError) and keep it in the store for links; (the parsed model, "" or why a
    link will not reopen it). The model is usable on this server either way (held in memory by its name)."""
    from calibration.store import Store, StoreError

    parsed = parse_model_config(data)
    store = Store()
    why = ""
    try:
        if not store.put_model(parsed.digest[:DIGEST_CHARS], data, max_rows=MAX_KEPT_MODELS):
            why = f"the store already keeps {MAX_KEPT_MODELS:,} model configs"
    except StoreError as exc:
        why = f"the store could not keep it ({exc})"
    _remember(store.url, parsed.spec.name, parsed)
    return parsed, why


def _remember(url: str, name: str, parsed: ParsedModel) -> None:
    with _lock:
        _cache[(url, name)] = parsed
        _cache.move_to_end((url, name))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def parsed_model(name: str) -> ParsedModel | None:
    """The kept model a `config:<digest>` name refers to; None for other names and for digests this store does not
    hold (or a store that cannot be read: the name is then unknown, as in a store without it)."""
    if not is_config_name(name):
        return None
    from calibration.store import Store, StoreError
    from profiles.model_config import ModelConfigError

    store = Store()
    with _lock:
        hit = _cache.get((store.url, name))
    if hit is not None:
        return hit
    try:
        data = store.get_model(name[len(NAME_PREFIX):])
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
    return parsed


def resolve(name: str) -> ModelSpec | None:
    """profiles.catalog.add_model_resolver's hook: the ModelSpec a kept `config:<digest>` name stands for."""
    parsed = parsed_model(name)
    return None if parsed is None else parsed.spec
