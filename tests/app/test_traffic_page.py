"""The Traffic page end to end in AppTest: each recognised export uploaded through the page's file uploader
gives the mix, volume and rate computed by hand (tests/profiles/test_traffic_formats.py holds the fixtures);
the column-mapping UI and the workload picker drive the parse; a bad upload never replaces a good profile; the
sample buttons and "Stop using this profile" work while a file sits in the uploader."""

from __future__ import annotations

import io

import pytest

from planner.fleet import DAYS_PER_MONTH  # the fleet's month: its hours x 24 x this many days
from tests.profiles.test_traffic_formats import (
    AZURE,
    BURSTGPT,
    LITELLM,
    MONTH_S,
    OPENAI_LEGACY,
    guidellm_json,
    openai_usage_jsonl,
    two_day_trace,
    vllm_bench_json,
)


def xlsx_bytes() -> bytes:
    import datetime as dt

    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    ws.append([dt.datetime(2023, 11, 16, 18, 0, 0), 100, 10])
    ws.append([dt.datetime(2023, 11, 16, 20, 0, 0), 300, 50])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


SEMICOLON = (b"timestamp;workload;prompt_tokens;output_tokens;weight\n"
             b"2026-11-01T00:00:00Z;chat;100;10;1,5\n"
             b"2026-11-01T01:00:00Z;code;200;20;0,5\n")

# name, bytes, recognised format, workload shares, monthly output tokens, requests (all by hand)
CASES = {
    "azure": ("AzureLLMInferenceTrace_code.csv", AZURE, "Azure LLM inference trace", {"code": 1.0},
              100 / 3600 * MONTH_S, 4),
    "burstgpt": ("BurstGPT_1.csv", BURSTGPT, "BurstGPT", {"chat": 1.0}, 300 / 120 * MONTH_S, 4),
    "litellm": ("spend_logs.csv", LITELLM, "LiteLLM spend log", {"chat": 1.0}, 600 / 7200 * MONTH_S, 3),
    "openai legacy": ("usage.csv", OPENAI_LEGACY, "OpenAI usage export", {"chat": 1.0}, 4000 / 900 * MONTH_S, 40),
    "openai usage api": ("usage.jsonl", openai_usage_jsonl(), "OpenAI usage export", {"chat": 1.0},
                         80_000 / 7200 * MONTH_S, 400),
    "vllm bench": ("bench.json", vllm_bench_json(), "vllm bench serve result (per request)", {"chat": 1.0},
                   100 / 50 * MONTH_S, 2),
    "guidellm": ("benchmarks.json", guidellm_json(), "guidellm benchmark report (per request)", {"chat": 1.0},
                 60 / 20 * MONTH_S, 3),
    "xlsx": ("trace.xlsx", xlsx_bytes(), "Azure LLM inference trace", {"chat": 1.0}, 60 / 7200 * MONTH_S, 2),
    "semicolon csv": ("eu.csv", SEMICOLON, "Per-request rows (this app's template)",
                      {"chat": 15 / 25, "code": 10 / 25}, 25 / 3600 * MONTH_S, 2),
}
BUCKETED = ("openai legacy", "openai usage api")


def upload(at, name: str, data: bytes):
    at.file_uploader(key="traffic_upload").set_value((name, data, "application/octet-stream")).run()
    assert not at.exception, at.exception
    return at


def metric(at, prefix: str):
    return next(m for m in at.metric if m.label.startswith(prefix))


def page(app):
    at = app()
    at.switch_page("views/traffic.py").run()
    assert not at.exception
    return at


def errors(at) -> str:
    return " ".join(e.value for e in at.error)


