"""The sibling-rank parameter of planner/acceptance/trees.py fitted on published chain/tree pairs (core.least_squares).

tau_i = planner.acceptance.trees.expected_acceptance_length(shape_i, alpha_{group_i}, rank_decay) + eps: one per-token
alpha per group (observations sharing drafter, target, dataset and engine) and one rank_decay shared by all groups.
planner.acceptance.trees.DEFAULT_RANK_DECAY is this fit on the training table's only chain/tree pair (PI4/PI5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from calibration.fitting.core import FitResult, least_squares
from planner.acceptance import rates as acc
from planner.acceptance.trees import TreeShape, expected_acceptance_length


@dataclass(frozen=True)
class TreeObservation:
    """A measured acceptance length for one tree (or chain) configuration.

    group: observations that share the drafter, target, dataset and engine share one per-token alpha
    (e.g. a chain row and a tree row of the same study). label: the data row's id, for residuals.
    """

    shape: TreeShape
    acceptance_length: float
    group: str
    label: str = ""


@dataclass(frozen=True)
class SiblingFit:
    """Result of fit_sibling_model: the FitResult (parameters alpha[<group>] and rank_decay) and its reading.

    rank_decay, rank_decay_stderr: the sibling parameter and its standard error (nan without spare
    degrees of freedom). alpha_per_group: per-token alpha (i.i.d. over depth) for each group.
    predicted, residuals: per observation, acceptance-length units; residual = predicted - observed.
    """

    fit: FitResult
    labels: tuple[str, ...]
    observed: np.ndarray
    predicted: np.ndarray
    groups: tuple[str, ...]

    @property
    def rank_decay(self) -> float:
        return self.fit.value("rank_decay")

    @property
    def rank_decay_stderr(self) -> float:
        return self.fit.error("rank_decay")

    @property
    def alpha_per_group(self) -> Mapping[str, float]:
        return {g: self.fit.value(f"alpha[{g}]") for g in self.groups}

    @property
    def residuals(self) -> np.ndarray:
        return np.asarray(self.fit.residuals)

    @property
    def dof(self) -> int:
        return len(self.labels) - len(self.fit.free)

    @property
    def success(self) -> bool:
        return self.fit.success

    @property
    def message(self) -> str:
        return self.fit.message


def fit_sibling_model(observations: Sequence[TreeObservation], *, rank_decay_bounds: tuple[float, float] = (0.0, 2.0),
                      initial_rank_decay: float = 0.5) -> SiblingFit:
    """Least-squares fit of tau_i = expected_acceptance_length(shape_i, alpha_{group_i}, rank_decay) + eps.

    Parameters: one per-token alpha per group (in [0, 1], the same at every depth) and one rank_decay
    shared by all groups (dimensionless, bounded by rank_decay_bounds). Needs at least one tree that is
    not a chain (otherwise rank_decay is not identified) and at least as many observations as
    parameters. Standard errors from the Jacobian (core.least_squares; nan at dof 0).
    """
    obs = list(observations)
    if not obs:
        raise ValueError("observations=[] is empty; give chain and tree rows")
    for o in obs:
        tau = float(o.acceptance_length)
        if not np.isfinite(tau) or tau < 1.0 or tau > o.shape.depth + 1.0:
            raise ValueError(
                f"acceptance_length={o.acceptance_length!r} for {o.label or o.group!r} is outside "
                f"[1, depth + 1 = {o.shape.depth + 1}] (bonus token included)"
            )
    if all(o.shape.is_chain for o in obs):
        raise ValueError("every observation is a chain; rank_decay needs at least one tree with siblings")
    groups = sorted({o.group for o in obs})
    n_params = len(groups) + 1
    if len(obs) < n_params:
        raise ValueError(
            f"{len(obs)} observations for {n_params} parameters (alpha for groups {groups} and rank_decay): too few"
        )
    gidx = np.array([groups.index(o.group) for o in obs])
    observed = np.array([float(o.acceptance_length) for o in obs])

    def predict(theta: np.ndarray) -> np.ndarray:
        alphas, decay = theta[:-1], theta[-1]
        return np.array([float(expected_acceptance_length(o.shape, alphas[g], decay)) for o, g in zip(obs, gidx)])

    # Start each group's alpha at the i.i.d. chain alpha of its first observation's depth.
    a0 = []
    for g in groups:
        o = next(o for o in obs if o.group == g)
        a0.append(float(acc.alpha_from_acceptance_length(min(o.acceptance_length, o.shape.depth + 1.0),
                                                         o.shape.depth)))
    lo_d, hi_d = rank_decay_bounds
    lower = np.array([0.0] * len(groups) + [lo_d])
    upper = np.array([1.0] * len(groups) + [hi_d])
    theta0 = np.clip(np.array(a0 + [float(initial_rank_decay)]), lower + 1e-9, upper - 1e-9)
    fit = least_squares(lambda th: predict(th) - observed, names=[f"alpha[{g}]" for g in groups] + ["rank_decay"],
                        p0=theta0, lower=lower, upper=upper, x_scale=np.full(theta0.size, 0.1))
    return SiblingFit(fit=fit, labels=tuple(o.label for o in obs), observed=observed,
                      predicted=predict(np.array(fit.params)), groups=tuple(groups))
