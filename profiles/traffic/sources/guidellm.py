"""A guidellm benchmark report: the per-request records (prompt_tokens and output_tokens) of its successful
requests, wherever they sit in the document (benchmarks[].requests.successful today); errored and incomplete
requests are left out (they produced no, or partial, output). The report is streamed (ijson events): only the
records' time and token values are kept, and the events walked are capped."""

from __future__ import annotations

from typing import Any

import ijson

from profiles.traffic.errors import _cut, _fail
from profiles.traffic.limits import MAX_COLUMNS, MAX_ROWS
from profiles.traffic.sources.base import Source, _records_table

LABEL = "guidellm benchmark report (per request)"
# JSON events walked (~0.3 us each): a 32 MiB report of ~20-key requests has ~3 million
MAX_EVENTS = 4_000_000
TIME_KEYS = ("start_time", "request_start_time", "first_token_time", "end_time", "timestamp")
KEPT = ("prompt_tokens", "output_tokens") + TIME_KEYS
SKIPPED = ("errored", "incomplete")  # failed requests produced no (or partial) output
_NESTED = object()  # a key whose value is an object or a list
_SCALAR = frozenset(("string", "number", "boolean", "null"))


class _Frame:
    __slots__ = ("is_map", "fields", "key", "keys", "found", "skip")

    def __init__(self, is_map: bool, found: int, skip: bool):
        self.is_map = is_map
        self.fields: dict[str, Any] = {}
        self.key: str | None = None
        self.keys = 0
        self.found = found  # records found before this object opened (an enclosing record replaces them)
        self.skip = skip  # inside an errored or incomplete list


def read(data: bytes) -> dict[str, list] | None:
    """Columns of the per-request records in a guidellm report (objects carrying prompt_tokens and output_tokens
    whose output_tokens is not an object): prompt_tokens, output_tokens and each of TIME_KEYS; None when there
    are none."""
    cols: dict[str, list] = {k: [] for k in KEPT}
    stack: list[_Frame] = []
    events = 0
    try:
        for _prefix, event, value in ijson.parse(data, use_float=True):
            events += 1
            if events > MAX_EVENTS:
                raise _fail(f"a guidellm report of at most {MAX_EVENTS:,} JSON values (this one has more)")
            top = stack[-1] if stack else None
            if event == "map_key":
                top.key = value
                top.keys += 1
            elif event in _SCALAR:
                if top is not None and top.is_map and not top.skip and top.key in KEPT:
                    top.fields[top.key] = value
            elif event in ("start_map", "start_array"):
                skip = top is not None and (top.skip or (top.is_map and top.key in SKIPPED))
                if top is not None and top.is_map and top.key in KEPT:
                    top.fields[top.key] = {} if event == "start_map" else _NESTED
                stack.append(_Frame(event == "start_map", len(cols["prompt_tokens"]), skip))
            else:
                node = stack.pop()
                f = node.fields
                if node.is_map and not node.skip and node.keys <= MAX_COLUMNS and "prompt_tokens" in f \
                        and "output_tokens" in f and not isinstance(f["output_tokens"], dict):
                    for k in KEPT:
                        del cols[k][node.found:]
                        v = f.get(k)
                        cols[k].append(None if v is _NESTED or isinstance(v, dict) else v)
                    if len(cols["prompt_tokens"]) > MAX_ROWS:
                        raise _fail(f"at most {MAX_ROWS:,} requests (this report has more)")
    except ijson.JSONError as exc:
        raise _fail(f"a JSON document ({_cut(str(exc).splitlines()[0] if str(exc) else 'not JSON', 200)})") from None
    return cols if cols["prompt_tokens"] else None


def source(cols: dict[str, list]) -> Source:
    """The report's requests as (timestamp, prompt_tokens, output_tokens)."""
    tkey = next((k for k in TIME_KEYS if any(v is not None for v in cols[k][:1000])), None)
    n = len(cols["prompt_tokens"])
    rows = {"timestamp": cols[tkey] if tkey else [None] * n, "prompt_tokens": cols["prompt_tokens"],
            "output_tokens": cols["output_tokens"]}
    tbl = _records_table(rows, ["timestamp", "prompt_tokens", "output_tokens"])
    notes = (f"guidellm report: {n:,} successful requests; times from '{tkey}'. The arrival "
             "rate is the benchmark's, not your production traffic's.",)
    return Source("json", tbl.column_names, lambda cols: tbl.select(cols), label=LABEL, notes=notes)
