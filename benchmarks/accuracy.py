"""TPOT of the planner's fitted step time against NVIDIA aiconfigurator's estimate, on a grid.

Grid (profiles/data/fitted/aiconfigurator_tpot.csv, extracted by tools/extract_aiconfigurator.py):
dense (Llama-3.1-8B, Llama-3.x-70B, Qwen3-32B) and MoE (Qwen3-30B-A3B, DeepSeek-V3 fp8) targets on H100,
H200, B200 and L40S (vLLM 0.24.0 backend) and A100 (aiconfigurator's only A100 vLLM database, 0.14.0), TP 1-8,
batch 1-512, context 1k / 8k / 32k (static decode of 16 tokens),
cells aiconfigurator flags out of memory dropped. The fit (calibration/fitting/steptime.py) sees the per-kernel data
and the training cells only; held-out cells: every cell at context 8,000 and every cell at batch 16 or 256.

Targets: MAPE <= 10 % overall, <= 15 % per (model family, GPU), DeepSeek-V3 at batch 1 within 20 %.

Beyond the fitted models and GPUs (calibration/fitting/steptime_cv.py), every cell of the grid: leave one model out
(each model's cells predicted with that model out of every fitted term, its TPOT cells and its fused-MoE kernel shape;
target MAPE <= 10 %, no model above 20 %) and leave one GPU out (each kernel-fitted GPU's cells with the terms it would
borrow without kernel data, planner.physics.borrowed; target <= 20 %).

Speculation (calibration/fitting/speculation.py): speedup on the published training table
(profiles/data/published/published_specdec.csv), leave-one-source-out cross-validation (target MAPE <= 12 %),
and every MoE batch curve in it: does the model's speedup fall with batch as the data's does?

Acceptance library: leave-one-model-out error of the family fit per method (profiles/data/acceptance).

TTFT (planner.physics.ttft; planner.search.ttft_scenario's closed loop at a concurrency, open loop at a request rate):
published TTFT with and without speculation (profiles/data/published/published_ttft.csv); rows on a catalogue model
are predicted at their load and lengths, each error printed, the MAPE over the rows held out of the engines'
front-end fit ("check") apart from the fitting rows; the others print the measured ratio (speculation / none) only.

    python benchmarks/accuracy.py [ACCEPTANCE_DIR]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from calibration.fitting.steptime import TPOT_CSV, predict_tpot_s, read_csv, tpot_cells  # noqa: E402
from profiles import load_catalog  # noqa: E402
from profiles.catalog import load_fitted_efficiencies  # noqa: E402


def main() -> int:
    cat = load_catalog()
    fitted = load_fitted_efficiencies(cat.hardware)
    cells = [c for c in tpot_cells(read_csv(TPOT_CSV)) if (c.hardware, c.dtype) in fitted]
    skipped = len(tpot_cells(read_csv(TPOT_CSV))) - len(cells)
    rows = []
    for c in cells:
        hw = cat.hardware[c.hardware]
        ours = float(predict_tpot_s([c], cat.models, hw, fitted[(c.hardware, c.dtype)])[0])
        default = float(predict_tpot_s([c], cat.models, hw, hw.efficiency)[0])
        rows.append((c, ours * 1e3, default * 1e3))
    err = np.array([o / c.tpot_ms - 1 for c, o, _ in rows])
    err0 = np.array([d / c.tpot_ms - 1 for c, _, d in rows])
    held = np.array([c.held_out for c, _, _ in rows])
    print(f"{len(rows)} cells ({held.sum()} held out); {skipped} cells without a fitted (hardware, dtype) skipped")
    print(f"{'model':16} {'gpu':13} {'dtype':5} {'tp':>2} {'ctx':>6} | TPOT ms ours / aiconfigurator by batch")
    by = defaultdict(list)
    for c, o, _ in rows:
        by[(c.model, c.hardware, c.dtype, c.tp, c.isl)].append((c.batch, o, c.tpot_ms, c.held_out))
    for key, vals in by.items():
        cells_txt = "  ".join(f"b{b}:{o:.1f}/{a:.1f}{'*' if h else ''}" for b, o, a, h in sorted(vals))
        print(f"{key[0]:16} {key[1]:13} {key[2]:5} {key[3]:>2} {key[4]:>6} | {cells_txt}")
    print("(* held out)")
    print()
    print(f"MAPE all cells:      fitted {100 * np.mean(np.abs(err)):5.1f} %   first-planner defaults "
          f"{100 * np.mean(np.abs(err0)):5.1f} %")
    print(f"MAPE held-out cells: fitted {100 * np.mean(np.abs(err[held])):5.1f} %   first-planner defaults "
          f"{100 * np.mean(np.abs(err0[held])):5.1f} %   (target <= 10 %)")
    fam = defaultdict(list)
    for (c, _, _), e, h in zip(rows, err, held):
        family = c.model.split("-")[0] + ("-moe" if c.model in ("qwen3-30b-a3b", "deepseek-v3") else "")
        fam[(family, c.hardware)].append((e, h))
    print("per (model family, GPU), held-out MAPE (all-cells MAPE); target <= 15 %:")
    worst = 0.0
    for key in sorted(fam):
        e = np.array([x for x, _ in fam[key]])
        h = np.array([y for _, y in fam[key]])
        m_h = 100 * np.mean(np.abs(e[h])) if h.any() else float("nan")
        worst = max(worst, m_h)
        print(f"  {key[0]:12} {key[1]:13} {m_h:5.1f} % ({100 * np.mean(np.abs(e)):5.1f} %, {e.size} cells)")
    ds1 = [(o, c.tpot_ms) for c, o, _ in rows if c.model == "deepseek-v3" and c.batch == 1]
    for o, a in ds1:
        print(f"DeepSeek-V3 batch 1: ours {o:.2f} ms, aiconfigurator {a:.2f} ms "
              f"({100 * (o / a - 1):+.1f} %; target +-20 %)")
    print()
    held_out_models_and_gpus()
    print()
    res = speculation()
    engine_classes(res)
    print()
    acceptance_library(sys.argv[1] if len(sys.argv) > 1 else None)
    print()
    ttft_section(cat)
    return 0


def held_out_models_and_gpus() -> None:
    """The step-time fit beyond its models and GPUs: leave one model out, leave one GPU out (module docstring)."""
    from calibration.fitting import steptime_cv  # noqa: PLC0415

    print("== Step time beyond the fitted models and GPUs (aiconfigurator TPOT grid, every cell)")
    steptime_cv.print_errors(steptime_cv.leave_one_model_out(), target=0.10, group_target=0.20)
    shape_in = steptime_cv.leave_one_model_out(kernel_shape_out=False)
    print(f"  diagnostic, its fused-MoE kernel shape kept in the kernel fit (only its TPOT cells out): MAPE "
          f"{100 * shape_in.mape:.1f} %; " + ", ".join(f"{m} {100 * v:.1f} %" for m, v in shape_in.by_group.items()))
    steptime_cv.print_errors(steptime_cv.leave_one_gpu_out(), target=0.20)


TTFT_CSV = ROOT / "profiles" / "data" / "published" / "published_ttft.csv"


def ttft_section(cat) -> None:
    """Published TTFT rows against the model (planner.search.ttft_scenario.published_ttft_s: a closed loop at the row's
    concurrency, or an open loop at its request rate): every row on a catalogue model and GPU predicted on its own,
    its error printed; the engines' front-end times refitted on the rows marked "fit" and compared with the constants
    the planner ships (planner.physics.ttft.ENGINE_OVERHEAD_S); the MAPE over the rows marked "check" (held out of
    every fit), with and without speculation; each with/without pair's measured and modelled ratio."""
    import csv

    from planner.physics.ttft import ENGINE_OVERHEAD_S
    from planner.search.ttft_scenario import fitted_overhead_s, published_ttft_s

    with TTFT_CSV.open(newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"== TTFT: {len(rows)} published rows ({TTFT_CSV.name}), "
          f"{sum(r['role'] == 'fit' for r in rows)} fitting, {sum(r['role'] == 'check' for r in rows)} checking")
    refit = fitted_overhead_s(rows, cat)
    print("engine front-end time, fitted on the 'fit' rows / shipped: "
          + ", ".join(f"{e} {1e3 * v:.2f} / {1e3 * ENGINE_OVERHEAD_S.get(e, float('nan')):.2f} ms"
                      for e, v in sorted(refit.items())))
    print(f"{'id':20} {'role':5} {'model':16} {'gpu':9} {'load':>10} {'in/out':>9} | TTFT ms measured / ours (error)")
    ours: dict[str, float] = {}
    errs: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        load = f"c={r['concurrency']}" if r["concurrency"] else f"{r['request_rate']}/s"
        lengths = f"{r['input_tokens'] and round(float(r['input_tokens'])) or '?'}/" \
                  f"{r['output_tokens'] and round(float(r['output_tokens'])) or '?'}"
        head = f"{r['id']:20} {r['role'] or '-':5} {r['model'][:16]:16} {r['gpu'][:9]:9} {load:>10} {lengths:>9} |"
        if not r["role"]:
            print(f"{head} {float(r['ttft_ms']):,.1f} / not predicted (model, GPU or K not in the catalogue or not "
                  "stated)")
            continue
        ours[r["id"]] = o = published_ttft_s(r, cat) * 1e3
        e = o / float(r["ttft_ms"]) - 1.0
        errs[r["role"]].append(e)
        if r["role"] == "check":
            errs["check, speculation" if r["catalog_method"] != "none" else "check, none"].append(e)
        print(f"{head} {float(r['ttft_ms']):,.1f} / {o:,.1f} ({100 * e:+.0f} %)")
    pairs: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        pairs[r["pair"]].append(r)
    print("with / without speculation, per pair (measured; ours where both rows are predicted):")
    for name, group in pairs.items():
        base = next(r for r in group if r["catalog_method"] == "none")
        spec = next(r for r in group if r["catalog_method"] != "none")
        ratio = float(spec["ttft_ms"]) / float(base["ttft_ms"])
        modelled = (f", ours {ours[spec['id']] / ours[base['id']]:.2f}x" if base["id"] in ours and spec["id"] in ours
                    else "")
        print(f"  {name:12} measured {ratio:.2f}x{modelled}")
    labels = {"fit": "fitting rows (in sample)", "check": "held-out rows", "check, none": "held out, no speculation",
              "check, speculation": "held out, speculation"}
    for key, label in labels.items():
        if errs[key]:
            print(f"TTFT MAPE, {label:26} {100 * np.mean(np.abs(errs[key])):5.1f} % over {len(errs[key])} rows")


