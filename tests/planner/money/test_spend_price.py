"""A spend without a typed price plans at the GPU's list midpoint, and that price stays a list price: the plan's
request leaves it unentered (so the Monte Carlo may draw it and every page labels it as listed), with the same
bills as the same price typed in. A typed price and the price a fixed fleet's spend implies are carried as given."""

from __future__ import annotations

import dataclasses

import pytest

from planner.money.spend import request_for_spend, volume_for_spend
from planner.plan import PlanRequest, plan
from planner.price import gpu_price

REQ = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, spend_usd_per_month=150_000.0)


def test_a_spends_list_price_stays_unentered_with_the_same_bills(catalog):
    sv = volume_for_spend(REQ, catalog)
    assert sv.price_listed
    scaled = request_for_spend(REQ, sv)
    hw = catalog.hardware["h100-sxm"]
    assert scaled.usd_per_gpu_hour is None and not gpu_price(hw, scaled.usd_per_gpu_hour).entered
    assert gpu_price(hw, None).usd_per_gpu_hour == sv.usd_per_gpu_hour
    listed = plan(REQ, catalog)
    assert listed.request.usd_per_gpu_hour is None
    typed = plan(dataclasses.replace(REQ, usd_per_gpu_hour=sv.usd_per_gpu_hour), catalog)
    assert typed.request.usd_per_gpu_hour == pytest.approx(sv.usd_per_gpu_hour)
    assert listed.reference_fleet.usd_per_month == pytest.approx(typed.reference_fleet.usd_per_month)
    assert listed.best_fleet.usd_per_month == pytest.approx(typed.best_fleet.usd_per_month)


def test_a_typed_or_implied_price_is_carried_as_given(catalog):
    typed = dataclasses.replace(REQ, usd_per_gpu_hour=3.0)
    sv = volume_for_spend(typed, catalog)
    assert not sv.price_listed and request_for_spend(typed, sv).usd_per_gpu_hour == 3.0
    fixed = dataclasses.replace(REQ, spend_gpus=32, billing="fixed")
    sv = volume_for_spend(fixed, catalog)
    assert not sv.price_listed
    assert request_for_spend(fixed, sv).usd_per_gpu_hour == pytest.approx(150_000.0 / (32 * 730.5))
