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

from profiles.traffic.errors import clip, fail, listing
from profiles.traffic.guards import check_utf8, long_lines
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
    except csv.Error:  # a header cell over the csv module's field limit (MAX_FIELD_CHARS)
        raise fail(f"a header line whose names have at most {MAX_FIELD_CHARS:,} characters (one name is longer: is "
                   "the first line a header?)", line=1) from None
    if len(fields) > MAX_COLUMNS:
        raise fail(f"at most {MAX_COLUMNS:,} columns (the header line has {len(fields):,})", line=1)
    names = []
    for i, f in enumerate(fields):
        raw = f.encode("latin-1")
        try:
            name = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise fail("a UTF-8 header line", value=raw[exc.start:exc.start + 4], line=1) from None
        names.append(name or f"column {i + 1}")
    return names


def _fields(buf: bytes, a: int, b: int, delim: bytes, quoted: bool, keep: int,
            in_quotes: bool = False) -> tuple[list[tuple[int, int]], int]:
    """`_scan` without the state it ends in."""
    spans, n, _inside = _scan(buf, a, b, delim, quoted, keep, in_quotes)
    return spans, n


def _scan(buf: bytes, a: int, b: int, delim: bytes, quoted: bool, keep: int,
          in_quotes: bool = False) -> tuple[list[tuple[int, int]], int, bool]:
    """The first `keep` field spans of the row buf[a:b] and its number of fields, as pyarrow splits it: a quote
    opens a quoted field only at the field's start, a doubled quote inside one is a quote, a line break inside
    one is text. `in_quotes`: the bytes start inside a quoted field. Nothing is copied and at most `keep` spans
    are built (a row of 10 MiB of separators is counted, not split)."""
    spans: list[tuple[int, int]] = []
    if not quoted or buf.find(b'"', a, b) < 0 and not in_quotes:
        pos = a
        while len(spans) < keep:
            nxt = buf.find(delim, pos, b)
            if nxt < 0:
                spans.append((pos, b))
                return spans, len(spans), False
            spans.append((pos, nxt))
            pos = nxt + 1
        return spans, len(spans) + buf.count(delim, pos, b) + 1, False
    quote, sep = ord('"'), delim[0]
    start, n = a, 1
    state = "quoted" if in_quotes else "start"  # start | plain | quoted | closed (a quote seen inside quotes)
    closed_at = -2
    for m in _TOKENS[delim].finditer(buf, a, b):
        p, ch = m.start(), buf[m.start()]
        if state == "quoted":
            if ch == quote:
                state, closed_at = "closed", p
            continue
        if state == "closed":
            if ch == quote and p == closed_at + 1:  # a doubled quote: a quote in the text
                state = "quoted"
                continue
            state = "plain"
        if ch == quote:
            if state == "start" and p == start:
                state = "quoted"
            else:
                state = "plain"  # a quote inside an unquoted field is text
            continue
        if ch == sep:
            if len(spans) < keep:
                spans.append((start, p))
            n += 1
            start, state = p + 1, "start"
    if len(spans) < keep:
        spans.append((start, b))
    return spans, n, state == "quoted"


_TOKENS = {d.encode(): re.compile(b'["' + re.escape(d.encode()) + b"]") for d in DELIMITERS}


def _csv_rows(buf: bytes, start: int, delim: bytes, quoted: bool, stop: int | None = None):
    """Yield (data row, first line, row start, row end) from `start` (the header line: row 0) up to byte `stop`;
    empty lines are skipped as pyarrow does. A row goes on past a line break that lies inside a quoted field (as
    pyarrow reads quotes, `_scan`, for a line with an odd number of quotes and the lines after it). Offsets
    only: no row is copied."""
    pos, n = start, len(buf) if stop is None else min(stop, len(buf))
    line = buf.count(b"\n", 0, start) + 1
    row = -1
    while pos < n:
        first_line = line
        end = buf.find(b"\n", pos)
        end = len(buf) if end < 0 else end
        if quoted and buf.count(b'"', pos, end) % 2:  # an even count closes what it opens (or is text)
            inside = _scan(buf, pos, end, delim, True, 0)[2]
            while inside and end < len(buf):
                nxt = buf.find(b"\n", end + 1)
                nxt = len(buf) if nxt < 0 else nxt
                inside = _scan(buf, end + 1, nxt, delim, True, 0, True)[2]
                line += 1
                end = nxt
        a, b = pos, end
        pos, line = end + 1, line + 1
        if b == a or (b == a + 1 and buf[a] == 13):
            continue
        row += 1
        yield row, first_line, a, (b - 1 if buf[b - 1] == 13 else b)



