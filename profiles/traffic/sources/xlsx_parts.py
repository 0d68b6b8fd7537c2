"""The parts of an .xlsx workbook, bounded by what they actually decode: the zip directory is checked (its size, each
part's declared size and compression ratio), each part is inflated as a stream that is refused as soon as it yields
more bytes than the directory says, and XML is read with expat callbacks (never a tree) that refuse a DOCTYPE or
an entity declaration before anything in it is expanded, and a tag or comment longer than MAX_XML_TOKEN_BYTES."""

from __future__ import annotations

import io
import itertools
import pyexpat
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from posixpath import dirname, join, normpath

from profiles.traffic.errors import clip, fail
from profiles.traffic.limits import MAX_XLSX_XML_BYTES

MAX_ZIP_DIRECTORY_BYTES = 1 << 20  # ~10,000 parts; a workbook has tens
MAX_SHEET_XML_BYTES = 512 * 1024 * 1024  # one worksheet's XML, uncompressed (about a million 6-column rows)
MAX_SHARED_STRINGS_XML_BYTES = 256 * 1024 * 1024
MAX_SMALL_PART_BYTES = 16 * 1024 * 1024  # workbook.xml, its relationships, styles.xml
# Spreadsheet XML deflates 5-30x; a part far beyond that is a bomb, not a table. Small parts may be more regular.
MAX_COMPRESSION_RATIO = 200
RATIO_FREE_BYTES = 8 * 1024 * 1024
MAX_XML_TOKEN_BYTES = 4 * 1024 * 1024  # one start tag, comment or run of text without a callback
# Elements open at once: expat keeps a stack entry (~120 bytes) per open element, so 10 million nested tags in an
# 825 KB workbook built 1.4 GB. Spreadsheet XML nests ~6 deep (worksheet, sheetData, row, c, is, r, t).
MAX_XML_DEPTH = 64
MAX_SMALL_PART_ELEMENTS = 1_000_000  # workbook.xml, relationships, styles.xml: thousands of elements
CHUNK_BYTES = 1 << 16

NS_MAIN = ("http://schemas.openxmlformats.org/spreadsheetml/2006/main", "http://purl.oclc.org/ooxml/spreadsheetml/main")
NS_REL = ("http://schemas.openxmlformats.org/officeDocument/2006/relationships",
          "http://purl.oclc.org/ooxml/officeDocument/relationships")


def _workbook_error(why: str) -> Exception:
    return fail(f"an Excel .xlsx workbook ({clip(why, 160)})")


def zip_directory(data: bytes) -> dict[str, zipfile.ZipInfo]:
    """The zip directory (name -> entry) once its own size is bounded; ZipFile reads the whole central directory
    into memory, so its size is read from the end record first (zip64 is refused: no bounded workbook needs it)."""
    if data[-22:-18] == b"PK\x05\x06" and data[-2:] == b"\0\0":  # the record ZipFile takes first
        end = len(data) - 22
    else:
        end = data.rfind(b"PK\x05\x06", max(0, len(data) - (22 + 65536)))
    if end < 0 or len(data) - end < 22:
        raise _workbook_error("no zip directory: the file is not a workbook or it is cut short")
    if end >= 20 and data[end - 20:end - 16] == b"PK\x06\x07":
        raise _workbook_error("a zip64 archive; save the workbook again from Excel")
    entries, cd_size = struct.unpack("<HI", data[end + 10:end + 16])
    if entries == 0xFFFF or cd_size == 0xFFFFFFFF:
        raise _workbook_error("a zip64 archive; save the workbook again from Excel")
    if cd_size > MAX_ZIP_DIRECTORY_BYTES:
        raise _workbook_error(f"a zip directory of {cd_size:,} bytes; at most {MAX_ZIP_DIRECTORY_BYTES:,} expected")
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
        raise _workbook_error(str(exc)) from None
    total = sum(i.file_size for i in infos if i.filename.startswith("xl/"))
    if total > MAX_XLSX_XML_BYTES:
        raise fail(f"an .xlsx workbook of at most {MAX_XLSX_XML_BYTES // 2**20} MiB uncompressed (this one "
                    f"unpacks to {total / 2**20:,.0f} MiB)")
    return {i.filename: i for i in infos}


def check_part(info: zipfile.ZipInfo, max_bytes: int) -> None:
    """Refuse a part by its directory entry: size, compression ratio, method, encryption."""
    name = clip(info.filename, 80)
    if info.flag_bits & 0x1:
        raise _workbook_error(f"the part '{name}' is encrypted; save the workbook without a password")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise _workbook_error(f"the part '{name}' uses zip method {info.compress_type}; Excel writes deflate")
    if info.file_size > max_bytes:
        raise fail(f"an .xlsx part '{name}' of at most {max_bytes // 2**20} MiB uncompressed (this one unpacks to "
                    f"{info.file_size / 2**20:,.0f} MiB)")
    if info.file_size > RATIO_FREE_BYTES and info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
        raise fail(f"an .xlsx part '{name}' that compresses at most {MAX_COMPRESSION_RATIO}:1 (this one: "
                    f"{info.compress_size:,} bytes unpack to {info.file_size / 2**20:,.0f} MiB, a zip bomb)")


