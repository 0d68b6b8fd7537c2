"""Timestamps -> seconds since the Unix epoch (UTC): ISO 8601 text, Unix s / ms / us / ns by magnitude, Parquet and
Excel date-times, and numbers before 2000 read as seconds since the trace began (BurstGPT)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from profiles.traffic.errors import clip
from profiles.traffic.limits import MAX_TIMESTAMP, MIN_TIMESTAMP
from profiles.traffic.validate import Problems, as_text, null_mask, per_value, value_type_of


@dataclass
class TimeState:
    """Decisions taken on the first batch and kept for the rest (unit of numeric timestamps, relative)."""

    unit: str
    scale: float | None = None
    relative: bool | None = None
    note: str = ""



def _epoch_unit(vals: np.ndarray) -> tuple[float, str]:
    """Seconds per unit of numeric timestamps, by magnitude: Unix seconds (~1.7e9 today), ms (~1.7e12),
    us (~1.7e15) or ns (~1.7e18); values before 2000 in seconds are read as seconds since the trace began."""
    finite = vals[:: max(len(vals) // 10_000, 1)]  # the median of a sample decides the unit
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 1.0, "s"
    mag = float(np.median(np.abs(finite)))
    for limit, scale, unit in ((1e11, 1.0, "s"), (1e14, 1e-3, "ms"), (1e17, 1e-6, "us")):
        if mag < limit:
            return scale, unit
    return 1e-9, "ns"


UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def read_timestamps(arr: pa.ChunkedArray, col: str, probs: Problems, state: TimeState) -> np.ndarray:
    """Seconds since the Unix epoch (UTC; text without a zone offset is read as UTC) as float64.
    Accepts ISO 8601 (2026-11-29T10:15:00Z, 2023-11-16 18:15:46.6805900), Unix s / ms / us / ns (by magnitude,
    decided on the first batch; `state` keeps the decision and a note), Parquet and Excel date-times. Numbers
    before the year 2000 are seconds since the trace began (BurstGPT)."""
    n = len(arr)
    t = value_type_of(arr)
    null = null_mask(arr)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        def conv(a: pa.Array) -> np.ndarray:
            if pa.types.is_date(a.type):
                a = a.cast(pa.timestamp("s"))
            return a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False) * UNIT_SCALE[a.type.unit]
        secs = per_value(arr, conv, 0.0).astype(float)
        bad = np.zeros(n, bool)
        state.note = state.note or ("date-times in the file's own type"
                                    + ("" if getattr(t, "tz", None) else " (no time zone: read as UTC)"))
        state.relative = False
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        vals = per_value(arr, lambda a: a.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False),
                          np.nan).astype(float)
        secs, bad = _epoch_seconds(vals, state)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        def conv(a: pa.Array) -> np.ndarray:
            s, b = _parse_time_text(as_text(a), state)
            return np.where(b, np.nan, s)
        secs = per_value(arr, conv, np.nan).astype(float)
        bad = np.isnan(secs)
        secs = np.where(bad, 0.0, secs)
    else:
        probs.add_mask(~null, col, f"a timestamp, not {clip(str(t), 40)}", arr)
        return np.zeros(n)
    bad &= ~null
    probs.add_mask(null, col, "a timestamp; the cell is empty", arr)
    probs.add_mask(bad, col, "an ISO 8601 timestamp (2026-11-29T10:15:00Z) or Unix seconds / milliseconds", arr)
    if not state.relative:
        ok = ~bad & ~null
        lo, hi = MIN_TIMESTAMP.value / 1e9, MAX_TIMESTAMP.value / 1e9
        out = ok & ((secs < lo) | (secs > hi))
        probs.add_mask(out, col, "a date between 2000-01-01 and 2100-01-01", arr)
    return secs


def _epoch_seconds(vals: np.ndarray, state: TimeState) -> tuple[np.ndarray, np.ndarray]:
    """Numeric timestamps -> seconds (unit by magnitude on the first batch unless given), and a bad mask."""
    if state.scale is None:
        scale, unit_name = _epoch_unit(vals) if state.unit == "auto" else (UNIT_SCALE[state.unit], state.unit)
        state.scale = scale
        fin = vals[np.isfinite(vals)] * scale
        state.relative = bool(fin.size and fin.max() < MIN_TIMESTAMP.value / 1e9)
        if state.relative:
            names = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
            state.note = state.note or (f"numbers before the year 2000 read as {names[unit_name]} since the trace "
                                        "began (no date); hours of the day count from its start")
        else:
            names = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
            state.note = state.note or f"numbers read as Unix {names[unit_name]}"
    secs = vals * state.scale
    bad = ~np.isfinite(secs)
    return np.where(bad, 0.0, secs), bad


def _parse_time_text(s: pa.Array, state: TimeState) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, bad mask) for a plain text array; arrow's ISO 8601 cast first (C++, fast)."""
    n = len(s)
    s = pc.utf8_trim_whitespace(s)
    for target, note in ((pa.timestamp("ns", "UTC"), "ISO 8601 with a time zone"),
                         (pa.timestamp("ns"), "ISO 8601 without a time zone: read as UTC")):
        try:
            ts = s.cast(target)
            state.note = state.note or note
            state.relative = False
            return ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False) / 1e9, np.zeros(n, bool)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    try:  # numbers written as text (CSV, JSON "1700000000")
        vals = s.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        return _epoch_seconds(vals, state)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # mixed forms: pandas' ISO 8601 reader per distinct text; what it cannot read becomes a problem
    enc = pc.dictionary_encode(s)
    words = pd.Series(enc.dictionary.to_pylist(), dtype=object)
    parsed = pd.to_datetime(words, utc=True, errors="coerce", format="ISO8601")
    word_secs = ((parsed - pd.Timestamp("1970-01-01", tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(float)
    num = pd.to_numeric(words, errors="coerce").to_numpy(float)
    if np.isfinite(num).any():
        nsecs, nbad = _epoch_seconds(num, state)
        word_secs = np.where(np.isnan(word_secs) & ~nbad, nsecs, word_secs)
    else:
        state.relative = False
    state.note = state.note or "ISO 8601 (mixed forms; text without a zone read as UTC)"
    table = np.append(word_secs, np.nan)
    idx = enc.indices.fill_null(len(words)).to_numpy(zero_copy_only=False).astype(np.int64)
    secs = table[idx]
    bad = ~np.isfinite(secs)
    return np.where(bad, 0.0, secs), bad


