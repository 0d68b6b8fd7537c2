"""The streamed .xlsx reader gives the values openpyxl gives (openpyxl is the oracle here: an independent reader of
the same files), for workbooks openpyxl writes and for hand-written parts with the shapes Excel and other writers
use: shared strings with rich text and phonetic runs, a namespace prefix, cells without references, formulas with
cached values, booleans, errors, the 1904 date system, and a sheet chosen by name."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from benchmarks.bench_xlsx_ingest import HEADER, MAIN, REL, Part, cells, sheet_xml, workbook, write_zip
from profiles import load_catalog
from profiles.traffic import ParseOptions, TrafficError, WorkloadRule, inspect_upload, parse_traffic
from profiles.traffic.sources.xlsx import xlsx_source


def oracle(data: bytes, sheet: str = "") -> list[tuple]:
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    ws = wb[sheet] if sheet else wb.worksheets[0]
    ws.reset_dimensions()  # openpyxl trusts <dimension>; the oracle must not
    rows = [r for r in ws.iter_rows(values_only=True) if any(v is not None for v in r)]
    wb.close()
    return rows


def streamed(data: bytes, sheet: str = "") -> tuple[list[str], list[tuple]]:
    src = xlsx_source(data, ParseOptions(sheet=sheet))
    tbl = src.read(src.columns)
    cols = [tbl.column(c).to_pylist() for c in src.columns]
    return src.columns, list(zip(*cols, strict=True))


def same(a, b) -> bool:
    """`a` streamed, `b` openpyxl's; a column of mixed types is text, as the reader has always made it."""
    if isinstance(a, str) and isinstance(b, bool):
        return a == ("true" if b else "false")
    if isinstance(a, str) and isinstance(b, (int, float)):
        return float(a) == b
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return pd.Timestamp(a) == pd.Timestamp(b)
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and float(a) == pytest.approx(float(b))
    return a == b


def test_an_openpyxl_workbook_reads_as_openpyxl_reads_it():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "log"
    ws.append(["timestamp", "workload", "prompt_tokens", "output_tokens", "ok", "ratio"])
    for i in range(50):
        ws.append([dt.datetime(2026, 1, 1) + dt.timedelta(minutes=7 * i, milliseconds=250 * i), ["chat", "code"][i % 2],
                   100 + i, None if i % 7 == 0 else 10 * i, i % 3 == 0, i / 8])
    other = wb.create_sheet("other")
    other.append(["a", "b"])
    other.append(["x", 1.5])
    buf = io.BytesIO()
    wb.save(buf)
    data = buf.getvalue()
    names, rows = streamed(data)
    want = oracle(data)
    assert names == list(want[0])
    assert len(rows) == len(want) - 1 == 50
    for got, exp in zip(rows, want[1:], strict=True):
        assert all(same(g, e) for g, e in zip(got, exp, strict=True)), (got, exp)
    names, rows = streamed(data, "other")
    assert names == ["a", "b"] and rows == [("x", 1.5)]
    with pytest.raises(TrafficError, match="a sheet named one of log, other"):
        xlsx_source(data, ParseOptions(sheet="nope"))


