"""Known exports are recognised and give the mix, volume and rate computed by hand; reading options (column
mapping, workload picker, separator, decimal mark, timestamp unit) work; the parser bugs fixed earlier stay fixed.

Volumes by hand: monthly output tokens = output tokens in the file / span in seconds x 2,629,800 (seconds in an
average month of 30.4375 days)."""

from __future__ import annotations

import datetime as dt
import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from profiles import load_catalog
from profiles.traffic import (
    MAX_MESSAGE_CHARS,
    SHAPES,
    ParseOptions,
    TrafficError,
    WorkloadRule,
    inspect_upload,
    parse_traffic,
)

MONTH_S = 30.4375 * 86400  # 2,629,800 s


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def parse(cat, name, data, **opts):
    return parse_traffic(name, data, cat, options=ParseOptions(**opts) if opts else None)


def err_text(exc: TrafficError) -> str:
    return "\n".join(str(p) for p in exc.problems)


# --- fixtures in each recognised format ------------------------------------------------------------------

AZURE = (b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
         b"2023-11-16 18:00:00.0000000,100,10\n"
         b"2023-11-16 18:20:00.5000000,200,20\n"
         b"2023-11-16 18:40:00.2500000,300,30\n"
         b"2023-11-16 19:00:00.0000000,400,40\n")

BURSTGPT = (b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            b"0,ChatGPT,100,50,150,Conversation log\n"
            b"30,ChatGPT,200,0,200,Conversation log\n"
            b"90,GPT-4,300,150,450,API log\n"
            b"120,GPT-4,400,100,500,API log\n")

LITELLM = (b"request_id,call_type,api_base,spend,startTime,endTime,model,user,prompt_tokens,completion_tokens\n"
           b"a1,acompletion,https://gw,0.01,2024-05-01T10:00:00.000Z,2024-05-01T10:00:03.000Z,gpt-4o,u1,1000,100\n"
           b"a2,acompletion,https://gw,0.00,2024-05-01T11:00:00.000Z,2024-05-01T11:00:01.000Z,gpt-4o-mini,u2,2000,200\n"
           b"a3,acompletion,https://gw,0.03,2024-05-01T12:00:00.000Z,2024-05-01T12:00:09.000Z,gpt-4o,u1,3000,300\n")

OPENAI_LEGACY = (b"organization_id,aggregation_timestamp,n_requests,operation,snapshot_id,n_context_tokens_total,"
                 b"n_generated_tokens_total\n"
                 b"org-1,1700000000,10,completion,gpt-4-0613,5000,1000\n"
                 b"org-1,1700000300,0,completion,gpt-4-0613,0,0\n"
                 b"org-1,1700000600,30,completion,gpt-4-0613,9000,3000\n")


def openai_usage_jsonl() -> bytes:
    rows = [{"object": "organization.usage.completions.result", "start_time": 1700000000, "end_time": 1700003600,
             "input_tokens": 50_000, "output_tokens": 20_000, "num_model_requests": 100, "model": "gpt-4o"},
            {"object": "organization.usage.completions.result", "start_time": 1700003600, "end_time": 1700007200,
             "input_tokens": 90_000, "output_tokens": 60_000, "num_model_requests": 300, "model": "gpt-4o"}]
    return "\n".join(json.dumps(r) for r in rows).encode()


def vllm_bench_json() -> bytes:
    return json.dumps({
        "date": "20251101-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "request_rate": 4.0, "duration": 50.0, "completed": 2, "total_input_tokens": 400,
        "input_lens": [100, 300], "output_lens": [20, 80], "ttfts": [0.01, 0.02], "itls": [[0.01], [0.01]],
        "generated_texts": ['a text that says "input_lens": [1, 2, 3]', "b"], "errors": ["", ""]}, indent=2).encode()


