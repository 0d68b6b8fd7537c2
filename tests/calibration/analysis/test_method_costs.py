"""Per-method draft cost on the engine (calibration.analysis.method_costs): round trips from known terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calibration.analysis.method_costs import fit_method_terms, format_method_costs, method_costs
from calibration.analysis.predict import EngineParams, predict_times, predict_wall_time_s
from calibration.analysis.report import CalibrationReport  # noqa: F401 - the report carries the per-method fits
from tests.calibration.conftest import make_record

MACHINE = EngineParams(eta_bw=0.5, eta_flops=0.3, t_fixed_s=0.03, t_fixed_draft_s=0.008, t_spec_s=0.004)


def _groups(method: str, ks: tuple[int, ...], true: EngineParams, seed: int, noise: float = 0.01) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for k in ks:
        for b, plen in ((1, 200), (2, 300), (4, 150)):
            rec = make_record(method=method, k=k, per_pos=(0,) * k, drafts=30 * b, workload="code", draft="cost-only",
                              prompt_tokens=plen * b, num_prompts=b, output_tokens=32 * b)
            wall = predict_wall_time_s(rec, true) * (1 + noise * rng.standard_normal())
            out.append(dataclasses.replace(rec, wall_time_s=wall))
    return out


def test_two_k_values_of_a_sequential_head_separate_the_pass_and_the_step_terms() -> None:
    true = MACHINE.with_method_terms("eagle3", t_fixed_draft_s=0.006, t_spec_s=0.002)
    fits = fit_method_terms(_groups("eagle3", (1, 3), true, seed=1), MACHINE)
    fr = fits["eagle3"]
    assert not fr.held
    for name, value in (("t_fixed_draft_s", 0.006), ("t_spec_s", 0.002)):
        lo, hi = fr.interval(name, z=3.0)
        assert lo <= value <= hi, f"{name}: {value} not in [{lo}, {hi}]"


def test_one_k_holds_the_step_term_at_the_shared_overhead_and_still_predicts_that_k() -> None:
    true = MACHINE.with_method_terms("p_eagle", t_fixed_draft_s=0.005, t_spec_s=0.003)
    recs = _groups("p_eagle", (3,), true, seed=2)
    fr = fit_method_terms(recs, MACHINE)["p_eagle"]
    assert "t_spec_s" in fr.held and fr.value("t_spec_s") == MACHINE.t_spec_s
    # one parallel pass per step: the pass term absorbs the step term's difference, so the K=3 groups are predicted
    # (the head's prefill pass also pays the pass term: 32 pass terms and 31 step terms per sequence)
    assert fr.value("t_fixed_draft_s") == pytest.approx((32 * 0.005 + 31 * (0.003 - MACHINE.t_spec_s)) / 32, rel=0.1)
    p = MACHINE.with_method_terms("p_eagle", **fr.as_dict())
    for r in recs:  # within the 1 % noise the groups were drawn with
        assert predict_wall_time_s(r, p) == pytest.approx(r.wall_time_s, rel=0.04)


def test_a_sequential_head_costs_more_per_step_with_k_and_a_parallel_one_does_not() -> None:
    p = MACHINE.with_method_terms("eagle3", t_fixed_draft_s=0.004).with_method_terms("p_eagle", t_fixed_draft_s=0.004)
    t = {}
    for m in ("eagle3", "p_eagle"):
        for k in (1, 4):
            rec = make_record(method=m, k=k, per_pos=(0,) * k, drafts=30, draft="cost-only", num_prompts=1)
            t[m, k] = predict_times(rec, p, tau=1.0, draft_tokens_per_step=float(k))[1]
    # three more sequential passes, each at least its fixed time
    assert t["eagle3", 4] - t["eagle3", 1] > 3 * 0.004
    # one pass whatever K: only the verify and the pass's extra tokens grow
    assert t["p_eagle", 4] - t["p_eagle", 1] < 0.004


def test_method_costs_report_intervals_and_the_step_they_add() -> None:
    true = MACHINE.with_method_terms("eagle3", t_fixed_draft_s=0.006, t_spec_s=0.002)
    recs = _groups("eagle3", (1, 3), true, seed=3)
    fits = fit_method_terms(recs, MACHINE)
    (cost,) = method_costs(fits, recs, MACHINE.with_method_terms("eagle3", **fits["eagle3"].as_dict()))
    assert cost.t_fixed_draft_s_low < cost.t_fixed_draft_s < cost.t_fixed_draft_s_high
    assert cost.ks == (1, 3) and cost.num_groups == 6
    # at K=1 a step adds at least one pass and the per-step overhead
    assert cost.extra_step_ms_b1 > (cost.t_fixed_draft_s + cost.t_spec_s) * 1e3
    text = format_method_costs([cost])
    assert "eagle3" in text and "ms [" in text


def test_methods_with_a_single_group_are_not_fitted() -> None:
    recs = _groups("medusa", (2,), MACHINE, seed=4)[:1]
    assert fit_method_terms(recs, MACHINE) == {}


def test_calibrate_fits_the_machine_then_each_method_and_the_profile_carries_them(tmp_path) -> None:
    """Baseline and n-gram groups fix the machine; EAGLE-3 at K=2 (fitted) and K=4 (held out) and P-EAGLE at K=3
    get their own terms; the held-out EAGLE-3 groups are predicted from the K=2 fit; the saved profile carries the
    terms keyed by the planner's method id, and the CLI's text names every method."""
    from calibration.analysis.report import calibrate, format_methods
    from calibration.storage.store import Store

    true = (MACHINE.with_method_terms("eagle3", t_fixed_draft_s=0.006, t_spec_s=0.004)
            .with_method_terms("p_eagle", t_fixed_draft_s=0.009, t_spec_s=0.004))
    rng = np.random.default_rng(5)
    store = Store(f"sqlite:///{tmp_path / 'cal.db'}")
    run_id = store.create_run("engine", {"note": "synthetic CPU groups"}, status="succeeded")
    for method, k in (("none", 0), ("ngram", 2), ("ngram", 4), ("eagle3", 2), ("eagle3", 4), ("p_eagle", 3)):
        for b, workload, plen in ((1, "code", 250), (2, "code", 250), (4, "code", 250), (1, "chat", 60),
                                  (2, "chat", 60), (4, "chat", 60)):
            rec = make_record(method=method, k=k or 3, per_pos=(3, 1, 0, 0)[:k] if k else (0,), drafts=10 * b,
                              num_prompts=b, output_tokens=32 * b, prompt_tokens=plen * b, workload=workload,
                              draft="cost-only" if method in ("eagle3", "p_eagle") else None,
                              config_label=f"{method}-k{k}" if k else "baseline", run_id=run_id)
            wall = predict_wall_time_s(rec, true) * (1 + 0.005 * rng.standard_normal())
            store.add_group(dataclasses.replace(rec, wall_time_s=wall))
    rep = calibrate(store, [run_id])
    assert rep.params.t_spec_s == pytest.approx(0.004, rel=0.1)  # the machine's shared overhead, from n-gram
    fr = rep.method_fits["eagle3"]
    assert "t_spec_s" in fr.held  # one K in the train split
    assert fr.value("t_fixed_draft_s") == pytest.approx(0.006, rel=0.1)
    assert rep.method_mape_pct("eagle3", "held_out") < 2.0  # K=4 predicted from K=2
    assert set(rep.method_fits) == {"eagle3", "p_eagle"}
    prof = rep.profile("cpu-test")
    assert set(prof.method_terms) == {"eagle3", "p_eagle"}
    assert prof.method_terms["eagle3"]["t_fixed_draft_s"] == pytest.approx(0.006, rel=0.1)
    text = format_methods(rep)
    for name in ("eagle3", "p_eagle", "ngram", "baseline", "held_out"):
        assert name in text
