"""Prompts for a calibration run from an uploaded traffic export (CSV, JSONL or Parquet) with a
`prompt_text` column and an optional `workload` column. The planner's traffic parser discards prompt text
(profiles/traffic/); only a calibration run uses it, and only in memory (never stored: the store keeps a
hash of the prompt set).

The file goes through the traffic upload's bounded readers (profiles.traffic.sources.open_source: format,
header and metadata checks before anything is decoded) under smaller bounds fit for a prompt set: at most
MAX_PROMPT_UPLOAD_BYTES of file, MAX_PROMPT_LINE_BYTES per line (checked before a line is split),
MAX_PROMPT_ROWS rows, MAX_PROMPT_DECODED_BYTES of decompressed prompt and workload columns (a Parquet file's
footer, and every page header where profiles.traffic.sources.parquet_pages reads them, so a footer that
understates is caught), MAX_PROMPT_CHARS characters per prompt and MAX_UPLOAD_WORKLOADS workloads. Prompt
lengths are measured on the Arrow arrays (for a dictionary-encoded column, on its dictionary), and only the
prompts kept become Python strings: a dictionary of one long string repeated on every row is refused before it
is ever expanded. Every refusal is a ValueError naming the file, the row and column where there is one, the
value (cut) and the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from calibration.harness.engine_settings import MAX_MODEL_LEN

# A prompt and its output must fit the engine's context (MAX_MODEL_LEN tokens); a token is at least about one
# character of English or code (~4 on average), so 8,000 characters stay within 2,048 tokens with room for the
# output in all but pathological text. Longer prompts are refused, not cut: a cut prompt is not the user's.
MAX_PROMPT_CHARS = 8000
MAX_PROMPTS_PER_WORKLOAD = 64
MAX_UPLOAD_WORKLOADS = 16  # distinct workload values; at most 16 x 64 prompts are kept
MAX_PROMPT_UPLOAD_BYTES = 4 * 2**20  # a prompt sample, not a traffic log: 4 MiB holds hundreds of long prompts
MAX_PROMPT_ROWS = 20_000
# Parquet: the prompt and workload columns once decompressed, from the footer, before any page is decoded.
MAX_PROMPT_DECODED_BYTES = 64 * 2**20
MAX_PROMPT_PAGES = 2 * MAX_PROMPT_ROWS + 16  # pages per column chunk walked (a page holds at least one value)
# CSV / JSONL: a line holds a prompt (up to 4 UTF-8 bytes a character) and its other cells: the traffic readers'
# cell limit (profiles.traffic MAX_FIELD_CHARS) per line, checked before a reader splits a line into fields.
MAX_PROMPT_LINE_BYTES = 131_072
MAX_WORKLOAD_CHARS = 32  # workload names are cut to this (after lower-casing and replacing other characters)
SHOWN_CHARS = 60  # characters of a refused value quoted in an error
ALLOWED_SUFFIXES = (".csv", ".jsonl", ".ndjson", ".parquet")
WORKLOAD_RE = re.compile(r"[^a-z0-9_-]+")
PROMPT_COLUMN = "prompt_text"
WORKLOAD_COLUMN = "workload"


def _workload_name(raw: object) -> str:
    name = WORKLOAD_RE.sub("-", str(raw).strip().lower()).strip("-")[:MAX_WORKLOAD_CHARS]
    return name or "uploaded"


def _refuse(filename: str, what: str, *, row: int | None = None, column: str | None = None) -> ValueError:
    where = "".join([f", row {row:,}" if row is not None else "", f", column {column!r}" if column else ""])
    return ValueError(f"file={filename[:120]!r}{where}: {what}")


def _shown(text: str, total_chars: int) -> str:
    return repr(text[:SHOWN_CHARS]) + (f"... ({total_chars:,} characters)" if total_chars > SHOWN_CHARS else "")


def prompts_from_upload(filename: str, data: bytes, *, per_workload: int = MAX_PROMPTS_PER_WORKLOAD
                        ) -> dict[str, list[str]]:
    """{workload: [prompt, ...]} from an uploaded file (at most `per_workload` prompts per workload, the first
    ones of the file); raises ValueError naming what is wrong and the limit it broke."""
    import pyarrow as pa

    from profiles.traffic import DEFAULT_OPTIONS, TrafficError
    from profiles.traffic.sources import open_source

    if not isinstance(filename, str) or not filename.lower().endswith(ALLOWED_SUFFIXES):
        raise ValueError(f"file={str(filename)[:120]!r} not allowed: upload {', '.join(ALLOWED_SUFFIXES)}")
    if not 1 <= per_workload <= MAX_PROMPTS_PER_WORKLOAD:
        raise ValueError(f"per_workload={per_workload} not allowed: 1..{MAX_PROMPTS_PER_WORKLOAD}")
    if len(data) > MAX_PROMPT_UPLOAD_BYTES:
        raise _refuse(filename, f"size {len(data):,} bytes; at most {MAX_PROMPT_UPLOAD_BYTES:,} bytes "
                      f"({MAX_PROMPT_UPLOAD_BYTES // 2**20} MiB) allowed for a prompt set: upload a sample of the "
                      "prompts (64 per workload are used)")
    if not filename.lower().endswith(".parquet"):
        _check_line_lengths(filename, data)
    try:
        if filename.lower().endswith(".parquet"):
            _check_parquet_footer(filename, data)
        src = open_source(filename, data, DEFAULT_OPTIONS, MAX_PROMPT_UPLOAD_BYTES)
        if PROMPT_COLUMN not in src.columns:
            raise _refuse(filename, f"no {PROMPT_COLUMN!r} column; columns: "
                          f"{[str(c)[:40] for c in src.columns[:12]]}")
        cols = [PROMPT_COLUMN] + ([WORKLOAD_COLUMN] if WORKLOAD_COLUMN in src.columns else [])
        src.string_cols.update(cols)
        pieces: Iterable[Any] = src.stream(cols) if src.stream is not None else [src.read(cols)]
        out = _collect(filename, pieces, per_workload)
    except TrafficError as e:  # the bounded readers' own refusal, naming row, column and value
        raise _refuse(filename, str(e)) from None
    except MemoryError:
        raise _refuse(filename, "reading it ran out of memory: upload a smaller sample") from None
    except (pa.ArrowException, OverflowError, TypeError, KeyError, IndexError, UnicodeError, RecursionError,
            OSError, EOFError) as e:  # a reader failure not anticipated above: still one short refusal
        raise _refuse(filename, f"could not be read ({type(e).__name__}: {str(e)[:200]})") from None
    if not out:
        raise _refuse(filename, f"no non-empty {PROMPT_COLUMN} values")
    return out


def _check_line_lengths(filename: str, data: bytes) -> None:
    """Refuse a line longer than MAX_PROMPT_LINE_BYTES before any reader splits it into fields."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    bounds = np.concatenate(([-1], ends, [len(data)]))
    lengths = np.diff(bounds) - 1
    if lengths.size and int(lengths.max()) > MAX_PROMPT_LINE_BYTES:
        i = int(np.argmax(lengths))
        raise _refuse(filename, f"line {i + 1:,} has {int(lengths[i]):,} bytes; at most {MAX_PROMPT_LINE_BYTES:,} "
                      "bytes per line allowed for a prompt set")