def acceptance_library(directory: str | None = None) -> None:
    """Leave-one-model-out error of the acceptance library's family fit (planner.acceptance.library): each model's
    measured curve of a method predicted from the other models' curves of that method (the planner's "family fit" tier),
    in tau (bonus token included) per K, and as the alpha shift the held-out model needed. The band the planner shows
    for that tier is at least this wide (planner.acceptance.library.family_fit;
    tests/planner/acceptance/test_acceptance_library.py)."""
    from planner.acceptance import library  # noqa: PLC0415
    from profiles.acceptance_library import load_library  # noqa: PLC0415

    cat = load_catalog()
    lib = load_library(directory, model_keys=list(cat.models), workload_keys=list(cat.workloads)) if directory \
        else cat.acceptance_library
    print(f"== Acceptance library ({lib.path or 'none'}): {len(lib.rows)} rows, {len(lib.heads)} heads")
    print("leave-one-model-out error of the family fit (every dataset, greedy; tau = acceptance length incl. bonus):")
    for method in library.METHODS:
        loo = library.leave_one_model_out(lib, method)
        if not loo.n_points:
            n = len(loo.models)
            print(f"  {method:12} {n} model(s) with chain rows: " + ("too few (needs 3)" if n else "no rows"))
            continue
        by_k = "  ".join(f"K={k}: {e:.2f}" for k, e in loo.rmse_tau_by_k)
        print(f"  {method:12} {len(loo.models)} models, {loo.n_points} points: tau MAE {loo.mae_tau:.3f}, RMSE "
              f"{loo.rmse_tau:.3f} | RMSE by K {by_k} | alpha shift RMS {loo.rmse_alpha_shift:.3f}")


