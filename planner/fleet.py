"""Traffic by hour -> the fleet it needs, with and without speculation, and the month's bill.

Per hour h with arrival rate lambda_h (requests/s), mean output tokens O_h and prompt tokens P_h, one
configuration (a method at its K, or no speculation) on R replicas of `tp` GPUs each (planner.physics.replica, the model
of a replica the CPM search uses too):
    prefill share of a replica's time   rho = (lambda_h / R) * t_prefill(P_h)          (must be < 1)
    TPOT a user sees at decode batch b   TPOT_eff(b) = TPOT(b) / (1 - rho)            (decode gets 1 - rho)
    Little's law (sequences in flight)   b = (lambda_h / R) * O_h * TPOT_eff(b)       (a fixed point in b)
R_h = the fewest replicas whose share lambda_h / R stays within one replica's capacity: the arrival rate that keeps
it full at the largest batch within memory whose TPOT seen at full load meets the SLO (planner.physics.replica; the
batch the CPM search keeps). At least one replica runs every hour (a service stays up).
GPUs_h = R_h * tp. Month: autoscaled GPU-hours = sum_h GPUs_h * days; a fleet sized for the peak pays
max_h GPUs_h * 24 * days. Bills = GPU-hours * $/GPU-hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.physics.replica import replica_load
from planner.physics.ttft import TtftInputs, ttft

DAYS_PER_MONTH = 365.25 / 12.0  # 30.4375: the average Gregorian month (the traffic volumes use it too)
HOURS_PER_DAY = 24
MAX_REPLICAS = 1 << 20
# Disaggregated serving (planner.money.disagg). Without a TTFT SLO a prefill replica is kept at most 80 % busy: the
# M/M/1 wait there is 4 prefills (u / (1 - u)). Planner assumption (2026-12-04).
PREFILL_BUSY_CAP = 0.8
# The KV cache of the whole prompt (the prefix-cached part too: the decode pool holds none of it) moves from the
# prefill replica to the decode replica over one GPU's scale-up link at hardware.yaml's interconnect_gb_s (NVLink 4 on
# H100: 450 GB/s one way), both pools in one NVLink domain; a transfer over RDMA between nodes is slower. Added to
# TTFT, not overlapped with the prefill. Planner assumption (2026-12-04).
SERVING_ASSUMPTIONS = (
    "disaggregated: the prompt's KV cache moves from the prefill to the decode pool over one GPU's interconnect "
    "(hardware.yaml interconnect_gb_s; both pools in one NVLink domain), added to TTFT (planner assumption, "
    "2026-12-04)",
    f"disaggregated without a TTFT SLO: a prefill replica is kept at most {PREFILL_BUSY_CAP:.0%} busy (planner "
    "assumption, 2026-12-04)",
    "disaggregated: the best method's decode pool runs, each hour, the K its own deployment's schedule (K per batch "
    "size at the decode pool's TP, its CPM crossings from the co-located step model) gives at that hour's batch per "
    "decode replica (planner assumption, 2026-12-05)",
    "disaggregated: the saving has no Monte Carlo or alpha-range band (both draw co-located fleets)",
)


@dataclass(frozen=True)
class HourLoad:
    """One hour of the day (or one slot of a short trace): its arrival rate and mean lengths."""

    hour: int  # 0-23 (slot index for shorter traces)
    requests_per_s: float
    prompt_tokens: float
    output_tokens: float


@dataclass(frozen=True)
class FleetHour:
    hour: int
    requests_per_s: float
    prompt_tokens: float  # mean per request arriving in this hour
    output_tokens: float
    replicas: int
    gpus: int
    batch: float  # sequences in flight per replica at the fixed point
    tpot_ms: float  # TPOT a user sees, prefill interference included
    prefill_share: float
    feasible: bool  # False: no number of replicas meets the SLO (e.g. the configuration misses it at batch 1)
    # one replica kept full under the SLO (planner.physics.replica); replicas = ceil
    capacity_requests_per_s: float = 0.0
    # the K this hour ran (planner.money.kday: the deployment's K at this hour's batch; 0: no drafts)
    k: int | None = None
    ttft_ms: float = math.nan  # mean time to first token at this hour's load (planner.physics.ttft; nan: not computed)


@dataclass(frozen=True)
class FleetPlan:
    """One configuration's fleet over the day and its month."""

    method: str
    label: str
    k: int
    hours: tuple[FleetHour, ...]
    peak_gpus: int
    gpu_hours_per_month_autoscaled: float
    gpu_hours_per_month_fixed: float
    usd_per_month_autoscaled: float
    usd_per_month_fixed: float
    feasible: bool


