"""Hostile .xlsx uploads, real zip files built by benchmarks/bench_xlsx_ingest.py: each is refused with a
TrafficError (or, for a stale `<dimension>` tag, read in full) in a fresh Python process, through parse_traffic and
through inspect_upload (the Traffic page's first look at a file), with the child's peak RSS under 300 MB and its
CPU time in the call under 1 s (`measure` from benchmarks/bench_traffic_ingest.py; CPU time, not wall time,
because CI machines are shared)."""

from __future__ import annotations

import sys

import pytest

from benchmarks.bench_traffic_ingest import measure
from benchmarks.bench_xlsx_ingest import make_stale_dimension
from profiles import load_catalog
from profiles.traffic import MAX_MESSAGE_CHARS, TrafficError, inspect_upload, parse_traffic
from tests.upload_bombs import xlsx_bombs

PEAK_RSS_MB = 300
CPU_S = 1.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")


EXPECTED = {
    "1 GB shared strings": "at most 256 MiB uncompressed",
    "shared strings past their directory size": "unpacks to more",
    "4M-cell header row": "compresses at most 200:1",
    "200k-cell header row": "at most 1,000 columns",
    "entity in a header": "without a DOCTYPE",
    "billion laughs in the sheet": "without a DOCTYPE",
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return xlsx_bombs(tmp_path_factory)


def test_the_bombs_are_small_on_disk(bombs):
    sizes = {k: p.stat().st_size for k, p in bombs.items()}
    assert sizes["1 GB shared strings"] < 3_000_000 and sizes["4M-cell header row"] < 300_000, sizes


@pytest.mark.parametrize("fn", ["parse", "inspect"])  # parse_traffic, inspect_upload
@pytest.mark.parametrize("label", list(EXPECTED))
def test_xlsx_bomb_is_refused_within_the_bounds(bombs, label, fn):
    r = measure(bombs[label], fn=fn)
    assert r["outcome"] == "refused", r
    assert EXPECTED[label] in r["message"], r
    assert len(r["message"]) <= MAX_MESSAGE_CHARS + 60, r["message"]
    assert r["peak_mb"] < PEAK_RSS_MB, r
    assert r["cpu_s"] < CPU_S, r


def test_a_stale_dimension_does_not_shorten_the_sheet(tmp_path):
    path = make_stale_dimension(tmp_path)
    r = measure(path)
    assert r["outcome"] == "parsed" and r["message"] == "300000 rows", r
    assert r["peak_mb"] < PEAK_RSS_MB, r
    info = inspect_upload(path.name, path.read_bytes())  # the header only: no pass over the 300,000 rows
    assert list(info.columns) == ["timestamp", "workload", "prompt_tokens", "output_tokens"]


def test_entity_errors_are_traffic_errors_in_process(bombs):
    """The page catches TrafficError only: an XML error must arrive as one, naming the part."""
    for label in ("entity in a header", "billion laughs in the sheet"):
        data = bombs[label].read_bytes()
        with pytest.raises(TrafficError, match="DOCTYPE"):
            inspect_upload("t.xlsx", data)
        with pytest.raises(TrafficError, match="DOCTYPE"):
            parse_traffic("t.xlsx", data, load_catalog())
