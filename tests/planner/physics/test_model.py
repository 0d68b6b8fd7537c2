"""The roofline / serving model: closed forms at batch 1, batch effects, MoE traffic, the seed's facts."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.acceptance import rates as acc
from planner.physics.roofline import hw_params, ridge_tokens, step_time_s, target_net, weight_bytes_read
from planner.plan import PlanRequest, TrafficSegment, plan
from planner.search.batch_sweeps import optimal_k_by_batch
from planner.search.scenario import ScenarioError, evaluate, grid
from planner.types import Acceptance, Scenario


def scen(**kw) -> Scenario:
    base = dict(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=4, batch=1)
    base.update(kw)
    return Scenario(**base)


@pytest.mark.parametrize("alpha, k, c", [(0.6, 4, 0.05), (0.8, 3, 0.1), (0.9, 6, 0.02), (0.5, 1, 0.3)])
def test_leviathan_speedup_at_batch_one(catalog, alpha, k, c):
    # Leviathan et al. 2023, Thm 3.8: S = (1 - a^(K+1)) / ((1 - a)(K c + 1)) for a memory-bound verifier whose
    # step time does not depend on the tokens verified: the limit of the model with constant efficiencies (the
    # hardware's defaults; the fitted ones make verifying K+1 tokens cost a little more than 1).
    flat = catalog.hardware["h100-sxm"].efficiency
    ev = evaluate(scen(k=k, acceptance=Acceptance("per_token", alpha), draft_cost_ratio=c, efficiency=flat), catalog)
    assert ev.verifier_bound == "memory"
    expected = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
    assert ev.speedup == pytest.approx(expected, rel=1e-9)
    assert ev.draft_cost_ratio == pytest.approx(c)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.95), st.floats(0.0, 0.04), st.sampled_from(["eagle3", "medusa", "p_eagle", "draft_model"]),
       st.sampled_from([1, 16, 256]))
def test_speedup_rises_with_alpha(catalog, a, da, method, batch):
    s1 = scen(method=method, batch=batch, acceptance=Acceptance("per_token", a))
    s2 = dataclasses.replace(s1, acceptance=Acceptance("per_token", min(a + da + 1e-3, 1.0)))
    assert evaluate(s2, catalog).speedup >= evaluate(s1, catalog).speedup


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(1, 10))
def test_acceptance_length_bounds_hold_in_evaluations(catalog, a, k):
    ev = evaluate(scen(k=k, acceptance=Acceptance("per_token", a)), catalog)
    assert 1.0 <= ev.acceptance_length <= k + 1


def test_perfect_free_draft_gives_k_plus_one_speedup_at_batch_one(catalog):
    flat = catalog.hardware["h100-sxm"].efficiency  # constant efficiencies: verifying 6 tokens costs what 1 does
    ev = evaluate(scen(k=5, acceptance=Acceptance("per_token", 1.0), draft_cost_ratio=0.0, efficiency=flat), catalog)
    assert ev.acceptance_length == 6
    assert ev.speedup == pytest.approx(6.0)
    fitted = evaluate(scen(k=5, acceptance=Acceptance("per_token", 1.0), draft_cost_ratio=0.0), catalog)
    assert 5.0 < fitted.speedup < 6.0  # measured kernels: 6 tokens per sequence cost a little more than 1


@pytest.mark.parametrize("hardware", ["a100-80gb-sxm", "h100-sxm", "h200", "b200", "l40s", "mi300x"])
def test_verifier_turns_compute_bound_and_speedup_falls_with_batch(catalog, hardware):
    s = scen(hardware=hardware, batch=None, acceptance=Acceptance("per_token", 0.7), prompt_tokens=128,
             output_tokens=256, context_tokens=256)
    res, _, batches = grid(s, catalog, batches=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    speed = res.speedup[0]
    bound = res.compute_bound[0]
    assert not bound[0] and bound[-1]
    # once compute-bound, each doubling of the batch lowers the speedup
    first_cb = int(np.argmax(bound))
    assert np.all(np.diff(speed[first_cb:]) < 0)
    # and speculation reverses: slower than no speculation at the largest batch
    assert speed[0] > 1.5 and speed[-1] < 1.0


def test_long_context_keeps_speculation_useful_to_larger_batches(catalog):
    # KV reads are shared by the K+1 verified tokens of a sequence, so at long context the verifier stays
    # memory-bound longer (the MagicDec observation, Chen et al. 2024).
    short = scen(batch=64, context_tokens=256, prompt_tokens=128, output_tokens=256)
    long = scen(batch=64, context_tokens=8000, prompt_tokens=7000, output_tokens=2000)
    assert evaluate(long, catalog).speedup > evaluate(short, catalog).speedup


def test_ridge_matches_the_design_figures(catalog):
    # docs/model.md, "Batch size changes everything": ~150 tokens on A100, ~300 on H100, ~200 on H200 (peak
    # figures, before efficiencies)
    for name, ridge in (("a100-80gb-sxm", 150), ("h100-sxm", 300), ("h200", 200)):
        hw = catalog.hardware[name]
        raw = hw.bf16_tflops * 1e12 * 2 / (2 * hw.hbm_bandwidth_gb_s * 1e9)
        assert raw == pytest.approx(ridge, rel=0.1)
        assert ridge_tokens(hw) == pytest.approx(raw * hw.efficiency.eta_flops / hw.efficiency.eta_bw)


@settings(max_examples=50, deadline=None)
@given(st.floats(1, 1e5))
def test_moe_weight_traffic_between_dense_and_all_experts(catalog, tokens):
    for name in ("deepseek-v3", "gpt-oss-120b"):
        m = catalog.models[name]
        net = target_net(m, "fp8")
        read = float(weight_bytes_read(net, tokens))
        # an untied input embedding is gathered (one row per token), not streamed: not read every step
        untied = 0.0 if m.tied_embeddings else m.embedding_params_b
        active_bound = (m.dense_params_b - untied + m.experts_per_token * m.expert_params_b) * 1e9
        all_bound = m.total_params_b * 1e9
        assert active_bound * (1 - 1e-9) <= read <= all_bound * (1 + 1e-9)
    # one token reads exactly the active weights
    m = catalog.models["deepseek-v3"]
    assert float(weight_bytes_read(target_net(m, "fp8"), 1)) == pytest.approx(
        (m.active_params_b - m.embedding_params_b) * 1e9, rel=0.01)


def test_moe_traffic_grows_with_tokens(catalog):
    net = target_net(catalog.models["deepseek-v3"], "fp8")
    reads = weight_bytes_read(net, np.array([1, 2, 8, 64, 512]))
    assert np.all(np.diff(reads) > 0)


def test_separate_8b_draft_is_a_poor_choice_next_to_a_head_for_70b(catalog):
    # Seed lever 2: same alpha for both, the 8B draft's own roofline makes it slower.
    for batch in (1, 8, 32):
        common = dict(model="llama-3.3-70b", tp=4, batch=batch, k=4, acceptance=Acceptance("per_token", 0.7))
        head = evaluate(scen(method="eagle3", **common), catalog)
        dm = evaluate(scen(method="draft_model", **common), catalog)
        assert dm.draft_cost_ratio > 3 * head.draft_cost_ratio
        assert head.speedup > dm.speedup * 1.2
        assert head.usd_per_mtok < dm.usd_per_mtok


def test_speculation_gain_shrinks_and_reverses_with_batch_for_every_method(catalog):
    for method in ("eagle3", "medusa", "p_eagle", "draft_model", "ngram"):
        res, _, _ = grid(scen(model="llama-3.3-70b", tp=4, method=method, batch=None), catalog,
                         batches=[1, 64, 512])
        s = res.speedup[0]
        assert s[0] > s[1] > s[2], method
        assert s[2] < 1.0, method


MTP_ALPHA = 0.85
MTP_TAU = 1 + MTP_ALPHA  # K=1: tau = 1 + alpha (Leviathan et al. 2023), the ceiling of any K=1 speedup


def _deepseek_mtp(catalog, batch):
    return evaluate(scen(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", method="mtp", k=1, batch=batch,
                         acceptance=Acceptance("per_token", MTP_ALPHA)), catalog)


def test_mtp_k1_gain_stays_under_tau_and_falls_with_batch(catalog):
    # DeepSeek-V3's step at small batch is dominated by per-layer kernel costs, so the verify token is nearly free
    # and the verifier stays memory-bound; the gain can only fall as the batch grows (published MoE curves), and no
    # K=1 speedup can reach tau = 1.85, since the draft pass and the verify token cost something. A dense 7B MTP
    # model at batch 1 pays the fitted per-step speculation overheads on a ~5 ms step, so it lands lower.
    ds = [_deepseek_mtp(catalog, b) for b in (1, 2, 4)]
    assert all(e.verifier_bound == "memory" for e in ds)
    assert all(e.acceptance_length == pytest.approx(MTP_TAU) for e in ds)
    assert MTP_TAU > ds[0].speedup > ds[1].speedup > ds[2].speedup > 1.5
    mimo = evaluate(scen(model="mimo-7b", method="mtp", k=1, batch=1, acceptance=Acceptance("per_token", MTP_ALPHA)),
                    catalog)
    assert 1.35 <= mimo.speedup < ds[0].speedup


@pytest.mark.xfail(strict=True, reason="the model gives 1.70x at batch 1 (fitted per-step speculation overheads); "
                   "the seed's 1.8x is not reached. Published SGLang runs (LM1/LM2) measured 1.60-1.61x at batch 2.")
def test_mtp_k1_at_alpha_085_gives_about_1_8x(catalog):
    # DeepSeek-V3 with native MTP: acceptance > 80 %, 1.8x throughput in real serving (the seed article). At K=1 and
    # alpha 0.85 the ceiling is tau = 1.85, so "about 1.8x" leaves 0.05 either side; the best small batch counts.
    best = max(_deepseek_mtp(catalog, b).speedup for b in (1, 2, 4))
    assert best == pytest.approx(1.8, abs=0.05)


def test_mtp_unavailable_without_native_module(catalog):
    ev = evaluate(scen(method="mtp", k=1), catalog)
    assert not ev.available and "MTP" in ev.unavailable_reason
    p = plan(PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), catalog)
    assert not p.method("mtp").available and "MTP" in p.method("mtp").reason
    assert p.method("eagle3").available


def test_memory_feasibility_limits_the_batch(catalog):
    # 70B in BF16 does not fit on one 80 GB GPU; it does on four.
    one = evaluate(scen(model="llama-3.3-70b", tp=1), catalog)
    four = evaluate(scen(model="llama-3.3-70b", tp=4), catalog)
    assert one.max_batch == 0 and not one.fits_memory
    assert four.max_batch > 100 and four.fits_memory
    # longer context, fewer sequences
    long = evaluate(scen(model="llama-3.3-70b", tp=4, prompt_tokens=30000, output_tokens=2000), catalog)
    assert long.max_batch < four.max_batch / 10


def test_best_batch_respects_the_slo_and_baseline_gets_its_own(catalog):
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=25, methods=("eagle3",))
    p = plan(req, catalog)
    spec, base = p.method("eagle3"), p.baseline
    assert spec.tpot_ms <= 25 and base.tpot_ms <= 25
    assert spec.fits_memory and base.fits_memory and spec.feasible and base.feasible
    # a tighter SLO can only shrink the best batch
    tight = plan(dataclasses.replace(req, tpot_slo_ms=12), catalog).method("eagle3")
    assert tight.batch <= spec.batch


def test_prefill_raises_cpm_for_long_prompts(catalog):
    short = evaluate(scen(workload="chat", batch=16), catalog)
    rag = evaluate(scen(workload="rag_summarization", batch=16, context_tokens=1200), catalog)
    assert rag.prefill_share > short.prefill_share
    assert rag.prefill_share > 0.3


def test_tp_adds_communication_and_divides_the_roofline(catalog):
    m = catalog.models["llama-3.3-70b"]
    hw = hw_params(catalog.hardware["h100-sxm"])
    t2, _ = step_time_s(target_net(m), hw, batch=8, tokens_per_seq=1, context_tokens=1000, tp=2)
    t4, _ = step_time_s(target_net(m), hw, batch=8, tokens_per_seq=1, context_tokens=1000, tp=4)
    assert float(t4) < float(t2)


@pytest.mark.parametrize("field, value, needle", [
    ("k", 0, "k=0"), ("batch", 0, "batch=0"), ("tp", 3, "tp=3"), ("tpot_slo_ms", -1, "tpot_slo_ms=-1"),
    ("usd_per_gpu_hour", -2.0, "usd_per_gpu_hour=-2.0"), ("draft_cost_ratio", 50.0, "draft_cost_ratio=50.0"),
    ("prompt_tokens", 10**7, "prompt_tokens=10000000"),
    # one validator with plan(): a $0 GPU is refused here too, and a length under one token
    ("usd_per_gpu_hour", 0.0, "usd_per_gpu_hour=0.0 .*above \\$0"), ("output_tokens", 0.5, "output_tokens=0.5"),
    ("tp", 2.0, "tp=2.0"),
])
def test_bad_scenarios_name_field_and_value(catalog, field, value, needle):
    with pytest.raises(ScenarioError, match=needle):
        evaluate(scen(**{field: value}), catalog)


def test_unknown_names_list_valid_ones_and_the_closest(catalog):
    with pytest.raises(KeyError) as err:
        evaluate(scen(model="llama-3.1-8"), catalog)
    assert "llama-3.1-8b" in str(err.value) and "Did you mean" in str(err.value)


def test_per_position_alpha_needs_one_value_per_position(catalog):
    with pytest.raises(ScenarioError, match=r"alpha_per_position=\(0.8, 0.7\) .*K=4 needs 4, 2 given"):
        evaluate(scen(acceptance=Acceptance("per_token", per_position=(0.8, 0.7))), catalog)


def test_three_conventions_give_the_same_answer(catalog):
    tau = float(acc.acceptance_length_iid(0.72, 4))
    a = evaluate(scen(acceptance=Acceptance("per_token", 0.72)), catalog)
    b = evaluate(scen(acceptance=Acceptance("acceptance_length", tau)), catalog)
    c = evaluate(scen(acceptance=Acceptance("draft_acceptance_rate", (tau - 1) / 4)), catalog)
    assert a.usd_per_mtok == pytest.approx(b.usd_per_mtok) == pytest.approx(c.usd_per_mtok)


def test_tree_verification_raises_acceptance_and_verifier_tokens(catalog):
    chain = evaluate(scen(k=4, tree=False), catalog)
    tree = evaluate(scen(k=4, tree=True), catalog)
    assert tree.acceptance_length > chain.acceptance_length
    assert tree.verify_tokens_per_seq > chain.verify_tokens_per_seq
    with pytest.raises(ScenarioError, match="tree=True"):
        evaluate(scen(method="p_eagle", tree=True), catalog)


def test_optimal_k_shrinks_as_the_batch_grows(catalog):
    req = PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", acceptance=Acceptance("per_token", 0.8),
                      acceptance_method="eagle3", segments=(TrafficSegment("chat", "english", 1.0, 128, 256),))
    best_k = optimal_k_by_batch(req, catalog, "eagle3", [1, 16, 128, 512])
    assert best_k[1] >= best_k[16] >= best_k[128] >= best_k[512]
    assert best_k[1] >= 4 and best_k[512] <= 2


def test_code_wants_a_longer_k_than_chat_and_rag(prior_catalog):
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    # Seed lever 3: K=4 default, code 6-8. The higher code alpha makes longer drafts pay.
    def k_at_1(workload):
        req = PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", workload=workload, tuned=True)
        return optimal_k_by_batch(req, catalog, "eagle3", [1])[1]

    assert k_at_1("code") >= k_at_1("chat") >= k_at_1("rag_summarization")
    assert k_at_1("code") > k_at_1("rag_summarization")


def test_baseline_does_not_depend_on_the_method(catalog):
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=40)
    bases = {m: plan(dataclasses.replace(req, methods=(m,)), catalog).baseline
             for m in ("eagle3", "draft_model", "ngram")}
    ref = plan(req, catalog).baseline
    for m, b in bases.items():
        assert b.batch == ref.batch, m
        assert b.usd_per_mtok == pytest.approx(ref.usd_per_mtok), m


def test_optimal_k_by_batch_respects_memory(catalog):
    """Where no K fits memory at a batch, no K is reported for it (it used to report one anyway)."""
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4)
    mb = plan(req, catalog).method("eagle3").max_batch
    ks = optimal_k_by_batch(req, catalog, "eagle3", [1, mb + 50])
    assert ks[1] is not None and ks[mb + 50] is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "qwen3-32b"]),
       st.sampled_from(["eagle3", "medusa", "p_eagle", "mtp", "ngram"]), st.integers(1, 6),
       st.sampled_from([1, 4, 32, 128, 512]), st.floats(0.0, 1.0))
def test_speedup_never_exceeds_acceptance_length_at_the_same_batch(catalog, model, method, k, batch, a):
    # verifying K+1 tokens never costs less than verifying 1, and drafting costs >= 0
    if method == "mtp" and model != "deepseek-v3":
        return
    tp = 8 if model == "deepseek-v3" else 4
    ev = evaluate(scen(model=model, hardware="h200", tp=tp, dtype="fp8", method=method, k=k, batch=batch,
                       acceptance=Acceptance("per_token", a)), catalog)
    assert ev.speedup <= ev.acceptance_length * (1 + 1e-9)
