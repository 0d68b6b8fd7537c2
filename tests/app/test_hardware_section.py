"""The Plan page's hardware comparison: shown when asked for, at the prices entered, and a price travels in the
link."""

from __future__ import annotations

import dataclasses

import pytest

from planner.decision.hardware_choice import compare_hardware
from planner.formatting import fmt_usd
from views.sidebar import state as S


def _table(at):
    """The comparison's table (AppTest does not expose a dataframe's key): the one with a GPU column."""
    return next(d.value for d in at.dataframe if "GPU" in d.value.columns)


def test_plan_page_compares_gpu_types_and_a_price_round_trips_in_the_url(app, cat):
    at = app({"hw_compare": "true"})
    assert at.toggle(key="hw_compare").value is True
    table = _table(at)
    assert list(table["GPU"]) == [hw.label for hw in cat.hardware.values()]
    # like for like by default: every fleet runs the sidebar's bf16 weights, and the table's money is formatted
    table = _table(at)
    for col in ("fleet without", "fleet with"):
        assert all(", bf16" in v or v.startswith("cannot") or v.startswith("none") for v in table[col]), col
    assert all(v == "-" or (v.startswith("$") and v.endswith("/month")) for v in table["without speculation"])
    assert not at.checkbox(key="hw_other_formats").value
    # a price entered for another GPU type reprices its fleets and goes to the link
    at.number_input(key="gpu_price_h200").set_value(1.5).run()
    assert not at.exception, at.exception
    q = dict(at.query_params)
    assert q["gpu_price_h200"] == "1.5" and q["hw_compare"] == "true"
    at2 = app(q)
    assert at2.number_input(key="gpu_price_h200").value == pytest.approx(1.5)
    row = _table(at2).set_index("GPU").loc[cat.hardware["h200"].label]
    assert row["$/GPU-hour"] == "$1.50" and row["price"] == "entered"
    # the table's bills are the planner's at that price, for the page's own request (sidebar defaults)
    req = dataclasses.replace(_default_request(cat), hardware_prices=(("h200", 1.5),))
    expect = compare_hardware(req, cat).choice("h200")
    assert row["without speculation"] == f"{fmt_usd(expect.no_speculation.usd_per_month)}/month"


def test_other_weight_formats_are_a_switch_that_says_what_it_changed(app, cat):
    at = app({"hw_compare": "true", "hw_other_formats": "true"})
    assert not at.exception, at.exception
    assert at.checkbox(key="hw_other_formats").value is True
    said = " ".join(i.value for i in at.info)
    assert "cheaper weights, not only a cheaper GPU" in said
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert "cheaper weights" in rec


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
    h200 = cat.hardware["h200"]
    listed = f"list price ({h200.price.source}, {h200.price.date})"
    assert _table(at).set_index("GPU").loc[h200.label]["price"] == listed
    at.number_input(key="gpu_price_h200").set_value(mid + 1.0).run()
    at.number_input(key="gpu_price_h200").set_value(mid).run()
    assert not at.exception, at.exception
    row = _table(at).set_index("GPU").loc[cat.hardware["h200"].label]
    assert row["price"] == "entered" and row["$/GPU-hour"] == fmt_usd(mid, 2)
    assert dict(at.query_params)["gpu_prices_set"] == "h200"


def test_served_best_the_table_and_chart_show_disaggregated_fleets_beside_co_located(app, cat):
    """Issue 33: with serving "best" every GPU type shows its disaggregated fleets with and without speculation
    beside the co-located ones, the planner's numbers; co-located serving shows none."""
    from tests.app.pages import chart

    at = app({"hw_compare": "true", "serving": "best"})
    assert not at.exception, at.exception
    table = _table(at).set_index("GPU")
    for col in ("disaggregated without", "disaggregated with", "disaggregated fleet with"):
        assert col in table.columns
    own = cat.hardware[S.DEFAULTS["hardware"]].label
    expect = compare_hardware(dataclasses.replace(_default_request(cat), serving="best"), cat).choice(
        S.DEFAULTS["hardware"])
    d = expect.disaggregated_speculation
    assert d is not None and table.loc[own, "disaggregated with"] == f"{fmt_usd(d.usd_per_month)}/month"
    assert "disaggregated: prefill" in table.loc[own, "disaggregated fleet with"]
    names = [s["name"] for s in chart(at, "plan_hardware_chart")["data"]]
    assert names[2:] == ["disaggregated, no speculation", "disaggregated, with speculation"]
    plain = app({"hw_compare": "true"})
    assert "disaggregated with" not in _table(plain).columns
    assert len(chart(plain, "plan_hardware_chart")["data"]) == 2
