"""The fit report in a reader's words, for the Calibrate page: errors that cannot be computed say why (never
NaN), the fitted parameters as rows with units and a one-line meaning each, and how a run on this machine bears
on a quote for another one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# What a run on one machine measures, and what it does not (the quote's hardware comes from the planner's catalogue
# unless a run on that hardware calibrated it).
QUOTE_LINE = ("This run measures your engine's draft and verify overheads on this machine; a run on your GPU node "
              "measures them for your deployment. A quote for another model or GPU uses its catalogue figures until a "
              "run on that hardware calibrates them.")
STORE_UNREACHABLE = "The results store could not be reached"

# name -> (unit shown, factor from the stored unit, one-line meaning); order: the table's rows (predict.EngineParams)
PARAMETERS: dict[str, tuple[str, float, str]] = {
    "eta_bw": ("share of peak", 1.0, "memory bandwidth a decode step reaches: the weights and KV cache it reads"),
    "eta_flops": ("share of peak", 1.0, "compute a decode step reaches on its matrix multiplies"),
    "eta_prefill_flops": ("share of peak", 1.0, "compute a prefill reaches (many prompt tokens at once)"),
    "t_fixed_s": ("ms per step", 1e3, "fixed time of every verifier step beyond the roofline: scheduling, "
                                      "sampling, launches"),
    "t_fixed_draft_s": ("ms per pass", 1e3, "time of one draft pass beyond the roofline (draft model, n-gram "
                                            "lookup)"),
    "t_spec_s": ("ms per step", 1e3, "added to each verifier step when speculating: proposer bookkeeping, "
                                     "rejection sampling"),
}


def parameter_rows(params: Any, fits: Sequence[Any]) -> list[dict[str, str]]:
    """One row per fitted engine parameter (`params`: calibration.analysis.predict.EngineParams): its value in the unit
    shown, the unit, what it means, and how it was set (fitted with a 95 % interval, held at a prior and why, or the
    default) from `fits` (calibration.analysis.fit.FitResult, later ones win)."""
    values = params.to_dict()
    rows = []
    for name, (unit, scale, meaning) in PARAMETERS.items():
        v = values.get(name)
        if not isinstance(v, float):
            continue
        how = "default (not fitted by this run)"
        for fr in fits:
            if fr is None or name not in fr.names:
                continue
            if name in fr.held:
                how = f"held: {str(fr.held[name]).split(';')[0].removeprefix('prior: ')}"
            elif math.isfinite(fr.error(name)):
                how = f"fitted, ± {1.96 * fr.error(name) * scale:.3g} (95 %)"
            else:
                how = "fitted (too few points for an interval)"
        if math.isfinite(v):
            shown = f"{v * scale:.4g}"
        elif name == "eta_prefill_flops":
            shown, how = f"{values['eta_flops']:.4g}", "the decode step's compute share (no prefill fit)"
        else:
            shown, how = "not fitted", "no groups identify it"
        rows.append({"parameter": name, "value": shown, "unit": unit, "meaning": meaning, "how it was set": how})
    return rows


def holdout_reason(comparisons: Sequence[Any]) -> str:
    """Why this run has no held-out error: the fit trains on the baseline and the smallest K of each method
    (calibration.analysis.predict.split_holdout) and checks itself on the larger K."""
    held = [c for c in comparisons if c.split == "held_out"]
    if held:
        return ""
    spec = sorted({c.config_label for c in comparisons if c.method != "none"})
    if not spec:
        return ("held-out error needs a speculative method measured at two or more K; this run measured only the "
                "baseline")
    return (f"held-out error needs measurements at two or more K of one method; this run measured one "
            f"({', '.join(spec)})")


def error_text(value: float, reason: str) -> str:
    """A percentage error as shown: "12.3 %", or why it was not computed (never NaN)."""
    if isinstance(value, float | int) and math.isfinite(value):
        return f"{value:.1f} %"
    return f"not computed: {reason}" if reason else "not computed"


def number_text(value: float, digits: int = 3, missing: str = "-") -> str:
    """A table cell: the number rounded, or `missing` where it is NaN or infinite (no NaN on the page)."""
    return f"{value:.{digits}f}" if isinstance(value, float | int) and math.isfinite(value) else missing
