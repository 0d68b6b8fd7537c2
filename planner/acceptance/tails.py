"""Tail latency of speculative decoding: the spread of tokens emitted per verifier step, and from it the spread of a
request's TPOT.

Tokens per step. A chain of K drafts with conditional per-position acceptance alpha_1..alpha_K (planner convention,
planner.acceptance.rates) emits X = 1 + A tokens a verifier step, A the accepted drafts: A >= j exactly when the first j
drafts are accepted, so P(A >= j) = p_j = prod_{i<=j} alpha_i (j = 1..K), and the moments follow from the tail sums
    E[A] = sum_j p_j,   E[A^2] = sum_j (2j - 1) p_j,   E[A^3] = sum_j (3j^2 - 3j + 1) p_j
(E[A^m] = sum_j (j^m - (j-1)^m) P(A >= j) for a count A >= 0). E[X] = 1 + E[A] is the acceptance length tau; the steps
are independent and alike (the i.i.d. step model behind tau itself).

Steps of a request. A request of n output tokens decodes n - 1 of them in verifier steps (its first token comes from
the prefill; vLLM's vllm/benchmarks/serve.py likewise takes TPOT = (latency - TTFT) / (output_len - 1)). It needs
S = min{s : T_s >= n - 1} steps, T_s = X_1 + ... + X_s, and P(S <= s) = P(T_s >= n - 1): the q-quantile of S is the
smallest s with P(T_s >= n - 1) >= q. Its TPOT is S x step time / (n - 1); the planner's mean TPOT is step time / tau,
so the TPOT at quantile q is the mean TPOT times
    f_q = tau x s_q / (n - 1).
`steps_quantile_exact` computes s_q by convolving the step's distribution s times (T_s capped at n - 1), exact and
O(s n K): the tests' oracle. `steps_quantile` is the planner's closed form for every configuration at once: T_s is a sum
of s independent bounded steps, so it is near normal (central limit theorem) with mean s mu, variance s sigma^2 and
skewness gamma / sqrt(s) (mu, sigma^2, gamma of X); its (1 - q)-quantile with the Cornish-Fisher skewness term and a
continuity correction (T_s is an integer) is
    t(s) = s mu + sqrt(s) sigma (-z + (z^2 - 1) gamma / (6 sqrt(s))),   z = Phi^-1(q),
and t(s) >= n - 1 - 1/2 is a quadratic in r = sqrt(s):  mu r^2 - z sigma r + (z^2 - 1) gamma sigma / 6 - (n - 3/2) >= 0,
solved for its larger root and rounded up. tests/planner/acceptance/test_tails.py checks it against the exact
convolution (within one step from 16 decoded tokens on).

No speculation emits one token a step: its TPOT has no spread from acceptance (f_q = 1). The spread from a batch that
changes size while a request decodes is not modelled, with or without speculation; nor is the spread of output lengths
(a request of the segment's mean output length stands for the segment).

A measured per-request spread (profiles.measured_acceptance: vLLM's per-request spec-decode metrics) replaces the
model's: each request's tokens per step gives its TPOT relative to the pooled mean, and f_q is the q-quantile of those
ratios over requests (planner.types.Acceptance.tpot_spread), applied at every K the search tries for that method (the
file measured one K: its relative spread is taken to hold at the others). It carries what the i.i.d. step model
misses: requests whose acceptance differs (a prompt the drafter knows well, one it does not), the usual cause of a
heavy tail.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

# Percentiles the tpot_spread of a measured acceptance lists: 0, 1, ..., 100 (index = percentile)
SPREAD_PERCENTILES = 101


def step_moments(per_position) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean tau, variance, skewness) of the tokens one verifier step emits, from conditional per-position alpha
    (..., K) of a chain (module docstring); skewness 0 where the variance is 0."""
    a = np.clip(np.nan_to_num(np.asarray(per_position, float), nan=0.0), 0.0, 1.0)
    p = np.cumprod(a, axis=-1)
    j = np.arange(1, a.shape[-1] + 1, dtype=float)
    m1 = p.sum(-1)
    m2 = (p * (2.0 * j - 1.0)).sum(-1)
    m3 = (p * (3.0 * j * j - 3.0 * j + 1.0)).sum(-1)
    var = np.maximum(m2 - m1 * m1, 0.0)
    mu3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(var > 1e-12, mu3 / np.where(var > 1e-12, var, 1.0) ** 1.5, 0.0)
    return 1.0 + m1, var, skew