@pytest.mark.parametrize("case", list(CASES))
def test_each_recognised_export_loads_through_the_page(app, case):
    name, data, label, shares, monthly, requests = CASES[case]
    at = upload(page(app), name, data)
    assert not at.error, errors(at)
    prof = at.session_state["traffic_profile"]
    assert prof.name == name and prof.source_format == label
    assert prof.workload_shares == pytest.approx(shares)
    assert prof.monthly_output_tokens == pytest.approx(monthly, rel=1e-6)
    assert prof.requests == pytest.approx(requests)
    if case in BUCKETED:  # requests counted per 5 minutes / per hour: no minute to take a concurrency from
        assert prof.arrival_rate_per_s is None and metric(at, "Concurrent sequences").value == "unknown"
        assert any(w.value.startswith("Concurrency unknown: the file counts requests per") for w in at.warning)
    else:
        assert prof.arrival_rate_per_s is not None and prof.arrival_rate_per_s[2] > 0
    captions = " ".join(c.value for c in at.caption)
    assert f"Format: {label}" in captions
    shown = metric(at, "Output tokens per month").value
    assert shown == (f"{monthly / 1e9:,.3f}B" if monthly >= 1e8 else f"{monthly / 1e6:,.2f}M")
    assert "interval" in str(metric(at, "Output tokens per month").delta)
    assert any("Volume." in i.value and "scaled to an average month" in i.value for i in at.info)


def test_unrecognised_columns_are_mapped_in_the_ui(app):
    data = b"when,task_kind,in_tok,out_tok\n2026-11-01T00:00:00Z,code,100,10\n2026-11-01T00:30:00Z,chat,300,30\n"
    at = upload(page(app), "custom.csv", data)
    assert "traffic_profile" not in at.session_state or at.session_state["traffic_profile"] is None
    assert "Columns not recognised" in " ".join(w.value for w in at.warning)
    at.selectbox(key="traffic_col_timestamp").set_value("when")
    at.selectbox(key="traffic_col_prompt_tokens").set_value("in_tok")
    at.selectbox(key="traffic_col_output_tokens").set_value("out_tok")
    at.selectbox(key="traffic_col_workload").set_value("task_kind").run()
    assert not at.exception and not at.error, errors(at)
    prof = at.session_state["traffic_profile"]
    assert prof.workload_shares == pytest.approx({"code": 0.25, "chat": 0.75})
    assert prof.monthly_output_tokens == pytest.approx(40 / 1800 * MONTH_S)


def test_workload_picker_maps_a_column_and_fixes_one_workload(app):
    at = upload(page(app), "BurstGPT_1.csv", BURSTGPT)
    at.radio(key="traffic_wl_mode").set_value("map").run()
    at.selectbox(key="traffic_wl_column").set_value("Model").run()
    assert "'ChatGPT' (2)" in " ".join(c.value for c in at.caption)  # the column's values are listed
    at.text_area(key="traffic_wl_map").input("GPT-4 => reasoning\nChatGPT => chat").run()
    assert not at.error, errors(at)
    prof = at.session_state["traffic_profile"]
    assert prof.workload_shares == pytest.approx({"chat": 50 / 300, "reasoning": 250 / 300})
    at.radio(key="traffic_wl_mode").set_value("fixed").run()
    at.selectbox(key="traffic_wl_fixed").set_value("code").run()
    assert at.session_state["traffic_profile"].workload_shares == {"code": 1.0}


def test_workload_rules_on_model(app):
    at = upload(page(app), "spend_logs.csv", LITELLM)
    at.radio(key="traffic_wl_mode").set_value("rules").run()
    at.selectbox(key="traffic_wl_default").set_value("code")
    at.text_area(key="traffic_wl_rules").input("model: mini => chat").run()
    assert not at.error, errors(at)
    assert at.session_state["traffic_profile"].workload_shares == pytest.approx({"code": 2 / 3, "chat": 1 / 3})


def test_wrong_separator_names_it_and_keeps_the_profile(app):
    at = upload(page(app), "eu.csv", SEMICOLON)
    good = at.session_state["traffic_profile"]
    assert good is not None
    at.selectbox(key="traffic_delimiter").set_value(",").run()
    assert not at.exception
    assert "semicolon" in errors(at) and "previous profile 'eu.csv' is still in use" in errors(at)
    assert at.session_state["traffic_profile"] is good


def test_a_mix_table_with_a_denormal_mean_never_replaces_a_good_profile(app):
    at = upload(page(app), "BurstGPT_1.csv", BURSTGPT)
    good = at.session_state["traffic_profile"]
    upload(at, "mix.csv", b"workload,share,output_tokens\nchat,1,1e-320\n")
    assert "column 'output_tokens'" in errors(at)
    assert at.session_state["traffic_profile"] is good
    for other in ("views/plan.py", "views/methods.py"):
        at.switch_page(other).run()
        assert not at.exception


