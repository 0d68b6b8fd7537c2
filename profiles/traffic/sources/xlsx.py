"""Excel .xlsx (openpyxl, read-only streaming): the zip directory's uncompressed size and the sheet's dimension
are checked before a row is read."""

from __future__ import annotations

import io
import zipfile

import pandas as pd
import pyarrow as pa

from profiles.traffic.errors import _cut, _fail, _list
from profiles.traffic.limits import MAX_COLUMNS, MAX_FIELD_CHARS, MAX_ROWS, MAX_XLSX_XML_BYTES
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source, _records_table


def _xlsx_source(data: bytes, options: ParseOptions) -> Source:
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - pinned in requirements.txt
        raise _fail("a CSV export (reading .xlsx needs the openpyxl package)") from None
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _fail(f"an Excel .xlsx workbook ({_cut(str(exc), 120)})") from None
    xml = sum(i.file_size for i in infos if i.filename.startswith("xl/"))
    if xml > MAX_XLSX_XML_BYTES:
        raise _fail(f"an .xlsx workbook of at most {MAX_XLSX_XML_BYTES // 2**20} MiB uncompressed (this one "
                    f"unpacks to {xml / 2**20:,.0f} MiB)")
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many kinds on a damaged workbook
        raise _fail(f"an Excel .xlsx workbook ({type(exc).__name__}: {_cut(str(exc), 120)})") from None
    if options.sheet:
        if options.sheet not in wb.sheetnames:
            raise _fail(f"a sheet named one of {_list(wb.sheetnames)}", value=options.sheet)
        ws = wb[options.sheet]
    else:
        ws = wb.worksheets[0]
    try:
        max_col = ws.max_column or 0
        max_row = ws.max_row or 0
    except Exception:  # noqa: BLE001 - a sheet without a dimension tag
        max_col = max_row = 0
    if max_col > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the sheet '{ws.title}' has {max_col:,})")
    if max_row > MAX_ROWS + 1:
        raise _fail(f"at most {MAX_ROWS:,} rows (the sheet '{ws.title}' has {max_row:,})")
    rows_iter = ws.iter_rows(values_only=True)
    header_row = 0
    header: tuple = ()
    for header in rows_iter:
        header_row += 1
        if any(v is not None and str(v).strip() for v in header):
            break
    if not header or not any(v is not None for v in header):
        raise _fail("a header row in the first sheet")
    if len(header) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the header row has {len(header):,})")
    last = max(i for i, v in enumerate(header) if v is not None and str(v).strip())
    names = [str(v).strip() if v is not None and str(v).strip() else f"column {i + 1}"
             for i, v in enumerate(header[: last + 1])]
    sheet_rows: list[int] = []
    sheet_title = ws.title

    def read(cols: list[str]) -> pa.Table:
        idx = [names.index(c) for c in cols]
        out: dict[str, list] = {c: [] for c in cols}
        sheet_rows.clear()
        n = 0
        for r, values in enumerate(rows_iter, start=header_row + 1):
            if not any(v is not None for v in values):
                continue
            n += 1
            if n > MAX_ROWS:
                raise _fail(f"at most {MAX_ROWS:,} rows (sheet '{sheet_title}')")
            sheet_rows.append(r)
            for c, i in zip(cols, idx, strict=True):
                v = values[i] if i < len(values) else None
                if isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                    raise _fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters", row=n, column=c, value=v,
                                line=r, line_kind="sheet row")
                if hasattr(v, "isoformat") and not isinstance(v, str):
                    v = pd.Timestamp(v)
                out[c].append(v)
        wb.close()
        for c in cols:  # Excel dates arrive as datetimes; mixed with text they become text
            vals = out[c]
            if any(isinstance(v, pd.Timestamp) for v in vals):
                out[c] = [v.isoformat() if isinstance(v, pd.Timestamp) else v for v in vals]
        return _records_table(out, cols)

    return Source("xlsx", names, read, line_of=lambda rows: {r: sheet_rows[r - 1] for r in rows
                                                               if 0 < r <= len(sheet_rows)},
                   line_kind="sheet row")
