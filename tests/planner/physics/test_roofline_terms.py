"""Each step-time and memory term of planner/physics/roofline.py at its closed-form limits."""

import dataclasses

import numpy as np
import pytest

from planner.physics import roofline as rf
from planner.physics.roofline import HwParams, hw_params, null_net, target_net


def hwp(**kw) -> HwParams:
    base = dict(bandwidth_bytes_s=1e12, peak_flops_s=1e15, eta_bw=0.8, eta_flops=0.5, t_fixed_s=1e-3,
                t_fixed_draft_s=0.0, allreduce_latency_s=1e-5, t_spec_s=0.0, interconnect_bytes_s=1e11,
                hbm_bytes=80e9)
    base.update(kw)
    return HwParams(**base)


def net(**kw) -> rf.Net:
    base = dict(dense_weight_bytes=1e10, expert_bytes=0.0, experts=0.0, experts_per_token=0.0, active_params=5e9,
                attn_dim=4096.0, kv_bytes_per_token=1e5, layers=32.0, hidden_size=4096.0)
    base.update(kw)
    return rf.Net(**base)


def test_mla_latent_is_replicated_on_every_tp_rank(catalog):
    ds = target_net(catalog.models["deepseek-v3"], "fp8")
    assert float(ds.kv_bytes_per_token) == 61 * 576  # fp8 cache: 35,136 B per token on each GPU
    one = rf.kv_read_bytes_per_gpu(ds, batch=4, context_tokens=1000, tp=1)
    eight = rf.kv_read_bytes_per_gpu(ds, batch=4, context_tokens=1000, tp=8)
    assert float(eight) == pytest.approx(float(one))
    assert float(rf.kv_cache_bytes_per_sequence(ds, sequence_tokens=1, tp=8)) == pytest.approx(8 * 61 * 576)
    bf16_cache = target_net(catalog.models["deepseek-v3"], "fp8", kv_dtype="bf16")
    assert float(bf16_cache.kv_bytes_per_token) == 2 * 61 * 576


def test_gqa_kv_splits_by_kv_head_then_replicates():
    n = net(kv_shards=8.0)
    per = [float(rf.kv_read_bytes_per_gpu(n, batch=1, context_tokens=1000, tp=t)) for t in (1, 2, 8, 16)]
    assert per[1] == pytest.approx(per[0] / 2) and per[2] == pytest.approx(per[0] / 8)
    assert per[3] == pytest.approx(per[2])  # 16 ranks, 8 KV heads: each head on two ranks


def test_deepseek_max_batch_on_8xh200_matches_the_replicated_latent(catalog):
    ds = target_net(catalog.models["deepseek-v3"], "fp8")
    hw = hw_params(catalog.hardware["h200"], "fp8")
    mb = float(rf.max_batch(hw=hw, weight_bytes_total=rf.resident_weight_bytes(ds),
                            kv_bytes_per_sequence=rf.kv_cache_bytes_per_sequence(ds, sequence_tokens=1200, tp=8),
                            tp=8))
    assert mb == pytest.approx(930, rel=0.15)


def test_kv_dtype_is_its_own_choice(catalog):
    m = catalog.models["llama-3.1-8b"]
    assert float(target_net(m, "fp8").kv_bytes_per_token) == float(target_net(m, "bf16").kv_bytes_per_token) / 2
    a, b = target_net(m, "bf16", kv_dtype="fp8"), target_net(m, "bf16")
    assert float(a.kv_bytes_per_token) == float(b.kv_bytes_per_token) / 2
    assert float(a.dense_weight_bytes) == float(b.dense_weight_bytes)
    with pytest.raises(ValueError, match="kv_dtype='int4'"):
        target_net(m, "bf16", kv_dtype="int4")


def test_gpt_oss_120b_fits_one_h100_only_in_mxfp4(catalog):
    m, h100 = catalog.models["gpt-oss-120b"], catalog.hardware["h100-sxm"]

    def fits(dtype: str) -> float:
        n = target_net(m, dtype)
        return float(rf.max_batch(hw=hw_params(h100, dtype), weight_bytes_total=rf.resident_weight_bytes(n),
                                  kv_bytes_per_sequence=rf.kv_cache_bytes_per_sequence(n, sequence_tokens=2000)))

    assert fits("mxfp4") >= 16 and fits("fp8") == 0 and fits("bf16") == 0
    # MXFP4 experts are 4.25 bits; attention, embeddings and LM head stay BF16 (fp4_scope: experts)
    w = rf.weight_bytes_by_component(m, "mxfp4")
    assert w["experts_one"] == pytest.approx(m.expert_params_b * 1e9 * 4.25 / 8)


def test_untied_input_embedding_is_resident_but_not_streamed(catalog):
    m = catalog.models["llama-3.1-8b"]
    assert not m.tied_embeddings
    n = target_net(m)
    emb = m.embedding_params_b * 1e9 * 2
    assert float(rf.weight_bytes_read(n, 1)) == pytest.approx(m.total_params_b * 1e9 * 2 - emb)
    assert float(rf.resident_weight_bytes(n)) == pytest.approx(m.total_params_b * 1e9 * 2)
    tied = target_net(dataclasses.replace(m, tied_embeddings=True))
    assert float(rf.weight_bytes_read(tied, 1)) == pytest.approx(float(rf.resident_weight_bytes(tied)))


