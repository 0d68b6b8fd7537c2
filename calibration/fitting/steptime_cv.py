"""Held-out error of the step-time fit (calibration/fitting/steptime.py) beyond the models and GPUs it was fitted on.

Two cross-validations on aiconfigurator's TPOT grid (profiles/data/fitted/aiconfigurator_tpot.csv), every cell of the
grid (training and held-out cells alike), as a relative error predicted / aiconfigurator - 1:

- leave one model out (LOMO): for each model of the grid, every fit refitted without it: its TPOT cells out of every
  end-to-end fit on every GPU, and its fused-MoE kernel shape (steptime.MOE_ROUTING) out of every kernel fit (a GPU
  then fits its fused-MoE terms on the other measured MoE shapes: the extract holds every shape aiconfigurator
  measured, in any kernel dtype, or keeps none). Kernel rows are measurements, not TPOT cells: the MLA decode-module
  rows (DeepSeek-V3's block, the only MLA shape measured) stay in, so a held-out MLA model's attention blocks are
  looked up in the kernel table, never fitted from its own cells. Its cells are
  priced as the planner prices a model no fit saw: each (GPU, dtype)'s own refit, a (GPU, dtype) left with no cells on
  its kernel fit plus the same GPU's bf16 per-step and per-layer terms, both scoped to the model's architecture family
  as planner.physics.step_scope.scoped does (a family no refit covers keeps the GPU's own terms).
- leave one GPU out (LOGO): for each kernel-fitted GPU, its cells priced with the terms it would borrow if it had no
  kernel data (planner.physics.borrowed.borrowed_efficiencies over the other GPUs' fits, with the shipped end-to-end
  borrow fits), scoped the same way.

    errors = leave_one_model_out();  errors.mape, errors.by_group["deepseek-v3"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.fitting.steptime import (
    DTYPE_KERNELS,
    EXCLUDED,
    HARDWARE,
    OPS_CSV,
    TPOT_CSV,
    HardwareFit,
    TpotCell,
    fit_hardware,
    predict_tpot_s,
    read_csv,
    tpot_cells,
)
from planner.physics.borrowed import borrowed_efficiencies, fit_for, nearest_donor
from planner.physics.step_scope import arch_family, scoped
from planner.types import Efficiency, ModelSpec


@dataclass(frozen=True)
class HeldOutErrors:
    """Relative TPOT errors (predicted / measured - 1) of one cross-validation, grouped by what was held out (a model
    for LOMO, a GPU for LOGO); `mape` over every cell, `by_group` the MAPE of each group."""

    kind: str
    residuals: Mapping[str, np.ndarray]

    @property
    def by_group(self) -> dict[str, float]:
        return {g: float(np.mean(np.abs(r))) for g, r in self.residuals.items()}

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(np.concatenate(list(self.residuals.values())))))

    @property
    def worst(self) -> tuple[str, float]:
        g = max(self.by_group, key=self.by_group.__getitem__)
        return g, self.by_group[g]

    @property
    def cells(self) -> int:
        return int(sum(r.size for r in self.residuals.values()))


def moe_shape(model: ModelSpec) -> str | None:
    """The model's fused-MoE shape prefix hidden:inter:E:k as in the extract's op names (None for a dense model)."""
    if not model.experts:
        return None
    layers = model.moe_layers or model.layers
    inter = round(model.expert_params_b * 1e9 / (3 * model.hidden_size * layers))
    return f"{model.hidden_size}:{inter}:{model.experts}:{model.experts_per_token}"


def without_moe_shape(ops: Sequence[dict[str, str]], shape: str | None) -> list[dict[str, str]]:
    """The kernel rows without the fused-MoE rows of `shape` (hidden:inter:E:k, any TP and distribution)."""
    if shape is None:
        return list(ops)
    return [r for r in ops if not (r["op"].startswith("moe:") and ":".join(r["op"].split(":")[1:5]) == shape)]


def refit(ops: Sequence[dict[str, str]], cells: Sequence[TpotCell], catalog, versions: Mapping[str, str], *,
          hardware: Sequence[str] = HARDWARE, need: set[tuple[str, str]] | None = None) -> list[HardwareFit]:
    """steptime.run_fit on these rows and cells; (GPU, dtype) pairs in `need` are fitted even with no cells left
    (kernel stages, the bf16 fit's per-step and per-layer terms)."""
    have = {(c.hardware, c.dtype) for c in cells} | (need or set())
    out = []
    for h in hardware:
        bf16 = None
        for d in DTYPE_KERNELS:
            if (h, d) not in have or (h, d) in EXCLUDED:
                continue
            fit = fit_hardware(h, d, list(ops), cells, catalog, date="", engine_version=versions[h], bf16=bf16)
            bf16 = fit if d == "bf16" else bf16
            out.append(fit)
    return out


def _families(fits: Sequence[HardwareFit], models: Mapping[str, ModelSpec]) -> dict[tuple[str, str], frozenset]:
    return {(f.hardware, f.dtype): frozenset(arch_family(models[m]) for m in f.models) for f in fits if f.models}


def _predict(cells: Sequence[TpotCell], catalog, eff_for) -> np.ndarray:
    """Relative errors of `cells`, each priced with eff_for(cell) (an Efficiency)."""
    pred = np.array([predict_tpot_s([c], catalog.models, catalog.hardware[c.hardware], eff_for(c))[0] for c in cells])
    return pred / (np.array([c.tpot_ms for c in cells]) * 1e-3) - 1.0


def _inputs(ops_csv: Path, tpot_csv: Path):
    from profiles import load_catalog  # noqa: PLC0415

    rows = read_csv(tpot_csv)
    return load_catalog(), read_csv(ops_csv), tpot_cells(rows), {r["hardware"]: r["engine_version"] for r in rows}


def leave_one_model_out(ops_csv: Path = OPS_CSV, tpot_csv: Path = TPOT_CSV, *,
                        models: Sequence[str] | None = None, kernel_shape_out: bool = True) -> HeldOutErrors:
    """LOMO (module docstring) over every model of the grid on a fitted (GPU, dtype), or over `models`.
    kernel_shape_out=False keeps the model's fused-MoE kernel rows (a diagnostic: the error left when the kernel table
    has the model's shape, as a broader extract would; only its TPOT cells are held out)."""
    catalog, ops, cells, versions = _inputs(ops_csv, tpot_csv)
    cells = [c for c in cells if c.hardware in HARDWARE and (c.hardware, c.dtype) not in EXCLUDED]
    out = {}
    for name in models or sorted({c.model for c in cells}):
        spec = catalog.models[name]
        mine = [c for c in cells if c.model == name]
        kept = without_moe_shape(ops, moe_shape(spec)) if kernel_shape_out else ops
        fits = refit(kept, [c for c in cells if c.model != name], catalog,
                     versions, need={(c.hardware, c.dtype) for c in mine})
        fitted = {(f.hardware, f.dtype): f.efficiency for f in fits}
        families = _families(fits, catalog.models)

        def eff_for(c: TpotCell, fitted=fitted, families=families, spec=spec) -> Efficiency:
            key = (c.hardware, c.dtype)
            # a (GPU, dtype) with no cells left runs on the per-step and per-layer terms of the GPU's bf16 fit, in
            # that fit's scope
            scope_key = key if key in families else (c.hardware, "bf16")
            return scoped(fitted[key], scope_key, spec, fitted=fitted, families=families, table=catalog.hardware)

        out[name] = _predict(mine, catalog, eff_for)
    return HeldOutErrors("model", out)


def leave_one_gpu_out(ops_csv: Path = OPS_CSV, tpot_csv: Path = TPOT_CSV, *,
                      hardware: Sequence[str] = HARDWARE) -> HeldOutErrors:
    """LOGO (module docstring) over the kernel-fitted GPUs."""
    from profiles.borrowed import load_borrow_fits  # noqa: PLC0415

    catalog, ops, cells, versions = _inputs(ops_csv, tpot_csv)
    fits = refit(ops, cells, catalog, versions)
    borrow_fits = load_borrow_fits()
    out = {}
    for gpu in hardware:
        others = [f for f in fits if f.hardware != gpu]
        fitted = {(f.hardware, f.dtype): f.efficiency for f in others}
        families = _families(others, catalog.models)
        table = {n: hw for n, hw in catalog.hardware.items() if n == gpu or n in {k[0] for k in fitted}}
        borrowed, _ = borrowed_efficiencies(table, fitted, borrow_fits)
        mine = [c for c in cells if c.hardware == gpu and (c.hardware, c.dtype) not in EXCLUDED]

        def eff_for(c: TpotCell, fitted=fitted, families=families, borrowed=borrowed, table=table) -> Efficiency:
            donor = nearest_donor(c.hardware, c.dtype, table, fitted)
            eff = borrowed[(c.hardware, c.dtype)]
            fit = fit_for(c.hardware, table, borrow_fits)
            scale = fit.overhead_scale if fit else 1.0
            return scoped(eff, donor, catalog.models[c.model], fitted=fitted, families=families, table=table,
                          scale=scale)

        out[gpu] = _predict(mine, catalog, eff_for)
    return HeldOutErrors("GPU", out)


def print_errors(errors: HeldOutErrors, *, target: float, group_target: float | None = None) -> None:
    """The overall and per-group MAPE, each group's bias and worst cell, and whether the targets are met."""
    ok = errors.mape <= target and (group_target is None or errors.worst[1] <= group_target)
    print(f"leave-one-{errors.kind}-out TPOT MAPE over {errors.cells} cells: {100 * errors.mape:.1f} % (target "
          f"<= {100 * target:.0f} %" + (f", no {errors.kind} above {100 * group_target:.0f} %" if group_target else "")
          + f"): {'meets' if ok else 'ABOVE TARGET'}")
    for g, r in errors.residuals.items():
        print(f"  {g:16} {100 * float(np.mean(np.abs(r))):5.1f} %  (bias {100 * float(np.mean(r)):+5.1f} %, worst "
              f"cell {100 * float(np.max(np.abs(r))):5.1f} %, {r.size} cells)")