def guidellm_json() -> bytes:
    def req(t, p, o):
        return {"request_id": f"r{t}", "request_type": "text_completions", "prompt_tokens": p, "output_tokens": o,
                "start_time": 1700000000.0 + t, "end_time": 1700000001.0 + t}
    return json.dumps({"benchmarks": [{"type_": "generative_benchmark", "requests": {
        "successful": [req(0, 100, 10), req(10, 200, 20), req(20, 300, 30)],
        "errored": [req(5, 999, 0)], "incomplete": []}}]}).encode()


def test_azure_trace(cat):
    prof = parse_traffic("AzureLLMInferenceTrace_code.csv", AZURE, cat)
    assert prof.source_format == "Azure LLM inference trace"
    assert prof.workload_shares == {"code": 1.0}  # guessed from the file name, and said so
    assert any("guessed from the file name" in w for w in prof.warnings)
    seg = prof.segments[0]
    assert (seg.mean_prompt_tokens, seg.mean_output_tokens, prof.requests) == (250, 25, 4)
    assert prof.span_s == pytest.approx(3600.0)  # 7 fractional digits read exactly
    assert prof.monthly_output_tokens == pytest.approx(100 / 3600 * MONTH_S)  # 73,050
    # 95 % interval: larger of compound Poisson (sqrt(sum o^2) / sum o) and the minute-to-minute spread
    rel_p = math.sqrt(10**2 + 20**2 + 30**2 + 40**2) / 100
    minutes = np.zeros(60)
    minutes[[0, 20, 40, 59]] = [10, 20, 30, 40]  # the last request (minute 60) closes the final minute
    rel_b = minutes.std(ddof=1) / minutes.mean() / math.sqrt(60)
    rel = max(rel_p, rel_b)
    assert prof.monthly_output_tokens_ci95 == pytest.approx((0.0, 73_050 * (1 + 1.959964 * rel)), rel=1e-6)
    assert "60 minutes" in prof.volume_note and "less than a day" in prof.volume_note
    assert prof.arrival_rate_per_s == pytest.approx((0.0, 0.0, 1 / 60))


def test_burstgpt_with_model_column_mapped_to_workloads(cat):
    rule = WorkloadRule(mode="map", column="Model", mapping=(("chatgpt", "chat"), ("GPT-4", "reasoning")))
    prof = parse(cat, "BurstGPT_1.csv", BURSTGPT, workload=rule)
    assert prof.source_format == "BurstGPT"
    assert prof.workload_shares == pytest.approx({"chat": 50 / 300, "reasoning": 250 / 300})
    by = {s.workload: s for s in prof.segments}
    assert (by["chat"].mean_prompt_tokens, by["chat"].mean_output_tokens) == (150, 25)
    assert (by["reasoning"].mean_prompt_tokens, by["reasoning"].mean_output_tokens) == (350, 125)
    # relative seconds (BurstGPT counts from the trace start): 120 s span
    assert prof.monthly_output_tokens == pytest.approx(300 / 120 * MONTH_S)
    assert "since the trace began" in prof.time_note


def test_litellm_spend_log_with_rules_on_model(cat):
    rule = WorkloadRule(mode="rules", rules=(("model", "MINI", "chat"),), workload="code")
    prof = parse(cat, "spend_logs.csv", LITELLM, workload=rule)
    assert prof.source_format == "LiteLLM spend log"
    assert prof.workload_shares == pytest.approx({"code": 400 / 600, "chat": 200 / 600})
    assert prof.monthly_output_tokens == pytest.approx(600 / 7200 * MONTH_S)
    assert dict(prof.column_map)["timestamp"] == "startTime"


def test_openai_usage_export_legacy_buckets(cat):
    prof = parse_traffic("usage.csv", OPENAI_LEGACY, cat)
    assert prof.source_format == "OpenAI usage export"
    assert prof.requests == 40
    seg = prof.segments[0]
    assert (seg.mean_prompt_tokens, seg.mean_output_tokens) == (350, 100)
    # three 5-minute buckets: 900 s from the first bucket's start to the last one's end
    assert prof.span_s == pytest.approx(900.0)
    assert prof.monthly_output_tokens == pytest.approx(4000 / 900 * MONTH_S)