def csv_source(data: bytes, options: ParseOptions) -> Source:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # binary files were refused (guards.refuse_not_a_table)
    while start < len(data) and data[start:start + 1] in (b"\n", b"\r"):  # leading empty lines
        start += 1
    if not data[start:start + MAX_HEADER_BYTES].strip() and not data[start:].strip():
        raise fail("a non-empty file (this one is only blank)")
    nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    if nl < 0 and len(data) - start > MAX_HEADER_BYTES:
        raise fail(f"a header line of at most {MAX_HEADER_BYTES // 2**20} MiB (the first line has no line break "
                    f"in its first {MAX_HEADER_BYTES // 2**20} MiB: is this a text table?)", line=1)
    header = data[start: nl if nl >= 0 else len(data)]
    header = header[:-1] if header.endswith(b"\r") else header
    sample = data[start: start + (64 << 10)]
    if options.delimiter and options.delimiter not in DELIMITERS:
        raise fail(f"a separator among {', '.join(map(repr, DELIMITERS))}", value=options.delimiter)
    delim = options.delimiter or _sniff_delimiter(header, sample)
    names = _header_names(header, delim)
    check_utf8(data, start, delim, names)
    decimal = options.decimal or _sniff_decimal(sample, delim)
    quoted = b'"' in data  # memchr: fast; quoted cells may hold line breaks
    header_line = data.count(b"\n", 0, start) + 1
    _check_rows(data, start, len(data) if nl < 0 else nl + 1, delim, names, quoted, header_line)

    def line_of(rows: list[int]) -> dict[int, int]:
        want = set(rows)
        if not want:
            return {}
        if not quoted and data.find(b"\n\n", start) < 0 and data.find(b"\n\r\n", start) < 0:
            return {r: r + header_line for r in want}
        out, top = {}, max(want)
        for row, line, _a, _b in _csv_rows(data, start, delim.encode(), quoted):
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
            raise fail(f"a {DELIMITERS[delim]}-separated table ({clip(str(exc), 200)})") from None

    return Source("csv", names, lambda cols: pa.concat_tables(list(stream(cols))), line_of, delimiter=delim,
                   decimal=decimal, stream=stream)


MAX_QUOTED_COUNTS = 64  # lines of a quoted file whose separators are counted quote-aware before pyarrow reads it


def _check_rows(data: bytes, start: int, body: int, delim: str, names: list[str], quoted: bool,
                header_line: int) -> None:
    """Before pyarrow splits anything (already when the file is opened for its columns): no line over
    CSV_BLOCK_BYTES (pyarrow decodes one block at a time and refuses a longer row), no cell over MAX_FIELD_CHARS
    and no row with more fields than the header. numpy counts the bytes and separators of every line; only the
    lines over a bound are looked at in Python, and none is split into more fields than the header has. In a
    file with quotes a line's separators may sit in quoted text: a line with more than MAX_COLUMNS separators is
    refused only when those outside quotes (as pyarrow reads quotes, from the state the quotes before it leave)
    are more than MAX_COLUMNS too; pyarrow refuses the other ragged rows while it reads, one block at a time."""
    d = delim.encode()
    n = len(names)
    max_delims = max(n - 1, MAX_COLUMNS) if quoted else n - 1
    walked, counted, quotes, seen = False, 0, 0, body
    for off, length, count in long_lines(data, body, MAX_FIELD_CHARS, d, max_delims):
        end = off + length
        if quoted:
            if length > MAX_FIELD_CHARS and not walked:  # rows span lines: find the row of each long line
                _locate_csv_error(data, start, delim, names, quoted, long_only=True)
                walked = True
            if length > CSV_BLOCK_BYTES:
                row, line = _row_at(data, start, d, quoted, header_line, off)
                raise _row_too_long(data, off, length, row, line)
            if count > max_delims and counted < MAX_QUOTED_COUNTS:
                counted += 1
                quotes += data.count(b'"', seen, off)  # odd: the line starts inside a quoted field
                seen = off
                found = _fields(data, off, end, d, True, 0, in_quotes=quotes % 2 == 1)[1]
                if found > max_delims + 1:
                    row, line = _row_at(data, start, d, quoted, header_line, off)
                    raise _ragged(data, off, end, found, row, line, delim, names)
            continue
        row, line = _row_at(data, start, d, quoted, header_line, off)
        end = end - 1 if end > off and data[end - 1] == 13 else end
        _check_row(data, off, end, row, line, delim, names, quoted, fields=True)
        if length > CSV_BLOCK_BYTES:
            raise _row_too_long(data, off, length, row, line)


