"""Which prices the visitor entered: the sidebar's $/GPU-hour and the hardware comparison's per GPU type. Entered
means typed (or carried by a link), whatever the value, the list midpoint included; the plan then uses it as given
and the Monte Carlo never draws a price over it (planner.price.gpu_price holds the rule)."""

from __future__ import annotations

import streamlit as st

from planner.price import gpu_price
from planner.request import PlanRequest
from planner.types import Hardware

PRICE_SET = "price_set"  # session / URL key: True once the sidebar's price was typed
GPU_PRICE_PREFIX = "gpu_price_"  # + GPU type: its $/GPU-hour in the hardware comparison (views.parts.hardware)
GPU_PRICES_SET = "gpu_prices_set"  # session / URL key: the GPU types whose comparison price was typed, comma-separated


def typed() -> None:
    """on_change of the sidebar's price."""
    st.session_state[PRICE_SET] = True


def on_hardware_change(catalog) -> None:
    """Another GPU type: its list midpoint, not entered, until a price is typed."""
    ss = st.session_state
    ss["price"] = catalog.hardware[ss["hardware"]].usd_per_gpu_hour_mid
    ss[PRICE_SET] = False


def entered_price() -> float | None:
    """The sidebar's price for the request: the number when typed, None (the list midpoint) otherwise."""
    ss = st.session_state
    return float(ss["price"]) if ss.get(PRICE_SET) else None


def price_of(req: PlanRequest, hw: Hardware) -> float:
    return gpu_price(hw, req.usd_per_gpu_hour).usd_per_gpu_hour


def mark_gpu_price_entered(name: str) -> None:
    """on_change of GPU type `name`'s comparison price (and a link carrying it)."""
    ss = st.session_state
    names = {n for n in str(ss.get(GPU_PRICES_SET, "")).split(",") if n} | {name}
    ss[GPU_PRICES_SET] = ",".join(sorted(names))


def gpu_price_entered(name: str) -> bool:
    return name in str(st.session_state.get(GPU_PRICES_SET, "")).split(",")


def from_link(key: str) -> None:
    """A price a link carries is an entered one."""
    if key == "price":
        st.session_state[PRICE_SET] = True
    elif key.startswith(GPU_PRICE_PREFIX):
        mark_gpu_price_entered(key.removeprefix(GPU_PRICE_PREFIX))
