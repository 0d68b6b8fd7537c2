"""Per-step and per-layer kernel terms hold for the architectures their TPOT cells saw (planner.physics.step_scope): an
FP8 Llama on H200 does not pay DeepSeek-V3's MLA/MoE layer kernels, a dtype without its own fit runs on the same GPU's
BF16 fit, and a borrowed set (MI300X) takes its per-step terms from a fit that covers the model."""

import json
from pathlib import Path

import pytest
import yaml

from planner.context import efficiency_for, make_context, step_efficiency
from planner.physics.roofline import hw_params, step_time_s, step_time_terms, target_net
from planner.physics.step_scope import STAGE_B, arch_family
from planner.request import PlanRequest
from profiles.model_config import parse_model_config

FITTED = Path(__file__).resolve().parents[3] / "profiles" / "data" / "fitted"
CONFIGS = Path(__file__).resolve().parents[2] / "profiles" / "model_configs"
STEP = yaml.safe_load((FITTED / "steptime_vllm.yaml").read_text())["entries"]
BORROWED = yaml.safe_load((FITTED / "steptime_borrowed.yaml").read_text())["entries"]


def shipped(key: str, name: str) -> float:
    return float(STEP[key]["params"][name]["value"])


def step_ms(catalog, model: str, hardware: str, dtype: str, tp: int = 1, batch: float = 1.0) -> float:
    m = catalog.models[model]
    eff = step_efficiency(catalog, hardware, dtype, m)
    t, _ = step_time_s(target_net(m, dtype), hw_params(catalog.hardware[hardware], dtype, eff), batch=batch,
                       tokens_per_seq=1.0, context_tokens=1000.0, tp=tp)
    return 1e3 * float(t)


def test_families_name_attention_and_experts(catalog):
    assert arch_family(catalog.models["llama-3.1-8b"]) == "gqa-dense"
    assert arch_family(catalog.models["deepseek-v3"]) == "mla-moe"
    assert arch_family(catalog.models["qwen3-30b-a3b"]) == "gqa-moe"


def test_h200_fp8_cells_are_deepseek_only_so_a_dense_fp8_model_takes_the_bf16_fits_per_step_terms(catalog):
    assert STEP["h200/fp8"]["tpot_models"] == ["deepseek-v3"]
    llama = step_efficiency(catalog, "h200", "fp8", catalog.models["llama-3.1-8b"])
    for name in STAGE_B:
        assert getattr(llama, name) == pytest.approx(shipped("h200/bf16", name))
    assert "h200 / bf16 fit" in llama.source.source and "gqa-dense" in llama.source.source
    # the kernel terms stay FP8's own
    assert llama.eta_kv_bw == pytest.approx(shipped("h200/fp8", "eta_kv_bw"))
    # FP8 weights are half of BF16's bytes: the FP8 step is faster, not 2.3x slower as with DeepSeek's 8 ms floor
    assert step_ms(catalog, "llama-3.1-8b", "h200", "fp8") < step_ms(catalog, "llama-3.1-8b", "h200", "bf16")
    # DeepSeek-V3 keeps the fit made on its own cells
    ds = step_efficiency(catalog, "h200", "fp8", catalog.models["deepseek-v3"])
    assert ds.t_fixed_s == pytest.approx(shipped("h200/fp8", "t_fixed_s"))
    assert ds == catalog.fitted_efficiency[("h200", "fp8")]


def test_a_dtype_without_its_own_fit_runs_on_the_same_gpus_bf16_fit(catalog):
    assert "b200/fp8" not in STEP  # excluded by the kernel fit (block-FP8 database artefact)
    ds = step_efficiency(catalog, "b200", "fp8", catalog.models["deepseek-v3"])
    assert ds.eta_bw == pytest.approx(shipped("b200/bf16", "eta_bw"))
    assert ds.t_moe_layer_s == pytest.approx(shipped("b200/bf16", "t_moe_layer_s"))
    # B200's BF16 cells hold no MLA model: DeepSeek's per-step terms come from the fit that saw it (H200 FP8)
    assert ds.t_fixed_s == pytest.approx(shipped("h200/fp8", "t_fixed_s"))
    assert "no kernel fit of its own" in ds.source.source and "h200 / fp8 fit" in ds.source.source
    assert ds != catalog.hardware["b200"].efficiency
    mx = step_efficiency(catalog, "b200", "mxfp4", catalog.models["gpt-oss-120b"])
    assert mx.eta_bw == pytest.approx(shipped("b200/bf16", "eta_bw"))
    assert mx.t_fixed_s == pytest.approx(shipped("b200/bf16", "t_fixed_s"))


