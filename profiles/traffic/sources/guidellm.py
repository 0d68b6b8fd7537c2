"""A guidellm benchmark report: the per-request records (prompt_tokens and output_tokens) of its successful
requests, wherever they sit in the document (benchmarks[].requests.successful today); errored and incomplete
requests are left out (they produced no, or partial, output). The report is streamed (ijson events): only the
records' time and token values are kept, and the events walked are capped."""

from __future__ import annotations

from itertools import islice

import ijson

from profiles.traffic.errors import clip, fail
from profiles.traffic.limits import MAX_COLUMNS, MAX_ROWS
from profiles.traffic.sources.base import Source, records_table

LABEL = "guidellm benchmark report (per request)"
# JSON events walked (~0.15 us each): a request takes ~40-80, so ~40,000-75,000 requests
MAX_EVENTS = 3_000_000
TIME_KEYS = ("start_time", "request_start_time", "first_token_time", "end_time", "timestamp")
KEPT = ("prompt_tokens", "output_tokens") + TIME_KEYS
SKIPPED = ("errored", "incomplete")  # failed requests produced no (or partial) output
_NESTED = object()  # a key whose value is an object or a list
_SCALAR = frozenset(("string", "number", "boolean", "null"))


def read(data: bytes) -> dict[str, list] | None:
    """Columns of the per-request records in a guidellm report (objects carrying prompt_tokens and output_tokens
    whose output_tokens is not an object): prompt_tokens, output_tokens and each of TIME_KEYS; None when there
    are none."""
    cols: dict[str, list] = {k: [] for k in KEPT}
    # one frame per open object or list: [is object, kept fields (or None), current key, keys seen, records
    # found before it opened (an enclosing record replaces them), inside an errored or incomplete subtree]
    stack: list[list] = []
    events = ijson.basic_parse(data, use_float=True)
    try:
        for event, value in islice(events, MAX_EVENTS):
            if event == "map_key":
                top = stack[-1]
                top[2] = value
                top[3] += 1
            elif event in _SCALAR:
                if stack:
                    top = stack[-1]
                    if top[0] and top[2] in KEPT and not top[5]:
                        if top[1] is None:
                            top[1] = {}
                        top[1][top[2]] = value
            elif event == "start_map" or event == "start_array":
                skip = False
                if stack:
                    top = stack[-1]
                    skip = top[5] or (top[0] and top[2] in SKIPPED)
                    if top[0] and top[2] in KEPT:
                        if top[1] is None:
                            top[1] = {}
                        top[1][top[2]] = {} if event == "start_map" else _NESTED
                stack.append([event == "start_map", None, None, 0, len(cols["prompt_tokens"]), skip])
            else:
                is_map, f, _key, keys, found, skip = stack.pop()
                if is_map and f and not skip and keys <= MAX_COLUMNS and "prompt_tokens" in f \
                        and "output_tokens" in f and not isinstance(f["output_tokens"], dict):
                    for k in KEPT:
                        del cols[k][found:]
                        v = f.get(k)
                        cols[k].append(None if v is _NESTED or isinstance(v, dict) else v)
                    if len(cols["prompt_tokens"]) > MAX_ROWS:
                        raise fail(f"at most {MAX_ROWS:,} requests (this report has more)")
        if next(events, None) is not None:
            raise fail(f"a guidellm report of at most {MAX_EVENTS:,} JSON values (this one has more)")
    except ijson.JSONError as exc:
        raise fail(f"a JSON document ({clip(str(exc).splitlines()[0] if str(exc) else 'not JSON', 200)})") from None
    return cols if cols["prompt_tokens"] else None


def source(cols: dict[str, list]) -> Source:
    """The report's requests as (timestamp, prompt_tokens, output_tokens)."""
    tkey = next((k for k in TIME_KEYS if any(v is not None for v in cols[k][:1000])), None)
    n = len(cols["prompt_tokens"])
    rows = {"timestamp": cols[tkey] if tkey else [None] * n, "prompt_tokens": cols["prompt_tokens"],
            "output_tokens": cols["output_tokens"]}
    tbl = records_table(rows, ["timestamp", "prompt_tokens", "output_tokens"])
    notes = (f"guidellm report: {n:,} successful requests; times from '{tkey}'. The arrival "
             "rate is the benchmark's, not your production traffic's.",)
    return Source("json", tbl.column_names, lambda cols: tbl.select(cols), label=LABEL, notes=notes)