def test_samples_and_stop_using_work_while_a_file_is_in_the_uploader(app):
    at = upload(page(app), "BurstGPT_1.csv", BURSTGPT)
    assert at.session_state["traffic_profile"].name == "BurstGPT_1.csv"
    at.button(key="traffic_sample_code_completion").click().run()
    assert at.session_state["traffic_profile"].name == "code_completion.jsonl"
    assert any("not in use" in i.value for i in at.info)
    at.button(key="traffic_clear").click().run()
    assert not at.exception
    assert at.session_state["traffic_profile"] is None
    at.run()  # a later rerun with the file still in the uploader does not bring it back
    assert at.session_state["traffic_profile"] is None
    assert "No traffic profile loaded" in " ".join(i.value for i in at.info)


def test_short_trace_offers_a_daily_shape_and_a_long_one_shows_its_own(app):
    at = upload(page(app), "AzureLLMInferenceTrace_code.csv", AZURE)
    at.selectbox(key="fleet_shape").set_value("business_hours").run()
    assert not at.exception
    assert "business hours" in " ".join(c.value for c in at.caption)
    at = upload(page(app), "two_days.csv", two_day_trace())
    assert not at.exception and not at.error
    assert not [s for s in at.selectbox if s.key == "fleet_shape"]
    assert "measured per hour of day" in " ".join(c.value for c in at.caption)


def test_a_short_trace_gives_the_sidebar_a_volume(app):
    # a trace under an hour once had no monthly volume and the Plan page kept its default
    at = upload(page(app), "AzureLLMInferenceTrace_code.csv", AZURE)
    at.radio(key="volume_source").set_value("profile").run()
    assert not at.exception
    assert at.number_input(key="volume_b").disabled  # the profile's volume is the one in use
    at.switch_page("views/plan.py").run()
    assert not at.exception


# ---- one traffic-to-request adapter: the CLI and the Plan page plan the same traffic ---------------------------

def short_trace() -> bytes:
    """60 minutes, one chat request every 5 s (400 prompt, 200 output tokens): about 11M output tokens/month."""
    rows = [f"2026-11-02T10:{s // 60:02d}:{s % 60:02d}Z,chat,400,200\n" for s in range(0, 3600, 5)]
    return ("timestamp,workload,prompt_tokens,output_tokens\n" + "".join(rows)).encode()


def long_trace() -> bytes:
    """Two whole days, busier from 09:00 to 18:00, chat and code: a daily shape of its own."""
    rows = []
    for day in (2, 3):
        for hour in range(24):
            n = 12 if 9 <= hour < 18 else 3
            for i in range(n):
                wl, out = ("code", 120) if i % 3 == 0 else ("chat", 300)
                rows.append(f"2026-11-{day:02d}T{hour:02d}:{i * 60 // n:02d}:00Z,{wl},800,{out}\n")
    return ("timestamp,workload,prompt_tokens,output_tokens\n" + "".join(rows)).encode()


def cli_plan(tmp_path, name: str, data: bytes, volume: float | None) -> dict:
    import contextlib
    import json

    from cli.main import main

    path = tmp_path / name
    path.write_bytes(data)
    argv = ["plan", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4", "--traffic", str(path),
            "--no-levers"] + (["--monthly-output-tokens", f"{volume:g}"] if volume is not None else [])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return json.loads(buf.getvalue())


def money(text: str) -> float:
    import re

    return float(re.search(r"-?\$[\d,]+", text).group(0).replace("$", "").replace(",", ""))


@pytest.mark.parametrize(("name", "trace", "volume"), [("short.csv", short_trace, 5e10),
                                                        ("long.csv", long_trace, 5e9),
                                                        ("long.csv", long_trace, None)])
