"""Acceptance per candidate: the per-token alpha each candidate drafts with (its method's range at a sample's
position, shifted by workload and language, or a measured acceptance) and the acceptance length tau it reaches at
each K, as a chain, the planner's default tree or a stated tree (one tree model: planner.acceptance.trees).

Chain: tau = 1 + sum_i prod_{j<=i} alpha_j (Leviathan et al. 2023), bonus token included.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from planner.acceptance import rates as acc
from planner.acceptance import tails, tiers, trees
from planner.context import Candidate, Context, Samples
from planner.request import NO_SPEC, PlanError, is_number
from planner.search.drafting import availability
from planner.types import LOOKUP_DRAFTING

MAX_ALPHA = 0.98  # a shifted alpha is clipped here: no trained drafter is perfect
DEFAULT_TREE_WIDTH = 3  # candidates at depth 1 of the planner's default tree


def method_candidates(ctx: Context, names: Sequence[str], *, tuned: bool | None = None
                      ) -> tuple[list[Candidate], dict[str, str]]:
    """Candidates for the available methods (every K, or a stated tree's depth), and {name: reason} for the
    unavailable ones."""
    cands, missing = [], {}
    for name in names:
        m = ctx.catalog.methods[name]
        ok, why = availability(ctx.model, m)
        if not ok:
            missing[name] = why
            continue
        shape = ctx.req.tree_shape if m.tree else None
        ks = (shape.depth,) if shape is not None else tuple(range(1, m.max_k + 1))
        cands.append(Candidate(name, ks, tuned=ctx.req.tuned if tuned is None else tuned, tree=shape is not None,
                               tree_shape=shape))
    return cands, missing


def alpha_position_1(ctx: Context, cand: Candidate, smp: Samples) -> np.ndarray:
    """Per-token alpha at draft position 1, shape (N, S), from the candidate's acceptance tier
    (planner.acceptance.tiers): the prior's range at the sample's position (shifted by each segment's workload and
    language; prompt lookup takes the workload's n-gram alpha), else the measured or fitted profile's."""
    if not tiers.all_prior(ctx, cand):
        return per_position_alpha(ctx, cand, smp, 1)[1]
    return prior_alpha_position_1(ctx, cand, smp)


def prior_alpha_position_1(ctx: Context, cand: Candidate, smp: Samples) -> np.ndarray:
    """The prior tier's per-token alpha at position 1 (N, S): the method's range (default or tuned, widened to the
    library's measurements) at the sample's position, shifted by workload and language, times the temperature
    factor; prompt lookup takes the workload's n-gram alpha."""
    lookup, low, width, tf = _prior_ranges(ctx, cand.method, cand.tuned)
    ngram, shift = ctx.segment_alphas
    if lookup:
        a = np.broadcast_to(ngram, (smp.n, ngram.size))
    else:
        a = low[None, :] + smp.alpha_u[:, None] * width[None, :] + shift[None, :]
    if tf is not None:
        a = a * tf[None, :]
    return np.clip(a + cand.alpha_shift, 0.0, MAX_ALPHA)


def _prior_ranges(ctx: Context, method: str, tuned: bool
                  ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray | None]:
    """(prompt lookup?, prior low (S,), high - low (S,), temperature factor (S,) or None when 1 everywhere) of a
    method's prior tier per segment (cached on the context)."""
    def compute():
        ests = tiers.segment_estimates(ctx, method, tuned)
        tf = np.array([e.temperature_factor for e in ests])
        low = np.array([e.prior_low for e in ests])
        high = np.array([e.prior_high for e in ests])
        return (ctx.catalog.methods[method].drafting in LOOKUP_DRAFTING, low, high - low,
                tf if np.any(tf != 1.0) else None)

    return ctx.cached(("prior ranges", method, bool(tuned)), compute)


def alpha_from_measured(a, k_meas: int) -> float:
    """A measured acceptance (planner.types.Acceptance, one number in any convention) -> per-token alpha."""
    if a.value is None or not is_number(a.value):
        raise PlanError(a.convention, a.value, "a measured number")
    if a.convention == "per_token":
        acc.check_alpha(np.asarray(a.value), "alpha")
        return float(a.value)
    if a.convention == "draft_acceptance_rate":
        return float(acc.alpha_from_acceptance_length(acc.acceptance_length_from_rate(a.value, k_meas), k_meas))
    return float(acc.alpha_from_acceptance_length(a.value, k_meas))


def measured_alpha(ctx: Context, cand: Candidate, k_max: int) -> np.ndarray | None:
    """Conditional per-position alpha (k_max,) from the request's measured acceptance, or None."""
    req = ctx.req
    if req.acceptance is None or req.acceptance_method != cand.method:
        return None
    a = req.acceptance
    k_meas = req.acceptance_k or ctx.catalog.methods[cand.method].default_k
    if cand.tree_shape is not None:
        k_meas = cand.tree_shape.depth
    if a.per_position is not None:
        pp = np.asarray(a.per_position, float)
        acc.check_alpha(pp, "alpha_per_position")
        out = np.full(k_max, np.nan)  # positions beyond the measured ones: unknown (those K are not searched)
        out[: min(k_max, pp.size)] = pp[:k_max]
        return out
    return np.full(k_max, alpha_from_measured(a, k_meas))


@functools.lru_cache(maxsize=64)
def default_tree_shape(depth: int, width: int = DEFAULT_TREE_WIDTH) -> trees.TreeShape:
    """The planner's default tree of a depth (planner.acceptance.trees.TreeShape.planner_default), built once."""
    return trees.TreeShape.planner_default(depth, width)


def tau_for_ks(per_pos: np.ndarray, ks: np.ndarray, *, tree: bool = False, width: int = DEFAULT_TREE_WIDTH
               ) -> tuple[np.ndarray, np.ndarray]:
    """(tau (..., K), verify tokens per sequence (K,)) from conditional per-position alpha (..., Kmax): a chain of
    K, or the planner's default tree of depth K (its tau from planner.acceptance.trees' sibling model). A K that needs a
    position where alpha is NaN (unmeasured) gets tau NaN."""
    per_pos = np.asarray(per_pos, float)
    kk = np.asarray(ks).astype(int)
    unknown = np.isnan(per_pos)
    if not tree:
        cum = 1.0 + np.cumsum(np.cumprod(np.nan_to_num(per_pos, nan=0.0), axis=-1), axis=-1)  # tau at K=1..Kmax
        return np.where(unknown[..., kk - 1], np.nan, cum[..., kk - 1]), kk + 1.0
    taus = np.empty(per_pos.shape[:-1] + (kk.size,))
    nver = np.empty(kk.size)
    for i, k in enumerate(kk):
        shape = default_tree_shape(int(k), width)
        t = trees.expected_acceptance_length(shape, np.nan_to_num(per_pos[..., :k], nan=0.0))
        taus[..., i] = np.where(unknown[..., :k].any(-1), np.nan, t)
        nver[i] = shape.verify_tokens_per_seq
    return taus, nver


def per_position_alpha(ctx: Context, cand: Candidate, smp: Samples, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(conditional alpha per draft position (N, S, k_max), alpha at position 1 (N, S)) from each segment's
    acceptance tier (planner.acceptance.tiers): a measured acceptance (NaN beyond the measured positions); a
    calibrated, public-head or family profile with the sample's place in its band and the language's shift; else
    the prior's alpha at position 1 decaying by its position_decay. The candidate's alpha shift added in every tier."""
    measured = measured_alpha(ctx, cand, k_max)
    if measured is not None:
        per_pos = np.clip(
            np.broadcast_to(measured[None, None, :] + cand.alpha_shift, (smp.n, len(ctx.segs), k_max)), 0.0, 1.0
        )
        return per_pos, per_pos[..., 0]
    decay = ctx.catalog.methods[cand.method].position_decay ** np.arange(k_max)
    if tiers.all_prior(ctx, cand):
        a1 = prior_alpha_position_1(ctx, cand, smp)  # (N, S)
        return np.clip(a1[..., None] * decay, 0.0, 1.0), a1
    a1_prior = prior_alpha_position_1(ctx, cand, smp)
    is_prior, center, half_width, lang = _profile_tiers(ctx, cand.method, cand.tuned, k_max)
    band = 2.0 * smp.alpha_u - 1.0  # the sample's place in the band: -1 low, 0 middle, +1 high
    measured = np.clip(center[None] + band[:, None, None] * half_width[None, :, None] + lang[None, :, None]
                       + cand.alpha_shift, 0.0, 1.0)  # (N, S, k_max)
    prior = np.clip(a1_prior[..., None] * decay, 0.0, 1.0)
    per_pos = np.where(is_prior[None, :, None], prior, measured)
    return per_pos, per_pos[..., 0]


def _profile_tiers(ctx: Context, method: str, tuned: bool, k_max: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per segment (S,): drafts with the prior?, and for the other tiers their centre profile (S, k_max), band half
    width and the language's alpha shift (cached on the context)."""
    def compute():
        ests = tiers.segment_estimates(ctx, method, tuned)
        is_prior = np.array([e.is_prior for e in ests])
        center = np.array([np.zeros(k_max) if e.is_prior else e.center(k_max) for e in ests]).reshape(-1, k_max)
        half_width = np.array([0.0 if e.is_prior else e.half_width for e in ests])
        lang = np.array([ctx.catalog.languages[s.language].alpha_shift for s in ctx.segs])
        return is_prior, center, half_width, lang

    return ctx.cached(("profile tiers", method, bool(tuned), k_max), compute)


def candidate_tau(ctx: Context, cand: Candidate, smp: Samples, ks: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau (N, K, S), verify tokens per sequence (N, K, S), alpha at position 1 (N, S)) for one candidate."""
    if cand.method == NO_SPEC:
        one = np.ones((smp.n, len(ks), len(ctx.segs)))
        return one, one, np.zeros((smp.n, len(ctx.segs)))
    per_pos, a1 = per_position_alpha(ctx, cand, smp, int(ks.max()))
    if cand.tree_shape is not None:  # a stated tree: K is its depth (the search offers that K only)
        shape = cand.tree_shape
        a = ctx.req.acceptance
        if a is not None and ctx.req.acceptance_method == cand.method and a.convention == "acceptance_length":
            t = np.full((smp.n, len(ctx.segs)), float(a.value))  # measured for this tree: used as given
        else:
            t = trees.expected_acceptance_length(shape, per_pos[..., : shape.depth])  # (N, S)
        tau = np.broadcast_to(t[:, None, :], (smp.n, len(ks), len(ctx.segs))).copy()
        return tau, np.full_like(tau, float(shape.verify_tokens_per_seq)), a1
    tau, nver = tau_for_ks(per_pos, ks, tree=cand.tree)  # (N, S, K), (K,)
    tau = np.moveaxis(tau, -1, 1)
    return tau, np.broadcast_to(nver[None, :, None], tau.shape), a1


def candidate_taus(ctx: Context, cands: Sequence[Candidate], smp: Samples, ks: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """candidate_tau for every candidate, stacked on axis 1 ((N, C, K, S), (N, C, K, S), (N, C, S)): chains with
    the profiles' acceptance in one vectorised pass, the others one by one."""
    n, s_, k_ = smp.n, len(ctx.segs), len(ks)
    tau = np.ones((n, len(cands), k_, s_))
    nver = np.ones_like(tau)
    a1 = np.zeros((n, len(cands), s_))
    simple = [i for i, c in enumerate(cands) if c.method != NO_SPEC and not c.tree and measured_alpha(
        ctx, c, 1) is None and tiers.all_prior(ctx, c)]
    if simple:
        k_max = int(ks.max())
        a = np.stack([prior_alpha_position_1(ctx, cands[i], smp) for i in simple], axis=1)  # (N, C', S)
        decay = np.array([ctx.catalog.methods[cands[i].method].position_decay for i in simple])
        per_pos = np.clip(a[..., None] * decay[None, :, None, None] ** np.arange(k_max), 0.0, 1.0)
        cum = 1.0 + np.cumsum(np.cumprod(per_pos, axis=-1), axis=-1)  # (N, C', S, Kmax)
        tau[:, simple] = np.moveaxis(cum[..., ks.astype(int) - 1], -1, 2)
        nver[:, simple] = (ks + 1.0)[None, None, :, None]
        a1[:, simple] = a
    for i, c in enumerate(cands):
        if c.method != NO_SPEC and i not in simple:
            tau[:, i], nver[:, i], a1[:, i] = candidate_tau(ctx, c, smp, ks)
    return tau, nver, a1


def vsd_alpha_shift(ctx: Context, cand: Candidate, factor: float) -> float:
    """VSD's gain is an acceptance gain: the alpha shift that multiplies the acceptance length at the
    method's default K by `factor` (i.i.d. inversion; capped at alpha MAX_ALPHA)."""
    k = ctx.catalog.methods[cand.method].default_k
    a1 = float(np.dot(ctx.share, alpha_position_1(ctx, cand, ctx.mid_samples())[0]))
    tau = float(acc.acceptance_length_iid(a1, k))
    target = min(tau * factor, float(acc.acceptance_length_iid(MAX_ALPHA, k)))
    return float(acc.alpha_from_acceptance_length(target, k)) - a1



def _step_moments(ctx: Context, cand: Candidate, smp: Samples, ks: np.ndarray, tau: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance, skewness) of the tokens a verifier step emits, each (N, K, S), for a speculative candidate
    (planner.acceptance.tails): from the chain's per-position alpha; a tree, or a stated acceptance length, as the
    i.i.d. chain with its tau (N, K, S)."""
    t = np.clip(np.nan_to_num(tau, nan=1.0), 1.0, None)
    if cand.tree or cand.tree_shape is not None:
        mean, var, skew = (np.empty(t.shape) for _ in range(3))
        for j, k in enumerate(np.asarray(ks).astype(int)):
            mean[:, j], var[:, j], skew[:, j] = tails.step_moments(tails.iid_per_position(t[:, j], int(k)))
        return mean, var, skew
    per_pos, _ = per_position_alpha(ctx, cand, smp, int(np.max(ks)))  # (N, S, Kmax)
    mean, var, skew = (np.moveaxis(m, -1, 1) for m in tails.step_moments_by_k(per_pos, ks))
    return mean, var, skew


def _measured_spread(ctx: Context, cand: Candidate) -> tuple[float, ...] | None:
    """The request's measured per-request TPOT spread where it belongs to the candidate's method, else None."""
    a = ctx.req.acceptance
    if a is not None and ctx.req.acceptance_method == cand.method and a.tpot_spread is not None:
        return a.tpot_spread
    return None


def candidate_tpot_factor(ctx: Context, cands: Sequence[Candidate], smp: Samples, ks: np.ndarray, tau: np.ndarray,
                          q: float | None) -> np.ndarray:
    """The TPOT at quantile q over the mean TPOT, (N, C, K, S), for a request of each segment's mean output length
    (planner.acceptance.tails): 1 with q None (a mean SLO) and without speculation; a measured per-request spread
    where the request brings one for the candidate's method; else from the step's moments (_step_moments).
    tau: candidate_taus' (N, C, K, S)."""
    out = np.ones((smp.n, len(cands), len(ks), len(ctx.segs)))
    if q is None:
        return out
    outputs = np.array([s.output_tokens for s in ctx.segs], float)
    for i, c in enumerate(cands):
        if c.method == NO_SPEC:
            continue
        spread = _measured_spread(ctx, c)
        if spread is not None:
            out[:, i] = tails.spread_factor(spread, q)
            continue
        mean, var, skew = _step_moments(ctx, c, smp, ks, tau[:, i])
        out[:, i] = tails.tpot_factor(mean, var, skew, outputs, q)
    return out


def config_tpot_factor(ctx: Context, cand: Candidate, k: int, output_tokens: np.ndarray, q: float | None
                       ) -> np.ndarray:
    """candidate_tpot_factor for one deployed configuration (the candidate at K, the middle sample) at the fleet's
    hours' mean output lengths (U,): the step's moments blended over the segments by their output-token shares."""
    out = np.asarray(output_tokens, float)
    if q is None or cand.method == NO_SPEC:
        return np.ones(out.shape)
    spread = _measured_spread(ctx, cand)
    if spread is not None:
        return np.full(out.shape, tails.spread_factor(spread, q))

    def compute() -> tuple[float, float, float]:
        smp = ctx.mid_samples()
        ks = np.array([float(max(k, 1))])
        tau, _, _ = candidate_tau(ctx, cand, smp, ks)
        return tuple(float(np.dot(ctx.share, m[0, 0])) for m in _step_moments(ctx, cand, smp, ks, tau))

    # the step's moments, once per configuration for the plan (its fleets, bills and levers ask again)
    mean, var, skew = ctx.cached(("step moments", dataclasses.replace(cand, ks=(max(k, 1),))), compute)
    return tails.tpot_factor(mean, var, skew, out, q)
