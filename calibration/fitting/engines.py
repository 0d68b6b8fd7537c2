"""Per-engine speculation overheads: each serving engine's per-step term (t_spec_s) and per-draft-pass
term (t_fixed_draft_s), fitted to that engine's published rows with the other speculation terms at the pooled fit
(calibration/fitting/speculation.py), and the engine model's leave-one-source-out error per class.

Model: as speculation.py, each row evaluated with its engine's terms:
    speedup = T_base(B) / (T_spec(B; t_spec_s[engine], t_fixed_draft_s[engine]) / tau)
Least squares of log(predicted / measured) per engine (core.fit_relative). A term an engine's rows do not identify
(core: on a bound, collinear, or standard error above its value), or an engine with no more rows than terms, is held
at the pooled fit over every engine's rows, which is what the planner then uses for it (never shipped as fitted).

Which engine measured a row: profiles/data/published/row_engines.csv (id, engine, engine_version, evidence) where it
exists (SPECPLAN_ROW_ENGINES names another file), else the engine speculation.USABLE states.
Leave-one-source-out: each source's rows predicted by the pooled and per-engine fits to the other sources only.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.fitting import speculation as sp
from calibration.fitting.core import FitResult, fit_relative, shipped_param
from planner.physics.engines import CLASS_MAPE_TARGET, ENGINE_TERMS, MIN_CLASS_ROWS

ROW_ENGINES_CSV = sp.ROOT / "profiles" / "data" / "published" / "row_engines.csv"
ENGINE_P0 = {"t_spec_s": 5e-4, "t_fixed_draft_s": 3e-4}
ENGINE_BOUNDS = {"t_spec_s": (0.0, 5e-3), "t_fixed_draft_s": (0.0, 3e-3)}
# Each engine's terms are drawn toward the pooled fit: p / pooled - 1 ~ N(0, ENGINE_PRIOR_WIDTH^2) (a stated prior:
# an engine's per-step and per-draft-pass overheads are the pooled ones within a factor of about 1.5 at one standard
# deviation), with the data's noise taken as the engine's own rows about its unshrunk fit. Without it, an engine
# whose rows mostly come from one source fits that source's quirks: SGLang's two terms rested on 4 rows when
# SpecBundle was held out, and the per-engine model's leave-one-source-out error (13.1 %) was worse than one set for
# every engine (10.7 %).
ENGINE_PRIOR_WIDTH = 0.5


def key(name: str, engine: str) -> str:
    """The parameter name of one engine's term in a flat parameter mapping (speculation.predict_speedup)."""
    return f"{name}@{engine}"


def row_engines_path() -> Path:
    return Path(os.environ.get("SPECPLAN_ROW_ENGINES") or ROW_ENGINES_CSV)


def read_row_engines(path: Path | None = None) -> dict[str, tuple[str, str]]:
    """{row id: (engine, engine_version)} from row_engines.csv; {} when the file does not exist."""
    p = path or row_engines_path()
    if not p.is_file():
        return {}
    with p.open(newline="", encoding="utf-8") as fh:
        out = {}
        for i, r in enumerate(csv.DictReader(fh), start=2):
            if not r.get("id") or not r.get("engine"):
                raise ValueError(f"{p.name} line {i}: id={r.get('id')!r}, engine={r.get('engine')!r}: both needed")
            out[r["id"].strip()] = (r["engine"].strip().lower(), (r.get("engine_version") or "").strip())
    return out


def with_row_engines(rows: Sequence[sp.SpecRow], mapping: Mapping[str, tuple[str, str]]) -> list[sp.SpecRow]:
    """`rows` with the engine row_engines.csv states for each (a research loop's own name stays where the file says
    only 'other' or 'hf')."""
    out = []
    for r in rows:
        eng = mapping.get(r.id, (r.engine, ""))[0]
        if eng not in sp.SERVING_ENGINES and r.engine not in sp.SERVING_ENGINES:
            eng = r.engine
        out.append(dataclasses.replace(r, engine=eng))
    return out


def target_kind(row: sp.SpecRow, catalog) -> str:
    return "moe" if catalog.models[row.model].experts else "dense"


# ----------------------------------------------------------------------------------------------
# The fit
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EngineFit:
    """The pooled fit and, per engine with rows, its own terms (a FitResult over key(name, engine) parameters)."""

    pooled: FitResult
    engines: Mapping[str, FitResult]
    rows_by_engine: Mapping[str, tuple[sp.SpecRow, ...]]

    def params(self) -> dict[str, float]:
        """Every parameter predict_speedup needs: the pooled ones and each engine's terms."""
        out = sp.fitted_params(self.pooled)
        for fit in self.engines.values():
            out.update(fit.as_dict())
        return out


