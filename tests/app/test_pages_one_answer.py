"""One answer on every page: the CLI's plan JSON, the Plan headline and fleet, the Report, the spend and billing
inputs and the price rule give the same figures as planner.plan.plan() called directly."""

from __future__ import annotations

import csv
import io
import re

import pytest

from planner import plan as P
from report.board import board_report
from report.board_html import board_html
from tests.app.pages import DEFAULT, PAGES, chart, cli_plan, downloaded, metric, money, planned
from views.parts import report as rep


def test_one_answer_everywhere(app, cat, media):
    """The CLI's plan JSON, the Plan headline, the Fleet chart, the Levers start, the Methods table, the Report CSV
    (the page's own download) and the Sensitivity page show the same CPM, K, batch, saving, payback, bills and
    P(saving > 0) for one scenario."""
    # today n-gram: the best method (EAGLE-3, from its public head's measured acceptance) differs from today's
    q = {"model": "llama-3.1-8b", "tp": "1", "current": "ngram", "volume_b": "1000", "fleet_shape": "business_hours"}
    kw = dict(model="llama-3.1-8b", tp=1, current_method="ngram", monthly_output_tokens=1e12,
              daily_shape="business_hours")
    p = planned(cat, **kw)
    js = cli_plan("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--current-method", "ngram",
                  "--monthly-output-tokens", "1e12", "--daily-shape", "business_hours")
    best = p.best
    js_best = next(m for m in js["methods"] if m["method"] == best.method)
    assert js_best["usd_per_mtok"] == pytest.approx(best.usd_per_mtok)
    assert (js_best["k"], js_best["batch"]) == (best.k, best.batch)
    e = js["economics"]
    assert e["monthly_saving_usd"] == pytest.approx(p.economics.monthly_saving_usd)
    assert js["reference"]["usd_per_mtok"] == pytest.approx(p.reference.usd_per_mtok)
    configs = {c["method"]: c for c in js["fleet"]["configs"]}
    today_bill, best_bill = configs[js["reference"]["method"]], configs[best.method]
    assert best.method != js["reference"]["method"]  # the scenario shows both fleets
    # at 1,000B tokens/month the fleets differ (60 -> 59 GPUs at the peak): saving and payback are bills'
    assert e["monthly_saving_usd"] > 0 and e["payback_months"] is not None
    # the Plan page: headline and fleet
    at = app(q)
    assert money(metric(at, "Best method CPM").value) == pytest.approx(best.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "CPM today").value) == pytest.approx(p.reference.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "Monthly saving").value) == pytest.approx(e["monthly_saving_usd"], abs=1)
    assert metric(at, "Payback").value == P.fmt_months(e["payback_months"])
    # the risk-weighted NPV: the CLI's, beside the NPV on the page, and the report's below
    assert e["risk_weighted_npv_usd"] == pytest.approx(p.economics.risk_weighted_npv_usd)
    assert f"risk-weighted {P.fmt_usd(e['risk_weighted_npv_usd'])}" in " ".join(c.value for c in at.caption)
    assert int(metric(at, "Peak GPUs today").value.replace(",", "")) == today_bill["peak_gpus"]
    assert money(metric(at, "Monthly bill, autoscaled").value) == pytest.approx(best_bill["usd_per_month_autoscaled"],
                                                                                 abs=1)
    fleet = chart(at, "plan_fleet_chart")["data"]
    assert list(fleet[0]["y"]) == [h["gpus"] for h in today_bill["hours"]]
    assert list(fleet[1]["y"]) == [h["gpus"] for h in best_bill["hours"]]
    # Methods
    at.switch_page("views/methods.py").run()
    df = at.dataframe[0].value
    row = df[df["method"] == best.label].iloc[0]
    assert row["CPM $/Mtok"] == pytest.approx(best.usd_per_mtok, abs=1e-4)
    assert (row["K"], row["best batch"]) == (best.k, best.batch)
    # Levers
    at.switch_page("views/levers.py").run()
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(p.bill(p.reference.method).usd_per_month, abs=1) == pytest.approx(
        p.economics.reference_bill_usd_per_month, abs=1)
    # Report: the CSV the page offers
    at.switch_page("views/report.py").run()
    assert not at.exception
    rows = {(r["section"], r["item"]): r["value"]
            for r in csv.DictReader(io.StringIO(downloaded(at, media, "report_csv").decode("utf-8")))}
    assert float(rows[("headline", "best method CPM")]) == pytest.approx(best.usd_per_mtok, abs=1e-6)
    assert float(rows[("headline", "monthly saving")]) == pytest.approx(e["monthly_saving_usd"], abs=1e-3)
    assert float(rows[("headline", "payback")]) == pytest.approx(e["payback_months"], abs=5e-7)  # 6 decimals in the CSV
    assert int(rows[(f"method {best.method}", "k")]) == best.k
    for role, cfg in (("today", today_bill), ("with speculation", best_bill)):
        assert float(rows[("bill", f"{role}: autoscaled")]) == pytest.approx(cfg["usd_per_month_autoscaled"], abs=1e-3)
        assert float(rows[("bill", f"{role}: fixed at the peak")]) == pytest.approx(cfg["usd_per_month_fixed"],
                                                                                   abs=1e-3)
        assert [int(rows[(f"fleet by hour, {role}", f"hour {h['hour']:02d}")]) for h in cfg["hours"]] == [
            h["gpus"] for h in cfg["hours"]]
    assert float(rows[("headline", "risk-weighted NPV (mean over the Monte Carlo's draws)")]) == pytest.approx(
        e["risk_weighted_npv_usd"], rel=1e-5)
    p_saves = float(rows[("uncertainty", "P(saving > 0)")])
    # one Monte Carlo: the Plan's P(saving > 0) (CLI JSON) is the report's and the Sensitivity page's at its defaults
    assert e["p_saving_positive"] == pytest.approx(p_saves)
    # Sensitivity: the same Monte Carlo
    at.switch_page("views/sensitivity.py").run()
    mc = next(m.value for m in at.markdown if "monthly saving p5" in m.value)
    assert f"saves money in {p_saves * 100:.0f} %" in mc
    # the page's median in whole dollars; the report's CSV holds it to 6 significant digits (56248.5 for 56,248.52)
    shown = float(re.search(r"median \$([\d,]+)", mc).group(1).replace(",", ""))
    assert shown == pytest.approx(float(rows[("uncertainty", "monthly saving median")]), abs=1.0)


