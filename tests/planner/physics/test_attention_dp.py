"""Data-parallel attention with expert-parallel MoE (planner.physics.roofline.step_time_terms(attention_dp=1)): each
term at its closed-form limits, the all-to-all fit's round trip, memory, and the plan / deploy / CLI path."""

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner import plan as P
from planner.physics import roofline as rf
from planner.physics.roofline import HwParams, hw_params, target_net
from planner.search.scenario import efficiency_for


def hwp(**kw) -> HwParams:
    base = dict(bandwidth_bytes_s=1e12, peak_flops_s=1e15, eta_bw=0.8, eta_flops=0.5, t_fixed_s=1e-3,
                t_fixed_draft_s=0.0, allreduce_latency_s=1e-5, t_spec_s=0.0, interconnect_bytes_s=1e11,
                hbm_bytes=80e9, t_layer_s=2e-5, t_layer_token_s=1e-7, t_expert_s=1e-6, t_moe_layer_s=1e-5,
                t_moe_token_s=1e-8, per_op_roofline=1.0, alltoall_latency_s=4e-5, eta_alltoall=0.5)
    base.update(kw)
    return HwParams(**base)


def moe_net(**kw) -> rf.Net:
    base = dict(dense_weight_bytes=2e10, expert_bytes=4e8, experts=64.0, experts_per_token=4.0, active_params=2e10,
                attn_dim=8192.0, kv_bytes_per_token=3e4, layers=40.0, hidden_size=6144.0, kv_shards=1.0,
                moe_layers=40.0, expert_params=4e8)
    base.update(kw)
    return rf.Net(**base)


def dense_net() -> rf.Net:
    return rf.Net(dense_weight_bytes=1.6e10, expert_bytes=0.0, experts=0.0, experts_per_token=0.0,
                  active_params=8e9, attn_dim=4096.0, kv_bytes_per_token=1.3e5, layers=32.0, hidden_size=4096.0,
                  kv_shards=8.0)


def terms(net, hw, *, dp, tp, batch, n=1, ctx=4000):
    return rf.step_time_terms(net, hw, batch=batch, tokens_per_seq=n, context_tokens=ctx, tp=tp, attention_dp=dp)


def test_one_gpu_is_the_same_either_way():
    hw = hwp()
    for net in (moe_net(), dense_net()):
        for n in (1, 4):
            a = terms(net, hw, dp=0.0, tp=1, batch=16, n=n)
            b = terms(net, hw, dp=1.0, tp=1, batch=16, n=n)
            assert float(b.total_s) == pytest.approx(float(a.total_s), rel=1e-12)


def test_a_dense_model_data_parallel_is_one_gpu_at_its_share_of_the_batch():
    """No experts: attention DP over g GPUs is g independent copies, no communication at all."""
    hw, net = hwp(), dense_net()
    dp = terms(net, hw, dp=1.0, tp=8, batch=64, n=4)
    one = terms(net, hw, dp=0.0, tp=1, batch=8, n=4)
    assert float(dp.allreduce_s) == 0.0
    assert float(dp.total_s) == pytest.approx(float(one.total_s), rel=1e-12)
    tp8 = terms(net, hw, dp=0.0, tp=8, batch=64, n=4)
    assert float(tp8.allreduce_s) > 0  # tensor parallel pays its all-reduces


def test_mla_latent_is_read_once_per_sequence_under_data_parallel_attention(catalog):
    ds = target_net(catalog.models["deepseek-v3"], "fp8")
    hw = hw_params(catalog.hardware["h200"], "fp8", efficiency_for(catalog, "h200", "fp8"))
    tp8 = terms(ds, hw, dp=0.0, tp=8, batch=64)
    dp8 = terms(ds, hw, dp=1.0, tp=8, batch=64)
    # TP: every GPU reads all 64 sequences' latent; DP: its own 8
    assert float(dp8.kv_s) == pytest.approx(float(tp8.kv_s) / 8, rel=1e-12)
    # attention FLOPs per GPU are the same (64 sequences x 16 heads = 8 sequences x 128 heads)
    assert float(dp8.attention_s) == pytest.approx(float(tp8.attention_s), rel=1e-12)


def test_experts_split_the_same_way_dense_weights_do_not():
    hw = hwp(eta_bw_tokens_scale=0.0)
    net = moe_net()
    tp = terms(net, hw, dp=0.0, tp=8, batch=64)
    dp = terms(net, hw, dp=1.0, tp=8, batch=64)
    touched = float(rf.touched_experts(net, 64.0))
    experts_per_gpu = touched * 4e8 / 8 / (1e12 * 0.8)
    assert float(tp.weights_s) == pytest.approx(2e10 / 8 / (1e12 * 0.8) + experts_per_gpu, rel=1e-9)
    assert float(dp.weights_s) == pytest.approx(2e10 / (1e12 * 0.8) + experts_per_gpu, rel=1e-9)
    # each GPU runs its own E / 8 experts: the per-expert and per-routed-token kernel costs fall 8x
    layers = 40.0
    assert float(dp.experts_s) == pytest.approx(layers * (touched / 8 * 1e-6 + 1e-5), rel=1e-9)
    assert float(dp.moe_tokens_s) == pytest.approx(float(tp.moe_tokens_s) / 8, rel=1e-12)


