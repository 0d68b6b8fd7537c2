"""Economics (payback, NPV, break-even) and the seven-lever waterfall."""

import dataclasses

import numpy as np
import pytest

from planner.money.economics import annuity_factor, breakeven_monthly_spend_usd, economics
from planner.plan import PlanRequest, default_costs, levers, order_by_return, plan


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
    costs = dataclasses.replace(default_costs(catalog), training_usd_per_gpu_hour_low=2.0,
                                training_usd_per_gpu_hour_high=4.0, engineering_usd_per_week=5000)
    m = catalog.methods["eagle3"]
    low, high = costs.one_time_usd(m)
    assert low == pytest.approx(m.setup_gpu_hours * 2.0 + m.setup_engineering_weeks * 5000)
    assert high == pytest.approx(m.setup_gpu_hours * 4.0 + m.setup_engineering_weeks * 5000)
    assert dataclasses.replace(costs, engineering_usd_per_week=0).one_time_usd(catalog.methods["mtp"]) == (0, 0)
    # a per-method override of the training GPU-hours replaces the profile's
    over = dataclasses.replace(costs, setup_gpu_hours=(("eagle3", 100.0),)).one_time_usd(m)
    assert over[0] == pytest.approx(100.0 * 2.0 + m.setup_engineering_weeks * 5000)


def _r(**kw):
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, workload="code", tpot_slo_ms=30,
                monthly_output_tokens=5e10)
    base.update(kw)
    return PlanRequest(**base)


def waterfall(req, catalog, start="draft_model", order=None):
    return levers(req, catalog, start, order)


def test_waterfall_follows_the_article_order_and_never_raises_cpm(catalog):
    steps = waterfall(_r(), catalog)
    assert [st.number for st in steps] == list(range(1, 8))
    for a, b in zip(steps, steps[1:]):
        assert b.usd_per_mtok_before == pytest.approx(a.usd_per_mtok_after)
    for st in steps:
        assert st.usd_per_mtok_after <= st.usd_per_mtok_before + 1e-12
    assert steps[-1].usd_per_mtok_after < steps[0].usd_per_mtok_before


def test_waterfall_starts_where_the_plan_puts_the_method(catalog):
    req = _r(current_method="eagle3")
    p = plan(req, catalog)
    steps = waterfall(req, catalog, start="eagle3")
    assert steps[0].usd_per_mtok_before == pytest.approx(p.method("eagle3").usd_per_mtok)
    assert p.reference.method == "eagle3" and p.reference.usd_per_mtok == pytest.approx(steps[0].usd_per_mtok_before)


def test_lever2_switches_draft_model_to_a_head_and_lever6_needs_mtp(catalog):
    steps = {st.lever: st for st in waterfall(_r(), catalog)}
    assert steps["match_draft_size"].applied and steps["match_draft_size"].method == "eagle3"
    assert not steps["switch_to_mtp"].applied and "MTP" in steps["switch_to_mtp"].reason