def part_chunks(data: bytes, info: zipfile.ZipInfo, max_bytes: int) -> Iterator[bytes]:
    """The part's bytes, inflated CHUNK_BYTES at a time from the upload's own bytes; refused as soon as it yields
    more than the directory's uncompressed size, and at the end unless size and CRC-32 match the directory."""
    check_part(info, max_bytes)
    name = clip(info.filename, 80)
    at = info.header_offset
    head = data[at:at + 30]
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise _workbook_error(f"the part '{name}' has no local header")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    start = at + 30 + n_name + n_extra
    raw = memoryview(data)[start:start + info.compress_size]
    if len(raw) < info.compress_size:
        raise _workbook_error(f"the part '{name}' is cut short")
    total, crc = 0, 0

    def grow(out: bytes) -> None:
        nonlocal total, crc
        total += len(out)
        if total > info.file_size:
            raise fail(f"an .xlsx part '{name}' that unpacks to the {info.file_size:,} bytes its zip directory "
                        f"states (it unpacks to more: a zip bomb)")
        crc = zlib.crc32(out, crc)

    if info.compress_type == zipfile.ZIP_STORED:
        for i in range(0, len(raw), CHUNK_BYTES):
            out = bytes(raw[i:i + CHUNK_BYTES])
            grow(out)
            yield out
    else:
        d = zlib.decompressobj(-15)
        pos = 0
        try:
            while not d.eof:
                if d.unconsumed_tail:
                    inp = d.unconsumed_tail
                elif pos < len(raw):
                    inp = raw[pos:pos + CHUNK_BYTES]
                    pos += len(inp)
                else:
                    inp = b""
                out = d.decompress(inp, CHUNK_BYTES)
                if not out and not inp:
                    break
                if out:
                    grow(out)
                    yield out
        except zlib.error as exc:
            raise _workbook_error(f"the part '{name}' does not inflate ({exc})") from None
        if not d.eof:
            raise _workbook_error(f"the part '{name}' is cut short")
    if total != info.file_size or crc != info.CRC:
        raise _workbook_error(f"the part '{name}' does not match its zip directory entry (size or CRC-32)")


def _no_dtd(part: str) -> Callable[..., None]:
    def refuse(*_args) -> None:
        raise fail(f"an .xlsx part without a DOCTYPE or entity declarations ('{clip(part, 80)}' has one; Excel "
                    "never writes them)")
    return refuse


def xml_parser(part: str) -> pyexpat.XMLParserType:
    """An expat parser (namespace URI and local name joined by a space) that refuses DTDs and entity declarations
    the moment they start: an undeclared entity reference is then a plain XML error."""
    p = pyexpat.ParserCreate(namespace_separator=" ")
    p.buffer_text = True
    p.buffer_size = CHUNK_BYTES
    p.StartDoctypeDeclHandler = _no_dtd(part)
    p.EntityDeclHandler = _no_dtd(part)
    p.UnparsedEntityDeclHandler = _no_dtd(part)
    p.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    return p


def feed(p: pyexpat.XMLParserType, chunks: Iterator[bytes], part: str,
         done: Callable[[], bool] | None = None) -> None:
    """Feed a part to `p` until the end or until `done()`; a malformed part or a token longer than
    MAX_XML_TOKEN_BYTES (expat holds a whole start tag or comment before its callback) is refused."""
    fed = 0
    try:
        for chunk in chunks:
            p.Parse(chunk, False)
            fed += len(chunk)
            if fed - max(p.CurrentByteIndex, 0) > MAX_XML_TOKEN_BYTES:
                raise fail(f"XML tags of at most {MAX_XML_TOKEN_BYTES // 2**20} MiB in the .xlsx part "
                            f"'{clip(part, 80)}' (one runs past byte {fed:,})")
            if done is not None and done():
                return
        p.Parse(b"", True)
    except pyexpat.ExpatError as exc:
        raise _workbook_error(f"the part '{part}' is not well-formed XML: {exc}") from None
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def too_deep(part: str) -> Exception:
    return fail(f"XML elements nested at most {MAX_XML_DEPTH} deep in the .xlsx part '{clip(part, 80)}' (Excel "
                 "nests about 6)")


def too_many(part: str, max_elements: int) -> Exception:
    return fail(f"at most {max_elements:,} XML elements in the .xlsx part '{clip(part, 80)}'")