def test_openai_usage_api_jsonl_with_end_times(cat):
    prof = parse(cat, "usage.jsonl", openai_usage_jsonl(), workload=WorkloadRule(mode="fixed", workload="agent"))
    assert prof.source_format == "OpenAI usage export"
    assert prof.workload_shares == {"agent": 1.0}
    assert prof.requests == 400
    assert prof.segments[0].mean_output_tokens == pytest.approx(80_000 / 400)
    assert prof.span_s == pytest.approx(7200.0)
    assert prof.monthly_output_tokens == pytest.approx(80_000 / 7200 * MONTH_S)


def test_vllm_bench_serve_result(cat):
    prof = parse_traffic("bench.json", vllm_bench_json(), cat)
    assert prof.source_format == "vllm bench serve result (per request)"
    assert prof.requests == 2 and prof.segments[0].mean_prompt_tokens == 200
    assert prof.monthly_output_tokens == pytest.approx(100 / 50 * MONTH_S)
    assert any("benchmark" in w for w in prof.warnings)


def test_vllm_bench_result_is_read_as_json_within_the_document_cap(cat):
    """The result is parsed as one JSON document, so its arrays are what JSON says (one line or indented), and it
    meets the same 32 MiB cap as every JSON document."""
    doc = json.loads(vllm_bench_json())
    one_line = json.dumps(doc).encode()  # no line break: not to be taken for JSON lines
    assert parse_traffic("bench.json", one_line, cat).source_format == "vllm bench serve result (per request)"
    doc["input_lens"] = [100, "300"]  # not numbers: not a vllm bench result
    with pytest.raises(TrafficError, match="a vllm bench serve result"):
        parse_traffic("bench.json", json.dumps(doc, indent=1).encode(), cat)
    rows = [{"timestamp": 1_790_000_000 + i, "prompt_tokens": 10, "output_tokens": 5, "input_lens": 10,
             "output_lens": 5} for i in range(3)]  # JSON lines that merely name the keys
    assert parse_traffic("rows.json", "\n".join(json.dumps(r) for r in rows).encode(), cat).requests == 3
    doc["input_lens"] = [100, 300]
    doc["generated_texts"] = ["x" * (17 << 20), "y" * (17 << 20)]
    with pytest.raises(TrafficError, match="a JSON document of at most 32 MiB"):
        parse_traffic("bench.json", json.dumps(doc).encode(), cat)


def test_guidellm_report_counts_successful_requests_only(cat):
    prof = parse_traffic("benchmarks.json", guidellm_json(), cat)
    assert prof.source_format == "guidellm benchmark report (per request)"
    assert prof.requests == 3
    assert prof.monthly_output_tokens == pytest.approx(60 / 20 * MONTH_S)


def test_xlsx_with_excel_datetimes(cat):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    ws.append([dt.datetime(2023, 11, 16, 18, 0, 0), 100, 10])
    ws.append([dt.datetime(2023, 11, 16, 20, 0, 0), 300, 50])
    ws.append([None, None, None])  # an empty row at the end is not data
    buf = io.BytesIO()
    wb.save(buf)
    prof = parse(cat, "trace.xlsx", buf.getvalue(), workload=WorkloadRule(mode="fixed", workload="chat"))
    assert prof.fmt == "xlsx" and prof.source_format == "Azure LLM inference trace"
    assert prof.rows == 2 and prof.segments[0].mean_prompt_tokens == 200
    assert prof.monthly_output_tokens == pytest.approx(60 / 7200 * MONTH_S)


def test_xlsx_bad_cell_names_the_sheet_row(cat):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["timestamp", "workload", "prompt_tokens", "output_tokens"])
    ws.append(["2026-11-01T00:00:00Z", "chat", 10, 5])
    ws.append(["2026-11-01T00:10:00Z", "chat", "lots", 5])
    buf = io.BytesIO()
    wb.save(buf)
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.xlsx", buf.getvalue(), cat)
    assert "row 2 (sheet row 3), column 'prompt_tokens': value 'lots'" in err_text(ei.value)


