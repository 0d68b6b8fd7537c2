"""Memory: the largest batch each candidate fits (weights, draft and KV cache: planner.serving.memory_max_batch
over planner.roofline's byte counts), and the way out when the weights alone do not fit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.context import Candidate, Context, r5
from planner.drafting import DraftArrays
from planner.request import NO_SPEC, TP_OPTIONS
from planner.roofline import BYTES_PER_PARAM, GB, replica_weight_bytes, target_net, usable_memory_bytes
from planner.serving import memory_max_batch


def candidate_max_batch(ctx: Context, cands: Sequence[Candidate], drafts: DraftArrays, *, k: np.ndarray,
                        prompt_tokens: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Largest batch that fits memory along the candidates' axis (five axes): with the candidate's draft (scaled
    for K where the draft grows with it), or without one for no speculation."""
    scaled = drafts.draft.scaled(np.where(drafts.draft_scales_with_k, k, 1.0))
    mb, base_mb = memory_max_batch(target=ctx.target, draft=scaled, hw=ctx.hw_params, mode=drafts.mode,
                                   prompt_tokens=prompt_tokens, output_tokens=output_tokens, tp=ctx.tp,
                                   draft_weight_bytes_total=drafts.draft_weight_bytes_total,
                                   draft_is_model=drafts.draft_is_model, attention_dp=ctx.attention_dp)
    is_base = r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    shape = np.broadcast_shapes(mb.shape, base_mb.shape, is_base.shape, k.shape, prompt_tokens.shape)
    return np.broadcast_to(np.where(is_base, base_mb, mb), shape)


def memory_way_out(ctx: Context, extra_weight_bytes: float = 0.0) -> str:
    """What would make the weights fit: a larger TP, or fp8 weights."""
    model, hw = ctx.model, ctx.hw
    usable_per_gpu = float(usable_memory_bytes(hw.hbm_gb * GB))
    need = {}
    par = "DP" if ctx.req.attention_dp else "TP"
    for dtype in dict.fromkeys(("bf16", "fp8", ctx.req.dtype)):  # 4-bit weights too: their own need
        net = target_net(model, dtype)
        extra = extra_weight_bytes * BYTES_PER_PARAM[dtype] / BYTES_PER_PARAM[ctx.req.dtype]
        # the replica's weights on t GPUs (every GPU holds the non-expert weights under attention DP)
        wb_at = {t: float(replica_weight_bytes(net, tp=t, attention_dp=ctx.attention_dp)) + extra
                 for t in {ctx.tp, *TP_OPTIONS}}
        need[dtype] = (wb_at[ctx.tp], next((t for t in TP_OPTIONS if t <= hw.max_tp
                                            and usable_per_gpu * t > wb_at[t] * 1.05), None))
    wb, _ = need[ctx.req.dtype]
    parts = [
        f"weights need {wb / GB:,.0f} GB, {ctx.tp} x {hw.label} offer {usable_per_gpu * ctx.tp / GB:,.0f} GB usable"
    ]
    tp_same = need[ctx.req.dtype][1]
    ways = []
    if tp_same is not None and tp_same > ctx.tp:
        ways.append(f"{par} >= {tp_same}")
    if ctx.req.dtype != "fp8" and need["fp8"][1] is not None:
        ways.append(f"fp8 weights ({par} >= {need['fp8'][1]})" if need["fp8"][1] > ctx.tp else "fp8 weights")
    if not ways:
        ways.append(f"more memory per replica than {hw.max_tp} x {hw.label} (a larger GPU, or pipeline parallel)")
    return "; ".join(parts) + "; needs " + " or ".join(ways)