def hand_written(tmp: Path, date1904: bool = False) -> bytes:
    """Shared strings (rich text, a phonetic run), an x: prefix, cells without r, a formula, bool, error, a date
    style, and a stale dimension."""
    x = MAIN
    sst = (f'<x:sst xmlns:x="{x}" count="5" uniqueCount="5"><x:si><x:t>timestamp</x:t></x:si>'
           '<x:si><x:r><x:t>work</x:t></x:r><x:r><x:rPr><x:b/></x:rPr><x:t>load</x:t></x:r></x:si>'
           '<x:si><x:t>prompt_tokens</x:t><x:rPh sb="0" eb="1"><x:t>ignored</x:t></x:rPh></x:si>'
           '<x:si><x:t xml:space="preserve"> output_tokens </x:t></x:si><x:si><x:t>chat &amp; code</x:t></x:si>'
           "</x:sst>")
    styles = (f'<styleSheet xmlns="{x}"><numFmts count="1"><numFmt numFmtId="164" formatCode="yyyy-mm-dd hh:mm:ss"/>'
              '</numFmts><cellStyleXfs count="1"><xf numFmtId="0"/></cellStyleXfs><cellXfs count="3">'
              '<xf numFmtId="0"/><xf numFmtId="164"/><xf numFmtId="14"/></cellXfs></styleSheet>')
    sheet = (f'<x:worksheet xmlns:x="{x}"><x:dimension ref="A1:D2"/><x:sheetData>'
             '<x:row r="3"><x:c r="A3" t="s"><x:v>0</x:v></x:c><x:c r="B3" t="s"><x:v>1</x:v></x:c>'
             '<x:c r="C3" t="s"><x:v>2</x:v></x:c><x:c r="D3" t="s"><x:v>3</x:v></x:c><x:c r="F3"/></x:row>'
             '<x:row r="4"><x:c s="1"><x:v>46023.5</x:v></x:c><x:c t="s"><x:v>4</x:v></x:c>'
             '<x:c><x:f>SUM(1,2)</x:f><x:v>3</x:v></x:c><x:c t="b"><x:v>1</x:v></x:c></x:row>'
             '<x:row r="5"/>'
             '<x:row r="6"><x:c r="A6" s="2"><x:v>46024</x:v></x:c><x:c r="B6" t="inlineStr"><x:is><x:t>code</x:t>'
             '</x:is></x:c><x:c r="C6" t="e"><x:v>#N/A</x:v></x:c><x:c r="D6"><x:v>2.5E1</x:v></x:c></x:row>'
             "</x:sheetData></x:worksheet>")
    wbx = (f'<workbook xmlns="{x}" xmlns:r="{REL}"><workbookPr date1904="{int(date1904)}"/><sheets>'
           '<sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>')
    rels = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{REL}/worksheet" Target="/xl/worksheets/sheet1.xml"/>'
            f'<Relationship Id="rId2" Type="{REL}/sharedStrings" Target="sharedStrings.xml"/>'
            f'<Relationship Id="rId3" Type="{REL}/styles" Target="styles.xml"/></Relationships>')
    ct = ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
          '<Default Extension="xml" ContentType="application/xml"/>'
          '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'spreadsheetml.sheet.main+xml"/>'
          '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
          'officedocument.spreadsheetml.worksheet+xml"/>'
          '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'spreadsheetml.sharedStrings+xml"/>'
          '<Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'spreadsheetml.styles+xml"/></Types>')
    root = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'officeDocument" Target="xl/workbook.xml"/></Relationships>')
    parts = {"[Content_Types].xml": ct, "_rels/.rels": root, "xl/workbook.xml": wbx,
             "xl/_rels/workbook.xml.rels": rels, "xl/worksheets/sheet1.xml": sheet, "xl/sharedStrings.xml": sst,
             "xl/styles.xml": styles}
    return write_zip(tmp / "hand.xlsx", {k: Part.of(v.encode()) for k, v in parts.items()}).read_bytes()


@pytest.mark.filterwarnings("ignore:Workbook contains no default style")
@pytest.mark.parametrize("date1904", [False, True])
def test_hand_written_parts_read_as_openpyxl_reads_them(tmp_path, date1904):
    data = hand_written(tmp_path, date1904)
    names, rows = streamed(data)
    want = oracle(data)
    assert names == [str(v).strip() for v in want[0] if v is not None]
    assert names == ["timestamp", "workload", "prompt_tokens", "output_tokens"]
    assert len(rows) == 2
    for got, exp in zip(rows, want[1:], strict=True):
        assert all(same(g, e) for g, e in zip(got, exp, strict=True)), (got, exp)
    assert rows[0][0] == pd.Timestamp("2030-01-02 12:00:00" if date1904 else "2026-01-01 12:00:00")
    assert rows[0][1] == "chat & code" and rows[1][1] == "code"
    assert [r[2] for r in rows] == ["3", "#N/A"] and [r[3] for r in rows] == ["true", "25"]  # mixed: text


def test_the_page_path_on_a_hand_written_workbook(tmp_path):
    data = hand_written(tmp_path)
    info = inspect_upload("t.xlsx", data)
    assert list(info.columns) == ["timestamp", "workload", "prompt_tokens", "output_tokens"]
    with pytest.raises(TrafficError) as ei:  # '#N/A' and TRUE are not token counts: named by sheet row
        parse_traffic("t.xlsx", data, load_catalog(), options=ParseOptions(workload=WorkloadRule(mode="fixed")))
    problems = "\n".join(str(p) for p in ei.value.problems)
    assert "row 1 (sheet row 4), column 'output_tokens': value 'true'" in problems
    assert "row 2 (sheet row 6), column 'prompt_tokens': value '#N/A'" in problems


def test_a_cell_over_the_field_limit_names_its_sheet_row(tmp_path):
    # openpyxl cuts strings to Excel's 32,767 characters when it writes; other writers do not
    rows = cells(1, HEADER) + cells(2, [1_790_000_000, "chat", 10, 5]) + cells(3, [1_790_000_060, "c" * 140_000, 10, 5])
    data = workbook(tmp_path / "long.xlsx", Part.of(sheet_xml(rows))).read_bytes()
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.xlsx", data, load_catalog())
    assert "row 2 (sheet row 3), column 'workload'" in str(ei.value) and "at most 131,072 characters" in str(ei.value)


