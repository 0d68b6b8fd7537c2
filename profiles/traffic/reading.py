"""Reading the selected columns of a source in bounded batches (MAX_ROWS checked as they come)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from profiles.traffic.errors import fail
from profiles.traffic.limits import MAX_ROWS
from profiles.traffic.sources.base import Source

BATCH_ROWS = 1 << 18  # rows validated at a time (a problem page stops the read early)


def read_batches(src: Source, cols: list[str], text_cols: Iterable[str]) -> Iterable[pa.Table]:
    """The selected columns in pieces of at most BATCH_ROWS rows (CSV: streamed from the bytes, one block at
    a time, so a large file never exists decoded in full); refuses more than MAX_ROWS rows as it goes."""
    cols = list(dict.fromkeys(cols))
    src.string_cols.update(text_cols)
    if src.stream is not None:
        pieces = src.stream(cols)
    else:
        tbl = src.read(cols)
        if tbl.num_rows > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows (this file has {tbl.num_rows:,})")
        pieces = (tbl.slice(i, BATCH_ROWS) for i in range(0, max(tbl.num_rows, 1), BATCH_ROWS))
    rows = 0
    try:
        for piece in pieces:
            rows += piece.num_rows
            if rows > MAX_ROWS:
                raise fail(f"at most {MAX_ROWS:,} rows (this file has more)")
            if piece.num_rows:
                yield piece
    finally:
        # Arrow's allocator (mimalloc) keeps freed pages for reuse: hand them back once a read ends (measured:
        # ~25 MB after a 1M-row file; the server would otherwise hold the peak of its largest upload).
        pa.default_memory_pool().release_unused()
    if rows == 0:
        raise fail("at least one data row below the header")


def read_table(src: Source, cols: list[str], text_cols: Iterable[str]) -> pa.Table:
    """All selected rows at once (mix tables, column values: small)."""
    return pa.concat_tables(list(read_batches(src, cols, text_cols)))



def read_lookahead(it):
    """Yield (item, is_last) pairs."""
    it = iter(it)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, False
        prev = item
    yield prev, True