def counted(p: pyexpat.XMLParserType, part: str, max_elements: int, start: Callable[[str, dict], None],
            end: Callable[[str], None] | None = None) -> None:
    """Install `start` and `end` on `p` behind a count of the elements open (MAX_XML_DEPTH) and seen
    (`max_elements`): a part is refused at the first element past either."""
    depth = elements = 0

    def on_start(tag: str, attrs: dict) -> None:
        nonlocal depth, elements
        depth += 1
        elements += 1
        if depth > MAX_XML_DEPTH:
            raise too_deep(part)
        if elements > max_elements:
            raise too_many(part, max_elements)
        start(tag, attrs)

    def on_end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        if end is not None:
            end(tag)

    p.StartElementHandler = on_start
    p.EndElementHandler = on_end


def read_small(data: bytes, parts: dict[str, zipfile.ZipInfo], name: str,
               start: Callable[[str, dict], None]) -> None:
    """Feed a small part (workbook, relationships, styles) to a start-element callback."""
    p = xml_parser(name)
    counted(p, name, MAX_SMALL_PART_ELEMENTS, start)
    feed(p, part_chunks(data, parts[name], MAX_SMALL_PART_BYTES), name)


def local(name: str) -> str:
    return name.rpartition(" ")[2]


def relationships(data: bytes, parts: dict[str, zipfile.ZipInfo], owner: str) -> dict[str, tuple[str, str]]:
    """Relationship id -> (type's last word, part name) of `owner` (e.g. xl/workbook.xml)."""
    rels = join(dirname(owner), "_rels", owner.rpartition("/")[2] + ".rels")
    out: dict[str, tuple[str, str]] = {}
    if rels not in parts:
        return out

    def start(tag: str, attrs: dict) -> None:
        if local(tag) == "Relationship" and "Id" in attrs and "Target" in attrs:
            if len(out) > 100_000:
                raise _workbook_error(f"more than 100,000 relationships in '{rels}'")
            target = attrs["Target"]
            path = normpath(target.lstrip("/") if target.startswith("/") else join(dirname(owner), target))
            out[attrs["Id"]] = (attrs.get("Type", "").rpartition("/")[2], path)

    read_small(data, parts, rels, start)
    return out


# The root of a shared-strings part (after an XML declaration), its start tag whole within the first chunk
_SST_ROOT = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:<\?xml[^<>]*\?>)?[ \t\r\n]*<sst(?:[ \t\r\n][^<>]*)?(?<!/)>")
# Bytes that make a part other than plain: a comment, CDATA, DOCTYPE or processing instruction (each may hold
# "<si>" that is not a tag), a prefixed si, or a namespace declared below the root (an si of another namespace).
_NOT_PLAIN = (b"<!", b"<?", b":si", b"xmlns")


def skip_to_si(chunks: Iterator[bytes], index: int) -> tuple[bytes, int, int] | None:
    """In a plain shared-strings part, the bytes up to the end of its root start tag, the byte offset of its
    `index`-th (0-based) `<si>` start tag (-1 when it has fewer) and the `<si>` tags counted, found by counting
    the bytes "<si>" at C speed (expat's callbacks take ~1.5 us a string: 14 million strings before a header's
    string took 20 s). Plain: every "<si" is an unprefixed `<si>` start tag (text and attribute values cannot hold
    "<") and none of _NOT_PLAIN follows the root; None otherwise (expat then walks every string)."""
    carry, base, seen, root = b"", 0, 0, None
    try:
        for chunk in itertools.chain(chunks, [None]):
            window = carry + (chunk or b"")
            scan = 0
            if root is None:
                m = _SST_ROOT.match(window)
                if m is None:
                    return None
                root = scan = m.end()
                prefix = window[:root]
            cut = len(window) if chunk is None else max(len(window) - 4, scan)
            n = len(window)  # below: occurrences that start before cut (the rest are carried to the next window)
            if any(window.find(pat, scan, min(cut + len(pat) - 1, n)) >= 0 for pat in _NOT_PLAIN):
                return None
            tags = window.count(b"<si>", scan, min(cut + 3, n))
            if window.count(b"<si", scan, min(cut + 2, n)) != tags:
                return None
            if seen + tags > index:
                pos = scan - 1
                for _ in range(index - seen + 1):
                    pos = window.find(b"<si>", pos + 1)
                return prefix, base + pos, seen + tags
            seen += tags
            carry, base = window[cut:], base + cut
        return (prefix, -1, seen) if root is not None else None
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def bytes_from(chunks: Iterator[bytes], offset: int) -> Iterator[bytes]:
    """The chunks' bytes from `offset` on."""
    pos = 0
    for chunk in chunks:
        if pos + len(chunk) > offset:
            yield chunk[max(offset - pos, 0):]
        pos += len(chunk)
