"""Which acceptance a candidate drafts with, in tiers, and where it comes from.

For a (model, method, workload, temperature) the planner takes, in order:
1. "customer": the customer's own measurement: the request's measured acceptance for that method (CLI
   --alpha / --acceptance-length ..., the app's measured-acceptance box) or the acceptance the selected calibrated
   profile measured for that method and workload (tau at its K with its 95 % interval);
2. "public head": the acceptance library's rows for a public head of this model on the workload's datasets
   (planner.acceptance.library.model_fit: the position profile fitted over the K values measured);
3. "family fit": the method's position profile fitted over the other models' rows
(planner.acceptance.library.family_fit),
   its band at least as wide as its leave-one-model-out error;
4. "prior": methods.yaml's seed range with its assumed position decay, the range widened to every library
   measurement of the method on the workload's datasets (the band as wide as the data say).
Temperature: rows measured at the request's temperature where the library has them; else alpha scales by
planner.acceptance.library.temperature_factor (fitted from the library's greedy/sampled pairs, else an assumption).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from planner.acceptance import library as lib_
from planner.acceptance.rates import acceptance_length_decay, alpha_from_acceptance_length
from planner.types import Catalog

TIERS = ("customer", "public head", "family fit", "prior")
# drafting modes that need a trained draft head for the target (the others: native modules, a separate draft model
# or n-gram lookup, need none)
HEAD_DRAFTING = ("sequential_head", "parallel_head", "block_parallel")  # methods that draft with a trained drafter


@dataclass(frozen=True)
class TierEstimate:
    """The acceptance one (method, workload) drafts with: its tier, source and profile.

    Tiers other than "prior": conditional alpha_i = a * d^(i-1) + shift, band +-half_width on every position.
    "prior": the seed range [prior_low, prior_high] at position 1, decay d, times temperature_factor."""

    tier: str
    source: str
    a: float = math.nan
    d: float = 1.0
    half_width: float = 0.0
    shift: float = 0.0  # added alpha (tuned gap; the workload's shift where the fit spans every dataset)
    row_ids: tuple[str, ...] = ()
    note: str = ""
    prior_low: float = math.nan
    prior_high: float = math.nan
    temperature_factor: float = 1.0

    @property
    def is_prior(self) -> bool:
        return self.tier == "prior"

    def center(self, k_max: int) -> np.ndarray:
        return np.clip(self.a * self.d ** np.arange(k_max) + self.shift, 0.0, 1.0)


def library_of(catalog: Catalog) -> lib_.AcceptanceLibrary:
    """The catalogue's acceptance library (profiles.acceptance_library), empty when it has none."""
    return getattr(catalog, "acceptance_library", None) or lib_.EMPTY


def workload_datasets(catalog: Catalog, workload: str) -> tuple[str, ...]:
    return tuple(getattr(catalog.workloads[workload], "datasets", ()) or ())


def _temperature(ctx) -> float:
    return float(getattr(ctx.req, "temperature", 0.0) or 0.0)


def estimate(ctx, method: str, workload: str, tuned: bool) -> TierEstimate:
    """The tier estimate for one method and workload under the context's request (cached on the context)."""
    return ctx.cached((method, workload, bool(tuned)), lambda: _estimate(ctx, method, workload, bool(tuned)))


def segment_estimates(ctx, method: str, tuned: bool) -> tuple[TierEstimate, ...]:
    """estimate() for each of the context's segments, in order (cached on the context)."""
    return ctx.cached((method, None, bool(tuned)),
                      lambda: tuple(estimate(ctx, method, s.workload, tuned) for s in ctx.segs))


# The library and prior tiers' estimates shared by every request that reads them alike: keyed by the identity of the
# (frozen) library, method and workload objects it reads and the model, temperature and tuning; each entry holds
# those objects, so an id is never reused while its entry stands.
_LIBRARY_ESTIMATES: dict[tuple, tuple] = {}
_LIBRARY_ESTIMATES_MAX = 4096