def test_lever6_switches_to_mtp_only_where_mtp_is_cheaper_than_the_head_so_far(prior_catalog):
    """DeepSeek-V3 ships MTP. Against the default EAGLE-3 head (alpha 0.62-0.68, +0.05 on code) MTP (0.78-0.82,
    +0.05) is cheaper, so lever 6 alone switches to it. After lever 1 the head's domain fine-tune (+0.15) brings it
    to MTP's position-1 alpha (0.85 both), and MTP's later positions decay (position_decay 0.85) while the head's do
    not: there lever 6 must be skipped because MTP raises CPM."""
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    req = _r(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8")
    p = plan(req, catalog)
    assert p.method("mtp").usd_per_mtok < p.method("eagle3").usd_per_mtok
    # alone, MTP pays back within the horizon in about two draws of three: applied at confidence 0.5, not at 0.8
    (alone,) = waterfall(dataclasses.replace(req, confidence=0.5), catalog, start="eagle3", order=["switch_to_mtp"])
    assert alone.applied and alone.method == "mtp"
    (sure,) = waterfall(req, catalog, start="eagle3", order=["switch_to_mtp"])
    assert not sure.applied and 0.5 <= sure.p_payback_within_horizon < 0.8 and "% < the 80 % asked" in sure.reason
    assert alone.usd_per_mtok_after == pytest.approx(p.method("mtp").usd_per_mtok)
    ds = {st.lever: st for st in waterfall(req, catalog, start="eagle3")}
    assert ds["domain_finetune"].applied
    assert ds["domain_finetune"].alpha_after == pytest.approx(p.method("mtp").alpha_position_1)
    six = ds["switch_to_mtp"]
    assert not six.applied and six.method == "eagle3" and "raises CPM" in six.reason
    assert six.usd_per_mtok_before < p.method("mtp").usd_per_mtok
    assert f"-> ${p.method('mtp').usd_per_mtok:.3f}/Mtok" in six.reason


def test_lever1_is_not_counted_twice_when_heads_are_tuned(prior_catalog):
    """The tuned alpha range already holds a domain fine-tune: lever 1 must not add +0.15 on top."""
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    tuned = {st.lever: st for st in waterfall(_r(tuned=True), catalog, start="eagle3")}
    assert not tuned["domain_finetune"].applied and "tuned" in tuned["domain_finetune"].reason
    assert tuned["domain_finetune"].alpha_after == tuned["domain_finetune"].alpha_before
    # 5e12 tokens a month: a fleet large enough that the fine-tune's CPM cut frees replicas and pays back
    default = {st.lever: st for st in waterfall(_r(tuned=False, monthly_output_tokens=5e12), catalog,
                                                 start="eagle3")}
    d = default["domain_finetune"]
    assert d.applied and d.alpha_after - d.alpha_before == pytest.approx(
        catalog.levers["domain_finetune"].alpha_gain.mid, abs=1e-9)


def test_vsd_is_an_acceptance_gain_that_shrinks_where_the_verifier_is_compute_bound(catalog):
    """VSD is modelled as the acceptance gain it is, not a flat throughput multiplier: its CPM gain at a large
    compute-bound batch is below its gain at batch 1."""
    # VSD's ~$90k one-time cost is applied only where its bill saving pays it back: 5e12 tokens a month
    big = dict(workload="chat", tpot_slo_ms=200, monthly_output_tokens=5e12)
    small = {st.lever: st for st in waterfall(_r(batch_cap=1, **big), catalog, start="eagle3")}["vsd"]
    large = {st.lever: st for st in waterfall(_r(**big), catalog, start="eagle3")}["vsd"]
    assert small.applied and small.alpha_after > small.alpha_before
    gain_small = 1 - small.usd_per_mtok_after / small.usd_per_mtok_before
    gain_large = 1 - large.usd_per_mtok_after / large.usd_per_mtok_before if large.applied else 0.0
    assert gain_small > 0
    assert gain_large < gain_small


def test_vsd_breakeven_is_computed_and_scales_with_its_cost(prior_catalog):
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    steps = {st.lever: st for st in waterfall(_r(monthly_output_tokens=5e12), catalog, start="eagle3")}
    vsd = steps["vsd"]
    assert vsd.applied
    # the spend above which it pays: from the cut it makes in the fleet's bill
    cut = 1 - vsd.bill_usd_per_month_after / vsd.bill_usd_per_month_before
    assert vsd.monthly_saving_usd == pytest.approx(vsd.bill_usd_per_month_before - vsd.bill_usd_per_month_after)
    assert vsd.breakeven_monthly_spend_usd == pytest.approx(
        float(breakeven_monthly_spend_usd(cpm_reduction_fraction=cut, one_time_usd=vsd.one_time_usd_high,
                                          horizon_months=36, annual_discount_rate=0.10)))


def test_reordering_by_return_puts_free_levers_first(catalog):
    steps = waterfall(_r(), catalog)
    order = order_by_return(steps)
    assert sorted(order) == sorted(st.lever for st in steps)
    by = {st.lever: st for st in steps}
    first = by[order[0]]
    assert first.applied and first.usd_per_mtok_after < first.usd_per_mtok_before
    re = waterfall(_r(), catalog, order=order)
    assert [st.lever for st in re] == order


def test_waterfall_summary_runs_from_the_first_step_to_the_last():
    from planner.answer import LeverStep
    from planner.decision.levers import summarize

    def step(before, after, high, applied=True):
        return LeverStep("x", 1, "x", applied, "", "eagle3", 3, 64, False, 0.6, 0.6, before, after, 0.0, high,
                         0.0, 0.0, 0.0)

    s = summarize([step(2.0, 1.5, 1_000.0), step(1.5, 1.5, 0.0, applied=False), step(1.5, 1.2, 500.0)], 1e10)
    assert (s.start_usd_per_mtok, s.end_usd_per_mtok, s.one_time_usd_high) == (2.0, 1.2, 1_500.0)
    assert s.monthly_saving_usd == pytest.approx((2.0 - 1.2) * 1e4)  # 1e10 tokens = 1e4 million


def test_levers_start_from_today_and_apply_only_what_pays_back(catalog):
    """No speculation today: step 0 adopts EAGLE-3 from no speculation's bill (the plan's reference bill), and every
    applied step pays back within the horizon with a positive NPV; the others say why not."""
    from planner.decision.levers import summarize

    req = _r(monthly_output_tokens=5e11, levers_start="auto")
    p = plan(req, catalog)
    steps = list(p.levers)
    assert steps[0].lever == "adopt" and steps[0].number == 0
    assert steps[0].usd_per_mtok_before == pytest.approx(p.baseline.usd_per_mtok)
    assert steps[0].bill_usd_per_month_before == pytest.approx(p.economics.reference_bill_usd_per_month)
    horizon = p.costs.horizon_months
    for a, b in zip(steps, steps[1:]):
        assert b.bill_usd_per_month_before == pytest.approx(a.bill_usd_per_month_after)
    for st in steps:
        if st.applied:
            assert st.monthly_saving_usd == pytest.approx(st.bill_usd_per_month_before - st.bill_usd_per_month_after)
            assert st.payback_months <= horizon and st.npv_usd > 0
        else:
            assert st.bill_usd_per_month_after == st.bill_usd_per_month_before and st.one_time_usd_high == 0
    s = summarize(steps, req.monthly_output_tokens, horizon_months=horizon,
                  annual_discount_rate=p.costs.annual_discount_rate)
    one = sum(st.one_time_usd_high for st in steps if st.applied)
    first, last = steps[0].bill_usd_per_month_before, steps[-1].bill_usd_per_month_after
    assert s.monthly_saving_usd == pytest.approx(first - last)
    assert s.payback_months == pytest.approx(one / s.monthly_saving_usd)
    assert s.npv_usd == pytest.approx(s.monthly_saving_usd * annuity_factor(horizon, 0.10) - one)
    assert s.payback_months <= horizon and s.npv_usd > 0


def test_a_lever_that_does_not_pay_back_is_not_applied(catalog):
    """10B tokens a month on one 4 x H100 replica: no lever frees a replica, so none is applied (nor EAGLE-3
    itself), whatever it does to the CPM at full load; the waterfall says the bill does not change."""
    req = _r(workload="chat", tpot_slo_ms=50, monthly_output_tokens=1e10, levers_start="auto")
    p = plan(req, catalog)
    assert p.levers and not any(st.applied for st in p.levers)
    assert "not the bill" in p.levers[0].reason
    assert all("draft network" in st.reason for st in p.levers[1:])
    from_head = {st.lever: st for st in levers(req, catalog, "eagle3")}
    vsd = from_head["vsd"]
    assert not vsd.applied and ("not the bill" in vsd.reason or "beyond the 36-month horizon" in vsd.reason
                                or "raises CPM" in vsd.reason)


def test_a_levers_candidate_is_billed_as_it_runs(catalog):
    """The tree lever's fleet is sized with the tree's own step (its verified tokens), not as a chain with the
    tree's acceptance: here the tree raises the CPM at full load, and its fleet costs at least the chain's."""
    from planner.context import Candidate, make_context
    from planner.money.bill import point_bill
    from planner.search.points import one_point

    ctx = make_context(_r(monthly_output_tokens=5e11), catalog)
    chain = Candidate("eagle3", tuple(range(1, catalog.methods["eagle3"].max_k + 1)))
    tree = dataclasses.replace(chain, tree=True)
    pc, pt = one_point(ctx, chain), one_point(ctx, tree)
    bc = point_bill(ctx, pc, billing="autoscaled", cand=chain).usd_per_month
    bt = point_bill(ctx, pt, billing="autoscaled", cand=tree).usd_per_month
    assert pt.usd_per_mtok > pc.usd_per_mtok and bt >= bc
    # priced as a chain with the tree's acceptance, the same point would look cheaper than it runs
    assert point_bill(ctx, pt, billing="autoscaled").usd_per_month < bt


def _vsd_at(catalog, confidence):
    # 200B tokens/month, business hours, autoscaled: VSD pays back in ~15 months at the middle acceptance, but only
    # in about three draws of four of the plan's seeded Monte Carlo
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, monthly_output_tokens=2e11,
                      daily_shape="business_hours", tpot_slo_ms=30, billing="autoscaled", confidence=confidence)
    steps = levers(req, catalog, "none")
    return steps, next(s for s in steps if s.lever == "vsd")


def test_a_lever_is_applied_only_at_the_stated_confidence_of_paying_back(prior_catalog):
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    steps_lo, lo = _vsd_at(catalog, 0.5)
    steps_hi, hi = _vsd_at(catalog, 0.95)
    assert lo.payback_months <= 36 and lo.npv_usd > 0  # passes the rule at the middle acceptance
    assert 0.5 <= lo.p_payback_within_horizon < 0.95
    assert lo.p_payback_within_horizon == hi.p_payback_within_horizon  # the same steps before it, the same draws
    assert lo.applied and not hi.applied
    assert f"probability {hi.p_payback_within_horizon * 100:.0f} % < the 95 % asked" in hi.reason
    assert hi.bill_usd_per_month_after == hi.bill_usd_per_month_before  # a skipped step leaves the bill
    for s in steps_lo + steps_hi:
        p = s.p_payback_within_horizon
        assert np.isnan(p) or 0.0 <= p <= 1.0
    assert _vsd_at(catalog, 0.5)[1].p_payback_within_horizon == lo.p_payback_within_horizon  # seeded
