"""Tail latency of speculative decoding (planner.acceptance.tails): tokens per verifier step, the steps a request
needs, and its TPOT at a percentile, against hand-computed binomials and the exact convolution."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from planner.acceptance import tails


def _binomial_tail(s: int, a: float, at_least: int) -> float:
    """P(Binomial(s, a) >= at_least), by hand from the binomial coefficients."""
    return sum(math.comb(s, j) * a**j * (1 - a) ** (s - j) for j in range(max(at_least, 0), s + 1))


def test_k1_p90_tpot_is_the_hand_binomial():
    # K = 1, acceptance a = 0.6: a step emits 1 token, or 2 with probability a. A request of 41 output tokens decodes
    # 40 in steps; after s steps it has s + Binomial(s, a) tokens, so P(S <= s) = P(Binomial(s, a) >= 40 - s).
    a, out_tokens, step_ms = 0.6, 41, 30.0
    decoded = out_tokens - 1
    s90 = next(s for s in range(1, decoded + 1) if _binomial_tail(s, a, decoded - s) >= 0.9)
    # by hand: s = 26 holds with P(Bin(26, 0.6) >= 14) = 0.801, s = 27 with P(Bin(27, 0.6) >= 13) = 0.926
    assert s90 == 27
    assert _binomial_tail(26, a, 14) == pytest.approx(0.8007, abs=1e-4)
    assert _binomial_tail(27, a, 13) == pytest.approx(0.9257, abs=1e-4)
    assert tails.steps_quantile_exact([1 - a, a], decoded, 0.9) == s90
    p90_tpot_ms = s90 * step_ms / decoded  # 20.25 ms, against a mean TPOT of step / tau = 30 / 1.6 = 18.75 ms
    mean, var, skew = tails.step_moments([a])
    assert (mean, var) == (pytest.approx(1.6), pytest.approx(a * (1 - a)))
    factor = tails.tpot_factor(mean, var, skew, out_tokens, 0.9)
    assert step_ms / 1.6 * factor == pytest.approx(p90_tpot_ms, rel=1e-12)
    assert p90_tpot_ms == pytest.approx(20.25)


def test_step_moments_match_the_chain_distribution():
    alpha = np.array([0.9, 0.7, 0.5, 0.3])
    pmf = tails.chain_pmf(alpha)
    x = np.arange(1, alpha.size + 2)
    assert pmf.sum() == pytest.approx(1.0)
    mean, var, skew = tails.step_moments(alpha)
    assert mean == pytest.approx((pmf * x).sum())
    assert var == pytest.approx((pmf * (x - mean) ** 2).sum())
    assert skew == pytest.approx((pmf * (x - mean) ** 3).sum() / var**1.5)
    m_k, v_k, s_k = tails.step_moments_by_k(alpha[None, :], [1, 3])
    for j, k in enumerate((1, 3)):
        m, v, sk = tails.step_moments(alpha[:k])
        assert (m_k[0, j], v_k[0, j], s_k[0, j]) == (pytest.approx(m), pytest.approx(v), pytest.approx(sk))


def test_the_closed_form_is_within_one_step_of_the_exact_convolution():
    worst = 0
    for a, k, n, q in itertools.product([0.3, 0.6, 0.8, 0.95], [1, 3, 5], [17, 40, 100, 300], [0.5, 0.9, 0.99]):
        alpha = np.full(k, a)
        approx = int(tails.steps_quantile(*tails.step_moments(alpha), n - 1, q))
        exact = tails.steps_quantile_exact(tails.chain_pmf(alpha), n - 1, q)
        worst = max(worst, abs(approx - exact))
    assert worst <= 1


def test_a_higher_percentile_needs_more_steps_and_no_spread_means_no_tail():
    mean, var, skew = tails.step_moments([0.8, 0.7, 0.6])
    f = [float(tails.tpot_factor(mean, var, skew, 400, q)) for q in (0.5, 0.9, 0.99)]
    assert f[0] < f[1] < f[2]
    assert f[0] == pytest.approx(1.0, abs=0.02)  # the median request decodes near the mean rate
    # every draft accepted (or none): each step emits K + 1 (or 1) tokens, the same for every request
    for alpha, per_step in (([1.0, 1.0], 3), ([0.0, 0.0], 1)):
        m, v, s = tails.step_moments(alpha)
        assert v == 0.0
        assert int(tails.steps_quantile(m, v, s, 99, 0.99)) == math.ceil(99 / per_step)


def test_a_measured_spread_is_read_at_its_percentile():
    spread = np.linspace(0.8, 1.8, 101)
    assert tails.spread_factor(spread, 0.9) == pytest.approx(spread[90])
    assert tails.spread_factor(spread, 0.995) == pytest.approx(0.5 * (spread[99] + spread[100]))


def test_the_exact_convolution_refuses_what_is_not_a_distribution():
    with pytest.raises(ValueError, match="pmf"):
        tails.steps_quantile_exact([0.5, 0.4], 10, 0.9)
    with pytest.raises(ValueError, match="decoded"):
        tails.steps_quantile_exact([0.5, 0.5], 0, 0.9)
