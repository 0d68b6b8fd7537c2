"""The catalogue the app plans with: the shipped profiles plus each calibrated profile
(calibration.storage.profiles_store) as a hardware entry 'calibrated-<name>', labelled with its fit date and held-out
error."""

from __future__ import annotations

import dataclasses
from typing import Any

from calibration.storage.profiles_store import calibrated_dir, load_profile

CALIBRATED_PREFIX = "calibrated-"


def calibrated_files() -> tuple[tuple[str, float], ...]:
    """(name, modification time) of each calibrated profile file: the key a cache of the catalogue keeps."""
    d = calibrated_dir()
    return tuple(sorted((p.stem, p.stat().st_mtime) for p in d.glob("*.yaml"))) if d.is_dir() else ()


def with_calibrated(catalog: Any, names: tuple[str, ...]) -> Any:
    """`catalog` with a hardware entry per calibrated profile in `names`; a damaged file is left out (the
    Calibrate page lists it) rather than taking the app down."""
    extra = {}
    for name in names:
        try:
            prof = load_profile(name)
        except (OSError, ValueError, TypeError):
            continue
        hw = prof.hardware_spec(catalog)
        extra[CALIBRATED_PREFIX + name] = dataclasses.replace(
            hw, name=CALIBRATED_PREFIX + name,
            label=f"Calibrated: {name} ({hw.label}; fitted {prof.created}, held-out MAPE "
                  f"{prof.holdout_mape_pct:.1f} %)")
    return catalog.with_hardware(extra) if extra else catalog