def _estimate(ctx, method: str, workload: str, tuned: bool) -> TierEstimate:
    req, cat = ctx.req, ctx.catalog
    m = cat.methods[method]
    if req.acceptance is not None and req.acceptance_method == method:
        return TierEstimate("customer", (getattr(req, "acceptance_source", "") or "measured acceptance entered by the "
                                         "user" + (f" at K={req.acceptance_k}" if req.acceptance_k else "")))
    for meth, wl, k, tau, lo, hi in getattr(ctx.eff, "calibrated_acceptance", ()):
        if meth == method and wl == workload:
            a = float(alpha_from_acceptance_length(min(tau, k + 1.0), k))
            a_lo = float(alpha_from_acceptance_length(min(max(lo, 1.0), k + 1.0), k))
            a_hi = float(alpha_from_acceptance_length(min(max(hi, 1.0), k + 1.0), k))
            return TierEstimate("customer", f"calibrated profile: acceptance length {tau:.2f} [{lo:.2f}, {hi:.2f}] at "
                                f"K={k} on {wl} ({ctx.eff.source.source}, {ctx.eff.source.date})", a=a, d=1.0,
                                half_width=max(0.5 * (a_hi - a_lo), 0.0))
    lib, wl, temp = library_of(cat), cat.workloads[workload], _temperature(ctx)
    key = (id(lib), id(m), id(wl), ctx.model.name, temp, tuned)
    hit = _LIBRARY_ESTIMATES.get(key)
    if hit is not None and hit[0] is lib and hit[1] is m and hit[2] is wl:
        return hit[3]
    est = _library_estimate(ctx, method, workload, tuned)
    if len(_LIBRARY_ESTIMATES) >= _LIBRARY_ESTIMATES_MAX:
        _LIBRARY_ESTIMATES.clear()
    _LIBRARY_ESTIMATES[key] = (lib, m, wl, est)
    return est


def _library_estimate(ctx, method: str, workload: str, tuned: bool) -> TierEstimate:
    """Tiers 2-4 (public head, family fit, prior): they read the library, the method, the workload, the model's name
    and the temperature only."""
    cat = ctx.catalog
    m = cat.methods[method]
    lib = library_of(cat)
    temp = _temperature(ctx)
    datasets = workload_datasets(cat, workload)
    gap = (m.alpha_tuned.mid - m.alpha_default.mid) if tuned else 0.0
    tuned_note = f"; tuned: +{gap:.3f} alpha (the seed's tuned - default gap, assumption)" if tuned else ""
    slope, slope_src = lib_.temperature_slope(lib, method)
    if lib.rows:
        fam = lib_.family_fit(lib, method, workload, datasets, temp, ctx.model.name)
        own = lib_.model_fit(lib, ctx.model.name, method, workload, datasets, temp,
                             decay=fam.d if fam is not None else m.position_decay)
        if own is not None:
            return TierEstimate("public head", f"library rows {lib_.rows_source(_rows(lib, own.row_ids))}; profile "
                                f"alpha_1 {own.a:.3f}, decay {own.d:.3f}" + (f" ({own.note})" if own.note else "")
                                + tuned_note, a=own.a, d=own.d, half_width=own.half_width, shift=gap,
                                row_ids=own.row_ids, note=own.note)
        if fam is not None:
            wshift = cat.workloads[workload].alpha_shift if fam.note else 0.0
            return TierEstimate("family fit", f"{m.label} profile fitted over {len(fam.models)} other models "
                                f"({', '.join(fam.models)}; {len(fam.row_ids)} library rows), alpha_1 {fam.a:.3f}, "
                                f"decay {fam.d:.3f}, band +-{fam.half_width:.3f} alpha"
                                + (f"; {fam.note}, workload shift {wshift:+.3f}" if fam.note else "") + tuned_note,
                                a=fam.a, d=fam.d, half_width=fam.half_width, shift=gap + wshift, row_ids=fam.row_ids,
                                note=fam.note)
    rng = m.alpha_tuned if tuned else m.alpha_default
    low, high = rng.low, rng.high
    seen = []
    if m.drafting != "ngram":
        for r in lib_.usable_rows(lib, method, workload, datasets, temp):
            for k, tau in r.points():
                a1 = position_1_alpha(tau, k, m.position_decay)
                low, high = min(low, a1), max(high, a1)
                seen.append(r)
    widened = (f"; range widened to {low:.2f}-{high:.2f} by library rows {lib_.rows_source(seen)}"
               if (low, high) != (rng.low, rng.high) else "")
    tf = lib_.temperature_factor(slope, temp)
    tnote = (f"; temperature {temp:g}: alpha x {tf:.3f} ({'fitted to ' if slope_src != 'assumption' else ''}"
             f"{slope_src})" if temp > 0 else "")
    return TierEstimate("prior", f"{m.source.source} ({m.source.date}): alpha {rng.low:.2f}-{rng.high:.2f} "
                        f"({'tuned' if tuned else 'default'}, per-token, position 1), decay {m.position_decay} "
                        f"(assumption){widened}{tnote}", d=m.position_decay, prior_low=low, prior_high=high,
                        temperature_factor=tf, row_ids=tuple(r.id for r in seen))


def _rows(lib: lib_.AcceptanceLibrary, ids: tuple[str, ...]) -> list[lib_.LibraryRow]:
    want = set(ids)
    return [r for r in lib.rows if r.id in want]


