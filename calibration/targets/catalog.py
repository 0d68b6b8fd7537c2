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
    from calibration.targets import model_assets

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
    if name == model_assets.MTP_TARGET_NAME:
        return _mtp_target_spec(model_spec(model_assets.TARGET_NAME))
    from calibration.targets.registry import load_registry

    reg = load_registry()
    if name in reg.targets and reg.targets[name].planner_model != name:  # a registry target named otherwise
        return model_spec(reg.targets[name].planner_model)
    raise ValueError(f"model={name!r} has no ModelSpec in the profiles and cannot be derived")


def _mtp_target_spec(base: Any) -> Any:
    """The tiny random MiMo target (calibration/targets/head_formats.py): SmolLM2's vocabulary and width, untied
    embeddings, a few layers of SmolLM2's shape, one native MTP layer."""
    from calibration.targets import head_formats as hf

    embed_b = base.vocab_size * base.hidden_size / 1e9
    per_layer_b = (base.total_params_b - embed_b) / base.layers
    total_b = 2 * embed_b + hf.MTP_LAYERS * per_layer_b  # untied: input table + LM head
    return dataclasses.replace(
        base, name="mimo-tiny-mtp", label=f"tiny random MiMo ({hf.MTP_LAYERS} layers, 1 MTP layer)",
        layers=hf.MTP_LAYERS, heads=hf.MTP_HEADS, kv_heads=hf.MTP_KV_HEADS, total_params_b=total_b,
        active_params_b=total_b, tied_embeddings=False, native_methods=("mtp",), draft_model=None, hf_id="",
        source=dataclasses.replace(
            base.source, source="derived: random MiMo target (calibration/targets/head_formats.py)", date="2026-12-02"))
