"""Acceptance: per-position alpha, mean acceptance length and the three conventions.

Conventions (vLLM's v1/spec_decode/metrics.py):
- per-token alpha: alpha_i = P(position i accepted | positions < i accepted).
- vLLM draft acceptance rate = accepted / drafted = (tau - 1) / K.
- mean acceptance length tau = tokens emitted per verifier step. Conventionally it includes the bonus
  token: tau = 1 + sum_i p_i with p_i = prod_{j<=i} alpha_j.
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ArrayLike = float | np.ndarray


def check_alpha(alpha: np.ndarray, name: str = "alpha") -> None:
    bad = ~((alpha >= 0.0) & (alpha <= 1.0))
    if np.any(bad):
        value = float(np.asarray(alpha)[bad].flat[0])
        raise ValueError(f"{name}={value!r} is outside [0, 1]; a per-token acceptance is a probability")


def _check_k(k: np.ndarray) -> None:
    if np.any(k < 1) or np.any(k != np.floor(k)):
        value = float(np.asarray(k)[(k < 1) | (k != np.floor(k))].flat[0])
        raise ValueError(f"k={value!r} is not allowed; K (draft tokens per step) is an integer >= 1")


def acceptance_length(alpha_per_position: np.ndarray | Sequence[float]) -> np.ndarray:
    """tau = 1 + sum_i prod_{j<=i} alpha_j over the last axis (bonus token included).

    alpha_per_position: shape (..., K), conditional per-token acceptance per draft position.
    """
    a = np.asarray(alpha_per_position, dtype=float)
    check_alpha(a, "alpha_per_position")
    return 1.0 + np.cumprod(a, axis=-1).sum(axis=-1)


def acceptance_length_iid(alpha: ArrayLike, k: ArrayLike) -> np.ndarray:
    """i.i.d. closed form tau = (1 - a^(K+1)) / (1 - a) (Leviathan et al. 2023, eq. 1); K+1 at a=1."""
    a = np.asarray(alpha, dtype=float)
    kk = np.asarray(k, dtype=float)
    check_alpha(a)
    _check_k(kk)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = (1.0 - a ** (kk + 1.0)) / (1.0 - a)
    return np.where(a >= 1.0, kk + 1.0, tau)


def per_position_alpha(alpha: ArrayLike, k: int, position_decay: ArrayLike = 1.0) -> np.ndarray:
    """Conditional acceptance per position: alpha * decay^(i-1), i = 1..K; shape (..., K)."""
    a = np.asarray(alpha, dtype=float)[..., None]
    d = np.asarray(position_decay, dtype=float)[..., None]
    i = np.arange(k, dtype=float)
    return np.clip(a * d**i, 0.0, 1.0)


def acceptance_length_decay(alpha: ArrayLike, k: ArrayLike, position_decay: ArrayLike) -> np.ndarray:
    """tau for alpha_i = alpha * d^(i-1), vectorised over alpha, K and d (K up to its maximum)."""
    a, kk, d = np.broadcast_arrays(
        np.asarray(alpha, float), np.asarray(k, float), np.asarray(position_decay, float)
    )
    check_alpha(a)
    _check_k(kk)
    k_max = int(kk.max()) if kk.size else 1
    i = np.arange(k_max, dtype=float)
    alphas = np.clip(a[..., None] * d[..., None] ** i, 0.0, 1.0)
    p = np.cumprod(alphas, axis=-1) * (i < kk[..., None])
    return 1.0 + p.sum(axis=-1)


def draft_acceptance_rate(tau: ArrayLike, k: ArrayLike) -> np.ndarray:
    """vLLM's draft acceptance rate = accepted / drafted = (tau - 1) / K."""
    return (np.asarray(tau, float) - 1.0) / np.asarray(k, float)


def acceptance_length_from_rate(rate: ArrayLike, k: ArrayLike) -> np.ndarray:
    r = np.asarray(rate, float)
    check_alpha(r, "draft_acceptance_rate")
    return 1.0 + r * np.asarray(k, float)


