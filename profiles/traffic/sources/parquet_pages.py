"""The page headers of a Parquet column chunk, read from the file's bytes before pyarrow decodes a page. A page
header states the page's decompressed size, and that is the buffer the reader allocates for it (Arrow's
`parquet/column_reader.cc` decompresses each page whole into `uncompressed_page_size` bytes and refuses a page
that decompresses to anything else), so the sum over a chunk's pages is what reading the chunk decodes, whatever
the footer's `total_uncompressed_size` claims. The headers are Thrift compact-protocol structs (`PageHeader` in
parquet-format's `parquet.thrift`); the pages are walked the way Arrow does (`SerializedPageReader`): from the
dictionary page (or the first data page) until the chunk's values are all seen."""

from __future__ import annotations

from dataclasses import dataclass

from profiles.traffic.errors import fail

# Thrift compact protocol field types (thrift/lib/cpp/src/thrift/protocol/TCompactProtocol.tcc)
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
MAX_DEPTH = 16  # nesting of structs and lists in a page header (parquet.thrift's deepest is 4)
# PageHeader (parquet.thrift): 1 type, 2 uncompressed_page_size, 3 compressed_page_size, 5 data_page_header,
# 7 dictionary_page_header, 8 data_page_header_v2; their field 1 is num_values. PageType: 0 DATA_PAGE,
# 1 INDEX_PAGE, 2 DICTIONARY_PAGE, 3 DATA_PAGE_V2. A data page's encoding: DataPageHeader field 2,
# DataPageHeaderV2 field 4; PLAIN_DICTIONARY = 2 and RLE_DICTIONARY = 8 point into the dictionary page.
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
DICTIONARY_ENCODINGS = (2, 8)


