"""Bomb guards that look at the bytes before anything is decoded: the upload's size, UTF-8 validity (naming line
and column without decoding the file into memory), the length of each line and the separators on it."""

from __future__ import annotations

import codecs

import numpy as np

from profiles.traffic.errors import fail


def check_size(data: bytes, max_bytes: int) -> None:
    """Refuse an empty upload and one over `max_bytes` (MAX_UPLOAD_BYTES unless the caller says otherwise)."""
    if len(data) == 0:
        raise fail("a non-empty file (this one has 0 bytes)")
    if len(data) > max_bytes:
        raise fail(f"a file of at most {size_text(max_bytes)} (this one has {len(data):,} bytes); "
                    "sample the log (and add a 'weight' column) or upload an aggregated mix table")


def size_text(n_bytes: int) -> str:
    """A size limit as text: whole MiB when it is one ("100 MiB (104,857,600 bytes)"), else bytes. A size over a
    limit is given in bytes by the callers, so it never reads as the limit itself ("100.0 MiB" for 100 MiB + 1)."""
    if n_bytes >= 2**20 and n_bytes % 2**20 == 0:
        return f"{n_bytes // 2**20:,} MiB ({n_bytes:,} bytes)"
    return f"{n_bytes:,} bytes"


def check_utf8(buf: bytes, start: int, delimiter: str = ",", header: list[str] | None = None) -> None:
    """Refuse text that is not UTF-8, naming line and column, without decoding the file into memory."""
    if buf.isascii():
        return
    chunk = 1 << 20
    pos = start
    while pos < len(buf):
        end = min(pos + chunk, len(buf))
        while end < len(buf) and (buf[end] & 0xC0) == 0x80:  # do not split a multi-byte sequence
            end += 1
        try:
            codecs.utf_8_decode(buf[pos:end], "strict", True)
        except UnicodeDecodeError as exc:
            bad = pos + exc.start
            line_start = buf.rfind(b"\n", 0, bad) + 1
            line = buf.count(b"\n", start, bad) + 1
            column = None
            if header:
                idx = buf[line_start:bad].count(delimiter.encode())
                column = header[idx] if idx < len(header) else None
            raise fail(f"UTF-8 text (byte {bad:,} is not UTF-8; re-export the file as UTF-8)",
                        row=line - 1 if line > 1 else None, column=column, value=buf[bad:bad + 4],
                        line=line) from None
        pos = end



def long_lines(buf: bytes, start: int, max_len: int, delim: bytes | None = None, max_delims: int = 0):
    """Yield (offset, length, separators) of each line from `start` longer than `max_len` bytes or carrying more
    than `max_delims` bytes `delim`, in order. numpy over 1 MiB chunks: an ordinary line costs no Python work,
    and a line of 10 MiB of separators is counted, never split (~3 ms per MiB)."""
    view = np.frombuffer(buf, dtype=np.uint8)
    d = delim[0] if delim else None
    line_start, carry, step = start, 0, 1 << 20
    for a in range(start, len(buf), step):
        chunk = view[a:a + step]
        ends = np.flatnonzero(chunk == 10)
        if d is not None:
            cum = np.cumsum(chunk == d, dtype=np.int32)
            at = cum[ends].astype(np.int64)
            counts = np.diff(at, prepend=0)
            if counts.size:
                counts[0] += carry
            total = int(cum[-1])
        else:
            at = counts = np.zeros(ends.size, np.int64)
            total = 0
        ends += a
        starts = np.empty_like(ends)
        if ends.size:
            starts[0] = line_start
            starts[1:] = ends[:-1] + 1
        lengths = ends - starts
        for i in np.flatnonzero((lengths > max_len) | (counts > max_delims)):
            yield int(starts[i]), int(lengths[i]), int(counts[i])
        if ends.size:
            line_start, carry = int(ends[-1]) + 1, total - int(at[-1])
        else:
            carry += total
    if line_start < len(buf) and (len(buf) - line_start > max_len or carry > max_delims):
        yield line_start, len(buf) - line_start, carry


_NUMBER_BYTES = np.zeros(256, bool)
_NUMBER_BYTES[list(b"0123456789.eE+-")] = True


def check_json_tokens(data: bytes, max_depth: int, max_number_chars: int) -> None:
    """Refuse a JSON document nested deeper than `max_depth` or with a number longer than `max_number_chars`
    characters, naming the byte, before any JSON parser sees it. numpy over 1 MiB chunks (~3 ms each): quotes
    that are not escaped toggle "inside a string"; brackets and number characters count only outside strings."""
    if b"\\" in data:  # an escaped quote or backslash is text: blank both, keeping every offset
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    view = np.frombuffer(data, dtype=np.uint8)
    # inside a string at the chunk's start; depth; the number characters ending the last chunk and where they start
    parity = depth = run = run_at = 0
    step = 1 << 20
    for a in range(0, len(view), step):
        c = view[a:a + step]
        cq = np.cumsum(c == 34, dtype=np.int32)
        outside = ((cq + parity) & 1) == 0
        parity = (parity + int(cq[-1])) & 1
        del cq
        opens = ((c == 91) | (c == 123)) & outside
        closes = ((c == 93) | (c == 125)) & outside
        d = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32) + depth
        if int(d.max()) > max_depth:
            at = a + int(np.argmax(d > max_depth))
            raise fail(f"a JSON document nested at most {max_depth} deep (objects and lists open at once; byte "
                        f"{at:,} opens one more)")
        depth = int(d[-1])
        num = _NUMBER_BYTES[c] & outside
        edges = np.flatnonzero(np.diff(num.view(np.int8), prepend=0, append=0))
        starts, ends = edges[0::2], edges[1::2]
        lengths = ends - starts
        starts = starts + a
        if lengths.size and starts[0] == a and run:  # the number goes on from the last chunk
            lengths[0] += run
            starts[0] = run_at
        long = np.flatnonzero(lengths > max_number_chars)
        if long.size:
            at = int(starts[long[0]])
            raise fail(f"JSON numbers of at most {max_number_chars} characters (the one at byte {at:,} has more; "
                        "token counts and times are short numbers)", value=bytes(view[at:at + 40]))
        run, run_at = (int(lengths[-1]), int(starts[-1])) if lengths.size and ends[-1] == len(c) else (0, 0)


