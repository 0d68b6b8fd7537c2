"""What speculating costs per method on the measured engine: the draft side of a verifier step for a head or native
module (EAGLE-3, P-EAGLE, EAGLE, MEDUSA, MTP), and its two calibrated terms per method.

The draft side is the planner's own (planner.physics.serving.draft_time_s, the function the plan evaluates), so a term
calibrated here means in the plan exactly what it meant in the fit:
    T_draft(m) = T_pass(first) + (passes - 1) * T_pass + T_fusion      each pass with t_fixed_draft_s[m]
    T_iter     = T_verify(K + 1) + T_draft(m) + t_spec_s[m]
passes = K for a sequential head or native module (EAGLE, EAGLE-3, MTP), 1 for a parallel one (P-EAGLE, MEDUSA);
the head's network is planner.physics.networks.head_net of the planner's method (`registry.planner_method`) on the
target.

Per method two terms: t_fixed_draft_s[m] (per draft pass: launches, the proposer's input preparation, the draft
sampling) and t_spec_s[m] (per verifier step: rejection sampling, bookkeeping). With one K measured they are seen
only together (K passes + one step, both constant per step; a parallel head always: one pass per step): t_spec_s[m]
is then held at the engine's shared
per-step overhead (the n-gram / draft-model fit of the same runs) and the whole cost lands on the pass term; a run
with two K values of the method separates them. The machine's own parameters (efficiencies, t_fixed_s) come from
the first stage (calibration.analysis.predict.fit_engine) and stay fixed here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.analysis.head_cost import HEAD_METHODS
from calibration.fitting.core import Z95, FitResult, least_squares

TERM_NAMES = ("t_fixed_draft_s", "t_spec_s")
TERM_BOUNDS_S = (0.0, 1.0)


@dataclass(frozen=True)
class MethodCost:
    """One method's calibrated draft cost on the measured engine, with 95 % intervals (NaN where held)."""

    method: str
    t_fixed_draft_s: float  # per draft pass
    t_fixed_draft_s_low: float
    t_fixed_draft_s_high: float
    t_spec_s: float  # per verifier step
    t_spec_s_low: float
    t_spec_s_high: float
    held: Mapping[str, str]  # term -> why it is held at a prior
    ks: tuple[int, ...]
    num_groups: int
    extra_step_ms_b1: float  # what speculating adds to a batch-1 step at the smallest K, ms (verify, drafts, overhead)
    target_step_ms_b1: float  # the target's plain decode step at batch 1 on the same machine, ms
    rms_rel_residual: float

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "held": dict(self.held)}

    def term_text(self, name: str, *, reason: bool = True) -> str:
        """`name` (t_fixed_draft_s or t_spec_s) in ms with its 95 % interval, or the prior it is held at (with why,
        when `reason`): the one wording of the CLI and the Calibrate page."""
        v, lo, hi = (getattr(self, name), getattr(self, f"{name}_low"), getattr(self, f"{name}_high"))
        held = self.held.get(name)
        if held:
            return f"{v * 1e3:.3f} ms (held: {held.split(';')[0].removeprefix('prior: ')})" if reason else \
                f"{v * 1e3:.3f} ms (held at a prior)"
        if not (math.isfinite(lo) and math.isfinite(hi)):  # fitted, but too few groups for a standard error
            return f"{v * 1e3:.3f} ms (no interval: too few groups)"
        return f"{v * 1e3:.3f} ms [{lo * 1e3:.3f}, {hi * 1e3:.3f}]"


def _interval(fr: FitResult, name: str) -> tuple[float, float]:
    if name in fr.held or not math.isfinite(fr.error(name)):
        return math.nan, math.nan
    v, se = fr.value(name), fr.error(name)
    return max(0.0, v - Z95 * se), v + Z95 * se


def _is_parallel(method: str) -> bool:
    """One draft pass per verifier step whatever K (P-EAGLE, MEDUSA): planner.physics.serving's parallel drafting mode.
    """
    from calibration.targets.catalog import catalog
    from calibration.targets.registry import planner_method

    cat = catalog()
    return cat is not None and cat.methods[planner_method(method)].drafting == "parallel_head"


