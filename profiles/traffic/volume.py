"""Volume and daily shape of a per-request trace: streaming accumulators over the validated batches, then the
monthly volume with its 95 % interval and the words that say what it rests on, the arrival rate per minute, the
hours of the day (measured when the trace spans a day), and the context-length quantiles."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from profiles.traffic.errors import fail, listing
from profiles.traffic.limits import DAYS_PER_MONTH, SECONDS_PER_MONTH, Z95
from profiles.traffic.profile import Segment, TrafficProfile, check_sane, fmt_span, fmt_tokens

DAY_S = 86400.0
# A day of per-request timestamps ends at its last request, before midnight by about one gap between requests
# (the shipped one-day samples, profiles/samples/make_samples.py, end 33 s, 105 s and 220 s short of 24 h): a trace
# within 5 minutes of 24 hours is a day, not "24.0 hours, less than a day".
DAY_TOLERANCE_S = 300.0


class RequestAccumulator:
    """Streaming accumulators: per-segment and per-hour sums, a fine context histogram, and three compact
    per-row arrays (start time, requests, output tokens) for the time bins."""

    # Fine log bins for context lengths: width 1 below ~60 tokens, 1.7 % wide above (quantiles to +-0.9 %).
    EDGES = np.unique(np.concatenate([np.arange(0, 64), np.geomspace(64, 2.0 * 2**21, 600).round()]))

    def __init__(self, nseg: int):
        self.seg = np.zeros((3, nseg))  # requests, prompt tokens, output tokens
        self.hour = np.zeros((3, 24))
        self.ctx = np.zeros(len(self.EDGES) - 1)
        self.ctx_max = 0.0
        self.var = 0.0
        self.secs: list[np.ndarray] = []
        self.w: list[np.ndarray] = []
        self.wo: list[np.ndarray] = []
        self.keep_secs: list[np.ndarray] = []
        self.end_widths: list[np.ndarray] = []
        self.rows = 0

    def add(self, key: np.ndarray, secs: np.ndarray, w: np.ndarray, wp: np.ndarray, wo: np.ndarray,
            keep: np.ndarray, var: np.ndarray) -> None:
        nseg = self.seg.shape[1]
        for i, x in enumerate((w, wp, wo)):
            self.seg[i] += np.bincount(key, weights=x, minlength=nseg)
        hod = ((secs % 86400) // 3600).astype(np.int64)
        for i, x in enumerate((w, wp, wo)):
            self.hour[i] += np.bincount(hod, weights=x, minlength=24)
        with np.errstate(divide="ignore", invalid="ignore"):
            ctx = np.where(w > 0, (wp + wo) / np.where(w > 0, w, 1.0), 0.0)
        self.ctx += np.histogram(np.clip(ctx[keep], 0, self.EDGES[-1] - 1), bins=self.EDGES, weights=w[keep])[0]
        if keep.any():
            self.ctx_max = max(self.ctx_max, float(ctx[keep].max()))
        self.var += float(var.sum())
        self.secs.append(secs)
        self.w.append(w.astype(np.float32))
        self.wo.append(wo.astype(np.float32))
        self.keep_secs.append(secs[keep])
        self.rows += len(secs)

    def context_stats(self) -> tuple[tuple[float, float, float, float], tuple[float, ...], tuple[float, ...]]:
        """p10/p50/p90/p99 of prompt + output tokens per request (request-weighted, interpolated in the fine
        bins) and a 24-bin log histogram for display."""
        tot = self.ctx.sum()
        if not tot > 0:
            return (0.0, 0.0, 0.0, 0.0), (1.0, 2.0), (0.0,)
        cum = np.concatenate([[0.0], np.cumsum(self.ctx)]) / tot
        qs = tuple(float(np.interp(q, cum, self.EDGES)) for q in (0.10, 0.50, 0.90, 0.99))
        qs = tuple(min(q, self.ctx_max) for q in qs)
        hi = max(self.ctx_max, 2.0)
        edges = np.unique(np.geomspace(1.0, hi * 1.0001, 25).round())
        # re-bin the fine histogram onto the display edges (by fine-bin lower edge)
        which = np.clip(np.searchsorted(edges, self.EDGES[:-1], side="right") - 1, 0, len(edges) - 2)
        counts = np.bincount(which, weights=self.ctx, minlength=len(edges) - 1)[: len(edges) - 1]
        return qs, tuple(float(e) for e in edges), tuple(float(x) for x in counts)



def finish_requests(name, src, info, acc: RequestAccumulator, valid_wl, valid_lang, totals, tstate, wstate, use, roles,
                     rule_cols, *, language_note: str = "") -> TrafficProfile:
    L = len(valid_lang)
    seg_w, seg_wp, seg_wo = acc.seg
    total_out = float(seg_wo.sum())
    total_req = float(seg_w.sum())
    n = acc.rows
    if not total_out > 0:
        raise fail("some output tokens (every row has 0)", column=roles["output_tokens"], value=0)
    order = sorted(range(len(seg_w)), key=lambda k: (valid_wl[k // L], valid_lang[k % L]))
    segments = tuple(
        Segment(workload=valid_wl[k // L], language=valid_lang[k % L], requests=float(seg_w[k]),
                output_token_share=float(seg_wo[k] / total_out), mean_prompt_tokens=float(seg_wp[k] / seg_w[k]),
                mean_output_tokens=float(seg_wo[k] / seg_w[k]))
        for k in order if seg_w[k] > 0)
    secs = np.concatenate(acc.secs)
    acc.secs.clear()
    keep_secs = np.concatenate(acc.keep_secs)
    acc.keep_secs.clear()
    ts = keep_secs if keep_secs.size else secs
    t0, t1 = float(ts.min()), float(ts.max())
    del keep_secs, ts
    # time span: first to last request (aggregated exports and rows counted per bucket: plus one bucket)
    bucket_s = 0.0
    if totals:
        if acc.end_widths and sum(len(x) for x in acc.end_widths):
            bucket_s = float(np.median(np.concatenate(acc.end_widths)))
        else:
            uniq = np.unique(secs)
            bucket_s = float(np.diff(uniq).min()) if uniq.size > 1 else 0.0
        bucket_s = max(bucket_s, 0.0)
    else:
        bucket_s = coarse_bucket_s(secs, weighted="weight" in roles)
        bucket_s = bucket_s if bucket_s > 60 else 0.0  # minute buckets: their minutes are measured as requests
    coarse_s = bucket_s if bucket_s > 60 else 0.0
    span_s = t1 - t0 + bucket_s
    warnings: list[str] = list(src.notes)
    wl_note = wstate.note()
    if "counted as" in wl_note:
        warnings.append(wl_note[0].upper() + wl_note[1:] + ".")
    rel = None
    minute_rates = None
    hour_rate = hour_p = hour_o = None
    rate = None
    arrival_note = ""
    monthly = ci = None
    if span_s > 0:
        w = np.concatenate(acc.w)
        acc.w.clear()
        monthly = total_out / span_s * SECONDS_PER_MONTH
        # 95 % interval: the larger of (a) compound-Poisson noise in the token total (acc.var) and (b) the
        # spread between the totals of equal time bins (minutes; days once the trace spans 2+ days), which
        # also catches bursts. Neither covers what the file did not see (other hours, other weeks).
        rel_p = math.sqrt(acc.var) / total_out
        bin_s = 86400.0 if span_s >= 2 * 86400 else 60.0
        nbins = int(span_s // bin_s)
        rel_b = 0.0
        if nbins >= 2:
            wo = np.concatenate(acc.wo)
            acc.wo.clear()
            b = np.minimum(((secs - t0) // bin_s).astype(np.int64), nbins - 1)
            tot = np.bincount(b, weights=wo, minlength=nbins)[:nbins]
            del b, wo
            if tot.mean() > 0:
                rel_b = float(tot.std(ddof=1) / tot.mean() / math.sqrt(nbins))
        rel = max(rel_p, rel_b)
        ci = (max(0.0, monthly * (1 - Z95 * rel)), monthly * (1 + Z95 * rel))
        # arrival rate per minute (Little's law): whole minutes; a trace under a minute is one bin
        bin_r = 60.0 if span_s >= 60 else span_s
        if bucket_s > bin_r:
            bin_r = bucket_s  # an aggregated export's requests sit at the start of their bucket
        nb = max(int(span_s // bin_r), 1)
        b = np.minimum(((secs - t0) // bin_r).astype(np.int64), nb - 1)
        per_bin = np.bincount(b, weights=w, minlength=nb)[:nb] / bin_r
        del b, w
        if coarse_s > 60:
            # requests counted per hour (or day ...) show no minute: a median or peak minute would be the bucket's
            # average, and the concurrency Little's law gives from it an understatement of unknown size
            arrival_note = (f"Concurrency unknown: the file counts requests per {bucket_words(coarse_s)} (every "
                            "timestamp on a bucket boundary), so arrivals within a minute cannot be seen; the batch "
                            "is not capped at the traffic's concurrency.")
            warnings.append(arrival_note)
        else:
            rate = (float(np.quantile(per_bin, 0.5)), float(np.quantile(per_bin, 0.9)), float(per_bin.max()))
        if span_s < DAY_S - DAY_TOLERANCE_S:
            if coarse_s <= 60:  # a bucketed file has no minutes to draw
                minute_rates = (tuple(float(x) for x in per_bin) if bin_r == 60.0
                                else (float(per_bin[0]),) if nb == 1 and not totals else None)
        elif bucket_s <= 3600:
            # per hour of day, measured: requests / seconds of that hour the trace covers
            req_h, p_h, o_h = acc.hour
            expo = _hour_exposure(t0, t0 + span_s)
            hour_rate = tuple(float(r / e) if e > 0 else 0.0 for r, e in zip(req_h, expo, strict=True))
            mp, mo = float(seg_wp.sum() / total_req), total_out / total_req
            hour_p = tuple(float(p / r) if r > 0 else mp for p, r in zip(p_h, req_h, strict=True))
            hour_o = tuple(float(o / r) if r > 0 else mo for o, r in zip(o_h, req_h, strict=True))
        else:
            warnings.append(f"Time buckets of {fmt_span(bucket_s)}: too coarse for a daily shape; pick one below.")
    del secs
    qs, edges, counts = acc.context_stats()
    # the volume, in words
    relative = bool(tstate.relative)
    fmt_t = "%Y-%m-%d %H:%M:%S" if span_s < 7200 else "%Y-%m-%d %H:%M"
    when = "" if relative else (
        f" ({pd.Timestamp(t0, unit='s', tz='UTC').strftime(fmt_t)} to "
        f"{pd.Timestamp(t1 + bucket_s, unit='s', tz='UTC').strftime(fmt_t)} UTC)")
    if monthly is not None:
        assert ci is not None and rel is not None
        volume_note = (
            f"{fmt_tokens(monthly)} output tokens/month: {total_req:,.0f} requests and {fmt_tokens(total_out)} "
            f"output tokens in {fmt_span(span_s)}{when}, scaled to an average month ({DAYS_PER_MONTH:.2f} days); "
            f"95 % interval {fmt_tokens(ci[0])} to {fmt_tokens(ci[1])} (\u00b1{Z95 * rel * 100:.1f} %, "
            f"Poisson noise and the spread between {'days' if span_s >= 2 * 86400 else 'minutes'}).")
        if span_s < DAY_S - DAY_TOLERANCE_S:
            volume_note += (f" The trace covers {fmt_span(span_s)}, less than a day: the month is assumed to look "
                            "like this stretch, and other hours of the day may differ.")
        elif span_s < 7 * 86400:
            volume_note += " The trace covers less than a week: weekdays and weekends may differ."
    else:
        volume_note = (f"No monthly volume: all {n:,} rows have the same timestamp, so the file has no time span to "
                       "scale. Enter the monthly volume on the Plan page.")
        warnings.append(volume_note)
    had_text = "prompt_text" in roles
    if had_text:
        warnings.append(f"Prompt text was used only for {'language detection and ' if language_note else ''}"
                        "workload rules (if any) and not kept: the planner keeps token counts only.")
    used = set(use)
    extra = [c for c in info.columns if c not in used and c != roles.get("prompt_text")]
    if extra:
        warnings.append(f"Columns not used: {listing(extra, 10)}.")
    prof = TrafficProfile(
        name=name, kind="requests", fmt=src.fmt, segments=segments, rows=n, requests=total_req,
        output_tokens=total_out, span_days=span_s / 86400.0 if span_s > 0 else None, monthly_output_tokens=monthly,
        arrival_rate_per_s=rate, context_tokens_quantiles=qs, context_hist_edges=edges, context_hist_counts=counts,
        per_hour_requests=tuple(float(x) for x in acc.hour[0]), had_prompt_text=had_text,
        warnings=tuple(warnings), source_format=info.format_label, column_map=info.mapping,
        span_s=span_s if span_s > 0 else None, monthly_output_tokens_ci95=ci, volume_note=volume_note,
        hour_requests_per_s=hour_rate, hour_mean_prompt_tokens=hour_p, hour_mean_output_tokens=hour_o,
        minute_requests_per_s=minute_rates, time_note=tstate.note, workload_note=wl_note, arrival_note=arrival_note,
        language_note=language_note,
        prefix_reuse=src.prefix_reuse,
    )
    check_sane(prof)
    return prof


# Bucket widths of aggregated exports (minute, 5/10/15/30 minutes, hour, day), widest first.
BUCKET_WIDTHS_S = (86400.0, 3600.0, 1800.0, 900.0, 600.0, 300.0, 60.0)
MIN_BUCKETS = 3


def coarse_bucket_s(secs: np.ndarray, *, weighted: bool) -> float:
    """The width of the time buckets a per-row file counts requests in, or 0 when its timestamps are per request:
    every timestamp a whole number of one of BUCKET_WIDTHS_S after the first (from the first, not from midnight
    UTC: a day bucket in another time zone starts at another hour) and the rows are counts (a weight column) or
    share their timestamps (at least two rows per distinct timestamp on average). A per-request log truncated to
    the minute is a minute bucket: its minutes are still measured. Fewer than MIN_BUCKETS distinct timestamps
    say nothing either way (two sampled requests an hour apart)."""
    if secs.size < 2:
        return 0.0
    t = secs - secs.min()
    if not np.all(np.mod(t, BUCKET_WIDTHS_S[-1]) == 0):  # one vectorised pass rejects a per-request trace
        return 0.0
    t = np.unique(t)
    if t.size < MIN_BUCKETS or not (weighted or secs.size >= 2 * t.size):
        return 0.0
    for width in BUCKET_WIDTHS_S:
        if np.all(np.mod(t, width) == 0):
            return width
    return 0.0


def bucket_words(width_s: float) -> str:
    """A bucket width in words: "hour", "5 minutes", "day", "2 hours", "90 seconds"."""
    for unit_s, unit in ((86400.0, "day"), (3600.0, "hour"), (60.0, "minute")):
        if width_s >= unit_s and width_s % unit_s == 0:
            k = int(width_s // unit_s)
            return unit if k == 1 else f"{k} {unit}s"
    return f"{width_s:,.0f} seconds"


def _hour_exposure(t0: float, t1: float) -> np.ndarray:
    """Seconds of [t0, t1) that fall in each hour of the day (UTC)."""
    expo = np.zeros(24)
    span = t1 - t0
    full_days = math.floor(span / 86400)
    expo += full_days * 3600.0
    a = t0 + full_days * 86400
    while a < t1:
        h = int((a % 86400) // 3600)
        nxt = min(t1, (math.floor(a / 3600) + 1) * 3600.0)
        expo[h] += nxt - a
        a = nxt
    return expo


def weighted_context_stats(ctx: np.ndarray, weights: np.ndarray):
    if ctx.size == 0 or not weights.sum() > 0:
        return (0.0, 0.0, 0.0, 0.0), (1.0, 2.0), (0.0,)
    order = np.argsort(ctx, kind="stable")
    c, w = ctx[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    qs = tuple(float(c[min(np.searchsorted(cum, q), len(c) - 1)]) for q in (0.10, 0.50, 0.90, 0.99))
    hi = max(float(c[-1]), 2.0)
    edges = np.unique(np.geomspace(1.0, hi * 1.0001, 25).round())
    counts, edges = np.histogram(ctx, bins=edges, weights=weights)
    return qs, tuple(float(e) for e in edges), tuple(float(x) for x in counts)

