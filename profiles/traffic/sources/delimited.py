"""Delimited text (CSV, TSV, ; and | separated, decimal point or comma): the header line is read with the standard
library's csv module, the separator and decimal mark are sniffed from the first 64 KiB, and the data is decoded by
pyarrow one 1 MiB block at a time, every selected column as text (the validation names each bad cell). Before
anything is decoded: the header's field count (MAX_COLUMNS), UTF-8 validity and the longest line
(MAX_FIELD_CHARS)."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.csv as pacsv

from profiles.traffic.errors import _cut, _fail, _list
from profiles.traffic.guards import _check_utf8, _longest_line
from profiles.traffic.limits import CSV_BLOCK_BYTES, MAX_COLUMNS, MAX_FIELD_CHARS, MAX_HEADER_BYTES, MAX_VALUE_CHARS
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source

DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _sniff_delimiter(header: bytes, sample: bytes) -> str:
    """The candidate with the most occurrences in the header line, preferring one that also appears the same
    number of times on the next lines (comma on ties)."""
    lines = [ln for ln in sample.split(b"\n")[1:6] if ln.strip()]
    best, best_score = ",", (0, 0)
    for d in DELIMITERS:
        n = header.count(d.encode())
        consistent = sum(1 for ln in lines if ln.count(d.encode()) == n)
        score = (n > 0 and (consistent == len(lines) or not lines), n)
        if score > best_score:
            best, best_score = d, score
    return best


def _sniff_decimal(sample: bytes, delimiter: str) -> str:
    if delimiter == ",":
        return "."
    d = re.escape(delimiter.encode())
    comma = re.search(rb"(?:^|" + d + rb")\"?-?\d+,\d+\"?(?:" + d + rb"|\r?$)", sample, re.M)
    point = re.search(rb"(?:^|" + d + rb")\"?-?\d+\.\d+(?:[eE][-+]?\d+)?\"?(?:" + d + rb"|\r?$)", sample, re.M)
    return "," if comma and not point else "."


def _header_names(header: bytes, delim: str) -> list[str]:
    """The header line's column names (csv module: quotes, doubled quotes, spaces after a separator); the field
    count is checked before the names are decoded as UTF-8 (latin-1 keeps every byte, and the separators and
    quotes are ASCII)."""
    try:
        fields = next(csv.reader([header.decode("latin-1")], delimiter=delim, skipinitialspace=True), None) or [""]
    except csv.Error as exc:  # a header cell over the csv module's field limit (MAX_FIELD_CHARS)
        raise _fail(f"a header line whose names have at most {MAX_FIELD_CHARS:,} characters ({exc})", line=1) from None
    if len(fields) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the header line has {len(fields):,})", line=1)
    names = []
    for i, f in enumerate(fields):
        raw = f.encode("latin-1")
        try:
            name = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise _fail("a UTF-8 header line", value=raw[exc.start:exc.start + 4], line=1) from None
        names.append(name or f"column {i + 1}")
    return names


def _split_row(row: bytes, delim: bytes) -> list[tuple[int, int]]:
    """Field spans of one CSV row (quote-aware, without copying the fields)."""
    if b'"' not in row:
        spans, pos = [], 0
        while True:
            nxt = row.find(delim, pos)
            if nxt < 0:
                spans.append((pos, len(row)))
                return spans
            spans.append((pos, nxt))
            pos = nxt + 1
    spans, start, quoted = [], 0, False
    for m in re.finditer(b'["' + re.escape(delim) + b"]", row):
        if m.group() == b'"':
            quoted = not quoted
        elif not quoted:
            spans.append((start, m.start()))
            start = m.end()
    spans.append((start, len(row)))
    return spans


def _csv_rows(buf: bytes, start: int, delim: bytes, quoted: bool):
    """Yield (data row, first line, row bytes) from `start` (the header line: row 0); empty lines are skipped
    as pyarrow does. A quoted cell may span lines (its quote count stays odd until it closes)."""
    pos, n = start, len(buf)
    line = buf.count(b"\n", 0, start) + 1
    row = -1
    while pos < n:
        first_line = line
        end = buf.find(b"\n", pos)
        end = n if end < 0 else end
        if quoted:
            quotes = buf.count(b'"', pos, end)
            while quotes % 2 and end < n:
                nxt = buf.find(b"\n", end + 1)
                nxt = n if nxt < 0 else nxt
                quotes += buf.count(b'"', end + 1, nxt)
                line += 1
                end = nxt
        raw = buf[pos:end]
        pos, line = end + 1, line + 1
        if raw in (b"", b"\r"):
            continue
        row += 1
        yield row, first_line, raw[:-1] if raw.endswith(b"\r") else raw



def _csv_source(data: bytes, options: ParseOptions) -> Source:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while start < len(data) and data[start:start + 1] in (b"\n", b"\r"):  # leading empty lines
        start += 1
    if not data[start:start + MAX_HEADER_BYTES].strip() and not data[start:].strip():
        raise _fail("a non-empty file (this one is only blank)")
    nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    if nl < 0 and len(data) - start > MAX_HEADER_BYTES:
        raise _fail(f"a header line of at most {MAX_HEADER_BYTES // 2**20} MiB (the first line has no line break "
                    f"in its first {MAX_HEADER_BYTES // 2**20} MiB: is this a text table?)", line=1)
    header = data[start: nl if nl >= 0 else len(data)]
    header = header[:-1] if header.endswith(b"\r") else header
    sample = data[start: start + (64 << 10)]
    if options.delimiter and options.delimiter not in DELIMITERS:
        raise _fail(f"a separator among {', '.join(map(repr, DELIMITERS))}", value=options.delimiter)
    delim = options.delimiter or _sniff_delimiter(header, sample)
    names = _header_names(header, delim)
    _check_utf8(data, start, delim, names)
    decimal = options.decimal or _sniff_decimal(sample, delim)
    quoted = b'"' in data  # memchr: fast; quoted cells may hold line breaks
    header_line = data.count(b"\n", 0, start) + 1
    if _longest_line(data, start) > MAX_FIELD_CHARS:
        _locate_csv_error(data, start, delim, names, quoted, long_only=True)

    def line_of(rows: list[int]) -> dict[int, int]:
        want = set(rows)
        if not want:
            return {}
        if not quoted and b"\n\n" not in data[start:] and b"\n\r\n" not in data[start:]:
            return {r: r + header_line for r in want}
        out, top = {}, max(want)
        for row, line, _raw in _csv_rows(data, start, delim.encode(), quoted):
            if row in want:
                out[row] = line
            if row >= top:
                break
        return out

    def stream(cols: list[str]) -> Iterable[pa.Table]:
        # Every selected column is read as text: the validation parses numbers and times itself and names
        # each bad cell (pyarrow's type inference on the first block would fail later blocks without a row).
        try:
            reader = pacsv.open_csv(
                pa.BufferReader(pa.py_buffer(data).slice(start)),
                read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=CSV_BLOCK_BYTES),
                parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=quoted),
                convert_options=pacsv.ConvertOptions(
                    include_columns=cols, column_types={c: pa.string() for c in cols}, null_values=[""],
                    strings_can_be_null=True, quoted_strings_can_be_null=True))
            for batch in reader:
                yield pa.Table.from_batches([batch])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            _locate_csv_error(data, start, delim, names, quoted)
            raise _fail(f"a {DELIMITERS[delim]}-separated table ({_cut(str(exc), 200)})") from None

    return Source("csv", names, lambda cols: pa.concat_tables(list(stream(cols))), line_of, delimiter=delim,
                   decimal=decimal, stream=stream)


def _locate_csv_error(buf: bytes, start: int, delim: str, names: list[str], quoted: bool,
                      long_only: bool = False) -> None:
    """pyarrow does not say where a ragged row or an oversized cell is; find it (error path only)."""
    d = delim.encode()
    for row, line, raw in _csv_rows(buf, start, d, quoted):
        if long_only and len(raw) <= MAX_FIELD_CHARS:
            continue
        spans = _split_row(raw, d)
        for i, (a, b) in enumerate(spans):
            if b - a > MAX_FIELD_CHARS:
                col = names[i] if i < len(names) else f"field {i + 1}"
                raise _fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters (this one has {b - a:,} bytes; only "
                            "token counts are needed: drop long text columns)", row=row or None, column=col,
                            value=raw[a:a + MAX_VALUE_CHARS].decode("utf-8", "replace"), line=line)
        if row and not long_only and len(spans) != len(names):
            hint = ""
            if len(names) == 1:
                found = [(c, n) for c, n in DELIMITERS.items() if c != delim and c.encode() in raw]
                if found:
                    hint = (f"; the file seems to be separated by {found[0][1]}s ('{found[0][0]}'), not "
                            f"{DELIMITERS[delim]}s: choose '{found[0][1]}' as the separator")
            raise _fail(f"{len(names)} {DELIMITERS[delim]}-separated field{'s' if len(names) != 1 else ''} like "
                        f"the header ({_list(names, 8)}); found {len(spans)}{hint}", row=row,
                        value=raw[:MAX_VALUE_CHARS + 1], line=line)





