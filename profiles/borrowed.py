"""Loader of the borrowed step-time terms (planner/physics/borrowed.py) for GPUs without kernel data: the end-to-end
fits of profiles/data/fitted/steptime_borrowed.yaml (tools/fit_borrowed_steptime.py), applied at catalogue load."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from planner.physics.borrowed import BorrowFit, borrowed_efficiencies, fit_for, nearest_donor, twin_of
from planner.physics.step_scope import arch_family
from planner.types import Efficiency, Hardware

BORROWED_YAML = Path(__file__).resolve().parent / "data" / "fitted" / "steptime_borrowed.yaml"


def load_borrow_fits(path: str | os.PathLike | None = None) -> dict[str, BorrowFit]:
    """{hardware: BorrowFit} from the YAML; empty when the file is absent."""
    p = Path(path) if path else BORROWED_YAML
    if not p.is_file():
        return {}
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    out = {}
    for name, e in (doc.get("entries") or {}).items():
        params = e.get("params") or {}
        if "overhead_scale" not in params:
            raise ValueError(f"{p.name} entry {name!r}: params.overhead_scale missing (a mapping {{value: ...}})")
        eta = params.get("eta_bw") or {}
        out[str(name)] = BorrowFit(
            overhead_scale=float(params["overhead_scale"]["value"]),
            # a held eta_bw is the hardware's own assumption: not replaced
            eta_bw=None if "prior" in eta or "value" not in eta else float(eta["value"]),
            tpot_error=float(e["tpot_error"]),
            source=f"{e['source']} (fit error {100 * float(e['fit_mape']):.0f} %, leave-one-out "
                   f"{100 * float(e['loo_mape']):.0f} %)",
            date=str(e["date"]))
    return out


def load_borrowed(hardware: Mapping[str, Hardware], fitted: Mapping[tuple[str, str], Efficiency],
                  path: str | os.PathLike | None = None,
                  fitted_error: Mapping[tuple[str, str], float] | None = None,
                  ) -> tuple[dict[tuple[str, str], Efficiency], dict[tuple[str, str], float]]:
    """({(GPU, dtype): borrowed Efficiency}, {(GPU, dtype): TPOT band}) for every GPU without kernel data."""
    return borrowed_efficiencies(hardware, fitted, load_borrow_fits(path), fitted_error)


def borrowed_fields(catalog, steptime_doc: Mapping, path: str | os.PathLike | None = None) -> dict:
    """The catalogue fields of the borrowed sets, for the catalogue's hardware as it stands (the shipped table, or one
    with a user's GPU added): borrowed_efficiency, fitted_tpot_error (the fits' held-out errors and the bands),
    fitted_families and borrowed_donors (load_scopes)."""
    errors = {(e["hardware"], e["dtype"]): float(e["tpot_mape_held_out"])
              for e in (steptime_doc.get("entries") or {}).values() if "tpot_mape_held_out" in e}
    borrowed, bands = load_borrowed(catalog.hardware, catalog.fitted_efficiency, path, errors)
    cat = dataclasses.replace(catalog, borrowed_efficiency=borrowed)
    return {"borrowed_efficiency": borrowed, "fitted_tpot_error": {**bands, **errors},
            **load_scopes(steptime_doc, cat, path)}


def load_scopes(steptime_doc: Mapping, catalog, borrowed_path: str | os.PathLike | None = None) -> dict:
    """The catalogue fields planner.physics.step_scope reads: {(GPU, dtype): architecture families of the models in that
    fit's TPOT cells} (steptime_vllm.yaml's `tpot_models`; a model outside the catalogue is skipped) and, for every
    borrowed set, {(GPU, dtype): (donor fit key, overhead scale)}."""
    families = {}
    for e in (steptime_doc.get("entries") or {}).values():
        models = [catalog.models[m] for m in e.get("tpot_models") or () if m in catalog.models]
        if models:
            families[(e["hardware"], e["dtype"])] = frozenset(arch_family(m) for m in models)
    fits = load_borrow_fits(borrowed_path)
    donors = {}
    for key in catalog.borrowed_efficiency:
        donor = nearest_donor(key[0], key[1], catalog.hardware, catalog.fitted_efficiency)
        fit = None if twin_of(key[0], catalog.hardware, catalog.fitted_efficiency) else \
            fit_for(key[0], catalog.hardware, fits)
        if donor is not None:
            donors[key] = (donor, fit.overhead_scale if fit else 1.0)
    return {"fitted_families": families, "borrowed_donors": donors}
