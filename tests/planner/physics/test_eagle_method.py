"""EAGLE-1/EAGLE-2 heads (`eagle`) as their own method: the CLI evaluates them; each draft pass reads the target's full
LM head and runs the 2h -> h fc, so at the same K and acceptance length a pass costs more than an EAGLE-3 pass (32k
draft vocabulary, fusion once per step) by the LM-head rows and the fc, computed here by hand; the acceptance prior
follows from the library's `eagle` rows; the deploy output is vLLM's "eagle" and SGLang's EAGLE."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from planner import plan as P
from planner.acceptance.tiers import position_1_alpha
from planner.acceptance.trees import TreeShape
from planner.physics.deploy import engine_deployment, vllm_deployment
from planner.physics.networks import head_net

BF16_BYTES = 2.0
EAGLE3_DRAFT_VOCAB = 32000  # EAGLE-3 heads' reduced draft vocabulary (methods.yaml eagle3.draft_vocab)


def evaluate(method: str, k: int, tau: float = 2.8) -> dict:
    p = subprocess.run([sys.executable, "-m", "planner", "evaluate", "--model", "llama-3.1-8b", "--hardware",
                        "h100-sxm", "--method", method, "--k", str(k), "--batch", "1", "--acceptance-length", str(tau)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_evaluate_takes_method_eagle() -> None:
    out = evaluate("eagle", 4)
    assert out["method"] == "eagle" and out["k"] == 4
    assert out["acceptance_length"] == pytest.approx(2.8)
    assert out["acceptance_tier"] == "customer"
    assert math.isfinite(out["speedup"]) and out["speedup"] > 1.0
    assert "yuhuili/EAGLE-LLaMA3.1-Instruct-8B" in out["head"]  # the public head (EAGLE README's weights table)


def test_an_eagle_pass_costs_the_full_lm_head_and_the_fc_more_than_an_eagle3_pass(catalog) -> None:
    """Batch 1 is memory-bound: the extra time of an EAGLE-1/2 pass is its extra weight bytes over the bandwidth the
    planner runs at. Extra bytes by hand: the LM-head rows beyond EAGLE-3's 32k, (128,256 - 32,000) x 4096, plus
    the per-pass fc 2h x h, in BF16."""
    model, hw = catalog.models["llama-3.1-8b"], catalog.hardware["h100-sxm"]
    assert catalog.methods["eagle3"].draft_vocab == EAGLE3_DRAFT_VOCAB
    v, h = model.vocab_size, model.hidden_size
    extra_bytes = ((v - EAGLE3_DRAFT_VOCAB) * h + 2 * h * h) * BF16_BYTES  # 788.5 MB + 67.1 MB
    for k in (2, 4, 7):
        e, e3 = evaluate("eagle", k), evaluate("eagle3", k)
        eta_bw = e["assumptions"]["efficiency"]["eta_bw"]
        expected_s = extra_bytes / (hw.hbm_bandwidth_gb_s * 1e9 * eta_bw)
        assert e["baseline_tpot_ms"] == pytest.approx(e3["baseline_tpot_ms"])
        # draft_cost_ratio c = one later draft pass / one target step (Leviathan's c)
        extra_pass_s = (e["draft_cost_ratio"] - e3["draft_cost_ratio"]) * e["baseline_tpot_ms"] / 1e3
        assert extra_pass_s == pytest.approx(expected_s, rel=0.03), k
        # the same acceptance length and K: the dearer passes cost speed; a step (TPOT x tau) pays the extra on
        # each of its K passes, less EAGLE-3's once-per-step 3h -> h fusion (3 h^2 bytes, below one pass's extra)
        assert e["speedup"] < e3["speedup"]
        assert (e["tpot_ms"] - e3["tpot_ms"]) * 2.8 / 1e3 > (k - 1) * expected_s


def test_the_head_net_is_one_layer_plus_the_fc_per_pass_and_the_full_lm_head(catalog) -> None:
    model = catalog.models["llama-3.1-8b"]
    h, v = float(model.hidden_size), float(model.vocab_size)
    net = head_net(catalog.methods["eagle"], model, "bf16")
    # 12 h^2 for the decoder layer (Kaplan et al.), 2 h^2 for the fc over [embedding; hidden], v x h LM head
    assert float(net.active_params) == pytest.approx(12 * h * h + 2 * h * h + v * h)
    assert float(net.dense_weight_bytes) == pytest.approx((14 * h * h + v * h) * BF16_BYTES)
    assert float(net.fusion_params) == 0.0  # no once-per-step fusion of several target layers (EAGLE-3's)
    # the head without the target's LM head against the "# EAGLE Parameters" the EAGLE README states for
    # yuhuili/EAGLE-LLaMA3.1-Instruct-8B (0.25B); 12 h^2 stands for the real layer, so within 10 %
    assert (float(net.active_params) - v * h) == pytest.approx(0.25e9, rel=0.10)


def test_the_prior_is_read_from_the_librarys_eagle_rows(catalog) -> None:
    """methods.yaml's eagle range: low = the library's one EAGLE chain (PUB-PI4), high = PUB-SG5's tree read as a
    chain; both through the planner's own tau -> position-1 alpha (the method's decay)."""
    m = catalog.methods["eagle"]
    rows = {r.id: r for r in catalog.acceptance_library.rows if r.method == "eagle"}
    pi4, sg5 = rows["PUB-PI4"], rows["PUB-SG5"]
    assert pi4.chain_k == 3 and sg5.chain_k is None  # a chain, and a tree whose width is not stated
    assert m.alpha_default.low == pytest.approx(position_1_alpha(pi4.acceptance_length, pi4.k, m.position_decay),
                                                abs=5e-4)
    assert m.alpha_default.high == pytest.approx(position_1_alpha(sg5.acceptance_length, sg5.k, m.position_decay),
                                                 abs=5e-4)
    assert "PUB-PI4" in m.source.source and "PUB-SG5" in m.source.source


def test_eagle_plans_with_its_public_head_and_a_finite_cpm(catalog) -> None:
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=("eagle", "eagle3"))
    p = P.plan(req, catalog)
    e, e3 = p.method("eagle"), p.method("eagle3")
    assert e.available and e.feasible and math.isfinite(e.usd_per_mtok) and e.usd_per_mtok > 0
    assert e.draft_cost_ratio > e3.draft_cost_ratio


def test_the_vllm_config_is_method_eagle_and_a_tree_deploys_as_a_chain(catalog) -> None:
    meth, model = catalog.methods["eagle"], catalog.models["llama-3.1-8b"]
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=("eagle",))
    cfg = P.deployment(P.make_context(req, catalog), P.plan(req, catalog).method("eagle"))["speculative_config"]
    assert cfg["method"] == "eagle" and "model" in cfg and "parallel_drafting" not in cfg
    shape = TreeShape.from_sglang(3, 4, 21)
    d = vllm_deployment(meth, model, 8, tree_shape=shape)
    assert d["speculative_config"]["method"] == "eagle"
    assert d["speculative_config"]["num_speculative_tokens"] == shape.depth
    assert any("no token trees" in n for n in d["notes"]) and d["sglang_flags"]


def test_the_sglang_command_uses_algorithm_eagle(catalog) -> None:
    meth, model = catalog.methods["eagle"], catalog.models["llama-3.1-8b"]
    dep = vllm_deployment(meth, model, 4, head_path="yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
    out = engine_deployment("sglang", dep, meth, model, 4)
    parts = out["command"].split()
    assert parts[parts.index("--speculative-algorithm") + 1] == "EAGLE"
    assert parts[parts.index("--speculative-draft-model-path") + 1] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    assert "--speculative-num-steps=4" in parts