def test_sliding_window_layers_see_at_most_the_window(catalog):
    g = target_net(catalog.models["gpt-oss-120b"], "mxfp4")
    assert float(rf.effective_context_tokens(g, 100)) == pytest.approx(100)  # below the window: all layers
    long = float(rf.effective_context_tokens(g, 1e6))
    assert long / 1e6 == pytest.approx(0.5, rel=1e-3)  # half the layers: KV ~halved at long context
    assert float(rf.effective_context_tokens(net(), 1e6)) == 1e6  # no window


def test_absorbed_mla_attention_costs_about_2_8x(catalog):
    ds = target_net(catalog.models["deepseek-v3"], "fp8")
    assert float(ds.decode_attn_flop_factor) == pytest.approx((2 * 576 + 2 * 512) / (4 * 192))
    assert 2.7 < float(ds.decode_attn_flop_factor) < 2.9
    assert float(target_net(catalog.models["llama-3.1-8b"]).decode_attn_flop_factor) == 1.0


def test_token_dependent_efficiencies_at_their_limits():
    hw = hwp(eta_bw_tokens_scale=1 / 500, flops_tokens_half=32.0)
    assert float(rf.eta_bw_at(hw, 0)) == pytest.approx(0.8)
    assert float(rf.eta_bw_at(hw, 500)) == pytest.approx(0.4)
    assert float(rf.eta_flops_at(hw, 32)) == pytest.approx(0.25)
    assert float(rf.eta_flops_at(hw, 1e9)) == pytest.approx(0.5, rel=1e-6)
    assert float(rf.eta_bw_at(hwp(), 1e6)) == 0.8 and float(rf.eta_flops_at(hwp(), 1)) == 0.5


def test_allreduce_latency_and_bandwidth_limits():
    n = net()
    assert float(rf.allreduce_time_s(n, hwp(), tokens_in_step=8, tp=1)) == 0.0
    tiny = float(rf.allreduce_time_s(n, hwp(), tokens_in_step=1e-9, tp=4))
    assert tiny == pytest.approx(2 * 32 * 1e-5)
    big = float(rf.allreduce_time_s(n, hwp(allreduce_latency_s=0.0), tokens_in_step=1000, tp=4))
    assert big == pytest.approx(2 * 32 * (2 * 3 / 4) * 1000 * 4096 * 2 / 1e11)


def test_moe_fixed_costs_from_one_token_to_all_experts():
    n = net(experts=256.0, experts_per_token=8.0, expert_bytes=1e6, moe_layers=58.0)
    hw = hwp(t_expert_s=1e-6, t_moe_layer_s=2e-5)
    assert float(rf.moe_expert_time_s(n, hw, tokens_in_step=1)) == pytest.approx(58 * (8e-6 + 2e-5))
    assert float(rf.moe_expert_time_s(n, hw, tokens_in_step=1e6)) == pytest.approx(58 * (256e-6 + 2e-5))
    assert float(rf.tokens_per_touched_expert(n, 1)) == pytest.approx(1.0)
    assert float(rf.moe_expert_time_s(net(), hw, tokens_in_step=100)) == 0.0


def test_moe_token_cost_is_linear_in_routed_tokens():
    n = net(experts=256.0, experts_per_token=8.0, expert_bytes=1e6, moe_layers=58.0)
    hw = hwp(t_moe_token_s=3e-8)
    assert float(rf.moe_token_time_s(n, hw, tokens_in_step=1)) == pytest.approx(58 * 8 * 3e-8)
    assert float(rf.moe_token_time_s(n, hw, tokens_in_step=512)) == pytest.approx(512 * 58 * 8 * 3e-8)
    assert float(rf.moe_token_time_s(n, hwp(), tokens_in_step=512)) == 0.0  # default: no per-token cost
    assert float(rf.moe_token_time_s(net(), hw, tokens_in_step=512)) == 0.0  # dense
    # in the step: every routed token pays it, verify tokens included (no routing overlap applies)
    terms = rf.step_time_terms(n, hwp(t_moe_token_s=3e-8, moe_verify_overlap=1.0), batch=4, tokens_per_seq=3,
                               context_tokens=100)
    assert float(terms.moe_tokens_s) == pytest.approx(12 * 58 * 8 * 3e-8)


