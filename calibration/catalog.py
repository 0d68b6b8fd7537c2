"""The planner's catalogue as the calibration side sees it: a model's planner.types.ModelSpec by its
calibration name (shipped profiles, truncated-layer drafts derived from their target, registry targets by
their planner model). Read by the microbenchmark job (layer shapes) and the predictor (step times)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def catalog() -> Any | None:
    try:
        from profiles import load_catalog

        return load_catalog()
    except Exception:  # noqa: BLE001 - the calibration side works without the catalog (own adapter)
        return None


@functools.lru_cache(maxsize=32)
def model_spec(name: str) -> Any:
    """planner.types.ModelSpec for an allowlisted model; truncated drafts missing from the profiles are
    derived from the target: params = embeddings (tied LM head) + N * params per decoder layer."""
    from calibration import model_assets

    cat = catalog()
    if cat is not None and name in cat.models:
        return cat.models[name]
    if name in model_assets.DRAFT_LAYERS:
        target = model_spec(model_assets.TARGET_NAME)
        n = model_assets.DRAFT_LAYERS[name]
        embed_b = target.vocab_size * target.hidden_size / 1e9
        per_layer_b = (target.total_params_b - embed_b) / target.layers
        total_b = embed_b + n * per_layer_b
        return dataclasses.replace(target, name=name, label=f"{target.label} first {n} layers", layers=n,
                                   total_params_b=total_b, active_params_b=total_b, draft_model=None)
    from calibration.registry import load_registry

    reg = load_registry()
    if name in reg.targets and reg.targets[name].planner_model != name:  # a registry target named otherwise
        return model_spec(reg.targets[name].planner_model)
    raise ValueError(f"model={name!r} has no ModelSpec in the profiles and cannot be derived")