# What the Traffic page accepts, in the words of a refusal.
ACCEPTED_FILES = "a CSV (or TSV), JSON lines, JSON, Parquet or Excel .xlsx export"
# The first bytes of files that are uploaded as traffic but are not a table (each format's published signature);
# Parquet's PAR1 and a zip's PK are what their own readers expect.
SIGNATURES = (
    (b"PK\x03\x04", "a zip archive: an .xlsx workbook is read when its name ends in .xlsx; a zipped table must be "
                     "unzipped and the table inside uploaded", "xlsx"),
    (b"\x1f\x8b", "gzip-compressed: unzip it and upload the table inside", ""),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it and upload the table inside", ""),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: unpack it and upload the table inside", ""),
    (b"PAR1", "a Parquet file: upload it with a name ending in .parquet", "parquet"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Excel .xls (or other Office) file: save it as .xlsx or .csv", ""),
    (b"\x89PNG\r\n\x1a\n", "a PNG image", ""),
    (b"\xff\xd8\xff", "a JPEG image", ""),
    (b"GIF8", "a GIF image", ""),
    (b"%PDF-", "a PDF document", ""),
    (b"\xff\xfe", "UTF-16 text (it starts with a UTF-16 byte-order mark): save it as UTF-8", ""),
    (b"\xfe\xff", "UTF-16 text (it starts with a UTF-16 byte-order mark): save it as UTF-8", ""),
)
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13))
_EXPECTED = {"parquet": "a Parquet file", "xlsx": "an Excel .xlsx workbook"}


def refuse_not_a_table(data: bytes, fmt: str) -> None:
    """Refuse a file that is not a table of the format its name says, before any reader looks at it, in words that
    say what it looks like and what is accepted: a known signature (a PNG, a PDF, a gzip ...), and for the text
    formats (CSV, JSON lines, JSON) UTF-16 without a byte-order mark (every other byte NUL), more than 1 in 20
    of the first 4 KiB being control characters, or more than 1 in 20 bytes of the first line not decoding as
    UTF-8 (random bytes: ~1/8 control characters and most high bytes invalid; a Latin-1 export has a few
    accented letters and is refused later, naming the line, by check_utf8)."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    expected = _EXPECTED.get(fmt, "a text table")
    accepted = f"; upload {ACCEPTED_FILES}"
    for magic, what, own in SIGNATURES:
        if data.startswith(magic, start) and own != fmt:
            # a signature that says what to do (unzip it, save it as UTF-8) needs no list of formats after it
            raise fail(f"{expected} (this file is {what}{accepted if ':' not in what else ''})")
    head = data[start:start + 4096]
    if fmt in _EXPECTED:
        own = next(magic for magic, _what, f in SIGNATURES if f == fmt)
        if not data.startswith(own):
            text = head.isascii() and head.translate(None, _CONTROL_BYTES) == head
            looks = ("text: a table in text is read when its name ends in .csv, .tsv, .jsonl or .json" if text
                     else f"binary data{accepted}")
            raise fail(f"{expected} (this file does not start as one does: it looks like {looks})")
        return
    even, odd = head[0::2], head[1::2]
    if len(head) >= 8 and (even.count(0) > len(even) // 2 and odd.count(0) < len(odd) // 8
                           or odd.count(0) > len(odd) // 2 and even.count(0) < len(even) // 8):
        raise fail("a text table (this file looks like UTF-16 without a byte-order mark: save it as UTF-8)")
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if controls > len(head) // 20:  # text has tabs and line breaks; random bytes are 1/8 control characters
        raise fail(f"a text table (this file looks binary: {controls:,} of its first {len(head):,} bytes are "
                    f"control characters{accepted})")
    # the first line: a header in UTF-8 with a bad cell further down is refused by check_utf8, naming the line
    first = head[:head.find(b"\n")] if b"\n" in head else head
    if not first.isascii():
        text = first[:-4].decode("utf-8", errors="replace") if len(first) > 8 else first.decode("utf-8", "replace")
        invalid = text.count("\ufffd")
        if invalid > max(len(first) // 20, 1):
            raise fail(f"a text table (this file looks binary: {invalid:,} of the {len(first):,} bytes of its first "
                        f"line are not text in UTF-8{accepted})")
