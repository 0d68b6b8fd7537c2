"""Mooncake traces: JSON lines in the format Mooncake published with its FAST'25 paper
(github:kvcache-ai/Mooncake/FAST25-release/traces/conversation_trace.jsonl@a2a4b18ac537fd798d50e6e9f57031ce86419a37;
also read by NVIDIA AIPerf, Dynamo and GuideLLM), one request a line:

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, ..., 13]}

timestamp: the arrival time in milliseconds since the first request ("The arrival time (in milliseconds) of the
request since the first request": github:ai-dynamo/dynamo/benchmarks/data_generator/README.md@1f92c6e1f62963a4
241b89f1eaa38596db338197); input_length / output_length: prompt and output tokens; hash_ids: "the remapped block
hash" (Mooncake's FAST25-release/README.md), one id per block of 512 prompt tokens ("the block_size (the page size
of the KV cache) is assumed to be 512", the Dynamo README above); two requests sharing an id share the prompt prefix
up to the end of that block. In Mooncake's conversation trace every request has ceil(input_length / 512) ids, so
the last block holds input_length - 512 (n - 1) tokens.

Prefix reuse: the share of prompt tokens whose block id was seen earlier in the trace (an earlier request, or an
earlier position of the same one). A block's tokens are min(512, input_length - 512 i) for block i (0-based, never
below 0); prompt tokens past the last id count as not cached. The cache is assumed large enough to keep every block
seen before (no eviction): the share is an upper bound on what a real prefix cache serves.

Bounded like every JSON-lines upload (each line <= MAX_RECORD_BYTES and at most MAX_ROWS lines, checked by the
JSON-lines reader before this one runs); pyarrow reads the lines a block at a time and only the three lengths are
kept (8 bytes each a request); the ids seen are kept as one sorted int64 array, at most MAX_HASH_BLOCKS of them
(beyond: the share is computed over the requests before the cap, and the note says so). A request holds at most
ceil(input_length / 512) ids (99 requests of 130,000 ids each cost 47 s and 874 MB before this bound), and a
timestamp is never negative. Nothing but the first line is read when the file is opened (the Traffic page's first
look): the requests and their prefix reuse are read when the columns are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from profiles.traffic.errors import fail
from profiles.traffic.limits import MAX_RECORD_BYTES, MAX_ROWS, MAX_TOKENS_PER_REQUEST, MAX_VALUE_CHARS
from profiles.traffic.profile import PrefixReuse
from profiles.traffic.sources.base import Source, records_table

LABEL = "Mooncake trace"
KEYS = frozenset({"timestamp", "input_length", "output_length", "hash_ids"})
BLOCK_TOKENS = 512  # tokens per hash id (the KV-cache page size the published traces assume)
MAX_HASH_BLOCKS = 1 << 24  # distinct ids kept (128 MiB as int64); ~8.6e9 prompt tokens of distinct prefixes
MS_PER_S = 1000.0
COLUMNS = ("timestamp", "input_length", "output_length")
_SCHEMA = pa.schema([("timestamp", pa.float64()), ("input_length", pa.float64()), ("output_length", pa.float64()),
                     ("hash_ids", pa.list_(pa.int64()))])
ASSUMPTION = ("the cache is assumed to keep every earlier block (no eviction): an upper bound on what a real "
              "prefix cache serves")


def looks_like(first: dict) -> bool:
    """The first record carries Mooncake's four keys, hash_ids as a list."""
    return KEYS <= set(first) and isinstance(first.get("hash_ids"), list)