def test_the_app_and_the_cli_default_to_the_same_volume(app):
    from planner.request import DEFAULT_MONTHLY_OUTPUT_TOKENS

    js = cli_plan("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4")
    at = app()
    caption = " ".join(c.value for c in at.caption)
    assert at.number_input(key="volume_b").value * 1e9 == js["economics"]["monthly_output_tokens"] == \
        DEFAULT_MONTHLY_OUTPUT_TOKENS
    assert f"{DEFAULT_MONTHLY_OUTPUT_TOKENS / 1e9:,.2f}B output tokens/month (entered in the sidebar)" in caption


def test_fleet_on_the_plan_page_equals_plan(app, cat):
    at = app({"model": "llama-3.1-8b", "tp": "1", "volume_b": "50"})
    at.selectbox(key="fleet_shape").set_value("business_hours").run()
    assert not at.exception
    p = planned(cat, model="llama-3.1-8b", tp=1, monthly_output_tokens=5e10, daily_shape="business_hours")
    today = p.fleet.config(p.reference.method)
    assert int(metric(at, "Peak GPUs today").value.replace(",", "")) == today.peak_gpus
    best = p.fleet.config(p.best.method)
    assert int(metric(at, f"Peak GPUs with {best.label}").value.replace(",", "")) == best.peak_gpus
    assert money(metric(at, "Monthly bill, autoscaled").value) == pytest.approx(best.usd_per_month_autoscaled, abs=1)
    assert at.query_params["fleet_shape"] == "business_hours"


def test_report_shows_the_bills_the_hardware_comparison_and_the_spend_of_the_plan(cat):
    """The bills, effective CPMs and probabilities on the economics, the hardware comparison and the spend a plan
    carries reach the CSV and the HTML, with the plan's own numbers."""
    p = planned(cat, model="llama-3.1-8b", tp=1, daily_shape="business_hours", compare_hardware=True,
                monthly_output_tokens=3e11)
    e, hc = p.economics, p.hardware_choice
    assert hc is not None and hc.cheapest is not None
    rows = {(r["section"], r["item"]): r for r in csv.DictReader(io.StringIO(rep.to_csv(rep.scenario_rows(p, []))))}
    assert float(rows[("headline", "bill today")]["value"]) == pytest.approx(e.reference_bill_usd_per_month)
    assert float(rows[("headline", "P(saving > 0)")]["value"]) == pytest.approx(e.p_saving_positive)
    # the CSV writes floats to 6 decimals (views/_report._cell): a $/Mtok figure to the millionth of a dollar
    assert float(rows[("headline", "effective CPM with the best method (bill / output tokens)")]["value"]) == \
        pytest.approx(e.new_effective_usd_per_mtok, abs=5e-7)
    for ch in hc.choices:
        if ch.speculation is not None:
            assert float(rows[("hardware comparison", f"{ch.label}: with speculation")]["value"]) == pytest.approx(
                ch.speculation.usd_per_month)
    c = hc.cheapest
    assert f"{c.tp} x {c.hardware_label} ({c.dtype})" in rows[("hardware comparison", "cheapest")]["basis"]
    html = board_html(board_report(p, cat, generated="2026-12-02"))
    assert "Which GPU type" in html and P.fmt_usd(c.usd_per_month) in html
    assert P.fmt_usd(e.reference_bill_usd_per_month) in html and "The fleet by hour" in html
    # a plan for a stated spend says how the spend became the volume
    ps = planned(cat, model="llama-3.1-8b", tp=1, spend_usd_per_month=100000.0)
    rows = {(r["section"], r["item"]): r for r in csv.DictReader(io.StringIO(rep.to_csv(rep.scenario_rows(ps, []))))}
    assert float(rows[("spend", "spend_usd_per_month")]["value"]) == 100000.0
    assert float(rows[("inputs", "monthly_output_tokens")]["value"]) == pytest.approx(ps.spend.monthly_output_tokens)