def test_alltoall_closed_form():
    hw, net = hwp(), moe_net()
    assert float(rf.alltoall_time_s(net, hw, tokens_per_gpu=5.0, gpus=1)) == 0.0
    assert float(rf.alltoall_time_s(dense_net(), hw, tokens_per_gpu=5.0, gpus=8)) == 0.0
    got = float(rf.alltoall_time_s(net, hw, tokens_per_gpu=3.0, gpus=8))
    per_phase = 4e-5 + 3.0 * 4 * 6144 * 2.0 * 7 / 8 / (1e11 * 0.5)
    assert got == pytest.approx(2 * 40 * per_phase, rel=1e-12)
    dp = terms(net, hw, dp=1.0, tp=8, batch=24)  # 3 tokens per GPU
    assert float(dp.allreduce_s) == pytest.approx(got, rel=1e-12)


def test_alltoall_fit_recovers_known_parameters():
    from calibration.fitting import steptime as fst  # noqa: PLC0415

    class HW:
        interconnect_gb_s = 450.0

    rows = []
    truth = (4.5e-5, 0.42)
    for hidden, topk in ((7168, 8), (4096, 6)):
        for tokens in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            t = fst.alltoall_time_s(np.array(truth), 8.0, float(tokens), float(topk), float(hidden), 450e9) / 2
            for phase in ("dispatch", "combine"):
                rows.append({"op": f"alltoall:{hidden}:{topk}:256:{phase}", "m": "8", "n": str(tokens),
                             "k": str(hidden), "latency_ms": str(t * 1e3)})
    fit = fst.fit_alltoall(rows, HW())
    assert fit.value("alltoall_latency_s") == pytest.approx(truth[0], rel=1e-6)
    assert fit.value("eta_alltoall") == pytest.approx(truth[1], rel=1e-6)


def test_fitted_alltoall_is_shipped_for_the_kernel_fitted_gpus(catalog):
    import yaml  # noqa: PLC0415

    shipped = yaml.safe_load(open("profiles/data/fitted/steptime_vllm.yaml", encoding="utf-8"))["entries"]
    for hw in ("h100-sxm", "h200", "b200"):
        eff = efficiency_for(catalog, hw, "bf16")
        params = shipped[f"{hw}/bf16"]["params"]
        # the planner runs on the kernel fit's values, not the Efficiency defaults (5e-5 s, 0.3)
        assert eff.alltoall_latency_s == pytest.approx(params["alltoall_latency_s"]["value"], rel=1e-9)
        assert eff.eta_alltoall == pytest.approx(params["eta_alltoall"]["value"], rel=1e-9)
        assert params["alltoall_latency_s"]["fit"] == "alltoall" and params["alltoall_latency_s"]["points"] > 50
        assert 1e-5 < eff.alltoall_latency_s < 2e-4  # tens of microseconds a phase, as measured
        assert 0 < eff.eta_alltoall <= 1


def test_memory_every_gpu_holds_the_dense_weights_and_one_latent_per_sequence(catalog):
    ds = target_net(catalog.models["deepseek-v3"], "fp8")
    whole = float(rf.resident_weight_bytes(ds))
    non_expert = float(ds.dense_weight_bytes) + float(ds.resident_only_bytes)
    assert float(rf.replica_weight_bytes(ds, tp=8, attention_dp=1.0)) == pytest.approx(whole + 7 * non_expert)
    assert float(rf.replica_weight_bytes(ds, tp=8, attention_dp=0.0)) == pytest.approx(whole)
    assert float(rf.data_parallel_split(8, 1.0)[0]) == 1.0 and float(rf.data_parallel_split(8, 0.0)[0]) == 8.0


def test_deepseek_on_8xh200_holds_several_times_more_sequences_data_parallel(catalog):
    req = P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", tpot_slo_ms=200.0,
                        methods=("mtp",))
    tp = P.plan(req, catalog)
    dp = P.plan(dataclasses.replace(req, attention_dp=True), catalog)
    mb_tp = next(m.max_batch for m in tp.methods if m.method == "mtp")
    mb_dp = next(m.max_batch for m in dp.methods if m.method == "mtp")
    # the latent is stored once instead of 8 times, less the 7 extra copies of the non-expert weights
    assert 4 * mb_tp < mb_dp < 8 * mb_tp
    cmd = dp.deploy["command"]
    assert "--data-parallel-size 8 --enable-expert-parallel" in cmd and "--tensor-parallel-size" not in cmd
    point = next(m for m in dp.methods if m.method == "mtp")
    assert f"--max-num-seqs {math.ceil(point.batch / 8)}" in cmd  # per data-parallel rank


def test_attention_dp_on_a_dense_model_is_refused_by_name(catalog):
    with pytest.raises(P.PlanError) as e:
        P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, attention_dp=True), catalog)
    assert "attention_dp" in str(e.value) and "dense" in str(e.value)


