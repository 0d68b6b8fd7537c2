"""plan(): one answer, only feasible recommendations, an exact batch search, economics from one place."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import plan as P
from planner.context import BASELINE, make_context, r5
from planner.money.economics import economics_of_bills
from planner.physics.roofline import head_net, hw_params, target_net
from planner.physics.serving import DRAFTING_MODE_CODE, evaluate_arrays
from planner.search.candidates import method_candidates
from planner.search.grid import candidate_grid, evaluate_at, search


def _brute_force_best_cpm(req, catalog):
    """Every integer batch from 1 to 4096 for every (candidate, K): the cheapest CPM meeting memory and SLO."""
    ctx = make_context(req, catalog)
    cands, _ = method_candidates(ctx, list(catalog.methods))
    cands = [BASELINE, *cands]
    smp = ctx.mid_samples()
    sr = search(ctx, cands, smp)
    grid = candidate_grid(ctx, cands, smp, sr.ks)
    batches = np.arange(1, P.MAX_BATCH + 1, dtype=float)[None, None, None, None, :]
    r = evaluate_at(ctx, cands, smp, grid, batches)
    is_base = r5([c.method == P.NO_SPEC for c in cands], 1).astype(bool)
    # the SLO holds on the TPOT a user sees at full load, prefill sharing the replica (planner.physics.replica)
    tpot = np.where(is_base, r.baseline_tpot_seen_s, r.tpot_seen_s)
    cpm = np.where(is_base, r.baseline_usd_per_mtok, r.usd_per_mtok)
    mb = np.where(is_base, r.baseline_max_batch, r.max_batch)
    ok = (tpot <= req.tpot_slo_ms / 1e3) & (batches <= mb)
    best = np.where(ok, cpm, np.inf).min(-1)
    mine = np.where(sr.ok[..., 0], np.where(is_base[..., 0], sr.res.baseline_usd_per_mtok[..., 0],
                                            sr.res.usd_per_mtok[..., 0]), np.inf)
    return best, mine, sr.valid_k


@pytest.mark.parametrize("req", [
    P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4),  # the app's default scenario
    P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=20),
    P.PlanRequest(model="qwen3-32b", hardware="h200", tp=2, tpot_slo_ms=8, workload="code"),
    P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", tpot_slo_ms=30),
], ids=["default-70b", "8b-20ms", "qwen-8ms", "deepseek"])
def test_batch_search_equals_an_exhaustive_integer_search(catalog, req):
    best, mine, valid = _brute_force_best_cpm(req, catalog)
    valid = np.broadcast_to(valid[None, :, :, None], best.shape)
    assert np.array_equal(np.isfinite(best)[valid], np.isfinite(mine)[valid])
    both = valid & np.isfinite(best)
    assert np.allclose(mine[both], best[both], rtol=1e-12)


def test_default_baseline_reaches_its_memory_limit_not_a_grid_point(catalog):
    """Loose SLO (500 ms): no speculation's best batch is its own memory limit (351 here, not the old grid's 256);
    at 50 ms the TPOT seen at full load (prefill sharing the replica) bounds it below memory, at the SLO."""
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=500), catalog)
    assert p.baseline.feasible and p.baseline.batch == p.baseline.max_batch == 351
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4), catalog)
    assert p.baseline.feasible and p.baseline.batch < p.baseline.max_batch
    assert 49.5 < p.baseline.tpot_ms <= 50
    for m in p.methods:
        if m.feasible:
            assert m.batch <= m.max_batch and m.tpot_ms <= 50


@pytest.mark.parametrize("model, hardware, tp, needle", [
    ("deepseek-v3", "h100-sxm", 8, "more memory per replica"),
    ("llama-3.3-70b", "h100-sxm", 1, "TP >= 4"),
])
def test_nothing_that_does_not_fit_is_recommended_and_the_way_out_is_named(catalog, model, hardware, tp, needle):
    p = P.plan(P.PlanRequest(model=model, hardware=hardware, tp=tp), catalog)
    assert p.recommendation is None and p.best is None
    assert not p.baseline.fits_memory and needle in p.baseline.way_out
    assert all(not m.feasible for m in p.methods)
    assert "does not fit" in p.verdict and "%" not in p.verdict
    assert p.economics.monthly_saving_usd is None and math.isinf(p.economics.payback_months)
    assert p.deploy is None


def test_fp8_is_named_as_a_way_out_when_it_fits(catalog):
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=1), catalog)
    assert "fp8 weights (TP >= 2)" in p.baseline.way_out


def test_no_percentage_cut_against_a_baseline_that_misses_the_slo(catalog):
    """Qwen3-32B on 2 x H200 at 8 ms: no speculation cannot go below ~12 ms."""
    p = P.plan(P.PlanRequest(model="qwen3-32b", hardware="h200", tp=2, tpot_slo_ms=8), catalog)
    assert p.baseline.fits_memory and not p.baseline.meets_slo and not p.baseline.feasible
    assert "misses the 8 ms" in p.baseline.reason
    assert p.baseline.cpm_change_pct is None
    # the reference is never the infeasible baseline: a feasible configuration without speculation, or none
    assert p.reference is None or (p.reference.feasible and p.reference.method == P.NO_SPEC
                                   and p.reference is not p.baseline)
    for m in p.methods:
        if m.cpm_change_pct is not None:
            assert m.feasible and p.reference is not None
            assert m.cpm_change_pct == pytest.approx((m.usd_per_mtok / p.reference.usd_per_mtok - 1) * 100, abs=0.05)
    if p.reference is None:
        assert all(m.cpm_change_pct is None for m in p.methods)
        assert p.economics.monthly_saving_usd is None
    if p.recommendation is not None:
        assert p.method(p.recommendation.method).feasible


def test_speculation_that_alone_meets_the_slo_is_said_so(catalog):
    """An SLO between the fastest TPOT without speculation (at the largest TP) and the fastest with it: the method
    is recommended because it makes the SLO reachable, with no percentage against anything."""
    probe = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h200", tp=8, tpot_slo_ms=0.01), catalog)
    fastest_base = probe.baseline.tpot_ms  # batch 1, the lowest TPOT without speculation
    fastest_spec = min(m.tpot_ms for m in probe.methods if m.available)
    assert fastest_spec < fastest_base
    slo = 0.5 * (fastest_base + fastest_spec)
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h200", tp=8, tpot_slo_ms=slo), catalog)
    assert p.reference is None and not p.baseline.feasible
    assert all(not a.feasible for a in p.alternatives)
    assert p.recommendation is not None and p.recommendation.cpm_change_pct is None
    assert "reachable" in p.recommendation.reason and "%" not in p.verdict
    assert p.method(p.recommendation.method).tpot_ms <= slo


def test_medusa_draft_time_is_linear_in_k(catalog):
    """K heads each read the last hidden state once: draft time grows linearly in K (it used to grow as K^2)."""
    model, hw = catalog.models["llama-3.1-8b"], catalog.hardware["h100-sxm"]
    m = catalog.methods["medusa"]
    ks = np.arange(1, 7, dtype=float)
    res = evaluate_arrays(target=target_net(model), draft=head_net(m, model), hw=hw_params(hw),
                          mode=DRAFTING_MODE_CODE[m.drafting], draft_scales_with_k=True, k=ks, batch=256.0,
                          tau=2.0, context_tokens=1000.0, prompt_tokens=800.0, output_tokens=400.0,
                          usd_per_gpu_hour=4.0)
    d = np.asarray(res.draft_time_s)
    assert np.all(np.diff(d) > 0)
    assert np.allclose(np.diff(d, 2), 0.0, atol=1e-12 + 1e-6 * d.max())


def test_measured_acceptance_applies_to_its_method_only(catalog):
    from planner.types import Acceptance

    base = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm")
    plain = P.plan(base, catalog)
    meas = P.plan(dataclasses.replace(base, acceptance=Acceptance("draft_acceptance_rate", 0.6), acceptance_k=4,
                                      acceptance_method="eagle3"), catalog)
    assert meas.method("ngram").usd_per_mtok == pytest.approx(plain.method("ngram").usd_per_mtok)
    assert meas.method("medusa").usd_per_mtok == pytest.approx(plain.method("medusa").usd_per_mtok)
    assert meas.method("eagle3").usd_per_mtok != pytest.approx(plain.method("eagle3").usd_per_mtok)


def test_per_position_acceptance_limits_k_to_the_measured_positions(catalog):
    from planner.types import Acceptance

    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", acceptance_method="eagle3",
                             acceptance=Acceptance("per_token", per_position=(0.8, 0.7, 0.6))), catalog)
    e3 = p.method("eagle3")
    assert e3.feasible and 1 <= e3.k <= 3
    assert e3.alpha_position_1 == pytest.approx(0.8)


@pytest.mark.parametrize("field, value, needle", [
    ("usd_per_gpu_hour", 0.0, "usd_per_gpu_hour=0.0"), ("usd_per_gpu_hour", -1.0, "usd_per_gpu_hour=-1.0"),
    ("usd_per_gpu_hour", math.nan, "usd_per_gpu_hour=nan"), ("tpot_slo_ms", 0.0, "tpot_slo_ms=0.0"),
    ("tp", 3, "tp=3"), ("dtype", "int4", "dtype='int4'"), ("monthly_output_tokens", -5.0, "monthly_output_tokens"),
    ("batch_cap", 0.0, "batch_cap=0.0"),
])
def test_bad_inputs_name_the_field_and_value(catalog, field, value, needle):
    req = dataclasses.replace(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), **{field: value})
    with pytest.raises(P.PlanError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        P.plan(req, catalog)


def test_unknown_names_are_refused_with_the_valid_ones(catalog):
    with pytest.raises(KeyError, match="b200"):
        P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="b900"), catalog)


def test_segment_shares_must_sum_to_one(catalog):
    segs = (P.TrafficSegment("chat", "english", 0.5, 800, 400), P.TrafficSegment("code", "english", 0.2, 800, 400))
    with pytest.raises(P.PlanError, match="segments.share"):
        P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", segments=segs), catalog)


def test_economics_come_from_the_one_economics_function(catalog):
    """The saving, payback and NPV come from the two fleets' bills (the money number), through economics()."""
    # 1e11 tokens/month: the fleets differ (at 3e10 one replica serves the traffic with or without speculation)
    # confidence 0.5: the saving is uncertain here (P(saving > 0) ~0.63 with the fit's speedup error drawn)
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=1e11, confidence=0.5)
    p = P.plan(req, catalog)
    assert p.recommendation is not None
    e = economics_of_bills(baseline_monthly_usd=p.bill(p.reference.method).usd_per_month,
                           new_monthly_usd=p.bill(p.best.method).usd_per_month,
                           one_time_usd=0.5 * (p.best.one_time_usd_low + p.best.one_time_usd_high),
                           horizon_months=p.costs.horizon_months, annual_discount_rate=p.costs.annual_discount_rate)
    assert float(e.monthly_saving_usd) > 0
    assert p.economics.monthly_saving_usd == pytest.approx(float(e.monthly_saving_usd))
    assert p.economics.payback_months == pytest.approx(float(e.payback_months))
    assert p.economics.npv_usd == pytest.approx(float(e.npv_usd))
    assert P.fmt_usd(p.economics.one_time_usd) in p.verdict