def test_skewed_routing_touches_fewer_experts_and_tends_to_uniform():
    n = net(experts=256.0, experts_per_token=8.0, expert_bytes=1e6, moe_layers=58.0)
    m = np.array([1.0, 16.0, 64.0, 512.0])
    uniform = 256 * (1 - (1 - 8 / 256) ** m)
    np.testing.assert_allclose(rf.touched_experts(n, m), uniform, rtol=1e-12)
    np.testing.assert_allclose(rf.touched_experts(n, m, 1e-9), uniform, rtol=1e-5)  # s -> 0: uniform
    q = -np.log(1 - 8 / 256)
    skewed = rf.touched_experts(n, m, 0.5)
    np.testing.assert_allclose(skewed, 256 * (1 - (1 + 0.5 * m * q) ** -2.0), rtol=1e-12)
    assert np.all(skewed < uniform) and np.all(np.diff(skewed) > 0)
    assert float(rf.touched_experts(n, 1e12, 0.5)) == pytest.approx(256, rel=1e-4)  # every expert in the end
    assert float(rf.touched_experts(n, 1, 0.5)) == pytest.approx(8, rel=0.05)  # about k for one token
    assert float(rf.touched_experts(net(), 64, 0.5)) == 0.0


def test_layer_token_cost_is_per_layer_and_token():
    hw = hwp(t_layer_token_s=2e-7)
    assert float(rf.layer_token_time_s(net(), hw, tokens_in_step=1)) == pytest.approx(32 * 2e-7)
    assert float(rf.layer_token_time_s(net(), hw, tokens_in_step=100)) == pytest.approx(100 * 32 * 2e-7)
    assert float(rf.layer_token_time_s(net(), hwp(), tokens_in_step=100)) == 0.0
    terms = rf.step_time_terms(net(), hw, batch=8, tokens_per_seq=2, context_tokens=100)
    assert float(terms.layer_tokens_s) == pytest.approx(16 * 32 * 2e-7)


def test_layer_kernel_cost_is_per_layer():
    assert float(rf.layer_kernel_time_s(net(), hwp(t_layer_s=3e-5))) == pytest.approx(32 * 3e-5)


def test_default_parameters_reproduce_the_single_roofline():
    n, hw = net(), hwp()
    b, ctx, tp = np.array([1.0, 64.0, 512.0]), 2000.0, 2.0
    t, _ = rf.step_time_s(n, hw, batch=b, tokens_per_seq=1, context_tokens=ctx, tp=tp)
    bytes_ = 1e10 + b * ctx * 1e5
    flops = 2 * 5e9 * b + 4 * 4096 * ctx * b
    comm = 2 * 32 * (2 * 1 / 2 * b * 4096 * 2 / 1e11 + 1e-5)
    legacy = np.maximum(bytes_ / (1e12 * 0.8 * tp), flops / (1e15 * 0.5 * tp)) + comm + 1e-3
    np.testing.assert_allclose(t, legacy, rtol=1e-12)


def test_per_op_roofline_sums_each_operation_maximum():
    n, hw = net(), hwp(per_op_roofline=1.0)
    terms = rf.step_time_terms(n, hw, batch=256, tokens_per_seq=1, context_tokens=4000)
    expect = max(float(terms.weights_s), float(terms.gemm_s)) + max(float(terms.kv_s), float(terms.attention_s))
    assert float(terms.core_s) == pytest.approx(expect)
    assert float(terms.total_s) == pytest.approx(expect + float(terms.layers_s) + 1e-3)


def test_network_without_parameters_costs_nothing():
    t, _ = rf.step_time_s(null_net(), hwp(t_layer_s=1e-4), batch=8, tokens_per_seq=1, context_tokens=100)
    assert float(t) == 0.0


def test_mla_block_cost_is_per_mla_layer_and_per_head_token_on_each_gpu():
    hw = hwp(t_mla_layer_s=1e-4, t_mla_head_token_s=5e-9)
    mla = net(mla_layers=61.0, mla_heads=128.0)
    # 61 x (100 us + 32 tokens x 128 / 8 heads per GPU x 5 ns)
    assert float(rf.mla_kernel_time_s(mla, hw, tokens_in_step=32, tp=8)) == pytest.approx(61 * (1e-4 + 32 * 16 * 5e-9))
    assert float(rf.mla_kernel_time_s(net(), hw, tokens_in_step=32, tp=8)) == 0.0  # GQA: no MLA blocks
    with_mla = rf.step_time_terms(mla, hw, batch=8, tokens_per_seq=4, context_tokens=1000, tp=8)
    without = rf.step_time_terms(mla, hwp(), batch=8, tokens_per_seq=4, context_tokens=1000, tp=8)
    assert float(with_mla.mla_s) == pytest.approx(61 * (1e-4 + 32 * 16 * 5e-9))
    assert float(with_mla.total_s - without.total_s) == pytest.approx(float(with_mla.mla_s))


def test_mla_models_and_their_mtp_module_carry_mla_blocks_gqa_heads_do_not(catalog):
    from planner.physics.roofline import head_net

    ds = catalog.models["deepseek-v3"]
    assert float(target_net(ds, "fp8").mla_layers) == 61 and float(target_net(ds, "fp8").mla_heads) == 128
    assert float(target_net(catalog.models["llama-3.1-8b"]).mla_layers) == 0
    mtp = next(m for m in catalog.methods.values() if m.drafting == "native_module")
    assert float(head_net(mtp, ds, "fp8").mla_layers) == mtp.draft_layers
    eagle = next(m for m in catalog.methods.values() if m.drafting == "sequential_head")
    assert float(head_net(eagle, ds, "fp8").mla_layers) == 0
