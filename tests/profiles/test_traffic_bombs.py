"""Hostile uploads are refused with TrafficError, with a short message and without the server's memory:
each bomb is parsed in a fresh Python process whose peak RSS (VmHWM, imports included) must stay under 300 MB.
The bombs and the child-process measurement are shared with benchmarks/bench_traffic_ingest.py, which prints
the times (< 1 s each there; not asserted here, CI machines are slow and shared)."""

from __future__ import annotations

import sys

import pytest

from benchmarks.bench_traffic_ingest import make_bombs, measure
from profiles.traffic import MAX_MESSAGE_CHARS

PEAK_RSS_MB = 300

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return make_bombs(tmp_path_factory.mktemp("bombs"))


EXPECTED = {
    "parquet row bomb (60M rows)": "at most 2,000,000 rows",
    "parquet dictionary bomb (1.6 KB x 2M rows)": "known workload",
    "parquet dictionary bomb (200k-char cell x 2M rows)": "at most 131,072 characters",
    "CSV with 600k columns": "header line of at most 1 MiB",
    "CSV cell over 131,072 characters": "at most 131,072 characters",
    "CSV cell over 16 MiB": "at most 131,072 characters",
    "binary file, one 50 MB line": "header line of at most 1 MiB",
    "100 MiB + 1 byte": "at most 100 MiB",
}


@pytest.mark.parametrize("label", list(EXPECTED))
def test_bomb_is_refused_within_the_memory_bound(bombs, label):
    r = measure(bombs[label])
    assert r["outcome"] == "refused", r
    assert EXPECTED[label] in r["message"]
    # the first problem is at most MAX_MESSAGE_CHARS; the count of the others adds a few words
    assert len(r["message"]) <= MAX_MESSAGE_CHARS + 60, r["message"]
    assert r["peak_mb"] < PEAK_RSS_MB, r


def test_cell_bombs_name_row_and_column(bombs):
    r = measure(bombs["CSV cell over 16 MiB"])
    assert "row 2 (line 3), column 'workload'" in r["message"]