def _row_at(buf: bytes, start: int, delim: bytes, quoted: bool, header_line: int, offset: int) -> tuple[int, int]:
    """(data row, line) of the row holding byte `offset` (error path)."""
    line = buf.count(b"\n", 0, offset) + 1
    if not quoted and buf.find(b"\n\n", start, offset) < 0 and buf.find(b"\n\r\n", start, offset) < 0:
        return line - header_line, line
    found = (0, header_line)
    for row, first, a, _b in _csv_rows(buf, start, delim, quoted, stop=offset + 1):
        if a <= offset:
            found = (row, first)
    return found


def _row_too_long(buf: bytes, off: int, length: int, row: int, line: int):
    return fail(f"a row of at most {CSV_BLOCK_BYTES // 2**20} MiB (this one has {length:,} bytes; only token "
                 "counts are needed: drop long text columns)", row=row or None,
                 value=buf[off:off + MAX_VALUE_CHARS + 1], line=line)


def _ragged(buf: bytes, a: int, b: int, found: int, row: int, line: int, delim: str, names: list[str]):
    hint = ""
    if len(names) == 1:
        seps = [(c, n) for c, n in DELIMITERS.items() if c != delim and buf.find(c.encode(), a, b) >= 0]
        if seps:
            hint = (f"; the file seems to be separated by {seps[0][1]}s ('{seps[0][0]}'), not "
                    f"{DELIMITERS[delim]}s: choose '{seps[0][1]}' as the separator")
    return fail(f"{len(names)} {DELIMITERS[delim]}-separated field{'s' if len(names) != 1 else ''} like the header "
                 f"({listing(names, 8)}); found {found:,}{hint}", row=row, value=buf[a:min(b, a + MAX_VALUE_CHARS + 1)],
                 line=line)


def _check_row(buf: bytes, a: int, b: int, row: int, line: int, delim: str, names: list[str], quoted: bool,
               fields: bool) -> None:
    """Refuse a cell of the row buf[a:b] over MAX_FIELD_CHARS (naming its column), then (`fields`) a row whose
    field count differs from the header's; at most len(names) + 1 spans are built."""
    spans, n = _fields(buf, a, b, delim.encode(), quoted, len(names) + 1)
    for i, (x, y) in enumerate(spans):
        if y - x > MAX_FIELD_CHARS:
            col = names[i] if i < len(names) else f"field {i + 1}"
            raise fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters (this one has {y - x:,} bytes; only "
                        "token counts are needed: drop long text columns)", row=row or None, column=col,
                        value=buf[x:x + MAX_VALUE_CHARS].decode("utf-8", "replace"), line=line)
    if fields and row and n != len(names):
        raise _ragged(buf, a, b, n, row, line, delim, names)


def _locate_csv_error(buf: bytes, start: int, delim: str, names: list[str], quoted: bool,
                      long_only: bool = False) -> None:
    """pyarrow does not say where a ragged row or an oversized cell is; find it (error path only)."""
    for row, line, a, b in _csv_rows(buf, start, delim.encode(), quoted):
        if long_only and b - a <= MAX_FIELD_CHARS:
            continue
        _check_row(buf, a, b, row, line, delim, names, quoted, fields=not long_only)