def alpha_from_acceptance_length(tau: ArrayLike, k: ArrayLike, *, iterations: int = 60) -> np.ndarray:
    """Invert tau(a, K) = sum_{i=0..K} a^i = (1 - a^(K+1)) / (1 - a) for the i.i.d. per-token alpha.

    tau is strictly increasing and smooth in a on [0, 1] (from 1 to K+1): eight halvings bracket the root to
    1/256, then safeguarded Newton steps (at most `iterations`) reach float64 resolution.
    """
    t = np.asarray(tau, float)
    kk = np.asarray(k, float)
    _check_k(kk)
    t, kk = np.broadcast_arrays(t, kk)
    bad = ~((t >= 1.0) & (t <= kk + 1.0))
    if np.any(bad):
        idx = np.argwhere(bad)[0] if t.ndim else ()
        raise ValueError(
            f"acceptance_length={float(t[tuple(idx)])!r} is outside [1, K+1] for k={kk[tuple(idx)]:g}; "
            "the mean acceptance length counts the bonus token, so it lies between 1 and K+1"
        )
    if t.size <= SCALAR_SOLVE_MAX:  # the planner's few values: plain floats beat numpy's per-call cost
        return np.array([_alpha_iid(float(x), int(y), iterations) for x, y in zip(t.flat, kk.flat, strict=True)],
                        float).reshape(t.shape)
    lo = np.zeros_like(t)
    hi = np.ones_like(t)
    kp1 = kk + 1.0
    # Bisection to 1/256, then Newton steps kept inside the shrinking bracket (tau is smooth and increasing in a,
    # so Newton converges quadratically from there; a step leaving the bracket bisects instead).
    for _ in range(8):
        mid = 0.5 * (lo + hi)
        # sum_{i=0..K} mid^i without the checks of acceptance_length_iid (mid is in (0, 1))
        below = (1.0 - mid**kp1) / (1.0 - mid) < t
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    a = 0.5 * (lo + hi)
    powers = np.arange(int(kk.max()) + 1, dtype=float)
    live = powers <= kk[..., None]  # the terms i = 0..K of each entry
    for _ in range(iterations):
        ap = np.where(live, a[..., None] ** powers, 0.0)
        f = ap.sum(-1) - t
        lo = np.where(f < 0, a, lo)
        hi = np.where(f > 0, a, hi)
        df = np.where(live[..., 1:], powers[1:] * ap[..., :-1], 0.0).sum(-1)
        step = np.divide(f, df, out=np.zeros_like(f), where=df > 0)
        new = a - step
        a = np.where((new >= lo) & (new <= hi), new, 0.5 * (lo + hi))
        if np.abs(step).max(initial=0.0) < 1e-13:  # the next step would be below 1e-26: converged
            break
    return a


SCALAR_SOLVE_MAX = 64


def _alpha_iid(tau: float, k: int, iterations: int) -> float:
    """alpha_from_acceptance_length for one value, in floats (the same bracket-then-Newton steps)."""
    lo, hi = 0.0, 1.0
    for _ in range(8):
        mid = 0.5 * (lo + hi)
        if sum(mid**i for i in range(k + 1)) < tau:
            lo = mid
        else:
            hi = mid
    a = 0.5 * (lo + hi)
    for _ in range(iterations):
        f = sum(a**i for i in range(k + 1)) - tau
        if f < 0:
            lo = a
        elif f > 0:
            hi = a
        df = sum(i * a ** (i - 1) for i in range(1, k + 1))
        step = f / df if df > 0 else 0.0
        new = a - step
        a = new if lo <= new <= hi else 0.5 * (lo + hi)
        if abs(step) < 1e-13:
            break
    return a


def convert(
    *,
    k: int,
    alpha: float | None = None,
    draft_acceptance_rate_value: float | None = None,
    acceptance_length_value: float | None = None,
) -> dict[str, float]:
    """All three conventions from any one of them (i.i.d. per-token alpha assumed); K from 1 to MAX_K, as a
    scenario takes (planner.request)."""
    from planner.request import MAX_K, PlanError  # noqa: PLC0415 - request is the one place K's bound is stated

    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise PlanError("k", k, f"an integer from 1 to {MAX_K} (draft tokens per step)")
    given = [
        v is not None for v in (alpha, draft_acceptance_rate_value, acceptance_length_value)
    ]
    if sum(given) != 1:
        raise ValueError(
            "give exactly one of alpha, draft_acceptance_rate, acceptance_length "
            f"(got {sum(given)})"
        )
    if alpha is not None:
        tau = float(acceptance_length_iid(alpha, k))
        a = float(alpha)
    elif draft_acceptance_rate_value is not None:
        tau = float(acceptance_length_from_rate(draft_acceptance_rate_value, k))
        a = float(alpha_from_acceptance_length(tau, k))
    else:
        tau = float(acceptance_length_value)
        a = float(alpha_from_acceptance_length(tau, k))
    return {
        "k": int(k),
        "alpha_per_token": a,
        "draft_acceptance_rate": float(draft_acceptance_rate(tau, k)),
        "acceptance_length": tau,
    }


