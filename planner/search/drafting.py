"""Draft networks: which method can draft for a model, the network each method runs (a head, a smaller model, or
none for n-gram lookup), and those networks stacked along the candidates' axis for evaluate_arrays."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.context import Candidate, Context, r5
from planner.physics.roofline import Net, head_net, null_net, resident_weight_bytes, stack, target_net
from planner.physics.serving import DRAFTING_MODE_CODE, MODE_NONE
from planner.request import NO_SPEC
from planner.types import LOOKUP_DRAFTING, Catalog, Method, ModelSpec


def availability(model: ModelSpec, method: Method) -> tuple[bool, str]:
    """Whether a method can run on a model, and why not."""
    if method.requires_native and method.requires_native not in model.native_methods:
        return False, (f"{method.label} needs a model that ships {method.requires_native.upper()} "
                       f"modules; {model.label} does not")
    if method.drafting == "draft_model" and not model.draft_model:
        return False, f"no smaller model with {model.label}'s tokenizer is in the profiles"
    return True, ""


@dataclass(frozen=True)
class DraftNet:
    """What a method drafts with."""

    net: Net  # the draft's network (a null network for lookup drafting and no speculation)
    mode: int  # planner.physics.serving.DRAFTING_MODE_CODE
    scales_with_k: bool  # the draft's parameters grow with K (e.g. one MEDUSA head per position)
    weight_bytes: float  # resident bytes of a separate draft model (0 for heads, lookup and no speculation)
    is_model: bool  # a separate draft model


def draft_net(m: Method | None, model: ModelSpec, draft_spec: ModelSpec | None, dtype: str,
              kv_dtype: str | None) -> DraftNet:
    """The draft of a method (None: no speculation); a draft model the catalogue lacks drafts nothing."""
    if m is None:
        return DraftNet(null_net(), MODE_NONE, False, 0.0, False)
    mode = DRAFTING_MODE_CODE[m.drafting]
    if m.drafting == "draft_model":
        if draft_spec is None:
            return DraftNet(null_net(), mode, False, 0.0, True)
        dnet = target_net(draft_spec, dtype, kv_dtype=kv_dtype)
        return DraftNet(dnet, mode, False, float(resident_weight_bytes(dnet)), True)
    if m.drafting in LOOKUP_DRAFTING:
        return DraftNet(null_net(), mode, False, 0.0, False)
    return DraftNet(head_net(m, model, dtype, kv_dtype=kv_dtype), mode, m.draft_params_scale_with_k, 0.0, False)


def draft_spec_for(catalog: Catalog, model: ModelSpec) -> ModelSpec | None:
    """The model's smaller draft model in the catalogue, or None."""
    return catalog.models[model.draft_model] if model.draft_model else None


def draft_weight_bytes(ctx: Context, method: str) -> float:
    """Resident bytes of a method's separate draft model (0 for heads, n-gram and no speculation)."""
    if method == NO_SPEC:
        return 0.0
    return draft_net(ctx.catalog.methods[method], ctx.model, draft_spec_for(ctx.catalog, ctx.model), ctx.req.dtype,
                     ctx.req.kv_dtype).weight_bytes


@dataclass(frozen=True)
class DraftArrays:
    """The candidates' drafts along axis 1, as evaluate_arrays and memory_max_batch take them."""

    draft: Net  # one draft pass's network (a K-scaled head is scaled by the caller)
    mode: np.ndarray  # planner.physics.serving.DRAFTING_MODE_CODE
    draft_scales_with_k: np.ndarray  # the draft network grows with K (MEDUSA: one head per position)
    draft_weight_bytes_total: np.ndarray  # resident bytes of a separate draft model
    draft_is_model: np.ndarray

    def as_kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def drafts(ctx: Context, cands: Sequence[Candidate]) -> DraftArrays:
    """Draft networks and flags along axis 1 for the candidates (each distinct method built once)."""
    methods = tuple(ctx.catalog.methods[c.method] if c.method != NO_SPEC else None for c in cands)
    return _drafts_for(methods, ctx.model, draft_spec_for(ctx.catalog, ctx.model), ctx.req.dtype, ctx.req.kv_dtype)


@functools.lru_cache(maxsize=256)
def _drafts_for(methods: tuple, model, draft_spec, dtype: str, kv_dtype: str | None) -> DraftArrays:
    """drafts() for hashable inputs (Method, ModelSpec: frozen records), cached: every plan() asks the same few.
    The arrays are shared between calls and never written."""
    names = list(dict.fromkeys(m.name if m is not None else NO_SPEC for m in methods))
    by_name = {m.name: m for m in methods if m is not None}
    built = [draft_net(by_name.get(n), model, draft_spec, dtype, kv_dtype) for n in names]
    idx = np.array([names.index(m.name if m is not None else NO_SPEC) for m in methods])
    nets = stack([b.net for b in built], shape_axis=1, ndim=5)
    net = dataclasses.replace(nets, **{f.name: np.take(getattr(nets, f.name), idx, axis=1)
                                       for f in dataclasses.fields(nets)})
    col = np.array([(b.mode, b.scales_with_k, b.weight_bytes, b.is_model) for b in built], dtype=float)[idx]
    return DraftArrays(draft=net, mode=r5(col[:, 0], 1), draft_scales_with_k=r5(col[:, 1], 1).astype(bool),
                       draft_weight_bytes_total=r5(col[:, 2], 1), draft_is_model=r5(col[:, 3], 1).astype(bool))


def tree_draft_overrides(shape, method: Method) -> dict:
    """evaluate_arrays' draft overrides for a stated tree: its draft steps (one pass for parallel heads such as
    MEDUSA, which draft every depth at once) and the most tokens a step drafts per sequence (SGLang's topk)."""
    if shape is None:
        return {}
    passes = 1.0 if method.drafting == "parallel_head" else float(shape.draft_passes)
    return {"draft_passes_override": passes, "draft_tokens_per_pass_override": float(shape.max_draft_tokens_per_pass)}


def tree_overrides(ctx: Context, cands: Sequence[Candidate]) -> dict[str, np.ndarray]:
    """A stated tree's draft steps and tokens per step along the candidates' axis (NaN: the method's default)."""
    if not any(c.tree_shape is not None for c in cands):
        return {}
    ov = [tree_draft_overrides(c.tree_shape, ctx.catalog.methods[c.method]) if c.tree_shape is not None else {}
          for c in cands]
    return {key: r5([o.get(key, np.nan) for o in ov], 1)
            for key in ("draft_passes_override", "draft_tokens_per_pass_override")}
