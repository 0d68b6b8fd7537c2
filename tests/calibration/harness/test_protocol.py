"""The measurement protocol without an engine: the acceptance-length interval, the stopping rule, the
prompt pools, the fit's use of several batch sizes and the held-out acceptance prediction across K."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from calibration.analysis.fit import fit_acceptance
from calibration.analysis.predict import EngineParams, compare, fit_engine, predict_times, predict_wall_time_s
from calibration.harness.protocol import (
    AcceptanceInterval,
    Protocol,
    StopKind,
    acceptance_length_interval,
    extend_prompts,
    fixed_sweep_requests,
    interval_progress,
)
from calibration.measure.spec import JobSpec, load_prompts
from calibration.storage.records import GroupRecord, SpecCounts
from tests.calibration.conftest import make_record


def _requests(rng: np.random.Generator, n: int, k: int = 3) -> tuple[list[int], list[int]]:
    """n requests, each with its own acceptance (prompts differ in how much output they copy)."""
    alpha = rng.beta(4, 3, size=n)
    drafts = rng.integers(5, 15, size=n)
    accepted = [int(sum(min(rng.geometric(1 - a) - 1, k) for _ in range(d))) for a, d in zip(alpha, drafts,
                                                                                             strict=True)]
    return [int(d) for d in drafts], accepted


def test_interval_is_the_ratio_over_requests() -> None:
    iv = acceptance_length_interval([10, 10], [10, 20])
    assert iv.acceptance_length == pytest.approx(2.5)
    assert iv.num_requests == 2 and iv.num_drafts == 20
    assert iv.low < 2.5 < iv.high and iv.half_width == pytest.approx(iv.high - 2.5)


def test_interval_covers_the_true_mean_about_95_percent() -> None:
    """Many experiments of 40 requests from one population: the interval holds the population tau in
    ~95 % of them (the per-draft binomial interval would hold it far less often: drafts are correlated)."""
    rng = np.random.default_rng(0)
    pop_d, pop_a = _requests(rng, 40_000)
    true_tau = 1 + sum(pop_a) / sum(pop_d)
    hits = 0
    trials = 400
    for _ in range(trials):
        idx = rng.integers(0, len(pop_d), size=40)
        iv = acceptance_length_interval([pop_d[i] for i in idx], [pop_a[i] for i in idx])
        hits += iv.low <= true_tau <= iv.high
    assert 0.91 <= hits / trials <= 0.99


def test_interval_needs_two_drafting_requests_and_rejects_bad_counts() -> None:
    assert math.isinf(acceptance_length_interval([5], [3]).half_width)
    assert math.isnan(acceptance_length_interval([0, 0], [0, 0]).acceptance_length)
    with pytest.raises(ValueError, match="must match"):
        acceptance_length_interval([1, 2], [1])
    with pytest.raises(ValueError, match="request 1"):
        acceptance_length_interval([1, -2], [1, 0])


def test_interval_narrows_as_requests_come_in() -> None:
    rng = np.random.default_rng(1)
    d, a = _requests(rng, 400)
    widths = [acceptance_length_interval(d[:n], a[:n]).half_width for n in (10, 40, 160, 400)]
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 4


def test_stopping_rule() -> None:
    p = Protocol(batch_sizes=(1, 4, 8), target_half_width=0.05, budget_s=100.0, min_rounds=2)
    narrow = AcceptanceInterval(2.0, 1.97, 2.03, 0.03, 50, 500)
    wide = AcceptanceInterval(2.0, 1.8, 2.2, 0.2, 50, 500)
    assert p.stop_reason(speculative=True, rounds=1, elapsed_s=5, interval=narrow) is None  # repeats first
    assert p.stop_reason(speculative=True, rounds=2, elapsed_s=5, interval=narrow).kind is StopKind.HALF_WIDTH
    assert p.stop_reason(speculative=True, rounds=2, elapsed_s=5, interval=wide) is None
    assert p.stop_reason(speculative=True, rounds=5, elapsed_s=100, interval=wide).kind is StopKind.BUDGET
    assert p.stop_reason(speculative=False, rounds=2, elapsed_s=5, interval=None).kind is StopKind.REPEATS
    few = AcceptanceInterval(2.0, 1.99, 2.01, 0.01, 3, 30)  # too few requests to trust a narrow interval
    assert p.stop_reason(speculative=True, rounds=2, elapsed_s=5, interval=few) is None


@pytest.mark.parametrize("kw, field", [({"batch_sizes": ()}, "batch_sizes"), ({"batch_sizes": (0,)}, "batch_sizes"),
                                       ({"budget_s": 0.0}, "budget_s"), ({"min_rounds": 0}, "min_rounds"),
                                       ({"target_half_width": -1.0}, "target_half_width")])
def test_protocol_refuses_bad_settings(kw: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Protocol(**kw)
    with pytest.raises(ValueError, match=field):
        JobSpec(**kw)


def test_fixed_sweep_is_sized_from_the_variance_bound() -> None:
    # sd of a request's tau <= K/2 (Popoviciu); z = 1.96: K=3, h=0.05 -> (1.96 * 1.5 / 0.05)^2 = 3458
    assert fixed_sweep_requests(3, 0.05) == 3458
    assert fixed_sweep_requests(5, 0.05) > fixed_sweep_requests(3, 0.05)


def test_prompt_pools_are_distinct_and_start_with_the_shipped_prompts() -> None:
    code = load_prompts("code", 300)
    assert len(code) == len(set(code)) == 300
    assert code[:8] == load_prompts("code", 8)
    assert all(p.startswith("Rewrite this Python code exactly") for p in code)
    assert load_prompts("chat", 50) == load_prompts("chat", 50)  # seeded: every run measures the same prompts
    assert extend_prompts("uploaded", ["a", "b", "a"], 10) == ["a", "b"]  # no generator: only what was given


def _group(k: int, b: int, rnd: int, drafts: list[int], accepted: list[int], label: str | None = None,
           status: str = "finished") -> GroupRecord:
    rec = make_record(method="ngram", k=k, num_prompts=b, output_tokens=32 * b,
                      per_pos=(sum(accepted),) + (0,) * (k - 1), drafts=sum(drafts), config_label=label)
    return dataclasses.replace(rec, status=status, prompt_set_hash=f"p{rnd}-{b}",
                               extra={"request_drafts": drafts, "request_accepted": accepted, "round": rnd})


def test_interval_progress_and_acceptance_fit_leave_the_warm_up_out() -> None:
    warm = _group(3, 4, 0, [10, 10, 10, 10], [0, 0, 0, 0], status="warmup")
    g1 = _group(3, 4, 1, [10, 10, 10, 10], [10, 12, 8, 10])
    g2 = _group(3, 4, 2, [10, 10, 10, 10], [11, 9, 10, 10])
    rows = interval_progress([warm, g1, g2])
    assert [r["round"] for r in rows] == [1, 2]
    assert rows[1]["num_requests"] == 8 and rows[1]["half_width"] < rows[0]["half_width"]
    fit = fit_acceptance([warm, g1, g2])[0]
    assert fit.interval_method == "ratio-over-requests" and fit.num_requests == 8
    assert fit.acceptance_length == pytest.approx(1 + 80 / 80)


def _engine_records(p: EngineParams, batch_sizes: tuple[int, ...], prefill: bool = False) -> list[GroupRecord]:
    """Groups whose wall times (and, with `prefill`, per-request prefill times) come from `p`."""
    def timed(r: GroupRecord) -> GroupRecord:
        extra = {**r.extra, "prefill_time_s_sum": r.num_prompts * predict_times(r, p)[0]} if prefill else r.extra
        return dataclasses.replace(r, wall_time_s=predict_wall_time_s(r, p), extra=extra)

    out = []
    for b in batch_sizes:
        out.append(timed(make_record(method="none", num_prompts=b, output_tokens=32 * b, prompt_tokens=60 * b)))
        for k in (3, 5):
            d = [12] * b
            a = [10] * b
            r = _group(k, b, 1, d, a, label=f"ngram-k{k}")
            out.append(timed(dataclasses.replace(r, prompt_tokens=60 * b,
                                                 extra={**r.extra, "request_accepted_min": 10})))
    return out


def test_several_batch_sizes_make_the_per_token_term_identifiable() -> None:
    true = EngineParams(eta_bw=0.5, eta_flops=1.7, t_fixed_s=0.02, t_fixed_draft_s=0.005, t_spec_s=0.004)
    recs = _engine_records(true, (1, 4, 8))
    fit = fit_engine(recs, eta_bw=0.5, eta_flops=0.3)  # started far from the truth
    got = fit.as_dict()
    assert "eta_flops" in fit.names
    assert got["eta_flops"] == pytest.approx(1.7, rel=0.05)
    assert got["t_fixed_s"] == pytest.approx(0.02, rel=0.05)
    # one batch size: the per-token term is held, not fitted
    assert "eta_flops" not in fit_engine(_engine_records(true, (4,)), eta_bw=0.5, eta_flops=0.3).names
    # the weight stream is fitted too: started from a microbenchmark's wrong eta_bw, the fit still reproduces
    # the measured wall times (eta_bw and t_fixed_s trade off per step; the predictions do not)
    off = fit_engine(recs, eta_bw=3.0, eta_flops=0.3)
    assert "eta_bw" in off.names
    p = EngineParams(**off.extra["params"])
    for r in recs:
        assert predict_wall_time_s(r, p) == pytest.approx(r.wall_time_s, rel=0.03)
    assert "eta_prefill_flops" not in off.names  # no measured prefill: one compute efficiency for both


def test_measured_prefill_times_separate_the_prefill_efficiency() -> None:
    """A prefill (many prompt tokens at once) runs at its own efficiency; the engine's per-request prefill
    times pin it, and the decode efficiency comes back as well."""
    # compute-bound decode steps, as on the 2-core CPU (~10 ms per verified token), prefill 3x as efficient
    true = EngineParams(eta_bw=0.5, eta_flops=0.1, t_fixed_s=0.02, t_fixed_draft_s=0.005, t_spec_s=0.004,
                        eta_prefill_flops=0.3)
    fit = fit_engine(_engine_records(true, (1, 4, 8), prefill=True), eta_bw=0.5, eta_flops=0.3)
    got = fit.as_dict()
    assert got["eta_prefill_flops"] == pytest.approx(0.3, rel=0.05)
    assert got["eta_flops"] == pytest.approx(0.1, rel=0.05)


def test_held_out_k_is_predicted_from_the_same_prompts_at_the_train_k() -> None:
    """Per-request acceptance at K=3 on the same prompts predicts the K=5 batch's slowest sequence."""
    p = EngineParams(eta_bw=0.5, eta_flops=1.0, t_fixed_s=0.02, t_fixed_draft_s=0.005, t_spec_s=0.004)
    k3 = _group(3, 4, 1, [12, 12, 12, 12], [6, 10, 14, 18], label="ngram-k3")
    k5 = _group(5, 4, 1, [10, 10, 10, 10], [6, 11, 16, 21], label="ngram-k5")
    base = dataclasses.replace(make_record(method="none", num_prompts=4, output_tokens=128), wall_time_s=3.0)
    k3 = dataclasses.replace(k3, wall_time_s=predict_wall_time_s(k3, p))
    k5 = dataclasses.replace(k5, extra={**k5.extra, "request_accepted_min": 6})
    k5 = dataclasses.replace(k5, wall_time_s=predict_wall_time_s(k5, p))
    rows = {r.config_label: r for r in compare([base, k3, k5], p, [base, k3])}
    assert rows["ngram-k5"].split == "held_out"
    assert math.isfinite(rows["ngram-k5"].error_full_pct)
    assert abs(rows["ngram-k5"].error_full_pct) < 10.0
    assert rows["ngram-k5"].predicted_acceptance_length > rows["ngram-k3"].measured_acceptance_length


