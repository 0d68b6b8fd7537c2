"""Token trees as engines state them, priced by the planner: verify tokens, draft passes, measured acceptance
used as given, deploy flags that parse back into the same tree."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from planner import plan as P
from planner.acceptance.trees import TreeShape, parse_sglang_flags
from planner.physics.deploy import vllm_deployment
from planner.physics.roofline import fusion_time_s, head_net, hw_params, target_net
from planner.physics.roofline import step_time_s as step
from planner.physics.serving import sampler_time_s
from planner.search.scenario import efficiency_for, evaluate
from planner.types import Acceptance, Scenario


def run(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_measured_acceptance_length_for_a_tree_is_reported_unchanged_and_drives_the_speedup():
    common = ["evaluate", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "8", "--batch", "1",
              "--method", "eagle3", "--k", "8", "--tree"]
    a = run(*common, "--acceptance-length", "5.88")
    b = run(*common, "--acceptance-length", "4.41")
    assert a["acceptance_length"] == pytest.approx(5.88) and b["acceptance_length"] == pytest.approx(4.41)
    assert a["tree"] is True and a["verify_tokens_per_seq"] == b["verify_tokens_per_seq"]
    # same tree, same batch: the step time is the same, so the speedup scales with the acceptance length
    assert a["speedup"] / b["speedup"] == pytest.approx(5.88 / 4.41, rel=1e-9)


def test_sglang_shape_is_priced_with_its_64_verify_tokens_and_8_draft_passes(catalog):
    """SGLang `--speculative-num-steps 8 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64`: the
    verifier checks 64 tokens per sequence; the head runs 8 passes, each drafting 8 tokens per sequence."""
    shape = TreeShape.from_sglang(8, 8, 64)
    assert shape.verify_tokens_per_seq == 64 and shape.draft_passes == 8 and shape.max_draft_tokens_per_pass == 8
    model, hw, method = catalog.models["llama-3.3-70b"], catalog.hardware["h100-sxm"], catalog.methods["eagle3"]
    s = Scenario(model="llama-3.3-70b", hardware="h100-sxm", method="eagle3", k=8, batch=4, tp=8, tree=True,
                 tree_shape=shape, acceptance=Acceptance("acceptance_length", 5.0), prompt_tokens=1000,
                 output_tokens=400)
    ev = evaluate(s, catalog)
    assert ev.verify_tokens_per_seq == 64 and ev.acceptance_length == pytest.approx(5.0)
    # by hand: one verify step over 4 x 64 tokens + 8 head passes over 4 x 8 tokens (the first over the 64 verified
    # tokens, vLLM's proposer drafting from every verified position) + EAGLE-3's once-per-step fusion over the
    # verified tokens + the speculation overhead (per step and per draft node the verifier checks: 63 of each
    # sequence, not K = 8)
    eff = efficiency_for(catalog, "h100-sxm", "bf16")
    hp = hw_params(hw, "bf16", eff)
    ctx = 1000 + 400 / 2
    head = head_net(method, model)
    verify, _ = step(target_net(model), hp, batch=4.0, tokens_per_seq=64.0, context_tokens=ctx, tp=8)
    one_pass, _ = step(head, hp, batch=4.0, tokens_per_seq=8.0, context_tokens=ctx, tp=8,
                       t_fixed_s=eff.t_fixed_draft_s)
    first_pass, _ = step(head, hp, batch=4.0, tokens_per_seq=64.0, context_tokens=ctx, tp=8,
                         t_fixed_s=eff.t_fixed_draft_s)
    fusion = fusion_time_s(head, hp, batch=4.0, tokens_per_seq=64.0, tp=8)
    step_s = (float(verify) + float(first_pass) + 7 * float(one_pass) + float(fusion) + eff.t_spec_s
              + float(sampler_time_s(hp, batch=4.0, drafted_tokens=63.0, vocab_size=model.vocab_size)))
    assert ev.tpot_ms == pytest.approx(step_s / 5.0 * 1e3, rel=1e-9)
    # the 64-token verify costs more than a chain of K=8 (9 tokens) at the same batch
    chain = evaluate(Scenario(model="llama-3.3-70b", hardware="h100-sxm", method="eagle3", k=8, batch=4, tp=8,
                              acceptance=Acceptance("acceptance_length", 5.0), prompt_tokens=1000, output_tokens=400),
                     catalog)
    assert ev.tpot_ms > chain.tpot_ms


@pytest.mark.parametrize("shape", [TreeShape.from_sglang(8, 8, 64), TreeShape.from_sglang(3, 4, 21),
                                   TreeShape.chain(4), TreeShape.uniform((3, 2, 1))])
def test_deploy_flags_parse_back_into_the_same_tree(catalog, shape):
    d = vllm_deployment(catalog.methods["eagle3"], catalog.models["llama-3.3-70b"], shape.depth, tp=8, tree_shape=shape)
    # vLLM has no token trees: its command drafts a chain of the tree's depth
    assert "speculative_token_tree" not in d["speculative_config"]
    assert d["speculative_config"]["num_speculative_tokens"] == shape.depth
    if shape.is_sglang_dynamic or shape.is_chain:
        assert parse_sglang_flags(d["sglang_flags"]) == shape


def test_plan_verifies_tree_capable_methods_with_the_stated_tree(catalog):
    shape = TreeShape.from_sglang(3, 4, 21)
    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tree_shape=shape), catalog)
    for name in ("eagle3", "medusa"):
        m = p.method(name)
        assert m.k == shape.depth  # a stated tree fixes K
    assert p.method("p_eagle").k != shape.depth or not catalog.methods["p_eagle"].tree
    shown = p.recommendation.method if p.recommendation is not None else p.best.method
    assert (p.deploy["sglang_flags"] is not None) == catalog.methods[shown].tree
    e3 = vllm_deployment(catalog.methods["eagle3"], catalog.models["llama-3.3-70b"], shape.depth, tree_shape=shape)
    assert parse_sglang_flags(e3["sglang_flags"]) == shape


@pytest.fixture(scope="module")
def without_pi_source(catalog):
    """The catalogue with the speculation overheads fitted without the source of PI4/PI5 (leave-one-source-out, as
    calibration/fitting/speculation.py cross-validates): those rows are predicted, not fitted."""
    from calibration.fitting import speculation as sp  # noqa: PLC0415

    rows, _ = sp.split_rows(sp.usable_rows(sp.read_table())[0])
    source = next(r.source for r in rows if r.id == "PI4")
    assert {r.id for r in rows if r.source == source} == {"PI4", "PI5"}
    fit = sp.fit_speculation([r for r in rows if r.source != source], catalog)
    return dataclasses.replace(catalog, fitted_speculation={**catalog.fitted_speculation, **sp.fitted_params(fit)})


# The speculation fit's stated leave-one-source-out speedup error (calibration/fitting/speculation.py prints it
# against this target).
LOSO_TARGET = 0.12


def test_tree_ahead_at_batch_1_and_behind_at_large_batch(without_pi_source):
    """The training table's chain/tree pair (PI4/PI5: Qwen3-8B on one H100, SGLang; chain K=3 at acceptance length
    2.25 gives 1.65x, a tree of 21 verified tokens (3 steps, topk 4) at 2.92 gives 1.85x at batch 1, and the tree
    falls below 1x by batch 64), predicted by a fit that never saw those rows, with the measured acceptance lengths:
    direction and crossover reproduced; the chain within the fit's stated leave-one-source-out error. The tree is
    over-predicted by what the model leaves out: SGLang's tree building, a per-step cost the one tree row cannot
    identify. The step the measured speedup implies exceeds the model's by 0.5-2 ms more for the tree than for the
    chain (~1.2 ms; the roofline prices the 21 verified tokens, memory-bound at batch 1, and the sampler's 20 extra
    rows, ~0.13 ms)."""
    shape = TreeShape.from_sglang(3, 4, 21)

    def run_(batch, tree):
        tau = 2.92 if tree else 2.25
        s = Scenario(model="qwen3-8b", hardware="h100-sxm", method="eagle3", k=3, batch=batch,
                     acceptance=Acceptance("acceptance_length", tau), tree=tree,
                     tree_shape=shape if tree else None, prompt_tokens=200, output_tokens=256)
        return evaluate(s, without_pi_source)

    def speedup(batch, tree):
        return float(run_(batch, tree).speedup)

    def unmodelled_step_s(tree, measured):
        """Per verifier step, the time the measured speedup implies beyond the model's (same baseline)."""
        e = run_(1, tree)
        return (2.92 if tree else 2.25) * float(e.tpot_ms) / 1e3 * (float(e.speedup) / measured - 1.0)

    assert speedup(1, True) > speedup(1, False)
    assert speedup(1, False) == pytest.approx(1.65, rel=LOSO_TARGET)
    assert speedup(1, True) > 1.85
    assert 0.5e-3 <= unmodelled_step_s(True, 1.85) - unmodelled_step_s(False, 1.65) <= 2e-3
    assert speedup(64, True) < 1.0 < speedup(64, False)


def test_tree_vs_chain_crossover_over_batch(catalog):
    from planner.search.batch_sweeps import tree_vs_chain

    t = tree_vs_chain(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm",
                                    tree_shape=TreeShape.from_sglang(3, 4, 21)), catalog, "eagle3")
    assert t.tree_usd_per_mtok[0] < t.chain_usd_per_mtok[0]  # batch 1: the tree is ahead
    assert t.crossover_batch is not None and 1 < t.crossover_batch < 512
    last = t.fits_memory.nonzero()[0][-1]
    assert t.tree_usd_per_mtok[last] > t.chain_usd_per_mtok[last]  # at large batch the chain is ahead
    with pytest.raises(P.PlanError, match="tree verification"):
        tree_vs_chain(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), catalog, "p_eagle")
