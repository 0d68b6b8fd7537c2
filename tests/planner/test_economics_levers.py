"""Economics (payback, NPV, break-even) and the seven-lever waterfall."""

import numpy as np
import pytest

from planner.economics import annuity_factor, breakeven_monthly_spend_usd, economics, method_one_time_usd
from planner.levers import order_by_return, waterfall
from planner.types import Scenario


def test_payback_and_npv_by_hand():
    e = economics(baseline_usd_per_mtok=2.0, new_usd_per_mtok=1.5, monthly_output_tokens=1e10,
                  one_time_usd=10_000, horizon_months=12, annual_discount_rate=0.0)
    assert float(e.baseline_monthly_usd) == pytest.approx(20_000)
    assert float(e.monthly_saving_usd) == pytest.approx(5_000)
    assert float(e.payback_months) == pytest.approx(2.0)
    assert float(e.npv_usd) == pytest.approx(12 * 5_000 - 10_000)


def test_no_saving_never_pays_back():
    e = economics(baseline_usd_per_mtok=1.0, new_usd_per_mtok=1.2, monthly_output_tokens=1e9,
                  one_time_usd=100, horizon_months=36)
    assert np.isinf(e.payback_months) and e.npv_usd < 0


def test_discounting_lowers_npv():
    assert annuity_factor(36, 0.1) < 36
    assert annuity_factor(36, 0.0) == 36


def test_breakeven_spend_makes_npv_zero():
    spend = float(breakeven_monthly_spend_usd(cpm_reduction_fraction=0.0877, one_time_usd=90_000))
    e = economics(baseline_usd_per_mtok=1.0, new_usd_per_mtok=1 - 0.0877, monthly_output_tokens=spend * 1e6,
                  one_time_usd=90_000)
    assert float(e.npv_usd) == pytest.approx(0.0, abs=1e-6)


def test_economics_rejects_negative_inputs():
    with pytest.raises(ValueError, match="one_time_usd=-1"):
        economics(baseline_usd_per_mtok=1, new_usd_per_mtok=1, monthly_output_tokens=1, one_time_usd=-1)


def test_method_one_time_cost(catalog):
    m = catalog.methods["eagle3"]
    usd = method_one_time_usd(m, training_usd_per_gpu_hour=2.0, engineering_usd_per_week=5000)
    assert usd == pytest.approx(m.setup_gpu_hours * 2.0 + m.setup_engineering_weeks * 5000)
    assert method_one_time_usd(catalog.methods["mtp"], training_usd_per_gpu_hour=2.0,
                               engineering_usd_per_week=0) == 0


def _s(**kw):
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", method="draft_model", k=4, tp=4,
                workload="code", tpot_slo_ms=30, monthly_output_tokens=5e10)
    base.update(kw)
    return Scenario(**base)


def test_waterfall_follows_the_article_order_and_never_raises_cpm(catalog):
    steps = waterfall(_s(), catalog)
    assert [st.number for st in steps] == list(range(1, 8))
    for a, b in zip(steps, steps[1:]):
        assert b.usd_per_mtok_before == pytest.approx(a.usd_per_mtok_after)
    for st in steps:
        assert st.usd_per_mtok_after <= st.usd_per_mtok_before + 1e-12
    assert steps[-1].usd_per_mtok_after < steps[0].usd_per_mtok_before


def test_lever2_switches_draft_model_to_a_head_and_lever6_needs_mtp(catalog):
    steps = {st.lever: st for st in waterfall(_s(), catalog)}
    assert steps["match_draft_size"].applied and steps["match_draft_size"].method == "eagle3"
    assert not steps["switch_to_mtp"].applied and "MTP" in steps["switch_to_mtp"].reason
    ds = {st.lever: st for st in waterfall(_s(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8",
                                              method="eagle3"), catalog)}
    assert ds["switch_to_mtp"].method == "mtp" or "raises CPM" in ds["switch_to_mtp"].reason


def test_vsd_breakeven_is_computed_and_scales_with_its_cost(catalog):
    steps = {st.lever: st for st in waterfall(_s(method="eagle3"), catalog)}
    vsd = steps["vsd"]
    assert vsd.applied
    cut = 1 - vsd.usd_per_mtok_after / vsd.usd_per_mtok_before
    assert vsd.breakeven_monthly_spend_usd == pytest.approx(
        float(breakeven_monthly_spend_usd(cpm_reduction_fraction=cut, one_time_usd=vsd.one_time_usd_high,
                                          horizon_months=36, annual_discount_rate=0.10)))


def test_reordering_by_return_puts_free_levers_first(catalog):
    steps = waterfall(_s(), catalog)
    order = order_by_return(steps)
    assert sorted(order) == sorted(st.lever for st in steps)
    by = {st.lever: st for st in steps}
    first = by[order[0]]
    assert first.applied and first.usd_per_mtok_after < first.usd_per_mtok_before
    re = waterfall(_s(), catalog, order=order)
    assert [st.lever for st in re] == order