class _Reuse:
    """The prefix-reuse share, one batch of requests at a time (in file order)."""

    def __init__(self) -> None:
        self.seen = np.empty(0, np.int64)  # sorted, unique
        self.cached = 0.0
        self.prompt = 0.0
        self.blocks = 0
        self.requests = 0
        self.capped_at: int | None = None  # requests counted when the cap on distinct ids was reached

    def add(self, input_length: np.ndarray, offsets: np.ndarray, ids: np.ndarray) -> None:
        if self.capped_at is not None:
            return
        p = np.where(np.isfinite(input_length) & (input_length > 0), input_length, 0.0)
        counts = np.diff(offsets)
        row = np.repeat(np.arange(len(counts)), counts)
        pos = np.arange(ids.size) - np.repeat(offsets[:-1] - offsets[0], counts)  # block index within its prompt
        tokens = np.clip(p[row] - BLOCK_TOKENS * pos, 0.0, float(BLOCK_TOKENS))
        uniq, first = np.unique(ids, return_index=True)
        new = np.zeros(ids.size, bool)
        new[first] = True  # the first time an id appears in this batch ...
        if self.seen.size:
            at = np.clip(np.searchsorted(self.seen, ids), 0, self.seen.size - 1)
            new &= self.seen[at] != ids  # ... and never before it
        merged = np.union1d(self.seen, uniq)
        if merged.size > MAX_HASH_BLOCKS:
            self.capped_at = self.requests
            return
        self.seen = merged
        self.cached += float(tokens[~new].sum())
        self.prompt += float(p.sum())
        self.blocks += int(ids.size)
        self.requests += len(counts)

    def result(self, rows: int) -> PrefixReuse | None:
        if not self.prompt > 0:
            return None
        share = min(max(self.cached / self.prompt, 0.0), 1.0)
        note = (f"{share:.1%} of {self.prompt:,.0f} prompt tokens sit in {BLOCK_TOKENS}-token blocks whose hash id "
                f"appeared earlier in the trace ({self.blocks:,} blocks over {self.requests:,} requests); "
                f"{ASSUMPTION}")
        if self.capped_at is not None:
            note += (f"; counted over the first {self.requests:,} of {rows:,} requests (at most "
                     f"{MAX_HASH_BLOCKS:,} distinct ids are kept)")
        return PrefixReuse(share=share, cached_tokens=self.cached, prompt_tokens=self.prompt,
                           block_tokens=BLOCK_TOKENS, blocks=self.blocks, requests=self.requests,
                           source=f"{LABEL} hash_ids", note=note)


def _max_ids(input_length: np.ndarray) -> np.ndarray:
    """The block ids a request may hold: one per started block of BLOCK_TOKENS prompt tokens; a missing or
    unreadable input_length (refused later, naming its row) allows as many as MAX_TOKENS_PER_REQUEST tokens."""
    p = np.where(np.isfinite(input_length), np.clip(input_length, 0.0, MAX_TOKENS_PER_REQUEST),
                 MAX_TOKENS_PER_REQUEST)
    return np.ceil(p / BLOCK_TOKENS).astype(np.int64)


def _check_rows(first_row: int, ts: np.ndarray, input_length: np.ndarray, counts: np.ndarray,
                line_of: Callable[[list[int]], dict[int, int]]) -> None:
    """Refuse the first request (rows first_row + 1, ...) with a negative timestamp or more hash ids than its
    input_length has blocks, naming row, column and value."""
    neg = np.flatnonzero(ts < 0)
    over = np.flatnonzero(counts > _max_ids(input_length))
    if neg.size and (not over.size or neg[0] <= over[0]):
        row = first_row + int(neg[0]) + 1
        raise fail("a timestamp of 0 or more: milliseconds since the first request (Mooncake's format)", row=row,
                    column="timestamp", value=float(ts[neg[0]]), line=line_of([row]).get(row))
    if over.size:
        i = int(over[0])
        row = first_row + i + 1
        raise fail(f"at most ceil(input_length / {BLOCK_TOKENS}) = {int(_max_ids(input_length[i:i + 1])[0]):,} "
                    f"block hash ids (one per {BLOCK_TOKENS} prompt tokens; input_length is {input_length[i]:,.0f})",
                    row=row, column="hash_ids", value=f"{int(counts[i]):,} ids", line=line_of([row]).get(row))


