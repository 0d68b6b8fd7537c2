"""JSON lines (one request object per line): before any line is parsed, every line is within MAX_RECORD_BYTES and
there are at most MAX_ROWS of them; the first record sets the columns (at most MAX_COLUMNS keys); pyarrow reads the
selected keys when their types are plain, else line by line (mixed types, or a bad line to name)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.json as pajson

from profiles.traffic.errors import fail
from profiles.traffic.guards import check_utf8, long_lines, size_text
from profiles.traffic.limits import (
    MAX_COLUMNS,
    MAX_FIELD_CHARS,
    MAX_HEADER_BYTES,
    MAX_RECORD_BYTES,
    MAX_ROWS,
    MAX_VALUE_CHARS,
)
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources import mooncake
from profiles.traffic.sources.base import Source, json_scalar_type, records_table


def jsonl_source(data: bytes, options: ParseOptions) -> Source:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while start < len(data) and data[start:start + 1] in b" \t\r\n":
        start += 1
    if start >= len(data):
        raise fail("a non-empty file (this one is only blank)")
    nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    if nl < 0 and len(data) - start > MAX_HEADER_BYTES:
        raise fail(f"one JSON object per line, the first within {MAX_HEADER_BYTES // 2**20} MiB", line=1)
    check_utf8(data, start)
    _check_lines(data, start)
    first = data[start: nl if nl >= 0 else len(data)]
    try:
        rec = json.loads(first)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise fail(f"one JSON object per line ({getattr(exc, 'msg', type(exc).__name__)})", row=1,
                    value=first[:MAX_VALUE_CHARS + 1], line=1) from None
    if not isinstance(rec, dict):
        raise fail('a JSON object {"column": value, ...} on each line', row=1, value=first[:MAX_VALUE_CHARS + 1],
                    line=1)
    if len(rec) > MAX_COLUMNS:
        raise fail(f"at most {MAX_COLUMNS:,} keys per record (the first has {len(rec):,})", row=1, line=1)
    names = [str(k) for k in rec]
    blank_lines = b"\n\n" in data or b"\n\r\n" in data or b"\n " in data

    def line_of(rows: list[int]) -> dict[int, int]:
        want = set(rows)
        if not want:
            return {}
        if not blank_lines and start == 0:
            return {r: r for r in want}
        out, row, line, pos, top = {}, 0, 0, 0, max(want)
        while pos < len(data) and row < top:
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            line += 1
            if data[pos:end].strip():
                row += 1
                if row in want:
                    out[row] = line
            pos = end + 1
        return out

    def read(cols: list[str]) -> pa.Table:
        schema = {c: json_scalar_type(rec.get(c)) for c in cols}
        if all(t is not None for t in schema.values()):
            try:
                return pajson.read_json(
                    pa.BufferReader(pa.py_buffer(data).slice(start)),
                    read_options=pajson.ReadOptions(block_size=4 * MAX_RECORD_BYTES),
                    parse_options=pajson.ParseOptions(explicit_schema=pa.schema(list(schema.items())),
                                                      unexpected_field_behavior="ignore"))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        return _jsonl_slow(data, start, cols)

    if mooncake.looks_like(rec):
        return mooncake.source(data, start, line_of)
    return Source("jsonl", names, read, line_of)


def _check_lines(data: bytes, start: int) -> None:
    """Before any line is parsed: each line at most MAX_RECORD_BYTES (numpy over the bytes) and at most MAX_ROWS
    lines that are not blank."""
    for off, length, _ in long_lines(data, start, MAX_RECORD_BYTES):
        line = data.count(b"\n", 0, off) + 1
        raise fail(f"JSON lines of at most {size_text(MAX_RECORD_BYTES)} each (this one has {length:,} bytes; only "
                    "token counts are needed: drop long text fields)", row=line - data.count(b"\n", 0, start),
                    value=data[off:off + MAX_VALUE_CHARS + 1], line=line)
    lines = data.count(b"\n", start) + 1
    if lines > MAX_ROWS:
        lines -= data.count(b"\n\n", start) + data.count(b"\n\r\n", start) + (data.endswith(b"\n"))
        if lines > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows (this file has {lines:,} lines); sample the log and add a "
                        "'weight' column, or upload an aggregated mix table")


def _jsonl_slow(data: bytes, start: int, cols: list[str]) -> pa.Table:
    """Line by line: mixed types per column, or a bad line to name. Keeps only the selected keys."""
    out: dict[str, list] = {c: [] for c in cols}
    row, pos, line = 0, start, 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        raw = data[pos:end]
        pos = end + 1
        line += 1
        if not raw.strip():
            continue
        row += 1
        if row > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows")
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
            raise fail(f"one JSON object per line ({getattr(exc, 'msg', type(exc).__name__)})", row=row,
                        value=raw[:MAX_VALUE_CHARS + 1], line=line) from None
        if not isinstance(rec, dict):
            raise fail('a JSON object {"column": value, ...}', row=row, value=raw[:MAX_VALUE_CHARS + 1], line=line)
        for c in cols:
            v = rec.get(c)
            if isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                raise fail(f"a value of at most {MAX_FIELD_CHARS:,} characters ({len(v):,})", row=row, column=c,
                            value=v, line=line)
            out[c].append(v)
    return records_table(out, cols)