def _held_all(names: Sequence[str], priors: Mapping[str, tuple[float, str]], why: str, y: np.ndarray) -> FitResult:
    return FitResult(tuple(names), tuple(priors[n][0] for n in names), tuple(np.nan for _ in names), (), True,
                     why, 0.0, int(y.size), {n: f"prior: {priors[n][1]}; {why}" for n in names})


def fit_engines(rows: Sequence[sp.SpecRow], catalog, pooled: FitResult | None = None) -> EngineFit:
    """Each engine's (t_spec_s, t_fixed_draft_s) on its own rows, the pooled fit (over all rows) fixed for the rest
    and standing as the prior of both terms."""
    pooled = pooled or sp.fit_speculation(rows, catalog)
    base = sp.fitted_params(pooled)
    groups: dict[str, list[sp.SpecRow]] = defaultdict(list)
    for r in rows:
        groups[r.engine].append(r)
    fits = {}
    for eng, rs in sorted(groups.items()):
        names = tuple(key(n, eng) for n in ENGINE_TERMS)
        priors = {key(n, eng): (base[n], f"the pooled fit over every engine's {len(rows)} rows ({base[n] * 1e3:.3g} "
                                         "ms)") for n in ENGINE_TERMS}
        y = np.array([r.speedup for r in rs])
        if y.size <= len(names):
            fits[eng] = _held_all(names, priors, f"{y.size} {eng} row(s) cannot identify {len(names)} terms", y)
            continue

        def model(p: np.ndarray, rs=rs, names=names) -> np.ndarray:
            return sp.predict_speedup(rs, catalog, {**base, **dict(zip(names, map(float, p)))})

        kw = dict(names=names, p0=[ENGINE_P0[n] for n in ENGINE_TERMS],
                  bounds=([ENGINE_BOUNDS[n][0] for n in ENGINE_TERMS], [ENGINE_BOUNDS[n][1] for n in ENGINE_TERMS]))
        fit = fit_relative(model, y, priors=priors, **kw)
        # A term the engine's rows drive onto a bound (0 s, or the cap) is not measured there either: hold it at the
        # pooled fit (the stated prior), not at the bound, and refit the rest.
        on_bound = [n for n, why in fit.held.items() if "bound" in why]
        if on_bound:
            priors = {n: (v, why + (f"; {eng}'s rows drive it to its bound {fit.value(n):g}" if n in on_bound else ""))
                      for n, (v, why) in priors.items()}
            fit = fit_relative(model, y, priors=priors, hold=on_bound, **kw)
        if ENGINE_PRIOR_WIDTH > 0 and fit.free:
            # What the rows identify is decided without the prior (above); the identified terms are then drawn toward
            # the pooled fit. The data's noise: the engine's rows about that unshrunk fit (log residual per spare row).
            r = np.log1p(np.asarray(fit.residuals))
            noise = max(float(np.sqrt(r @ r / max(r.size - len(fit.free), 1))), 1e-9)
            held = {n: (fit.value(n), why.removeprefix("prior: ")) for n, why in fit.held.items()}
            fit = fit_relative(model, y, priors={**priors, **held}, hold=list(held), hold_unidentified=False,
                               shrink={n: (base[n.split("@")[0]], ENGINE_PRIOR_WIDTH) for n in fit.free
                                       if base[n.split("@")[0]] > 0}, noise=noise, **kw)
        fits[eng] = fit
    return EngineFit(pooled, fits, {e: tuple(v) for e, v in groups.items()})


def cross_validate_engines(rows: Sequence[sp.SpecRow], catalog, group=None) -> sp.CrossValidation:
    """Leave-one-source-out of the engine model: pooled and per-engine fits to the other sources; a held-out engine
    with no rows left is predicted at the pooled fit. group(row) -> str | None: hold out by that key instead (None:
    a row never held out, always trained on; it is left out of the result)."""
    group = group or (lambda r: r.source)
    res = np.full(len(rows), np.nan)
    fits = {}
    for src in dict.fromkeys(g for r in rows if (g := group(r)) is not None):
        train = [r for r in rows if group(r) != src]
        test = [i for i, r in enumerate(rows) if group(r) == src]
        ef = fit_engines(train, catalog)
        fits[src] = ef.pooled
        pred = sp.predict_speedup([rows[i] for i in test], catalog, ef.params())
        res[test] = pred / np.array([rows[i].speedup for i in test]) - 1.0
    kept = [i for i, r in enumerate(rows) if group(r) is not None]
    return sp.CrossValidation(tuple(rows[i] for i in kept), res[kept], fits)


def sbd_target(row: sp.SpecRow) -> str | None:
    """The SpecBundle target code of an SBD row (SBD_<target>_...), None for any other row."""
    return row.id.split("_")[1] if row.id.startswith("SBD_") else None


