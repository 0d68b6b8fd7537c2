"""One request resolved against the catalogue: the `Context` every stage of the search reads (model, hardware,
segments, step-time parameters, price, costs), the `Candidate`s it searches and the `Samples` of the uncertain
inputs. Arrays in the search have five axes: (sample, candidate, K, segment, batch); `r5` puts values on one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.physics.engines import DEFAULT_ENGINE, ENGINE_TERMS
from planner.physics.roofline import HwParams, hw_params, target_net
from planner.physics.step_scope import own_gpu_fit, scoped
from planner.price import gpu_price
from planner.request import NO_SPEC, CostAssumptions, PlanRequest, TrafficSegment, default_costs, validate
from planner.types import Catalog, Efficiency, Hardware, ModelSpec

WHICH = ("mid", "low", "high")  # position in each method's alpha range: 0.5, 0, 1
WHICH_U = {"mid": 0.5, "low": 0.0, "high": 1.0}
SAMPLED_SPEC_FIELDS = ("t_spec_s", "sampler_vocab_passes")  # Samples' optional speculation overheads


def efficiency_for(catalog: Catalog, hardware: str, dtype: str, override: Efficiency | None = None,
                   engine: str = DEFAULT_ENGINE, model=None) -> Efficiency:
    """The step-time parameters a (hardware, weight dtype) runs with: an explicit override (a calibration), else
    step_efficiency (the kernel fit, scoped to the model's architecture), with the serving engine's own speculation
    terms (planner.physics.engines) unless a calibration measured them."""
    if override is not None:
        return override
    eff = step_efficiency(catalog, hardware, dtype, model)
    if eff.calibrated:  # a calibrated profile's hardware entry: measured whole, used as it is
        return eff
    return with_fitted_speculation(catalog, eff, engine)


def step_efficiency(catalog: Catalog, hardware: str, dtype: str, model=None,
                    fit_from: tuple[str, str] | None = None) -> Efficiency:
    """The step-time parameters before any speculation fit: the parameters fitted to measured kernels
    (profiles/data/fitted), the GPU's own fit in this dtype, else `fit_from` (a named fit), else the same GPU's fit in
    another dtype (planner.physics.step_scope), else for a GPU without kernel data the nearest fitted GPU's terms
    (planner.physics.borrowed), else the hardware's assumed defaults; per-step and per-layer terms from a fit that
    covers the model's architecture family (planner.physics.step_scope.scoped)."""
    fitted = getattr(catalog, "fitted_efficiency", None) or {}
    scope = dict(fitted=fitted, families=getattr(catalog, "fitted_families", None) or {}, table=catalog.hardware)
    named = (hardware, dtype) not in fitted and fit_from in fitted
    own = (fit_from, fitted[fit_from]) if named else own_gpu_fit(fitted, hardware, dtype)
    if own is not None:
        key, eff = own
        if key != (hardware, dtype) and fit_from is None:
            eff = dataclasses.replace(eff, source=dataclasses.replace(
                eff.source, source=f"{eff.source.source} ({hardware} {dtype} has no kernel fit of its own: the "
                                   f"{key[0]} / {key[1]} fit's terms, weights at {dtype} bytes; assumption)"))
        return scoped(eff, key, model, **scope)
    borrowed = (getattr(catalog, "borrowed_efficiency", None) or {}).get((hardware, dtype))  # planner.physics.borrowed
    if borrowed is not None:
        donor, scale = (getattr(catalog, "borrowed_donors", None) or {}).get((hardware, dtype), (None, 1.0))
        return scoped(borrowed, donor, model, scale=scale, **scope)
    return catalog.hardware[hardware].efficiency


def with_fitted_speculation(catalog: Catalog, eff: Efficiency, engine: str = DEFAULT_ENGINE) -> Efficiency:
    """`eff` with the speculation overheads fitted to published speedups (t_spec_s, sampler_vocab_passes,
    t_fixed_draft_s, t_ngram_s, moe_verify_overlap: profiles/data/fitted/speculation_vllm.yaml, one set for
    every hardware), when the catalogue has them; its source names both fits."""
    spec = getattr(catalog, "fitted_speculation", None) or {}
    if not spec:
        return eff
    src = getattr(catalog, "fitted_speculation_source", None)
    source = dataclasses.replace(eff.source, source=f"{eff.source.source}; speculation: {src.source}") if src \
        else eff.source
    terms = (getattr(catalog, "speculation_engines", None) or {}).get(engine)
    if terms is not None:  # the engine's own per-step and per-draft-pass terms (held at the pooled fit where unfitted)
        spec = {**spec, **{n: getattr(terms, n) for n in ENGINE_TERMS}}
        source = dataclasses.replace(source, source=f"{source.source}; {terms.label} terms from {terms.rows} of its "
                                                     "published rows")
    return dataclasses.replace(eff, source=source, **spec)


def r5(values, axis: int) -> np.ndarray:
    """Values along one of the five axes (sample, candidate, K, segment, batch)."""
    shape = [1] * 5
    arr = np.asarray(values, float)
    shape[axis] = arr.size
    return arr.reshape(shape)


@dataclass(frozen=True)
class Candidate:
    """One deployable configuration to search: a method (or no speculation) with lever adjustments."""

    method: str  # NO_SPEC for no speculation
    ks: tuple[int, ...]
    alpha_shift: float = 0.0  # added to per-token alpha (levers)
    draft_cost_factor: float = 1.0  # multiplies the draft pass time (FP8 head)
    tree: bool = False
    tuned: bool = False
    k_per_segment: bool = False  # lever 3: each workload segment at its own K (else one K for the whole mix)
    tree_shape: Any = None  # a stated tree (planner.acceptance.trees.TreeShape): K is its depth


BASELINE = Candidate(NO_SPEC, (1,))  # no speculation


@dataclass(frozen=True)
class Samples:
    """The uncertain inputs, one value per sample (axis N): position in the alpha range (0 low .. 1 high),
    roofline efficiencies, fixed step time and price; optionally the speculation overheads (None: the plan's)."""

    alpha_u: np.ndarray
    eta_bw: np.ndarray
    eta_flops: np.ndarray
    t_fixed_s: np.ndarray
    usd_per_gpu_hour: np.ndarray
    t_spec_s: np.ndarray | None = None
    sampler_vocab_passes: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.alpha_u)