def _fast(data: bytes, start: int, line_of: Callable[[list[int]], dict[int, int]]) -> tuple[pa.Table, _Reuse]:
    """pyarrow's JSON reader, a block of lines at a time; raises pa.ArrowInvalid (and friends) on a value of
    another type, then the slow path names the line."""
    reuse = _Reuse()
    rows = 0
    kept: list[pa.RecordBatch] = []
    reader = pajson.open_json(pa.BufferReader(pa.py_buffer(data).slice(start)),
                              read_options=pajson.ReadOptions(block_size=4 * MAX_RECORD_BYTES),
                              parse_options=pajson.ParseOptions(explicit_schema=_SCHEMA,
                                                                unexpected_field_behavior="ignore"))
    for batch in reader:
        hashes = batch.column(3)
        if hashes.null_count or hashes.values.null_count:
            raise pa.ArrowInvalid("a missing hash id")
        offsets = hashes.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        ids = hashes.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_numpy(zero_copy_only=False)
        inp = batch.column(1).fill_null(np.nan).to_numpy(zero_copy_only=False)
        ts = batch.column(0).fill_null(0.0).to_numpy(zero_copy_only=False)
        _check_rows(rows, ts, inp, np.diff(offsets), line_of)
        rows += batch.num_rows
        reuse.add(inp, offsets, ids)
        kept.append(pa.RecordBatch.from_arrays([pc.divide(batch.column(0), MS_PER_S), batch.column(1),
                                                batch.column(2)], names=list(COLUMNS)))
    tbl = pa.Table.from_batches(kept, pa.schema([(c, pa.float64()) for c in COLUMNS]))
    return tbl, reuse


def _slow(data: bytes, start: int, line_of: Callable[[list[int]], dict[int, int]]) -> tuple[pa.Table, _Reuse]:
    """Line by line (a value pyarrow would not take): the first bad timestamp or hash_ids names its line; the
    lengths are kept as they are for the per-request checks to name."""
    reuse = _Reuse()
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    inp: list[float] = []
    offsets: list[int] = [0]
    ids: list[int] = []
    row = 0

    def flush() -> None:
        if len(offsets) > 1:
            reuse.add(np.asarray(inp, float), np.asarray(offsets, np.int64), np.asarray(ids, np.int64))
        inp.clear()
        ids.clear()
        offsets[:] = [0]

    def bad(expected: str, column: str, value) -> Exception:
        return fail(expected, row=row, column=column, value=str(value)[:MAX_VALUE_CHARS + 1],
                     line=line_of([row]).get(row))

    for raw in _lines(data, start):
        row += 1
        if row > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows")
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
            raise bad(f"one JSON object per line ({getattr(exc, 'msg', type(exc).__name__)})", None, raw) from None
        if not isinstance(rec, dict):
            raise bad('a JSON object {"timestamp": ..., "input_length": ..., ...}', None, raw)
        ts = rec.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))):
            raise bad("a number: milliseconds since the trace began (Mooncake's timestamp)", "timestamp", ts)
        h = rec.get("hash_ids")
        if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) and -2**63 <= x < 2**63
                                              for x in h):
            raise bad("a list of integer block hash ids (one per 512 prompt tokens)", "hash_ids", h)
        p = rec.get("input_length")
        p = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else np.nan
        _check_rows(row - 1, np.array([0.0 if ts is None else float(ts)]), np.array([p]), np.array([len(h)]),
                    line_of)
        cols["timestamp"].append(None if ts is None else ts / MS_PER_S)
        for c in COLUMNS[1:]:
            cols[c].append(rec.get(c))
        inp.append(p)
        ids.extend(h)
        offsets.append(len(ids))
        if len(offsets) > 65_536:
            flush()
    flush()
    return records_table(cols, list(COLUMNS)), reuse


def _lines(data: bytes, start: int) -> Iterable[bytes]:
    pos = start
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        raw = data[pos:end]
        pos = end + 1
        if raw.strip():
            yield raw


def source(data: bytes, start: int, line_of: Callable[[list[int]], dict[int, int]]) -> Source:
    """The trace's requests (timestamp in seconds since the trace began, input_length, output_length); its
    prefix-reuse share is set on the source once they are read. `start`: the first byte of the first line;
    line_of: data rows -> file lines."""
    read_once: list[pa.Table] = []

    def read(cols: list[str]) -> pa.Table:
        if not read_once:
            try:
                tbl, reuse = _fast(data, start, line_of)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
                tbl, reuse = _slow(data, start, line_of)
            src.prefix_reuse = reuse.result(tbl.num_rows)
            read_once.append(tbl)
        return read_once[0].select(cols)

    notes = ("Mooncake trace: timestamps are milliseconds since the first request (Mooncake's format), read as "
             "such.",)
    src = Source("jsonl", list(COLUMNS), read, line_of, label=LABEL, notes=notes)
    return src
