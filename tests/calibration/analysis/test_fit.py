from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from calibration.analysis.fit import fit_acceptance, fit_least_squares, jeffreys_interval, wilson_interval
from calibration.analysis.predict import (
    EngineParams,
    fit_engine,
    fit_microbench,
    machine,
    predict_times,
    predict_wall_time_s,
)
from tests.calibration.conftest import make_record


def test_wilson_matches_scipy_binomtest() -> None:
    for x, n in [(0, 10), (3, 10), (37, 50), (50, 50)]:
        ref = stats.binomtest(x, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = wilson_interval(x, n)
        assert lo == pytest.approx(ref.low, abs=1e-9)
        assert hi == pytest.approx(ref.high, abs=1e-9)


def test_jeffreys_interval_covers_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    p, n, trials = 0.3, 40, 2000
    xs = rng.binomial(n, p, size=trials)
    covered = sum(lo <= p <= hi for lo, hi in (jeffreys_interval(int(x), n) for x in xs))
    # Jeffreys keeps coverage close to nominal at moderate n (Brown, Cai & DasGupta 2001, fig. 5).
    assert 0.92 <= covered / trials <= 0.98


def test_jeffreys_pins_ends_at_zero_and_one() -> None:
    assert jeffreys_interval(0, 20)[0] == 0.0
    assert jeffreys_interval(20, 20)[1] == 1.0
    assert all(math.isnan(v) for v in jeffreys_interval(0, 0))


def test_interval_rejects_more_successes_than_trials() -> None:
    with pytest.raises(ValueError, match="successes=5, trials=3"):
        wilson_interval(5, 3)


def test_fit_acceptance_per_position_and_pooling() -> None:
    a = make_record(per_pos=(8, 4, 2), drafts=10)
    b = make_record(per_pos=(6, 2, 0), drafts=10, run_id="r2")
    chat = make_record(workload="chat", per_pos=(1, 0, 0), drafts=10)
    fits = {f.workload: f for f in fit_acceptance([a, b, chat, make_record(method="none")])}
    code = fits["code"]
    assert code.num_drafts == 20
    assert code.p_per_pos == pytest.approx((14 / 20, 6 / 20, 2 / 20))
    # conditional: position 2 given 1 = 6/14, position 3 given 2 = 2/6
    assert code.alpha_per_pos == pytest.approx((14 / 20, 6 / 14, 2 / 6))
    assert code.acceptance_length == pytest.approx(1 + 22 / 20)
    assert code.acceptance_length_low < code.acceptance_length < code.acceptance_length_high
    assert all(lo <= p <= hi for p, lo, hi in zip(code.p_per_pos, code.p_low, code.p_high, strict=True))
    assert fits["chat"].acceptance_length < code.acceptance_length


def test_fit_acceptance_without_speculative_records_raises() -> None:
    with pytest.raises(ValueError, match="records"):
        fit_acceptance([make_record(method="none")])


def _synthetic_samples(eta_bw: float, eta_flops: float, t_fixed_s: float, noise: float, seed: int) -> list[dict]:
    from calibration.analysis.predict import model_spec
    from planner.physics.roofline import hw_params, step_time_s, target_net

    hw = dataclasses.replace(hw_params(machine()), eta_bw=eta_bw, eta_flops=eta_flops)
    net = target_net(model_spec("smollm2-135m"))
    rng = np.random.default_rng(seed)
    out = []
    for b in (1, 2, 4, 8, 16, 32):
        for n in (1, 2, 4, 8):
            for c in (128, 512, 1024):
                t, _ = step_time_s(net, hw, batch=b, tokens_per_seq=n, context_tokens=c, t_fixed_s=t_fixed_s)
                out.append({"batch": b, "tokens_per_seq": n, "context_tokens": c,
                            "step_time_s": float(t) * (1 + noise * rng.standard_normal())})
    return out


def test_step_time_fit_round_trip_recovers_parameters() -> None:
    true = {"eta_bw": 0.4, "eta_flops": 0.25, "t_fixed_s": 0.004}
    fr = fit_microbench(_synthetic_samples(**true, noise=0.02, seed=1), model="smollm2-135m")
    assert fr.success
    got = fr.as_dict()
    for name, value in true.items():
        lo, hi = fr.interval(name, z=3.0)
        assert lo <= value <= hi, f"{name}: true {value} outside fitted [{lo}, {hi}]"
        assert abs(got[name] - value) / value < 0.25
    assert len(fr.residuals) == fr.n_points == 72


def test_engine_fit_round_trip_recovers_fixed_times() -> None:
    true = EngineParams(eta_bw=0.5, eta_flops=0.3, t_fixed_s=0.03, t_fixed_draft_s=0.008, t_spec_s=0.004)
    rng = np.random.default_rng(3)
    recs = []
    for w, plen in (("code", 300), ("chat", 150), ("rag", 400)):
        for rec in (make_record(method="none", workload=w, prompt_tokens=plen),
                    make_record(method="ngram", k=2, per_pos=(20, 10), drafts=30, workload=w, prompt_tokens=plen),
                    make_record(method="draft_model", k=2, per_pos=(5, 1), drafts=60, workload=w,
                                draft="smollm2-135m-2l", prompt_tokens=plen)):
            wall = predict_wall_time_s(rec, true) * (1 + 0.01 * rng.standard_normal())
            recs.append(dataclasses.replace(rec, wall_time_s=wall))
    fr = fit_engine(recs, eta_bw=0.5, eta_flops=0.3)
    assert fr.success
    for name in ("t_fixed_s", "t_fixed_draft_s", "t_spec_s"):
        lo, hi = fr.interval(name, z=3.0)
        assert lo <= getattr(true, name) <= hi, f"{name}: {getattr(true, name)} not in [{lo}, {hi}]"


def test_least_squares_rejects_nan_empty_and_too_few_points() -> None:
    good = _synthetic_samples(0.4, 0.25, 0.004, 0.0, 0)
    bad = [dict(s) for s in good]
    bad[3]["step_time_s"] = float("nan")
    with pytest.raises(ValueError, match="step_time_s"):
        fit_microbench(bad, model="smollm2-135m")
    with pytest.raises(ValueError, match="samples is empty"):
        fit_microbench([], model="smollm2-135m")
    with pytest.raises(ValueError, match="too few"):
        fit_engine([make_record(method="none"), make_record(method="ngram")], eta_bw=0.5, eta_flops=0.3)


def test_least_squares_stderr_nan_without_spare_points() -> None:
    x = np.array([1.0, 2.0])
    y = np.array([2.0, 4.0])
    fr = fit_least_squares(lambda p: p[0] * x + p[1] - y, names=("a", "b"), p0=(1, 0), lower=(-10, -10),
                           upper=(10, 10), n_points=2)
    assert fr.params == pytest.approx((2.0, 0.0), abs=1e-6)
    assert all(math.isnan(s) for s in fr.stderr)


def test_an_offline_batch_lasts_as_long_as_its_slowest_sequence() -> None:
    # 4 sequences x 32 tokens; one found no draft matches (0 accepted), the others accepted 20 each:
    # the batch needs 31 decode steps, not (31 / mean tokens per step).
    p = EngineParams(eta_bw=0.5, eta_flops=0.3, t_fixed_s=0.03, t_fixed_draft_s=0.008, t_spec_s=0.004)
    rec = make_record(method="ngram", k=4, per_pos=(20, 16, 14, 10), drafts=40)
    t_pre, t_iter, mean_steps = predict_times(rec, p)
    assert mean_steps == pytest.approx(31 / rec.tokens_per_sequence_step)
    drained = dataclasses.replace(rec, extra={"request_accepted_min": 0, "request_accepted_max": 20})
    _, _, steps = predict_times(drained, p)
    assert steps == 31 and steps > mean_steps
    assert predict_wall_time_s(drained, p) == pytest.approx(t_pre + 31 * t_iter)
    # a predicted tau (held-out K) still uses the mean: no per-request data exists for it
    assert predict_times(drained, p, tau=2.0)[2] == pytest.approx(31 / 2.0)


def test_engine_fit_holds_an_unidentified_weight_stream_at_its_prior() -> None:
    """Compute-bound decode at every measured shape (as on the 2-core CPU): the weight stream never sets a step
    time, so eta_bw is held at its start value (the microbenchmark's) and named, not shipped as a free value with
    an unbounded error; the identified terms are still recovered."""
    true = EngineParams(eta_bw=0.5, eta_flops=0.005, t_fixed_s=0.02, t_fixed_draft_s=0.005, t_spec_s=0.004)
    recs = []
    for b in (1, 4, 8):
        for rec in (make_record(method="none", num_prompts=b, output_tokens=32 * b, prompt_tokens=60 * b),
                    make_record(method="ngram", k=3, per_pos=(10, 8, 6), drafts=12 * b, num_prompts=b,
                                output_tokens=32 * b, prompt_tokens=60 * b)):
            recs.append(dataclasses.replace(rec, wall_time_s=predict_wall_time_s(rec, true)))
    fr = fit_engine(recs, eta_bw=0.6, eta_flops=0.05)
    assert "eta_bw" in fr.held and fr.held["eta_bw"].startswith("prior: its start value")
    assert fr.as_dict()["eta_bw"] == 0.6 and math.isnan(fr.stderr[fr.names.index("eta_bw")])
    for name in ("eta_flops", "t_fixed_s", "t_spec_s"):
        assert fr.as_dict()[name] == pytest.approx(getattr(true, name), rel=1e-6), name
    assert fr.free == ("t_fixed_s", "t_spec_s", "eta_flops")
    assert all(math.isfinite(fr.stderr[fr.names.index(n)]) for n in fr.free)


def test_core_holds_a_bound_a_collinear_pair_and_a_noisy_term_at_their_priors() -> None:
    """The one least squares: a parameter driven onto its bound is held exactly there; of two parameters the data
    sees only as a sum, one is held at its stated prior; the held ones carry their reason and no standard error."""
    from calibration.fitting.core import least_squares

    x = np.linspace(1.0, 10.0, 40)
    y = 3.0 * x - 0.5 + 0.1 * np.sin(7 * x)  # a negative intercept: c is driven onto its bound 0
    fr = least_squares(lambda p: (p[0] + p[1]) * x + p[2] - y, names=("a", "b", "c"), p0=(1.0, 1.0, 1.0),
                       lower=(0, 0, 0), upper=(10, 10, 10), priors={"b": (0.5, "half, stated")})
    assert fr.held["c"].startswith("prior: its lower bound 0") and fr.value("c") == 0.0
    assert fr.held["b"].startswith("prior: half, stated") and fr.value("b") == 0.5
    assert fr.free == ("a",) and fr.value("a") + fr.value("b") == pytest.approx(2.93, abs=0.02)
    assert math.isnan(fr.error("b")) and math.isfinite(fr.error("a"))
    assert "b = 0.5 (prior: half, stated" in fr.describe()
    plain = least_squares(lambda p: p[0] * x + p[1] - 3.0 * x - 2.0, names=("a", "b"), p0=(1.0, 1.0),
                          lower=(0, 0), upper=(10, 10))
    assert not plain.held and plain.as_dict() == pytest.approx({"a": 3.0, "b": 2.0})


def test_format_fit_names_the_prior_of_a_held_parameter_instead_of_a_nan_error() -> None:
    from calibration.analysis.report import format_fit
    from calibration.fitting.core import least_squares

    x = np.linspace(1.0, 4.0, 12)
    y = 2.0 * x
    # b multiplies nothing: the data does not move it, so it is held at its stated prior
    fr = least_squares(lambda p: p[0] * x + 0.0 * p[1] - y, names=("a", "b"), p0=(1.0, 0.5), lower=(0.0, 0.0),
                       upper=(10.0, 1.0), priors={"b": (0.5, "assumed half")})
    text = format_fit(fr, "fit")
    assert "b" in fr.held and "nan" not in text
    assert "b=0.5 (prior: assumed half" in text
    assert "a=2 ±" in text
