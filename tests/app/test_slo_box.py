"""The sidebar's TTFT SLO (views.sidebar.slo_box): off by default (no constraint, TTFT still shown), set from the
sidebar or a link, and the Plan headline states today's and the best method's TTFT as plan() computes them."""

from __future__ import annotations

import pytest

from planner import plan as P


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_ttft_is_shown_without_an_slo_and_the_slo_round_trips_in_the_url(app, cat):
    at = app()
    assert at.checkbox(key="ttft_set").value is False
    assert at.number_input(key="ttft_slo").disabled
    assert "TTFT" in _captions(at)
    at.checkbox(key="ttft_set").check().run()
    at.number_input(key="ttft_slo").set_value(90.0).run()
    assert not at.exception, at.exception
    q = dict(at.query_params)
    assert q["ttft_set"] == "true" and q["ttft_slo"] == "90.0"
    at2 = app(q)
    assert at2.checkbox(key="ttft_set").value is True
    assert at2.number_input(key="ttft_slo").value == pytest.approx(90.0)
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, ttft_slo_ms=90.0), cat)
    rec = next(m.value for m in at2.markdown if m.value.startswith("**Recommendation:**"))
    # a 90 ms TTFT SLO (vLLM's 16.97 ms front-end time and half a step in flight included) doubles today's fleet
    # (4 -> 8 GPUs) and EAGLE-3's more (12): the page plans what plan() does
    assert "90 ms TTFT" in rec and p.verdict in rec
    assert p.reference_fleet.ttft_ms <= 90.0 and p.reference_fleet.peak_gpus == 8
    assert p.best_fleet is not None and p.best_fleet.peak_gpus == 12
    assert f"TTFT {p.reference_fleet.ttft_ms:.1f} ms" in _captions(at2)
    assert (f"Mean TTFT over the day: {p.reference_fleet.label} {p.reference_fleet.ttft_ms:.1f} ms, "
            f"{p.best_fleet.label} {p.best_fleet.ttft_ms:.1f} ms") in _captions(at2)


def test_a_bad_ttft_slo_in_a_link_is_ignored_and_said(app):
    at = app({"ttft_set": "true", "ttft_slo": "-4"})
    assert at.number_input(key="ttft_slo").value == pytest.approx(2000.0)
    assert any("ttft_slo" in w.value for w in [*at.warning, *at.error, *at.info, *at.markdown, *at.caption])


def test_disaggregated_serving_is_set_from_the_sidebar_or_a_link_and_the_plan_page_shows_both_pools(app, cat):
    at = app()
    assert at.radio(key="serving").value == "colocated"
    assert not any("pool" in d.value.columns for d in at.dataframe)
    at.radio(key="serving").set_value("disaggregated").run()
    assert not at.exception, at.exception
    q = dict(at.query_params)
    assert q["serving"] == "disaggregated"
    at2 = app(q)
    assert at2.radio(key="serving").value == "disaggregated"
    table = next(d for d in at2.dataframe if "pool" in d.value.columns).value
    assert sorted(set(table["pool"])) == ["decode", "prefill"]
    assert "disaggregated: prefill" in _captions(at2)


def test_a_bad_serving_value_in_a_link_is_ignored_and_said(app):
    at = app({"serving": "split"})
    assert at.radio(key="serving").value == "colocated"
    assert any("serving" in w.value for w in [*at.warning, *at.error, *at.info, *at.markdown, *at.caption])
