"""Parsing an upload: open the source (bounded), map its columns onto roles, then build a per-request or a mix-table
profile. `parse_traffic` raises only TrafficError, naming rows, columns and values."""

from __future__ import annotations

import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiles.traffic.columns import REQUEST_REQUIRED, ROLE_LABELS, SYNONYMS, FileInfo, map_columns
from profiles.traffic.errors import Problem, TrafficError, clip, fail, listing
from profiles.traffic.limits import MAX_DISTINCT_VALUES, MAX_UPLOAD_BYTES
from profiles.traffic.mix import mix_profile
from profiles.traffic.options import DEFAULT_OPTIONS, ParseOptions
from profiles.traffic.per_request import requests_profile
from profiles.traffic.profile import TrafficProfile
from profiles.traffic.reading import read_batches
from profiles.traffic.sources import open_source
from profiles.traffic.sources.delimited import DELIMITERS
from profiles.traffic.validate import as_text


def parse_traffic(name: str, data: bytes, catalog, *, max_bytes: int = MAX_UPLOAD_BYTES,
                  options: ParseOptions | None = None) -> TrafficProfile:
    """Parse an upload into a TrafficProfile; raises TrafficError (only) naming rows, columns and values."""
    options = options or DEFAULT_OPTIONS
    try:
        return _parse(name, data, catalog, max_bytes, options)
    except TrafficError:
        raise
    except MemoryError:
        raise fail("a smaller file (reading this one ran out of memory)") from None
    except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError, RecursionError,
            UnicodeError, zipfile.BadZipFile, EOFError, OSError) as exc:
        # a reader failure not anticipated above: still the parser's own error, and short
        raise fail(f"a readable traffic file ({type(exc).__name__}: {clip(str(exc), 200)})") from None


def _parse(name: str, data: bytes, catalog, max_bytes: int, options: ParseOptions) -> TrafficProfile:
    src = open_source(name, data, options, max_bytes)
    info = map_columns(src, options)
    if info.kind == "unknown":
        if len(info.columns) == 1:
            col = info.columns[0]
            found = [(c, lbl) for c, lbl in DELIMITERS.items() if c in col and c != src.delimiter]
            if found:
                raise fail(f"more than one column: the header has one field, '{clip(col, 80)}', with {found[0][1]}s "
                            f"('{found[0][0]}') in it: choose '{found[0][1]}' as the separator", column=col)
        if len(info.missing) < len(REQUEST_REQUIRED):  # a per-request file with a column not found
            raise TrafficError([Problem(
                None, r, None, f"a column '{r}' (per-request format; also read as: "
                f"{listing(SYNONYMS[r][1:], 4)}; or map one on the Traffic page); the file's columns are: "
                f"{listing(info.columns, 15)}") for r in info.missing])
        missing = ", ".join(ROLE_LABELS[r] for r in info.missing)
        raise TrafficError([Problem(
            None, None, None,
            f"per-request columns ({missing} not found; map them to the file's columns on the Traffic page) or a "
            f"mix table (workload and share or monthly_output_tokens); the file's columns are: "
            f"{listing(info.columns, 15)}")])
    if info.kind == "mix":
        if info.missing:
            raise fail(f"a column 'workload' (mix-table format); the file's columns are: {listing(info.columns)}",
                        column="workload")
        return mix_profile(name, src, info, catalog)
    return requests_profile(name, src, info, catalog, options)



def inspect_upload(name: str, data: bytes, options: ParseOptions | None = None, *,
                   max_bytes: int = MAX_UPLOAD_BYTES) -> FileInfo:
    """The file's columns, the recognised export and the role of each column, from its header or metadata
    only (nothing is decoded). Raises TrafficError when the file cannot be opened."""
    return map_columns(open_source(name, data, options or DEFAULT_OPTIONS, max_bytes), options or DEFAULT_OPTIONS)


def column_values(name: str, data: bytes, column: str, options: ParseOptions | None = None, *, limit: int = 40,
                  max_bytes: int = MAX_UPLOAD_BYTES) -> list[tuple[str, int]]:
    """The most common values of one column (for mapping values to workloads), most frequent first."""
    options = options or DEFAULT_OPTIONS
    src = open_source(name, data, options, max_bytes)
    if column not in src.columns:
        raise fail(f"a column of the file; the file's columns are: {listing(src.columns)}", column=column)
    counts: dict[str, int] = {}
    for piece in read_batches(src, [column], [column]):  # streamed: the column never exists decoded in full
        for chunk in piece.column(0).chunks:
            enc = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
            words = as_text(enc.dictionary).to_pylist()
            idx = enc.indices.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
            for w, k in zip(words, np.bincount(idx, minlength=len(words)), strict=True):
                if w is not None and k:
                    counts[w] = counts.get(w, 0) + int(k)
            if len(counts) > MAX_DISTINCT_VALUES:
                raise fail(f"a column with at most {MAX_DISTINCT_VALUES:,} distinct values to map (this one has "
                            "more: map a column such as a model or an endpoint name)", column=column)
    pairs = sorted(counts.items(), key=lambda x: -x[1])
    return [(clip(v, 80), n) for v, n in pairs[:limit]]
