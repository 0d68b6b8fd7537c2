"""Validation of decoded columns, vectorised over arrow / numpy: numbers, names (workloads, languages) and cell
lengths; each bad cell becomes a problem naming row, column and value (at most MAX_PROBLEMS listed, in row order,
with the file line where the reader knows it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from profiles.traffic.columns import norm
from profiles.traffic.errors import Problem, TrafficError, clip, fail
from profiles.traffic.limits import MAX_FIELD_CHARS, MAX_PROBLEMS
from profiles.traffic.sources.base import Source


def as_text(a: pa.Array) -> pa.Array:
    """A plain (non-dictionary) array as UTF-8 text."""
    if pa.types.is_string(a.type):
        return a
    try:
        return a.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else str(v) for v in a.to_pylist()], pa.string())


def per_value(arr: pa.ChunkedArray, fn: Callable[[pa.Array], np.ndarray], null_value: Any,
               encode: bool = False) -> np.ndarray:
    """fn over the values of a column, row by row, computed once per distinct value where the column is
    dictionary-encoded (Parquet strings are read that way) or `encode` asks for it: a dictionary bomb (one
    long string on two million rows) is never expanded. Nulls get `null_value`."""
    out = []
    for chunk in arr.chunks:
        if encode and not pa.types.is_dictionary(chunk.type):
            chunk = pc.dictionary_encode(chunk)
        if pa.types.is_dictionary(chunk.type):
            res = np.asarray(fn(chunk.dictionary))
            res = np.append(res, np.array([null_value], dtype=res.dtype if res.size else object))
            idx = chunk.indices.fill_null(len(chunk.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
            out.append(res[idx])
        else:
            res = np.asarray(fn(chunk))
            if chunk.null_count:
                res = np.where(chunk.is_null().to_numpy(zero_copy_only=False), null_value, res)
            out.append(res)
    return np.concatenate(out) if out else np.zeros(0)


def value_type_of(arr: pa.ChunkedArray) -> pa.DataType:
    return arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type


def null_mask(arr: pa.ChunkedArray) -> np.ndarray:
    return arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else np.zeros(len(arr), bool)


class Problems:
    def __init__(self, src: Source):
        self.items: list[tuple[int, str, Any, str]] = []
        self.total = 0
        self.src = src
        self.offset = 0  # rows before the current batch

    def add_mask(self, mask: np.ndarray, column: str, expected: str, raw: pa.ChunkedArray,
                 shown: np.ndarray | None = None) -> None:
        """A problem per True row of `mask`; the value quoted is the cell (or `shown`, the number read)."""
        idx = np.flatnonzero(np.asarray(mask))
        if idx.size == 0:
            return
        self.total += int(idx.size)
        for i in idx[:MAX_PROBLEMS]:
            if shown is not None:
                v = float(shown[int(i)])
                v = int(v) if v.is_integer() and abs(v) < 1e15 else v
            else:
                v = raw[int(i)].as_py() if raw is not None else None
            self.items.append((self.offset + int(i) + 1, column, _plain(v), expected))

    def raise_if_any(self, at_least: bool = False) -> None:
        if not self.items:
            return
        self.items.sort(key=lambda p: (p[0], p[1]))
        items = self.items[:MAX_PROBLEMS]
        lines = self.src.line_of([r for r, *_ in items])
        raise TrafficError([Problem(r, c, v, e, lines.get(r), self.src.line_kind) for r, c, v, e in items],
                           self.total, at_least)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, str, int, float)) or v is None:
        return v
    return str(v)


def numeric_column(arr: pa.ChunkedArray, col: str, probs: Problems, *, integer: bool, low: float, high: float,
             what: str, low_inclusive: bool = True, decimal: str | None = None) -> np.ndarray:
    """Float64 values of a column; a problem for each empty, non-numeric, NaN, out-of-range or fractional cell."""
    n = len(arr)
    t = value_type_of(arr)
    null = null_mask(arr)
    if pa.types.is_boolean(t):
        probs.add_mask(~null, col, f"a number ({what}), not true/false", arr)
        probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
        return np.zeros(n)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        def conv(a: pa.Array) -> np.ndarray:
            return a.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        def conv(a: pa.Array) -> np.ndarray:
            s = pc.utf8_trim_whitespace(as_text(a))
            if decimal == ",":
                s = pc.replace_substring(s, ",", ".")
            try:
                return s.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return pd.to_numeric(pd.Series(s.to_pylist(), dtype=object), errors="coerce").to_numpy(float)
    else:
        probs.add_mask(~null, col, f"a number ({what}), not {clip(str(t), 40)}", arr)
        probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
        return np.zeros(n)
    vals = per_value(arr, conv, np.nan).astype(float)
    nan = np.isnan(vals)
    probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
    probs.add_mask(nan & ~null, col, f"a number ({what})", arr)
    ok = ~nan
    with np.errstate(invalid="ignore"):
        too_low = ok & ((vals < low) if low_inclusive else (vals <= low))
        too_high = ok & (vals > high)
        frac = ok & ~too_low & ~too_high & (np.floor(vals) != vals) if integer else np.zeros(n, bool)
    bound = ">=" if low_inclusive else ">"
    probs.add_mask(too_low, col, f"{what} {bound} {low:g}", arr, vals)
    probs.add_mask(too_high, col, f"{what} <= {high:,.0f}" + (" (larger is not plausible for one request)"
                                                             if "token" in what else ""), arr, vals)
    probs.add_mask(frac, col, f"a whole number ({what})", arr, vals)
    return np.where(ok & ~too_low & ~too_high, vals, 0.0)


def category_codes(arr: pa.ChunkedArray, col: str, valid: list[str], probs: Problems, kind: str,
           default: str | None = None) -> np.ndarray:
    """Codes into `valid` for a text column, names matched case-insensitively; unknown names name the valid
    ones. Works per distinct value, not per row."""
    lookup = {norm(v): i for i, v in enumerate(valid)}
    codes = per_value(arr, lambda a: np.array([lookup.get(norm(w), -1) for w in as_text(a).to_pylist()],
                                               dtype=np.int64), -2, encode=True).astype(np.int64)
    missing = codes == -2
    if default is not None:
        codes = np.where(missing, valid.index(default), codes)
    else:
        probs.add_mask(missing, col, f"a {kind} name; the cell is empty", arr)
    probs.add_mask(codes == -1, col, f"a known {kind}: one of {', '.join(sorted(valid))}", arr)
    return np.where(codes < 0, 0, codes)


def check_cell_lengths(tbl: pa.Table, probs: Problems) -> None:
    """Refuse any text cell over MAX_FIELD_CHARS (dictionary columns: checked on the dictionary)."""
    for c in tbl.column_names:
        arr = tbl.column(c)
        t = value_type_of(arr)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t)):
            continue
        long = per_value(arr, lambda a: pc.greater(pc.binary_length(a), MAX_FIELD_CHARS).fill_null(False)
                          .to_numpy(zero_copy_only=False), False).astype(bool)
        if long.any():
            i = int(np.flatnonzero(long)[0])
            v = arr[i].as_py()
            row = probs.offset + i + 1
            line = probs.src.line_of([row]).get(row)
            raise fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters (this one has {len(v):,}; only token "
                        "counts are needed: drop long text columns)", row=row, column=c, value=v, line=line,
                        line_kind=probs.src.line_kind)
