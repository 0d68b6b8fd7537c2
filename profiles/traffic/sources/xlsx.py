"""Excel .xlsx, streamed from the zip with expat callbacks (`xlsx_parts`): parts are bounded by their zip directory
entries and by what they actually inflate to, the sheet's `<dimension>` tag is never read (every row is streamed,
so a stale tag cannot shorten the sheet), and cells are counted as they come.

Opening a source reads only up to the header row and the shared strings that row uses, so the Traffic page's look
at the header (inspect_upload) costs next to nothing; the one full pass over the sheet happens when the selected
columns are read, keeping only those columns, then only the shared strings they use are kept. Cell types follow
openpyxl's reader (`openpyxl/worksheet/_reader.py`): numbers with a date format become timestamps, the Excel 1900
leap-year quirk included (`openpyxl/utils/datetime.py`)."""

from __future__ import annotations

import functools
import itertools
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiles.traffic.errors import TrafficError, clip, fail, listing
from profiles.traffic.limits import MAX_COLUMNS, MAX_FIELD_CHARS, MAX_ROWS
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source
from profiles.traffic.sources.xlsx_parts import (
    MAX_SHARED_STRINGS_XML_BYTES,
    MAX_SHEET_XML_BYTES,
    MAX_SMALL_PART_BYTES,
    MAX_SMALL_PART_ELEMENTS,
    MAX_XML_DEPTH,
    NS_MAIN,
    NS_REL,
    bytes_from,
    counted,
    feed,
    local,
    part_chunks,
    read_small,
    relationships,
    skip_to_si,
    too_deep,
    too_many,
    xml_parser,
    zip_directory,
)

MAX_SHEET_ROWS = 1_048_576  # Excel's own limit: a <row> element beyond it is not a workbook Excel wrote
MAX_SHEET_CELLS = 32 * MAX_SHEET_ROWS  # <c> elements streamed in one sheet (a million rows of 32 cells; ~30-40 s)
MAX_SHEET_ELEMENTS = 4 * MAX_SHEET_CELLS  # any element (cells, values, inline strings, formulas)
# Elements up to the end of the header row (sheet properties, views, up to 16,384 <col> widths, the header's cells):
# the Traffic page's first look walks them (~0.6 us each), so 100 million <x/> before row 1 took 60 s.
MAX_ELEMENTS_BEFORE_HEADER = 1_000_000
# Elements outside any <row> (merged cells, hyperlinks, conditional formats): at most a few per row.
MAX_ELEMENTS_OUTSIDE_ROWS = 4 * MAX_SHEET_ROWS
# <si>, <t>, rich-text runs: a few per string, at most one string per cell
MAX_SHARED_STRINGS_ELEMENTS = 4 * MAX_SHEET_CELLS
FAST_SKIP_STRINGS = 20_000  # strings before the first one needed that are skipped by counting bytes (skip_to_si)
FLUSH_ROWS = 1 << 16  # rows gathered as Python objects before they become Arrow arrays
# cell kinds: empty, number, number with a date format, shared-string index, text (str, inlineStr, error, ISO date),
# boolean
K_NONE, K_NUM, K_DATE, K_SST, K_TEXT, K_BOOL = range(6)
EPOCH_1900 = np.datetime64("1899-12-30T00:00:00", "ms")  # serial 60 is Excel's 1900-02-29
EPOCH_1904 = np.datetime64("1904-01-01T00:00:00", "ms")
MAX_SERIAL = 2_958_466  # 9999-12-31


@dataclass(frozen=True)
class _Book:
    data: bytes
    parts: dict
    sheet_part: str
    title: str
    sst_part: str | None
    date_styles: frozenset[str]  # cell style indices (the `s` attribute) whose number format is a date
    epoch: np.datetime64


def _col_index(ref: str, cache: dict[str, int]) -> int:
    letters = ref.rstrip("0123456789")
    i = cache.get(letters)
    if i is None:
        if not letters:
            raise fail("an Excel .xlsx workbook (a cell reference like B7)", value=ref)
        i = 0
        for ch in letters[:4]:
            if not "A" <= ch <= "Z":
                raise fail("an Excel .xlsx workbook (a cell reference like B7)", value=ref)
            i = i * 26 + ord(ch) - 64
        i = i - 1 if len(letters) <= 3 else 1 << 20
        cache[letters] = i
    return i


