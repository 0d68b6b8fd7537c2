"""The price rule, in one place: the $/GPU-hour a plan pays is the price the user entered, whatever its value (the
list midpoint too), else the hardware's list midpoint. Every room that needs a price or asks whether it was entered
(the context, the scenario, the spend, the hardware comparison, the assumptions, the Monte Carlo, the CLI, the pages)
calls `gpu_price`."""

from __future__ import annotations

from dataclasses import dataclass

from planner.types import Hardware


@dataclass(frozen=True)
class GpuPrice:
    """The $/GPU-hour a plan pays and whether the user entered it."""

    usd_per_gpu_hour: float
    entered: bool  # True: the user typed it, whatever its value (the list midpoint too); False: the list midpoint


def gpu_price(hw: Hardware, entered_usd_per_gpu_hour: float | None) -> GpuPrice:
    """The price rule, in one place: the price the user entered (None: none), else the hardware's list midpoint.
    An entered price is never replaced by a draw from the list range (planner.uncertainty.sensitivity)."""
    if entered_usd_per_gpu_hour is not None:
        return GpuPrice(float(entered_usd_per_gpu_hour), True)
    return GpuPrice(float(hw.usd_per_gpu_hour_mid), False)


def price_label(hw: Hardware, price: GpuPrice) -> str:
    """Where a price comes from, for a label: 'entered' only for a price the user typed, else 'list price (source,
    date)' (the midpoint of the hardware's list range)."""
    return "entered" if price.entered else f"list price ({hw.price.source}, {hw.price.date})"
