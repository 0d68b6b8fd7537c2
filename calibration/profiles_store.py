"""Calibrated profiles: the fitted machine parameters saved under a name, beside (never over) the shipped
defaults in profiles/data. Files live in $SPECPLAN_CALIBRATED_DIR or ~/.local/share/specplan/calibrated,
one YAML per profile; the app lists them and the planner uses the selected one's efficiency.
"""

from __future__ import annotations

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
    hardware: str  # the hardware entry it calibrates (e.g. "cpu-local-2c")
    eta_bw: float
    eta_flops: float
    t_fixed_s: float
    t_fixed_draft_s: float
    t_spec_s: float
    stderr: dict[str, float]
    holdout_mape_pct: float
    created: str  # ISO date
    source: str

    def efficiency(self) -> Any:
        """planner.types.Efficiency with the fitted values (allreduce latency 0: one device)."""
        from planner.types import Efficiency, Sourced

        return Efficiency(eta_bw=self.eta_bw, eta_flops=self.eta_flops, t_fixed_s=self.t_fixed_s,
                          t_fixed_draft_s=self.t_fixed_draft_s, allreduce_latency_s=0.0,
                          source=Sourced(self.source, self.created), t_spec_s=self.t_spec_s)

    def hardware_spec(self) -> Any:
        """This machine's planner.types.Hardware with the calibrated efficiency (CPU profiles)."""
        from profiles import cpu_hardware

        return cpu_hardware(efficiency=self.efficiency())


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