def test_spend_as_the_volume_source_plans_what_the_cli_plans_and_travels_in_the_link(app):
    """'What we spend a month' in the sidebar: $100,000 on 32 H100s (TP 4) gives the CLI's volume and bills."""
    js = cli_plan("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4", "--spend-usd-per-month", "100000",
                  "--gpus", "32")
    e = js["economics"]
    at = app()
    at.radio(key="volume_source").set_value("spend").run()
    at.number_input(key="spend_usd").set_value(100000.0).run()
    at.number_input(key="spend_gpus").set_value(32).run()
    assert not at.exception and not at.error, (at.exception, [x.value for x in at.error])
    assert at.number_input(key="volume_b").disabled
    # the Plan page's volume line: the CLI's volume and how the spend became it
    line = next(c.value for c in at.caption if c.value.startswith("Volume: "))
    assert f"{e['monthly_output_tokens'] / 1e9:,.2f}B output tokens/month" in line
    assert js["spend"]["volume_source"] in line
    assert "spend of $100,000/month" in " ".join(c.value for c in at.caption if "TPOT SLO" in c.value)
    assert money(metric(at, "Bill today").value) == pytest.approx(e["reference_bill_usd_per_month"], abs=1)
    assert metric(at, "Bill today").value == f"{P.fmt_usd(e['reference_bill_usd_per_month'])}/month"
    assert money(metric(at, "Monthly saving").value) == pytest.approx(e["monthly_saving_usd"], abs=1)
    assert f"{e['monthly_output_tokens'] / 1e9:,.2f}B" in metric(at, "Monthly saving").help
    # the link carries the spend; a fresh session from it shows the same numbers
    q = dict(at.query_params)
    assert (q["volume_source"], q["spend_gpus"]) == ("spend", "32")  # $100,000 is the default: not in the link
    again = app(q)
    assert (again.radio(key="volume_source").value, again.number_input(key="spend_usd").value) == ("spend", 100000.0)
    assert [m.value for m in again.metric] == [m.value for m in at.metric]
    at.number_input(key="spend_usd").set_value(250000.0).run()
    q = dict(at.query_params)
    assert (q["volume_source"], q["spend_usd"], q["spend_gpus"]) == ("spend", "250000.0", "32")
    again = app(q)
    assert again.number_input(key="spend_usd").value == 250000.0
    assert [m.value for m in again.metric] == [m.value for m in at.metric]
    assert "spend of $250,000/month" in next(c.value for c in again.caption if c.value.startswith("Volume: "))
    at.number_input(key="spend_usd").set_value(100000.0).run()
    # the pages that take a volume plan the same one: the Levers start is the Plan's bill today
    at.switch_page("views/levers.py").run()
    assert not at.exception
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(e["reference_bill_usd_per_month"], abs=1)
    for page in PAGES:  # every page plans the spend (no page falls back to the typed volume silently)
        at.switch_page(page).run()
        assert not at.exception, page
        caption = " ".join(c.value for c in at.caption)
        assert page == "views/traffic.py" or "spend of $100,000/month" in caption, page


