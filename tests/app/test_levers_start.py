"""The Levers page starts where the Plan does (its today, its recommended method), says what a step that is not
applied does not do, and the Sensitivity page measures the money from the Plan's today (the DP-attention case)."""

from __future__ import annotations

import math
import re

import pytest

from planner import plan as P
from planner.answer import LeverStep
from views.levers import pays_back, step_rows

# DeepSeek-V3 fp8 on 8 x H200 with data-parallel attention at a 30 ms SLO, 100B output tokens a month: the Plan's
# today is no speculation on plain TP (cheaper than data-parallel attention without speculation)
DP = {"model": "deepseek-v3", "hardware": "h200", "tp": "8", "dtype": "fp8", "attn_dp": "true", "slo": "30.0",
      "volume_b": "100.0"}


def money(text: str) -> float:
    return float(re.search(r"\$([\d,]+)", text).group(1).replace(",", ""))


def _step(applied: bool, **kw) -> LeverStep:
    base = dict(lever="tree", number=4, label="Tree attention", applied=applied,
                reason="skipped: tree verification raises CPM here", method="eagle3", k=3, batch=8, tree=False,
                alpha_before=0.7, alpha_after=0.7, usd_per_mtok_before=1.0, usd_per_mtok_after=1.0,
                one_time_usd_low=0.0, one_time_usd_high=0.0, monthly_saving_usd=0.0, payback_months=math.inf,
                breakeven_monthly_spend_usd=math.inf, note="", source="seed", bill_usd_per_month_before=100.0,
                bill_usd_per_month_after=100.0)
    return LeverStep(**{**base, **kw})


def test_a_step_not_applied_says_why_not_zero_dollars():
    row = step_rows([_step(False)])[0]
    assert row["what / why"] == "not applied: tree verification raises CPM here"
    assert row["one-time $"] == "-" and row["payback"] == "not applied" and row["monthly saving"] == "-"
    assert "$0 to $0" not in str(row) and "does not pay back" not in str(row)
    done = step_rows([_step(True, reason="tree: the bill falls", one_time_usd_low=100.0, one_time_usd_high=200.0,
                            monthly_saving_usd=50.0, payback_months=4.0)])[0]
    assert done["one-time $"] == "$100 to $200" and done["payback"] == "4.0 months"


def test_a_set_that_pays_back_at_once_says_so():
    assert pays_back(0.0, 2) == "pays back at once"
    assert pays_back(1.7, 1) == "pays back in 1.7 months"
    assert pays_back(math.inf, 1) == "does not pay back"
    assert pays_back(0.0, 0) == "no step applied"


@pytest.fixture(scope="module")
def dp_plan(cat) -> P.Plan:
    return P.plan(P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", attention_dp=True,
                                tpot_slo_ms=30.0, monthly_output_tokens=1e11), cat)


def test_dp_attention_levers_page_starts_from_the_plans_today(app, dp_plan):
    at = app(DP)
    at.switch_page("views/levers.py").run()
    assert not at.exception, at.exception
    ref = dp_plan.reference
    assert ref.attention_dp is False  # the honest today: plain TP
    head = next(m.value for m in at.markdown if m.value.startswith("**From"))
    assert money(head) == pytest.approx(dp_plan.reference_fleet.usd_per_month, abs=1)
    assert f"starting from {ref.label}" in head
    df = at.dataframe[0].value
    rec = dp_plan.recommendation
    assert rec is not None and df.iloc[0]["lever"] == f"Adopt {rec.label}" and df.iloc[0]["applied"] == "yes"


def test_dp_attention_sensitivity_measures_from_the_plans_today(app, dp_plan):
    at = app(DP)
    at.switch_page("views/sensitivity.py").run()
    assert not at.exception, at.exception
    mc = next(m.value for m in at.markdown if "monthly saving p5" in m.value)
    e = dp_plan.economics
    assert f"against the Plan's today, {dp_plan.reference.label}" in mc
    assert f"saves money in {e.p_saving_positive * 100:.0f} %" in mc
    assert money(mc.split("p5 ")[1]) == pytest.approx(e.saving_p05_usd, abs=1)
    assert e.p_saving_positive < 1.0  # no end-to-end measurement of data-parallel attention: never 100 %
    caption = " ".join(c.value for c in at.caption)
    assert f"The Plan's today is {dp_plan.reference.label}" in caption