def leave_one_target_out_sbd(rows: Sequence[sp.SpecRow], catalog) -> sp.CrossValidation:
    """A diagnostic beside leave-one-source-out: each SpecBundle target's rows predicted by the engine model fitted to
    every other row (the other targets' SpecBundle rows included); the other sources' rows are never held out."""
    return cross_validate_engines(rows, catalog, group=sbd_target)


# ----------------------------------------------------------------------------------------------
# What the held-out error says: per class, side of 1.0, batch-curve direction
# ----------------------------------------------------------------------------------------------

def class_errors(cv: sp.CrossValidation, catalog) -> dict[tuple[str, str], tuple[float, int]]:
    """{(engine, dense|moe): (leave-one-source-out MAPE, rows)}."""
    groups = defaultdict(list)
    for r, e in zip(cv.rows, cv.residuals):
        groups[(r.engine, target_kind(r, catalog))].append(abs(e))
    return {k: (float(np.mean(v)), len(v)) for k, v in sorted(groups.items())}


def side_of_one(cv: sp.CrossValidation) -> tuple[int, int, list[str]]:
    """(rows whose held-out prediction is on the same side of 1.0x as the measurement, rows, ids on the wrong side)."""
    wrong = [r.id for r, e in zip(cv.rows, cv.residuals)
             if (r.speedup < 1.0) != (r.speedup * (1.0 + e) < 1.0)]
    return len(cv.rows) - len(wrong), len(cv.rows), wrong


def curve_directions(cv: sp.CrossValidation) -> list[tuple[str, list[float], list[float], list[float], bool]]:
    """Each measured batch curve (rows of one source, model, GPU, method, K and tau-free setting at 2+ batches):
    (name, batches, measured, held-out predicted, whether the model moves as the data does between each pair)."""
    groups = defaultdict(list)
    for r, e in zip(cv.rows, cv.residuals):
        ds = r.id.rsplit("_", 1)[0] if "_" in r.id else ""
        groups[(r.source, r.model, r.hardware, r.method, r.k, r.verify_tokens, ds)].append(
            (r.batch, r.speedup, r.speedup * (1 + e)))
    out = []
    for g, pts in groups.items():
        if len({b for b, _, _ in pts}) < 2:
            continue
        pts.sort()
        b, m, p = zip(*pts)
        dm, dp = np.sign(np.diff(m)), np.sign(np.diff(p))
        same = bool(np.all((dm == 0) | (dm == dp)))
        out.append((f"{g[1]} {g[3]} K={g[4]} {g[2]} {g[6]}".strip(), list(b), list(m), list(p), same))
    return out


# ----------------------------------------------------------------------------------------------
# Shipping: the YAML sections and their --check
# ----------------------------------------------------------------------------------------------

def yaml_sections(ef: EngineFit, cv: sp.CrossValidation, pooled_cv: sp.CrossValidation, catalog,
                  versions: Mapping[str, tuple[str, str]]) -> dict:
    per_engine = {}
    for eng, fit in ef.engines.items():
        rs = ef.rows_by_engine[eng]
        per_engine[eng] = {
            "rows": len(rs), "sources": len({r.source for r in rs}),
            "versions": sorted({versions.get(r.id, ("", ""))[1] or "not stated" for r in rs}),
            "params": {n: shipped_param(fit, key(n, eng)) for n in ENGINE_TERMS},
        }
    ok, n, wrong = side_of_one(cv)
    return {
        "per_engine": per_engine,
        "loso_mape_pooled": round(pooled_cv.mape, 4),
        "loso_mape_by_class": {f"{e}/{k}": {"mape": round(m, 4), "rows": c, "meets_target":
                                            bool(m <= CLASS_MAPE_TARGET) if c >= MIN_CLASS_ROWS else None}
                               for (e, k), (m, c) in class_errors(cv, catalog).items()},
        "loso_mape_by_engine": {k: round(v, 4) for k, v in cv.mape_by(lambda r: r.engine).items()},
        "side_of_one": {"right": ok, "rows": n, "wrong_ids": wrong},
    }


def check_sections(doc: Mapping, shipped: Mapping) -> list[str]:
    from calibration.fitting.core import check_param  # noqa: PLC0415

    bad = []
    got, want = doc.get("per_engine", {}), shipped.get("per_engine", {})
    if sorted(got) != sorted(want):
        return [f"per_engine: refit {sorted(got)}, shipped {sorted(want)}"]
    for eng in got:
        if got[eng]["rows"] != want[eng]["rows"]:
            bad.append(f"per_engine.{eng}.rows: refit {got[eng]['rows']}, shipped {want[eng]['rows']}")
        bad += [f"per_engine.{eng}." + why for n, p in got[eng]["params"].items()
                if (why := check_param(n, p, want[eng]["params"].get(n)))]
    return bad
