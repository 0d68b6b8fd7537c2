"""Traffic-profile parsing: shipped samples load; every bad kind of upload names row, column and value."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from profiles import load_catalog
from profiles.traffic import TrafficError, parse_traffic

SAMPLES = Path(__file__).resolve().parents[2] / "profiles" / "samples"
HEADER = "timestamp,workload,language,prompt_tokens,output_tokens\n"


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def csv_bytes(*rows: str, header: str = HEADER) -> bytes:
    return (header + "\n".join(rows) + "\n").encode()


def good_rows(n: int = 3) -> list[str]:
    return [f"2026-11-0{1 + i % 2}T0{i % 10}:00:00Z,chat,english,100,50" for i in range(n)]


@pytest.mark.parametrize("fname", ["bilingual_saas.csv", "code_completion.jsonl", "rag_summarization.parquet",
                                   "template_requests.csv", "template_mix.csv"])
def test_shipped_samples_and_templates_parse(cat, fname):
    prof = parse_traffic(fname, (SAMPLES / fname).read_bytes(), cat)
    assert prof.segments
    assert sum(s.output_token_share for s in prof.segments) == pytest.approx(1.0)


def test_bilingual_sample_has_cantonese_and_mandarin(cat):
    prof = parse_traffic("x.csv", (SAMPLES / "bilingual_saas.csv").read_bytes(), cat)
    assert {"mandarin", "cantonese", "english"} <= set(prof.language_shares)
    assert prof.monthly_output_tokens > 1e9
    assert prof.concurrency(50.0, 0) > 0


def test_weighted_volume_extrapolates_to_a_month(cat):
    rows = ["2026-11-01T00:00:00Z,chat,english,100,1000,10", "2026-11-02T00:00:00Z,code,english,100,1000,30"]
    prof = parse_traffic("x.csv", csv_bytes(*rows, header=HEADER.strip() + ",weight\n"), cat)
    # 40 requests x 1000 tokens over one day -> x 30.44 days
    assert prof.monthly_output_tokens == pytest.approx(40_000 * 365.25 / 12)
    assert prof.workload_shares["code"] == pytest.approx(0.75)


def test_mix_table_with_percent_shares(cat):
    data = b"workload,language,share\nchat,english,60\ncode,english,40\n"
    prof = parse_traffic("mix.csv", data, cat)
    assert prof.kind == "mix"
    assert prof.workload_shares == pytest.approx({"chat": 0.6, "code": 0.4})


def test_names_are_case_insensitive(cat):
    prof = parse_traffic("x.csv", csv_bytes("2026-11-01T00:00:00Z, Chat ,ENGLISH,100,50"), cat)
    assert prof.segments[0].workload == "chat"


def _problem(exc: TrafficError) -> str:
    return "\n".join(str(p) for p in exc.problems)


@pytest.mark.parametrize("rows, column, value, row", [
    (["2026-11-01T00:00:00Z,chat,english,100,-5"], "output_tokens", "-5", 1),
    (["2026-11-01T00:00:00Z,chat,english,100,50", "2026-11-01T00:00:00Z,chat,english,abc,50"],
     "prompt_tokens", "'abc'", 2),
    (["2026-11-01T00:00:00Z,chat,english,100,50", "2026-11-01T00:00:00Z,chat,english,100,50",
      "2026-11-01T00:00:00Z,chat,english,100,99999999"], "output_tokens", "99999999", 3),
    (["2026-11-01T00:00:00Z,cooking,english,100,50"], "workload", "'cooking'", 1),
    (["2026-11-01T00:00:00Z,chat,klingon,100,50"], "language", "'klingon'", 1),
    (["yesterday,chat,english,100,50"], "timestamp", "'yesterday'", 1),
    (["1850-01-01T00:00:00Z,chat,english,100,50"], "timestamp", "1850", 1),
    (["2026-11-01T00:00:00Z,chat,english,12.5,50"], "prompt_tokens", "12.5", 1),
    (["2026-11-01T00:00:00Z,,english,100,50"], "workload", "empty", 1),
])
def test_bad_cells_name_row_column_and_value(cat, rows, column, value, row):
    with pytest.raises(TrafficError) as ei:
        parse_traffic("bad.csv", csv_bytes(*rows), cat)
    text = _problem(ei.value)
    assert f"row {row} (line {row + 1})" in text
    assert f"column '{column}'" in text
    assert value in text


def test_missing_column_names_it_and_lists_the_columns(cat):
    data = b"timestamp,workload,prompt_tokens\n2026-11-01T00:00:00Z,chat,5\n"
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.csv", data, cat)
    assert "column 'output_tokens'" in _problem(ei.value)
    assert "timestamp, workload, prompt_tokens" in _problem(ei.value)


def test_unrecognised_columns(cat):
    with pytest.raises(TrafficError, match="the file's columns are: a, b"):
        parse_traffic("x.csv", b"a,b\n1,2\n", cat)


def test_non_utf8_names_line_and_column(cat):
    data = HEADER.encode() + b"2026-11-01T00:00:00Z,chat,fran\xe7ais,100,50\n"
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.csv", data, cat)
    p = ei.value.problems[0]
    assert (p.row, p.line, p.column) == (1, 2, "language")
    assert "UTF-8" in str(p)


@pytest.mark.parametrize("data, match", [(b"", "0 bytes"), (b"\n\n  \n", "blank"),
                                         (HEADER.encode(), "at least one data row")])
def test_empty_files(cat, data, match):
    with pytest.raises(TrafficError, match=match):
        parse_traffic("x.csv", data, cat)


def test_oversized_file_states_the_limit(cat):
    with pytest.raises(TrafficError, match="at most 1 MiB"):
        parse_traffic("x.csv", b"x" * (2 * 2**20), cat, max_bytes=2**20)


def test_ragged_csv_row(cat):
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.csv", csv_bytes(*good_rows(2), "2026-11-01T00:00:00Z,chat,english,1,2,3"), cat)
    assert ei.value.problems[0].row == 3


def test_bad_jsonl_line(cat):
    good = json.dumps({"timestamp": "2026-11-01T00:00:00Z", "workload": "chat", "prompt_tokens": 1,
                       "output_tokens": 2})
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.jsonl", (good + "\n{not json\n").encode(), cat)
    assert ei.value.problems[0].row == 2 and ei.value.problems[0].line == 2


def test_jsonl_wrong_type(cat):
    recs = [{"timestamp": "2026-11-01T00:00:00Z", "workload": "chat", "prompt_tokens": 1, "output_tokens": 2},
            {"timestamp": "2026-11-01T00:00:00Z", "workload": "chat", "prompt_tokens": "many", "output_tokens": 2}]
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.jsonl", "\n".join(json.dumps(r) for r in recs).encode(), cat)
    assert "row 2 (line 2), column 'prompt_tokens': value 'many'" in _problem(ei.value)


def test_parquet_negative_value_and_garbage(cat):
    df = pd.DataFrame({"timestamp": ["2026-11-01T00:00:00Z"] * 2, "workload": ["chat", "code"],
                       "prompt_tokens": [5, 6], "output_tokens": [7, -1]})
    buf = io.BytesIO()
    df.to_parquet(buf)
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.parquet", buf.getvalue(), cat)
    assert "row 2, column 'output_tokens': value -1" in _problem(ei.value)
    with pytest.raises(TrafficError, match="Parquet"):
        parse_traffic("x.parquet", b"PAR1 not really", cat)


def test_many_problems_are_counted(cat):
    rows = [f"2026-11-01T00:00:00Z,chat,english,100,{-i - 1}" for i in range(50)]
    with pytest.raises(TrafficError) as ei:
        parse_traffic("x.csv", csv_bytes(*rows), cat)
    assert ei.value.total == 50 and len(ei.value.problems) == 20
    assert "and 49 more" in str(ei.value)
