"""Memory: the largest batch each candidate fits (weights, draft and KV cache, and speculation's own per-sequence
memory: planner.physics.serving.memory_max_batch over planner.physics.roofline's byte counts), the way out when the
weights alone do not fit, and what binds when one speculative sequence does not (speculation_memory_way_out)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.acceptance.trees import TreeShape
from planner.context import Candidate, Context, r5
from planner.physics.roofline import (
    BYTES_PER_PARAM,
    GB,
    default_kv_dtype,
    replica_weight_bytes,
    target_net,
    usable_memory_bytes,
)
from planner.physics.serving import SequenceMemory, engine_verify_tokens, memory_max_batch, sequence_memory
from planner.request import NO_SPEC, TP_OPTIONS
from planner.search.candidates import default_tree_shape
from planner.search.drafting import DraftArrays, drafts

GIB = 2.0**30


def candidate_max_batch(ctx: Context, cands: Sequence[Candidate], drafts: DraftArrays, *, k: np.ndarray,
                        prompt_tokens: np.ndarray, output_tokens: np.ndarray, verify_tokens: np.ndarray | None = None
                        ) -> np.ndarray:
    """Largest batch that fits memory along the candidates' axis (five axes): with the candidate's draft (scaled
    for K where the draft grows with it) and speculation's per-sequence memory (verify_tokens: K + 1 unless
    given; planner.physics.serving.sequence_memory), or without one for no speculation."""
    n_verify = engine_verify_tokens(np.asarray(k, float) + 1.0 if verify_tokens is None else verify_tokens)
    scaled = drafts.draft.scaled(np.where(drafts.draft_scales_with_k, k, 1.0))
    mb, base_mb = memory_max_batch(target=ctx.target, draft=scaled, hw=ctx.hw_params, mode=drafts.mode,
                                   prompt_tokens=prompt_tokens, output_tokens=output_tokens, tp=ctx.tp,
                                   draft_weight_bytes_total=drafts.draft_weight_bytes_total,
                                   draft_is_model=drafts.draft_is_model, attention_dp=ctx.attention_dp,
                                   verify_tokens=n_verify)
    is_base = r5([c.method == NO_SPEC for c in cands], 1).astype(bool)
    shape = np.broadcast_shapes(mb.shape, base_mb.shape, is_base.shape, k.shape, prompt_tokens.shape,
                                n_verify.shape)
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


def verify_tokens_of(cand: Candidate, k: int) -> int:
    """Tokens per sequence a step verifies at K: a stated tree's nodes + 1, the default tree's
    (planner.search.candidates), else K + 1."""
    shape: TreeShape | None = cand.tree_shape or (default_tree_shape(k) if cand.tree else None)
    return int(shape.verify_tokens_per_seq) if shape is not None else k + 1


def candidate_sequence_memory(ctx: Context, cand: Candidate, k: int, sequence_tokens: float
                              ) -> tuple[SequenceMemory, float]:
    """(one running sequence's memory by term, the replica's weights with the draft's) for a candidate at K."""
    d = drafts(ctx, [cand])
    scaled = d.draft.scaled(np.where(d.draft_scales_with_k, float(k), 1.0))
    kv_tp = 1.0 if ctx.attention_dp else ctx.tp
    mem = sequence_memory(target=ctx.target, draft=scaled, mode=d.mode, sequence_tokens=sequence_tokens,
                          verify_tokens=float(verify_tokens_of(cand, k)), kv_tp=kv_tp)
    copies = ctx.tp if ctx.attention_dp else 1.0
    head = (replica_weight_bytes(scaled, tp=ctx.tp, attention_dp=ctx.attention_dp)
            + np.asarray(scaled.fusion_weight_bytes, float) * copies)
    draft_w = np.where(d.draft_is_model, d.draft_weight_bytes_total * copies, head)
    weights = float(replica_weight_bytes(ctx.target, tp=ctx.tp, attention_dp=ctx.attention_dp)) + float(
        np.max(draft_w))
    return SequenceMemory(*(np.asarray(np.max(getattr(mem, f)), float) for f in
                            ("kv", "lookahead_kv", "draft_kv", "draft_states"))), weights


def speculation_memory_terms(mem: SequenceMemory, *, k: int, verify_tokens: int) -> list[tuple[str, float]]:
    """SequenceMemory's terms named as the plan shows them, bytes (the zero ones left out, the KV kept)."""
    terms = [("KV cache", float(mem.kv)),
             (f"lookahead KV slots for K={k}" if verify_tokens == k + 1
              else f"lookahead KV slots for the tree's {verify_tokens - 1} nodes", float(mem.lookahead_kv)),
             ("the draft's own KV", float(mem.draft_kv)),
             (f"recurrent states per verified token ({verify_tokens} x the model's state)", float(mem.draft_states))]
    return [terms[0]] + [t for t in terms[1:] if t[1] > 0]


def _size(b: float) -> str:
    """Bytes as GiB, or MiB below one GiB."""
    return f"{b / GIB:,.2f} GiB" if b >= GIB else f"{b / 2**20:,.1f} MiB"


def speculation_memory_way_out(ctx: Context, cand: Candidate, k: int, extra_weight_bytes: float = 0.0) -> str:
    """What binds when a speculative candidate does not fit memory: the weights (memory_way_out), or one sequence's
    memory at the longest segment, each term with its size, the largest speculative term named."""
    usable = float(usable_memory_bytes(ctx.hw.hbm_gb * GB, ctx.tp))
    seq = max(s.prompt_tokens + s.output_tokens for s in ctx.segs)
    mem, weights = candidate_sequence_memory(ctx, cand, k, seq)
    if weights >= usable:
        return memory_way_out(ctx, extra_weight_bytes)
    terms = speculation_memory_terms(mem, k=k, verify_tokens=verify_tokens_of(cand, k))
    parts = ", ".join(f"{name} {_size(b)}" for name, b in terms)
    out = (f"{_size(usable - weights)} are left after the weights and the draft; one sequence of {seq:,.0f} tokens "
           f"takes {_size(float(mem.speculative))} ({parts})")
    spec = max(terms[1:], key=lambda t: t[1], default=None)
    if spec is not None:
        out += f"; the largest of speculation's terms: {spec[0]}, {_size(spec[1])}"
    ways = ["a smaller K" if spec is not None and "draft's own KV" not in spec[0] else "a smaller draft",
            "shorter requests"]
    if (ctx.req.kv_dtype or default_kv_dtype(ctx.req.dtype)) != "fp8":
        ways.append("an fp8 KV cache")
    ways.append(f"a larger {'DP' if ctx.req.attention_dp else 'TP'}")
    return out + "; needs " + ", ".join(ways[:-1]) + " or " + ways[-1]


def speculation_memory_assumption(ctx: Context) -> tuple[str, str, str, str]:
    """(name, value, source, date) of the plan's assumption on what speculation holds per running sequence."""
    state = float(ctx.model.state_bytes_per_sequence)
    value = ("per running sequence beyond its KV: the step's drafted tokens' KV slots reserved ahead (K; a tree's "
             "nodes) for EAGLE-type heads, MTP, draft models and block drafting (none for n-gram or MEDUSA), and the "
             "draft's own KV")
    if state > 0:
        value += (f"; {ctx.model.label} keeps its recurrent state ({state / 2**20:,.1f} MiB per sequence) once more "
                  "per verified token (K + 1)")
    return ("speculation's memory", value,
            "vLLM v1 scheduler (num_lookahead_tokens = num_speculative_tokens for EAGLE / MTP / draft models); SGLang "
            "MambaPool intermediate SSM and conv states per draft token (python/sglang/srt/mem_cache/memory_pool.py)",
            "2026-12-04")
