"""A guidellm benchmark report: the per-request records (prompt_tokens and output_tokens) of its successful
requests, wherever they sit in the document (benchmarks[].requests.successful today); errored and incomplete
requests are left out (they produced no, or partial, output)."""

from __future__ import annotations

from typing import Any

from profiles.traffic.sources.base import Source, _records_table

LABEL = "guidellm benchmark report (per request)"
MAX_NODES = 5_000_000  # nodes walked in the parsed document (it is at most MAX_JSON_DOC_BYTES)
TIME_KEYS = ("start_time", "request_start_time", "first_token_time", "end_time", "timestamp")


def records(doc: Any) -> list[dict] | None:
    """Per-request records in a guidellm report: dicts carrying prompt_tokens and output_tokens (under
    benchmarks[].requests.successful, or wherever they are)."""
    found: list[dict] = []
    stack = [doc]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            break
        if isinstance(node, dict):
            if "prompt_tokens" in node and "output_tokens" in node and not isinstance(node["output_tokens"], dict):
                found.append(node)
                continue
            for k, v in node.items():
                if k in ("errored", "incomplete"):
                    continue  # failed requests produced no (or partial) output
                stack.append(v)
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return found or None



def source(records: list[dict], names: list[str]) -> Source:
    """The report's requests as (timestamp, prompt_tokens, output_tokens); `names` are the records' keys."""
    tkey = next((k for k in TIME_KEYS if k in names), None)
    rows = {"timestamp": [r.get(tkey) if tkey else None for r in records],
            "prompt_tokens": [r.get("prompt_tokens") for r in records],
            "output_tokens": [r.get("output_tokens") for r in records]}
    tbl = _records_table(rows, ["timestamp", "prompt_tokens", "output_tokens"])
    notes = (f"guidellm report: {len(records):,} successful requests; times from '{tkey}'. The arrival "
             "rate is the benchmark's, not your production traffic's.",)
    return Source("json", tbl.column_names, lambda cols: tbl.select(cols), label=LABEL, notes=notes)
