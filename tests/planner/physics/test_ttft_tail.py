"""TTFT at a percentile (planner.physics.ttft.wait_quantile, max_lane_share): the M/M/1 waiting time by hand and
by a simulated queue, and the inversion the disaggregated prefill pool sizes with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.physics.ttft import max_lane_share, ttft, wait_quantile


def test_the_mm1_p90_wait_by_hand():
    """M/M/1, lambda = 6 /s, service 0.1 s (mu = 10 /s): u = 0.6, mean wait W = u / (mu - lambda) = 0.15 s, and
    P(W > t) = u exp(-(mu - lambda) t): the p90 wait solves 0.6 exp(-4 t) = 0.1, t = ln(6) / 4 = 0.4479 s; the median
    is 0 where fewer than half the arrivals wait (0.6 > 0.5: here ln(1.2) / 4 = 0.0456 s)."""
    lane = dict(requests_per_s=6.0, prefill_s=0.1, new_prompt_tokens=1.0, step_s=0.0, batch=0.0, overhead_s=0.0)
    t = ttft(**lane)
    assert float(t.queue_s) == pytest.approx(0.15)
    p90 = ttft(**lane, quantile=0.9)
    assert float(p90.queue_s) == pytest.approx(math.log(6.0) / 4.0)
    assert float(p90.ttft_s) == pytest.approx(math.log(6.0) / 4.0 + 0.1)  # + its own prefill
    assert float(wait_quantile(0.15, 0.6, 0.5)) == pytest.approx(math.log(1.2) / 4.0)
    assert float(wait_quantile(0.05, 0.3, 0.5)) == 0.0  # 30 % wait: the median request does not
    assert float(wait_quantile(0.15, 0.6, None)) == 0.15


def test_the_p99_wait_matches_a_simulated_mm1_queue():
    """Lindley's recursion W_{n+1} = max(0, W_n + S_n - A_{n+1}) over 400,000 seeded customers at u = 0.5: the
    simulated p90 and p99 waits lie within 4 % of the formula (seeds 0-3 of this simulation land within 2.5 %: the
    sampling error of a p99 over correlated waits at this length)."""
    rng = np.random.default_rng(0)
    lam, s_mean, n = 5.0, 0.1, 400_000
    step = rng.exponential(s_mean, n)[:-1] - rng.exponential(1.0 / lam, n)[1:]
    w = np.zeros(n)
    for i in range(1, n):
        w[i] = max(0.0, w[i - 1] + step[i - 1])
    w = w[20_000:]  # the queue's start-up
    mean_w = 0.5 * s_mean / 0.5
    for q in (0.9, 0.99):
        assert float(np.quantile(w, q)) == pytest.approx(float(wait_quantile(mean_w, 0.5, q)), rel=0.04)


def test_max_lane_share_inverts_the_wait():
    room, service = np.array([0.05, 0.2, 1.0, -0.1]), 0.1
    for q in (None, 0.9, 0.99):
        u = max_lane_share(room, service, q)
        assert u[3] == 0.0
        w = u[:3] * service / (1.0 - u[:3])  # cv^2 = 1: W = u S / (1 - u)
        assert wait_quantile(w, u[:3], q) == pytest.approx(room[:3], rel=1e-6)
    # a percentile above the median holds the lane less busy than the mean does
    assert np.all(max_lane_share(room[:3], service, 0.99) < max_lane_share(room[:3], service, None))