def test_a_borrowed_set_takes_per_step_terms_from_a_fit_that_covers_the_model_at_its_scale(catalog):
    scale = float(BORROWED["mi300x"]["params"]["overhead_scale"]["value"])
    assert BORROWED["mi300x"]["donor"] == "h200/fp8"
    llama = step_efficiency(catalog, "mi300x", "fp8", catalog.models["llama-3.1-8b"])
    ds = step_efficiency(catalog, "mi300x", "fp8", catalog.models["deepseek-v3"])
    for name in STAGE_B:
        assert getattr(llama, name) == pytest.approx(shipped("h200/bf16", name) * scale)
        assert getattr(ds, name) == pytest.approx(shipped("h200/fp8", name) * scale)
    assert llama.eta_bw == ds.eta_bw == catalog.hardware["mi300x"].efficiency.eta_bw  # its own, never the donor's


def test_the_plan_and_evaluate_use_the_scoped_terms(catalog):
    ctx = make_context(PlanRequest(model="llama-3.1-8b", hardware="h200", dtype="fp8"), catalog)
    assert ctx.eff.t_fixed_s == pytest.approx(shipped("h200/bf16", "t_fixed_s"))
    assert ctx.eff.t_layer_s == pytest.approx(shipped("h200/bf16", "t_layer_s"))
    no_model = efficiency_for(catalog, "h200", "fp8")  # without a model: the fit as shipped
    assert no_model.t_fixed_s == pytest.approx(shipped("h200/fp8", "t_fixed_s"))
    assert no_model.t_layer_s == pytest.approx(shipped("h200/fp8", "t_layer_s")) != ctx.eff.t_layer_s


def small_mla_moe():
    """A GLM-4.7-Flash-like config (bf16): DeepSeek-V3's architecture class at 47 layers (the first dense), 64 routed
    experts, top-4, one shared expert, hidden 2048, 20 MLA heads; ~30B weights, ~4B active."""
    cfg = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg.pop("quantization_config", None)
    cfg.update(_name_or_path="glm-4.7-flash-like", num_hidden_layers=47, first_k_dense_replace=1, n_routed_experts=64,
               num_experts_per_tok=4, n_shared_experts=1, n_group=1, topk_group=1, hidden_size=2048,
               intermediate_size=10240, moe_intermediate_size=1536, num_attention_heads=20, num_key_value_heads=20,
               q_lora_rank=768, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
               vocab_size=154880)
    return parse_model_config(cfg).spec


def test_a_small_mla_moe_gets_its_floor_from_its_own_layers_not_deepseeks_whole(catalog):
    glm, ds = small_mla_moe(), catalog.models["deepseek-v3"]
    assert (glm.layers, glm.experts, arch_family(glm)) == (47, 64, "mla-moe")
    # H200 FP8's cells are DeepSeek-V3 alone: its kernel floor is fitted per layer, the per-step cost at H200 BF16's
    assert "prior" in STEP["h200/fp8"]["params"]["t_fixed_s"] and "stderr" in STEP["h200/fp8"]["params"]["t_layer_s"]
    assert shipped("h200/fp8", "t_fixed_s") == shipped("h200/bf16", "t_fixed_s")
    # on H100 BF16 (no MLA cells) the small model borrows DeepSeek's fit: per layer, times its own 47 layers
    eff = step_efficiency(catalog, "h100-sxm", "bf16", glm)
    assert "h200 / fp8 fit" in eff.source.source
    net, hw = target_net(glm, "bf16"), hw_params(catalog.hardware["h100-sxm"], "bf16", eff)
    terms = step_time_terms(net, hw, batch=1.0, tokens_per_seq=1.0, context_tokens=1000.0)
    ds_floor = float(step_time_terms(target_net(ds, "fp8"), hw_params(catalog.hardware["h200"], "fp8", eff), batch=1.0,
                                     tokens_per_seq=1.0, context_tokens=1000.0, tp=8).layers_s) + eff.t_fixed_s
    floor = float(terms.layers_s) + float(terms.fixed_s)
    assert floor == pytest.approx(ds_floor * 47 / 61)
    # before: DeepSeek's 8.27 ms per-step floor whole plus 47 x 37 us; 13.4 ms at batch 1 in all
    assert floor < 8.27e-3 and 1e3 * float(terms.total_s) < 12.0