def test_cli_flag_reaches_the_plan():
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "deepseek-v3", "--hardware", "h200",
                          "--tp", "8", "--dtype", "fp8", "--attention-dp"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert "--enable-expert-parallel" in json.dumps(doc)


def test_published_dp_rows_are_fitted_as_deployed():
    from calibration.fitting import speculation as fs  # noqa: PLC0415

    rows, _ = fs.usable_rows(fs.read_table())
    lm = [r for r in rows if r.id in ("LM1", "LM2")]
    assert len(lm) == 2 and all(r.attention_dp and r.tp == 16 and r.batch == 32 for r in lm)


def _ds_dp(catalog, **kw) -> P.Plan:
    base = dict(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", attention_dp=True, tpot_slo_ms=30.0)
    return P.plan(P.PlanRequest(**{**base, **kw}), catalog)


def test_today_is_plain_tp_when_it_is_cheaper_than_data_parallel_attention(catalog):
    """At a 30 ms TPOT, DeepSeek-V3 fp8 on 8 x H200 without speculation needs 48 GPUs with data-parallel attention
    and 24 on plain TP: today is the cheaper plain TP, named in the note and the verdict, and the saving is
    measured from it, not from the dearer DP fleet."""
    p = _ds_dp(catalog)
    plain = P.plan(P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", tpot_slo_ms=30.0), catalog)
    dp_no_spec = p.bill(P.NO_SPEC)
    assert p.reference.attention_dp is False and "plain TP" in p.reference.label
    assert p.reference_fleet.peak_gpus == plain.reference_fleet.peak_gpus < dp_no_spec.peak_gpus
    assert p.economics.reference_bill_usd_per_month == pytest.approx(plain.economics.reference_bill_usd_per_month)
    assert p.economics.reference_bill_usd_per_month < dp_no_spec.usd_per_month
    assert p.reference.label in p.reference_note and p.reference.label in p.verdict


def test_today_stays_data_parallel_when_plain_tp_is_not_cheaper(catalog):
    """At 50 ms both fleets are one replica: no cheaper plain TP, today is data-parallel attention itself."""
    p = _ds_dp(catalog, tpot_slo_ms=50.0)
    assert p.reference.method == P.NO_SPEC and p.reference.attention_dp is None


def test_speculation_with_data_parallel_attention_is_never_certain(catalog):
    """No end-to-end measurement of speculation with DP attention: P(saving > 0) stays strictly inside (0, 1) even
    where every draw saves, the saving's draws spread (p5 < p95) and the risk-weighted NPV sits beside the NPV."""
    for vol in (1e10, 5e10):
        e = _ds_dp(catalog, monthly_output_tokens=vol).economics
        assert 0.0 < e.p_saving_positive < 1.0
        assert e.risk_weighted_npv_usd is not None and math.isfinite(e.risk_weighted_npv_usd)
    assert e.saving_p05_usd < e.saving_p95_usd
    assert any(a.what.startswith("speculation speedup with data-parallel attention")
               for a in _ds_dp(catalog).assumptions)


def test_the_draws_move_the_replicas_by_more_than_a_step_where_the_band_says_so(catalog):
    """50B tokens/month: the DP fleet with speculation is 2 replicas of 8 GPUs; +-30 % on its speedup moves the
    replicas it needs across a whole one (2 / 1.3 < 2 < 2 / 0.7), so the saving's 5-95 % range is at least one
    replica's month."""
    p = _ds_dp(catalog, monthly_output_tokens=5e10)
    e, bf = p.economics, p.best_fleet
    assert bf.peak_gpus == 16
    # one replica over the fleet's hours: its GPUs x $/GPU-hour x the month's GPU-hours per peak GPU
    one_replica = bf.tp * bf.usd_per_gpu_hour * (bf.gpu_hours_per_month / bf.peak_gpus)
    assert e.saving_p95_usd - e.saving_p05_usd >= one_replica * (1 - 1e-9)


def test_the_saving_on_a_knee_of_the_slo_is_said(catalog):
    """At 50 ms speculation saves nothing (one replica either way) but at 40 ms it saves a replica: the answer sits
    on a knee of the SLO and the sentence gives the three savings; the CLI's JSON carries the same record."""
    from planner.checks.knee import knee_sentence, slo_knee

    p = _ds_dp(catalog, tpot_slo_ms=50.0)
    k = slo_knee(p, catalog)
    assert k.saving_usd == 0.0 and k.low_saving_usd > 0 and k.on_knee
    assert "knee of the SLO" in knee_sentence(k) and "40 ms" in knee_sentence(k)
    # the knee's savings are plan()'s own: at 40 ms the full plan saves what the knee says
    at40 = _ds_dp(catalog, tpot_slo_ms=40.0).economics.monthly_saving_usd
    assert k.low_saving_usd == pytest.approx(at40) and P.monthly_saving(p.request, catalog) == pytest.approx(0.0)
    flat = dataclasses.replace(k, low_saving_usd=k.saving_usd, high_saving_usd=k.saving_usd, on_knee=False)
    assert knee_sentence(flat) == ""
