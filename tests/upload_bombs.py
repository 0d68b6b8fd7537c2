"""Every hostile upload the benchmarks build, by label: the tabular and JSON bombs (benchmarks.bench_traffic_ingest),
the xlsx bombs (benchmarks.bench_xlsx_ingest) and issue 34's per-reader cases (benchmarks.bench_reader_bombs, at the
sizes the tests use). The running app (tests/app/test_bombs_upload_browser.py) and the CLI
(tests/cli/test_cli_bombs.py) must refuse each one in words."""

from __future__ import annotations

from pathlib import Path


def every_upload_bomb(d: Path) -> dict[str, Path]:
    """Write each bomb under `d`; label -> path."""
    from benchmarks.bench_reader_bombs import make_reader_bombs
    from benchmarks.bench_traffic_ingest import make_bombs, make_nested_xlsx
    from benchmarks.bench_xlsx_ingest import make_xlsx_bombs

    out = dict(make_bombs(d / "tabular"))
    out.update({f"xlsx: {k}": v for k, v in make_xlsx_bombs(d / "xlsx").items()})
    # ~825 KB that an in-process XML reader turns into a 1.4 GB peak; refused by the reader's depth bound
    out["xlsx: 10,000,000 nested <a> elements"] = make_nested_xlsx(d / "xlsx" / "nested.xlsx")
    # xlsx elements before row 1 and far shared strings, Mooncake ids past ceil(input_length / 512) and negative
    # timestamps, Parquet dictionaries, long JSON numbers, deep nesting, files that are not text tables: each class,
    # not each size, is what must be refused
    out.update({f"reader: {k}": v for k, v in make_reader_bombs(d / "reader", small=True).items()})
    return out