def _col_name(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _open_book(data: bytes, sheet: str) -> _Book:
    parts = zip_directory(data)
    root = relationships(data, parts, "")
    wb_part = next((p for kind, p in root.values() if kind == "officeDocument" and p in parts), "xl/workbook.xml")
    if wb_part not in parts:
        raise fail("an Excel .xlsx workbook (it has no xl/workbook.xml)")
    sheets: list[tuple[str, str]] = []
    flags = {"1904": False}
    rel_ids = tuple(f"{ns} id" for ns in NS_REL)

    def wb_start(tag: str, attrs: dict) -> None:
        name = local(tag)
        if name == "sheet" and len(sheets) < 10_000:
            rid = next((attrs[k] for k in rel_ids if k in attrs), "")
            sheets.append((attrs.get("name", ""), rid))
        elif name == "workbookPr":
            flags["1904"] = attrs.get("date1904", "0").lower() in ("1", "true")

    read_small(data, parts, wb_part, wb_start)
    rels = relationships(data, parts, wb_part)
    worksheets = [(n, rels[r][1]) for n, r in sheets if r in rels and rels[r][0] == "worksheet" and rels[r][1] in parts]
    if not worksheets:
        raise fail("an Excel .xlsx workbook with a worksheet")
    if sheet:
        match = [w for w in worksheets if w[0] == sheet]
        if not match:
            raise fail(f"a sheet named one of {listing(n for n, _ in worksheets)}", value=sheet)
        title, sheet_part = match[0]
    else:
        title, sheet_part = worksheets[0]
    by_kind = {kind: p for kind, p in rels.values() if p in parts}
    styles = by_kind.get("styles")
    return _Book(data, parts, sheet_part, title, by_kind.get("sharedStrings"),
                 _date_styles(data, parts, styles) if styles else frozenset(),
                 EPOCH_1904 if flags["1904"] else EPOCH_1900)


def _date_styles(data: bytes, parts: dict, name: str) -> frozenset[str]:
    """Indices of the cell formats (cellXfs) whose number format is a date or time (openpyxl's test)."""
    from openpyxl.styles.numbers import BUILTIN_FORMATS, is_date_format

    custom: dict[str, str] = {}
    xfs: list[str] = []
    inside = [False]

    def start(tag: str, attrs: dict) -> None:
        name_ = local(tag)
        if name_ == "numFmt" and len(custom) < 10_000:
            custom[attrs.get("numFmtId", "")] = attrs.get("formatCode", "")[:256]
        elif name_ == "cellXfs":
            inside[0] = True
        elif name_ == "xf" and inside[0] and len(xfs) < 100_000:
            xfs.append(attrs.get("numFmtId", "0"))

    def end(tag: str) -> None:
        if local(tag) == "cellXfs":
            inside[0] = False

    p = xml_parser(name)
    counted(p, name, MAX_SMALL_PART_ELEMENTS, start, end)
    feed(p, part_chunks(data, parts[name], MAX_SMALL_PART_BYTES), name)
    dates = set()
    for i, fid in enumerate(xfs):
        code = custom.get(fid)
        if code is None and fid.isdigit():
            code = BUILTIN_FORMATS.get(int(fid))
        if is_date_format(code):
            dates.add(str(i))
    return frozenset(dates)


def _scan(book: _Book, want: dict[int, int], *, header_only: bool, header_ordinal: int = 0) -> dict:
    """One pass over the sheet. header_only: stop after the first row with a value (returned as {column index:
    (kind, text)}). Otherwise the cells of the columns in `want` (column index -> slot) of every row with a value
    after the header, as Arrow chunks per slot, with the sheet row of each. Callbacks keep their state in closure
    variables: expat calls them a few million times for a large sheet."""
    C = V = ROW = IS = T = RPH = ""  # noqa: N806 - the namespaced tag names, set from the root element
    cache: dict[str, int] = {}
    date_styles, k = book.date_styles, len(want)
    elements = cells = rows = sheet_row = nxt = n = length = depth = inside = row_at = 0
    budget = MAX_ELEMENTS_BEFORE_HEADER  # the element count at which `over` looks again (amortised checks)
    col, kind = -1, K_NONE
    has = in_text = in_is = in_rph = row_has = done = in_row = False
    found_at: tuple[int, int] = (0, 0)
    parts: list[str] = []
    header: dict[int, tuple[int, str]] = {}
    rowbuf: list = [None] * k
    kinds: list[list[int]] = [[] for _ in range(k)]
    texts: list[list] = [[] for _ in range(k)]
    chunks: list[list[tuple[np.ndarray, pa.Array]]] = [[] for _ in range(k)]
    sheet_rows = array("q")
    title = clip(book.title, 40)

    def over() -> None:
        """`elements` reached `budget`: refuse past a bound, else set the next element count to look again at."""
        nonlocal budget
        if not done:
            raise fail(f"a header row within the first {MAX_ELEMENTS_BEFORE_HEADER:,} XML elements of sheet "
                        f"'{title}' (the sheet has more before its first row with a value, sheet row {sheet_row:,})")
        if elements > MAX_SHEET_ELEMENTS:
            raise fail(f"a sheet of at most {MAX_SHEET_ELEMENTS:,} XML elements (sheet '{title}' row "
                        f"{sheet_row:,})")
        outside = elements - inside - (elements - row_at + 1 if in_row else 0)
        if outside > MAX_ELEMENTS_OUTSIDE_ROWS:
            raise fail(f"a sheet of at most {MAX_ELEMENTS_OUTSIDE_ROWS:,} XML elements outside its rows (sheet "
                        f"'{title}' has more)")
        budget = min(elements + MAX_ELEMENTS_OUTSIDE_ROWS - outside + 1, MAX_SHEET_ELEMENTS + 1)

    def start(tag: str, attrs: dict) -> None:
        nonlocal elements, cells, rows, sheet_row, nxt, col, kind, has, in_text, in_is, in_rph, row_has, length, \
            depth, in_row, row_at
        elements += 1
        depth += 1
        if depth > MAX_XML_DEPTH:
            raise too_deep(book.sheet_part)
        if elements > budget:
            over()
        if tag == C:
            cells += 1
            if cells > MAX_SHEET_CELLS:
                raise fail(f"a sheet of at most {MAX_SHEET_CELLS:,} cells (sheet '{title}' row {sheet_row:,})")
            ref = attrs.get("r")
            col = _col_index(ref, cache) if ref else nxt
            if col >= MAX_COLUMNS:
                raise fail(f"at most {MAX_COLUMNS:,} columns (sheet '{title}' row {sheet_row:,} has a cell in "
                            f"column {_col_name(col) if col < 1 << 20 else clip(ref, 12)})")
            nxt, has = col + 1, False
            t = attrs.get("t")
            if t is None or t == "n":
                kind = K_DATE if attrs.get("s") in date_styles else K_NUM
            else:
                kind = K_SST if t == "s" else K_BOOL if t == "b" else K_TEXT
        elif tag == V:
            has = in_text = True
            parts.clear()
            length = 0
        elif tag == ROW:
            rows += 1
            if rows > MAX_SHEET_ROWS:
                raise fail(f"a sheet of at most {MAX_SHEET_ROWS:,} rows (Excel's limit; sheet '{title}' has more)")
            in_row, row_at = True, elements
            r = attrs.get("r", "")
            sheet_row = int(r) if r.isdigit() and len(r) < 9 else sheet_row + 1
            nxt, row_has = 0, False
        elif tag == IS:
            has = in_is = True
            in_text = False
            parts.clear()
            length = 0
        elif tag == T:
            in_text = in_is and not in_rph
        elif tag == RPH:
            in_rph = True

    def chars(d: str) -> None:
        nonlocal length
        if in_text and length <= MAX_FIELD_CHARS:
            parts.append(d)
            length += len(d)

    def end(tag: str) -> None:
        nonlocal in_text, in_is, in_rph, row_has, done, found_at, n, depth, in_row, inside
        depth -= 1
        if tag == C:
            if not has:
                return
            text = "".join(parts)
            if not text and kind != K_TEXT:
                return
            row_has = True
            if header_only:
                if not done:
                    header[col] = (kind, text)
            else:
                j = want.get(col)
                if j is not None:
                    rowbuf[j] = (kind, text)
        elif tag == V or tag == T:
            in_text = False
        elif tag == ROW:
            if in_row:
                inside += elements - row_at + 1
                in_row = False
            if not row_has:
                return
            if header_only:
                if header and not done:
                    done, found_at = True, (rows, sheet_row)
                return
            if rows <= header_ordinal:  # the header row itself
                rowbuf[:] = [None] * k
                done = rows == header_ordinal
                return
            n += 1
            if n > MAX_ROWS:
                raise fail(f"at most {MAX_ROWS:,} rows (sheet '{title}')")
            sheet_rows.append(sheet_row)
            for j in range(k):
                cell = rowbuf[j]
                if cell is None:
                    kinds[j].append(K_NONE)
                    texts[j].append(None)
                else:
                    kinds[j].append(cell[0])
                    texts[j].append(cell[1])
                    rowbuf[j] = None
            if n % FLUSH_ROWS == 0:
                flush()
        elif tag == IS:
            in_is = False
        elif tag == RPH:
            in_rph = False

    def flush() -> None:
        for j in range(k):
            if kinds[j]:
                chunks[j].append((np.array(kinds[j], np.int8), pa.array(texts[j], pa.string())))
                kinds[j].clear()
                texts[j].clear()

    def root(tag: str, attrs: dict) -> None:
        nonlocal C, V, ROW, IS, T, RPH, elements, depth
        elements, depth = 1, 1
        uri = tag.rpartition(" ")[0]
        if uri not in NS_MAIN:
            raise fail(f"an Excel .xlsx worksheet (the part '{clip(book.sheet_part, 60)}' is "
                        f"'{clip(tag, 80)}')")
        C, V, ROW, IS, T, RPH = (f"{uri} {name}" for name in ("c", "v", "row", "is", "t", "rPh"))  # noqa: N806
        p.StartElementHandler = start

    p = xml_parser(book.sheet_part)
    p.StartElementHandler = root
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    feed(p, part_chunks(book.data, book.parts[book.sheet_part], MAX_SHEET_XML_BYTES), book.sheet_part,
         done=(lambda: done) if header_only else None)
    if elements > MAX_SHEET_ELEMENTS:
        raise fail(f"a sheet of at most {MAX_SHEET_ELEMENTS:,} XML elements (sheet '{title}')")
    if header_only:
        return {"header": header, "ordinal": found_at[0], "row": found_at[1]}
    flush()
    return {"chunks": chunks, "sheet_rows": np.asarray(sheet_rows, dtype=np.int64)}


def _shared_strings(book: _Book, needed: np.ndarray) -> dict[int, str]:
    """The shared strings at the sorted indices `needed`, streaming the part only up to the last of them. An index
    at or past the count the part declares (`<sst uniqueCount>`, Excel and openpyxl write it) is refused before a
    string is walked (a header cell pointing at string 14,000,003 walked 240 MB of strings, 20 s, per look)."""
    if needed.size == 0:
        return {}
    if book.sst_part is None:
        raise fail("an Excel .xlsx workbook (cells refer to shared strings the workbook does not have)")
    if needed[0] < 0:
        raise fail("an Excel .xlsx workbook (a cell refers to a negative shared-string index)", value=int(needed[0]))
    wanted = set(needed.tolist())
    last = int(needed[-1])
    out: dict[int, str] = {}
    parts: list[str] = []
    i = closed = -1
    length = depth = elements = 0
    in_text = keep = in_rph = False
    SI = T = RPH = ""  # noqa: N806 - the namespaced tag names, set from the root element
    part = book.sst_part

    def start(tag: str, attrs: dict) -> None:
        nonlocal i, keep, length, in_text, in_rph, depth, elements
        depth += 1
        elements += 1
        if depth > MAX_XML_DEPTH:
            raise too_deep(part)
        if elements > MAX_SHARED_STRINGS_ELEMENTS:
            raise too_many(part, MAX_SHARED_STRINGS_ELEMENTS)
        if tag == SI:
            i += 1
            keep = i in wanted
            if keep:
                parts.clear()
                length = 0
        elif tag == T:
            in_text = keep and not in_rph
        elif tag == RPH:
            in_rph = True

    def chars(d: str) -> None:
        nonlocal length
        if in_text and length <= MAX_FIELD_CHARS:
            parts.append(d)
            length += len(d)

    def end(tag: str) -> None:
        nonlocal in_text, in_rph, closed, depth
        depth -= 1
        if tag == T:
            in_text = False
        elif tag == SI:
            closed = i
            if keep:
                out[i] = "".join(parts)
        elif tag == RPH:
            in_rph = False

    def root(tag: str, attrs: dict) -> None:
        nonlocal SI, T, RPH, depth, elements
        depth = elements = 1
        uri = tag.rpartition(" ")[0]
        SI, T, RPH = (f"{uri} {key}" for key in ("si", "t", "rPh"))  # noqa: N806
        declared = attrs.get("uniqueCount", attrs.get("count", ""))
        if declared.isdigit() and len(declared) < 12 and last >= int(declared):
            raise fail(f"an Excel .xlsx workbook (a cell refers to shared string {last:,}; the workbook declares "
                        f"{int(declared):,})")
        p.StartElementHandler = start

    def inflate() -> Iterator[bytes]:
        return part_chunks(book.data, book.parts[part], MAX_SHARED_STRINGS_XML_BYTES)

    chunks = inflate()
    if needed[0] >= FAST_SKIP_STRINGS:
        found = skip_to_si(chunks, int(needed[0]))
        chunks = inflate()
        if found is not None:
            head, offset, count = found
            if offset < 0:
                raise fail(f"an Excel .xlsx workbook (a cell refers to shared string {last:,}; the workbook has "
                            f"{count:,})")
            # expat reads the root start tag, then the strings from the first one needed on
            chunks = itertools.chain([head], bytes_from(chunks, offset))
            i = closed = int(needed[0]) - 1
    p = xml_parser(part)
    p.StartElementHandler = root
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    feed(p, chunks, part, done=lambda: closed >= last)  # the last one read to its end, not just begun
    if last > closed:
        raise fail(f"an Excel .xlsx workbook (a cell refers to shared string {last:,}; the workbook has "
                    f"{i + 1:,})")
    return out


def _serial_dates(texts: pa.Array, epoch: np.datetime64) -> pa.Array | None:
    """Excel date serials (as text) -> timestamps in ms (openpyxl's rounding); None if one is not a date."""
    try:
        serial = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    ok = np.isnan(serial) | ((serial >= 0) & (serial < MAX_SERIAL))
    if not ok.all():
        return None
    s = np.nan_to_num(serial)
    day = np.floor(s)
    ms = np.round((s - day) * 86_400_000).astype(np.int64)
    if epoch == EPOCH_1900:
        day = day + ((s > 0) & (s < 60))
    ts = epoch + (day.astype(np.int64) * 86_400_000 + ms).astype("timedelta64[ms]")
    return pa.array(ts, pa.timestamp("ms"), mask=np.isnan(serial))


def _as_text(kinds: np.ndarray, texts: pa.Array, sst: dict[int, str], epoch: np.datetime64) -> pa.Array:
    """Every cell of a mixed column as text: shared strings resolved, dates in ISO 8601, booleans true/false."""
    out = texts
    for kind in (K_NUM, K_SST, K_DATE, K_BOOL):
        mask = kinds == kind
        if not mask.any():
            continue
        sel = texts.filter(pa.array(mask))
        if kind == K_NUM:
            try:
                vals = pc.cast(pc.cast(sel, pa.float64()), pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                vals = sel
        elif kind == K_SST:
            vals = pa.array([sst[int(i)] for i in pc.cast(sel, pa.int64()).to_pylist()], pa.string())
        elif kind == K_DATE:
            ts = _serial_dates(sel, epoch)
            vals = sel if ts is None else pc.strftime(ts, "%Y-%m-%dT%H:%M:%S")
        else:
            vals = pc.if_else(pc.equal(sel, "1"), "true", "false")
        out = pc.replace_with_mask(out, pa.array(mask), vals.cast(pa.string()))
    return out


def _column(kinds: np.ndarray, texts: pa.Array, sst: dict[int, str], epoch: np.datetime64) -> pa.Array:
    present = set(np.unique(kinds).tolist()) - {K_NONE}
    if present <= {K_NUM}:
        integral = texts.null_count == len(texts) or not pc.any(pc.match_substring_regex(texts, "[.eE]")).as_py()
        for typ in ((pa.int64(), pa.float64()) if integral else (pa.float64(),)):
            try:
                return pc.cast(texts, typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
        return texts
    if present == {K_DATE}:
        ts = _serial_dates(texts, epoch)
        return texts if ts is None else ts
    if present == {K_BOOL}:
        return pc.equal(texts, "1")
    return _as_text(kinds, texts, sst, epoch)


def _header_name(kind: int, text: str, epoch: np.datetime64) -> str:
    if kind == K_NUM:
        try:
            return str(int(text)) if text.lstrip("-").isdigit() else str(float(text))
        except ValueError:
            return text
    if kind == K_DATE:
        ts = _serial_dates(pa.array([text]), epoch)
        return text if ts is None else str(ts[0].as_py())
    if kind == K_BOOL:
        return "True" if text == "1" else "False"
    return text


def _guarded(fn: Callable) -> Callable:
    """Whatever a damaged workbook makes the reader raise arrives as a TrafficError (the Traffic page's look at the
    header, inspect_upload, catches nothing else)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TrafficError:
            raise
        except MemoryError:
            raise fail("a smaller workbook (reading this one ran out of memory)") from None
        except (ValueError, KeyError, IndexError, OverflowError, TypeError, struct.error, zlib.error,
                pa.ArrowException, RecursionError, UnicodeError) as exc:
            raise fail(f"an Excel .xlsx workbook ({type(exc).__name__}: {clip(str(exc), 120)})") from None
    return call


@_guarded
def xlsx_source(data: bytes, options: ParseOptions) -> Source:
    book = _open_book(data, options.sheet)
    head = _scan(book, {}, header_only=True)
    cells: dict[int, tuple[int, str]] = head["header"]
    if not cells:
        raise fail(f"a header row in the sheet '{clip(book.title, 40)}'")
    sst = _shared_strings(book, np.unique(np.array([int(t) for k, t in cells.values() if k == K_SST], np.int64)))
    values = {i: (sst[int(t)] if k == K_SST else _header_name(k, t, book.epoch)).strip() for i, (k, t) in
              cells.items()}
    filled = [i for i, v in values.items() if v]
    if not filled:
        raise fail(f"a header row in the sheet '{clip(book.title, 40)}' (its first row with values is blank)")
    names = [values.get(i) or f"column {i + 1}" for i in range(max(filled) + 1)]
    first = {}
    for i, n in enumerate(names):
        first.setdefault(n, i)
    sheet_rows: list[np.ndarray] = [np.zeros(0, np.int64)]

    @_guarded
    def read(cols: list[str]) -> pa.Table:
        want = {first[c]: j for j, c in enumerate(cols)}
        got = _scan(book, want, header_only=False, header_ordinal=head["ordinal"])
        sheet_rows[0] = got["sheet_rows"]
        slots = []
        for j in range(len(cols)):
            pieces = got["chunks"][j]
            kinds = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, np.int8)
            texts = pa.concat_arrays([p[1] for p in pieces]) if pieces else pa.array([], pa.string())
            slots.append((kinds, texts))
        idx = [pc.cast(t.filter(pa.array(k == K_SST)), pa.int64()).to_numpy(zero_copy_only=False) for k, t in slots]
        sst_all = _shared_strings(book, np.unique(np.concatenate(idx))) if idx else {}
        arrays = [_column(k, t, sst_all, book.epoch) for k, t in slots]
        _check_lengths(arrays, cols, sheet_rows[0])
        return pa.table(arrays, names=cols)

    def line_of(rows: list[int]) -> dict[int, int]:
        sr = sheet_rows[0]
        return {r: int(sr[r - 1]) for r in rows if 0 < r <= len(sr)}

    return Source("xlsx", names, read, line_of=line_of, line_kind="sheet row")


def _check_lengths(arrays: list[pa.Array], cols: list[str], sheet_rows: np.ndarray) -> None:
    """Refuse a text cell over MAX_FIELD_CHARS, naming the first such row (the streamed text stops one past)."""
    worst: tuple[int, str, str] | None = None
    for arr, c in zip(arrays, cols, strict=True):
        if not pa.types.is_string(arr.type):
            continue
        long = pc.fill_null(pc.greater(pc.utf8_length(arr), MAX_FIELD_CHARS), False).to_numpy(zero_copy_only=False)
        if long.any():
            i = int(np.argmax(long))
            if worst is None or i < worst[0]:
                worst = (i, c, arr[i].as_py())
    if worst is not None:
        i, c, v = worst
        raise fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters", row=i + 1, column=c, value=v,
                    line=int(sheet_rows[i]), line_kind="sheet row")

