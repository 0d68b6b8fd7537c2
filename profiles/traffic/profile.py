"""The traffic profile: the workload mix (segments), the volume and the arrival shape the planner uses, with the
words that say where each comes from, and the check that every number in it is finite and sane."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from planner import fleet
from profiles.traffic.errors import fail
from profiles.traffic.limits import MAX_TOKENS_PER_REQUEST, SECONDS_PER_MONTH

# Daily shapes for traces shorter than a day (hour of day 0..23; normalised to a mean of 1 where used).
# The daily shapes live with the fleet that uses them (one place): planner.fleet.SHAPES.
SHAPES = fleet.SHAPES
SHAPE_LABELS = fleet.SHAPE_LABELS


@dataclass(frozen=True)
class Segment:
    """One (workload, language) slice of the traffic."""

    workload: str
    language: str
    requests: float  # weighted request count in the file (or per month for a mix table)
    output_token_share: float  # share of all output tokens, 0..1
    mean_prompt_tokens: float
    mean_output_tokens: float


@dataclass(frozen=True)
class HourlyArrivals:
    """Arrivals by hour of day (0..23, UTC or the file's clock) for the fleet: requests/s and the mean prompt
    and output tokens of the requests arriving in that hour. Over a month, sum_h requests_per_s[h] x 3600 x
    mean_output_tokens[h] x 30.44 days is the monthly output volume (exactly when the trace spans whole days).

    source: "trace" (measured per hour; the trace spans a day or more) or the name of a SHAPES entry scaled to
    the trace's mean rate (shorter traces and mix tables with a monthly volume)."""

    requests_per_s: tuple[float, ...]
    mean_prompt_tokens: tuple[float, ...]
    mean_output_tokens: tuple[float, ...]
    source: str
    note: str


@dataclass(frozen=True)
class PrefixReuse:
    """How much of the trace's prompts a prefix cache could serve, from the prompts' block hashes (a Mooncake
    trace's hash_ids): `share` = cached_tokens / prompt_tokens, 0..1; `note` says how it was counted and what it
    assumes (the cache's size); `source` names where it comes from ("Mooncake trace hash_ids")."""

    share: float
    cached_tokens: float
    prompt_tokens: float
    block_tokens: int  # prompt tokens per hash id
    blocks: int  # hash ids counted
    requests: int  # requests counted
    source: str
    note: str


@dataclass(frozen=True)
class TrafficProfile:
    name: str
    kind: Literal["requests", "mix"]
    fmt: str
    segments: tuple[Segment, ...]
    rows: int
    requests: float  # weighted
    output_tokens: float  # weighted total in the file
    span_days: float | None  # first to last timestamp (plus one bucket for aggregated exports)
    monthly_output_tokens: float | None  # extrapolated from the span, or summed from a mix table
    # Request arrival rate per minute bucket (weighted), requests/s: p50, p90, peak. For Little's law.
    arrival_rate_per_s: tuple[float, float, float] | None
    context_tokens_quantiles: tuple[float, float, float, float]  # p10, p50, p90, p99 of prompt+output
    context_hist_edges: tuple[float, ...]
    context_hist_counts: tuple[float, ...]
    per_hour_requests: tuple[float, ...]  # weighted requests by hour of day (UTC), 24 values
    had_prompt_text: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)
    source_format: str = ""  # the recognised export ("Azure LLM inference trace", ...) or how columns matched
    column_map: tuple[tuple[str, str], ...] = ()  # (role, file column) used
    span_s: float | None = None
    monthly_output_tokens_ci95: tuple[float, float] | None = None  # 95 % interval of the monthly volume
    volume_note: str = ""  # where the monthly volume comes from, its span and its uncertainty, in words
    # Measured per hour of day when the trace spans >= 1 day (else None): requests/s and mean lengths.
    hour_requests_per_s: tuple[float, ...] | None = None
    hour_mean_prompt_tokens: tuple[float, ...] | None = None
    hour_mean_output_tokens: tuple[float, ...] | None = None
    # Requests/s per minute from the first timestamp, for traces shorter than a day (else None).
    minute_requests_per_s: tuple[float, ...] | None = None
    time_note: str = ""  # how timestamps were read (unit, time zone, relative)
    workload_note: str = ""  # where each row's workload came from (column, chosen, guessed, mapped, rules)
    prefix_reuse: PrefixReuse | None = None  # prompt tokens a prefix cache could serve (a trace with block hashes)
    # Why arrival_rate_per_s is None for a trace with a span: its timestamps are buckets coarser than a minute.
    arrival_note: str = ""
    language_note: str = ""  # how languages were detected from prompt text (no language column), else ""

    def _shares(self, attr: str) -> dict[str, float]:
        """Output-token share per value of a segment attribute (workload or language)."""
        out: dict[str, float] = {}
        for s in self.segments:
            key = getattr(s, attr)
            out[key] = out.get(key, 0.0) + s.output_token_share
        return out

    @property
    def workload_shares(self) -> dict[str, float]:
        return self._shares("workload")

    @property
    def language_shares(self) -> dict[str, float]:
        return self._shares("language")

    @property
    def spans_a_day(self) -> bool:
        return self.hour_requests_per_s is not None

    def mix_key(self) -> tuple[tuple[str, str, float, float, float], ...]:
        """Hashable summary the planner uses: (workload, language, share, prompt, output) per segment."""
        return tuple((s.workload, s.language, round(s.output_token_share, 6), round(s.mean_prompt_tokens, 1),
                      round(s.mean_output_tokens, 1)) for s in self.segments)

    def concurrency(self, tpot_ms: float, quantile: int = 1) -> float | None:
        """Sequences in flight on one replica whose users see `tpot_ms` per output token, at the minute's arrival
        rate (quantile: 0 p50, 1 p90, 2 peak minute): the fleet's Little's-law fixed point
        (planner.fleet.sequences_in_flight); prefill is left out: the profile knows no model."""
        if self.arrival_rate_per_s is None:
            return None
        mean_out = self.output_tokens / max(self.requests, 1e-12)
        return fleet.sequences_in_flight(requests_per_s=self.arrival_rate_per_s[quantile], output_tokens=mean_out,
                                         tpot_s=tpot_ms / 1e3)

    def hourly_arrivals(self, shape: str = "flat") -> HourlyArrivals | None:
        """Requests/s and mean prompt/output tokens per hour of day (24 values) for the fleet.

        From the trace itself when it spans a day or more (`shape` is then ignored); otherwise the trace's
        mean arrival rate (requests / span; for a mix table, monthly requests / seconds per month) spread
        over the day by SHAPES[shape], normalised so the daily mean rate is unchanged. None when the profile
        has no rate (a mix table of shares only, or every timestamp equal)."""
        mean_p = sum(s.requests * s.mean_prompt_tokens for s in self.segments) / max(self.requests, 1e-12)
        mean_o = self.output_tokens / max(self.requests, 1e-12)
        if self.kind == "mix":
            mean_o = sum(s.requests * s.mean_output_tokens for s in self.segments) / max(self.requests, 1e-12)
        if self.hour_requests_per_s is not None:
            return HourlyArrivals(self.hour_requests_per_s, self.hour_mean_prompt_tokens or (mean_p,) * 24,
                                  self.hour_mean_output_tokens or (mean_o,) * 24, "trace",
                                  f"measured per hour of day over {fmt_span(self.span_s or 0)}")
        if shape not in SHAPES:
            raise ValueError(f"shape={shape!r} not known: one of {', '.join(SHAPES)}")
        if self.kind == "mix":
            if not self.monthly_output_tokens:
                return None
            mean_rate = self.requests / SECONDS_PER_MONTH
            basis = "the mix table's monthly volume"
        else:
            if not self.span_s:
                return None
            mean_rate = self.requests / self.span_s
            basis = f"the trace's mean rate over {fmt_span(self.span_s)}"
        w = np.asarray(SHAPES[shape], float)
        w = w / w.mean()
        return HourlyArrivals(tuple(float(x) for x in mean_rate * w), (mean_p,) * 24, (mean_o,) * 24, shape,
                              f"{basis}, spread over the day as '{SHAPE_LABELS[shape]}' (the file does not "
                              "show a whole day)")

    def minute_arrivals(self) -> tuple[float, ...] | None:
        """Requests/s per minute from the first timestamp (traces shorter than a day), else None."""
        return self.minute_requests_per_s


