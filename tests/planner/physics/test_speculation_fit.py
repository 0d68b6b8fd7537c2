"""Speculation overheads fitted to published speedups (calibration/fitting/speculation.py) and the draft-cost terms
of planner/physics/roofline.py and planner/physics/serving.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from calibration.fitting import curves
from calibration.fitting import speculation as fs
from calibration.fitting.core import REL_STDERR_MAX
from planner.physics.roofline import (
    fusion_time_s,
    head_net,
    hw_params,
    null_net,
    routed_tokens,
    step_time_s,
    target_net,
)
from planner.physics.serving import (
    MODE_NONE,
    MODE_PARALLEL,
    MODE_SEQUENTIAL,
    evaluate_arrays,
    first_draft_pass_tokens,
    sampler_time_s,
    speculation_overhead_s,
)
from planner.search.scenario import efficiency_for
from profiles import load_catalog


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def rows():
    return fs.split_rows(fs.usable_rows(fs.read_table())[0])[0]


# ---------------------------------------------------------------------------------------------
# Fit
# ---------------------------------------------------------------------------------------------

def test_round_trip_fit_recovers_known_parameters(cat, rows):
    truth = {"t_spec_s": 8e-4, "sampler_vocab_passes": 30.0, "t_fixed_draft_s": 2.5e-4}
    fixed = {"moe_verify_overlap": 0.3}
    measured = fs.predict_speedup(rows, cat, {**truth, **fixed})
    rng = np.random.default_rng(7)
    noisy = measured * np.exp(rng.normal(0.0, 0.002, measured.size))
    synthetic = [dataclasses.replace(r, speedup=float(s)) for r, s in zip(rows, noisy)]
    fit = fs.fit_speculation(synthetic, cat, names=tuple(truth), fixed=fixed)
    for name, value in truth.items():
        assert fit.value(name) == pytest.approx(value, rel=0.1), name
    assert fit.mape < 0.01
    assert np.all(np.isfinite(fit.stderr)) and not fit.held


def test_fit_refuses_no_rows(cat):
    with pytest.raises(ValueError, match="no rows"):
        fs.fit_speculation([], cat)


def test_only_verified_rows_with_stated_configuration_and_tau_are_fitted(rows):
    table = {r["id"]: r for r in fs.read_table()}
    assert rows, "no usable rows"
    for r in rows:
        assert table[r.id]["verified"] in fs.ACCEPTED_LABELS, r.id
        assert r.tau >= 1.0 and r.speedup > 0
    ids = {r.id for r in rows}
    assert not ids & {"LM3", "TR7a", "TR7b", "ATOM4", "MD1"}  # no tau / tau of another config / config unstated


def test_specbundle_rows_evaluate_with_their_tp_batch_and_chain_or_tree_shape(rows):
    by_id = {r.id: r for r in rows}
    table = {r["id"]: r for r in fs.read_table()}
    tree = by_id["SBD_Q235_gsm8k_sb_s7t4n8"]  # steps 7, topk 4, 8 draft tokens
    assert (tree.model, tree.hardware, tree.tp, tree.batch, tree.method, tree.k) == (
        "qwen3-235b-a22b", "h200", 8, 8, "eagle3", 7)
    assert (tree.verify_tokens, tree.draft_passes, tree.draft_tokens_per_pass) == (8.0, 7.0, 4.0)
    chain = by_id["SBD_L8B_mtbench_sb_s5t1n6"]  # steps 5, topk 1: a chain of K = 5, 6 verified tokens
    assert (chain.tp, chain.batch, chain.k, chain.verify_tokens, chain.draft_passes) == (1, 1, 5, None, None)
    assert by_id["SBD_KIMI_gsm8k_sb_s3t1n4"].dtype == "fp8" and by_id["SBD_KIMI_gsm8k_sb_s3t1n4"].tp == 8
    assert by_id["SBD_QC30A3_humaneval_sb_s3t1n4"].model == "qwen3-30b-a3b"
    sbd = [r for r in rows if r.id.startswith("SBD_")]
    assert len({r.source for r in sbd}) == 1  # one source: one leave-one-source-out fold
    for r in sbd:
        assert r.batch == fs.first_number(table[r.id]["batch"]) and r.engine == "sglang"
        assert "(not stated" in r.assumption and "context" in r.assumption


def _sbd_decode_step_s(cat, rid: str, tp: int) -> float:
    """The planner's decode step without speculation for an SBD row's target at `tp` (its kernel-fitted terms)."""
    from calibration.fitting import specbundle  # noqa: PLC0415

    cfg = {**specbundle.config(rid), "tp": tp}
    row = fs.SpecRow(id=rid, source="test", tau=2.0, speedup=1.0, **cfg)
    eff = fs.base_efficiency(cat, row.hardware, row.dtype)
    return float(fs.evaluate_row(row, cat, eff, method=row.method, k=row.k, tau=2.0).baseline_step_time_s)


def _sbd_whole_run_step_s() -> dict[str, list[tuple[str, float]]]:
    """{target code: [(a row id per benchmark, batch / the source's no-speculation whole-run output tok/s)]}."""
    import re  # noqa: PLC0415

    out: dict[str, dict[str, tuple[str, float]]] = {}
    for r in fs.read_table():
        if r["id"].startswith("SBD_") and r["verified"].startswith("yes"):
            tok_s = float(re.search(r"\(([\d.]+) tok/s\)", r["speedup_baseline"]).group(1))
            code, bench = r["id"].split("_")[1:3]
            out.setdefault(code, {})[bench] = (r["id"], fs.first_number(r["batch"]) / tok_s)
    return {c: list(v.values()) for c, v in out.items()}


def test_specbundle_tp_is_the_smallest_that_holds_the_weights_and_the_measured_baseline(cat):
    """TP_RULE (calibration/fitting/specbundle.py): the smallest TP whose weights fit by the planner's memory rule
    and whose modelled decode step does not exceed the source's own no-speculation whole-run time per step on any
    benchmark (Kimi-K2: one 8-GPU node, the stated exception)."""
    from calibration.fitting import specbundle  # noqa: PLC0415
    from planner.physics.networks import replica_weight_bytes  # noqa: PLC0415
    from planner.physics.roofline import ACTIVATION_RESERVE_FRACTION, GPU_MEMORY_UTILIZATION  # noqa: PLC0415

    hbm = cat.hardware["h200"].hbm_gb * 1e9

    def fits(model, dtype, tp, share):
        return float(replica_weight_bytes(target_net(cat.models[model], dtype), tp=tp)) < hbm * tp * share

    measured = _sbd_whole_run_step_s()

    def holds_baseline(code, tp):
        return all(_sbd_decode_step_s(cat, rid, tp) <= bound for rid, bound in measured[code])

    rule = GPU_MEMORY_UTILIZATION * (1.0 - ACTIVATION_RESERVE_FRACTION)
    raised = set()
    for code, (model, dtype, tp, _, _) in specbundle.TARGETS.items():
        if code == "KIMI":  # the stated exception: one 8-GPU node holds the weights, the 90 % rule would need 16
            assert fits(model, dtype, tp, 1.0) and not fits(model, dtype, tp, rule) and tp == 8
            continue
        assert fits(model, dtype, tp, rule) and holds_baseline(code, tp), code
        smaller = tp // 2
        assert tp == 1 or not (fits(model, dtype, smaller, rule) and holds_baseline(code, smaller)), code
        if tp > 1 and fits(model, dtype, smaller, rule):
            raised.add(code)
    # the rule raises the memory rule's TP where the measured baseline rules that TP out
    assert raised == {"L70B", "Q30A3", "QC30A3", "Q235"}


def test_a_specbundle_id_without_a_mapping_is_refused_naming_the_value():
    from calibration.fitting import specbundle  # noqa: PLC0415

    with pytest.raises(ValueError, match="'FOO'.*allowed"):
        specbundle.config("SBD_FOO_mtbench_sb_s3t1n4")
    with pytest.raises(ValueError, match="chain"):
        specbundle.config("SBD_L8B_mtbench_sb_s3t1n6")
    assert specbundle.config("LM1") is None


def test_every_new_row_left_out_names_its_reason():
    skipped = {s.id: s.reason for s in fs.usable_rows(fs.read_table())[1]}
    new = [r["id"] for r in fs.read_table() if r["id"].startswith(("RDD_", "RE3_", "RSX_", "SGO_"))]
    assert new and all(i in skipped for i in new)
    assert "no acceptance length" in skipped["RDD_T1_8B"] and "end-to-end" in skipped["RDD_T1_8B"]
    assert "MI355X is not in the catalogue" in skipped["RE3_MM25_c4"]
    assert "yes (range)" in skipped["RSX_B1"] and "not one measured ratio" in skipped["RSX_B1"]
    assert "GPU is not stated" in skipped["SGO_tree"]
    scout = [i for i in skipped if i.startswith("SBD_SCOUT_mtbench_")]
    assert len(scout) == 10 and all("exceeds the stated acceptance length" in skipped[i] for i in scout)


@pytest.mark.parametrize("name", ["moe_verify_overlap", "t_fixed_draft_s"])
def test_parameters_the_table_cannot_identify_are_held_at_their_priors(name):
    assert name not in fs.FIT_NAMES
    shipped = yaml.safe_load(fs.OUT_YAML.read_text())["fit"]["params"][name]
    assert shipped["value"] == fs.PRIORS[name][0] and shipped["stderr"] is None
    assert shipped["prior"].startswith("prior: ")


def test_a_fitted_parameter_is_shipped_only_where_the_table_identifies_it():
    for name, p in yaml.safe_load(fs.OUT_YAML.read_text())["fit"]["params"].items():
        if p["stderr"] is None:
            assert p["prior"].startswith("prior: "), name
        else:
            assert 0 < p["stderr"] <= REL_STDERR_MAX * abs(p["value"]), (name, p)


def test_an_unidentified_overhead_is_held_at_its_prior(cat, rows):
    """Rows that all share one batch and one method cannot separate the per-step overhead from the sampler's
    per-drafted-token work at K fixed: one of them is held at its prior, with the reason."""
    pe = [r for r in rows if r.id in ("PE_MT-Bench_1", "PE_HumanEval_1", "PE_SPEED-Bench_1")]
    truth = {"t_spec_s": 8e-4, "sampler_vocab_passes": 30.0}
    measured = fs.predict_speedup(pe, cat, {**truth, "t_fixed_draft_s": 2e-4, "moe_verify_overlap": 0.0})
    noisy = measured * np.exp(np.random.default_rng(3).normal(0.0, 0.01, measured.size))
    fit = fs.fit_speculation([dataclasses.replace(r, speedup=float(s)) for r, s in zip(pe, noisy)], cat)
    assert fit.held, fit
    for name, why in fit.held.items():
        assert fit.value(name) == fs.PRIORS[name][0] and why.startswith("prior: ")


def test_p_eagle_rows_are_against_the_best_of_the_stated_eagle3_configurations(cat, rows):
    """The P-EAGLE source's baseline is EAGLE-3 at the K that maximises its TPS at each concurrency (K=3 and K=7 have
    stated ALs): the reference is the faster candidate, so adding a slower one changes nothing."""
    row = next(r for r in rows if r.id == "PE_MT-Bench_1")
    assert {k for _, k, _ in row.reference} == {3, 7} and row.kv_dtype == "fp8"
    params = fs.fitted_params(fs.fit_speculation(rows, cat))
    both = fs.predict_speedup([row], cat, params)[0]
    only3 = fs.predict_speedup([dataclasses.replace(row, reference=(row.reference[0],))], cat, params)[0]
    only7 = fs.predict_speedup([dataclasses.replace(row, reference=(row.reference[1],))], cat, params)[0]
    assert both == pytest.approx(min(only3, only7))


def test_a_row_without_a_kernel_fit_borrows_the_named_one(cat):
    own = fs.base_efficiency(cat, "b200", "mxfp4")
    borrowed = fs.base_efficiency(cat, "b200", "mxfp4", ("b200", "bf16"))
    # no MXFP4 kernel data: the same GPU's BF16 fit (planner.physics.step_scope), as the row names it; not the defaults
    assert own.eta_bw == cat.fitted_efficiency[("b200", "bf16")].eta_bw != cat.hardware["b200"].efficiency.eta_bw
    assert "no kernel fit of its own" in own.source.source
    assert borrowed is cat.fitted_efficiency[("b200", "bf16")]
    assert fs.base_efficiency(cat, "h200", "fp8", ("b200", "bf16")) is cat.fitted_efficiency[("h200", "fp8")]


def test_a_gpu_ngram_proposer_pays_no_host_lookup(cat, rows):
    row = next(r for r in rows if r.id == "TR7c")
    # the TensorRT-LLM n-gram speedups were measured with the host n-gram pool (blog 7 as first published: 'runs
    # on the host'); the GPU suffix-automaton kernel the pinned revision describes came later
    assert not row.ngram_on_gpu and "runs on the host" in row.assumption
    params = {"t_spec_s": 0.0, "sampler_vocab_passes": 0.0, "t_fixed_draft_s": 0.0, "moe_verify_overlap": 0.0}
    gpu = fs.predict_speedup([dataclasses.replace(row, ngram_on_gpu=True)], cat, params)[0]
    host = fs.predict_speedup([row], cat, params)[0]
    assert gpu > host


def test_ngram_rows_whose_al_does_not_describe_the_timed_runs_are_left_out():
    skipped = {s.id: s.reason for s in fs.usable_rows(fs.read_table())[1]}
    assert "exceeds that AL" in skipped["TR7a"] and "TR7b" in skipped


def test_shipped_parameters_are_reproduced_by_the_fit_script():
    """Within the refit's own standard errors (1e-3 relative floor), the same parameters at the same priors, the
    same rows and leave-one-source-out error."""
    from calibration.fitting import speculation_run as runs  # noqa: PLC0415

    assert runs.check(runs.run(with_all_rows_cv=False), yaml.safe_load(fs.OUT_YAML.read_text())) == []


def test_catalog_applies_the_fitted_speculation_parameters(cat):
    doc = yaml.safe_load(fs.OUT_YAML.read_text())["fit"]
    # the default engine (vLLM) takes its own per-step and per-draft-pass terms (per_engine), the rest pooled
    shipped = {**doc["params"], **doc.get("per_engine", {}).get("vllm", {}).get("params", {})}
    eff = efficiency_for(cat, "h100-sxm", "bf16")
    for name, p in shipped.items():
        assert getattr(eff, name) == pytest.approx(p["value"]), name
    assert "speculation: fitted to" in eff.source.source
    override = cat.hardware["h100-sxm"].efficiency
    assert efficiency_for(cat, "h100-sxm", "bf16", override) is override  # a calibration is used as given


# ---------------------------------------------------------------------------------------------
# MoE batch trend
# ---------------------------------------------------------------------------------------------

def test_deepseek_mtp_gain_falls_with_batch_within_the_fit_error_on_8xh200_fp8(cat):
    """The MoE gain must not rise again with batch. With per-token MoE and layer costs and skewed
    routing (fitted to aiconfigurator's power-law MoE rows and its TPOT grid) the rise the first kernel fit
    predicted from batch 16 to 128 (1.39 -> 1.67, +20 %) is gone: every batch gains less than batch 1, the
    gain at 256 is below every smaller batch's, and no step up exceeds 3 % (the fitted base step matches
    aiconfigurator's DeepSeek-V3 TPOT to 3 % held out, and its own composition plateaus over batch 16-64).

    Not strictly monotone, and not required to be: over batch 16-64 the fitted step grows ~1.2x per doubling of
    tokens, as aiconfigurator's TPOT does, so the verify/base ratio plateaus and the gain rises (2026-12-05: 1.43 1.45
    1.50 at batch 16, 32, 64, +4.9 %, since the fused-MoE fit spans every measured MoE shape and its routing skew
    fell 0.51 -> 0.16: the experts a step touches saturate sooner; before, fitted on DeepSeek-V3's shape alone: 1.49
    1.50 1.52, +2 %). aiconfigurator's own MTP composition rises more over that range (1.51x at batch 8, 1.60x at
    batch 64, +6 %, the published measurements), the bound here, and the table's measured MoE curves (batch_curves)
    all fall in the model as in the data. A strict fall would need verify-token routing overlap moe_verify_overlap
    >= 0.3, which the published rows do not identify (fitted 0 +- 0.8; held at its prior 0)."""
    s = curves.deepseek_mtp_sweep(cat)
    assert np.all(s[1:] < s[0]), s
    assert s[-1] < s[:-1].min(), s
    assert np.max(s[1:] / np.minimum.accumulate(s)[:-1]) < 1.60 / 1.51, s


def test_verify_overlap_removes_the_small_batch_expert_bump(cat):
    """rho = 1 routes a sequence's verify tokens to its first token's experts: at batch 1 the verify step then
    reads no more experts than the base step (only compute and KV grow), so the gain is at least rho = 0's."""
    eff = efficiency_for(cat, "h200", "fp8")
    s0 = curves.deepseek_mtp_sweep(cat, {"moe_verify_overlap": 0.0}, batches=(1, 4))
    s1 = curves.deepseek_mtp_sweep(cat, {"moe_verify_overlap": 1.0}, batches=(1, 4))
    assert np.all(s1 > s0)
    net = target_net(cat.models["deepseek-v3"], "fp8")
    hw1 = hw_params(cat.hardware["h200"], "fp8", dataclasses.replace(eff, moe_verify_overlap=1.0))
    base, _ = step_time_s(net, hw1, batch=1.0, tokens_per_seq=1.0, context_tokens=1000, tp=8)
    verify, _ = step_time_s(net, hw1, batch=1.0, tokens_per_seq=2.0, context_tokens=1000, tp=8)
    assert float(verify) / float(base) < 1.02


# ---------------------------------------------------------------------------------------------
# Closed forms of the draft-cost terms at their limits
# ---------------------------------------------------------------------------------------------

def test_routed_tokens_limits():
    assert routed_tokens(8, 4, 0.0) == pytest.approx(32.0)  # independent routing: B n
    assert routed_tokens(8, 4, 1.0) == pytest.approx(8.0)  # full overlap: one draw per sequence
    assert routed_tokens(8, 1, 0.5) == pytest.approx(8.0)  # a baseline step is unchanged
    assert routed_tokens(8, 4, 0.5) == pytest.approx(8 * (1 + 3 * 0.5))


def test_eagle3_head_parts(cat):
    model = cat.models["llama-3.1-8b"]
    m = cat.methods["eagle3"]
    net = head_net(m, model, "bf16")
    h = model.hidden_size
    assert float(net.active_params) == pytest.approx(12 * h * h + 32000 * h)  # one layer + 32k-vocab LM head
    assert float(net.fusion_params) == pytest.approx(3 * h * h)  # 3h -> h, once per step
    assert float(net.dense_weight_bytes) == pytest.approx(2 * float(net.active_params))
    assert float(head_net(cat.methods["medusa"], model).fusion_params) == 0.0


def test_fusion_time_limits(cat):
    net = head_net(cat.methods["eagle3"], cat.models["llama-3.1-8b"], "bf16")
    eff = dataclasses.replace(cat.hardware["h100-sxm"].efficiency, eta_bw=0.8, eta_flops=0.5)
    hp = hw_params(cat.hardware["h100-sxm"], "bf16", eff)
    small = float(fusion_time_s(net, hp, batch=1, tokens_per_seq=1, tp=1))
    assert small == pytest.approx(float(net.fusion_weight_bytes) / (hp.bandwidth_bytes_s * 0.8))
    big = float(fusion_time_s(net, hp, batch=4096, tokens_per_seq=8, tp=2))
    assert big == pytest.approx(2 * float(net.fusion_params) * 4096 * 8 / (hp.peak_flops_s * 2 * 0.5))
    assert float(fusion_time_s(target_net(cat.models["llama-3.1-8b"]), hp, batch=8, tokens_per_seq=4)) == 0.0


def test_mtp_module_is_one_layer_with_its_experts(cat):
    model = cat.models["deepseek-v3"]
    net = head_net(cat.methods["mtp"], model, "fp8")
    per_expert_layer = model.expert_params_b * 1e9 / model.moe_layers
    assert float(net.expert_params) == pytest.approx(per_expert_layer)
    assert float(net.expert_bytes) == pytest.approx(per_expert_layer * 1.0)  # fp8
    assert float(net.experts) == model.experts
    h = model.hidden_size
    emb = model.vocab_size * h
    layer_dense = (model.dense_params_b * 1e9 - 2 * emb) / model.layers
    assert float(net.active_params) == pytest.approx(layer_dense + 2 * h * h + emb
                                                     + model.experts_per_token * per_expert_layer)


def test_first_draft_pass_tokens_limits():
    assert float(first_draft_pass_tokens(MODE_SEQUENTIAL, False, 1.0, 5.0)) == 5.0  # drafts from every position
    assert float(first_draft_pass_tokens(MODE_SEQUENTIAL, False, 4.0, 2.0)) == 4.0  # a tree's topk wider than n
    assert float(first_draft_pass_tokens(MODE_PARALLEL, False, 7.0, 8.0)) == 14.0  # P-EAGLE: n + K - 1 mask tokens
    assert float(first_draft_pass_tokens(MODE_PARALLEL, True, 1.0, 5.0)) == 1.0  # MEDUSA: last hidden state only


def test_speculation_overhead_limits(cat):
    eff = dataclasses.replace(cat.hardware["h100-sxm"].efficiency, t_spec_s=1e-3, sampler_vocab_passes=10.0,
                              t_ngram_s=2e-5)
    hp = hw_params(cat.hardware["h100-sxm"], "bf16", eff)
    v = 128_000
    row_s = 10.0 * v * 4 / (3350e9)  # 10 fp32 passes over one 128k-token vocabulary row at H100's 3.35 TB/s

    def overhead(mode, batch, vocab=v):
        return float(speculation_overhead_s(hp, mode=mode, batch=batch, drafted_tokens=4, vocab_size=vocab))

    assert overhead(MODE_SEQUENTIAL, 0) == pytest.approx(1e-3)
    assert overhead(MODE_SEQUENTIAL, 8, vocab=0) == pytest.approx(1e-3)
    assert overhead(MODE_SEQUENTIAL, 8) == pytest.approx(1e-3 + 32 * row_s)
    assert overhead(MODE_SEQUENTIAL, 8, vocab=2 * v) == pytest.approx(1e-3 + 64 * row_s)  # linear in the vocabulary
    assert overhead(MODE_NONE, 8) == pytest.approx(1e-3 + 32 * row_s + 16e-5)


def test_sampler_time_falls_with_bandwidth(cat):
    eff = dataclasses.replace(cat.hardware["h100-sxm"].efficiency, sampler_vocab_passes=40.0)
    slow, fast = (hw_params(cat.hardware[h], "bf16", eff) for h in ("h100-sxm", "b200"))
    t = [float(sampler_time_s(hp, batch=64, drafted_tokens=7, vocab_size=201_088)) for hp in (slow, fast)]
    bw = [cat.hardware[h].hbm_bandwidth_gb_s for h in ("h100-sxm", "b200")]
    assert t[0] / t[1] == pytest.approx(bw[1] / bw[0])
    assert t[1] == pytest.approx(40.0 * 64 * 7 * 201_088 * 4 / (bw[1] * 1e9))


def test_a_tree_pays_the_per_token_overhead_for_every_verified_draft_node(cat):
    # SGLang's depth-3 x topk-4 tree verifies 21 tokens (20 draft nodes) at K = 3: each node gets a KV slot, a
    # target row and a comparison, so the per-drafted-token overhead counts 20 per sequence, not the chain's 3.
    eff = dataclasses.replace(cat.hardware["h100-sxm"].efficiency, t_spec_s=0.0, sampler_vocab_passes=10.0)
    hp = hw_params(cat.hardware["h100-sxm"], "bf16", eff)
    model = cat.models["qwen3-8b"]
    row_s = 10.0 * model.vocab_size * 4 / (cat.hardware["h100-sxm"].hbm_bandwidth_gb_s * 1e9)
    kw = dict(target=target_net(model), draft=null_net(), hw=hp, mode=MODE_SEQUENTIAL, draft_scales_with_k=False,
              k=3.0, batch=2.0, tau=2.0, context_tokens=400.0, prompt_tokens=400.0, output_tokens=200.0,
              usd_per_gpu_hour=1.0)
    chain = evaluate_arrays(**kw)
    tree = evaluate_arrays(**kw, verify_tokens=21.0)
    assert float(chain.draft_time_s) == pytest.approx(2 * 3 * row_s)
    assert float(tree.draft_time_s) == pytest.approx(2 * 20 * row_s)


def _eval(cat, **kw):
    model = cat.models["llama-3.1-8b"]
    args = dict(target=target_net(model), draft=target_net(model), hw=hw_params(cat.hardware["h100-sxm"]),
                mode=MODE_SEQUENTIAL, draft_scales_with_k=False, k=3.0, batch=32.0, tau=3.0, context_tokens=32000.0,
                prompt_tokens=32000.0, output_tokens=256.0, usd_per_gpu_hour=1.0, tp=8, draft_is_model=True)
    args.update(kw)
    return evaluate_arrays(**args)


def test_draft_context_tokens_limits(cat):
    default = _eval(cat)
    same = _eval(cat, draft_context_tokens=32000.0)
    assert float(same.draft_time_s) == pytest.approx(float(default.draft_time_s))
    budget = _eval(cat, draft_context_tokens=512.0)  # self-speculation with a 512-token KV (MagicDec)
    assert float(budget.draft_time_s) < 0.5 * float(default.draft_time_s)
    assert float(budget.verify_time_s) == pytest.approx(float(default.verify_time_s))


def test_ngram_costs_host_time_per_sequence_only(cat):
    model = cat.models["llama-3.1-8b"]
    eff = dataclasses.replace(cat.hardware["h100-sxm"].efficiency, t_spec_s=0.0, sampler_vocab_passes=0.0,
                              t_ngram_s=2e-5)
    hp = hw_params(cat.hardware["h100-sxm"], "bf16", eff)
    res = evaluate_arrays(target=target_net(model), draft=null_net(), hw=hp,
                          mode=MODE_NONE, draft_scales_with_k=False, k=4.0, batch=np.array([1.0, 64.0]), tau=2.0,
                          context_tokens=1000.0, prompt_tokens=1000.0, output_tokens=200.0, usd_per_gpu_hour=1.0)
    assert res.draft_time_s == pytest.approx([2e-5, 64 * 2e-5])


def test_research_loop_rows_are_checked_against_the_fit_not_fitted(cat):
    usable, _ = fs.usable_rows(fs.read_table())
    fitted, checked = fs.split_rows(usable)
    assert {r.id for r in checked} == {"MD1", "MD2", "MD3", "MD10", "MD11"}  # MagicDec's gpt-fast loop
    assert fitted and all(r.engine in fs.SERVING_ENGINES for r in fitted)
    # the A100 rows are mapped now that A100 has a kernel-fitted step time (aiconfigurator's vLLM 0.14 rows)
    assert ("a100-80gb-sxm", "bf16") in cat.fitted_efficiency
    shipped = yaml.safe_load(fs.OUT_YAML.read_text())["fit"]
    assert shipped["row_ids"] == [r.id for r in fitted]
    assert shipped["checked_not_fitted"]["row_ids"] == [r.id for r in checked]
    assert "host synchronisations" in shipped["checked_not_fitted"]["why"]["gpt-fast"]
    # the check is reported, not hidden: the all-rows cross-validation is recorded beside the fitted one
    # (both figures of the pooled model, one set for every engine: loso_mape is the per-engine model's)
    all_rows, fitted_only = shipped["checked_not_fitted"]["loso_mape_all_rows"], shipped["loso_mape_pooled"]
    assert all_rows is not None and fitted_only is not None and all_rows != fitted_only


def test_evaluate_without_memory_changes_only_the_memory_fields(cat):
    model = cat.models["llama-3.1-8b"]
    kw = dict(target=target_net(model), draft=null_net(), hw=hw_params(cat.hardware["h100-sxm"]), mode=MODE_NONE,
              draft_scales_with_k=False, k=3.0, batch=np.array([1.0, 64.0, 4096.0]), tau=2.0, context_tokens=1000.0,
              prompt_tokens=1000.0, output_tokens=200.0, usd_per_gpu_hour=1.0)
    full, bare = evaluate_arrays(**kw), evaluate_arrays(**kw, with_memory=False)
    assert np.array_equal(full.tpot_s, bare.tpot_s) and np.array_equal(full.usd_per_mtok, bare.usd_per_mtok)
    assert np.all(np.isfinite(full.max_batch)) and full.fits_memory.tolist() == [True, True, False]
    assert np.all(np.isnan(bare.max_batch)) and not bare.fits_memory.any()  # not computed: never "fits"
