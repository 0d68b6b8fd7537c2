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