def speculation():
    """Speedup on the published table: leave-one-source-out MAPE per method and the MoE batch curves."""
    from calibration.fitting import (
        curves,  # noqa: PLC0415
        speculation_run,  # noqa: PLC0415
    )
    from calibration.fitting import speculation as fs  # noqa: PLC0415

    res = speculation_run.run()
    catalog, rows, skipped, fit, cv = res.catalog, res.rows, res.skipped, res.fit, res.cv
    print(f"== Speculation: {len(rows)} published rows on serving engines from {len({r.source for r in rows})} "
          f"sources fitted, {len(res.checked)} research-loop rows checked ({len(skipped)} verified rows left out: "
          "python tools/fit_speculation.py lists why)")
    print("fitted on all serving-engine rows: " + fit.describe()
          + f"; in-sample MAPE {100 * fit.mape:.1f} %")
    print(f"leave-one-source-out speedup MAPE: {100 * cv.mape:.1f} % (target <= 12 %)")
    for m, v in cv.mape_by(lambda r: r.method).items():
        print(f"  {m:12} {100 * v:5.1f} %  ({sum(r.method == m for r in rows)} rows)")
    speculation_run.print_checked(res)
    print("MoE batch curves (speedup by batch, measured / model):")
    for c in curves.batch_curves(catalog, fs.fitted_params(fit), rows):
        pairs = "  ".join(f"b{b:g}: {m:.2f}/{p:.2f}" for b, m, p in zip(c.batches, c.measured, c.predicted))
        print(f"  {c.name:48} {pairs}  | falls: data {c.falls_in_data}, model {c.falls_in_model}")
    for hw in ("h200", "mi300x"):
        sweep = curves.deepseek_mtp_sweep(catalog, hardware=hw)
        print(f"  DeepSeek-V3 MTP K=1, 8x{hw} fp8, "
              "tau 1.85, batch 1..256: " + " ".join(f"{x:.2f}" for x in sweep)
              + f"  | falls: {bool((sweep[1:] <= sweep[:-1]).all())}")
    return res