def unconditional_from_counts(accepted_per_position: np.ndarray, num_drafts: ArrayLike) -> np.ndarray:
    """p_i = accepted_per_pos[i] / num_drafts (vLLM counters), the unconditional acceptance."""
    n = np.asarray(num_drafts, float)
    if np.any(n <= 0):
        raise ValueError(f"num_drafts={num_drafts!r} must be > 0")
    return np.asarray(accepted_per_position, float) / np.asarray(n)[..., None]


def conditional_from_unconditional(p: np.ndarray) -> np.ndarray:
    """alpha_i = p_i / p_{i-1} (p_0 = 1); 0 where the previous position was never accepted."""
    p = np.asarray(p, float)
    prev = np.concatenate([np.ones_like(p[..., :1]), p[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prev > 0, np.clip(p / prev, 0.0, 1.0), 0.0)


# ---------------------------------------------------------------------------------------------
# Trees. A tree is a list of nodes, each a path of sibling ranks from the root, as in MEDUSA's
# "medusa_choices": (0,) is the top-1 candidate at depth 1, (0, 1) the rank-1 child of (0,), ...
# q[d, r] = P(the rank-r candidate at depth d+1 is the accepted token | its parent was accepted).
# Siblings are exclusive (at most one token is accepted per depth), so each row sums to <= 1.
# Expected accepted length = 1 + sum over nodes of the product of q along the node's path.
# ---------------------------------------------------------------------------------------------

Tree = tuple[tuple[int, ...], ...]


def chain_tree(k: int) -> Tree:
    return tuple((0,) * d for d in range(1, k + 1))


def default_tree(depth: int, width: int) -> Tree:
    """A top-heavy tree: `width` candidates at depth 1, then the top-1 child chain plus the rank-1
    child of the top-1 path at each depth (a shape close to EAGLE-2/3's dynamic trees at small size)."""
    nodes: list[tuple[int, ...]] = [(r,) for r in range(width)]
    for d in range(2, depth + 1):
        nodes.append((0,) * d)
        nodes.append((0,) * (d - 1) + (1,))
    return tuple(nodes)


def validate_tree(tree: Tree) -> None:
    seen = set(tree)
    for node in tree:
        if len(node) == 0:
            raise ValueError("tree node () is the root; list only draft nodes")
        if any(r < 0 for r in node):
            raise ValueError(f"tree node {node!r} has a negative sibling rank")
        if len(node) > 1 and node[:-1] not in seen:
            raise ValueError(f"tree node {node!r} has no parent {node[:-1]!r} in the tree")


def tree_acceptance_length(tree: Tree, q: np.ndarray) -> np.ndarray:
    """Expected tokens per verifier step for a token tree (bonus token included); q shape (..., D, W)."""
    validate_tree(tree)
    q = np.asarray(q, float)
    check_alpha(q, "q")
    if np.any(q.sum(axis=-1) > 1.0 + 1e-9):
        raise ValueError("q rows must sum to <= 1: siblings at one depth are exclusive events")
    depth_max = max(len(n) for n in tree)
    width_max = max(max(n) for n in tree) + 1
    if q.shape[-2] < depth_max or q.shape[-1] < width_max:
        raise ValueError(
            f"q has shape {q.shape[-2:]} but the tree needs depth {depth_max} x width {width_max}"
        )
    total = np.ones(q.shape[:-2])
    for node in tree:
        prob = np.ones(q.shape[:-2])
        for d, r in enumerate(node):
            prob = prob * q[..., d, r]
        total = total + prob
    return total


def tree_node_count(tree: Tree) -> int:
    """Tokens the verifier checks per sequence for this tree (the root's token is the bonus)."""
    validate_tree(tree)
    return len(tree)


def effective_chain_alpha(tau: ArrayLike, depth: ArrayLike) -> np.ndarray:
    """The i.i.d. chain alpha that would give the same tau at the same depth ("effective acceptance")."""
    return alpha_from_acceptance_length(np.minimum(tau, np.asarray(depth, float) + 1.0), depth)