@dataclass(frozen=True)
class Fleet:
    """No speculation and every feasible method, hour by hour; the shape's source is stated."""

    configs: tuple[FleetPlan, ...]
    shape_source: str
    usd_per_gpu_hour: float
    tp: int

    def config(self, method: str) -> FleetPlan:
        for c in self.configs:
            if c.method == method:
                return c
        raise KeyError(method)


# Relative arrival rate per hour of day (planner assumptions, 2026-11-30); normalised to mean 1 where used.
SHAPES: dict[str, tuple[float, ...]] = {
    "flat": (1.0,) * 24,
    # 09:00-18:00 busy, a shoulder either side, a quarter of the load at night
    "business_hours": (0.25,) * 7 + (0.6, 0.9) + (1.0,) * 9 + (0.8, 0.6, 0.45, 0.35, 0.3, 0.25),
    # consumer chat: low before dawn, an evening peak at 20:00-22:00
    "consumer_evening": (0.45, 0.35, 0.25, 0.2, 0.2, 0.25, 0.35, 0.5, 0.65, 0.75, 0.8, 0.85, 0.9, 0.9, 0.9,
                         0.9, 0.95, 1.0, 1.1, 1.25, 1.4, 1.45, 1.2, 0.8),
}
SHAPE_LABELS = {"flat": "flat (the same every hour)", "business_hours": "business hours (09:00-18:00 peak)",
                "consumer_evening": "consumer (evening peak)"}


def gpu_hours_per_month(gpus_by_slot, *, billing: str):
    """A month's GPU-hours from the GPUs in each slot of a day (the last axis: equal slots covering 24 hours, a trace's
    shorter slots scaled to a day): "autoscaled" pays each slot's GPUs (mean GPUs x 24 h x days), "fixed" the busiest
    slot's all month (peak GPUs x 24 h x days). Scalars or arrays over the leading axes."""
    g = np.asarray(gpus_by_slot, float)
    per_hour = g.max(axis=-1) if billing == "fixed" else g.sum(axis=-1) / g.shape[-1]
    return per_hour * HOURS_PER_DAY * DAYS_PER_MONTH


def monthly_bill_usd(gpus_by_slot, *, billing: str, usd_per_gpu_hour):
    """The month's bill: gpu_hours_per_month x $/GPU-hour (broadcast over the leading axes)."""
    return gpu_hours_per_month(gpus_by_slot, billing=billing) * np.asarray(usd_per_gpu_hour, float)


def daily_shape(name: str) -> np.ndarray:
    """Relative arrival rate per hour of day, mean 1 (SHAPES)."""
    if name not in SHAPES:
        raise ValueError(f"daily shape {name!r} is not allowed: one of {', '.join(SHAPES)}")
    w = np.asarray(SHAPES[name], float)
    return w / w.mean()


def hours_from_arrivals(requests_per_s: Sequence[float], prompt_tokens: Sequence[float],
                        output_tokens: Sequence[float]) -> tuple[HourLoad, ...]:
    """Per-hour arrival rates and mean lengths (a traffic profile's hourly_arrivals) -> HourLoad records."""
    return tuple(HourLoad(h, float(r), float(p), float(o)) for h, (r, p, o) in enumerate(
        zip(requests_per_s, prompt_tokens, output_tokens, strict=True)))


def hours_from_volume(monthly_output_tokens: float, prompt_tokens: float, output_tokens: float,
                      shape: str = "flat") -> tuple[HourLoad, ...]:
    """A day of hours from a monthly output-token volume and mean lengths, spread by a named daily shape."""
    if not (output_tokens > 0):
        raise ValueError(f"output_tokens={output_tokens!r} must be > 0")
    mean_rate = monthly_output_tokens / output_tokens / (DAYS_PER_MONTH * HOURS_PER_DAY * 3600.0)
    return tuple(HourLoad(h, float(mean_rate * w), float(prompt_tokens), float(output_tokens))
                 for h, w in enumerate(daily_shape(shape)))