def step_moments_by_k(per_position, ks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """step_moments of the chain cut at each K in `ks`: per-position alpha (..., Kmax) -> (..., len(ks)) each."""
    a = np.clip(np.nan_to_num(np.asarray(per_position, float), nan=0.0), 0.0, 1.0)
    p = np.cumprod(a, axis=-1)
    j = np.arange(1, a.shape[-1] + 1, dtype=float)
    idx = np.asarray(ks).astype(int) - 1
    m1 = np.cumsum(p, -1)[..., idx]
    m2 = np.cumsum(p * (2.0 * j - 1.0), -1)[..., idx]
    m3 = np.cumsum(p * (3.0 * j * j - 3.0 * j + 1.0), -1)[..., idx]
    var = np.maximum(m2 - m1 * m1, 0.0)
    mu3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(var > 1e-12, mu3 / np.where(var > 1e-12, var, 1.0) ** 1.5, 0.0)
    return 1.0 + m1, var, skew


def iid_per_position(tau, k: int) -> np.ndarray:
    """The i.i.d. chain (the same alpha at every position) of depth k with acceptance length tau, (..., k): the
    spread a tree or a stated tau stands for (planner.acceptance.rates.alpha_from_acceptance_length)."""
    from planner.acceptance.rates import alpha_from_acceptance_length

    t = np.clip(np.asarray(tau, float), 1.0, k + 1.0)
    a = np.asarray(alpha_from_acceptance_length(t, np.full(t.shape, float(k))), float)
    return np.repeat(a[..., None], k, axis=-1)


def decoded_tokens(output_tokens) -> np.ndarray:
    """Tokens a request decodes in verifier steps: its output less the first token (from the prefill), at least 1."""
    return np.maximum(np.round(np.asarray(output_tokens, float)) - 1.0, 1.0)


def steps_quantile(mean, var, skew, decoded, q: float) -> np.ndarray:
    """The q-quantile of the steps a request needs to decode `decoded` tokens (normal approximation of the s-step
    sum with Cornish-Fisher skewness and continuity corrections, module docstring), broadcast; from 1 to `decoded`
    (one token a step)."""
    mu = np.maximum(np.asarray(mean, float), 1.0)
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    g = np.asarray(skew, float)
    n = np.asarray(decoded, float)
    z = float(ndtri(q))
    c = (z * z - 1.0) * g * sd / 6.0 - (n - 0.5)
    r = (z * sd + np.sqrt(np.maximum(z * z * sd * sd - 4.0 * mu * c, 0.0))) / (2.0 * mu)
    s = np.ceil(r * r - 1e-9)
    return np.clip(s, 1.0, n)


def steps_quantile_exact(pmf, decoded: int, q: float) -> int:
    """The q-quantile of the steps to decode `decoded` tokens when one step emits 1, 2, ... tokens with probabilities
    `pmf` (pmf[i]: i + 1 tokens), by convolution: the distribution of the tokens so far, those at `decoded` or more
    absorbed; the first step count whose absorbed probability reaches q."""
    w = np.asarray(pmf, float)
    if w.ndim != 1 or w.size < 1 or np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, abs_tol=1e-9):
        raise ValueError(f"pmf={w.tolist()!r}: probabilities of 1, 2, ... tokens a step, summing to 1")
    n = int(decoded)
    if n < 1:
        raise ValueError(f"decoded={decoded!r}: at least one token")
    dist = np.zeros(n)
    dist[0] = 1.0  # zero tokens before the first step
    done = 0.0
    for s in range(1, n + 1):
        nxt = np.zeros(n + w.size)
        for i, pi in enumerate(w):
            nxt[i + 1: i + 1 + n] += pi * dist
        done += float(nxt[n:].sum())
        dist = nxt[:n]
        if done >= q - 1e-12:
            return s
    return n


def chain_pmf(per_position) -> np.ndarray:
    """P(X = 1), ..., P(X = K + 1) of one chain's tokens per step from conditional alpha (K,)."""
    p = np.concatenate([[1.0], np.cumprod(np.clip(np.asarray(per_position, float), 0.0, 1.0))])
    return p - np.append(p[1:], 0.0)


def tpot_factor(mean, var, skew, output_tokens, q: float) -> np.ndarray:
    """The TPOT at quantile q over the planner's mean TPOT (step time / tau) for a request of `output_tokens`:
    tau x s_q / (n - 1) (module docstring), broadcast."""
    n = decoded_tokens(output_tokens)
    return np.maximum(np.asarray(mean, float), 1.0) * steps_quantile(mean, var, skew, n, q) / n


def spread_factor(tpot_spread, q: float) -> float:
    """The q-quantile of a measured per-request TPOT over the mean (Acceptance.tpot_spread: percentiles 0..100),
    interpolated between listed percentiles."""
    v = np.asarray(tpot_spread, float)
    return float(np.interp(100.0 * q, np.linspace(0.0, 100.0, v.size), v))
