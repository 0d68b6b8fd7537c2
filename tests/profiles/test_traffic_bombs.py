"""Hostile uploads are refused with TrafficError, with a short message, without the server's memory: each bomb goes
through parse_traffic, inspect_upload (what the Traffic page runs when a file is dropped) and column_values in a
fresh Python process, whose peak RSS (VmHWM, reset before each call) must stay under 300 MB above the interpreter
with its imports. The CPU time of each call (target < 1 s) is a timing: benchmarks/bench_traffic_ingest.py, which
shares the bombs and the child-process measurement, prints it with the wall times (under another CPU-bound job the
same call took 1.04-1.17 s, so it is not asserted here)."""

from __future__ import annotations

import io
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.bench_traffic_ingest import measure_all
from profiles import load_catalog
from profiles.traffic import MAX_COLUMNS, MAX_MESSAGE_CHARS, TrafficError, inspect_upload, parse_traffic
from profiles.traffic.sources.parquet_pages import chunk_pages
from tests.upload_bombs import tabular_bombs

ADDED_RSS_MB = 300

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")

ALL = ("refused", "refused", "refused")  # parse_traffic, inspect_upload, column_values('workload')
# label -> (what the refusal says, outcome of each function). Opening a Parquet file reads its footer only, so
# a bomb in its pages is refused when a column is read; a dictionary bomb's one value is listed by column_values.
EXPECTED = {
    "parquet row bomb (60M rows)": ("at most 2,000,000 rows", ALL),
    "parquet dictionary bomb (1.6 KB x 2M rows)": ("known workload", ("refused", "opened", "read")),
    # column_values too: the dictionary's one value is refused before it is decoded
    "parquet dictionary bomb (200k-char cell x 2M rows)": ("at most 131,072 characters", ("refused", "opened",
                                                                                          "refused")),
    "CSV with 600k columns": ("header line of at most 1 MiB", ALL),
    "CSV cell over 131,072 characters": ("at most 131,072 characters", ALL),
    "CSV cell over 16 MiB": ("at most 131,072 characters", ALL),
    "binary file, one 50 MB line": ("a text table (this file looks binary", ALL),
    "100 MiB + 1 byte": ("this one has 104,857,601 bytes", ALL),
    "parquet footer understating its size (1.6 GB of pages)": ("in the columns used once decompressed",
                                                               ("refused", "opened", "refused")),
    "CSV row of 10 MiB of commas": ("4 comma-separated fields like the header", ALL),
    "CSV row of 25 MiB of commas": ("4 comma-separated fields like the header", ALL),
    "CSV of 25 MiB of commas in 250 lines": ("4 comma-separated fields like the header", ALL),
    "JSON array of 32 MiB of {} records": ("at most 2,000,000 rows", ALL),
    "JSON array with one 30 MiB record": ("JSON records of at most 1 MiB", ALL),
    "vllm bench result of 99 MiB": ("a JSON document of at most 32 MiB", ALL),
    "vllm bench result with 7M requests (28 MiB)": ("at most 2,000,000 requests", ALL),
    "guidellm-like report of 30 MiB of {}": ("a guidellm report of at most", ALL),
    "JSON lines with one 30 MiB line": ("JSON lines of at most 1 MiB", ALL),
    "JSON lines: 20 million {} lines (57 MiB)": ("at most 2,000,000 rows", ALL),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every bomb through the three functions, two child processes at a time (CPU time and peak RSS are each
    child's own, so running two at once does not change them)."""
    bombs = tabular_bombs(tmp_path_factory)
    assert set(bombs) == set(EXPECTED)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(bombs, pool.map(measure_all, bombs.values()), strict=True))


@pytest.mark.parametrize("label", list(EXPECTED))
def test_bomb_is_refused_within_the_memory_bound(results, label):
    expected_text, outcomes = EXPECTED[label]
    for fn, outcome in zip(("parse", "inspect", "values"), outcomes, strict=True):
        r = results[label][fn]
        assert r["outcome"] == outcome, (fn, r)
        if outcome == "refused":
            assert expected_text in r["message"], (fn, r["message"])
            # the first problem is at most MAX_MESSAGE_CHARS; the count of the others adds a few words
            assert len(r["message"]) <= MAX_MESSAGE_CHARS + 60, r["message"]
        assert r["added_mb"] < ADDED_RSS_MB, (fn, r)


def test_cell_bombs_name_row_and_column(results):
    assert "row 2 (line 3), column 'workload'" in results["CSV cell over 16 MiB"]["parse"]["message"]


def test_a_size_over_the_limit_never_reads_as_the_limit(results):
    msg = results["100 MiB + 1 byte"]["parse"]["message"]
    assert "100 MiB (104,857,600 bytes)" in msg and "100.0 MiB" not in msg
    with pytest.raises(TrafficError, match=r"at most 1,000 bytes \(this one has 1,001 bytes\)"):
        parse_traffic("t.csv", b"x" * 1001, load_catalog(), max_bytes=1000)


HEADER = "timestamp,workload,prompt_tokens,output_tokens,prompt\n"


def test_quoted_separators_are_not_fields():
    """Quoted commas (more than MAX_COLUMNS in one cell, across lines) and a quote inside an unquoted field (text,
    as pyarrow reads it) are a legitimate file; commas outside quotes beyond the header's count are not."""
    cell = '"' + ", ".join(["x"] * (MAX_COLUMNS + 500)) + '\nsecond line, ""quoted"", end"'
    rows = [f"2026-11-01T00:00:{i:02d}Z,chat,100,10,{cell}" for i in range(3)]
    rows.append('2026-11-01T00:00:09Z,code,100,10,a 5" screen')
    rows.append("2026-11-01T00:00:10Z,chat,100,10,\"ok, then\"")
    data = (HEADER + "\n".join(rows) + "\n").encode()
    assert inspect_upload("t.csv", data).columns[-1] == "prompt"
    assert parse_traffic("t.csv", data, load_catalog()).requests == 5
    ragged = b"2026-11-01T00:00:11Z,chat,1,1,x" + b"," * (MAX_COLUMNS + 5) + b"\n"
    without_stray = data.replace(b'a 5" screen', b"a 5 inch screen")
    with pytest.raises(TrafficError, match=r"row 6 \(line 10\).*5 comma-separated fields like the header"):
        inspect_upload("t.csv", without_stray + ragged)  # before pyarrow reads anything
    # after a stray quote the quotes before a line no longer tell its state: pyarrow refuses the row as it reads
    with pytest.raises(TrafficError, match=r"row 6 \(line 10\).*found 1,010"):
        parse_traffic("t.csv", data + ragged, load_catalog())
    unquoted = (HEADER + "2026-11-01T00:00:00Z,chat,100,10,a\n2026-11-01T00:00:01Z,chat,100,10,a,b\n").encode()
    with pytest.raises(TrafficError, match=r"row 2 \(line 3\).*found 6"):
        inspect_upload("t.csv", unquoted)


def test_a_row_over_one_block_is_refused_before_pyarrow():
    long = ",".join(["y" * 100_000] * 11)  # 1.1 MB of cells under the cell limit
    header = "timestamp,workload,prompt_tokens,output_tokens," + ",".join(f"c{i}" for i in range(11))
    data = (header + f"\n2026-11-01T00:00:00Z,chat,1,1,{long}\n").encode()
    with pytest.raises(TrafficError, match=r"row 1 \(line 2\).*a row of at most 1 MiB"):
        inspect_upload("t.csv", data)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_page_headers_are_what_the_writer_wrote(version):
    """The page walk reads a real file's headers: every value of each chunk, and the chunk's decompressed bytes
    short of the footer's total by just the page headers (the footer counts them; the pages' sizes do not)."""
    n = 300_000
    tbl = pa.table({"t": pa.array(np.arange(n, dtype=np.int64)), "w": pa.array(np.array(["chat", "code"])[
        np.arange(n) % 2]), "s": pa.array([f"s{i}" for i in range(n)])})
    buf = io.BytesIO()
    pq.write_table(tbl, buf, row_group_size=100_000, compression="zstd", data_page_size=64 << 10,
                   data_page_version=version)
    data = buf.getvalue()
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    for g in range(md.num_row_groups):
        for j in range(md.num_columns):
            cc = md.row_group(g).column(j)
            pages = chunk_pages(data, cc, max_pages=10_000, column=f"c{j}")
            assert pages.values == cc.num_values == 100_000
            assert pages.pages > 1
            assert 0 < cc.total_uncompressed_size - pages.uncompressed_bytes < 200 * pages.pages  # headers
            if j == 1:  # two values: a dictionary page, then data pages all coded against it
                assert (pages.dictionary_coded_pages, pages.plain_bytes) == (pages.pages - 1, 0)
    with pytest.raises(TrafficError, match="at most 3 pages"):
        chunk_pages(data, md.row_group(0).column(0), max_pages=3, column="t")
