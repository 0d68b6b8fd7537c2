"""The reader bombs (benchmarks/bench_reader_bombs.py builds them, at the small sizes): each is refused
with a TrafficError in product words by its own reader, in a fresh Python process, through parse_traffic and
inspect_upload, growing the process by under PEAK_GROWTH_MB and using under CPU_S of CPU (`measure_many`: all the
files in one child process, the peak reset before each call). Ordinary files of each kind still parse."""

from __future__ import annotations

import io
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.bench_reader_bombs import CSV_ROWS, measure_many, mooncake_trace
from benchmarks.bench_xlsx_ingest import MAIN, Part, cells, workbook
from profiles import load_catalog
from profiles.traffic import TrafficError, inspect_upload, parse_traffic
from profiles.traffic.guards import check_json_tokens
from tests.upload_bombs import reader_bombs

PEAK_GROWTH_MB = 200
CPU_S = 5.0

EXPECTED = {
    "xlsx: 10M nested elements": "nested at most 64 deep",
    "xlsx: 100M elements before row 1": "a header row within the first 1,000,000 XML elements",
    "xlsx: header cell at shared string 14,000,003": "shared string 1,400,004; the workbook has 1,400,001",
    "xlsx: the same, the count declared": "shared string 1,400,004; the workbook declares 1,400,000",
    "mooncake: 130,000 hash ids per request": "row 1 (line 1), column 'hash_ids': value '130,000 ids'",
    "mooncake: negative timestamps": "column 'timestamp': value -1000000000000000.0: expected a timestamp of 0",
    "parquet: one 440 MiB dictionary string": "text values of at most 131,072 characters",
    "parquet: a 90 MiB string among 1,000 short ones": "at most 512 MiB (536,870,912 bytes) in the columns used",
    "vllm bench: a 16 MiB integer": "JSON numbers of at most 100 characters (the one at byte 16",
    "guidellm: a 16 MiB integer": "JSON numbers of at most 100 characters",
    "guidellm: nested lists": "a JSON document nested at most 64 deep",
    "JSON array: 40,000 nested lists": "a JSON document nested at most 64 deep",
    "csv: a zip named .csv": "this file is a zip archive",
    "csv: UTF-16 BE without a byte-order mark": "looks like UTF-16 without a byte-order mark: save it as UTF-8",
    "csv: a PNG image": "a text table (this file is a PNG image; upload a CSV (or TSV), JSON lines, JSON, Parquet",
    "csv: random bytes": "a text table (this file looks binary",
}
# Refused when the columns are read (the Traffic page's first look reads only the first line, the header or the
# footer)
PARSE_ONLY = {"mooncake: 130,000 hash ids per request", "mooncake: negative timestamps",
              "parquet: one 440 MiB dictionary string", "parquet: a 90 MiB string among 1,000 short ones"}
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return reader_bombs(tmp_path_factory)


@pytest.fixture(scope="module")
def measured(bombs):
    return measure_many(bombs)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@linux
@pytest.mark.parametrize("fn", ["parse", "inspect"])
@pytest.mark.parametrize("label", list(EXPECTED))
def test_reader_bomb_is_refused_small_and_fast(measured, label, fn):
    r = measured[(label, fn)]
    if fn == "inspect" and label in PARSE_ONLY:
        assert r["outcome"] == "opened", r
    else:
        assert r["outcome"] == "refused", r
        assert EXPECTED[label] in r["message"], r["message"]
    assert r["growth_mb"] < PEAK_GROWTH_MB, r
    assert r["cpu_s"] < CPU_S, r


def test_the_bombs_stay_small_on_disk(bombs):
    assert bombs["xlsx: 100M elements before row 1"].stat().st_size < 1_000_000
    assert bombs["parquet: one 440 MiB dictionary string"].stat().st_size < 1_000_000