def test_cost_assumptions_move_the_payback(catalog):
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=1e11)
    p = P.plan(req, catalog)
    dear = dataclasses.replace(p.costs, engineering_usd_per_week=20_000)
    p2 = P.plan(dataclasses.replace(req, costs=dear), catalog)
    assert p2.economics.one_time_usd > p.economics.one_time_usd
    assert p2.economics.payback_months > p.economics.payback_months


@pytest.mark.parametrize("x, text", [(-546.2, "-$546"), (0.0, "$0"), (-0.004, "$0"), (1234.5, "$1,234")])
def test_money_for_a_finance_reader(x, text):
    assert P.fmt_usd(x) == text


def test_months_and_percent_for_a_finance_reader():
    assert P.fmt_months(math.inf) == "does not pay back"
    assert P.fmt_months(0.0) == "immediately"
    assert P.fmt_months(1.74) == "1.7 months"
    assert P.fmt_pct(-0.01) == "0.0 %" and P.fmt_pct(-7.04) == "-7.0 %" and P.fmt_pct(None) == "n/a"


MODELS = ["llama-3.1-8b", "llama-3.3-70b", "qwen3-32b", "deepseek-v3", "gpt-oss-120b", "mimo-7b"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), hardware=st.sampled_from(["h100-sxm", "h200", "a100-80gb-sxm", "l40s"]),
       tp=st.sampled_from([1, 2, 4, 8]), dtype=st.sampled_from(["bf16", "fp8"]),
       slo=st.floats(2.0, 200.0), workload=st.sampled_from(["chat", "code", "rag_summarization"]),
       current=st.sampled_from(["none", "eagle3", "ngram", "mtp"]), cap=st.one_of(st.none(), st.floats(1.0, 2000.0)),
       volume=st.floats(1e6, 1e12))