def test_counts_helper_consistency() -> None:
    g = _group(3, 2, 1, [10, 10], [5, 7])
    assert g.counts == SpecCounts(20, 60, 12, (12, 0, 0))


def test_held_out_draft_tokens_per_step_come_from_the_same_prompts() -> None:
    """n-gram drafts only where the output copies the prompt: the K=5 group on prompts that rarely matched at
    K=3 is predicted with their draft rate, not the pooled one of prompts that matched often."""
    from calibration.analysis.predict import _predicted_draft_tokens_per_step

    rare = _group(3, 4, 1, [2, 2, 2, 2], [1, 1, 1, 1], label="ngram-k3")  # 8 draft tokens in ~120 steps
    often = _group(3, 4, 2, [9, 9, 9, 9], [20, 20, 20, 20], label="ngram-k3")
    often = dataclasses.replace(often, counts=dataclasses.replace(often.counts, num_draft_tokens=4 * 9 * 3))
    rare = dataclasses.replace(rare, counts=dataclasses.replace(rare.counts, num_draft_tokens=4 * 2 * 3))
    held = _group(5, 4, 1, [2, 2, 2, 2], [1, 1, 1, 1], label="ngram-k5")
    got = _predicted_draft_tokens_per_step(held, [rare, often])
    assert got == pytest.approx(rare.counts.num_draft_tokens / rare.sequence_steps / 3 * 5)
    unmatched = dataclasses.replace(held, prompt_set_hash="other")
    assert _predicted_draft_tokens_per_step(unmatched, [rare, often]) > 2 * got  # pooled over both groups