def samples_for(which: Sequence[str], eff: Efficiency, price: float) -> Samples:
    n = len(which)
    return Samples(
        np.array([WHICH_U[w] for w in which], float),
        np.full(n, eff.eta_bw),
        np.full(n, eff.eta_flops),
        np.full(n, eff.t_fixed_s),
        np.full(n, float(price)),
    )


@dataclass(frozen=True)
class Context:
    """A validated request with what it resolves to in the catalogue."""

    req: PlanRequest
    catalog: Catalog
    model: ModelSpec
    hw: Hardware
    segs: tuple[TrafficSegment, ...]
    eff: Efficiency
    price: float
    costs: CostAssumptions
    tp: int

    @property
    def share(self) -> np.ndarray:
        return np.array([s.share for s in self.segs])

    @property
    def attention_dp(self) -> float:
        """evaluate_arrays' attention_dp: 1.0 for data-parallel attention + expert parallel."""
        return 1.0 if self.req.attention_dp else 0.0

    @property
    def prefix_cache_share(self) -> float:
        """The share of prompt tokens served from the prefix cache (planner.physics.serving.prefill_time_s): the
        request's, 0 when it states none (every prompt prefilled in full)."""
        return float(self.req.prefix_cache_share or 0.0)

    @functools.cached_property
    def target(self):
        """The target network in the request's weight and KV-cache formats."""
        return target_net(self.model, self.req.dtype, kv_dtype=self.req.kv_dtype)

    @functools.cached_property
    def hw_params(self) -> HwParams:
        """The hardware with the request's weights and step-time parameters."""
        return hw_params(self.hw, self.req.dtype, self.eff)

    @functools.cached_property
    def segment_alphas(self) -> tuple[np.ndarray, np.ndarray]:
        """(n-gram alpha, workload + language alpha shift) per segment."""
        wl = [self.catalog.workloads[s.workload] for s in self.segs]
        return (np.array([w.ngram_alpha for w in wl]),
                np.array([w.alpha_shift + self.catalog.languages[s.language].alpha_shift
                          for w, s in zip(wl, self.segs, strict=True)]))

    @functools.cached_property
    def tier_cache(self) -> dict:
        """planner.acceptance.tiers.estimate's answers for this request, per (method, workload, tuned), and what the
        tiers and planner.search.candidates derive from them per method (keys named there)."""
        return {}

    def cached(self, key: tuple, compute):
        """tier_cache[key], computed by compute() the first time it is asked."""
        cache = self.tier_cache
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def mid_samples(self) -> Samples:
        """One sample: the middle of every alpha range, the plan's efficiencies and price."""
        return samples_for(("mid",), self.eff, self.price)

    def sampled_hw(self, smp: Samples, cands: Sequence[Candidate] = ()) -> HwParams:
        """The hardware with each sample's efficiencies (axis 0) and, where drawn, speculation overheads; a method a
        calibration measured on this hardware (Efficiency.method_terms) gets its own draft-pass and per-step terms
        along the candidates' axis (1)."""
        spec = {name: r5(v, 0) for name in SAMPLED_SPEC_FIELDS if (v := getattr(smp, name)) is not None}
        hw = dataclasses.replace(self.hw_params, eta_bw=r5(smp.eta_bw, 0), eta_flops=r5(smp.eta_flops, 0),
                                 t_fixed_s=r5(smp.t_fixed_s, 0), **spec)
        terms = {m: (d, s) for m, d, s in self.eff.method_terms}
        if not terms or not any(c.method in terms for c in cands):
            return hw
        nan = (math.nan, math.nan)
        draft = r5([terms.get(c.method, nan)[0] for c in cands], 1)
        step = r5([terms.get(c.method, nan)[1] for c in cands], 1)
        return dataclasses.replace(hw, t_fixed_draft_s=np.where(np.isnan(draft), hw.t_fixed_draft_s, draft),
                                   t_spec_s=np.where(np.isnan(step), hw.t_spec_s, step))


def make_context(req: PlanRequest, catalog: Catalog, segs: tuple[TrafficSegment, ...] | None = None,
                 tp: int | None = None) -> Context:
    """The request resolved (validated unless its segments are given: they come from validate())."""
    hw = catalog.hardware[req.hardware]
    eff = efficiency_for(catalog, req.hardware, req.dtype, req.efficiency, engine=req.engine,
                         model=catalog.models[req.model])
    price = gpu_price(hw, req.usd_per_gpu_hour).usd_per_gpu_hour
    return Context(req=req, catalog=catalog, model=catalog.models[req.model], hw=hw,
                   segs=segs if segs is not None else validate(req, catalog), eff=eff, price=float(price),
                   costs=req.costs or default_costs(catalog), tp=int(tp or req.tp))


def single_segment(req: PlanRequest, catalog: Catalog, segment: int | None = None) -> tuple[Context, TrafficSegment]:
    """A context for one segment of the request's traffic (default: the largest) at share 1, and that segment."""
    segs = validate(req, catalog)
    j = int(np.argmax([s.share for s in segs])) if segment is None else segment
    seg = dataclasses.replace(segs[j], share=1.0)
    return make_context(dataclasses.replace(req, segments=(seg,)), catalog, (seg,)), segs[j]
