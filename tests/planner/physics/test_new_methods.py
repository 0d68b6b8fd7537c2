"""The methods engines ship today (DFlash, DSpark, suffix decoding, ngram_gpu): each plans and evaluates to a finite
CPM; the lookups carry no draft network; DFlash's block pass does not grow per drafted token as a sequential head's
passes do; their deploy configs and notes; the Methods page lists them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner import plan as P
from planner.physics.deploy import speculative_config, vllm_deployment
from planner.physics.roofline import hw_params
from planner.physics.serving import draft_time_s
from planner.search.drafting import draft_net

NEW = ("dflash", "dspark", "suffix", "ngram_gpu")


@pytest.mark.parametrize("method", NEW)
def test_each_new_method_plans_to_a_finite_cpm(catalog, method: str) -> None:
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=(method,))
    pt = P.plan(req, catalog).method(method)
    assert pt.available and pt.feasible
    assert math.isfinite(pt.usd_per_mtok) and pt.usd_per_mtok > 0
    assert pt.acceptance_length > 1.0
    if method in ("suffix", "ngram_gpu"):
        assert pt.draft_cost_ratio == 0.0  # no draft model runs on the accelerator


@pytest.mark.parametrize("method", ("suffix", "ngram_gpu"))
def test_lookups_have_no_draft_network_and_take_the_workloads_copy_share(catalog, method: str) -> None:
    model = catalog.models["llama-3.1-8b"]
    d = draft_net(catalog.methods[method], model, None, "bf16", None)
    net, weight_bytes, is_model = d.net, d.weight_bytes, d.is_model
    assert weight_bytes == 0.0 and not is_model
    assert float(net.dense_weight_bytes) == 0.0 and float(net.kv_bytes_per_token) == 0.0
    # acceptance follows the workload's n-gram alpha exactly as ngram's does
    for wl in ("code", "chat"):
        taus = {m: P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=(m,), workload=wl),
                          catalog).method(m) for m in ("ngram", method)}
        assert taus["ngram"].alpha_position_1 == pytest.approx(taus[method].alpha_position_1)


def test_ngram_gpu_skips_the_host_lookup_that_ngram_pays(catalog) -> None:
    """Same acceptance, same K: ngram_gpu's step has no per-sequence host lookup (t_ngram_s), so its CPM is lower
    wherever the hardware's t_ngram_s is above zero."""
    from planner.context import make_context

    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=("ngram", "ngram_gpu"))
    eff = make_context(req, catalog).eff
    assert eff.t_ngram_s > 0, "the fitted speculation set has no host n-gram time: this test checks nothing"
    p = P.plan(req, catalog)
    assert p.method("ngram_gpu").usd_per_mtok < p.method("ngram").usd_per_mtok


def test_dflash_draft_time_does_not_grow_per_drafted_token_like_a_sequential_head(catalog) -> None:
    model, hw = catalog.models["llama-3.1-8b"], hw_params(catalog.hardware["h100-sxm"])
    ks = np.array([2.0, 8.0])

    def t(method: str) -> np.ndarray:
        m = catalog.methods[method]
        d = draft_net(m, model, None, "bf16", None)
        net, mode, scales = d.net, d.mode, d.scales_with_k
        return draft_time_s(net, hw, mode=mode, draft_scales_with_k=scales, k=ks, batch=1.0, verify_tokens=ks + 1,
                            context_tokens=1000.0)[0]

    dflash, eagle3 = t("dflash"), t("eagle3")
    assert eagle3[1] / eagle3[0] > 3.0  # 8 passes against 2
    assert dflash[1] / dflash[0] < 1.2  # one pass either way: memory-bound at batch 1
    # yet five decoder layers make one DFlash pass dearer than one EAGLE-3 pass
    assert dflash[0] > eagle3[0] / 2


def test_block_drafter_reads_its_layers_and_the_lm_head_and_caches_context_kv(catalog) -> None:
    model = catalog.models["llama-3.1-8b"]
    d_net = draft_net(catalog.methods["dflash"], model, None, "bf16", None).net
    e_net = draft_net(catalog.methods["eagle3"], model, None, "bf16", None).net
    assert float(d_net.dense_weight_bytes) > 4 * float(e_net.dense_weight_bytes)  # 5 layers + full vocab vs 1 + 32k
    assert float(d_net.kv_bytes_per_token) == pytest.approx(5 * float(e_net.kv_bytes_per_token))
    # the verified tokens' context K/V projection rides on the fusion GEMM: wider than EAGLE-3's 3h -> h
    assert float(d_net.fusion_params) > float(e_net.fusion_params)


def test_new_deploy_configs_carry_the_engines_keys_and_notes(catalog) -> None:
    m, meth = catalog.models, catalog.methods
    sf = speculative_config(meth["suffix"], m["llama-3.1-8b"], 5)
    assert sf == {"method": "suffix", "num_speculative_tokens": 5}
    ng = speculative_config(meth["ngram_gpu"], m["llama-3.1-8b"], 4)
    assert ng["method"] == "ngram_gpu" and ng["prompt_lookup_max"] >= ng["prompt_lookup_min"]
    df = speculative_config(meth["dflash"], m["llama-3.1-8b"], 15, head_path="z-lab/x")
    assert df == {"method": "dflash", "num_speculative_tokens": 15, "model": "z-lab/x"}
    assert "parallel_drafting" not in df  # vLLM sets it itself for dflash / dspark
    d = vllm_deployment(meth["suffix"], m["llama-3.1-8b"], 5)
    assert any("arctic-inference==0.1.1" in n for n in d["notes"])
    d = vllm_deployment(meth["dspark"], m["llama-3.1-8b"], 7)
    assert any("fill in 'model'" in n for n in d["notes"]) and any("adaptive" in n for n in d["notes"])


def test_methods_page_lists_the_new_methods(catalog) -> None:
    from views.methods import table_rows

    rows = table_rows(P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), catalog))
    labels = {r["method"] for r in rows}
    for name in NEW:
        assert catalog.methods[name].label in labels
