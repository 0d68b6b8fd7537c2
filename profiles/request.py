"""The one traffic-to-request adapter: a traffic profile (or none) and the volume and daily shape a user gave ->
the planner's PlanRequest. The app's pages, the report and the CLI all build their request here, so they plan
the same traffic.

One rule for the volume: a typed volume overrides the trace's own for everything: the economics, the batch cap and
the fleet (the trace's mix stays, its hourly shape and arrival rates are scaled to the typed volume). Without a
typed volume the trace's own volume is used (a profile without one, a mix table of shares, falls back to the
typed number). `volume_source` says which.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from planner.fleet import DAYS_PER_MONTH, HOURS_PER_DAY, hours_from_arrivals
from planner.plan import PlanRequest, segments_from_mix
from profiles.traffic import TrafficProfile
from profiles.traffic.profile import fmt_tokens

SECONDS_PER_HOUR = 3600.0


def volume_of(profile: TrafficProfile | None, *, volume: float, typed: bool, typed_label: str) -> tuple[float, str]:
    """(monthly output tokens, where they come from): the trace's own volume unless `typed` (or the profile has
    none); `typed_label` names where the typed number comes from ("entered in the sidebar", a CLI flag)."""
    own = None if profile is None else profile.monthly_output_tokens
    if own is None:
        return float(volume), typed_label
    if not typed:
        return float(own), f"traffic profile '{profile.name}'"
    return float(volume), (f"{typed_label}; it replaces the {fmt_tokens(own)} output tokens/month of the traffic "
                           f"profile '{profile.name}', whose mix and hourly shape are kept and scaled to it")


def _scale(profile: TrafficProfile | None, monthly_output_tokens: float) -> float:
    """Typed volume / the trace's own volume (1 when the trace's volume is the one used, or there is none)."""
    own = None if profile is None else profile.monthly_output_tokens
    if not own or own == monthly_output_tokens:
        return 1.0
    return monthly_output_tokens / own


def batch_cap(profile: TrafficProfile | None, *, monthly_output_tokens: float, tpot_slo_ms: float) -> float | None:
    """Sequences in flight at the trace's median minute (TrafficProfile.concurrency, Little's law), its arrival rate
    scaled to the volume planned, at least one; None without a profile or without arrival rates."""
    if profile is None:
        return None
    cap = profile.concurrency(tpot_slo_ms, quantile=0)
    if cap is None:
        return None
    # a sparse trace's median minute may be empty (0 in flight); a server still runs one sequence at a time
    return max(cap * _scale(profile, monthly_output_tokens), 1.0)


def fleet_hours(profile: TrafficProfile | None, *, shape: str | None, monthly_output_tokens: float
                ) -> tuple[tuple, str]:
    """(planner.fleet.HourLoad per hour, where they come from) for the fleet: the trace's own hours when it spans a
    day, else its mean rate spread by `shape` (TrafficProfile.hourly_arrivals), scaled so that the fleet serves
    `monthly_output_tokens` when that is not the trace's own volume. ((), "") without a profile or arrival rates:
    the planner then spreads the monthly volume by the request's daily_shape."""
    arr = None if profile is None else profile.hourly_arrivals(shape or "flat")
    if arr is None:
        return (), ""
    rates = arr.requests_per_s
    note = f"{profile.name}: {arr.note}"
    if _scale(profile, monthly_output_tokens) != 1.0:
        # the fleet's own month (planner.fleet): sum over hours of rate x 3600 s x output tokens, x days per month
        served = sum(r * o for r, o in zip(rates, arr.mean_output_tokens, strict=True)) * SECONDS_PER_HOUR \
            * DAYS_PER_MONTH * (HOURS_PER_DAY / len(rates))
        if served > 0:
            factor = monthly_output_tokens / served
            rates = tuple(r * factor for r in rates)
            note += f"; rates scaled to {monthly_output_tokens / 1e9:,.3g}B output tokens/month (the volume planned)"
    return hours_from_arrivals(rates, arr.mean_prompt_tokens, arr.mean_output_tokens), note


def with_fleet(req: PlanRequest, profile: TrafficProfile | None, *, shape: str | None) -> PlanRequest:
    """`req` with the fleet by hour for its own monthly volume (fleet_hours); `shape` is the daily shape for traces
    shorter than a day and for requests without a trace."""
    hours, source = fleet_hours(profile, shape=shape, monthly_output_tokens=req.monthly_output_tokens)
    return dataclasses.replace(req, daily_shape=shape, hours=hours, hours_source=source)


def prefix_cache_of(profile: TrafficProfile | None, *, share: float | None, label: str) -> tuple[float | None, str]:
    """(prefix-cache share, where it comes from): a share the user gave (`label` says where) overrides the traffic
    profile's (a Mooncake trace's hash_ids, TrafficProfile.prefix_reuse); without either, (None, ""): the planner's
    default 0, every prompt prefilled in full."""
    reuse = None if profile is None else profile.prefix_reuse
    if share is not None:
        if reuse is None:
            return share, label
        return share, (f"{label}; it replaces the {reuse.share * 100:.1f} % from the {reuse.source} of the traffic "
                       f"profile '{profile.name}'")
    if reuse is None:
        return None, ""
    return reuse.share, f"traffic profile '{profile.name}': {reuse.source} ({reuse.note})"


def request_from_traffic(profile: TrafficProfile | None, *, volume: float, volume_typed: bool,
                         volume_label: str, tpot_slo_ms: float, cap_batch: bool = True, fleet: bool = False,
                         shape: str | None = None, prefix_cache_share: float | None = None,
                         prefix_cache_label: str = "entered by the user", **fields: Any) -> PlanRequest:
    """The planner request for `profile` (None: no traffic profile) and the user's inputs.

    volume: the monthly output tokens the user typed (or the caller's default); volume_typed: whether the user typed
    it (then it overrides the trace's own volume); volume_label: where the typed number comes from. cap_batch: cap
    the batch at the traffic's concurrency (batch_cap). fleet: size the fleet by hour (fleet_hours); shape: the
    daily shape (planner.fleet.SHAPES) for traces shorter than a day and requests without a trace.
    prefix_cache_share: the share of prompt tokens served from the prefix cache the user gave (None: the profile's,
    prefix_cache_of), prefix_cache_label: where it comes from. fields: the rest of PlanRequest (model, hardware, tp,
    costs, ...)."""
    monthly, source = volume_of(profile, volume=volume, typed=volume_typed, typed_label=volume_label)
    segments = () if profile is None else segments_from_mix(profile.mix_key())
    cap = batch_cap(profile, monthly_output_tokens=monthly, tpot_slo_ms=tpot_slo_ms) if cap_batch else None
    cache_share, cache_source = prefix_cache_of(profile, share=prefix_cache_share, label=prefix_cache_label)
    req = PlanRequest(tpot_slo_ms=tpot_slo_ms, monthly_output_tokens=monthly, volume_source=source,
                      segments=segments, batch_cap=cap, prefix_cache_share=cache_share,
                      prefix_cache_source=cache_source, **fields)
    return with_fleet(req, profile, shape=shape) if fleet else req