def single_segment_profile(workload: str, language: str, catalog) -> tuple[tuple[str, str, float, float, float], ...]:
    """The mix key of 'no profile': one workload and language with its typical lengths."""
    w = catalog.workloads[workload]
    return ((workload, language, 1.0, float(w.prompt_tokens), float(w.output_tokens)),)

def fmt_span(s: float) -> str:
    if s < 120:
        return f"{s:,.0f} seconds" if s >= 10 else f"{s:,.1f} seconds"
    if s < 2 * 3600:
        return f"{s / 60:,.0f} minutes"
    if s < 2 * 86400:
        h = s / 3600
        return f"{h:,.0f} hours" if abs(h - round(h)) < 0.05 else f"{h:,.1f} hours"  # "24 hours", not "24.0 hours"
    return f"{s / 86400:,.1f} days"


def fmt_tokens(x: float) -> str:
    """Tokens with a unit: 0.188B, 35.1M, 8.2k, 212."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if x >= scale * 0.1 and (unit != "k" or x >= 1e3):
            return f"{x / scale:,.3g}{unit}"
    return f"{x:,.0f}"



def check_sane(prof: TrafficProfile) -> None:
    """Nothing replaces a good profile unless every number in the new one is finite and plausible."""
    bad: list[str] = []

    def fin(x: float | None, what: str, low: float = 0.0) -> None:
        if x is not None and not (math.isfinite(x) and x >= low):
            bad.append(f"{what} = {x!r}")

    if not prof.segments:
        bad.append("no segment with requests")
    for s in prof.segments:
        fin(s.requests, f"requests of {s.workload}/{s.language}")
        fin(s.output_token_share, f"share of {s.workload}/{s.language}")
        fin(s.mean_prompt_tokens, f"mean prompt tokens of {s.workload}/{s.language}")
        fin(s.mean_output_tokens, f"mean output tokens of {s.workload}/{s.language}")
        if s.mean_output_tokens > MAX_TOKENS_PER_REQUEST or s.mean_prompt_tokens > MAX_TOKENS_PER_REQUEST:
            bad.append(f"mean tokens of {s.workload}/{s.language} above {MAX_TOKENS_PER_REQUEST:,}")
    total = sum(s.output_token_share for s in prof.segments)
    if not abs(total - 1.0) < 1e-6:
        bad.append(f"shares add up to {total!r}")
    fin(prof.requests, "requests")
    fin(prof.output_tokens, "output tokens")
    fin(prof.monthly_output_tokens, "monthly output tokens")
    if prof.prefix_reuse is not None and not 0.0 <= prof.prefix_reuse.share <= 1.0:
        bad.append(f"prefix-reuse share = {prof.prefix_reuse.share!r}")
    for x in (prof.arrival_rate_per_s or ()) + (prof.hour_requests_per_s or ()) + prof.context_tokens_quantiles:
        fin(x, "a rate or context length")
    if bad:
        raise fail("finite, plausible numbers throughout the profile (" + "; ".join(bad[:3]) + ")")
