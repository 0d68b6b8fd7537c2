"""A catalogue configuration under a benchmark's load, with and without speculation, on planner.search.scenario's
step model: a closed loop (--max-concurrency N: planner.physics.ttft.closed_loop; TTFT, TPOT and throughput) or an
open loop (--request-rate: Poisson or evenly spaced arrivals; TTFT, TPOT and the decode batch). The published TTFT
rows (profiles/data/published/published_ttft.csv) are measured these ways: published_ttft_s predicts one,
fitted_overhead_s fits the engines' front-end times on the rows marked "fit", and benchmarks/accuracy.py compares the
rest."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from planner.physics.serving import prefill_time_s
from planner.physics.ttft import DEFAULT_BATCHED_TOKENS, ClosedLoop, closed_loop, engine_overhead_s, ttft
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


@dataclasses.dataclass(frozen=True)
class _Curves:
    """What both loads need of one configuration: prefill seconds, TPOT curves by batch, caps, lengths."""

    batches: np.ndarray
    base_tpot_s: np.ndarray
    spec_tpot_s: np.ndarray
    prefill_s: float  # the target's, chunked at the budget
    draft_prefill_s: float  # the draft's own, likewise (0 for lookups), + the drafting of the prompt's last step
    acceptance_length: float
    max_batch_baseline: float
    max_batch_speculative: float
    prompt_tokens: float
    new_prompt_tokens: float
    output_tokens: float
    budget: float

    def at(self, speculative: bool):
        curve = self.spec_tpot_s if speculative else self.base_tpot_s
        return lambda b: float(np.interp(b, self.batches, curve))


def _curves(s: Scenario, catalog, *, top: float, max_num_seqs: float | None,
            speculative_max_num_seqs: float | None, batched_tokens: float | None) -> _Curves:
    model, hw, method, workload, _ = resolve(s, catalog)
    batches = np.arange(1, int(min(max(top, 1.0), MAX_CLOSED_LOOP_BATCH)) + 1, dtype=float)
    res, _, _ = grid(s, catalog, ks=[s.k], batches=batches)
    ctx, _ = search_inputs(s, catalog, workload, [s.k])
    seg = ctx.segs[0]
    share = ctx.prefix_cache_share
    budget = DEFAULT_BATCHED_TOKENS if batched_tokens is None else float(batched_tokens)
    pre = float(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=seg.prompt_tokens, tp=s.tp,
                               cached_share=share, chunk_tokens=budget))
    dnet = draft_net(method, model, draft_spec_for(catalog, model), s.dtype, s.kv_dtype).net
    dpre = float(np.asarray(prefill_time_s(dnet, ctx.hw_params, prompt_tokens=seg.prompt_tokens, tp=s.tp,
                                           cached_share=share, chunk_tokens=budget)).reshape(-1)[0])
    # the drafting part of a speculative step at one sequence (K draft passes and the speculation overheads)
    dpre += float(np.asarray(res.step_time_s)[0, 0] - np.asarray(res.verify_time_s)[0, 0])
    mb_base = float(np.asarray(res.baseline_max_batch).reshape(-1)[0])
    mb_spec = float(np.asarray(res.max_batch).reshape(-1)[0])
    if max_num_seqs is not None:
        mb_base, mb_spec = min(mb_base, max_num_seqs), min(mb_spec, max_num_seqs)
    if speculative_max_num_seqs is not None:
        mb_spec = min(mb_spec, speculative_max_num_seqs)
    return _Curves(batches=batches, base_tpot_s=np.asarray(res.baseline_tpot_s)[0],
                   spec_tpot_s=np.asarray(res.tpot_s)[0], prefill_s=pre, draft_prefill_s=dpre,
                   acceptance_length=float(np.asarray(res.acceptance_length)[0, 0]),
                   max_batch_baseline=mb_base, max_batch_speculative=mb_spec, prompt_tokens=float(seg.prompt_tokens),
                   new_prompt_tokens=float(seg.prompt_tokens * (1.0 - share)), output_tokens=float(seg.output_tokens),
                   budget=budget)


def closed_loop_pair(s: Scenario, catalog, *, concurrency: float, max_num_seqs: float | None = None,
                     speculative_max_num_seqs: float | None = None, batched_tokens: float | None = None,
                     overhead_s: float | None = None) -> ClosedLoopPair:
    """`s` (its model, hardware, TP, method at K, workload lengths or its own prompt / output tokens) under
    `concurrency` users, without speculation and with s.method at s.k. max_num_seqs: the engine's cap on running
    sequences (None: memory's); speculative_max_num_seqs: the speculative deployment's own cap where it differs
    (an engine recipe that pins a smaller pool for speculation, e.g. SGLang's GigaChat Low-Latency recipe; None: as
    max_num_seqs); batched_tokens: the step's token budget (None: planner.physics.ttft's default); overhead_s: the
    engine's front-end time in every TTFT (None: s.engine's, planner.physics.ttft.engine_overhead_s). Each prompt's
    prefill (target and draft) is its chunks as the step model runs them at that budget
    (planner.physics.serving.prefill_chunk_steps_s); under speculation its last step also drafts the first K tokens
    before the first token is returned (vLLM V1's model runner proposes drafts inside the step that sampled them):
    the speculative step's drafting part at one sequence, T_spec(1) - T_verify(1), joins the prompt's service. Under
    load the chunk steps and the decode steps they ride are added (planner.physics.ttft's S_own): an upper bound, as a
    mixed step streams the weights once; the fleet's TTFT (planner.money.sizing.ttft_inputs) keeps the compute-only
    prefill, the other side of the same approximation (the nearer under load, short of a lone prompt's step costs)."""
    c = _curves(s, catalog, top=concurrency, max_num_seqs=max_num_seqs,
                speculative_max_num_seqs=speculative_max_num_seqs, batched_tokens=batched_tokens)
    extra = {"batched_tokens": c.budget,
             "overhead_s": engine_overhead_s(s.engine) if overhead_s is None else overhead_s}
    base = closed_loop(concurrency=concurrency, output_tokens=c.output_tokens, prefill_s=c.prefill_s,
                       new_prompt_tokens=c.new_prompt_tokens, tpot_at=c.at(False), max_batch=c.max_batch_baseline,
                       **extra)
    spec = closed_loop(concurrency=concurrency, output_tokens=c.output_tokens,
                       prefill_s=c.prefill_s + c.draft_prefill_s, new_prompt_tokens=c.new_prompt_tokens,
                       tpot_at=c.at(True), acceptance_length=c.acceptance_length, tokens_per_seq=float(s.k) + 1.0,
                       max_batch=c.max_batch_speculative, target_prefill_s=c.prefill_s, **extra)
    return ClosedLoopPair(baseline=base, speculative=spec, acceptance_length=c.acceptance_length,
                          max_batch_baseline=c.max_batch_baseline, max_batch_speculative=c.max_batch_speculative)


@dataclasses.dataclass(frozen=True)
class OpenLoop:
    """A replica fed at a fixed request rate (a benchmark's --request-rate): TTFT, the TPOT it sees, its batch."""

    requests_per_s: float
    batch: float  # sequences decoding, X O TPOT seen (inf where the replica cannot keep up)
    tpot_s: float  # TPOT seen
    ttft_s: float
    lane_share: float  # the prefill lane's busy share


def _open_loop(rate: float, c: _Curves, *, speculative: bool, tokens_per_seq: float, arrival_scv: float,
               overhead_s: float) -> OpenLoop:
    """The decode batch b = lambda O TPOT(b) / (1 - rho) (Little's law; rho = lambda x the target's prefill), bisected
    on [0, the cap] (the right side grows more slowly than b where a steady state exists); then TTFT of
    planner.physics.ttft.ttft at that batch. No steady state (the cap or rho >= 1 reached): infinite TTFT."""
    tpot, cap = c.at(speculative), (c.max_batch_speculative if speculative else c.max_batch_baseline)
    cap = min(cap, float(c.batches[-1]))
    rho = rate * c.prefill_s
    inf = OpenLoop(requests_per_s=rate, batch=math.inf, tpot_s=math.inf, ttft_s=math.inf, lane_share=math.inf)
    if rho >= 1.0 or rate * c.output_tokens * tpot(cap) / (1.0 - rho) > cap:
        return inf
    lo, hi = 0.0, cap
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if rate * c.output_tokens * tpot(max(mid, 1.0)) / (1.0 - rho) > mid:
            lo = mid
        else:
            hi = mid
    b = hi
    tau = c.acceptance_length if speculative else 1.0
    t = ttft(requests_per_s=rate, prefill_s=c.prefill_s + (c.draft_prefill_s if speculative else 0.0),
             new_prompt_tokens=c.new_prompt_tokens, step_s=tpot(max(b, 1.0)) * tau * min(b, 1.0), batch=b,
             tokens_per_seq=tokens_per_seq, batched_tokens=c.budget, overhead_s=overhead_s, arrival_scv=arrival_scv)
    return OpenLoop(requests_per_s=rate, batch=b, tpot_s=tpot(max(b, 1.0)) / (1.0 - rho), ttft_s=float(t.ttft_s),
                    lane_share=float(t.lane_share))


def open_loop_pair(s: Scenario, catalog, *, requests_per_s: float, arrival_scv: float = 1.0,
                   batched_tokens: float | None = None, overhead_s: float | None = None
                   ) -> tuple[OpenLoop, OpenLoop]:
    """`s` fed `requests_per_s` (arrivals Poisson at arrival_scv = 1, evenly spaced at 0: guidellm's constant
    profile), without speculation and with s.method at s.k: (baseline, speculative). overhead_s and the prompt's
    service: as closed_loop_pair's."""
    c = _curves(s, catalog, top=MAX_CLOSED_LOOP_BATCH, max_num_seqs=None, speculative_max_num_seqs=None,
                batched_tokens=batched_tokens)
    kw = {"arrival_scv": arrival_scv,
          "overhead_s": engine_overhead_s(s.engine) if overhead_s is None else overhead_s}
    return (_open_loop(requests_per_s, c, speculative=False, tokens_per_seq=1.0, **kw),
            _open_loop(requests_per_s, c, speculative=True, tokens_per_seq=float(s.k) + 1.0, **kw))


def published_scenario(row: dict) -> Scenario:
    """The catalogue scenario of one published TTFT row (profiles/data/published/published_ttft.csv): its model,
    hardware, TP, dtype, engine, method at K (a row without speculation: the n-gram lookup at K = 1 as a placeholder,
    its baseline is read) and its own prompt / output lengths."""
    spec = row["catalog_method"] != "none"
    return Scenario(model=row["catalog_model"], hardware=row["catalog_hardware"],
                    method=row["catalog_method"] if spec else "ngram", k=int(row["k"]) if spec else 1,
                    tp=int(row["tp"]), dtype="bf16" if row["dtype"] in ("fp16", "bf16", "") else row["dtype"],
                    engine=row["engine"], prompt_tokens=round(float(row["input_tokens"])),
                    output_tokens=round(float(row["output_tokens"])), batch=1)


ARRIVAL_SCV = {"poisson": 1.0, "constant": 0.0}  # published rows' column arrival (a benchmark's arrival process)


def published_ttft_s(row: dict, catalog, *, overhead_s: float | None = None) -> float:
    """The model's TTFT of one published row, seconds: at its concurrency (a closed loop) or its request_rate (an
    open loop, arrivals as its column arrival says), at its engine's step token budget (column batched_tokens;
    empty: planner.physics.ttft's default), with speculation where its method is not none."""
    budget = float(row["batched_tokens"]) if row.get("batched_tokens") else None
    s = published_scenario(row)
    spec = row["catalog_method"] != "none"
    if row.get("request_rate"):
        arrival = row.get("arrival") or "poisson"
        if arrival not in ARRIVAL_SCV:
            raise ValueError(f"published TTFT row {row['id']}: arrival {arrival!r}; allowed: "
                             + ", ".join(ARRIVAL_SCV))
        base, sp = open_loop_pair(s, catalog, requests_per_s=float(row["request_rate"]),
                                  arrival_scv=ARRIVAL_SCV[arrival], batched_tokens=budget, overhead_s=overhead_s)
        return (sp if spec else base).ttft_s
    pair = closed_loop_pair(s, catalog, concurrency=float(row["concurrency"]), batched_tokens=budget,
                            overhead_s=overhead_s)
    return (pair.speculative if spec else pair.baseline).ttft_s


def fitted_overhead_s(rows: list[dict], catalog) -> dict[str, float]:
    """The engines' front-end times fitted on the rows whose role is "fit": per engine, mean(measured TTFT - modelled
    TTFT without it), seconds (planner.physics.ttft.ENGINE_OVERHEAD_S states the fitted values and their rows). Rows
    marked "check" are never used. Raises ValueError naming the column when no row is marked "fit"."""
    fit = [r for r in rows if r.get("role") == "fit"]
    if not fit:
        raise ValueError("published TTFT rows: no row has role 'fit' (allowed roles: fit, check, or empty)")
    by: dict[str, list[float]] = {}
    for r in fit:
        by.setdefault(r["engine"], []).append(float(r["ttft_ms"]) / 1e3 - published_ttft_s(r, catalog, overhead_s=0.0))
    return {engine: float(np.mean(v)) for engine, v in by.items()}