def test_parquet_with_timestamp_type(cat):
    df = pd.DataFrame({"timestamp": pd.to_datetime(["2026-11-01T00:00:00Z", "2026-11-01T00:30:00Z"]),
                       "workload": ["chat", "code"], "prompt_tokens": [100, 300], "output_tokens": [10, 30]})
    buf = io.BytesIO()
    df.to_parquet(buf)
    prof = parse_traffic("t.parquet", buf.getvalue(), cat)
    assert prof.workload_shares == pytest.approx({"chat": 0.25, "code": 0.75})
    assert prof.monthly_output_tokens == pytest.approx(40 / 1800 * MONTH_S)


# --- separators, decimal marks, timestamp forms ------------------------------------------------------------

def test_semicolon_csv_with_decimal_comma_weights(cat):
    data = (b"timestamp;workload;prompt_tokens;output_tokens;weight\n"
            b"2026-11-01T00:00:00Z;chat;100;10;1,5\n"
            b"2026-11-01T01:00:00Z;code;200;20;0,5\n")
    info = inspect_upload("eu.csv", data)
    assert (info.delimiter, info.decimal) == (";", ",")
    prof = parse_traffic("eu.csv", data, cat)
    assert prof.requests == pytest.approx(2.0)
    assert prof.workload_shares == pytest.approx({"chat": 15 / 25, "code": 10 / 25})
    assert prof.monthly_output_tokens == pytest.approx(25 / 3600 * MONTH_S)


def test_tab_separated(cat):
    data = b"timestamp\tworkload\tprompt_tokens\toutput_tokens\n2026-11-01T00:00:00Z\tchat\t1\t2\n" \
           b"2026-11-01T00:01:00Z\tchat\t1\t4\n"
    assert parse_traffic("t.tsv", data, cat).output_tokens == 6


def test_wrong_separator_error_names_the_separator(cat):
    data = b"timestamp;workload;prompt_tokens;output_tokens\n2026-11-01T00:00:00Z;chat;1;2\n"
    with pytest.raises(TrafficError) as ei:
        parse(cat, "eu.csv", data, delimiter=",")
    assert "semicolon" in err_text(ei.value) and "';'" in err_text(ei.value)


@pytest.mark.parametrize("stamps, span_s", [
    (("2026-11-01T00:00:00Z", "2026-11-01T00:10:00Z"), 600),
    (("2026-11-01T02:00:00+02:00", "2026-11-01T00:10:00Z"), 600),  # zone offsets
    (("2026-11-01 00:00:00.1234567", "2026-11-01 00:10:00.1234567"), 600),  # 7 fractional digits
    (("1793491200", "1793491800"), 600),  # Unix seconds
    (("1793491200000", "1793491800000"), 600),  # Unix milliseconds
    (("1793491200.5", "1793491230.5"), 30),
])
def test_timestamp_forms(cat, stamps, span_s):
    data = ("timestamp,workload,prompt_tokens,output_tokens\n"
            + "".join(f"{t},chat,10,5\n" for t in stamps)).encode()
    prof = parse_traffic("t.csv", data, cat)
    assert prof.span_s == pytest.approx(span_s, abs=1e-3)
    assert prof.monthly_output_tokens == pytest.approx(10 / span_s * MONTH_S, rel=1e-6)


def test_explicit_timestamp_unit(cat):
    data = b"timestamp,workload,prompt_tokens,output_tokens\n0,chat,1,5\n1800000,chat,1,5\n"
    prof = parse(cat, "t.csv", data, timestamp_unit="ms")
    assert prof.span_s == pytest.approx(1800.0)


# --- column mapping and the workload picker ----------------------------------------------------------------

