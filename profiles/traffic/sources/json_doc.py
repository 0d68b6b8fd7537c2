"""A .json upload: JSON lines in a .json file, or one JSON document of at most MAX_JSON_DOC_BYTES (32 MiB): a vllm
bench serve result, a JSON array of request records, or a guidellm report. A document is never built whole: it is
streamed with ijson (yajl), one record at a time, the rows, keys and each record's bytes capped as they come (a
JSON document grows 25-35x once built as Python objects)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import ijson
import pyarrow as pa

from profiles.traffic.errors import clip, fail
from profiles.traffic.guards import check_json_tokens, check_utf8, size_text
from profiles.traffic.limits import (
    MAX_COLUMNS,
    MAX_HEADER_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_DOC_BYTES,
    MAX_JSON_NUMBER_CHARS,
    MAX_RECORD_BYTES,
    MAX_ROWS,
)
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources import guidellm, vllm_bench
from profiles.traffic.sources.base import Source, records_table
from profiles.traffic.sources.jsonl import jsonl_source

FEED_BYTES = 64 << 10  # bytes handed to the streaming parser at a time
NAME_RECORDS = 1000  # the columns are the keys of the first records


_NOT_SPACE = re.compile(rb"[^ \t\r\n]")


def _first_byte(data: bytes) -> int:
    """Offset of the first byte that is not JSON white space (or len(data))."""
    m = _NOT_SPACE.search(data)
    return m.start() if m else len(data)


def _one_line(data: bytes) -> bool:
    """No line break between the first and the last byte that is not white space (nothing is copied)."""
    tail = data[-(1 << 16):]
    end = len(data) - (len(tail) - len(tail.rstrip()))
    return data.find(b"\n", _first_byte(data), end) < 0


def _is_json_lines(data: bytes) -> bool:
    start = _first_byte(data)
    first_nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    # One JSON object per line in a .json file: read as JSON lines (the first line is parsed only within 1 MiB).
    if data[start:start + 1] == b"{" and first_nl > start:
        try:
            if isinstance(json.loads(data[start:first_nl]), dict):
                return True
        except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, an int over 4,300 digits
            pass
    return (data[start:start + 1] == b"{" and data.find(b"\n", start) < 0 and b'"guidellm' not in data[:65536]
            and b'"benchmarks"' not in data)


def _stream_error(exc: Exception):
    return fail(f"a JSON document ({clip(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 200)})")


class _Feed:
    """The document's bytes for ijson, FEED_BYTES at a time: `mark` is where the last element was complete, and
    reading on more than MAX_RECORD_BYTES past it refuses the element still open (the elements of an array follow
    each other, so the bytes read since the last one bound the open one)."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.mark = data, 0, 0

    def read(self, n: int) -> bytes:
        if self.pos - self.mark > MAX_RECORD_BYTES + FEED_BYTES:
            raise fail(f"JSON records of at most {size_text(MAX_RECORD_BYTES)} each (one record runs past byte "
                        f"{self.pos:,}); only token counts are needed: drop long text fields")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += len(chunk)
        return chunk


def _array_records(data: bytes) -> Iterator[object]:
    """The elements of a top-level JSON array, one at a time, each built only once it is known to be within
    MAX_RECORD_BYTES (ijson's C backend builds them: ~0.15 us for a small record)."""
    feed = _Feed(data)
    try:
        for item in ijson.items(feed, "item", use_float=True, buf_size=FEED_BYTES):
            feed.mark = feed.pos
            yield item
    except ijson.JSONError as exc:
        raise _stream_error(exc) from None


def json_doc_source(data: bytes, options: ParseOptions) -> Source:
    bench = vllm_bench.looks_like(data)
    lines = _is_json_lines(data)
    # a vllm bench result written on one line looks like JSON lines: it is read as the one document it is
    if lines and not (bench and _one_line(data)):
        return jsonl_source(data, options)
    if len(data) > MAX_JSON_DOC_BYTES:
        raise fail(f"a JSON document of at most {size_text(MAX_JSON_DOC_BYTES)} (this one has {len(data):,} "
                    "bytes); export JSON lines (one request per line) instead")
    check_utf8(data, 0)
    check_json_tokens(data, MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS)  # before ijson: its cost is in depth, digits
    src = vllm_bench.source(data) if bench else None
    if src is not None:
        return src
    if lines:
        return jsonl_source(data, options)
    first = data[_first_byte(data):][:1]
    if first == b"{":
        rows = guidellm.read(data)
        if rows is None:
            raise fail("JSON lines (one request per line), a JSON array of requests, a vllm bench serve result "
                        "(input_lens, output_lens) or a guidellm report")
        return guidellm.source(rows)
    if first != b"[":
        raise fail('a JSON array of objects [{"column": value, ...}, ...] or an object')
    rows = 0
    names: dict[str, None] = {}
    records = _array_records(data)
    for rec in records:
        rows += 1
        if not isinstance(rec, dict):
            raise fail('a JSON array of objects [{"column": value, ...}, ...]', row=rows, value=clip(repr(rec), 80))
        names.update(dict.fromkeys(map(str, rec)))
        if len(names) > MAX_COLUMNS:
            raise fail(f"at most {MAX_COLUMNS:,} keys per record (found {len(names):,})")
        if rows >= NAME_RECORDS:
            break
    for _ in records:  # the rest is only counted
        rows += 1
        if rows > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows (this file has more)")
    if not names:
        raise fail("at least one request record")

    def read(cols: list[str]) -> pa.Table:
        vals: dict[str, list] = {c: [] for c in cols}
        for rec in _array_records(data):
            if isinstance(rec, dict):
                for c in cols:
                    vals[c].append(rec.get(c))
        return records_table(vals, cols)

    return Source("json", list(names), read, line_of=lambda rows: {})
