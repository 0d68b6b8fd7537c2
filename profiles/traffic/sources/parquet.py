"""Parquet: rows and columns are read from the footer; the decompressed bytes of the selected columns from the
footer and then from every page header (`parquet_pages`: what decoding allocates, whatever the footer claims)
before any page is decoded. The columns are then read in pieces of PARQUET_BATCH_ROWS rows, the bytes built
counted as they come; strings stay dictionary-encoded (a dictionary bomb costs its dictionary once plus 4 bytes a
row)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from profiles.traffic.errors import TrafficError, clip, fail
from profiles.traffic.guards import size_text
from profiles.traffic.limits import (
    MAX_COLUMNS,
    MAX_DECODED_BYTES,
    MAX_FIELD_CHARS,
    MAX_PARQUET_FOOTER_BYTES,
    MAX_PARQUET_PAGES,
    MAX_ROWS,
    PARQUET_BATCH_ROWS,
)
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source
from profiles.traffic.sources.parquet_pages import chunk_pages

# Copies of a text column's dictionary page alive at once while its row group is read (the page decompressed, the
# dictionary decoded, one per batch in flight): a 20 MiB one-string dictionary read in batches of PARQUET_BATCH_ROWS
# peaked at +122 MB, ~6x. Numbers coded against a dictionary are decoded page by page (no copies kept).
DICTIONARY_COPIES = 6


def parquet_source(data: bytes, options: ParseOptions) -> Source:
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise fail("a Parquet file (it must start and end with 'PAR1')")
    footer = int.from_bytes(data[-8:-4], "little")
    if footer > MAX_PARQUET_FOOTER_BYTES or footer > len(data) - 12:
        raise fail(f"a Parquet footer of at most {MAX_PARQUET_FOOTER_BYTES // 2**20} MiB within the file "
                    f"(it says {footer:,} bytes)")
    try:
        pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
        md = pf.metadata
        arrow_schema = pf.schema_arrow
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError, TypeError) as exc:
        raise fail(f"a Parquet file ({clip(str(exc), 200)})") from None
    if md.num_rows > MAX_ROWS:
        raise fail(f"at most {MAX_ROWS:,} rows (the file's metadata says {md.num_rows:,}); sample the log and "
                    "add a 'weight' column, or upload an aggregated mix table")
    if md.num_columns > MAX_COLUMNS or len(arrow_schema) > MAX_COLUMNS:
        raise fail(f"at most {MAX_COLUMNS:,} columns (this file has {md.num_columns:,})")
    names = list(arrow_schema.names)
    leaf_index: dict[str, int] = {}  # top-level column -> its leaf column; -1 when nested
    for j in range(md.num_columns):
        path = md.schema.column(j).path
        top = path.split(".")[0]
        leaf_index[top] = -1 if ("." in path or top in leaf_index) else j

    def check(cols: list[str]) -> list[str]:
        """The footer's and then the page headers' decompressed size of the selected columns, before any page
        is decoded; returns the text columns to read as dictionaries (those with pages coded against one)."""
        claimed = decoded = 0
        pages_left = MAX_PARQUET_PAGES
        dictionary = []
        for c in cols:
            f = arrow_schema.field(c)
            if pa.types.is_nested(f.type) or c not in leaf_index or leaf_index[c] < 0:
                raise fail(f"a flat column (numbers or text), not {clip(str(f.type), 80)}", column=c)
            t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type  # a stored Arrow dictionary type
            text = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
                or pa.types.is_large_binary(t)
            j = leaf_index[c]
            leaf = md.schema.column(j)
            width = (leaf.length or 0) if leaf.physical_type == "FIXED_LEN_BYTE_ARRAY" else 0
            chunks = []
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                cc = rg.column(j)
                if cc.num_values > rg.num_rows:
                    raise fail(f"at most one value per row (row group {g} says {cc.num_values:,} values for "
                                f"{rg.num_rows:,} rows)", column=c)
                claimed += cc.total_uncompressed_size + rg.num_rows * (4 if cc.physical_type == "BYTE_ARRAY" else 0)
                if claimed > MAX_DECODED_BYTES:
                    raise fail(f"at most {size_text(MAX_DECODED_BYTES)} in the columns used once decompressed "
                                f"(the file's footer says {claimed:,} bytes or more)")
                pages = chunk_pages(data, cc, max_pages=pages_left, column=c)
                pages_left -= pages.pages
                if pages.values > rg.num_rows:
                    raise fail(f"at most one value per row (row group {g}'s pages hold {pages.values:,} values for "
                                f"{rg.num_rows:,} rows)", column=c)
                chunks.append((pages, rg.num_rows))
            # Text coded against a dictionary is read as one (a dictionary bomb costs its dictionary once plus 4
            # bytes a row); Arrow then also dictionary-encodes the column's other pages as it reads them, which
            # costs about their size again. Per row: offsets or indices and validity (8 bytes bound them), or
            # the fixed width of a FIXED_LEN value coded against a dictionary.
            as_dictionary = text and any(p.dictionary_coded_pages for p, _n in chunks)
            if as_dictionary:
                dictionary.append(c)
            for g, (p, n) in enumerate(chunks):
                # A dictionary's values average its bytes less a 4-byte length each: past MAX_FIELD_CHARS, one
                # value at least is longer than any traffic cell (refused before it is decoded).
                if text and p.dictionary_values and \
                        p.dictionary_bytes - 4 * p.dictionary_values > MAX_FIELD_CHARS * p.dictionary_values:
                    raise fail(f"text values of at most {MAX_FIELD_CHARS:,} characters (row group {g}'s dictionary "
                                f"holds {p.dictionary_values:,} value{'s' if p.dictionary_values != 1 else ''} in "
                                f"{p.dictionary_bytes:,} bytes)", column=c)
                decoded += p.uncompressed_bytes + (p.plain_bytes if as_dictionary else 0) + n * (8 + width)
            if text:  # the copies of one row group's text dictionary alive while it is read
                decoded += (DICTIONARY_COPIES - 1) * max((p.dictionary_bytes for p, _n in chunks), default=0)
            if decoded > MAX_DECODED_BYTES:
                raise fail(f"at most {size_text(MAX_DECODED_BYTES)} in the columns used once decompressed "
                            f"(their pages hold {decoded:,} bytes or more; the file's footer says {claimed:,})",
                            column=c)
        return dictionary

    def stream(cols: list[str]) -> Iterable[pa.Table]:
        # Strings stay dictionary-encoded: a dictionary bomb (one long string on every row) costs its
        # dictionary once plus 4 bytes a row, not its decoded size. Read in pieces of PARQUET_BATCH_ROWS rows, the bytes
        # built counted as they come (a buffer shared by pieces, e.g. a dictionary, once).
        dictionary = check(cols)
        seen: set[int] = set()
        built = 0
        try:
            pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)), read_dictionary=dictionary or None,
                                pre_buffer=False)
            for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=cols, use_threads=False):
                for arr in batch.columns:
                    for part in (arr, arr.dictionary) if pa.types.is_dictionary(arr.type) else (arr,):
                        for buf in part.buffers():
                            if buf is not None and buf.address not in seen:
                                seen.add(buf.address)
                                built += buf.size
                if built > MAX_DECODED_BYTES:
                    raise fail(f"at most {size_text(MAX_DECODED_BYTES)} in the columns used once decompressed "
                                f"(reading built {built:,} bytes and was stopped)")
                yield pa.Table.from_batches([batch])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
            if isinstance(exc, TrafficError):
                raise
            raise fail(f"a readable Parquet file ({clip(str(exc), 200)})") from None

    return Source("parquet", names, lambda cols: pa.concat_tables(list(stream(cols))), stream=stream)