def sequences_in_flight(*, requests_per_s, output_tokens, tpot_s):
    """Little's law: sequences in flight = arrival rate x time in system, the time in system being output tokens x
    the TPOT users see (decode dominates). Scalars or broadcast arrays; the fixed point in `replicas_for` and a
    traffic profile's concurrency both use it."""
    return requests_per_s * output_tokens * tpot_s


def replicas_for(*, requests_per_s: np.ndarray, output_tokens: np.ndarray, prefill_s: np.ndarray,
                 tpot_s: np.ndarray, max_batch: np.ndarray, slo_s: float) -> tuple[np.ndarray, np.ndarray,
                                                                                   np.ndarray, np.ndarray]:
    """Per hour: (replicas, batch at the fixed point, TPOT seen, prefill share), vectorised over hours
    (replicas_and_capacity without the capacity)."""
    return replicas_and_capacity(requests_per_s=requests_per_s, output_tokens=output_tokens, prefill_s=prefill_s,
                                 tpot_s=tpot_s, max_batch=max_batch, slo_s=slo_s)[:4]


def replicas_and_capacity(*, requests_per_s: np.ndarray, output_tokens: np.ndarray, prefill_s: np.ndarray,
                          tpot_s: np.ndarray, max_batch: np.ndarray, slo_s: float,
                          capacity: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Per hour: (replicas, batch at the fixed point, TPOT seen, prefill share, one replica's capacity in
    requests/s), vectorised over hours.

    tpot_s: (H, B) decode TPOT at batch 1..B per replica (non-decreasing in batch); max_batch: (H,) memory limit;
    requests_per_s, output_tokens, prefill_s: (H,). Replicas 0 mean infeasible (no R meets the SLO).

    One replica's capacity is the arrival rate that keeps it full at b_lim, the largest integer batch within memory
    whose TPOT seen at full load meets the SLO (planner.physics.replica: the batch the CPM search keeps); R_h = the
    fewest replicas with lambda_h / R <= that capacity (at least one). At that load the fixed point b* <= b_lim and its
    TPOT seen t(b*) / (1 - rho) <= t(b_lim) / (1 - rho_full) <= SLO (rho <= rho_full).

    B may stop below max_batch once B >= lambda_h * O_h * SLO for every hour: at batch B a full replica serves
    B / (O TPOT seen) >= B / (O SLO) >= lambda_h requests/s, so one replica holds the hour, as with the whole
    curve; `capacity` (H,) then gives the true capacity past B where the caller found it (NaN: the curve's)."""
    lam = np.asarray(requests_per_s, float)
    out = np.asarray(output_tokens, float)
    _check_curve_length(lam, out, max_batch, np.shape(tpot_s)[1], slo_s)
    cap = replica_capacity(output_tokens=out, prefill_s=prefill_s, tpot_s=tpot_s, max_batch=max_batch, slo_s=slo_s,
                           capacity=capacity)
    return _replicas_at_capacity(lam, out, np.asarray(prefill_s, float), np.asarray(tpot_s, float), cap, slo_s)


def _check_curve_length(lam: np.ndarray, out: np.ndarray, max_batch, bmax: int, slo_s: float) -> None:
    short = (np.asarray(max_batch, float) > bmax) & (lam * out * slo_s > bmax)
    if np.any(short):
        raise ValueError(f"tpot_s covers batches 1..{bmax}; hours {np.flatnonzero(short).tolist()} need the curve up "
                         "to min(max_batch, requests_per_s * output_tokens * slo_s)")


def replica_capacity(*, output_tokens: np.ndarray, prefill_s: np.ndarray, tpot_s: np.ndarray, max_batch: np.ndarray,
                     slo_s: float, capacity: np.ndarray | None = None, ttft_in: TtftInputs | None = None
                     ) -> np.ndarray:
    """Per row (an hour's lengths and TPOT curve): one replica's capacity in requests/s, the arrival rate that keeps
    it full at b_lim (replicas_and_capacity); 0 where no batch meets the SLO. ttft_in: the rows' TTFT inputs
    (planner.physics.ttft.TtftInputs.rows); with a TTFT SLO, b_lim is also the last batch before the TTFT at full load
    breaks it (TTFT grows with the batch: the arrival rate, the step and the chunks a prompt rides all do)."""
    out = np.asarray(output_tokens, float)
    pre = np.asarray(prefill_s, float)
    tp = np.asarray(tpot_s, float)
    h, bmax = tp.shape
    batches = np.arange(1, bmax + 1, dtype=float)
    mb = np.minimum(np.asarray(max_batch, float), bmax)
    full = replica_load(tpot_s=tp, batch=batches[None, :], prefill_s=pre[:, None], output_tokens=out[:, None])
    # the TPOT seen at full load grows with the batch (decode TPOT does, and so does b t_p / O): 1..b_lim allowed
    allowed = (full.tpot_seen_s <= slo_s) & (batches[None, :] <= mb[:, None])
    if ttft_in is not None and ttft_in.slo_ms is not None:
        t = ttft(requests_per_s=full.requests_per_s, prefill_s=np.asarray(ttft_in.prefill_s, float)[:, None],
                 new_prompt_tokens=np.asarray(ttft_in.new_prompt_tokens, float)[:, None],
                 step_s=tp * np.asarray(ttft_in.step_factor, float)[:, None], batch=batches[None, :],
                 tokens_per_seq=np.asarray(ttft_in.tokens_per_seq, float)[:, None],
                 batched_tokens=ttft_in.batched_tokens)
        allowed &= np.logical_and.accumulate(t.ttft_s * 1e3 <= ttft_in.slo_ms, axis=1)
    b_lim = allowed.sum(axis=1)
    cap = np.where(b_lim >= 1, full.requests_per_s[np.arange(h), np.maximum(b_lim, 1) - 1], 0.0)
    if capacity is not None:  # the capacity past the curve's end, where the caller found it (NaN: the curve's)
        cap = np.where(np.isfinite(capacity), capacity, cap)
    return cap


def hour_ttft_ms(ttft_in: TtftInputs, *, replicas: np.ndarray, requests_per_s: np.ndarray, batch: np.ndarray,
                 tpot_seen_s: np.ndarray, prefill_share: np.ndarray) -> np.ndarray:
    """Per row: the mean TTFT (ms) at R replicas' fixed point (batch, TPOT seen, prefill share: _replicas_at_capacity):
    the decode TPOT there is TPOT seen x (1 - prefill share); nan where the row is infeasible or idle."""
    r = np.asarray(replicas, float)
    lam_r = np.asarray(requests_per_s, float) / np.maximum(r, 1.0)
    seen = np.asarray(tpot_seen_s, float)
    decode = np.nan_to_num(seen, nan=0.0) * (1.0 - np.nan_to_num(np.asarray(prefill_share, float), nan=0.0))
    t = ttft(requests_per_s=lam_r, prefill_s=ttft_in.prefill_s, new_prompt_tokens=ttft_in.new_prompt_tokens,
             step_s=decode * ttft_in.step_factor, batch=np.maximum(np.asarray(batch, float), 1.0),
             tokens_per_seq=ttft_in.tokens_per_seq, batched_tokens=ttft_in.batched_tokens)
    return np.where((r > 0) & (lam_r > 0) & np.isfinite(seen), t.ttft_s * 1e3, np.nan)


def _replicas_at_capacity(lam: np.ndarray, out: np.ndarray, pre: np.ndarray, tp: np.ndarray, cap: np.ndarray,
                          slo_s: float) -> tuple[np.ndarray, ...]:
    """replicas_and_capacity's answer per row from one replica's capacity `cap`: the fewest replicas, and the fixed
    point on the TPOT curve `tp` (rows, B) at that load."""
    bmax = tp.shape[1]
    batches = np.arange(1, bmax + 1, dtype=float)
    feasible = (cap > 0) | (lam == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.ceil(lam / np.where(cap > 0, cap, 1.0) * (1.0 - 1e-12))
    r = np.where(feasible, np.clip(need, 1.0, MAX_REPLICAS), 0.0)
    lam_r = lam / np.maximum(r, 1.0)
    on = np.where(feasible, lam_r, 0.0)
    # the fixed point lies near lambda_r * O * SLO when its TPOT seen meets the SLO: it is looked for on the curve up
    # to there, and on the whole curve for the rows where it is not found (the first batch that holds, either way)
    m = int(min(bmax, max(1, math.ceil(float(np.max(lam_r * out, initial=0.0)) * slo_s) + 2)))
    b_star, seen, rho = _fixed_point(lam_r, on, out, pre, tp[:, :m], batches[:m])
    past = np.isnan(b_star) if m < bmax else np.zeros(len(lam), bool)
    if past.any():
        b_star[past], seen[past], _ = _fixed_point(lam_r[past], on[past], out[past], pre[past], tp[past], batches)
    # a fractional fixed point reads better than an integer ceiling at low load: interpolate lambda_r * O * TPOT
    b_frac = np.minimum(b_star, (lam_r * out) * seen)
    return (r.astype(int), np.where(lam > 0, b_frac, 0.0), np.where(lam > 0, seen, np.nan), rho, cap)


def _fixed_point(lam_r: np.ndarray, on: np.ndarray, out: np.ndarray, pre: np.ndarray, tp: np.ndarray,
                 batches: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row at R replicas: (the smallest batch b with lambda_r * O * TPOT_eff(b) <= b on the curve `tp`, NaN when
    none; the TPOT seen there, at batch 1 when none; the prefill share) with `on` requests/s arriving per replica."""
    load = replica_load(tpot_s=tp, batch=batches[None, :], prefill_s=pre[:, None], output_tokens=out[:, None],
                        requests_per_s=on[:, None])
    eff = load.tpot_seen_s
    fixed = sequences_in_flight(requests_per_s=lam_r[:, None], output_tokens=out[:, None], tpot_s=eff) <= batches
    b_star = np.where(fixed.any(axis=1), np.argmax(fixed, axis=1) + 1.0, np.nan)
    b_idx = np.nan_to_num(b_star, nan=1.0).astype(int) - 1
    return b_star, eff[np.arange(len(b_idx)), b_idx], load.prefill_share[:, 0]


def fleet_for_configs(*, configs: Sequence[tuple[str, str, int]], tpot_s: np.ndarray, max_batch: np.ndarray,
                      prefill_s: np.ndarray, hours: Sequence[HourLoad], tp: int, usd_per_gpu_hour: float,
                      slo_ms: float, shape_source: str, slot_hours: float = 1.0,
                      capacity_requests_per_s: np.ndarray | None = None, curve_of_hour: np.ndarray | None = None,
                      ttft_inputs: TtftInputs | None = None) -> Fleet:
    """configs: (method, label, K) per configuration; tpot_s: (C, H, B) decode TPOT per replica at batch 1..B;
    max_batch: (C, H); prefill_s: (H,) prefill GPU-seconds per request on one replica. slot_hours: length of one
    slot (1 for hours of a day; a short trace's slots are shorter and are scaled to a day). curve_of_hour: (H,)
    when tpot_s, max_batch and capacity_requests_per_s are given per distinct curve (C, U, ...) instead of per
    hour, the curve each hour uses. ttft_inputs: per configuration and hour (planner.physics.ttft.TtftInputs): each
    hour's TTFT is stated, and with its SLO a replica's capacity is also bounded by it (more replicas until both
    hold)."""
    lam = np.array([h.requests_per_s for h in hours])
    out = np.array([h.output_tokens for h in hours])
    n_c, n_h = len(configs), len(hours)
    pre = np.broadcast_to(np.asarray(prefill_s, float), (n_h,))
    curve = np.arange(n_h) if curve_of_hour is None else np.asarray(curve_of_hour, int).reshape(n_h)
    tpot = np.asarray(tpot_s, float)[:n_c]
    mb = np.asarray(max_batch, float)[:n_c]
    given = (None if capacity_requests_per_s is None
             else np.asarray(capacity_requests_per_s, float).reshape(n_c, tpot.shape[1]))
    slo_s = slo_ms / 1e3
    _check_curve_length(np.tile(lam, n_c), np.tile(out, n_c), mb[:, curve].reshape(-1), tpot.shape[-1], slo_s)
    # replicas_and_capacity, computed once per distinct set of inputs and copied back to the hours: one replica's
    # capacity depends on a curve and the hour's lengths, the replicas also on its rate (a daily shape repeats its
    # rates; plan_fleet hands one curve per distinct lengths); every configuration's rows in one vectorised call
    k_first, k_of = _distinct(out, pre, curve)
    u, u_of = _distinct(lam, out, pre, curve)
    kc, cu, n_k, n_u = curve[k_first], curve[u], len(k_first), len(u)
    rows_c = np.repeat(np.arange(n_c), n_k)
    cap = replica_capacity(output_tokens=np.tile(out[k_first], n_c), prefill_s=np.tile(pre[k_first], n_c),
                           tpot_s=tpot[:, kc].reshape(n_c * n_k, -1), max_batch=mb[:, kc].reshape(n_c * n_k),
                           slo_s=slo_s, capacity=None if given is None else given[:, kc].reshape(-1),
                           ttft_in=None if ttft_inputs is None else ttft_inputs.rows(rows_c, np.tile(k_first, n_c)))
    r_all, b_all, t_all, rho_all, cap_all = (a.reshape(n_c, n_u)[:, u_of] for a in _replicas_at_capacity(
        np.tile(lam[u], n_c), np.tile(out[u], n_c), np.tile(pre[u], n_c), tpot[:, cu].reshape(n_c * n_u, -1),
        cap.reshape(n_c, n_k)[:, k_of[u]].reshape(-1), slo_s))
    ttft_all = (np.full((n_c, n_h), np.nan) if ttft_inputs is None else hour_ttft_ms(
        ttft_inputs.rows(np.repeat(np.arange(n_c), n_h), np.tile(np.arange(n_h), n_c)), replicas=r_all.reshape(-1),
        requests_per_s=np.tile(lam, n_c), batch=b_all.reshape(-1), tpot_seen_s=t_all.reshape(-1),
        prefill_share=rho_all.reshape(-1)).reshape(n_c, n_h))
    plans = []
    for c, (method, label, k) in enumerate(configs):
        r, b, t, rho, cap = r_all[c], b_all[c], t_all[c], rho_all[c], cap_all[c]
        feasible = bool(np.all(r > 0))
        gpus = r * tp
        hrs = tuple(FleetHour(hr.hour, float(hr.requests_per_s), float(hr.prompt_tokens), float(hr.output_tokens),
                              ri, gi, bi, ti * 1e3 if math.isfinite(ti) else math.nan, rhoi, ri > 0, ci, k, fi)
                    for hr, ri, gi, bi, ti, rhoi, ci, fi in zip(hours, r.tolist(), gpus.tolist(), b.tolist(),
                                                                 t.tolist(), rho.tolist(), cap.tolist(),
                                                                 ttft_all[c].tolist(), strict=True))
        # a day is len(hours) slots of slot_hours each, repeated to fill 24 hours
        auto = float(gpu_hours_per_month(gpus, billing="autoscaled"))
        peak = int(gpus.max()) if len(gpus) else 0
        fixed = float(gpu_hours_per_month(gpus, billing="fixed")) if len(gpus) else 0.0
        plans.append(FleetPlan(method, label, k, hrs, peak, auto, fixed, auto * usd_per_gpu_hour,
                               fixed * usd_per_gpu_hour, feasible))
    return Fleet(tuple(plans), shape_source, usd_per_gpu_hour, tp)



def _distinct(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first row of each distinct set of values, each row's set) over columns of equal length (a NaN matches
    nothing: its row stands alone)."""
    sets: dict[tuple, int] = {}
    first, of = [], []
    for i, key in enumerate(zip(*(np.asarray(c).tolist() for c in cols), strict=True)):
        if key not in sets:
            sets[key] = len(first)
            first.append(i)
        of.append(sets[key])
    return np.array(first, int), np.array(of, int)
