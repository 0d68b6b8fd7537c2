"""The Plan page's hardware comparison: shown when asked for, at the prices entered, and a price travels in the
link."""

from __future__ import annotations

import dataclasses

import pytest

from planner.decision.hardware_choice import compare_hardware
from views.sidebar import state as S


def _table(at):
    """The comparison's table (AppTest does not expose a dataframe's key): the one with a GPU column."""
    return next(d.value for d in at.dataframe if "GPU" in d.value.columns)


def test_plan_page_compares_gpu_types_and_a_price_round_trips_in_the_url(app, cat):
    at = app({"hw_compare": "true"})
    assert at.toggle(key="hw_compare").value is True
    table = _table(at)
    assert list(table["GPU"]) == [hw.label for hw in cat.hardware.values()]
    # another GPU type serves the default traffic for less (4-bit weights on a B200): the verdict names it
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert "A cheaper GPU for this traffic" in rec and cat.hardware["h100-sxm"].label in rec
    # a price entered for another GPU type reprices its fleets and goes to the link
    at.number_input(key="gpu_price_h200").set_value(1.5).run()
    assert not at.exception, at.exception
    q = dict(at.query_params)
    assert q["gpu_price_h200"] == "1.5" and q["hw_compare"] == "true"
    at2 = app(q)
    assert at2.number_input(key="gpu_price_h200").value == pytest.approx(1.5)
    row = _table(at2).set_index("GPU").loc[cat.hardware["h200"].label]
    assert row["$/GPU-hour"] == pytest.approx(1.5)
    # the table's bills are the planner's at that price, for the page's own request (sidebar defaults)
    req = dataclasses.replace(_default_request(cat), hardware_prices=(("h200", 1.5),))
    expect = compare_hardware(req, cat).choice("h200")
    assert row["$/month without speculation"] == pytest.approx(round(expect.no_speculation.usd_per_month))


def _default_request(cat):
    from planner.request import PlanRequest

    d = S.DEFAULTS
    return PlanRequest(model=d["model"], hardware=d["hardware"], tp=d["tp"], dtype=d["dtype"], tpot_slo_ms=d["slo"],
                       monthly_output_tokens=d["volume_b"] * 1e9, workload=d["workload"], language=d["language"],
                       daily_shape="flat")


def test_a_comparison_price_typed_back_to_the_list_midpoint_stays_entered(app, cat):
    """Entered means typed, whatever the value (views.sidebar.price): a GPU type's price typed to its list midpoint is
    shown as entered, and the link carries that it was typed."""
    mid = cat.hardware["h200"].usd_per_gpu_hour_mid
    at = app({"hw_compare": "true"})
    assert _table(at).set_index("GPU").loc[cat.hardware["h200"].label]["price"] == "list midpoint"
    at.number_input(key="gpu_price_h200").set_value(mid + 1.0).run()
    at.number_input(key="gpu_price_h200").set_value(mid).run()
    assert not at.exception, at.exception
    row = _table(at).set_index("GPU").loc[cat.hardware["h200"].label]
    assert row["price"] == "entered" and row["$/GPU-hour"] == pytest.approx(mid)
    assert dict(at.query_params)["gpu_prices_set"] == "h200"
