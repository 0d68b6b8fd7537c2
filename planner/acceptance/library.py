"""The acceptance library as the planner reads it: measured rows (profiles/data/acceptance/acceptance.csv, loaded
and validated by profiles.acceptance_library) and the per-position acceptance profiles fitted to them.

Conventions (planner.acceptance.rates): a row's `acceptance_length` is tau at its K, bonus token included; a
per-position list is either vLLM's unconditional p_i = accepted_per_pos[i] / num_drafts or the conditional alpha_i = p_i
/ p_{i-1}.

Profile model (one per fit): conditional alpha_i = a * d^(i-1), i = 1..K, so tau(K) = 1 + sum_{i<=K} prod_{j<=i}
alpha_j (Leviathan et al. 2023 with a geometric position decay, the shape methods.yaml's priors assume). Fitted by
least squares on tau over every (K, tau) point the rows give (scipy.optimize.least_squares).
The band is an additive shift h on every position's alpha: [profile - h, profile + h], clipped to [0, 1].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, least_squares

from planner.acceptance.rates import acceptance_length_iid, alpha_from_acceptance_length

METHODS = ("eagle", "eagle3", "p_eagle", "medusa", "mtp", "draft_model", "ngram", "dflash", "suffix")
CONVENTIONS = ("unconditional", "conditional")
MIN_HALF_WIDTH = 0.02  # alpha band floor: ~1,700 drafts measure alpha to +-0.02 at alpha 0.7 (binomial standard error)
SAME_TEMPERATURE = 0.05  # rows within this of the request's temperature count as measured at it
# Sampling lowers acceptance: alpha(T) = alpha(0) * (1 - TEMPERATURE_SLOPE * T) where the library has no pair of
# rows (same model, method, dataset, K) at T = 0 and T > 0 to fit the slope from. Assumption: sampled drafts are
# accepted with probability min(1, p/q) instead of on an argmax match, which costs acceptance as T flattens p.
TEMPERATURE_SLOPE = 0.10


@dataclass(frozen=True)
class LibraryRow:
    """One measured acceptance (one row of acceptance.csv), the fields the planner uses."""

    id: str
    source: str
    title: str
    date: str
    model: str  # as the source names it
    model_key: str  # catalogue key ("" when the model is not in the catalogue)
    head: str  # HF id of the draft head, or "native MTP"
    method: str
    engine: str
    dataset: str
    workload: str  # planner workload key ("" when the dataset maps to none)
    k: int
    tree: str  # "chain" or "steps=S,topk=T,draft_tokens=N"
    temperature: float | None  # None: not stated
    acceptance_length: float | None  # tau at K, bonus token included
    per_position: tuple[float, ...] = ()
    per_position_convention: str = ""

    @property
    def chain_k(self) -> int | None:
        """K as a chain (an SGLang tree of topk 1 is a chain of its steps), None for a real tree."""
        if self.tree == "chain":
            return self.k
        parts = dict(p.split("=") for p in self.tree.split(","))
        return int(parts["steps"]) if parts["topk"] == "1" else None  # a width not stated: not a chain

    def conditional(self) -> np.ndarray:
        """Conditional alpha per measured position (may be empty)."""
        p = np.asarray(self.per_position, float)
        if self.per_position_convention != "unconditional" or p.size == 0:
            return p
        prev = np.concatenate([[1.0], p[:-1]])
        return np.where(prev > 0, np.clip(p / np.where(prev > 0, prev, 1.0), 0.0, 1.0), 0.0)

    def points(self) -> list[tuple[int, float]]:
        """(K, tau) points: tau at each K' <= the measured positions (a K-chain's first K' positions are what a
        K'-chain drafts), plus the row's own tau at K when the positions stop short of K."""
        k = self.chain_k or self.k
        cond = self.conditional()[:k]
        pts = [(i + 1, float(t)) for i, t in enumerate(1.0 + np.cumsum(np.cumprod(cond)))] if cond.size else []
        if self.acceptance_length is not None and cond.size < k:
            pts.append((k, min(float(self.acceptance_length), k + 1.0)))
        return pts


@dataclass(frozen=True)
class HeadRecord:
    """A public draft head (heads.csv, or any acceptance row's head)."""

    model: str
    model_key: str
    method: str
    head: str
    source: str
    date: str
    notes: str = ""


@dataclass(frozen=True, eq=False)  # hashed by identity: fits are cached per library object
class AcceptanceLibrary:
    rows: tuple[LibraryRow, ...] = ()
    heads: tuple[HeadRecord, ...] = ()
    path: str = ""  # where it was read from ("" : no file)

    def heads_for(self, model: str, method: str) -> tuple[HeadRecord, ...]:
        """Public heads for a catalogue model and method: heads.csv's, then those the acceptance rows name (cached
        per library: it is frozen)."""
        return _heads_for(self, model, method)

    def _heads_for(self, model: str, method: str) -> tuple[HeadRecord, ...]:
        out = [h for h in self.heads if h.model_key == model and h.method == method]
        seen = {h.head for h in out}
        for r in self.rows:
            # a row whose head the source does not name ("not stated ...") is a measurement, not a head to download
            if r.head.startswith("not stated"):
                continue
            if r.model_key == model and r.method == method and r.head and r.head not in seen:
                seen.add(r.head)
                out.append(HeadRecord(r.model, r.model_key, r.method, r.head, r.source, r.date, f"row {r.id}"))
        return tuple(out)


@functools.lru_cache(maxsize=1024)
def _heads_for(lib: AcceptanceLibrary, model: str, method: str) -> tuple[HeadRecord, ...]:
    return lib._heads_for(model, method)


EMPTY = AcceptanceLibrary()


@dataclass(frozen=True)
class ProfileFit:
    """alpha_i = a * d^(i-1) fitted to rows; `half_width` the additive alpha band the data support."""

    a: float
    d: float
    half_width: float
    row_ids: tuple[str, ...]
    models: tuple[str, ...]
    rmse_tau: float  # root mean square tau residual over the fitted points
    n_points: int
    note: str = ""

    def per_position(self, k_max: int) -> np.ndarray:
        return np.clip(self.a * self.d ** np.arange(k_max), 0.0, 1.0)


def tau_profile(a: float, d: float, ks: np.ndarray, shift: float = 0.0) -> np.ndarray:
    """tau at each K for alpha_i = clip(a d^(i-1) + shift, 0, 1)."""
    ks = np.asarray(ks, int)
    alpha = np.clip(a * d ** np.arange(int(ks.max())) + shift, 0.0, 1.0)
    return 1.0 + np.cumsum(np.cumprod(alpha))[ks - 1]


def fit_profile(points: Sequence[tuple[int, float]], *, decay: float | None = None) -> tuple[float, float, float]:
    """(a, d, rmse of tau) of alpha_i = a d^(i-1) fitted to (K, tau) points; `decay` fixes d (one K measured: the
    decay is not identifiable from one point, so it comes from elsewhere)."""
    ks = np.array([p[0] for p in points], int)
    taus = np.array([p[1] for p in points], float)
    if ks.size == 0:
        raise ValueError("no (K, tau) points to fit an acceptance profile to")
    if decay is not None or np.unique(ks).size < 2:
        d = 1.0 if decay is None else float(decay)
        res = least_squares(lambda x: tau_profile(x[0], d, ks) - taus, [0.7], bounds=([0.0], [1.0]))
        return float(res.x[0]), d, float(np.sqrt(np.mean(res.fun**2)))
    res = least_squares(lambda x: tau_profile(x[0], x[1], ks) - taus, [0.7, 0.95], bounds=([0.0, 0.3], [1.0, 1.05]))
    return float(res.x[0]), float(res.x[1]), float(np.sqrt(np.mean(res.fun**2)))


def shift_to_match(a: float, d: float, points: Sequence[tuple[int, float]]) -> float:
    """The additive alpha shift that makes the profile match the points best (least squares)."""
    ks = np.array([p[0] for p in points], int)
    taus = np.array([p[1] for p in points], float)
    res = least_squares(lambda s: tau_profile(a, d, ks, s[0]) - taus, [0.0], bounds=([-1.0], [1.0]))
    return float(res.x[0])


def shift_for_tau_half_width(a: float, d: float, k: int, tau_half_width: float) -> float:
    """The smallest alpha shift h whose band [tau(-h), tau(+h)] at K reaches tau_half_width on both sides."""
    base = float(tau_profile(a, d, [k])[0])

    def gap(h: float) -> float:
        up = float(tau_profile(a, d, [k], h)[0]) - base
        down = base - float(tau_profile(a, d, [k], -h)[0])
        return min(up, down) - tau_half_width

    if tau_half_width <= 0 or gap(0.0) >= 0:
        return 0.0
    if gap(1.0) < 0:  # the clip at 0 / 1 caps the band: the widest there is
        return 1.0
    return float(brentq(gap, 0.0, 1.0, xtol=1e-6)) + 1e-6


# ---------------------------------------------------------------------------------------------------
# Which rows count for a (model, method, workload, temperature)
# ---------------------------------------------------------------------------------------------------


def dataset_matches(row: LibraryRow, workload: str, datasets: Sequence[str]) -> bool:
    """A row counts for a workload when it names that workload, or its dataset names one of the workload's
    (workloads.yaml `datasets`; case-insensitive: "MT-Bench (80 prompts)" is MT-Bench; a bare "SPEED-Bench"
    is none of its categories)."""
    if row.workload:
        return row.workload == workload
    name = row.dataset.strip().lower()
    return bool(name) and any(d.lower() in name for d in datasets if d)


@functools.lru_cache(maxsize=64)
def temperature_slope(lib: AcceptanceLibrary, method: str) -> tuple[float, str]:
    """(slope, source) of alpha(T) = alpha(0) (1 - slope T): from the library's pairs of rows (same model, method,
    dataset, chain K) at T = 0 and T > 0 where it has them, else the assumption TEMPERATURE_SLOPE."""
    greedy: dict[tuple, LibraryRow] = {}
    for r in lib.rows:
        if r.method == method and r.temperature == 0 and r.acceptance_length is not None and r.chain_k:
            greedy[(r.model, r.dataset.lower(), r.chain_k)] = r
    slopes, ids = [], []
    for r in lib.rows:
        g = greedy.get((r.model, r.dataset.lower(), r.chain_k)) if r.method == method else None
        if g is None or not r.temperature or r.acceptance_length is None:
            continue
        a0 = float(alpha_from_acceptance_length(min(g.acceptance_length, g.k + 1.0), g.k))
        at = float(alpha_from_acceptance_length(min(r.acceptance_length, r.k + 1.0), r.k))
        if a0 > 0:
            slopes.append((1.0 - at / a0) / r.temperature)
            ids += [g.id, r.id]
    if slopes:
        return float(np.clip(np.mean(slopes), 0.0, 0.5)), "library rows " + ", ".join(ids)
    return TEMPERATURE_SLOPE, "assumption"


def temperature_factor(slope: float, temperature: float | None) -> float:
    return max(0.0, 1.0 - slope * float(temperature or 0.0))


ANY_DATASET = "*"  # usable_rows' workload that takes every dataset


def usable_rows(lib: AcceptanceLibrary, method: str, workload: str, datasets: Sequence[str], temperature: float,
                *, model: str | None = None, exclude_model: str | None = None) -> list[LibraryRow]:
    """Chain rows of a method on the workload's datasets (ANY_DATASET: every dataset) of one model, or of all but
    one: those measured at the request's temperature where there are any, else every temperature (rescaled by
    rescaled_points)."""
    rows = [r for r in lib.rows if r.method == method and r.chain_k
            and (model is None or r.model_key == model) and (not r.model_key or r.model_key != exclude_model)
            and (workload == ANY_DATASET or dataset_matches(r, workload, datasets))]
    same = [r for r in rows if r.temperature is not None and abs(r.temperature - temperature) <= SAME_TEMPERATURE]
    if temperature == 0:  # greedy: a row whose temperature is not stated is taken as greedy (the engines' default)
        same += [r for r in rows if r.temperature is None]
    return same or rows


def rescaled_points(rows: Sequence[LibraryRow], temperature: float, slope: float) -> list[tuple[int, float]]:
    """Each row's (K, tau) points at the request's temperature: a row measured elsewhere has its conditional
    alpha rescaled by temperature_factor(T_request) / temperature_factor(T_row) (i.i.d. within the row)."""
    out = []
    for r in rows:
        t_row = r.temperature or 0.0
        if abs(t_row - temperature) <= SAME_TEMPERATURE:
            out += r.points()
            continue
        scale = temperature_factor(slope, temperature) / max(temperature_factor(slope, t_row), 1e-9)
        for k, tau in r.points():
            a = float(alpha_from_acceptance_length(min(tau, k + 1.0), k))
            out.append((k, float(acceptance_length_iid(min(a * scale, 1.0), k))))
    return out


def who(row: LibraryRow) -> str:
    """The model a row measured: its catalogue key, else the name its source gives (models outside the catalogue
    still count in a method's family fit)."""
    return row.model_key or row.model


def rows_source(rows: Sequence[LibraryRow], limit: int = 6) -> str:
    """'id, id (source, date); id (source, date)' for the first rows, the ids of one source together, then how many
    more."""
    by_source: dict[tuple[str, str], list[str]] = {}
    for r in rows[:limit]:
        by_source.setdefault((r.source, r.date), []).append(r.id)
    parts = [f"{', '.join(ids)} ({src}, {date})" for (src, date), ids in by_source.items()]
    more = f"; +{len(rows) - limit} more" if len(rows) > limit else ""
    return "; ".join(parts) + more


# ---------------------------------------------------------------------------------------------------
# Tier 2 (a public head for this model) and tier 3 (the method's family fit over other models)
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def model_fit(lib: AcceptanceLibrary, model: str, method: str, workload: str, datasets: tuple[str, ...],
              temperature: float, *, decay: float) -> ProfileFit | None:
    """The profile of this model's own measured rows (public heads) on the workload's datasets, or None.
    Rows at several K fit a and d; rows at one K fit a with d = `decay` (the family's or the prior's)."""
    rows = usable_rows(lib, method, workload, datasets, temperature, model=model)
    if not rows:
        return None
    slope, _ = temperature_slope(lib, method)
    pts = rescaled_points(rows, temperature, slope)
    several = len({k for k, _ in pts}) > 1
    a, d, rmse = fit_profile(pts, decay=None if several else decay)
    shifts = [shift_to_match(a, d, r_pts) for r in rows if (r_pts := rescaled_points([r], temperature, slope))]
    spread = float(np.sqrt(np.mean(np.square(shifts)))) if len(shifts) > 1 else 0.0
    note = "" if several else f"one K measured (K={pts[0][0]}): position decay {d:.3f} taken from elsewhere"
    return ProfileFit(a, d, max(MIN_HALF_WIDTH, spread), tuple(r.id for r in rows), (model,), rmse, len(pts), note)


@functools.lru_cache(maxsize=256)
def family_fit(lib: AcceptanceLibrary, method: str, workload: str, datasets: tuple[str, ...], temperature: float,
               exclude_model: str | None = None, *, with_loo: bool = True) -> ProfileFit | None:
    """The method's position profile fitted over every other model's rows on the workload's datasets (at least
    MIN_FAMILY_MODELS models; else over all datasets, or None). Its band: the larger of the spread of the models
    around it and the half-width that covers its own leave-one-model-out tau error at every K it was measured at."""
    note = ""
    rows = usable_rows(lib, method, workload, datasets, temperature, exclude_model=exclude_model)
    if len({who(r) for r in rows}) < MIN_FAMILY_MODELS:
        workload = ANY_DATASET
        rows = usable_rows(lib, method, workload, datasets, temperature, exclude_model=exclude_model)
        note = (f"fitted over every dataset (fewer than {MIN_FAMILY_MODELS} models measured on this workload's "
                "datasets)")
    models = sorted({who(r) for r in rows})
    if len(models) < MIN_FAMILY_MODELS:
        return None
    slope, _ = temperature_slope(lib, method)
    pts = rescaled_points(rows, temperature, slope)
    a, d, rmse = fit_profile(pts)
    shifts = [shift_to_match(a, d, rescaled_points([r for r in rows if who(r) == m], temperature, slope))
              for m in models]
    h = max(MIN_HALF_WIDTH, float(np.sqrt(np.mean(np.square(shifts)))))
    if with_loo:
        loo = leave_one_model_out(lib, method, workload, datasets, temperature, exclude_model=exclude_model)
        for k, err in loo.rmse_tau_by_k:
            h = max(h, shift_for_tau_half_width(a, d, k, err))
    return ProfileFit(a, d, h, tuple(r.id for r in rows), tuple(models), rmse, len(pts), note)


# A family fit needs models enough that leaving one out still leaves a fit (two): its band is then at least its own
# leave-one-model-out error. With two models that error cannot be measured, so the method stays on its prior.
MIN_FAMILY_MODELS = 3


@dataclass(frozen=True)
class LooResult:
    """Leave-one-model-out error of the family fit for one method: each model's curve predicted from the others."""

    method: str
    models: tuple[str, ...]
    n_points: int
    mae_tau: float  # mean |predicted - measured| tau over every held-out point
    rmse_tau: float
    rmse_tau_by_k: tuple[tuple[int, float], ...]  # (K, root mean square tau error at that K)
    rmse_alpha_shift: float  # the alpha shift each held-out model needed, root mean square


def leave_one_model_out(lib: AcceptanceLibrary, method: str, workload: str = ANY_DATASET,
                        datasets: tuple[str, ...] = (), temperature: float = 0.0, *,
                        exclude_model: str | None = None) -> LooResult:
    """For each model with rows of the method, the family fit of the others (no LOO of its own) predicts its points;
    errors in tau (per K) and as the alpha shift the model needed. Empty (NaN errors) below three models."""
    rows = usable_rows(lib, method, workload, datasets, temperature, exclude_model=exclude_model)
    models = tuple(sorted({who(r) for r in rows}))
    slope, _ = temperature_slope(lib, method)
    errs: list[tuple[int, float]] = []
    shifts = []
    for m in models if len(models) >= MIN_FAMILY_MODELS else ():
        others = [r for r in rows if who(r) != m]
        fit_pts = rescaled_points(others, temperature, slope)
        a, d, _ = fit_profile(fit_pts)
        held = rescaled_points([r for r in rows if who(r) == m], temperature, slope)
        for k, tau in held:
            errs.append((k, float(tau_profile(a, d, [k])[0]) - tau))
        shifts.append(shift_to_match(a, d, held))
    if not errs:
        return LooResult(method, models, 0, math.nan, math.nan, (), math.nan)
    e = np.array([x for _, x in errs])
    ks = sorted({k for k, _ in errs})
    by_k = tuple((k, float(np.sqrt(np.mean([x**2 for kk, x in errs if kk == k])))) for k in ks)
    return LooResult(method, models, len(errs), float(np.mean(np.abs(e))), float(np.sqrt(np.mean(e**2))), by_k,
                     float(np.sqrt(np.mean(np.square(shifts)))))


def method_measurements(lib: AcceptanceLibrary, method: str) -> list[tuple[int, float, float, str]]:
    """(chain K, tau, i.i.d. per-token alpha, row id) of every chain tau point the library holds for a method."""
    out = []
    for r in lib.rows:
        if r.method == method and r.chain_k and r.acceptance_length is not None:
            k = r.chain_k
            tau = min(float(r.acceptance_length), k + 1.0)
            out.append((k, tau, float(alpha_from_acceptance_length(tau, k)), r.id))
    return out


@dataclass(frozen=True)
class TreePair:
    """A tree (top-k > 1) and a chain measured on the same model, head, dataset, engine and temperature."""

    tree_id: str
    chain_id: str
    steps: int
    topk: int
    nodes: int  # tokens the tree verifies (SGLang's draft_tokens, root included)
    tree_tau: float
    chain_tau: float  # the chain of the tree's depth (K = steps)
    alpha_gain: float  # i.i.d. per-token alpha of the tree's tau at K = steps minus the chain's


def tree_pairs(lib: AcceptanceLibrary) -> list[TreePair]:
    """Every (tree, chain of its depth) pair the library holds: the seed's lever 4 ("tree candidates raise effective
    acceptance 0.62 -> 0.74") checked on measurements that differ only in the tree."""
    chains = {}
    for r in lib.rows:
        if r.chain_k and r.acceptance_length is not None:
            chains.setdefault((r.model, r.head, r.dataset, r.engine, r.temperature, r.chain_k), r)
    out = []
    for r in lib.rows:
        if r.chain_k or r.acceptance_length is None or not r.tree.startswith("steps="):
            continue
        parts = dict(p.split("=") for p in r.tree.split(","))
        if not all(parts[x].isdigit() for x in ("steps", "topk", "draft_tokens")):
            continue
        steps, topk = int(parts["steps"]), int(parts["topk"])
        c = chains.get((r.model, r.head, r.dataset, r.engine, r.temperature, steps))
        if c is None:
            continue
        t_tau, c_tau = min(float(r.acceptance_length), steps + 1.0), min(float(c.acceptance_length), steps + 1.0)
        gain = float(alpha_from_acceptance_length(t_tau, steps)) - float(alpha_from_acceptance_length(c_tau, steps))
        out.append(TreePair(r.id, c.id, steps, topk, int(parts["draft_tokens"]), t_tau, c_tau, gain))
    return out
