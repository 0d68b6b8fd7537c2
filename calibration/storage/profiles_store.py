"""Calibrated profiles: the fitted machine parameters saved under a name, beside (never over) the shipped
defaults in profiles/data. Files live in $SPECPLAN_CALIBRATED_DIR or ~/.local/share/specplan/calibrated,
one YAML per profile; the app lists them and the planner uses the selected one's efficiency.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def calibrated_dir() -> Path:
    env = os.environ.get("SPECPLAN_CALIBRATED_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "specplan" / "calibrated"


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise ValueError(f"profile name={name!r} not allowed: lowercase letters, digits, '-' or '_', 1-64 chars")


@dataclass(frozen=True)
class CalibratedProfile:
    name: str
    hardware: str  # the machine it was measured on (e.g. "cpu-local-2c", or the catalogue key "h200")
    eta_bw: float
    eta_flops: float
    t_fixed_s: float
    t_fixed_draft_s: float
    t_spec_s: float
    stderr: dict[str, float]
    holdout_mape_pct: float
    created: str  # ISO date
    source: str
    # A GPU run refines the catalogue entry it ran on (calibration.analysis.predict.machine_for): the other step-time
    # terms stay at that entry's kernel fit. "" for CPU profiles (this machine's CPU as the device).
    base_hardware: str = ""
    device_count: int = 0
    engine_version: str = ""
    dtype: str = "bf16"
    # Per planner method (calibration.analysis.report.profile_method_terms): the draft pass and per-step terms the run
    # measured for it, with 95 % intervals; the planner uses them for that method on this hardware entry.
    method_terms: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # Measured acceptance per planner method and workload (calibration.analysis.report.profile_acceptance): tau and its
    # 95 % interval at the measured K, vLLM's convention (mean acceptance length, bonus token included).
    acceptance: dict[str, dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def efficiency(self, catalog: Any | None = None) -> Any:
        """planner.types.Efficiency with the fitted values: on a catalogue GPU, that entry's fitted parameters
        (planner.search.scenario.efficiency_for) with the calibrated ones in their place; on a CPU, the fitted values
        alone (allreduce latency 0: one device)."""
        from planner.types import Efficiency, Sourced

        fitted = {"eta_bw": self.eta_bw, "eta_flops": self.eta_flops, "t_fixed_s": self.t_fixed_s,
                  "t_fixed_draft_s": self.t_fixed_draft_s, "t_spec_s": self.t_spec_s,
                  "method_terms": tuple(sorted((m, float(t["t_fixed_draft_s"]), float(t["t_spec_s"]))
                                               for m, t in self.method_terms.items())),
                  "calibrated_acceptance": tuple(sorted(
                      (m, w, int(a["k"]), float(a["acceptance_length"]), float(a["acceptance_length_95"][0]),
                       float(a["acceptance_length_95"][1]))
                      for m, by_w in self.acceptance.items() for w, a in by_w.items()))}
        if self.base_hardware:
            from planner.search.scenario import efficiency_for

            cat = catalog if catalog is not None else _load_catalog()
            base = efficiency_for(cat, self.base_hardware, self.dtype)
            return dataclasses.replace(base, **fitted, calibrated=True, source=Sourced(
                f"{self.source}; other terms: {base.source.source}", self.created))
        return Efficiency(**fitted, allreduce_latency_s=0.0, calibrated=True, source=Sourced(self.source, self.created))

    def hardware_spec(self, catalog: Any | None = None) -> Any:
        """planner.types.Hardware with the calibrated efficiency: the catalogue entry the run measured (its
        peaks, memory and prices) for a GPU profile, this machine's CPU (profiles.cpu_hardware) otherwise."""
        if self.base_hardware:
            cat = catalog if catalog is not None else _load_catalog()
            hw = cat.hardware[self.base_hardware]
            engine = f", {self.engine_version}" if self.engine_version else ""
            return dataclasses.replace(hw, efficiency=self.efficiency(cat), label=(
                f"{hw.label}, calibrated {self.created} ({self.device_count} GPU{'s' if self.device_count != 1 else ''}"
                f"{engine})"))
        from profiles import cpu_hardware

        return cpu_hardware(efficiency=self.efficiency())


def _load_catalog() -> Any:
    from profiles import load_catalog

    return load_catalog()


def check_new_profile_name(name: str) -> Path:
    """The path a new profile `name` would get; ValueError for a name that is not allowed (it could leave
    the folder: '../x'), FileExistsError for one that is taken. Nothing is written."""
    _check_name(name)
    path = calibrated_dir() / f"{name}.yaml"
    if path.exists():
        raise FileExistsError(f"calibrated profile {name!r} exists at {path}; pick another name")
    return path


def save_profile(profile: CalibratedProfile, *, overwrite: bool = False) -> Path:
    if overwrite:
        _check_name(profile.name)
        path = calibrated_dir() / f"{profile.name}.yaml"
    else:
        path = check_new_profile_name(profile.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: getattr(profile, k) for k in profile.__dataclass_fields__}
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(path)
    return path


def list_profiles() -> list[str]:
    d = calibrated_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def load_profile(name: str) -> CalibratedProfile:
    _check_name(name)
    path = calibrated_dir() / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"calibrated profile {name!r} not found; available: {list_profiles()}")
    data = yaml.safe_load(path.read_text())
    return CalibratedProfile(**data)


def today() -> str:
    return dt.date.today().isoformat()
