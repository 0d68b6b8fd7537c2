"""A catalogue configuration under a benchmark's closed loop (--max-concurrency N): its TTFT, TPOT and throughput
with and without speculation (planner.physics.ttft.closed_loop on planner.search.scenario's step model). The published
TTFT rows (profiles/data/published/published_ttft.csv) are measured this way, and benchmarks/accuracy.py compares
them."""

from __future__ import annotations

import dataclasses

import numpy as np

from planner.physics.serving import prefill_time_s
from planner.physics.ttft import ClosedLoop, closed_loop
from planner.search.drafting import draft_net, draft_spec_for
from planner.search.scenario import grid, resolve, search_inputs
from planner.types import Scenario

MAX_CLOSED_LOOP_BATCH = 1024  # the TPOT curve is evaluated up to min(concurrency, memory, this)


@dataclasses.dataclass(frozen=True)
class ClosedLoopPair:
    """One configuration at one concurrency, without and with speculation (the same step model and lengths)."""

    baseline: ClosedLoop
    speculative: ClosedLoop
    acceptance_length: float
    max_batch_baseline: float
    max_batch_speculative: float


def closed_loop_pair(s: Scenario, catalog, *, concurrency: float, max_num_seqs: float | None = None,
                     speculative_max_num_seqs: float | None = None, batched_tokens: float | None = None
                     ) -> ClosedLoopPair:
    """`s` (its model, hardware, TP, method at K, workload lengths or its own prompt / output tokens) under
    `concurrency` users, without speculation and with s.method at s.k. max_num_seqs: the engine's cap on running
    sequences (None: memory's); speculative_max_num_seqs: the speculative deployment's own cap where it differs
    (an engine recipe that pins a smaller pool for speculation, e.g. SGLang's GigaChat Low-Latency recipe; None: as
    max_num_seqs); batched_tokens: the step's token budget (None: planner.physics.ttft's default)."""
    model, hw, method, workload, _ = resolve(s, catalog)
    top = int(min(max(concurrency, 1.0), MAX_CLOSED_LOOP_BATCH))
    batches = np.arange(1, top + 1, dtype=float)
    res, _, _ = grid(s, catalog, ks=[s.k], batches=batches)
    ctx, _ = search_inputs(s, catalog, workload, [s.k])
    seg = ctx.segs[0]
    share = ctx.prefix_cache_share
    pre = float(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=seg.prompt_tokens, tp=s.tp,
                               cached_share=share))
    dnet = draft_net(method, model, draft_spec_for(catalog, model), s.dtype, s.kv_dtype).net
    dpre = float(np.asarray(prefill_time_s(dnet, ctx.hw_params, prompt_tokens=seg.prompt_tokens, tp=s.tp,
                                           cached_share=share)).reshape(-1)[0])
    tau = float(np.asarray(res.acceptance_length)[0, 0])
    base_t, spec_t = np.asarray(res.baseline_tpot_s)[0], np.asarray(res.tpot_s)[0]
    mb_base = float(np.asarray(res.baseline_max_batch).reshape(-1)[0])
    mb_spec = float(np.asarray(res.max_batch).reshape(-1)[0])
    if max_num_seqs is not None:
        mb_base, mb_spec = min(mb_base, max_num_seqs), min(mb_spec, max_num_seqs)
    if speculative_max_num_seqs is not None:
        mb_spec = min(mb_spec, speculative_max_num_seqs)
    extra = {} if batched_tokens is None else {"batched_tokens": batched_tokens}
    new = seg.prompt_tokens * (1.0 - share)

    def at(curve: np.ndarray):
        return lambda b: float(np.interp(b, batches, curve))

    base = closed_loop(concurrency=concurrency, output_tokens=seg.output_tokens, prefill_s=pre, new_prompt_tokens=new,
                       tpot_at=at(base_t), max_batch=mb_base, **extra)
    spec = closed_loop(concurrency=concurrency, output_tokens=seg.output_tokens, prefill_s=pre + dpre,
                       new_prompt_tokens=new, tpot_at=at(spec_t), acceptance_length=tau,
                       tokens_per_seq=float(s.k) + 1.0, max_batch=mb_spec, target_prefill_s=pre, **extra)
    return ClosedLoopPair(baseline=base, speculative=spec, acceptance_length=tau, max_batch_baseline=mb_base,
                          max_batch_speculative=mb_spec)