def test_unrecognised_columns_ask_for_a_mapping_and_the_mapping_works(cat):
    data = b"when,task_kind,in_tok,out_tok\n2026-11-01T00:00:00Z,code,100,10\n2026-11-01T00:30:00Z,chat,300,30\n"
    info = inspect_upload("x.csv", data)
    assert info.kind == "unknown" and set(info.missing) == {"timestamp", "prompt_tokens", "output_tokens"}
    with pytest.raises(TrafficError, match="map them"):
        parse_traffic("x.csv", data, cat)
    prof = parse(cat, "x.csv", data, columns=(("timestamp", "when"), ("prompt_tokens", "in_tok"),
                                               ("output_tokens", "out_tok"), ("workload", "task_kind")))
    assert prof.source_format == "Columns matched by name"
    assert prof.workload_shares == pytest.approx({"code": 0.25, "chat": 0.75})


def test_mapping_a_missing_column_is_an_error_naming_it(cat):
    with pytest.raises(TrafficError, match="'nope'"):
        parse(cat, "t.csv", AZURE, columns=(("timestamp", "nope"),))


def test_rules_on_prompt_text_first_match_wins(cat):
    data = (b"timestamp,prompt,prompt_tokens,output_tokens\n"
            b'2026-11-01T00:00:00Z,"def f(): return 1",10,100\n'
            b'2026-11-01T00:01:00Z,"Summarize this document",10,200\n'
            b'2026-11-01T00:02:00Z,"hello",10,300\n')
    rule = WorkloadRule(mode="rules", rules=(("prompt_text", "def ", "code"), ("prompt_text", "summar",
                                                                               "rag_summarization")),
                        workload="chat")
    prof = parse(cat, "t.csv", data, workload=rule)
    assert prof.workload_shares == pytest.approx({"code": 1 / 6, "rag_summarization": 2 / 6, "chat": 3 / 6})
    assert "1 rows that no rule matches counted as 'chat'" in prof.workload_note


def test_unknown_workload_in_the_picker_is_an_error(cat):
    with pytest.raises(TrafficError, match="known workload"):
        parse(cat, "t.csv", AZURE, workload=WorkloadRule(mode="fixed", workload="poetry"))


# --- volume and daily shape -------------------------------------------------------------------------------

def two_day_trace() -> bytes:
    rows = [("2026-11-02T00:00:00Z", 10), ("2026-11-02T09:10:00Z", 100), ("2026-11-02T09:20:00Z", 100),
            ("2026-11-02T21:00:00Z", 10), ("2026-11-03T09:10:00Z", 100), ("2026-11-03T09:20:00Z", 100),
            ("2026-11-03T21:00:00Z", 10), ("2026-11-04T00:00:00Z", 10)]
    return ("timestamp,workload,prompt_tokens,output_tokens\n"
            + "".join(f"{t},chat,50,{o}\n" for t, o in rows)).encode()


def test_daily_shape_from_a_trace_of_two_days(cat):
    prof = parse_traffic("t.csv", two_day_trace(), cat)
    assert prof.spans_a_day
    arr = prof.hourly_arrivals("business_hours")  # the trace's own shape wins over the choice
    assert arr.source == "trace"
    # each hour of the day is covered twice (7,200 s) over the two days
    want = np.zeros(24)
    want[0], want[9], want[21] = 2 / 7200, 4 / 7200, 2 / 7200
    assert arr.requests_per_s == pytest.approx(tuple(want))
    assert (arr.mean_output_tokens[9], arr.mean_output_tokens[0]) == (100, 10)
    monthly_from_hours = sum(r * 3600 * o for r, o in zip(arr.requests_per_s, arr.mean_output_tokens,
                                                          strict=True)) * 30.4375
    assert monthly_from_hours == pytest.approx(prof.monthly_output_tokens)
    assert prof.monthly_output_tokens == pytest.approx(440 / 172_800 * MONTH_S)


def test_short_trace_still_has_a_volume_and_a_chosen_shape(cat):
    prof = parse_traffic("AzureLLMInferenceTrace_conv.csv", AZURE, cat)
    assert prof.monthly_output_tokens is not None and not prof.spans_a_day
    for shape in SHAPES:
        arr = prof.hourly_arrivals(shape)
        assert arr.source == shape
        assert np.mean(arr.requests_per_s) == pytest.approx(4 / 3600)  # the trace's mean rate
    busy = prof.hourly_arrivals("business_hours").requests_per_s
    assert busy[12] > busy[3]
    assert len(prof.minute_arrivals()) == 60