def engine_classes(res) -> None:
    """The engine model's leave-one-source-out MAPE per method, engine and dense/MoE class, the side-of-1.0
    agreement and whether each measured batch curve moves in the model as in the data."""
    from calibration.fitting import engines as fe  # noqa: PLC0415

    cv, cat = res.engine_cv, res.catalog
    if cv is None:
        return
    print(f"== Engine model (per-engine t_spec_s, t_fixed_draft_s): leave-one-source-out MAPE {100 * cv.mape:.1f} % "
          f"over {len(cv.rows)} rows (one set for every engine: {100 * res.cv.mape:.1f} %; target <= 12 %)")
    for title, keyf in (("method", lambda r: r.method), ("engine", lambda r: r.engine),
                        ("target", lambda r: fe.target_kind(r, cat))):
        n = defaultdict(int)
        for r in cv.rows:
            n[keyf(r)] += 1
        print(f"  by {title}: " + ", ".join(f"{k} {100 * v:.1f} % ({n[k]})" for k, v in cv.mape_by(keyf).items()))
    print("  by class (engine/target; target <= 20 % where >= 3 rows):")
    for (eng, kind), (m, c) in fe.class_errors(cv, cat).items():
        verdict = "too few rows" if c < 3 else ("meets" if m <= 0.20 else "ABOVE TARGET: the app says so")
        print(f"    {eng}/{kind:6} {100 * m:5.1f} % ({c} rows) {verdict}")
    ok, n, wrong = fe.side_of_one(cv)
    print(f"  side of 1.0x (held out): {ok}/{n} = {100 * ok / n:.0f} % right (target >= 90 %)"
          + (f"; wrong: {', '.join(wrong)}" if wrong else ""))
    curves = fe.curve_directions(cv)
    print(f"  measured batch curves whose direction the model follows (held out): "
          f"{sum(c[4] for c in curves)}/{len(curves)}")
    for name, b, m, p, same in curves:
        pairs = "  ".join(f"b{x:g}: {y:.2f}/{z:.2f}" for x, y, z in zip(b, m, p))
        print(f"    {name[:48]:48} {pairs}  | {'same direction' if same else 'DIFFERS'}")
    lto = fe.leave_one_target_out_sbd(res.rows, cat)
    if lto.rows:
        by = lto.mape_by(fe.sbd_target)
        ok, n, _ = fe.side_of_one(lto)
        print(f"  diagnostic, leave-one-target-out within SpecBundle ({len(lto.rows)} rows, the rest trained on): "
              f"MAPE {100 * lto.mape:.1f} %, side of 1.0x {ok}/{n}; by target: "
              + ", ".join(f"{t} {100 * v:.1f} %" for t, v in by.items()))


if __name__ == "__main__":
    raise SystemExit(main())
