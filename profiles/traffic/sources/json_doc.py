"""A .json upload: JSON lines in a .json file, or one JSON document parsed whole within MAX_JSON_DOC_BYTES (32 MiB):
a vllm bench serve result, a JSON array of request records, or a guidellm report."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from profiles.traffic.errors import _fail
from profiles.traffic.guards import _check_utf8
from profiles.traffic.limits import MAX_COLUMNS, MAX_JSON_DOC_BYTES, MAX_ROWS
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources import guidellm, vllm_bench
from profiles.traffic.sources.base import Source, _records_table
from profiles.traffic.sources.jsonl import _jsonl_source


def _load(data: bytes) -> Any:
    """The whole document, parsed once it is known to be at most MAX_JSON_DOC_BYTES of UTF-8."""
    if len(data) > MAX_JSON_DOC_BYTES:
        raise _fail(f"a JSON document of at most {MAX_JSON_DOC_BYTES // 2**20} MiB (this one is "
                    f"{len(data) / 2**20:.1f} MiB); export JSON lines (one request per line) instead")
    _check_utf8(data, 0)
    try:
        return json.loads(data)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise _fail(f"a JSON document ({getattr(exc, 'msg', type(exc).__name__)})", line=line,
                    row=None) from None


def _is_json_lines(data: bytes) -> bool:
    stripped = data.lstrip()
    first_nl = stripped.find(b"\n")
    # One JSON object per line in a .json file: read as JSON lines.
    if stripped[:1] == b"{" and first_nl > 0:
        try:
            if isinstance(json.loads(stripped[:first_nl]), dict):
                return True
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
            pass
    return stripped[:1] == b"{" and first_nl < 0 and b'"guidellm' not in data[:65536] and b'"benchmarks"' not in data


def _json_doc_source(data: bytes, options: ParseOptions) -> Source:
    bench = vllm_bench.looks_like(data)
    lines = _is_json_lines(data)
    # a vllm bench result written on one line looks like JSON lines: it is read as the one document it is
    if lines and not (bench and b"\n" not in data.strip()):
        return _jsonl_source(data, options)
    doc = _load(data)
    src = vllm_bench.source(doc) if bench else None
    if src is not None:
        return src
    if lines:
        return _jsonl_source(data, options)
    label = None
    if isinstance(doc, list):
        records = doc
        if not all(isinstance(r, dict) for r in records[:1000]):
            raise _fail('a JSON array of objects [{"column": value, ...}, ...]')
    else:
        records = guidellm.records(doc) if isinstance(doc, dict) else None
        if records is None:
            raise _fail("JSON lines (one request per line), a JSON array of requests, a vllm bench serve result "
                        "(input_lens, output_lens) or a guidellm report")
        label = guidellm.LABEL
    if len(records) > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} rows (this file has {len(records):,})")
    records = [r for r in records if isinstance(r, dict)]
    if not records:
        raise _fail("at least one request record")
    names: list[str] = list(dict.fromkeys(k for r in records[:1000] for k in r))
    if len(names) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} keys per record (found {len(names):,})")
    if label == guidellm.LABEL:
        return guidellm.source(records, names)

    def read(cols: list[str]) -> pa.Table:
        return _records_table({c: [r.get(c) for r in records] for c in cols}, cols)

    return Source("json", names, read, line_of=lambda rows: {})