class ThriftError(ValueError):
    """Bytes that are not a Thrift compact-protocol struct (or one nested too deeply)."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ThriftError("a varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def read_value(buf: bytes, pos: int, end: int, ttype: int, depth: int = 0, keep_binary: bool = True):
    """One value of compact type `ttype` at `pos`: (value, next position). A struct is a list of
    (field id, type, value) in order, a list or set is (element type, [values]), a map is
    (key type, value type, [(key, value)]); binary values are None unless `keep_binary`."""
    if depth > MAX_DEPTH:
        raise ThriftError("nested too deeply")
    if ttype in (BOOL_TRUE, BOOL_FALSE):  # an element of a list (in a struct the type carries the value)
        if pos >= end:
            raise ThriftError("a bool runs past the end")
        return buf[pos] == 1, pos + 1
    if ttype == BYTE:
        if pos >= end:
            raise ThriftError("a byte runs past the end")
        return buf[pos], pos + 1
    if ttype in (I16, I32, I64):
        v, pos = _varint(buf, pos, end)
        return _zigzag(v), pos
    if ttype == DOUBLE:
        if pos + 8 > end:
            raise ThriftError("a double runs past the end")
        return buf[pos:pos + 8], pos + 8
    if ttype == BINARY:
        n, pos = _varint(buf, pos, end)
        if pos + n > end:
            raise ThriftError("a string runs past the end")
        return (buf[pos:pos + n] if keep_binary else None), pos + n
    if ttype in (LIST, SET):
        if pos >= end:
            raise ThriftError("a list runs past the end")
        head = buf[pos]
        pos += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos, end)
        if size > end - pos:  # every element takes at least one byte
            raise ThriftError("a list longer than its bytes")
        items = []
        for _ in range(size):
            v, pos = read_value(buf, pos, end, etype, depth + 1, keep_binary)
            items.append(v)
        return (etype, items), pos
    if ttype == MAP:
        size, pos = _varint(buf, pos, end)
        if size == 0:
            return (0, 0, []), pos
        if pos >= end or size > end - pos:
            raise ThriftError("a map longer than its bytes")
        kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
        pos += 1
        pairs = []
        for _ in range(size):
            k, pos = read_value(buf, pos, end, kt, depth + 1, keep_binary)
            v, pos = read_value(buf, pos, end, vt, depth + 1, keep_binary)
            pairs.append((k, v))
        return (kt, vt, pairs), pos
    if ttype == STRUCT:
        fields, fid = [], 0
        while True:
            if pos >= end:
                raise ThriftError("a struct runs past the end")
            head = buf[pos]
            pos += 1
            if head == 0:
                return fields, pos
            ftype, delta = head & 0x0F, head >> 4
            if delta:
                fid += delta
            else:
                raw, pos = _varint(buf, pos, end)
                fid = _zigzag(raw)
            if ftype in (BOOL_TRUE, BOOL_FALSE):
                fields.append((fid, ftype, ftype == BOOL_TRUE))
                continue
            v, pos = read_value(buf, pos, end, ftype, depth + 1, keep_binary)
            fields.append((fid, ftype, v))
    raise ThriftError(f"unknown type {ttype}")


def _field(fields: list, fid: int, default=None):
    return next((v for f, _t, v in fields if f == fid), default)


@dataclass(frozen=True)
class ChunkPages:
    """What a column chunk's page headers say: decompressed bytes (dictionary page included), values in its
    data pages, the number of pages, the largest page, and the data pages that point into the dictionary page
    and the decompressed bytes of the other data pages (a writer that falls back from a dictionary writes both)."""

    uncompressed_bytes: int
    values: int
    pages: int
    largest_page_bytes: int
    dictionary_coded_pages: int
    plain_bytes: int
    dictionary_bytes: int = 0  # decompressed bytes of the dictionary page(s)
    dictionary_values: int = 0  # values the dictionary page(s) hold (DictionaryPageHeader field 1)


def chunk_pages(data: bytes, cc, *, max_pages: int, column: str) -> ChunkPages:
    """Walk the page headers of column chunk `cc` (pyarrow ColumnChunkMetaData) in `data` (the whole file), the
    way Arrow's page reader does, without decompressing anything. Refuses (TrafficError) a header that is not
    one, a page past the chunk or the file, and more than `max_pages` pages."""
    if cc.num_values == 0:
        return ChunkPages(0, 0, 0, 0, 0, 0)
    pos = cc.data_page_offset
    if cc.has_dictionary_page and cc.dictionary_page_offset and 0 < cc.dictionary_page_offset < pos:
        pos = cc.dictionary_page_offset
    end = min(pos + cc.total_compressed_size, len(data) - 8)
    # Arrow reads up to 100 bytes past a chunk's stated end: old parquet-mr files understate it (PARQUET-816)
    padded = min(end + 100, len(data) - 8)
    if pos < 4 or pos >= end:
        raise fail(f"a Parquet column chunk within the file (it says bytes {pos:,} to {end:,})", column=column)
    total = values = pages = largest = coded = plain = dict_bytes = dict_values = 0
    try:
        while values < cc.num_values and pos < end:
            header, pos = read_value(data, pos, padded, STRUCT, keep_binary=False)
            ptype, unc, comp = _field(header, 1), _field(header, 2), _field(header, 3)
            if not isinstance(unc, int) or not isinstance(comp, int) or unc < 0 or comp < 0 or pos + comp > padded:
                raise ThriftError("a page header without its sizes, or a page past the chunk")
            pos += comp
            pages += 1
            if pages > max_pages:
                raise fail(f"at most {max_pages:,} pages in a column chunk", column=column)
            total += unc
            largest = max(largest, unc)
            if ptype == DICTIONARY_PAGE:
                sub = _field(header, 7)
                n = _field(sub, 1) if isinstance(sub, list) else None
                dict_bytes += unc
                dict_values += n if isinstance(n, int) and n > 0 else 0
            elif ptype in (DATA_PAGE, DATA_PAGE_V2):
                sub = _field(header, 5 if ptype == DATA_PAGE else 8)
                n = _field(sub, 1) if isinstance(sub, list) else None
                if not isinstance(n, int) or n < 0:
                    raise ThriftError("a data page header without its number of values")
                values += n
                if _field(sub, 2 if ptype == DATA_PAGE else 4) in DICTIONARY_ENCODINGS:
                    coded += 1
                else:
                    plain += unc
    except ThriftError as exc:
        raise fail(f"a readable Parquet page header ({exc} at byte {pos:,})", column=column) from None
    return ChunkPages(total, values, pages, largest, coded, plain, dict_bytes, dict_values)