@pytest.mark.parametrize(("query", "says"), [
    ({"volume_source": "spend", "spend_usd": "-5"}, "spend_usd='-5'"),  # out of range in a link: ignored, named
    ({"volume_source": "spend", "spend_usd": "1e11"}, "spend_usd='1e11'"),
    ({"volume_source": "spend", "spend_gpus": "-1"}, "spend_gpus='-1'"),
])
def test_a_bad_spend_in_the_link_is_refused_by_name(app, query, says):
    at = app(query)
    assert any(says in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.number_input(key="spend_usd").value == pytest.approx(100000.0)


@pytest.mark.parametrize(("usd", "gpus", "says"), [
    (0.0, 0, "spend_usd_per_month=0.0"),  # no spend
    (100.0, 0, "spend_usd_per_month=100.0"),  # less than one replica's month
    (100000.0, 2, "spend_gpus=2"),  # fewer GPUs than one replica (TP 4)
])
def test_a_bad_spend_typed_in_the_sidebar_shows_an_error_naming_it(app, usd, gpus, says):
    at = app({"volume_source": "spend"})
    at.number_input(key="spend_usd").set_value(usd).run()
    at.number_input(key="spend_gpus").set_value(gpus).run()
    assert not at.exception, at.exception
    assert any(says in x.value for x in at.error), [x.value for x in at.error]


def test_billing_in_the_link_prices_every_page_and_the_tornado_shows_the_bill_saving(app, cat):
    """`billing=fixed` in a link reaches every page's request (the Levers start is the plan's fixed reference bill)
    and the tornado's default measure is the monthly bill saving of planner.uncertainty.sensitivity.tornado."""
    from planner.uncertainty import sensitivity as sens

    q = {"model": "llama-3.1-8b", "tp": "1", "volume_b": "1000", "fleet_shape": "business_hours",
         "billing": "fixed", "current": "eagle3"}
    kw = dict(model="llama-3.1-8b", tp=1, monthly_output_tokens=1e12, daily_shape="business_hours",
              billing="fixed", current_method="eagle3")
    p = planned(cat, **kw)
    auto = planned(cat, **{**kw, "billing": "autoscaled"})
    assert p.economics.reference_bill_usd_per_month != pytest.approx(auto.economics.reference_bill_usd_per_month)
    at = app(q)
    at.switch_page("views/levers.py").run()
    assert not at.exception
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(p.economics.reference_bill_usd_per_month, abs=1)
    at.switch_page("views/sensitivity.py").run()
    assert not at.exception
    method = at.selectbox(key="sens_method").value
    method = p.best.method if method in (None, "auto") else method
    tor = sens.tornado(P.PlanRequest(**{**DEFAULT, **kw, "hours": p.request.hours,
                                         "hours_source": p.request.hours_source}), cat, method)
    bars = chart(at, "sens_tornado")["data"]
    assert bars[0]["base"] == pytest.approx(tor[0].mid_saving_usd, rel=1e-6)
    assert "monthly saving" in chart(at, "sens_tornado")["layout"]["xaxis"]["title"]["text"]


def test_plan_fleet_today_at_another_tp_is_the_headline_fleet(app, cat):
    """4 x H100 misses a 10 ms TPOT without speculation, so today is no speculation at TP=8: the Fleet section shows
    that fleet's GPUs and bill (the headline's), not the best method's under today's name."""
    at = app({"slo": "10", "volume_b": "20"})
    p = planned(cat, tpot_slo_ms=10.0, monthly_output_tokens=2e10)
    today, best = p.reference_fleet, p.best_fleet
    assert today.tp == 8 and today.peak_gpus == p.economics.reference_peak_gpus
    peak = metric(at, "Peak GPUs today")
    assert today.label in peak.label and int(peak.value.replace(",", "")) == today.peak_gpus
    assert int(metric(at, "Peak GPUs with").value.replace(",", "")) == best.peak_gpus
    assert money(metric(at, "Bill today").value) == pytest.approx(p.economics.reference_bill_usd_per_month, abs=1)
    hours = next(c.value for c in at.caption if c.value.startswith("Hours:"))
    assert f"Today's bill: {P.fmt_usd(today.usd_per_month_autoscaled)}/month autoscaled" in hours
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert f"{today.peak_gpus} -> {best.peak_gpus} GPUs" in rec and P.fmt_usd(today.usd_per_month) in rec


def test_a_typed_price_equal_to_the_midpoint_is_entered_and_never_drawn_over(app, cat):
    """Entered means typed, whatever the value: a price typed back to the list midpoint (or carried by a link) is
    the plan's entered price, and the Monte Carlo asked to draw the price leaves it alone."""
    mid = cat.hardware["h100-sxm"].usd_per_gpu_hour_mid

    def price_line(at) -> str:
        return next(c.value for c in at.caption if c.value.startswith("Draws:"))

    at = app({"mc_price": "true"})
    at.switch_page("views/sensitivity.py").run()
    assert not at.session_state["price_set"] and "$/GPU-hour: drawn from the list range" in price_line(at)
    at.number_input(key="price").set_value(mid + 1.0).run()
    at.number_input(key="price").set_value(mid).run()
    assert not at.exception, at.exception
    assert at.session_state["price_set"] and at.number_input(key="price").value == pytest.approx(mid)
    assert f"$/GPU-hour: the entered ${mid:.2f}, never drawn over" in price_line(at)
    linked = app({"mc_price": "true", "price": str(mid)})
    linked.switch_page("views/sensitivity.py").run()
    assert f"the entered ${mid:.2f}, never drawn over" in price_line(linked)
    linked.selectbox(key="hardware").set_value("h200").run()  # another GPU type: its list midpoint, not entered
    assert not linked.session_state["price_set"] and "drawn from the list range" in price_line(linked)
