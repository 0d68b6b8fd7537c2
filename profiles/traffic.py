"""Traffic profiles: a customer's traffic export (CSV, JSONL or Parquet) -> a workload mix the planner uses.

Two shapes are accepted (column names are case-insensitive; spaces become underscores):

* per-request rows: ``timestamp, workload, prompt_tokens, output_tokens`` and optionally ``language``
  (default ``english``), ``weight`` (requests this row stands for when the log is sampled, default 1) and
  ``prompt_text`` (read, used for nothing, never stored);
* an aggregated mix table: ``workload`` and one of ``share`` (share of output tokens) or
  ``monthly_output_tokens``, optionally ``language``, ``prompt_tokens`` and ``output_tokens`` (means per
  request; default: the workload's typical lengths).

Every error names the row, the column and the value (``TrafficError.problems``). Parsing is vectorised
(pyarrow readers, pandas checks) so a 1,000,000-row export reads in seconds (benchmarks/bench_app.py).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # 100 MiB: about 2 million per-request CSV rows
MAX_ROWS = 2_000_000
# No served model has a context above ~10M tokens; a request beyond 1,048,576 (2^20) tokens is a unit
# error (characters or bytes instead of tokens), not traffic.
MAX_TOKENS_PER_REQUEST = 1_048_576
MAX_WEIGHT = 1_000_000  # one sampled row standing for more than a million requests is a typo
MIN_TIMESTAMP = pd.Timestamp("2000-01-01", tz="UTC")
MAX_TIMESTAMP = pd.Timestamp("2100-01-01", tz="UTC")
DAYS_PER_MONTH = 365.25 / 12.0  # 30.44: average Gregorian month
MAX_PROBLEMS = 20  # problems listed per upload; the count of the rest is given

REQUEST_REQUIRED = ("timestamp", "workload", "prompt_tokens", "output_tokens")
REQUEST_OPTIONAL = ("language", "weight", "prompt_text")
MIX_REQUIRED = ("workload",)
MIX_VOLUME = ("share", "monthly_output_tokens")
MIX_OPTIONAL = ("language", "prompt_tokens", "output_tokens")

Format = Literal["csv", "jsonl", "parquet"]


@dataclass(frozen=True)
class Problem:
    """One bad cell (or a whole-file problem when row/column are None)."""

    row: int | None  # 1-based data row (the header is not counted)
    column: str | None
    value: Any
    expected: str
    line: int | None = None  # 1-based line of the file, for CSV and JSONL

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}" + (f" (line {self.line})" if self.line else ""))
        if self.column is not None:
            where.append(f"column '{self.column}'")
        head = ", ".join(where)
        val = "" if self.value is None and self.row is None else f"value {self.value!r}: "
        return f"{head}: {val}expected {self.expected}" if head else f"{val}expected {self.expected}"


class TrafficError(ValueError):
    """An upload that cannot become a profile; `problems` lists each bad row / column / value."""

    def __init__(self, problems: list[Problem], total: int | None = None):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        more = f" (and {self.total - 1} more problems)" if self.total > 1 else ""
        super().__init__(f"{problems[0]}{more}")


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
class TrafficProfile:
    name: str
    kind: Literal["requests", "mix"]
    fmt: str
    segments: tuple[Segment, ...]
    rows: int
    requests: float  # weighted
    output_tokens: float  # weighted total in the file
    span_days: float | None  # first to last timestamp
    monthly_output_tokens: float | None  # extrapolated from the span, or summed from a mix table
    # Request arrival rate per minute bucket (weighted), requests/s: p50, p90, peak. For Little's law.
    arrival_rate_per_s: tuple[float, float, float] | None
    context_tokens_quantiles: tuple[float, float, float, float]  # p10, p50, p90, p99 of prompt+output
    context_hist_edges: tuple[float, ...]
    context_hist_counts: tuple[float, ...]
    per_hour_requests: tuple[float, ...]  # weighted requests by hour of day (UTC), 24 values
    had_prompt_text: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)

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

    def mix_key(self) -> tuple[tuple[str, str, float, float, float], ...]:
        """Hashable summary the planner uses: (workload, language, share, prompt, output) per segment."""
        return tuple((s.workload, s.language, round(s.output_token_share, 6), round(s.mean_prompt_tokens, 1),
                      round(s.mean_output_tokens, 1)) for s in self.segments)

    def concurrency(self, tpot_ms: float, quantile: int = 1) -> float | None:
        """Sequences in flight (Little's law: L = arrival rate x time in system), with the time in system
        taken as mean output tokens x TPOT (decode dominates). quantile: 0 p50, 1 p90, 2 peak minute."""
        if self.arrival_rate_per_s is None:
            return None
        mean_out = self.output_tokens / max(self.requests, 1e-12)
        return self.arrival_rate_per_s[quantile] * mean_out * tpot_ms / 1e3


# ---------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------

def detect_format(name: str, data: bytes) -> Format:
    low = name.lower()
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    if low.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if low.endswith((".csv", ".txt", ".tsv")):
        return "csv"
    if data[:4] == b"PAR1":
        return "parquet"
    if data.lstrip()[:1] == b"{":
        return "jsonl"
    return "csv"


def _check_utf8(data: bytes) -> bytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        pos = exc.start
        line_start = data.rfind(b"\n", 0, pos) + 1
        line = data.count(b"\n", 0, pos) + 1
        header = data[: data.find(b"\n")] if b"\n" in data else data
        col_idx = data[line_start:pos].count(b",")
        try:
            names = header.decode("utf-8", "replace").split(",")
            column = names[col_idx].strip() if col_idx < len(names) else None
        except Exception:  # pragma: no cover - best effort
            column = None
        raise TrafficError([Problem(
            row=line - 1 if line > 1 else None, column=column, value=data[pos:pos + 4],
            expected=f"UTF-8 text (byte {pos} is not UTF-8; re-export the file as UTF-8)", line=line)]) from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data


def _normalise_columns(df: pd.DataFrame) -> pd.DataFrame:
    df.columns = [str(c).strip().lower().replace(" ", "_").replace("-", "_") for c in df.columns]
    return df


def _read_csv(data: bytes) -> pd.DataFrame:
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(block_size=16 << 20),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:
        _locate_csv_error(data, str(exc))
        raise TrafficError([Problem(None, None, None, f"a comma-separated table ({exc})")]) from None
    return table.to_pandas()


def _locate_csv_error(data: bytes, message: str) -> None:
    """pyarrow does not say which row is ragged; find it with the csv module (error path only)."""
    text = data.decode("utf-8", "replace")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return
    for i, row in enumerate(reader, start=1):
        if row and len(row) != len(header):
            raise TrafficError([Problem(
                row=i, column=None, value=",".join(row)[:80],
                expected=f"{len(header)} comma-separated fields like the header ({', '.join(header)}); "
                         f"found {len(row)}", line=reader.line_num)])


def _read_jsonl(data: bytes) -> pd.DataFrame:
    try:
        table = pajson.read_json(io.BytesIO(data), read_options=pajson.ReadOptions(block_size=16 << 20))
        return table.to_pandas()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    # Slow path: find the bad line, or build the frame from mixed-type records.
    records = []
    for line_no, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrafficError([Problem(row=len(records) + 1, column=None, value=line[:80],
                                        expected=f"one JSON object per line ({exc.msg})", line=line_no)]) from None
        if not isinstance(rec, dict):
            raise TrafficError([Problem(row=len(records) + 1, column=None, value=line[:80],
                                        expected="a JSON object {\"column\": value, ...}", line=line_no)])
        records.append(rec)
    return pd.DataFrame.from_records(records)


def _read_parquet(data: bytes) -> pd.DataFrame:
    try:
        return pq.read_table(io.BytesIO(data)).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:
        raise TrafficError([Problem(None, None, None, f"a Parquet file ({exc})")]) from None


def read_table(name: str, data: bytes, *, max_bytes: int = MAX_UPLOAD_BYTES) -> tuple[pd.DataFrame, Format]:
    if len(data) == 0:
        raise TrafficError([Problem(None, None, None, "a non-empty file (this one has 0 bytes)")])
    if len(data) > max_bytes:
        raise TrafficError([Problem(
            None, None, None,
            f"a file of at most {max_bytes / 2**20:.0f} MiB (this one is {len(data) / 2**20:.1f} MiB); "
            "sample the log (and add a 'weight' column) or upload an aggregated mix table")])
    fmt = detect_format(name, data)
    if fmt != "parquet":
        data = _check_utf8(data)
        if not data.strip():
            raise TrafficError([Problem(None, None, None, "a non-empty file (this one is only blank)")])
    reader = {"csv": _read_csv, "jsonl": _read_jsonl, "parquet": _read_parquet}[fmt]
    df = _normalise_columns(reader(data))
    if len(df) == 0:
        raise TrafficError([Problem(None, None, None, "at least one data row below the header")])
    if len(df) > MAX_ROWS:
        raise TrafficError([Problem(None, None, None,
                                    f"at most {MAX_ROWS:,} rows (this file has {len(df):,})")])
    return df, fmt


# ---------------------------------------------------------------------------------------------------
# Validation (vectorised; problems collected in row order)
# ---------------------------------------------------------------------------------------------------

class _Problems:
    def __init__(self, fmt: Format):
        self.items: list[Problem] = []
        self.total = 0
        # CSV: line = header line + data row; JSONL: one record per line (blank lines aside)
        self.line_offset = {"csv": 1, "jsonl": 0, "parquet": None}[fmt]

    def add_mask(self, df: pd.DataFrame, mask: np.ndarray, column: str, expected: str,
                 values: pd.Series | None = None) -> None:
        idx = np.flatnonzero(np.asarray(mask))
        if idx.size == 0:
            return
        self.total += int(idx.size)
        src = values if values is not None else df[column]
        for i in idx[:MAX_PROBLEMS]:
            v = src.iloc[int(i)]
            v = None if (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT else v
            row = int(i) + 1
            line = row + self.line_offset if self.line_offset is not None else None
            self.items.append(Problem(row=row, column=column, value=_plain(v), expected=expected, line=line))

    def raise_if_any(self) -> None:
        if self.items:
            self.items.sort(key=lambda p: (p.row or 0, p.column or ""))
            raise TrafficError(self.items[:MAX_PROBLEMS], self.total)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return v
    return v if isinstance(v, (int, float, str)) or v is None else str(v)


def _numeric(df: pd.DataFrame, col: str, probs: _Problems, *, integer: bool, low: float, high: float,
             what: str, low_inclusive: bool = True) -> np.ndarray:
    raw = df[col]
    num = pd.to_numeric(raw, errors="coerce") if not pd.api.types.is_numeric_dtype(raw) else raw
    if pd.api.types.is_bool_dtype(raw):
        probs.add_mask(df, np.ones(len(df), bool), col, f"a number ({what}), not true/false")
        return np.zeros(len(df))
    arr = np.asarray(num, dtype=float)
    missing = np.isnan(arr)
    probs.add_mask(df, missing & raw.isna().to_numpy(), col, f"a value ({what}); the cell is empty")
    probs.add_mask(df, missing & ~raw.isna().to_numpy(), col, f"a number ({what})")
    ok = ~missing
    with np.errstate(invalid="ignore"):
        too_low = ok & ((arr < low) if low_inclusive else (arr <= low))
        too_high = ok & (arr > high)
        frac = ok & ~too_low & ~too_high & (np.floor(arr) != arr) if integer else np.zeros(len(arr), bool)
    bound = ">=" if low_inclusive else ">"
    probs.add_mask(df, too_low, col, f"{what} {bound} {low:g}")
    probs.add_mask(df, too_high, col, f"{what} <= {high:,.0f} (larger is not plausible for one request)"
                   if col != "weight" else f"{what} <= {high:,.0f}")
    probs.add_mask(df, frac, col, f"a whole number ({what})")
    return np.where(ok, arr, 0.0)


def _names(df: pd.DataFrame, col: str, valid: Iterable[str], probs: _Problems, kind: str,
           default: str | None = None) -> pd.Series:
    """Map names case-insensitively onto catalogue names; unknown names name the valid ones."""
    valid = list(valid)
    if col not in df.columns:
        return pd.Series(pd.Categorical([default] * len(df), categories=valid))
    raw = df[col]
    cat = raw.astype("string").astype("category")
    lookup = {v.lower(): v for v in valid}
    mapping = {}
    for c in cat.cat.categories:
        key = str(c).strip().lower().replace(" ", "_").replace("-", "_")
        mapping[c] = lookup.get(key)
    codes_ok = np.array([mapping[c] is not None for c in cat.cat.categories] + [False])
    codes = cat.cat.codes.to_numpy()
    bad = ~codes_ok[codes]  # code -1 (missing) indexes the trailing False
    missing = raw.isna().to_numpy()
    if default is not None:
        bad &= ~missing
    probs.add_mask(df, bad & missing, col, f"a {kind} name; the cell is empty")
    probs.add_mask(df, bad & ~missing, col, f"a known {kind}: one of {', '.join(sorted(valid))}")
    mapped = cat.cat.rename_categories(lambda c: mapping[c] or f"?{c}")
    out = mapped.astype(object)
    if default is not None:
        out = out.where(~pd.Series(missing, index=out.index), default)
    return out


def _timestamps(df: pd.DataFrame, probs: _Problems) -> np.ndarray:
    """Timestamps as int64 seconds since the epoch (UTC). ISO 8601 text or Unix seconds."""
    raw = df["timestamp"]
    if pd.api.types.is_datetime64_any_dtype(raw):
        ts = raw.dt.tz_localize("UTC") if raw.dt.tz is None else raw.dt.tz_convert("UTC")
    elif pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        ts = pd.to_datetime(raw, unit="s", utc=True, errors="coerce")
    else:
        ts = pd.to_datetime(raw.astype("string"), utc=True, errors="coerce", format="ISO8601")
    bad = ts.isna().to_numpy()
    probs.add_mask(df, bad & raw.isna().to_numpy(), "timestamp", "a timestamp; the cell is empty")
    probs.add_mask(df, bad & ~raw.isna().to_numpy(), "timestamp",
                   "an ISO 8601 timestamp (2026-11-29T10:15:00Z) or Unix seconds")
    ok = ~bad
    out_of_range = ok & ((ts < MIN_TIMESTAMP) | (ts > MAX_TIMESTAMP)).to_numpy()
    probs.add_mask(df, out_of_range, "timestamp", "a date between 2000-01-01 and 2100-01-01")
    filled = ts.where(ok, MIN_TIMESTAMP)
    # unit-agnostic (pandas 3 keeps the parsed resolution): whole seconds since the epoch
    return ((filled - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy("int64")


def _missing_columns(cols: list[str], required: Iterable[str], kind: str) -> None:
    missing = [c for c in required if c not in cols]
    if missing:
        raise TrafficError([Problem(None, c, None,
                                    f"a column '{c}' ({kind}); the file's columns are: {', '.join(cols)}")
                            for c in missing])


def parse_traffic(name: str, data: bytes, catalog, *, max_bytes: int = MAX_UPLOAD_BYTES) -> TrafficProfile:
    """Parse an upload into a TrafficProfile; raises TrafficError naming rows, columns and values."""
    df, fmt = read_table(name, data, max_bytes=max_bytes)
    cols = list(df.columns)
    if "timestamp" in cols:
        _missing_columns(cols, REQUEST_REQUIRED, "per-request format")
        return _requests_profile(name, df, fmt, catalog)
    if any(c in cols for c in MIX_VOLUME):
        _missing_columns(cols, MIX_REQUIRED, "mix-table format")
        return _mix_profile(name, df, fmt, catalog)
    raise TrafficError([Problem(
        None, None, None,
        "either per-request columns (" + ", ".join(REQUEST_REQUIRED) + "; optional "
        + ", ".join(REQUEST_OPTIONAL) + ") or a mix table (workload and share or monthly_output_tokens; "
        "optional " + ", ".join(MIX_OPTIONAL) + "); the file's columns are: " + ", ".join(cols))])


def _context_stats(ctx: np.ndarray, weights: np.ndarray):
    if ctx.size == 0:
        return (0.0, 0.0, 0.0, 0.0), (1.0, 2.0), (0.0,)
    order = np.argsort(ctx, kind="stable")
    c, w = ctx[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    qs = tuple(float(c[min(np.searchsorted(cum, q), len(c) - 1)]) for q in (0.10, 0.50, 0.90, 0.99))
    hi = max(float(c[-1]), 2.0)
    edges = np.unique(np.geomspace(1.0, hi * 1.0001, 25).round())
    counts, edges = np.histogram(ctx, bins=edges, weights=weights)
    return qs, tuple(float(e) for e in edges), tuple(float(x) for x in counts)


def _requests_profile(name: str, df: pd.DataFrame, fmt: Format, catalog) -> TrafficProfile:
    probs = _Problems(fmt)
    workload = _names(df, "workload", catalog.workloads.keys(), probs, "workload")
    language = _names(df, "language", catalog.languages.keys(), probs, "language", default="english")
    prompt = _numeric(df, "prompt_tokens", probs, integer=True, low=0, high=MAX_TOKENS_PER_REQUEST,
                      what="prompt tokens")
    output = _numeric(df, "output_tokens", probs, integer=True, low=0, high=MAX_TOKENS_PER_REQUEST,
                      what="output tokens")
    weight = (_numeric(df, "weight", probs, integer=False, low=0, high=MAX_WEIGHT, what="a request weight",
                       low_inclusive=False)
              if "weight" in df.columns else np.ones(len(df)))
    secs = _timestamps(df, probs)
    probs.raise_if_any()
    total_out = float(np.dot(weight, output))
    if total_out <= 0:
        raise TrafficError([Problem(None, "output_tokens", 0, "some output tokens (every row has 0)")])
    frame = pd.DataFrame({"workload": workload.to_numpy(), "language": language.to_numpy(),
                          "w": weight, "wp": weight * prompt, "wo": weight * output})
    g = frame.groupby(["workload", "language"], sort=True, observed=True)[["w", "wp", "wo"]].sum()
    segments = tuple(
        Segment(workload=str(wl), language=str(lang), requests=float(r.w),
                output_token_share=float(r.wo / total_out), mean_prompt_tokens=float(r.wp / r.w),
                mean_output_tokens=float(r.wo / r.w))
        for (wl, lang), r in g.iterrows() if r.w > 0
    )
    t0, t1 = int(secs.min()), int(secs.max())
    span_s = t1 - t0
    warnings = []
    if span_s >= 3600:
        span_days = span_s / 86400.0
        monthly = total_out / span_days * DAYS_PER_MONTH
        minutes = (secs - t0) // 60
        per_min = np.bincount(minutes, weights=weight) / 60.0
        rate = (float(np.quantile(per_min, 0.5)), float(np.quantile(per_min, 0.9)), float(per_min.max()))
    else:
        span_days, monthly, rate = (span_s / 86400.0 if span_s > 0 else None), None, None
        warnings.append("the timestamps span less than an hour: the monthly volume and the concurrency are "
                        "not extrapolated from them; enter the monthly volume on the Plan page")
    hours = ((secs % 86400) // 3600).astype(np.int64)
    per_hour = np.bincount(hours, weights=weight, minlength=24)
    qs, edges, counts = _context_stats(prompt + output, weight)
    if "prompt_text" in df.columns:
        warnings.append("prompt_text was read and discarded: the planner keeps token counts only")
    extra = sorted(set(df.columns) - set(REQUEST_REQUIRED) - set(REQUEST_OPTIONAL))
    if extra:
        warnings.append(f"columns ignored: {', '.join(extra)}")
    return TrafficProfile(
        name=name, kind="requests", fmt=fmt, segments=segments, rows=len(df), requests=float(weight.sum()),
        output_tokens=total_out, span_days=span_days, monthly_output_tokens=monthly,
        arrival_rate_per_s=rate, context_tokens_quantiles=qs, context_hist_edges=edges,
        context_hist_counts=counts, per_hour_requests=tuple(float(x) for x in per_hour),
        had_prompt_text="prompt_text" in df.columns, warnings=tuple(warnings),
    )


def _mix_profile(name: str, df: pd.DataFrame, fmt: Format, catalog) -> TrafficProfile:
    probs = _Problems(fmt)
    workload = _names(df, "workload", catalog.workloads.keys(), probs, "workload")
    language = _names(df, "language", catalog.languages.keys(), probs, "language", default="english")
    vol_col = "monthly_output_tokens" if "monthly_output_tokens" in df.columns else "share"
    vol = _numeric(df, vol_col, probs, integer=False, low=0, high=1e16 if vol_col != "share" else 100,
                   what="monthly output tokens" if vol_col != "share" else "a share (0-1 or percent)")
    lengths = {}
    for col in ("prompt_tokens", "output_tokens"):
        if col in df.columns:
            lengths[col] = _numeric(df, col, probs, integer=False, low=0, high=MAX_TOKENS_PER_REQUEST,
                                    what=f"mean {col.replace('_', ' ')} per request", low_inclusive=False)
    probs.raise_if_any()
    if vol.sum() <= 0:
        raise TrafficError([Problem(None, vol_col, 0.0, "a positive total (every row is 0)")])
    warnings = []
    if vol_col == "share" and not (abs(vol.sum() - 1) < 0.02 or abs(vol.sum() - 100) < 2):
        warnings.append(f"shares add up to {vol.sum():g}, not 1 or 100; they were rescaled to 100 %")
    share = vol / vol.sum()
    wl = workload.to_numpy()
    typical_p = np.array([catalog.workloads[w].prompt_tokens for w in wl], float)
    typical_o = np.array([catalog.workloads[w].output_tokens for w in wl], float)
    p = lengths.get("prompt_tokens", typical_p)
    o = lengths.get("output_tokens", typical_o)
    frame = pd.DataFrame({"workload": wl, "language": language.to_numpy(), "share": share,
                          "req": share / o, "wp": share / o * p})
    g = frame.groupby(["workload", "language"], sort=True)[["share", "req", "wp"]].sum()
    monthly = float(vol.sum()) if vol_col == "monthly_output_tokens" else None
    req_scale = monthly if monthly else 1.0
    segments = tuple(
        Segment(workload=str(w), language=str(lang), requests=float(r.req * req_scale),
                output_token_share=float(r.share), mean_prompt_tokens=float(r.wp / r.req),
                mean_output_tokens=float(r.share / r.req))
        for (w, lang), r in g.iterrows() if r.share > 0
    )
    ctx = np.array([s.mean_prompt_tokens + s.mean_output_tokens for s in segments])
    qs, edges, counts = _context_stats(ctx, np.array([s.requests for s in segments]))
    total_req = sum(s.requests for s in segments)
    return TrafficProfile(
        name=name, kind="mix", fmt=fmt, segments=segments, rows=len(df), requests=total_req,
        output_tokens=monthly or 1.0, span_days=DAYS_PER_MONTH if monthly else None,
        monthly_output_tokens=monthly, arrival_rate_per_s=None, context_tokens_quantiles=qs,
        context_hist_edges=edges, context_hist_counts=counts, per_hour_requests=tuple([0.0] * 24),
        warnings=tuple(warnings),
    )


def single_segment_profile(workload: str, language: str, catalog) -> tuple[tuple[str, str, float, float, float], ...]:
    """The mix key of 'no profile': one workload and language with its typical lengths."""
    w = catalog.workloads[workload]
    return ((workload, language, 1.0, float(w.prompt_tokens), float(w.output_tokens)),)