@functools.lru_cache(maxsize=4096)
def position_1_alpha(tau: float, k: int, decay: float) -> float:
    """The alpha at position 1 whose decaying profile a d^(i-1) reaches tau at K (planner.acceptance.rates); cached: a
    plan asks it for the same few (tau, K, decay) once per segment and method."""
    tau = min(max(tau, 1.0), k + 1.0)
    f = lambda a: float(acceptance_length_decay(a, k, decay)) - tau  # noqa: E731
    if f(1.0) <= 0:
        return 1.0
    return float(brentq(f, 0.0, 1.0, xtol=1e-6))


def all_prior(ctx, cand) -> bool:
    """True when every segment of the candidate drafts with the prior (the planner's vectorised fast path)."""
    if cand.method == "none":
        return True
    return all(e.is_prior for e in segment_estimates(ctx, cand.method, cand.tuned))


def provenance(ctx, method: str, tuned: bool) -> tuple[str, str]:
    """(tier, source) of a method's acceptance over the request's segments ("<tier> (<workload>)" when they
    differ); cached on the context."""
    return ctx.cached(("provenance", method, bool(tuned)), lambda: _provenance(ctx, method, tuned))


def _provenance(ctx, method: str, tuned: bool) -> tuple[str, str]:
    ests = list(zip((s.workload for s in ctx.segs), segment_estimates(ctx, method, tuned), strict=True))
    tiers = {e.tier for _, e in ests}
    if len(tiers) == 1:
        return ests[0][1].tier, " | ".join(dict.fromkeys(e.source for _, e in ests))
    return ("; ".join(f"{e.tier} ({w})" for w, e in ests),
            " | ".join(f"{w}: {e.source}" for w, e in ests))


# ---------------------------------------------------------------------------------------------------
# Which heads exist, and the setup cost that follows
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadStatus:
    needs_head: bool  # False: the method needs no trained head (native MTP, a draft model, n-gram)
    heads: tuple[lib_.HeadRecord, ...]
    setup_gpu_hours: float
    sentence: str


def head_status(ctx, method: str) -> HeadStatus:
    """Whether a public head of the method exists for the request's model (heads.csv, or a library row naming one)
    and the draft-training GPU-hours that follow: ~0 to download one (unless the user entered hours), methods.yaml's
    setup_gpu_hours to train one. Methods that draft without a trained head (native MTP, a separate draft model,
    n-gram) need none; native MTP's availability is planner.search.drafting.availability's. Cached on the context."""
    return ctx.cached(("head", method), lambda: _head_status(ctx, method))


def _head_status(ctx, method: str) -> HeadStatus:
    cat, model = ctx.catalog, ctx.model
    m = cat.methods[method]
    override = dict(ctx.costs.setup_gpu_hours)
    if m.drafting not in HEAD_DRAFTING:
        return HeadStatus(False, (), ctx.costs.gpu_hours(m), "")
    heads = library_of(cat).heads_for(model.name, method)
    if heads:
        h = heads[0]
        more = f" (+{len(heads) - 1} more)" if len(heads) > 1 else ""
        hours = override.get(method, 0.0)
        return HeadStatus(True, heads, hours, f"a public {m.label} head exists ({h.head}, {h.source}, {h.date}){more}: "
                          f"download it, ~{hours:g} GPU-hours of training")
    hours = ctx.costs.gpu_hours(m)
    tier = {e.tier for s in ctx.segs if not (e := estimate(ctx, method, s.workload, ctx.req.tuned)).tier == "customer"}
    if "public head" in tier:  # this model's own rows measured a head the source does not name
        what = "measured on this model with a head its source does not name (acceptance library rows)"
    else:
        what = "a prior" if tier <= {"prior"} else (" / ".join(sorted(tier)) + " over other models' heads, not a "
                                                      "measurement of a head for this model")
    return HeadStatus(True, (), hours, f"no public {m.label} head for {model.label} in the library: training it costs "
                      f"{hours:g} GPU-hours ({'entered' if method in override else 'methods.yaml setup_gpu_hours'})"
                      f" and its acceptance is {what}")


def one_time_usd(ctx, m) -> tuple[float, float]:
    """(low, high) setup cost of a method for the request's model: CostAssumptions.one_time_usd with the draft
    training hours replaced by 0 where a public head exists (download), unless the user entered hours."""
    st = head_status(ctx, m.name)
    eng = m.setup_engineering_weeks * ctx.costs.engineering_usd_per_week
    return (st.setup_gpu_hours * ctx.costs.training_usd_per_gpu_hour_low + eng,
            st.setup_gpu_hours * ctx.costs.training_usd_per_gpu_hour_high + eng)
