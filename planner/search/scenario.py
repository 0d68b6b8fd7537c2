"""One scenario at a given K and batch -> numbers (the CLI's `evaluate`, the Claims page's batch-1 checks).

The best K and batch, the baseline and every comparison are planner.plan's job.

`catalog` is any object with name -> record mappings `models`, `hardware`, `methods`, `workloads`,
`languages` (profiles.load_catalog() returns one); the planner itself reads no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.acceptance import rates as acc
from planner.acceptance import tiers, trees
from planner.context import Candidate, Context, efficiency_for, make_context, r5, samples_for, with_fitted_speculation
from planner.physics.serving import SpecResult
from planner.price import gpu_price
from planner.request import PlanError, PlanRequest, TrafficSegment, validate_scenario
from planner.search.candidates import MAX_ALPHA, default_tree_shape, per_position_alpha, tau_for_ks
from planner.search.drafting import availability, tree_draft_overrides
from planner.search.grid import evaluate_at, evaluation_grid
from planner.types import Catalog, Hardware, Method, ModelSpec, Scenario

__all__ = ["MAX_ALPHA", "Evaluation", "ScenarioError", "availability", "efficiency_for", "evaluate", "grid",
           "tree_draft_overrides", "with_fitted_speculation"]

ScenarioError = PlanError  # one error for every field the planner refuses (planner.request)


@dataclass(frozen=True)
class Evaluation:
    """One scenario's numbers; every field carries its unit in its name."""

    model: str
    hardware: str
    method: str
    workload: str
    k: int
    batch: int
    tp: int
    dtype: str
    tree: bool
    verify_tokens_per_seq: int
    alpha_per_position: tuple[float, ...]  # conditional per-token alpha per draft position
    alpha_per_token: float  # i.i.d. alpha with the same acceptance length
    draft_acceptance_rate: float  # vLLM convention: accepted / drafted
    acceptance_length: float  # tokens per verifier step, bonus token included
    speedup: float  # baseline TPOT / speculative TPOT at the same batch
    output_tokens_per_s: float  # decode tokens/s per replica
    baseline_output_tokens_per_s: float
    tpot_ms: float
    baseline_tpot_ms: float
    usd_per_mtok: float  # output CPM, prefill GPU time included
    baseline_usd_per_mtok: float
    draft_cost_ratio: float  # one draft pass / one baseline target step (Leviathan's c)
    verifier_bound: str  # "memory" or "compute"
    baseline_verifier_bound: str
    max_batch: int
    fits_memory: bool
    meets_slo: bool
    tpot_slo_ms: float
    usd_per_gpu_hour: float
    gpus: int
    prefill_share: float  # share of GPU time spent on prefill (speculative config)
    available: bool = True
    unavailable_reason: str = ""
    # where the acceptance comes from (planner.acceptance.tiers): customer, public head, family fit or prior
    acceptance_tier: str = ""
    acceptance_source: str = ""
    head: str = ""  # whether a public draft head exists for the model (and the setup it implies)
    temperature: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["alpha_per_position"] = list(self.alpha_per_position)
        return d


def resolve(s: Scenario, catalog: Catalog) -> tuple[ModelSpec, Hardware, Method, Any, Any]:
    model = catalog.models[s.model]
    hw = catalog.hardware[s.hardware]
    method = catalog.methods[s.method]
    workload = catalog.workloads[s.workload]
    language = catalog.languages[s.language]
    validate_scenario(s, model, hw, method)
    return model, hw, method, workload, language


def search_inputs(s: Scenario, catalog: Catalog, workload, ks: Sequence[float]) -> tuple[Context, Candidate]:
    """The scenario as the search reads it: a context with one segment (the scenario's lengths) and a candidate."""
    prompt, out, _ = _lengths(s, workload)
    seg = TrafficSegment(s.workload, s.language, 1.0, prompt, out)
    req = PlanRequest(model=s.model, hardware=s.hardware, tp=s.tp, attention_dp=s.attention_dp, dtype=s.dtype,
                      kv_dtype=s.kv_dtype, usd_per_gpu_hour=s.usd_per_gpu_hour, tpot_slo_ms=s.tpot_slo_ms,
                      monthly_output_tokens=s.monthly_output_tokens, segments=(seg,), tuned=s.tuned,
                      efficiency=s.efficiency, tree_shape=s.tree_shape, acceptance=s.acceptance,
                      acceptance_method=s.method if s.acceptance is not None else None, acceptance_k=s.k,
                      temperature=s.temperature, engine=s.engine, engine_version=s.engine_version)
    cand = Candidate(s.method, tuple(int(k) for k in ks), alpha_shift=s.alpha_shift_extra,
                     draft_cost_factor=s.draft_cost_factor, tree=s.tree, tuned=s.tuned, tree_shape=s.tree_shape)
    return make_context(req, catalog, (seg,)), cand