def _check_parquet_footer(filename: str, data: bytes) -> None:
    """Rows and the decompressed size of the prompt columns, from the footer, before the reader opens the file
    (a footer that cannot be read is left to the reader, which names what is wrong)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        return
    try:
        md = pq.read_metadata(pa.BufferReader(pa.py_buffer(data)))
    except (pa.ArrowException, OSError, ValueError):
        return
    cols = [PROMPT_COLUMN, WORKLOAD_COLUMN]
    if md.num_rows > MAX_PROMPT_ROWS:
        raise _refuse(filename, f"{md.num_rows:,} rows (the file's metadata); at most {MAX_PROMPT_ROWS:,} rows "
                      "allowed for a prompt set")
    leaves = {md.schema.column(j).path.split(".")[0]: j for j in range(md.num_columns)}
    total = 0
    for c in cols:
        j = leaves.get(c)
        if j is None:
            continue
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            total += rg.column(j).total_uncompressed_size + 4 * rg.num_rows  # + dictionary indices
    used = [c for c in cols if c in leaves]
    if total > MAX_PROMPT_DECODED_BYTES:
        raise _refuse(filename, f"columns {used} take {total:,} bytes once decompressed (the file's metadata); at "
                      f"most {MAX_PROMPT_DECODED_BYTES:,} bytes allowed for a prompt set")
    try:  # the traffic readers' page-header walk, where the installed profiles.traffic has it
        from profiles.traffic.sources.parquet_pages import chunk_pages
    except ImportError:
        return
    pages = 0
    for c in used:
        for g in range(md.num_row_groups):
            got = chunk_pages(data, md.row_group(g).column(leaves[c]), max_pages=MAX_PROMPT_PAGES, column=c)
            pages += got.uncompressed_bytes
            if pages > MAX_PROMPT_DECODED_BYTES:  # a footer that understates what its pages decompress to
                raise _refuse(filename, f"columns {used}: their pages hold {pages:,} bytes or more once "
                              f"decompressed (the footer says {total:,}); at most {MAX_PROMPT_DECODED_BYTES:,} bytes "
                              "allowed for a prompt set")


def _text_lengths(filename: str, arr: Any, column: str, first_row: int) -> Any:
    """Characters per row (numpy, -1 for nulls) of a text column, measured on the dictionary when it has one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    values = arr.dictionary if pa.types.is_dictionary(arr.type) else arr
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise _refuse(filename, f"text values expected; the column holds {str(values.type)[:40]}",
                      row=first_row, column=column)
    lengths = pc.fill_null(pc.utf8_length(values), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_dictionary(arr.type):
        idx = arr.indices.to_numpy(zero_copy_only=False)
        valid = ~arr.is_null().to_numpy(zero_copy_only=False)
        out = np.full(len(arr), -1, np.int64)
        out[valid] = lengths[idx[valid].astype(np.int64)]
        return out
    return lengths


def _head(arr: Any, i: int) -> str:
    """The first characters of row `i` of a text array, without decoding the whole value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(arr.type):
        arr, i = arr.dictionary, int(arr.indices[i].as_py())
    return str(pc.utf8_slice_codeunits(arr.slice(i, 1), 0, SHOWN_CHARS)[0].as_py())


def _workloads(arr: Any | None, n: int) -> list[str]:
    """Each row's workload name (cut before it becomes a Python string); "uploaded" without the column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr is None:
        return ["uploaded"] * n
    if pa.types.is_dictionary(arr.type):
        names = _workloads(arr.dictionary, len(arr.dictionary))
        return ["uploaded" if j is None else names[j] for j in arr.indices.to_pylist()]
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    cut = pc.utf8_slice_codeunits(arr, 0, 4 * MAX_WORKLOAD_CHARS).to_pylist()
    return ["uploaded" if v is None else _workload_name(v) for v in cut]


def _collect(filename: str, pieces: Iterable[Any], per_workload: int) -> dict[str, list[str]]:
    import numpy as np

    out: dict[str, list[str]] = {}
    rows = 0
    for piece in pieces:
        for batch in piece.to_batches():
            first = rows + 1
            rows += batch.num_rows
            if rows > MAX_PROMPT_ROWS:
                raise _refuse(filename, f"more than {MAX_PROMPT_ROWS:,} rows; at most {MAX_PROMPT_ROWS:,} rows "
                              "allowed for a prompt set")
            text = batch.column(batch.schema.get_field_index(PROMPT_COLUMN))
            lengths = _text_lengths(filename, text, PROMPT_COLUMN, first)
            over = np.flatnonzero(lengths > MAX_PROMPT_CHARS)
            if over.size:
                i = int(over[0])
                raise _refuse(filename, f"value {_shown(_head(text, i), int(lengths[i]))}: at most "
                              f"{MAX_PROMPT_CHARS:,} characters per prompt allowed (prompt and output must fit "
                              f"the engine's {MAX_MODEL_LEN:,} tokens)", row=first + i, column=PROMPT_COLUMN)
            w_idx = batch.schema.get_field_index(WORKLOAD_COLUMN)
            names = _workloads(batch.column(w_idx) if w_idx >= 0 else None, batch.num_rows)
            for i in np.flatnonzero(lengths > 0).tolist():
                w = names[i]
                bucket = out.get(w)
                if bucket is None:
                    if len(out) >= MAX_UPLOAD_WORKLOADS:
                        raise _refuse(filename, f"value {w!r} is workload number {len(out) + 1}; at most "
                                      f"{MAX_UPLOAD_WORKLOADS} workloads allowed for a prompt set",
                                      row=first + i, column=WORKLOAD_COLUMN)
                    bucket = out[w] = []
                if len(bucket) < per_workload:
                    prompt = text[i].as_py()
                    if prompt.strip():
                        bucket.append(prompt)
    return {w: ps for w, ps in out.items() if ps}
