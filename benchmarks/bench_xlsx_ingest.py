"""xlsx ingest benchmark (prints figures; no assertions): `python benchmarks/bench_xlsx_ingest.py`.

Each hostile workbook (1 GB of shared strings, shared strings that inflate past their zip directory size, a header
row of 4 million cells, one of 200,000 cells small enough to pass the directory checks, an entity declared in the
shared strings, a billion-laughs DTD in the sheet) and a 300,000-row sheet whose `<dimension>` says 2 rows are
opened in a fresh child process (`measure` from bench_traffic_ingest.py) through parse_traffic and through
inspect_upload (the Traffic page's first look); printed: outcome, wall and CPU seconds, peak RSS (targets for the
bombs: refused in < 1 s, peak RSS < 300 MB). tests/profiles/test_xlsx_bombs.py asserts the refusals, the memory
and the CPU time.

The workbooks are real zip files written here; the large parts are deflated once per ~1 MiB block (a full flush
makes every copy of a block compress to the same bytes), so a 1 GB part costs well under a second to build, as it
costs an attacker.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_traffic_ingest import measure  # noqa: E402

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
HEADER = ("timestamp", "workload", "prompt_tokens", "output_tokens")


class Part:
    """A zip entry: deflated bytes, the uncompressed size and CRC-32 the directory states."""

    def __init__(self, raw: bytes, size: int, crc: int):
        self.raw, self.size, self.crc = raw, size, crc

    @classmethod
    def of(cls, data: bytes) -> Part:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return cls(c.compress(data) + c.flush(), len(data), zlib.crc32(data))

    @classmethod
    def repeated(cls, head: bytes, unit: bytes, copies: int, tail: bytes) -> Part:
        """head + unit * copies + tail, deflating one ~1 MiB block of units once."""
        per = max(1, (1 << 20) // len(unit))
        full, rest = divmod(copies, per)
        block, last = unit * per, unit * rest
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        out = [c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)]
        out.append((c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)) * full)
        out.append(c.compress(last) + c.flush(zlib.Z_FULL_FLUSH) + c.compress(tail) + c.flush())
        crc = zlib.crc32(head)
        for _ in range(full):
            crc = zlib.crc32(block, crc)
        crc = zlib.crc32(tail, zlib.crc32(last, crc))
        return cls(b"".join(out), len(head) + len(unit) * copies + len(tail), crc)


def write_zip(path: Path, parts: dict[str, Part]) -> Path:
    """A plain zip (deflate, no data descriptors) with the sizes and CRCs each Part states."""
    body, central = [], []
    at = 0
    for name, p in parts.items():
        n = name.encode()
        local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, p.crc, len(p.raw), p.size, len(n), 0)
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, p.crc, len(p.raw), p.size,
                                   len(n), 0, 0, 0, 0, 0, at) + n)
        body += [local, n, p.raw]
        at += len(local) + len(n) + len(p.raw)
    cd = b"".join(central)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(parts), len(parts), len(cd), at, 0)
    path.write_bytes(b"".join(body) + cd + end)
    return path


def workbook(path: Path, sheet: Part, shared: Part | None = None) -> Path:
    rels = (f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{REL}/worksheet" Target="worksheets/sheet1.xml"/>'
            + (f'<Relationship Id="rId2" Type="{REL}/sharedStrings" Target="sharedStrings.xml"/>' if shared else "")
            + "</Relationships>")
    parts = {
        "[Content_Types].xml": Part.of(b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                                       b'<Default Extension="xml" ContentType="application/xml"/></Types>'),
        "_rels/.rels": Part.of(
            b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            b'officeDocument" Target="xl/workbook.xml"/></Relationships>'),
        "xl/workbook.xml": Part.of(f'<workbook xmlns="{MAIN}" xmlns:r="{REL}"><sheets><sheet name="Sheet1" '
                                   f'sheetId="1" r:id="rId1"/></sheets></workbook>'.encode()),
        "xl/_rels/workbook.xml.rels": Part.of(rels.encode()),
        "xl/worksheets/sheet1.xml": sheet,
    }
    if shared is not None:
        parts["xl/sharedStrings.xml"] = shared
    return write_zip(path, parts)


def cells(row: int, values) -> bytes:
    out = []
    for i, v in enumerate(values):
        ref = f"{chr(65 + i)}{row}"
        out.append(f'<c r="{ref}" t="s"><v>{v[1:]}</v></c>' if isinstance(v, str) and v.startswith("#")
                   else f'<c r="{ref}" t="inlineStr"><is><t>{v}</t></is></c>' if isinstance(v, str)
                   else f'<c r="{ref}"><v>{v}</v></c>')
    return f'<row r="{row}">{"".join(out)}</row>'.encode()


def sheet_xml(rows: bytes, dimension: str = "A1:D2", prolog: bytes = b"") -> bytes:
    return (prolog + f'<worksheet xmlns="{MAIN}"><dimension ref="{dimension}"/><sheetData>'.encode() + rows
            + b"</sheetData></worksheet>")


def make_xlsx_bombs(d: Path) -> dict[str, Path]:
    """name -> path of each hostile workbook."""
    d.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    header = cells(1, ["#0", "#1", "#2", "#3"])
    data = cells(2, [1_790_000_000, "chat", 100, 10])
    sst = f'<sst xmlns="{MAIN}">'.encode() + b"".join(f"<si><t>{h}</t></si>".encode() for h in HEADER)
    # 1 GB of shared strings behind a four-string header: ~1 MB on disk
    block = b"<si><t>" + b"x" * 1000 + b"</t></si>"
    out["1 GB shared strings"] = workbook(d / "sst.xlsx", Part.of(sheet_xml(header + data)),
                                          Part.repeated(sst, block, 1_000_000, b"</sst>"))
    # the same shared strings, 100 MB, with a directory entry that says 4 KB
    lie = Part.repeated(sst, block, 100_000, b"</sst>")
    lie.size = 4096
    out["shared strings past their directory size"] = workbook(d / "sst_lie.xlsx", Part.of(sheet_xml(header + data)),
                                                               lie)
    # a header row of 4 million cells (~100 KB on disk)
    out["4M-cell header row"] = workbook(d / "wide.xlsx", Part.repeated(
        sheet_xml(b"", prolog=b"")[:-len(b"</sheetData></worksheet>")] + b'<row r="1">',
        b'<c t="s"><v>0</v></c>', 4_000_000, b"</row></sheetData></worksheet>"), Part.of(sst + b"</sst>"))
    # a header row of 200,000 cells in a part small and regular enough to pass the directory checks
    out["200k-cell header row"] = workbook(d / "wide_small.xlsx", Part.of(sheet_xml(
        b'<row r="1">' + b'<c t="inlineStr"><is><t>h</t></is></c>' * 200_000 + b"</row>")))
    # an entity declared in the shared strings and used in a header cell; a billion-laughs DTD in the sheet
    ent = (b'<?xml version="1.0"?><!DOCTYPE sst [<!ENTITY w "workload">]>' + f'<sst xmlns="{MAIN}">'.encode()
           + b"<si><t>timestamp</t></si><si><t>&w;</t></si><si><t>prompt_tokens</t></si><si><t>output_tokens</t>"
           b"</si></sst>")
    out["entity in a header"] = workbook(d / "entity.xlsx", Part.of(sheet_xml(header + data)), Part.of(ent))
    laughs = b'<!DOCTYPE worksheet [<!ENTITY a "aaaaaaaaaa">' + b"".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode() for i in range(9)) + b"]>"
    out["billion laughs in the sheet"] = workbook(d / "laughs.xlsx", Part.of(sheet_xml(
        cells(1, ["&j;", "workload", "prompt_tokens", "output_tokens"]) + data, prolog=laughs)))
    return out


def make_stale_dimension(d: Path, rows: int = 300_000) -> Path:
    """`rows` data rows under a <dimension> tag that says the sheet ends at row 2 (openpyxl stops there)."""
    body = b"".join(cells(r, [1_790_000_000 + r, "chat", 100, 10]) for r in range(2, rows + 2))
    return workbook(d / "stale.xlsx", Part.of(sheet_xml(cells(1, HEADER) + body)))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print("xlsx bombs (each opened in a fresh process; targets: refused in < 1 s, peak RSS < 300 MB)")
        files = make_xlsx_bombs(Path(tmp))
        files["stale dimension, 300,000 rows"] = make_stale_dimension(Path(tmp))
        for label, path in files.items():
            for fn in ("parse", "inspect"):  # parse_traffic, inspect_upload
                r = measure(path, fn=fn)
                print(f"  {label:42s} {path.stat().st_size / 1024:7.0f} KB {fn:8s} {r['outcome']:8s} in "
                      f"{r['seconds']:6.3f} s (CPU {r['cpu_s']:6.3f} s), peak RSS {r['peak_mb']:4.0f} MB (baseline "
                      f"{r['baseline_mb']:.0f} MB): {r['message'][:110]}", flush=True)


if __name__ == "__main__":
    main()