def test_property_recommendations_always_run_and_today_is_what_economics_use(
        catalog, model, hardware, tp, dtype, slo, workload, current, cap, volume):
    if tp > catalog.hardware[hardware].max_tp:
        return
    req = P.PlanRequest(model=model, hardware=hardware, tp=tp, dtype=dtype, tpot_slo_ms=slo, workload=workload,
                        current_method=current, batch_cap=cap, monthly_output_tokens=volume)
    p = P.plan(req, catalog)
    if p.recommendation is not None:
        m = p.method(p.recommendation.method)
        assert m.feasible and m.fits_memory and m.meets_slo and m.available
        assert all(s.batch <= s.max_batch and s.tpot_ms <= slo * (1 + 1e-9) for s in m.segments)
        assert cap is None or all(s.batch <= max(1, math.floor(cap)) for s in m.segments)
    if p.best is not None:
        assert p.best.feasible
    if p.reference is not None:
        assert p.reference.feasible
        assert p.economics.reference_usd_per_mtok == p.reference.usd_per_mtok
    else:
        assert p.economics.reference_usd_per_mtok is None and p.economics.monthly_saving_usd is None
        assert all(m.cpm_change_pct is None for m in p.methods)


def test_absolute_step_time_by_hand_llama_8b_on_one_h100_at_batch_1(catalog):
    """A unit error cannot hide behind ratios: Llama-3.1-8B bf16 on 1 x H100, batch 1, 1,200 tokens of context,
    with the hardware's constant efficiencies. Memory-bound: bytes / (bandwidth x eta_bw) + t_fixed, where bytes
    = the weights streamed (8.03B params x 2 B, less the untied input-embedding table, which is gathered, not
    streamed) + the KV cache (32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B per token)."""
    from planner.physics.roofline import step_time_s

    hw = catalog.hardware["h100-sxm"]
    eff = hw.efficiency
    weights_bytes = (8.03e9 - 128256 * 4096) * 2.0
    kv_bytes = 1200 * 32 * 2 * 8 * 128 * 2.0
    by_hand_s = (weights_bytes + kv_bytes) / (3350e9 * eff.eta_bw) + eff.t_fixed_s
    t, compute_bound = step_time_s(target_net(catalog.models["llama-3.1-8b"], "bf16"), hw_params(hw, "bf16", eff),
                                   batch=1.0, tokens_per_seq=1.0, context_tokens=1200.0, tp=1)
    assert not bool(compute_bound)
    assert float(t) == pytest.approx(by_hand_s, rel=1e-6)
    assert 4e-3 < by_hand_s < 8e-3  # ~5.7 ms: 15 GB at ~2.5 TB/s plus 1.5 ms fixed
    # and the plan's TPOT for no speculation at batch 1 is that same step (tau = 1) plus the prefill that shares
    # the replica at full load: batch 1 x t_prefill / 800 output tokens, t_prefill = 800 prompt tokens x (2 x the
    # streamed params + 2 x attn_dim (32 layers x 32 heads x 128) x 800) / (989 TFLOP/s x eta_flops) = 20.5 ms
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", batch_cap=1, efficiency=eff,
                             segments=(P.TrafficSegment("chat", "english", 1.0, 800.0, 800.0),)), catalog)
    prefill_s = 800 * (2 * (8.03e9 - 128256 * 4096) + 2 * 32 * 32 * 128 * 800) / (989e12 * eff.eta_flops)
    assert p.baseline.batch == 1
    assert p.baseline.tpot_ms == pytest.approx((by_hand_s + prefill_s / 800) * 1e3, rel=1e-6)


