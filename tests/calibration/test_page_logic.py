"""What the Calibrate page calls instead of computing itself: the engine configurations of a form, and the
step-time fit's predictions for the microbenchmark points."""

from __future__ import annotations

import pytest

from calibration.analysis.report import predicted_step_times_s
from calibration.measure.spec import EngineConfig, engine_configs


def test_engine_configs_are_the_baseline_then_each_method_at_each_k_within_its_k_max() -> None:
    got = engine_configs(methods=["ngram", "draft_model"], ks=[4, 2, 8], drafts={"draft_model": "smollm2-135m-2l"},
                         k_max={"ngram": 8, "draft_model": 4})
    assert got == (EngineConfig("none"), EngineConfig("ngram", 2), EngineConfig("ngram", 4), EngineConfig("ngram", 8),
                   EngineConfig("draft_model", 2, "smollm2-135m-2l"), EngineConfig("draft_model", 4, "smollm2-135m-2l"))
    assert engine_configs(methods=[], ks=[2], drafts={}, k_max={}) == (EngineConfig("none"),)


POINT = {"model": "smollm2-135m", "dtype": "bfloat16", "batch": 1, "tokens_per_seq": 1, "context_tokens": 128}


def test_predicted_step_times_add_the_fixed_time_per_step() -> None:
    base = predicted_step_times_s([POINT], eta_bw=0.5, eta_flops=0.5, t_fixed_s=0.0)[0]
    with_fixed = predicted_step_times_s([POINT], eta_bw=0.5, eta_flops=0.5, t_fixed_s=0.003)[0]
    assert base > 0
    assert with_fixed - base == pytest.approx(0.003, rel=1e-9)


def test_a_memory_bound_step_scales_with_bandwidth_efficiency_and_dtype_bytes() -> None:
    """Batch 1, one token: streaming the weights dominates, so half the bandwidth efficiency or twice the
    bytes per weight (float32 against bf16) nearly doubles the step."""
    t = predicted_step_times_s([POINT], eta_bw=0.5, eta_flops=0.5, t_fixed_s=0.0)[0]
    half_bw = predicted_step_times_s([POINT], eta_bw=0.25, eta_flops=0.5, t_fixed_s=0.0)[0]
    fp32 = predicted_step_times_s([{**POINT, "dtype": "float32"}], eta_bw=0.5, eta_flops=0.5, t_fixed_s=0.0)[0]
    assert half_bw / t == pytest.approx(2.0, rel=0.15)
    assert fp32 / t == pytest.approx(2.0, rel=0.15)
    bigger = predicted_step_times_s([{**POINT, "batch": 32, "tokens_per_seq": 8}], eta_bw=0.5, eta_flops=0.5,
                                    t_fixed_s=0.0)[0]
    assert bigger > t


def test_each_offered_method_says_what_its_drafter_measures() -> None:
    """The shipped registry's SmolLM2 entry: cost-only heads measure cost only, n-gram and draft models their
    acceptance too; a trained head (trained:) and a published one (a hub id) are told apart."""
    from calibration.targets.registry import DRAFT_KINDS, ModelRef, draft_kind, load_registry
    from views.calibrate import method_offer_rows

    target = load_registry().target("smollm2-135m")
    drafts = {m: next(iter(target.methods[m].drafts)) for m in ("eagle3", "medusa", "draft_model")}
    rows = {r["method"]: r for r in method_offer_rows(target, ["ngram", "eagle3", "medusa", "draft_model"], drafts,
                                                      [2, 4], budget_s=60.0)}
    assert rows["eagle3"]["drafter"].startswith("cost-only head") and "almost nothing" in rows["eagle3"]["measures"]
    assert rows["ngram"]["drafter"] == "prompt lookup" and rows["draft_model"]["drafter"].startswith("draft model")
    assert rows["eagle3"]["K"] == "2, 4" and rows["eagle3"]["engine time, min"] == round(2 * 105 / 60, 1)
    assert draft_kind("eagle3", ModelRef("trained:smollm2-135m-eagle3-chat")) == "trained head"
    assert draft_kind("eagle3", ModelRef("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")) == "published head"
    assert draft_kind("mtp", None) == "native module"
    assert set(DRAFT_KINDS) >= {r["drafter"].split(" (")[0] for r in rows.values()}
