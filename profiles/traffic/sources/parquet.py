"""Parquet: rows, columns and the decompressed bytes of the selected columns (dictionary pages included) are read
from the footer before any page is decoded; strings stay dictionary-encoded (a dictionary bomb costs its dictionary
once plus 4 bytes a row)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from profiles.traffic.errors import _cut, _fail
from profiles.traffic.limits import MAX_COLUMNS, MAX_DECODED_BYTES, MAX_PARQUET_FOOTER_BYTES, MAX_ROWS
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source


def _parquet_source(data: bytes, options: ParseOptions) -> Source:
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise _fail("a Parquet file (it must start and end with 'PAR1')")
    footer = int.from_bytes(data[-8:-4], "little")
    if footer > MAX_PARQUET_FOOTER_BYTES or footer > len(data) - 12:
        raise _fail(f"a Parquet footer of at most {MAX_PARQUET_FOOTER_BYTES // 2**20} MiB within the file "
                    f"(it says {footer:,} bytes)")
    try:
        pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
        md = pf.metadata
        arrow_schema = pf.schema_arrow
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError, TypeError) as exc:
        raise _fail(f"a Parquet file ({_cut(str(exc), 200)})") from None
    if md.num_rows > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} rows (the file's metadata says {md.num_rows:,}); sample the log and "
                    "add a 'weight' column, or upload an aggregated mix table")
    if md.num_columns > MAX_COLUMNS or len(arrow_schema) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (this file has {md.num_columns:,})")
    names = list(arrow_schema.names)
    leaf_index: dict[str, int] = {}  # top-level column -> its leaf column; -1 when nested
    for j in range(md.num_columns):
        path = md.schema.column(j).path
        top = path.split(".")[0]
        leaf_index[top] = -1 if ("." in path or top in leaf_index) else j

    def read(cols: list[str]) -> pa.Table:
        total = 0
        for c in cols:
            f = arrow_schema.field(c)
            if pa.types.is_nested(f.type) or c not in leaf_index or leaf_index[c] < 0:
                raise _fail(f"a flat column (numbers or text), not {_cut(str(f.type), 80)}", column=c)
            j = leaf_index[c]
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                cc = rg.column(j)
                if cc.num_values > rg.num_rows:
                    raise _fail(f"at most one value per row (row group {g} says {cc.num_values:,} values for "
                                f"{rg.num_rows:,} rows)", column=c)
                total += cc.total_uncompressed_size
                # dictionary-decoded strings are kept as a dictionary + 4-byte indices (read_dictionary below)
                total += rg.num_rows * (4 if cc.physical_type == "BYTE_ARRAY" else 0)
        if total > MAX_DECODED_BYTES:
            raise _fail(f"at most {MAX_DECODED_BYTES // 2**20} MiB in the columns used once decompressed (the "
                        f"file's metadata says {total / 2**20:,.0f} MiB)")
        strings = [c for c in cols if pa.types.is_string(arrow_schema.field(c).type)
                   or pa.types.is_large_string(arrow_schema.field(c).type)
                   or pa.types.is_binary(arrow_schema.field(c).type)]
        try:
            # Strings stay dictionary-encoded: a dictionary bomb (one long string on every row) costs its
            # dictionary once plus 4 bytes a row, not its decoded size.
            return pq.read_table(pa.BufferReader(pa.py_buffer(data)), columns=cols, read_dictionary=strings or None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
            raise _fail(f"a readable Parquet file ({_cut(str(exc), 200)})") from None

    return Source("parquet", names, read)