def _check_positions(s: Scenario, k: int) -> None:
    """A measured per-position acceptance must cover every draft position up to K."""
    a = s.acceptance
    if a is not None and a.convention == "per_token" and a.per_position is not None and len(a.per_position) < k:
        raise PlanError("alpha_per_position", a.per_position,
                        f"one value per draft position: K={k} needs {k}, {len(a.per_position)} given")


def _alphas(s: Scenario, ctx: Context, cand: Candidate, k_max: int, which: str) -> np.ndarray:
    """Conditional alpha per draft position (k_max,) at the `which` end of the method's range
    (planner.search.candidates); a measured per-position acceptance must cover every position."""
    _check_positions(s, k_max)
    return per_position_alpha(ctx, cand, samples_for((which,), ctx.eff, ctx.price), k_max)[0][0, 0]


def _tau_for_ks(alphas: np.ndarray, ks: np.ndarray, s: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """tau and verifier tokens per sequence for each K (chain, the planner's default tree, or a stated tree).

    A measured acceptance length given for a tree is used as given: it is what the engine reported for that
    tree (converting it to a chain alpha and back would replace the user's number by the model's)."""
    measured_tau = (s.acceptance.value if s.acceptance is not None and s.acceptance.convention == "acceptance_length"
                    else None)
    if s.tree_shape is not None:
        shape = s.tree_shape
        tau = measured_tau if measured_tau is not None and s.tree else float(
            trees.expected_acceptance_length(shape, alphas[: shape.depth]))
        return np.full(len(ks), float(tau)), np.full(len(ks), float(shape.verify_tokens_per_seq))
    taus, nver = tau_for_ks(alphas, ks, tree=s.tree, width=s.tree_width)
    if s.tree and measured_tau is not None:
        taus = np.full(len(ks), float(measured_tau))
    return taus, nver


def _lengths(s: Scenario, workload) -> tuple[float, float, float]:
    prompt = float(s.prompt_tokens or workload.prompt_tokens)
    out = float(s.output_tokens or workload.output_tokens)
    ctx = float(s.context_tokens or (prompt + out / 2.0))
    return prompt, out, ctx


def grid(s: Scenario, catalog: Catalog, *, ks=None, batches=None, which: str = "mid") -> tuple[
        SpecResult, np.ndarray, np.ndarray]:
    """Evaluate a (K, batch) grid for one scenario; arrays have shape (len(ks), len(batches))."""
    model, hw, method, workload, language = resolve(s, catalog)
    ks = np.asarray(ks if ks is not None else [s.k], dtype=float)
    if batches is None and s.batch is None:
        raise PlanError("batch", None, "a batch or a list of batches")
    batches = np.asarray(batches if batches is not None else [s.batch], dtype=float)
    ctx, cand = search_inputs(s, catalog, workload, ks)
    taus, n_verify = _tau_for_ks(_alphas(s, ctx, cand, int(ks.max()), which), ks, s)
    prompt, out, context = _lengths(s, workload)
    g = evaluation_grid(k=r5(ks, 2), tau=r5(taus, 2), verify_tokens=r5(n_verify, 2), prompt_tokens=[prompt],
                        output_tokens=[out], context_tokens=[context])
    full = evaluate_at(ctx, [cand], ctx.mid_samples(), g, r5(batches, 4), draft_cost_ratio=s.draft_cost_ratio)
    res = SpecResult(**{f.name: np.asarray(getattr(full, f.name))[0, 0, :, 0, :] for f in dataclasses.fields(full)})
    if s.speedup_factor != 1.0:
        res = _apply_speedup(res, s.speedup_factor)
    return res, ks, batches


def _apply_speedup(res: SpecResult, factor: float) -> SpecResult:
    """Scale decode throughput (VSD lever); CPM scales on its decode share only."""
    thr = res.output_tokens_per_s * factor
    # GPU-seconds per token = decode part + prefill part; only the decode part shrinks.
    per_tok = 1.0 / res.effective_output_tokens_per_s
    decode_part = 1.0 / res.output_tokens_per_s
    new_per_tok = per_tok - decode_part + decode_part / factor
    eff = 1.0 / new_per_tok
    return dataclasses.replace(
        res,
        output_tokens_per_s=thr,
        tpot_s=res.tpot_s / factor,
        speedup=res.speedup * factor,
        effective_output_tokens_per_s=eff,
        usd_per_mtok=res.usd_per_mtok * res.effective_output_tokens_per_s / eff,
    )


def _pick(res: SpecResult, i: int, j: int, s: Scenario, ks, batches, model, hw, method, alphas) -> Evaluation:
    k = int(ks[i])
    tau = float(res.acceptance_length[i, j])
    price = gpu_price(hw, s.usd_per_gpu_hour).usd_per_gpu_hour
    n_verify = (s.tree_shape.verify_tokens_per_seq if s.tree_shape is not None else
                k + 1 if not s.tree else default_tree_shape(k, s.tree_width).verify_tokens_per_seq)
    decode_per_tok = 1.0 / res.output_tokens_per_s[i, j]
    eff_per_tok = 1.0 / res.effective_output_tokens_per_s[i, j]
    ok, why = availability(model, method)
    return Evaluation(
        model=s.model, hardware=s.hardware, method=s.method, workload=s.workload, k=k,
        batch=int(batches[j]), tp=s.tp, dtype=s.dtype, tree=s.tree, verify_tokens_per_seq=n_verify,
        alpha_per_position=tuple(float(a) for a in alphas[:k]),
        alpha_per_token=float(acc.alpha_from_acceptance_length(min(tau, k + 1.0), k)) if not s.tree
        else float(acc.effective_chain_alpha(tau, k)),
        draft_acceptance_rate=float(acc.draft_acceptance_rate(tau, n_verify - 1)),
        acceptance_length=tau,
        speedup=float(res.speedup[i, j]),
        output_tokens_per_s=float(res.output_tokens_per_s[i, j]),
        baseline_output_tokens_per_s=float(res.baseline_output_tokens_per_s[i, j]),
        tpot_ms=float(res.tpot_s[i, j] * 1e3),
        baseline_tpot_ms=float(res.baseline_tpot_s[i, j] * 1e3),
        usd_per_mtok=float(res.usd_per_mtok[i, j]),
        baseline_usd_per_mtok=float(res.baseline_usd_per_mtok[i, j]),
        draft_cost_ratio=float(res.draft_cost_ratio[i, j]),
        verifier_bound="compute" if res.compute_bound[i, j] else "memory",
        baseline_verifier_bound="compute" if res.baseline_compute_bound[i, j] else "memory",
        max_batch=int(res.max_batch[i, j]),
        fits_memory=bool(res.fits_memory[i, j]),
        meets_slo=bool(res.tpot_s[i, j] * 1e3 <= s.tpot_slo_ms),
        tpot_slo_ms=s.tpot_slo_ms,
        usd_per_gpu_hour=float(price),
        gpus=s.tp,
        prefill_share=float(1.0 - decode_per_tok / eff_per_tok),
        available=ok,
        unavailable_reason=why,
    )


def best_batch(s: Scenario, catalog: Catalog) -> int:
    """The batch plan() would run this scenario's method at, at the scenario's K: the cheapest under the TPOT SLO
    that fits memory (planner.search.points.one_point); 1 where none does."""
    from planner.search.points import one_point

    _, _, _, workload, _ = resolve(s, catalog)
    _check_positions(s, s.k)  # the search skips a K the positions do not reach: it would find no point at all
    ctx, cand = search_inputs(s, catalog, workload, [s.k])
    pt = one_point(ctx, cand)
    return int(pt.batch) if pt.feasible and pt.batch >= 1 else 1


def evaluate(s: Scenario, catalog: Catalog, *, which: str = "mid") -> Evaluation:
    """The scenario at its K and batch. Choosing the best batch (and K) is planner.plan's job, in one place."""
    model, hw, method, workload, language = resolve(s, catalog)
    if s.batch is None:
        raise PlanError("batch", None, "a batch here; planner.plan.plan() (CLI: `plan`, `compare`) searches the "
                        "best batch under the TPOT SLO")
    res, ks, batches = grid(s, catalog, which=which)
    ctx, cand = search_inputs(s, catalog, workload, ks)
    alphas = _alphas(s, ctx, cand, s.k, which)
    tier, source = tiers.provenance(ctx, s.method, s.tuned)
    return dataclasses.replace(_pick(res, 0, 0, s, ks, batches, model, hw, method, alphas), acceptance_tier=tier,
                               acceptance_source=source, head=tiers.head_status(ctx, s.method).sentence,
                               temperature=float(s.temperature))