@pytest.mark.parametrize("comment", [b"", b"<!-- <si> is text here -->"])
def test_a_header_string_far_into_the_shared_strings_is_found(tmp_path, cat, comment):
    """A plain part is skipped to the first string needed by counting "<si>" bytes; one with a comment is walked
    by expat string by string: both name the same columns and read the same cells."""
    n = 30_000  # past FAST_SKIP_STRINGS
    sheet = (f'<worksheet xmlns="{MAIN}"><sheetData>'.encode()
             + cells(1, [f"#{n}", f"#{n + 1}", f"#{n + 2}", "output_tokens"])
             + cells(2, [1_790_000_000, f"#{n + 3}", 100, 10]) + b"</sheetData></worksheet>")
    sst = Part.of(f'<?xml version="1.0" encoding="UTF-8"?>\n<sst xmlns="{MAIN}">'.encode() + comment
                  + b"<si><t>x</t></si>" * n + b"<si><t>timestamp</t></si><si><r><t>work</t></r><r><t>load</t></r>"
                  b"</si><si><t>prompt_tokens</t></si><si><t>chat</t></si></sst>")
    data = workbook(tmp_path / "far.xlsx", Part.of(sheet), sst).read_bytes()
    assert inspect_upload("far.xlsx", data).columns == ("timestamp", "workload", "prompt_tokens", "output_tokens")
    prof = parse_traffic("far.xlsx", data, cat)
    assert prof.rows == 1 and prof.output_tokens == 10


def test_mooncake_rows_within_their_blocks_still_parse(cat):
    # ceil(1000 / 512) = 2 ids a request: exactly at the bound
    prof = parse_traffic("t.jsonl", mooncake_trace(5, 2), cat)
    assert prof.rows == 5 and prof.prefix_reuse is not None and prof.prefix_reuse.share == 0.0
    with pytest.raises(TrafficError, match=r"row 4 \(line 4\), column 'hash_ids': value '3 ids': expected at most "
                                           r"ceil\(input_length / 512\) = 2 block hash ids"):
        data = mooncake_trace(3, 2) + mooncake_trace(1, 3, ts=5)
        parse_traffic("t.jsonl", data, cat)


def test_mooncake_inspection_reads_only_the_first_line():
    data = mooncake_trace(1, 2) + b'{"timestamp": 1, "input_length": 1000, "output_length": 1, "hash_ids": [1, 2, 3]}\n'
    info = inspect_upload("t.jsonl", data)
    assert info.format_label and "timestamp" in info.columns


def test_json_documents_with_short_numbers_and_shallow_nesting_pass(cat):
    doc = (b'{"input_lens": [100, 200.0, 3e2], "output_lens": [10, 20, 30], "duration": 12.25, '
           b'"date": "20250101-000000", "note": "digits in text are text: ' + b"9" * 500 + b' [[[[[[[[\\" ]]"}')
    check_json_tokens(doc, 64, 100)
    assert parse_traffic("b.json", doc, cat).rows == 3
    check_json_tokens(b"[" * 64 + b"]" * 64, 64, 100)
    with pytest.raises(TrafficError, match="nested at most 64 deep"):
        check_json_tokens(b"[" * 65 + b"]" * 65, 64, 100)
    with pytest.raises(TrafficError, match="JSON numbers of at most 100 characters"):
        check_json_tokens(b"[1." + b"5" * 99 + b"]", 64, 100)  # 101 characters with the "1."
    # a number cut by a 1 MiB chunk boundary is still one number
    with pytest.raises(TrafficError, match="the one at byte 1,048,526"):
        check_json_tokens(b"[" + b" " * ((1 << 20) - 51) + b"7" * 101 + b"]", 64, 100)


def test_text_tables_still_parse(cat):
    assert parse_traffic("r.csv", CSV_ROWS.encode(), cat).rows == 2
    assert parse_traffic("r.csv", b"\xef\xbb\xbf" + CSV_ROWS.encode(), cat).rows == 2
    assert parse_traffic("r.csv", CSV_ROWS.replace("\n", "\r\n").encode(), cat).rows == 2
    with pytest.raises(TrafficError, match="UTF-16 text"):
        parse_traffic("r.csv", CSV_ROWS.encode("utf-16"), cat)


def test_parquet_with_a_short_dictionary_still_parses(cat):
    tbl = pa.table({"timestamp": pa.array([1_700_000_000 + i for i in range(1000)], pa.int64()),
                    "workload": pa.array(["chat", "code"] * 500).dictionary_encode(),
                    "prompt_tokens": pa.array([100] * 1000), "output_tokens": pa.array([10] * 1000)})
    buf = io.BytesIO()
    pq.write_table(tbl, buf, compression="zstd")
    assert parse_traffic("r.parquet", buf.getvalue(), cat).rows == 1000
