"""Gateway exports read as a user expects (profiles.traffic): a column that looks like a model group, project or route
is offered as the workload with its values and a guess per value; a coarse-bucketed export says concurrency is
unknown instead of a median minute; a file that is not a table is refused in product words, saying what it looks
like and what is accepted, also through the sandbox the Traffic page uses (profiles.uploads).

Real-format samples beside this file: litellm_spend_logs.csv (the LiteLLM_SpendLogs table's columns, prompt text in
`messages` as the proxy stores it, English and Chinese) and openai_usage_completions_1h.csv (the Usage API's
completions buckets, bucket_width=1h, group_by=project_id,model, one result a row)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from profiles import load_catalog
from profiles.request import batch_cap
from profiles.traffic import (
    SECONDS_PER_MONTH,
    ParseOptions,
    TrafficError,
    WorkloadRule,
    column_values,
    guess_workload,
    inspect_upload,
    parse_traffic,
)
from profiles.traffic.volume import coarse_bucket_s
from profiles.uploads import read_traffic

HERE = Path(__file__).resolve().parent
LITELLM = (HERE / "litellm_spend_logs.csv").read_bytes()
OPENAI_1H = (HERE / "openai_usage_completions_1h.csv").read_bytes()
WORKLOADS = list(load_catalog().workloads)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(data.decode().splitlines()))


def test_litellm_model_group_is_offered_with_its_values_and_guesses(cat):
    info = inspect_upload("spend_logs.csv", LITELLM)
    assert info.format_label == "LiteLLM spend log" and "workload" not in info.roles
    assert info.workload_candidates[0] == "model_group"
    values = dict(column_values("spend_logs.csv", LITELLM, "model_group"))
    by_hand = [r["model_group"] for r in rows(LITELLM)]
    assert values == {v: by_hand.count(v) for v in set(by_hand)}
    assert {v: guess_workload(v, WORKLOADS) for v in values} == {"code-assistant": "code", "support-chat": "chat"}


def code_share_by_hand() -> dict[str, float]:
    out = {"code": 0, "chat": 0}
    for r in rows(LITELLM):
        out["code" if r["model_group"] == "code-assistant" else "chat"] += int(r["completion_tokens"])
    return {k: v / sum(out.values()) for k, v in out.items()}


def test_the_guesses_count_when_nothing_is_chosen_and_the_note_says_so(cat):
    prof = parse_traffic("spend_logs.csv", LITELLM, cat)  # the CLI's reading: default options
    assert prof.workload_shares == pytest.approx(code_share_by_hand())
    assert prof.workload_note == ("workloads guessed from the names of the values of 'model_group', counted as: "
                                  "code-assistant -> code, support-chat -> chat; change them on the Traffic page")
    assert any(w.startswith("Workloads guessed from the names") for w in prof.warnings)


def test_mapping_the_values_gives_the_same_shares_and_a_choice_overrides_a_guess(cat):
    def read(mapping):
        rule = WorkloadRule(mode="map", column="model_group", mapping=mapping)
        return parse_traffic("spend_logs.csv", LITELLM, cat, options=ParseOptions(workload=rule))

    guesses = tuple((v, guess_workload(v, WORKLOADS) or "chat") for v in ("code-assistant", "support-chat"))
    assert read(guesses).workload_shares == pytest.approx(code_share_by_hand())
    shares = code_share_by_hand()
    assert read((("code-assistant", "agent"),)).workload_shares == pytest.approx(
        {"agent": shares["code"], "chat": shares["chat"]})


def test_values_that_suggest_nothing_leave_the_file_one_workload_with_the_column_named(cat):
    data = LITELLM.replace(b"code-assistant", b"team-alpha").replace(b"support-chat", b"team-beta")
    prof = parse_traffic("spend_logs.csv", data, cat)
    assert prof.workload_shares == {"chat": 1.0}
    assert "the column 'model_group' looks like a workload: map its values" in prof.workload_note
    prof = parse_traffic("spend_logs.csv", data, cat, options=ParseOptions(workload=WorkloadRule(workload="code")))
    assert prof.workload_shares == {"code": 1.0}  # a workload chosen for the file: no guessing


def test_litellm_messages_make_the_chinese_rows_mandarin(cat):
    prof = parse_traffic("spend_logs.csv", LITELLM, cat)
    zh = sum(int(r["completion_tokens"]) for r in rows(LITELLM) if any("\u4e00" <= ch <= "\u9fff" or ch == "\\"
                                                                       for ch in r["messages"].split("user")[-1]))
    total = sum(int(r["completion_tokens"]) for r in rows(LITELLM))
    assert prof.language_shares["mandarin"] == pytest.approx(zh / total)
    assert 0 < zh < total


def test_openai_usage_by_project_offers_project_id_and_says_concurrency_is_unknown(cat):
    info = inspect_upload("usage.csv", OPENAI_1H)
    assert info.format_label == "OpenAI usage export" and info.workload_candidates[:2] == ("project_id", "model")
    prof = parse_traffic("usage.csv", OPENAI_1H, cat)
    assert prof.arrival_rate_per_s is None and prof.concurrency(50.0) is None
    assert prof.arrival_note.startswith("Concurrency unknown: the file counts requests per hour")
    assert prof.arrival_note in prof.warnings
    assert batch_cap(prof, monthly_output_tokens=prof.monthly_output_tokens, tpot_slo_ms=50.0) is None
    assert prof.spans_a_day is False and prof.monthly_output_tokens > 0  # the volume is still measured


def test_daily_counts_have_no_daily_shape_and_no_concurrency(cat):
    # a weight column of requests per day (not an aggregated export's totals): three days at midnight
    data = (b"date,prompt_tokens,output_tokens,weight\n2026-11-01,100,50,1000\n2026-11-02,100,50,1200\n"
            b"2026-11-03,100,50,900\n2026-11-04,100,50,1100\n")
    prof = parse_traffic("daily.csv", data, cat)
    assert prof.arrival_rate_per_s is None and "requests per day" in prof.arrival_note
    assert prof.hour_requests_per_s is None  # not every request at midnight
    assert any("too coarse for a daily shape" in w for w in prof.warnings)
    # four days of counts over four days (the last bucket counted), scaled to an average month
    assert prof.span_s == 4 * 86400
    assert prof.monthly_output_tokens == pytest.approx(50 * 4200 / (4 * 86400) * SECONDS_PER_MONTH)


def test_a_per_request_trace_keeps_its_minutes(cat):
    data = (b"timestamp,prompt_tokens,output_tokens\n2026-11-02T09:00:03Z,10,5\n2026-11-02T09:00:41Z,10,5\n"
            b"2026-11-02T09:01:17Z,10,5\n")
    prof = parse_traffic("t.csv", data, cat)
    assert prof.arrival_rate_per_s is not None and prof.arrival_note == ""


HOUR = 1_793_523_600.0  # 2026-11-01T09:00:00Z


@pytest.mark.parametrize(("secs", "weighted", "width"), [
    (HOUR + 3600 * np.arange(6.0), True, 3600.0),  # counts per hour
    (HOUR + 300 * np.arange(6.0), True, 300.0),  # per 5 minutes
    (HOUR + 86400 * np.arange(3.0), True, 86400.0),  # per day, in a time zone whose midnight is 09:00 UTC
    (np.repeat(HOUR + 3600 * np.arange(3.0), 4), False, 3600.0),  # request rows truncated to the hour
    (np.repeat(HOUR + 60 * np.arange(3.0), 4), False, 60.0),  # truncated to the minute: minutes measured
    (HOUR + 3600 * np.arange(6.0), False, 0.0),  # one request an hour, on the hour: requests, not counts
    (HOUR + np.array([3.0, 41.0, 77.0, 3600.0]), True, 0.0),  # per-request seconds
    (7.0 + 3600 * np.arange(6.0), True, 3600.0),  # relative timestamps (BurstGPT's seconds since the start)
    (HOUR + 3600 * np.arange(2.0), True, 0.0),  # two timestamps: too few to tell
])
def test_bucket_width_from_the_timestamps(secs, weighted, width):
    assert coarse_bucket_s(secs, weighted=weighted) == width


@pytest.mark.parametrize(("value", "workload"), [
    ("code-assistant", "code"), ("qwen2.5-coder-32b", "code"), ("github-copilot-proxy", "code"),
    ("support-chat", "chat"), ("docs-rag", "rag_summarization"), ("客服机器人", "chat"), ("翻译服务", "translation"),
    ("gpt-4o", None), ("proj_abc123", None),
])
def test_a_value_suggests_a_workload(value, workload):
    assert guess_workload(value, WORKLOADS) == workload


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8
RANDOM = np.random.default_rng(3).integers(0, 256, 8192, dtype=np.uint8).tobytes()
HIGH = bytes(range(128, 256)) * 32  # no control byte, not one UTF-8 character
ACCEPTED = "upload a CSV (or TSV), JSON lines, JSON, Parquet or Excel .xlsx export"


@pytest.mark.parametrize("name", ["trace.csv", "trace.jsonl", "trace.json", "trace", "trace.txt"])
@pytest.mark.parametrize(("data", "looks"), [(PNG, "this file is a PNG image"),
                                             (RANDOM, "this file looks binary"),
                                             (HIGH, "this file looks binary")])
def test_a_file_that_is_not_a_table_is_refused_in_product_words(cat, name, data, looks):
    with pytest.raises(TrafficError) as ei:
        parse_traffic(name, data, cat)
    text = str(ei.value)
    assert looks in text and ACCEPTED in text, text
    for python_words in ("Error", "line contains NUL", "field larger than field limit", "codec", "0x"):
        assert python_words not in text, text


@pytest.mark.parametrize(("name", "expected"), [("trace.parquet", "expected a Parquet file (this file is a PNG image"),
                                                ("trace.xlsx", "expected an Excel .xlsx workbook (this file is a PNG")])
def test_a_png_named_as_a_binary_format_is_named_too(cat, name, expected):
    with pytest.raises(TrafficError, match=r"PNG image; upload a CSV") as ei:
        parse_traffic(name, PNG, cat)
    assert expected in str(ei.value)


def test_a_table_in_text_named_parquet_says_so(cat):
    with pytest.raises(TrafficError) as ei:
        parse_traffic("t.parquet", b"timestamp,prompt_tokens,output_tokens\n1,2,3\n", cat)
    assert "it looks like text: a table in text is read when its name ends in .csv" in str(ei.value)


@pytest.mark.skipif(os.name != "posix", reason="the sandbox rests on Linux")
def test_the_sandbox_gives_the_same_refusal(cat):
    for data, looks in ((PNG, "this file is a PNG image"), (RANDOM, "this file looks binary")):
        with pytest.raises(TrafficError) as ei:
            read_traffic("upload.csv", data, cat)
        assert looks in str(ei.value) and ACCEPTED in str(ei.value)


def test_the_value_mapping_and_the_language_switch_are_kept_with_an_upload():
    from profiles.traffic.options import options_from_json, options_json

    opts = ParseOptions(workload=WorkloadRule(mode="map", column="model_group", workload="chat",
                                              mapping=(("code-assistant", "code"), ("support-chat", "chat"))),
                        detect_language=False)
    assert options_from_json(options_json(opts)) == opts