def test_kv_cache_format_is_its_own_choice_and_reaches_the_deploy_command(catalog):
    base = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=500, levers_start=None)
    bf16 = P.plan(base, catalog)
    fp8 = P.plan(dataclasses.replace(base, kv_dtype="fp8"), catalog)
    # the same bf16 weights; an fp8 cache holds twice the sequences in the memory left after the weights
    assert fp8.baseline.max_batch == pytest.approx(2 * bf16.baseline.max_batch, rel=0.01)
    assert "--kv-cache-dtype fp8" in fp8.deploy["command"] and "--kv-cache-dtype" not in bf16.deploy["command"]
    with pytest.raises(P.PlanError, match="kv_dtype='int4'"):
        P.plan(dataclasses.replace(base, kv_dtype="int4"), catalog)


def test_gpt_oss_120b_in_mxfp4_is_served_by_one_h100(catalog):
    p = P.plan(P.PlanRequest(model="gpt-oss-120b", hardware="h100-sxm", dtype="mxfp4"), catalog)
    assert p.baseline.fits_memory and p.baseline.feasible and p.baseline.max_batch > 0
    bf16 = P.plan(P.PlanRequest(model="gpt-oss-120b", hardware="h100-sxm", dtype="bf16"), catalog)
    assert not bf16.baseline.fits_memory and "TP >=" in bf16.baseline.way_out