def test_mix_table_with_volume_has_hourly_arrivals(cat):
    data = b"workload,monthly_output_tokens,prompt_tokens,output_tokens\nchat,1e9,1000,500\ncode,1e9,2000,250\n"
    prof = parse_traffic("mix.csv", data, cat)
    arr = prof.hourly_arrivals("flat")
    requests = 1e9 / 500 + 1e9 / 250
    assert arr.requests_per_s == pytest.approx((requests / MONTH_S,) * 24)
    shares = parse_traffic("mix.csv", b"workload,share\nchat,1\n", cat)
    assert shares.hourly_arrivals() is None


def test_all_timestamps_equal_states_why_there_is_no_volume(cat):
    data = b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,1,5\n" * 1
    prof = parse_traffic("t.csv", data, cat)
    assert prof.monthly_output_tokens is None
    assert "same timestamp" in prof.volume_note


# --- parser bugs fixed earlier (each one a regression test) ---------------------------------------------

def test_duplicate_columns_after_case_folding(cat):
    data = b"timestamp,workload,Workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,chat,1,2\n"
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.csv", data, cat)
    assert "'workload' and 'Workload'" in err_text(ei.value)


def test_literal_nan_is_reported_as_nan(cat):
    data = b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,nan,2\n"
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.csv", data, cat)
    assert "value 'nan'" in err_text(ei.value) and "None" not in err_text(ei.value)


def test_line_numbers_after_multiline_quoted_cells_and_blank_lines(cat):
    data = (b'timestamp,workload,prompt_text,prompt_tokens,output_tokens\n'
            b'2026-11-01T00:00:00Z,chat,"line one\nline two\nline three",5,5\n'
            b'\n'
            b'2026-11-01T00:00:01Z,chat,x,-5,5\n')
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.csv", data, cat)
    assert "row 2 (line 6), column 'prompt_tokens'" in err_text(ei.value)


def test_mix_table_with_a_denormal_mean_is_refused(cat):
    with pytest.raises(TrafficError) as ei:
        parse_traffic("mix.csv", b"workload,share,output_tokens\nchat,1,1e-320\n", cat)
    assert "column 'output_tokens'" in err_text(ei.value)


def test_a_long_binary_cell_is_quoted_short(cat):
    junk = bytes(range(128, 256)) * 400  # 51,200 bytes, not UTF-8
    data = b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z," + junk + b",1,2\n"
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.csv", data, cat)
    assert all(len(str(p)) <= MAX_MESSAGE_CHARS for p in ei.value.problems)
    assert len(str(ei.value)) <= MAX_MESSAGE_CHARS + 60
    assert ei.value.problems[0].line == 2


def test_profiles_are_finite_everywhere(cat):
    for name, data in (("AzureLLMInferenceTrace_code.csv", AZURE), ("usage.csv", OPENAI_LEGACY),
                       ("t.csv", two_day_trace())):
        prof = parse_traffic(name, data, cat)
        nums = [prof.requests, prof.output_tokens, prof.monthly_output_tokens, *(prof.arrival_rate_per_s or ()),
                *prof.context_tokens_quantiles]
        nums += [x for s in prof.segments for x in (s.requests, s.output_token_share, s.mean_prompt_tokens,
                                                    s.mean_output_tokens)]
        assert all(math.isfinite(x) for x in nums)
        assert sum(s.output_token_share for s in prof.segments) == pytest.approx(1.0)


def test_json_array_of_records(cat):
    recs = [{"timestamp": "2026-11-01T00:00:00Z", "workload": "chat", "prompt_tokens": 1, "output_tokens": 3},
            {"timestamp": "2026-11-01T00:05:00Z", "workload": "chat", "prompt_tokens": 1, "output_tokens": 7}]
    prof = parse_traffic("r.json", json.dumps(recs).encode(), cat)
    assert prof.monthly_output_tokens == pytest.approx(10 / 300 * MONTH_S)
