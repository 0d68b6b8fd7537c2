"""The result JSON of `vllm bench serve` (--save-result): per-request `input_lens` and `output_lens`, the run's
`duration` and start `date`. It is read through the same capped JSON path as every JSON document
(MAX_JSON_DOC_BYTES), streamed: only the two length arrays are kept (8 bytes a request). The file has no
per-request times, so arrivals are spread evenly over the run."""

from __future__ import annotations

import math
from array import array
from typing import Any

import ijson
import numpy as np
import pandas as pd
import pyarrow as pa

from profiles.traffic.errors import clip, fail
from profiles.traffic.limits import MAX_ROWS
from profiles.traffic.sources.base import Source

LABEL = "vllm bench serve result (per request)"
KEYS = (b'"input_lens"', b'"output_lens"')


def looks_like(data: bytes) -> bool:
    """A JSON object that names both per-request length arrays (decided before the document is parsed, so a
    one-line result is not taken for JSON lines)."""
    return all(k in data for k in KEYS) and data[:4096].lstrip().startswith(b"{")


SCALARS = ("duration", "date", "request_rate")


def _read(data: bytes) -> tuple[array | None, array | None, dict[str, Any]]:
    """input_lens, output_lens (None when either is not a flat list of numbers) and the top-level scalars, in one
    streaming pass (ijson events: nothing but the two number arrays is kept, at most MAX_ROWS + 1 of each)."""
    lens: dict[str, array | None] = {"input_lens": None, "output_lens": None}
    scalars: dict[str, Any] = {}
    depth, key, arr = 0, None, None  # depth 1: the top-level object; arr: the length array being read
    for event, value in ijson.basic_parse(data, use_float=True):
        if arr is not None and depth == 2:
            if event == "number":
                arr.append(value)
                if len(arr) > MAX_ROWS:
                    raise fail(f"at most {MAX_ROWS:,} requests (this result has more in '{key}')", column=key)
                continue
            if event != "end_array":  # not a flat list of numbers
                lens[key] = arr = None
        if event in ("start_map", "start_array"):
            depth += 1
            if depth == 2 and event == "start_array" and key in lens:
                lens[key] = arr = array("d")
        elif event in ("end_map", "end_array"):
            depth -= 1
            arr = None if depth < 2 else arr
        elif event == "map_key":
            if depth == 1:
                key = value
        elif depth == 1 and key in SCALARS:
            scalars[key] = value
    return lens["input_lens"], lens["output_lens"], scalars


def source(data: bytes) -> Source | None:
    """The requests of a vllm bench result (the document's bytes, at most MAX_JSON_DOC_BYTES); None when it is
    not one (the other JSON shapes are tried)."""
    try:
        inp, out, doc = _read(data)
    except ijson.JSONError as exc:
        raise fail(f"a JSON document ({clip(str(exc).splitlines()[0] if str(exc) else 'not JSON', 200)})") from None
    if inp is None or out is None or (not len(inp) and not len(out)):
        return None
    if len(inp) != len(out):
        raise fail(f"as many input_lens as output_lens ({len(inp):,} and {len(out):,})", column="output_lens")
    inp, out = np.frombuffer(inp, float), np.frombuffer(out, float)
    duration = doc.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration) \
            or duration <= 0:
        raise fail("a positive 'duration' (seconds) in the vllm bench result", column="duration", value=duration)
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