def test_damaged_parts_raise_traffic_errors_only(tmp_path):
    """Bytes of each part changed at random (the zip rebuilt around them, so the damage reaches the XML): the
    page's two entry points either read the file or raise TrafficError, nothing else."""
    import random
    import zipfile

    good = hand_written(tmp_path)
    zf = zipfile.ZipFile(io.BytesIO(good))
    parts = {i.filename: zf.read(i) for i in zf.infolist()}
    rng = random.Random(7)
    cat = load_catalog()
    names = sorted(parts)
    for trial in range(60):
        name = names[trial % len(names)]
        body = bytearray(parts[name])
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.choice(b"<>&;\"'=/x0 \x00\xff#")
        data = write_zip(tmp_path / "bad.xlsx", {k: Part.of(bytes(body) if k == name else v)
                                                 for k, v in parts.items()}).read_bytes()
        for call in (lambda d: inspect_upload("t.xlsx", d), lambda d: parse_traffic("t.xlsx", d, cat)):
            try:
                call(data)
            except TrafficError:
                pass


def small_sheet(tmp_path, rows: int = 30, extra: bytes = b"") -> bytes:
    body = b"".join(cells(r, [1_790_000_000 + r, "chat", 100, 10]) for r in range(2, rows + 2))
    return workbook(tmp_path / "small.xlsx", Part.of(sheet_xml(cells(1, HEADER) + body + extra))).read_bytes()


@pytest.mark.parametrize(("limit", "value", "message"), [
    ("MAX_SHEET_CELLS", 100, "a sheet of at most 100 cells"),
    ("MAX_SHEET_ROWS", 20, "a sheet of at most 20 rows"),
    ("MAX_SHEET_ELEMENTS", 150, "a sheet of at most 150 XML elements"),
])
def test_the_streaming_budgets_refuse_as_the_cells_come(tmp_path, monkeypatch, limit, value, message):
    from profiles.traffic.sources import xlsx

    data = small_sheet(tmp_path)
    assert parse_traffic("t.xlsx", data, load_catalog()).rows == 30
    monkeypatch.setattr(xlsx, limit, value)
    with pytest.raises(TrafficError, match=message):
        parse_traffic("t.xlsx", data, load_catalog())


def test_zip_directory_checks(tmp_path, monkeypatch):
    from profiles.traffic.sources import xlsx_parts

    data = small_sheet(tmp_path)
    monkeypatch.setattr(xlsx_parts, "MAX_ZIP_DIRECTORY_BYTES", 100)
    with pytest.raises(TrafficError, match="a zip directory of"):
        inspect_upload("t.xlsx", data)
    monkeypatch.undo()
    monkeypatch.setattr(xlsx_parts, "MAX_XML_TOKEN_BYTES", 1000)  # a start tag longer than that: refused
    long_tag = small_sheet(tmp_path, 3, b'<row r="99"><c r="A99" t="inlineStr" x="' + b"y" * 200_000 + b'"/></row>')
    with pytest.raises(TrafficError, match="XML tags of at most"):
        parse_traffic("t.xlsx", long_tag, load_catalog())
    monkeypatch.undo()
    for flag, method, message in ((1, 8, "encrypted"), (0, 12, "zip method 12")):
        bad = bytearray(data)
        at = bad.rfind(b"PK\x01\x02")  # the last central directory entry: the sheet
        bad[at + 8:at + 10] = flag.to_bytes(2, "little")
        bad[at + 10:at + 12] = method.to_bytes(2, "little")
        with pytest.raises(TrafficError, match=message):
            inspect_upload("t.xlsx", bytes(bad))


def test_a_header_string_across_chunks_is_read_to_its_end(tmp_path):
    """The shared strings stop streaming after the last one the header uses, but only once it has ended: here it
    spans more than one 64 KiB chunk of the inflated part."""
    sst = (f'<sst xmlns="{MAIN}"><si><t>timestamp</t></si><si><t>workload</t></si><si><t>prompt_tokens</t></si>'
           f'<si><t xml:space="preserve">output_tokens{" " * 100_000}</t></si><si><t>chat</t></si></sst>').encode()
    rows = cells(1, ["#0", "#1", "#2", "#3"]) + cells(2, [1_790_000_000, "#4", 100, 10])
    data = workbook(tmp_path / "sst.xlsx", Part.of(sheet_xml(rows)), Part.of(sst)).read_bytes()
    assert list(inspect_upload("t.xlsx", data).columns) == ["timestamp", "workload", "prompt_tokens", "output_tokens"]
    assert parse_traffic("t.xlsx", data, load_catalog()).workload_shares == {"chat": 1.0}