# The headline's "today" at another TP: 4 x H100 misses a 10 ms TPOT without speculation, so the reference is no
# speculation at TP=8 and the fleet at the requested TP holds no "today" configuration.
TODAY_AT_TP8 = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=10.0, monthly_output_tokens=2e10)


def test_today_at_another_tp_is_the_fleet_the_headline_prices(catalog):
    p = P.plan(P.PlanRequest(**TODAY_AT_TP8), catalog)
    assert not p.baseline.feasible and p.reference is not None and p.reference.tp == 8
    assert P.NO_SPEC not in [c.method for c in p.fleet.configs]  # the requested TP's fleet has no "today"
    today, best = p.reference_fleet, p.best_fleet
    e = p.economics
    assert (today.role, today.method, today.tp, today.k, today.batch) == ("today", P.NO_SPEC, 8, 0,
                                                                           p.reference.batch)
    assert (best.role, best.method, best.tp, best.k, best.batch) == ("best", p.best.method, 4, p.best.k, p.best.batch)
    # the headline (economics and the verdict) and the two fleets are the same numbers
    assert (today.peak_gpus, today.usd_per_month) == (e.reference_peak_gpus, e.reference_bill_usd_per_month)
    assert (best.peak_gpus, best.usd_per_month) == (e.new_peak_gpus, e.new_bill_usd_per_month)
    assert f"{today.peak_gpus} -> {best.peak_gpus} GPUs at the peak" in p.verdict
    assert f"{P.fmt_usd(today.usd_per_month)} -> {P.fmt_usd(best.usd_per_month)} a month" in p.verdict
    assert e.monthly_saving_usd == pytest.approx(today.usd_per_month - best.usd_per_month)
    # today's fleet is 8-GPU replicas hour by hour, and its bill is its GPU-hours at the price
    assert today.peak_gpus == max(h.gpus for h in today.hours) and all(h.gpus % 8 == 0 for h in today.hours)
    assert today.peak_gpus > p.bill(p.best.method).peak_gpus  # not the best method's fleet under another name
    assert today.usd_per_month == pytest.approx(today.gpu_hours_per_month * today.usd_per_gpu_hour, rel=1e-12)
    assert today.gpu_hours_per_month == pytest.approx(sum(h.gpus for h in today.hours) * 365.25 / 12, rel=1e-12)


def test_today_at_the_requested_tp_is_that_configuration_in_the_fleet(catalog):
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=30.0,
                             monthly_output_tokens=2e10, billing="fixed"), catalog)
    assert (p.reference.method, p.reference.tp) == (P.NO_SPEC, 4)
    today = p.reference_fleet
    cfg = p.fleet.config(P.NO_SPEC)
    assert (today.tp, today.peak_gpus, today.usd_per_month) == (4, cfg.peak_gpus, cfg.usd_per_month_fixed)
    assert today.billing == "fixed" and today.usd_per_month == p.economics.reference_bill_usd_per_month
