"""Property-based fuzzing of the traffic parser: whatever the bytes or rows, parse_traffic either returns a
profile whose every number is finite (shares summing to 1) or raises TrafficError, with messages of at most
MAX_MESSAGE_CHARS per problem, and never any other exception."""

from __future__ import annotations

import io
import json
import math
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles import load_catalog
from profiles.traffic import MAX_MESSAGE_CHARS, ParseOptions, TrafficError, TrafficProfile, WorkloadRule, parse_traffic

CAT = load_catalog()
NAMES = ["t.csv", "t.tsv", "t.txt", "t.jsonl", "t.json", "t.parquet", "t.xlsx", "noext"]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(name: str, data: bytes, options: ParseOptions | None = None) -> TrafficProfile | None:
    try:
        prof = parse_traffic(name, data, CAT, options=options)
    except TrafficError as err:
        assert err.problems
        assert all(len(str(p)) <= MAX_MESSAGE_CHARS for p in err.problems)
        return None
    nums = [prof.requests, prof.output_tokens, *prof.context_tokens_quantiles]
    nums += [x for s in prof.segments for x in (s.requests, s.output_token_share, s.mean_prompt_tokens,
                                                s.mean_output_tokens)]
    nums += list(prof.arrival_rate_per_s or ()) + ([prof.monthly_output_tokens] if prof.monthly_output_tokens else [])
    assert all(math.isfinite(x) for x in nums), nums
    assert sum(s.output_token_share for s in prof.segments) == pytest.approx(1.0)
    return prof


@FUZZ
@given(name=st.sampled_from(NAMES), data=st.binary(min_size=0, max_size=2000))
def test_random_bytes(name, data):
    check(name, data)


@FUZZ
@given(name=st.sampled_from(["t.parquet", "t.xlsx", "t.json"]),
       body=st.binary(max_size=600), wrap=st.sampled_from([(b"PAR1", b"PAR1"), (b"PK\x03\x04", b""), (b"{", b"}"),
                                                          (b"[", b"]")]))
def test_random_bytes_behind_a_format_magic(name, body, wrap):
    check(name, wrap[0] + body + wrap[1])


CELL = st.one_of(
    st.sampled_from(["chat", "Code", " rag_summarization ", "poetry", "english", "mandarin", "", "nan", "NaN",
                     "inf", "-inf", "1e-320", "1e308", "-5", "0", "12.5", "1,5", "true", "null", "\"", "\"\"",
                     "2026-11-01T00:00:00Z", "2026-11-01 00:00:00.1234567", "1793491200", "1793491200000", "5",
                     "2026-13-45T99:99:99Z", "\n", "a\nb", ";", "\t", "\u00e9", "\x00"]),
    st.integers(min_value=-10**20, max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=20),
)
HEADERS = st.one_of(
    st.just(["timestamp", "workload", "prompt_tokens", "output_tokens"]),
    st.just(["timestamp", "workload", "language", "prompt_tokens", "output_tokens", "weight"]),
    st.just(["TIMESTAMP", "ContextTokens", "GeneratedTokens"]),
    st.just(["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]),
    st.just(["aggregation_timestamp", "n_requests", "n_context_tokens_total", "n_generated_tokens_total"]),
    st.just(["workload", "share", "prompt_tokens", "output_tokens"]),
    st.just(["workload", "monthly_output_tokens", "language"]),
    st.just(["workload", "Workload", "timestamp"]),
    st.lists(st.sampled_from(["timestamp", "workload", "prompt_tokens", "output_tokens", "weight", "share", "x",
                              "model", "prompt"]), min_size=1, max_size=7),
)


def quote(cell: str, sep: str) -> str:
    if any(c in cell for c in (sep, '"', "\n", "\r")):
        return '"' + cell.replace('"', '""') + '"'
    return cell


@FUZZ
@given(header=HEADERS, rows=st.lists(st.lists(CELL, min_size=0, max_size=8), min_size=0, max_size=12),
       sep=st.sampled_from([",", ";", "\t", "|"]), quoted=st.booleans(), name=st.sampled_from(["t.csv", "t.txt"]))
def test_random_csv_rows(header, rows, sep, quoted, name):
    def line(cells):
        return sep.join(quote(c, sep) if quoted else c for c in cells)
    text = "\n".join([line(header)] + [line(r) for r in rows]) + "\n"
    check(name, text.encode("utf-8", "surrogatepass"))


JSON_VALUE = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**25, max_value=10**25),
                       st.floats(allow_nan=False), st.text(max_size=10),
                       st.sampled_from(["chat", "code", "2026-11-01T00:00:00Z", "1793491200"]),
                       st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                            max_size=2))


@FUZZ
@given(records=st.lists(st.dictionaries(st.sampled_from(["timestamp", "workload", "prompt_tokens",
                                                          "output_tokens", "weight", "language", "other"]),
                                         JSON_VALUE, max_size=7), min_size=0, max_size=10),
       as_array=st.booleans())
def test_random_json_records(records, as_array):
    if as_array:
        check("t.json", json.dumps(records).encode())
    else:
        check("t.jsonl", "\n".join(json.dumps(r) for r in records).encode())


@FUZZ
@given(cols=st.dictionaries(st.sampled_from(["timestamp", "workload", "prompt_tokens", "output_tokens", "weight"]),
                            st.lists(st.one_of(st.none(), st.integers(-10**6, 10**12), st.sampled_from(["chat", "x"])),
                                     min_size=3, max_size=3), min_size=1, max_size=5))
def test_random_parquet_tables(cols):
    arrays = {}
    for k, vals in cols.items():
        try:
            arrays[k] = pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[k] = pa.array([None if v is None else str(v) for v in vals])
    buf = io.BytesIO()
    pq.write_table(pa.table(arrays), buf)
    check("t.parquet", buf.getvalue())


@FUZZ
@given(mode=st.sampled_from(["auto", "fixed", "map", "rules"]), workload=st.sampled_from(["", "chat", "poetry"]),
       column=st.sampled_from(["", "Model", "Log Type", "nope", "endpoint"]),
       text=st.text(max_size=5), delimiter=st.sampled_from(["", ",", ";", "x"]), unit=st.sampled_from(["auto", "ms"]))
def test_random_options(mode, workload, column, text, delimiter, unit):
    data = (b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            b"0,ChatGPT,100,50,150,Conversation log\n60,GPT-4,300,150,450,API log\n")
    rule = WorkloadRule(mode=mode, workload=workload, column=column, mapping=((text, "code"),),
                        rules=((column or "model", text, workload or "chat"),))
    check("burst.csv", data, ParseOptions(workload=rule, delimiter=delimiter, timestamp_unit=unit,
                                          columns=(("model", column),) if column else ()))


def test_random_zip_is_not_a_workbook():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("xl/workbook.xml", "<not really/>")
    with pytest.raises(TrafficError, match="xlsx|Excel"):
        parse_traffic("t.xlsx", buf.getvalue(), CAT)
