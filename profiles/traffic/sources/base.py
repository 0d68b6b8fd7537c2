"""What every reader returns (`Source`: the file's columns and a bounded reader of the selected ones) and the
helpers the JSON-shaped readers share."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from profiles.traffic.limits import MAX_FIELD_CHARS
from profiles.traffic.profile import PrefixReuse

Format = Literal["csv", "jsonl", "json", "parquet", "xlsx"]


@dataclass
class Source:
    fmt: Format
    columns: list[str]  # the file's column names, in order
    read: Callable[[list[str]], pa.Table]  # the selected columns (bounded)
    line_of: Callable[[list[int]], dict[int, int]] = lambda rows: {}  # 1-based data rows -> file lines
    line_kind: str = "line"
    delimiter: str | None = None
    decimal: str | None = None
    label: str | None = None  # a recognised result file (vllm bench, guidellm): the columns are synthetic
    notes: tuple[str, ...] = ()
    string_cols: set[str] = field(default_factory=set)  # columns to read as text (CSV: no type inference)
    stream: Callable[[list[str]], Iterable[pa.Table]] | None = None  # bounded pieces, in order (CSV)
    prefix_reuse: PrefixReuse | None = None  # a trace with prompt block hashes (Mooncake): its prefix-reuse share



def json_scalar_type(v: Any) -> pa.DataType | None:
    if isinstance(v, bool):
        return pa.bool_()
    if isinstance(v, (int, float)):
        return pa.float64()
    if isinstance(v, str):
        return pa.string()
    return None


def records_table(records_cols: dict[str, list], cols: list[str]) -> pa.Table:
    arrays = []
    for c in cols:
        vals = records_cols[c]
        try:
            arr = pa.array(vals)
            if pa.types.is_nested(arr.type) or pa.types.is_struct(arr.type):
                raise TypeError
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            arr = pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)[:MAX_FIELD_CHARS + 1])
                            for v in vals], pa.string())
        arrays.append(arr)
    return pa.table(arrays, names=cols)

