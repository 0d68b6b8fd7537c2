"""An aggregated mix table -> a profile: workload (and language) with a share of output tokens or a monthly
volume, and optional mean prompt / output tokens per request (default: the workload's typical lengths)."""

from __future__ import annotations

import numpy as np

from profiles.traffic.columns import FileInfo
from profiles.traffic.errors import fail
from profiles.traffic.limits import DAYS_PER_MONTH, MAX_TOKENS_PER_REQUEST, SECONDS_PER_MONTH
from profiles.traffic.profile import Segment, TrafficProfile, check_sane, fmt_tokens
from profiles.traffic.reading import read_table
from profiles.traffic.sources.base import Source
from profiles.traffic.validate import Problems, category_codes, check_cell_lengths, numeric_column
from profiles.traffic.volume import weighted_context_stats


def mix_profile(name: str, src: Source, info: FileInfo, catalog) -> TrafficProfile:
    roles = info.roles
    vol_col = "monthly_output_tokens" if "monthly_output_tokens" in roles else "share"
    use = [roles["workload"], roles[vol_col]] + [roles[c] for c in ("language", "prompt_tokens", "output_tokens")
                                                 if c in roles]
    tbl = read_table(src, use, [roles["workload"]] + ([roles["language"]] if "language" in roles else []))
    probs = Problems(src)
    check_cell_lengths(tbl, probs)
    valid_wl = list(catalog.workloads.keys())
    valid_lang = list(catalog.languages.keys())
    wl = category_codes(tbl.column(roles["workload"]), roles["workload"], valid_wl, probs, "workload")
    lang = (category_codes(tbl.column(roles["language"]), roles["language"], valid_lang, probs, "language",
                   default="english") if "language" in roles
            else np.full(tbl.num_rows, valid_lang.index("english") if "english" in valid_lang else 0))
    vol = numeric_column(tbl.column(roles[vol_col]), roles[vol_col], probs, integer=False, low=0,
                   high=1e16 if vol_col != "share" else 100,
                   what="monthly output tokens" if vol_col != "share" else "a share (0-1 or percent)",
                   decimal=src.decimal)
    lengths = {}
    for col in ("prompt_tokens", "output_tokens"):
        if col in roles:
            # a mean below one token per request makes requests = tokens / mean explode (1e-320 -> inf)
            lengths[col] = numeric_column(tbl.column(roles[col]), roles[col], probs, integer=False, low=1,
                                    high=MAX_TOKENS_PER_REQUEST, what=f"mean {col.replace('_', ' ')} per request",
                                    decimal=src.decimal)
    probs.raise_if_any()
    if not vol.sum() > 0:
        raise fail("a positive total (every row is 0)", column=roles[vol_col], value=0.0)
    warnings = []
    if vol_col == "share" and not (abs(vol.sum() - 1) < 0.02 or abs(vol.sum() - 100) < 2):
        warnings.append(f"Shares add up to {vol.sum():g}, not 1 or 100; they were rescaled to 100 %.")
    share = vol / vol.sum()
    typical_p = np.array([catalog.workloads[valid_wl[i]].prompt_tokens for i in wl], float)
    typical_o = np.array([catalog.workloads[valid_wl[i]].output_tokens for i in wl], float)
    p = lengths.get("prompt_tokens", typical_p)
    o = lengths.get("output_tokens", typical_o)
    L = len(valid_lang)
    key = wl * L + lang
    nseg = len(valid_wl) * L
    g_share = np.bincount(key, weights=share, minlength=nseg)
    g_req = np.bincount(key, weights=share / o, minlength=nseg)
    g_wp = np.bincount(key, weights=share / o * p, minlength=nseg)
    monthly = float(vol.sum()) if vol_col == "monthly_output_tokens" else None
    req_scale = monthly if monthly else 1.0
    segments = tuple(
        Segment(workload=valid_wl[k // L], language=valid_lang[k % L], requests=float(g_req[k] * req_scale),
                output_token_share=float(g_share[k]), mean_prompt_tokens=float(g_wp[k] / g_req[k]),
                mean_output_tokens=float(g_share[k] / g_req[k]))
        for k in sorted(range(nseg), key=lambda k: (valid_wl[k // L], valid_lang[k % L])) if g_share[k] > 0)
    ctx = np.array([s.mean_prompt_tokens + s.mean_output_tokens for s in segments])
    qs, edges, counts = weighted_context_stats(ctx, np.array([s.requests for s in segments]))
    total_req = sum(s.requests for s in segments)
    note = (f"{fmt_tokens(monthly)} output tokens/month: the sum of the mix table's monthly_output_tokens."
            if monthly else "A mix table of shares has no volume: enter the monthly volume on the Plan page.")
    prof = TrafficProfile(
        name=name, kind="mix", fmt=src.fmt, segments=segments, rows=tbl.num_rows, requests=total_req,
        output_tokens=monthly or 1.0, span_days=DAYS_PER_MONTH if monthly else None,
        monthly_output_tokens=monthly, arrival_rate_per_s=None, context_tokens_quantiles=qs,
        context_hist_edges=edges, context_hist_counts=counts, per_hour_requests=tuple([0.0] * 24),
        warnings=tuple(warnings), source_format=info.format_label, column_map=info.mapping,
        span_s=SECONDS_PER_MONTH if monthly else None, volume_note=note,
    )
    check_sane(prof)
    return prof