def test_cli_and_plan_page_agree_on_a_traffic_profile(app, tmp_path, name, trace, volume):
    """A typed volume replaces the trace's own for the economics and the fleet alike (the trace's hourly shape
    scaled to it); without one, the trace's volume is used; the CLI and the Plan page show the same bill, GPUs
    and saving either way."""
    data = trace()
    js = cli_plan(tmp_path, name, data, volume)
    at = upload(page(app), name, data)
    assert not at.error, errors(at)
    prof = at.session_state["traffic_profile"]
    if volume is None:
        at.radio(key="volume_source").set_value("profile").run()
    else:
        at.radio(key="volume_source").set_value("manual").run()
        at.number_input(key="volume_b").set_value(volume / 1e9).run()
    at.switch_page("views/plan.py").run()
    assert not at.exception, at.exception
    monthly = volume if volume is not None else prof.monthly_output_tokens
    assert js["economics"]["monthly_output_tokens"] == pytest.approx(monthly, rel=1e-12)
    hours = js["fleet"]["configs"][0]["hours"]
    served = sum(h["requests_per_s"] * h["output_tokens"] for h in hours) * 3600 * DAYS_PER_MONTH  # the fleet's month
    if volume is not None:  # the fleet serves the typed volume, not the trace's
        assert served == pytest.approx(volume, rel=1e-9)
    else:  # the trace's own hours as measured (per hour of day covered, not first-to-last span)
        assert [h["requests_per_s"] for h in hours] == pytest.approx(list(prof.hour_requests_per_s), rel=1e-12)
    table = next(d.value for d in at.dataframe if "peak GPUs" in d.value.columns)
    app_fleet = {r["configuration"]: (r["peak GPUs"], int(r["$/month autoscaled"].lstrip("$").replace(",", "")))
                 for _, r in table.iterrows()}  # the table shows dollars with thousands separators
    cli_fleet = {c["label"]: (c["peak_gpus"], round(c["usd_per_month_autoscaled"])) for c in js["fleet"]["configs"]}
    assert app_fleet == cli_fleet
    saving = js["economics"]["monthly_saving_usd"]
    assert money(metric(at, "Monthly saving").value) == pytest.approx(saving, abs=1)
    today = js["fleet"]["configs"][0]
    assert metric(at, "Peak GPUs today").value == f"{today['peak_gpus']:,}"


def test_a_gateway_export_opens_with_its_model_group_mapped_and_its_languages_detected(app):
    from tests.profiles.traffic.test_gateway_exports import LITELLM, rows

    at = upload(page(app), "spend_logs.csv", LITELLM)
    assert not at.error, errors(at)
    assert at.radio(key="traffic_wl_mode").value == "map"
    assert at.selectbox(key="traffic_wl_column").value == "model_group"
    pickers = {s.label: s for s in at.selectbox if s.key and s.key.startswith("traffic_wl_value_")}
    assert {label.split(" (")[0]: s.value for label, s in pickers.items()} == {"code-assistant": "code",
                                                                              "support-chat": "chat"}
    out = {"code": 0, "chat": 0}
    for r in rows(LITELLM):
        out["code" if r["model_group"] == "code-assistant" else "chat"] += int(r["completion_tokens"])
    prof = at.session_state["traffic_profile"]
    assert prof.workload_shares == pytest.approx({k: v / sum(out.values()) for k, v in out.items()})
    assert 0 < prof.language_shares["mandarin"] < 1
    assert any("prompt text" in c.value and "mandarin" in c.value for c in at.caption)
    # the user's choice stands: support-chat counted as agent
    next(s for label, s in pickers.items() if label.startswith("support-chat")).set_value("agent").run()
    assert at.session_state["traffic_profile"].workload_shares == pytest.approx(
        {"code": out["code"] / sum(out.values()), "agent": out["chat"] / sum(out.values())})
    assert at.radio(key="traffic_wl_mode").value == "map"
    at.checkbox(key="traffic_detect_language").set_value(False).run()
    assert at.session_state["traffic_profile"].language_shares == {"english": 1.0}
    # the next file has its own workload column: read from it, not through the previous file's preset
    upload(at, "eu.csv", SEMICOLON)
    assert at.radio(key="traffic_wl_mode").value == "auto"
    assert at.session_state["traffic_profile"].workload_shares == pytest.approx({"chat": 15 / 25, "code": 10 / 25})


@pytest.mark.parametrize(("data", "looks"), [(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "is a PNG image"),
                                             (bytes(range(256)) * 16, "looks binary")])
def test_a_png_or_random_bytes_are_refused_in_product_words(app, data, looks):
    at = upload(page(app), "trace.csv", data)
    text = errors(at)
    assert f"this file {looks}" in text and "upload a CSV (or TSV), JSON lines, JSON, Parquet or Excel" in text, text
    assert "Error" not in text and at.session_state.get("traffic_profile") is None
