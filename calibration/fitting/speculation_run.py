"""The speculation fit's run, report, shipped YAML and --check (tools/fit_speculation.py): the pooled fit and its
leave-one-source-out cross-validation (calibration/fitting/speculation.py) with each serving engine's own terms
(calibration/fitting/engines.py). Apart from both, so that neither imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.fitting import engines
from calibration.fitting import speculation as sp
from calibration.fitting.cli import run_cli
from calibration.fitting.core import FitResult, check_param, shipped_param
from calibration.fitting.speculation import (
    DATA_SOURCE,
    OUT_YAML,
    PRIORS,
    RESEARCH_LOOPS,
    SERVING_ENGINES,
    T_NGRAM_S,
    TABLE_CSV,
    TABLE_VERSION,
    CrossValidation,
    Skipped,
    SpecRow,
    cross_validate,
    fit_speculation,
    fitted_params,
    predict_speedup,
    read_table,
    split_rows,
    usable_rows,
)


def speculation_doc_line() -> str:
    return (sp.__doc__ or "").splitlines()[0]


# ----------------------------------------------------------------------------------------------
# Report and YAML
# ----------------------------------------------------------------------------------------------

def to_yaml_doc(res: SpeculationRun, date: str) -> dict:
    fit, rows = res.fit, res.rows
    cv = res.engine_cv if res.engine_cv is not None else res.cv
    params = {n: shipped_param(fit, n) for n in fit.names}
    params["t_ngram_s"] = {"value": T_NGRAM_S, "stderr": None, "prior": "prior: tens of microseconds per sequence "
                           "for vLLM's host n-gram lookup (one usable n-gram row)"}
    for n, (v, why) in PRIORS.items():
        if n not in fit.names:
            params[n] = {"value": v, "stderr": None, "prior": f"prior: {why}"}
    return {
        "about": ("Speculation overheads of planner/physics/serving.py (one set for every hardware, applied by "
                  "planner.search.scenario.efficiency_for), fitted by tools/fit_speculation.py to the pinned "
                  "published table; "
                  "per_engine: each serving engine's own per-step and per-draft-pass terms (a term held at the pooled "
                  "params where its rows do not identify it); loso_*: the engine model's leave-one-source-out error "
                  "(loso_mape_pooled: one set for every engine). "
                  "Regenerate with `python tools/fit_speculation.py`; do not edit by hand."),
        "fit": {
            "source": DATA_SOURCE, "version": TABLE_VERSION, "date": date,
            "engines": sorted({r.engine for r in rows}),
            "rows": len(rows), "row_ids": [r.id for r in rows],
            "params": params,
            "fit_mape": round(fit.mape, 4),
            "loso_mape": round(cv.mape, 4),
            "loso_mape_by_method": {k: round(v, 4) for k, v in cv.mape_by(lambda r: r.method).items()},
            "checked_not_fitted": {
                "row_ids": [r.id for r in res.checked],
                "why": {e: RESEARCH_LOOPS.get(e, "not a serving engine (row_engines.csv)")
                        for e in dict.fromkeys(r.engine for r in res.checked)},
                "mean_error": (round(float(np.mean(res.checked_predictions()
                                                   / np.array([r.speedup for r in res.checked]) - 1.0)), 4)
                               if res.checked else None),
                "loso_mape_all_rows": round(res.cv_all.mape, 4) if res.cv_all is not None else None,
            },
            **(engines.yaml_sections(res.engine_fit, cv, res.cv, res.catalog, res.row_engines or {})
               if res.engine_fit is not None else {}),
        },
    }


@dataclass(frozen=True)
class SpeculationRun:
    """The shipped fit and its checks: fitted rows (serving engines), the research-loop rows predicted with the
    fit, leave-one-source-out over the fitted rows and over all usable rows."""

    catalog: object
    rows: list[SpecRow]
    checked: list[SpecRow]
    skipped: list[Skipped]
    fit: FitResult
    cv: CrossValidation
    cv_all: CrossValidation | None  # None when there are no checked rows
    engine_fit: object = None  # engines.EngineFit: each engine's own terms (what the planner ships)
    engine_cv: CrossValidation | None = None  # leave-one-source-out of the engine model
    row_engines: Mapping[str, tuple[str, str]] | None = None  # row_engines.csv: {id: (engine, version)}

    def checked_predictions(self) -> np.ndarray:
        return predict_speedup(self.checked, self.catalog, fitted_params(self.fit))


def run(table_csv: Path = TABLE_CSV, *, with_all_rows_cv: bool = True) -> SpeculationRun:
    from profiles import load_catalog  # noqa: PLC0415

    catalog = load_catalog()
    usable, skipped = usable_rows(read_table(table_csv))
    mapping = engines.read_row_engines()
    usable = engines.with_row_engines(usable, mapping)
    rows, checked = split_rows(usable)
    fit = fit_speculation(rows, catalog)
    cv = cross_validate(rows, catalog)
    cv_all = cross_validate(usable, catalog) if checked and with_all_rows_cv else None
    return SpeculationRun(catalog, rows, checked, skipped, fit, cv, cv_all, engines.fit_engines(rows, catalog, fit),
                          engines.cross_validate_engines(rows, catalog), mapping)


def print_report(res: SpeculationRun) -> None:
    catalog, rows, skipped, fit, cv = res.catalog, res.rows, res.skipped, res.fit, res.cv
    print(f"fitted rows: {len(rows)} from {len({r.source for r in rows})} sources (serving engines: "
          f"{', '.join(SERVING_ENGINES)}); left out ({len(skipped)} verified == yes rows):")
    for s in skipped:
        print(f"  {s.id:18} {s.reason}")
    print("fit: " + fit.describe()
          + f" | {fit.n_points} rows, MAPE {100 * fit.mape:.1f} %   (t_ngram_s = {T_NGRAM_S:g} s, prior)")
    pred = predict_speedup(rows, catalog, fitted_params(fit))
    print(f"{'row':18} {'engine':8} {'method':11} {'B':>4} {'K':>2} {'tau':>5} | measured  fit  LOSO")
    for r, p, e in zip(rows, pred, cv.residuals):
        print(f"{r.id:18} {r.engine:8} {r.method:11} {r.batch:4g} {r.k:2d} {r.tau:5.2f} | {r.speedup:8.2f} "
              f"{p:5.2f} {r.speedup * (1 + e):5.2f}")
    print(f"leave-one-source-out speedup MAPE: {100 * cv.mape:.1f} % (one set for every engine; target <= 12 %)")
    for m, v in cv.mape_by(lambda r: r.method).items():
        print(f"  {m:12} {100 * v:5.1f} %")
    if res.engine_fit is not None:
        for eng, f in res.engine_fit.engines.items():
            print(f"engine {eng} ({len(res.engine_fit.rows_by_engine[eng])} rows): {f.describe()}")
        print(f"leave-one-source-out speedup MAPE, per-engine terms: {100 * res.engine_cv.mape:.1f} %")
    for s, v in cv.mape_by(lambda r: r.source).items():
        print(f"  held out {s[:70]:70} {100 * v:5.1f} %")
    print_checked(res)


def print_checked(res: SpeculationRun) -> None:
    """The research-loop rows against the fit (never fitted) and the all-rows leave-one-source-out error."""
    if not res.checked:
        return
    pred = res.checked_predictions()
    err = pred / np.array([r.speedup for r in res.checked]) - 1.0
    for engine in dict.fromkeys(r.engine for r in res.checked):
        idx = [i for i, r in enumerate(res.checked) if r.engine == engine]
        pairs = "  ".join(f"{res.checked[i].id} {res.checked[i].hardware} b{res.checked[i].batch:g}: "
                          f"{res.checked[i].speedup:.2f}/{pred[i]:.2f}" for i in idx)
        print(f"research loop {engine}, checked not fitted (measured / model): {pairs}; "
              f"mean error {100 * np.mean(err[idx]):+.1f} % (the prototype's per-step loop: RESEARCH_LOOPS)")
    if res.cv_all is not None:
        print(f"leave-one-source-out speedup MAPE with those rows fitted too: {100 * res.cv_all.mape:.1f} % "
              f"({len(res.cv_all.rows)} rows)")


def check(res: SpeculationRun, shipped: Mapping) -> list[str]:
    """Why the refit does not reproduce the shipped YAML (empty: it does): the same rows, every parameter within the
    refit's standard error or at the same prior (core.check_param), the leave-one-source-out error within 0.1
    percentage point."""
    doc = to_yaml_doc(res, "")["fit"]
    s = shipped["fit"]
    bad = [] if doc["row_ids"] == s["row_ids"] else [f"row_ids: refit {doc['row_ids']}, shipped {s['row_ids']}"]
    bad += [why for n, p in doc["params"].items() if (why := check_param(n, p, s["params"].get(n)))]
    bad += [f"{n}: shipped, not refitted" for n in s["params"] if n not in doc["params"]]
    bad += engines.check_sections(doc, s)
    if not abs(doc["loso_mape"] - s["loso_mape"]) <= 1e-3:
        bad.append(f"loso_mape: refit {doc['loso_mape']}, shipped {s['loso_mape']}")
    return bad


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, description=speculation_doc_line(), out_yaml=OUT_YAML,
                   refit=lambda checking: run(with_all_rows_cv=not checking), report=print_report, to_doc=to_yaml_doc,
                   check=check)


if __name__ == "__main__":
    raise SystemExit(main())

