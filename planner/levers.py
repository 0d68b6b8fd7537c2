"""The seed article's seven levers as a waterfall: apply them in order to a scenario and price each step.

Each step is evaluated at its own best K and batch under the TPOT SLO (planner.scenario.best), so a
lever that only helps at batch 1 shows no gain where the verifier is compute-bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner import scenario as sc
from planner.economics import breakeven_monthly_spend_usd, monthly_spend_usd
from planner.types import Lever, Scenario


@dataclass(frozen=True)
class LeverStep:
    lever: str
    number: int
    label: str
    applied: bool
    reason: str  # why it was skipped, or what it changed
    method: str
    k: int
    batch: int
    tree: bool
    alpha_before: float  # per-token alpha at position 1 (i.i.d.-equivalent when given otherwise)
    alpha_after: float
    usd_per_mtok_before: float
    usd_per_mtok_after: float
    one_time_usd_low: float
    one_time_usd_high: float
    monthly_saving_usd: float
    payback_months: float  # on the high one-time cost
    breakeven_monthly_spend_usd: float  # monthly spend at which this step's NPV is zero (high cost)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _alpha(s: Scenario, catalog) -> float:
    """Per-token alpha at draft position 1 of the scenario (its acceptance or the profiles')."""
    _, _, method, workload, language = sc.resolve(s, catalog)
    return float(sc.alpha_matrix(s, method, workload, language, s.k)[0])


def _apply(lever: Lever, s: Scenario, catalog, use_high: bool) -> tuple[Scenario | None, str]:
    method = catalog.methods[s.method]
    model = catalog.models[s.model]
    if lever.applies_to and s.method not in lever.applies_to:
        return None, f"does not apply to {method.label}"
    gain = lever.alpha_gain.high if use_high else lever.alpha_gain.mid
    if lever.kind == "alpha":
        return dataclasses.replace(s, alpha_shift_extra=s.alpha_shift_extra + gain), f"alpha +{gain:.2f}"
    if lever.kind == "switch_to_head":
        # An EAGLE-3 head in place of the draft model: the head's own alpha range, which sits 5-8 pp
        # above an independent draft model's in the profiles.
        return dataclasses.replace(s, method="eagle3", k=min(s.k, catalog.methods["eagle3"].max_k)), \
            "draft model -> EAGLE-3 head"
    if lever.kind == "tune_k":
        return s, "K chosen per workload (best K under the SLO)"
    if lever.kind == "tree":
        if not method.tree:
            return None, f"{method.label} has no tree verification"
        return dataclasses.replace(s, tree=True), "tree verification"
    if lever.kind == "draft_cost":
        if method.drafting == "ngram":
            return None, "n-gram drafting has no draft network"
        return dataclasses.replace(s, draft_cost_factor=s.draft_cost_factor * lever.draft_cost_factor,
                                   alpha_shift_extra=s.alpha_shift_extra + lever.alpha_gain.mid), \
            f"draft time x{lever.draft_cost_factor:g}"
    if lever.kind == "switch_to_mtp":
        if "mtp" not in model.native_methods:
            return None, f"{model.label} ships no MTP module"
        if s.method == "mtp":
            return None, "already on MTP"
        return dataclasses.replace(s, method="mtp", tree=False, alpha_shift_extra=0.0,
                                   draft_cost_factor=1.0), "switch to the model's MTP module"
    if lever.kind == "speedup":
        return dataclasses.replace(s, speedup_factor=s.speedup_factor * lever.speedup_factor), \
            f"throughput x{lever.speedup_factor:g}"
    raise ValueError(f"lever kind {lever.kind!r} unknown")


def waterfall(s: Scenario, catalog, order: list[str] | None = None, *, fixed_k: bool = True,
              use_high: bool = False) -> list[LeverStep]:
    """Apply the levers in `order` (default: the article's) cumulatively.

    Before lever 3 (tune K) the scenario keeps its K; from lever 3 on the planner picks the best K.
    """
    names = order or [name for name, _ in sorted(catalog.levers.items(), key=lambda kv: kv[1].number)]
    engineering = float(catalog.prices["engineering_usd_per_week"])
    horizon = int(catalog.prices["horizon_months"])
    rate = float(catalog.prices["annual_discount_rate"])
    tuned_k = False
    cur = s
    spec, _ = _best(cur, catalog, tuned_k)
    steps = []
    for name in names:
        lever = catalog.levers[name]
        new, reason = _apply(lever, cur, catalog, use_high)
        before_cpm = spec.usd_per_mtok
        before_alpha = _alpha(cur, catalog)
        if new is None:
            steps.append(LeverStep(name, lever.number, lever.label, False, reason, cur.method, spec.k,
                                   spec.batch, cur.tree, before_alpha, before_alpha, before_cpm,
                                   before_cpm, 0.0, 0.0, 0.0, float("inf"), float("inf")))
            continue
        if lever.kind == "tune_k":
            tuned_k = True
        new_spec, _ = _best(new, catalog, tuned_k)
        if new_spec.usd_per_mtok >= before_cpm and lever.kind != "tune_k":
            steps.append(LeverStep(
                name, lever.number, lever.label, False,
                f"skipped: {reason} raises CPM here (${before_cpm:.3f} -> ${new_spec.usd_per_mtok:.3f}/Mtok "
                f"at its best batch {new_spec.batch} under the SLO)",
                cur.method, spec.k, spec.batch, cur.tree, before_alpha, before_alpha, before_cpm, before_cpm,
                0.0, 0.0, 0.0, float("inf"), float("inf")))
            continue
        low = lever.one_time_usd.low + lever.engineering_weeks * engineering
        high = lever.one_time_usd.high + lever.engineering_weeks * engineering
        saving = float(monthly_spend_usd(before_cpm - new_spec.usd_per_mtok, s.monthly_output_tokens))
        payback = high / saving if saving > 0 else float("inf")
        frac = 1.0 - new_spec.usd_per_mtok / before_cpm if before_cpm > 0 else 0.0
        be = float(breakeven_monthly_spend_usd(cpm_reduction_fraction=frac, one_time_usd=high,
                                               horizon_months=horizon, annual_discount_rate=rate))
        steps.append(LeverStep(name, lever.number, lever.label, True, reason, new.method, new_spec.k,
                               new_spec.batch, new.tree, before_alpha, _alpha(new, catalog), before_cpm,
                               new_spec.usd_per_mtok, low, high, saving, payback, be))
        cur, spec = new, new_spec
    return steps


def _best(s: Scenario, catalog, tuned_k: bool):
    if tuned_k:
        return sc.best(s, catalog)
    return sc.best(s, catalog, ks=[s.k])


def order_by_return(steps: list[LeverStep]) -> list[str]:
    """Lever names sorted by CPM cut per one-time dollar (free levers first, then the best ratio)."""
    def key(st: LeverStep):
        cut = st.usd_per_mtok_before - st.usd_per_mtok_after
        cost = st.one_time_usd_high
        if not st.applied or cut <= 0:
            return (2, 0.0, st.number)
        if cost <= 0:
            return (0, -cut, st.number)
        return (1, -cut / cost, st.number)
    return [st.lever for st in sorted(steps, key=key)]