def fit_method_terms(records: Sequence[Any], params: Any, *, hw: Any | None = None) -> dict[str, FitResult]:
    """Per head method in `records` (finished groups), t_fixed_draft_s and t_spec_s by bounded least squares on the
    groups' relative wall-time residuals, the machine parameters of `params` (calibration.analysis.predict.EngineParams)
    fixed. t_spec_s is held at params.t_spec_s where the data sees it only together with the pass term (module
    docstring): a parallel head (one pass per step), or a sequential one measured at one K. Methods with fewer
    groups than two are left out (nothing to fit)."""
    from calibration.analysis.predict import machine, predict_wall_time_s

    hw = hw or machine()
    out: dict[str, FitResult] = {}
    for method in HEAD_METHODS:
        recs = [r for r in records if r.method == method and r.status == "finished" and r.wall_time_s > 0]
        if len(recs) < 2:
            continue
        y = np.array([r.wall_time_s for r in recs])
        start = {"t_fixed_draft_s": max(params.t_fixed_draft_s, 1e-4), "t_spec_s": params.t_spec_s}

        def resid(x: np.ndarray, recs=recs, y=y, method=method) -> np.ndarray:
            p = params.with_method_terms(method, t_fixed_draft_s=float(x[0]), t_spec_s=float(x[1]))
            return np.array([predict_wall_time_s(r, p, hw=hw) for r in recs]) / y - 1.0

        ks = sorted({r.k for r in recs})
        parallel = _is_parallel(method)
        why = (f"the engine's shared per-step speculation overhead ({params.t_spec_s * 1e3:.3g} ms, from the "
               "n-gram / draft-model groups of the same runs, or its start value without them): "
               + ("one draft pass per step whatever K, so the per-step and per-pass costs are seen only together"
                  if parallel else "one K of this method sees the per-step and per-pass costs only together; "
                  "measure two K values to separate them"))
        hold = ("t_spec_s",) if parallel or len(ks) < 2 else ()
        fr = least_squares(resid, names=TERM_NAMES, p0=[start[n] for n in TERM_NAMES],
                           lower=[TERM_BOUNDS_S[0]] * 2, upper=[TERM_BOUNDS_S[1]] * 2, x_scale=(1e-3, 1e-3),
                           priors={"t_spec_s": (params.t_spec_s, why)}, hold=hold, n_points=len(recs))
        out[method] = dataclasses.replace(fr, extra={"ks": ks, "num_groups": len(recs),
                                                     "records": [f"{r.config_label}/{r.workload}" for r in recs]})
    return out


def method_costs(fits: Mapping[str, FitResult], records: Sequence[Any], params: Any, *,
                 hw: Any | None = None) -> tuple[MethodCost, ...]:
    """The fitted terms per method with intervals, and what they add up to at batch 1: the draft side of one step
    at the method's smallest measured K, against the target's plain step (both from the calibrated model)."""
    from calibration.analysis.predict import machine, predict_times

    hw = hw or machine()
    out = []
    for method, fr in fits.items():
        recs = sorted((r for r in records if r.method == method and r.status == "finished"),
                      key=lambda r: (r.k, r.num_prompts))
        p = params.with_method_terms(method, t_fixed_draft_s=fr.value("t_fixed_draft_s"),
                                     t_spec_s=fr.value("t_spec_s"))
        # at batch 1: the group with the smallest K, its prompts' mean length
        ref = dataclasses.replace(recs[0], num_prompts=1,
                                  prompt_tokens=max(1, round(recs[0].prompt_tokens / recs[0].num_prompts)))
        _, t_iter, _ = predict_times(ref, p, hw=hw, tau=1.0, draft_tokens_per_step=float(ref.k))
        base = dataclasses.replace(ref, method="none", k=0, draft=None)
        _, t_base, _ = predict_times(base, p, hw=hw, tau=1.0, draft_tokens_per_step=0.0)
        lo_d, hi_d = _interval(fr, "t_fixed_draft_s")
        lo_s, hi_s = _interval(fr, "t_spec_s")
        out.append(MethodCost(
            method=method, t_fixed_draft_s=fr.value("t_fixed_draft_s"), t_fixed_draft_s_low=lo_d,
            t_fixed_draft_s_high=hi_d, t_spec_s=fr.value("t_spec_s"), t_spec_s_low=lo_s, t_spec_s_high=hi_s,
            held=dict(fr.held), ks=tuple(fr.extra.get("ks", ())), num_groups=int(fr.extra.get("num_groups", 0)),
            extra_step_ms_b1=(t_iter - t_base) * 1e3, target_step_ms_b1=t_base * 1e3,
            rms_rel_residual=math.sqrt(float(np.mean(np.square(fr.residuals)))) if fr.residuals else math.nan))
    return tuple(out)


def format_method_costs(costs: Sequence[MethodCost]) -> str:
    """One line per method: the per-pass and per-step terms with 95 % intervals (or the prior they are held at)."""
    lines = [f"{'method':8} {'K':>6} {'groups':>6}  per draft pass [95% CI]  |  per verifier step [95% CI]  |  "
             "added to a step (B=1, smallest K) vs plain step"]
    for c in costs:
        ks = ",".join(map(str, c.ks))
        lines.append(f"{c.method:8} {ks:>6} {c.num_groups:6d}  {c.term_text('t_fixed_draft_s')}"
                     f"  |  {c.term_text('t_spec_s')}  |  "
                     f"{c.extra_step_ms_b1:.2f} ms vs {c.target_step_ms_b1:.2f} ms (rms rel. residual "
                     f"{c.rms_rel_residual:.3f})")
    return "\n".join(lines)
