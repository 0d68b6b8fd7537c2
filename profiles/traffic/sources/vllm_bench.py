"""The result JSON of `vllm bench serve` (--save-result): per-request `input_lens` and `output_lens`, the run's
`duration` and start `date`. It is read through the same capped JSON path as every JSON document
(MAX_JSON_DOC_BYTES); the file has no per-request times, so arrivals are spread evenly over the run."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from profiles.traffic.errors import _fail
from profiles.traffic.limits import MAX_ROWS
from profiles.traffic.sources.base import Source

LABEL = "vllm bench serve result (per request)"
KEYS = (b'"input_lens"', b'"output_lens"')


def looks_like(data: bytes) -> bool:
    """A JSON object that names both per-request length arrays (decided before the document is parsed, so a
    one-line result is not taken for JSON lines)."""
    return all(k in data for k in KEYS) and data[:4096].lstrip().startswith(b"{")


def _numbers(v: Any) -> np.ndarray | None:
    if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return None
    return np.asarray(v, float)


def source(doc: Any) -> Source | None:
    """The requests of a parsed vllm bench result; None when `doc` is not one (the other JSON shapes are tried)."""
    if not isinstance(doc, dict):
        return None
    inp, out = _numbers(doc.get("input_lens")), _numbers(doc.get("output_lens"))
    if inp is None or out is None:
        return None
    if len(inp) != len(out):
        raise _fail(f"as many input_lens as output_lens ({len(inp):,} and {len(out):,})", column="output_lens")
    if len(inp) > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} requests (this result has {len(inp):,})")
    duration = doc.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration) \
            or duration <= 0:
        raise _fail("a positive 'duration' (seconds) in the vllm bench result", column="duration", value=duration)
    date = doc.get("date")
    rate = doc.get("request_rate")
    try:
        t0 = pd.Timestamp(pd.to_datetime(date, format="%Y%m%d-%H%M%S", utc=True)) if isinstance(date, str) else None
    except (ValueError, TypeError):
        t0 = None
    base = (t0.value / 1e9) if t0 is not None and not pd.isna(t0) else 0.0
    n = len(inp)
    # No per-request times in the result: spread the requests evenly over the run (same mean rate).
    ts = base + (np.arange(n) * (duration / max(n - 1, 1)) if n > 1 else np.zeros(n))
    tbl = pa.table({"timestamp": pa.array(ts), "prompt_tokens": pa.array(inp), "output_tokens": pa.array(out)})
    note = (f"vllm bench serve result: {n:,} requests over {duration:,.1f} s at request_rate={rate}; the file has "
            "no per-request times, so arrivals are spread evenly over the run. The rate is the benchmark's, "
            "not your production traffic's.")
    return Source("json", list(tbl.column_names), lambda cols: tbl.select(cols), label=LABEL, notes=(note,))
