"""Every page driven by widget keys; numbers shown are checked against planner.plan.plan() called directly."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import pytest

from planner import plan as P
from profiles.claims import load_claims
from report.board import board_report
from report.board_html import board_html
from views.parts import report as rep

PAGES = ["views/plan.py", "views/methods.py", "views/levers.py", "views/sensitivity.py", "views/traffic.py",
         "views/claims.py", "views/report.py"]
DEFAULT = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=50.0, monthly_output_tokens=1e10,
               volume_source="entered in the sidebar")


def money(text: str) -> float:
    return float(re.search(r"(-?)\$?([\d,]+\.?\d*)", text).group(0).replace("$", "").replace(",", ""))


def metric(at, prefix: str):
    return next(m for m in at.metric if m.label.startswith(prefix))


def planned(cat, **kw) -> P.Plan:
    base = dict(DEFAULT)
    base.update(kw)
    return P.plan(P.PlanRequest(**base), cat)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_defaults(app, page):
    at = app()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.title[0].value


def test_plan_headline_matches_the_planner(app, cat):
    at = app()
    p = planned(cat)
    assert money(metric(at, "CPM today").value) == pytest.approx(p.reference.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "Best method CPM").value) == pytest.approx(p.best.usd_per_mtok, abs=6e-4)
    # the best method is the cheapest feasible one (each at its own best K and batch)
    assert p.best.usd_per_mtok == pytest.approx(min(m.usd_per_mtok for m in p.methods if m.feasible))
    assert money(metric(at, "Monthly saving").value) == pytest.approx(p.economics.monthly_saving_usd, abs=1)
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert p.verdict in rec
    assert "range" in " ".join(c.value for c in at.caption)


def test_plan_leads_with_money_and_draws_no_arrow_for_no_change(app, cat):
    """The first row is today's bill, the bill with the best method, the saving, payback, NPV and P(saving > 0), in
    that order; the CPMs come after; a zero change of GPUs or dollars has no delta arrow."""
    at = app()
    labels = [m.label for m in at.metric]
    firsts = ("Bill today", "Bill with", "Monthly saving", "Payback", "NPV over", "P(saving > 0)")
    assert all(label.startswith(f) for label, f in zip(labels[:6], firsts, strict=True)), labels[:6]
    assert labels.index(next(x for x in labels if x.startswith("CPM today"))) > 5
    for m in at.metric:
        if m.delta:
            assert money(m.delta) != 0, (m.label, m.delta)


def test_plan_follows_inputs_and_price_default_follows_hardware(app, cat):
    at = app()
    at.selectbox(key="hardware").set_value("h200").run()
    assert at.number_input(key="price").value == pytest.approx(cat.hardware["h200"].usd_per_gpu_hour_mid)
    at.number_input(key="slo").set_value(25.0).run()
    at.selectbox(key="workload").set_value("code").run()
    assert not at.exception
    p = planned(cat, hardware="h200", tpot_slo_ms=25.0, workload="code")
    assert money(metric(at, "Best method CPM").value) == pytest.approx(p.best.usd_per_mtok, abs=6e-4)


def test_a_link_with_hardware_brings_its_own_price(app, cat):
    at = app({"hardware": "b200"})
    assert at.number_input(key="price").value == pytest.approx(cat.hardware["b200"].usd_per_gpu_hour_mid)
    p = planned(cat, hardware="b200")
    assert money(metric(at, "CPM today").value) == pytest.approx(p.reference.usd_per_mtok, abs=6e-4)


def test_price_zero_in_the_url_is_refused_and_the_page_still_works(app, cat):
    at = app({"price": "0"})
    assert not at.exception
    assert any("price='0'" in w.value for w in at.warning)
    assert at.number_input(key="price").value == pytest.approx(cat.hardware["h100-sxm"].usd_per_gpu_hour_mid)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, page


def test_price_zero_typed_in_the_sidebar_is_clamped_not_a_crash(app):
    at = app()
    at.number_input(key="price").set_value(0.0).run()
    assert not at.exception
    assert at.number_input(key="price").value >= 0.01 or any("price" in e.value for e in at.error)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, page


def test_current_method_changes_the_saving(app, cat):
    at = app()
    at.selectbox(key="current").set_value("eagle3").run()
    p = planned(cat, current_method="eagle3")
    assert money(metric(at, "CPM today").value) == pytest.approx(p.method("eagle3").usd_per_mtok, abs=6e-4)
    if p.economics.monthly_saving_usd is not None:
        assert money(metric(at, "Monthly saving").value) == pytest.approx(p.economics.monthly_saving_usd, abs=1)


def test_cost_assumptions_in_the_sidebar_move_the_one_time_cost_and_travel_in_the_link(app, cat):
    at = app({"model": "llama-3.1-8b", "tp": "1"})
    before = money(metric(at, "One-time cost").value)
    at.number_input(key="eng_week").set_value(20000.0).run()
    after = money(metric(at, "One-time cost").value)
    assert after > before
    assert at.query_params["eng_week"] == "20000.0"
    at2 = app(dict(at.query_params))
    assert money(metric(at2, "One-time cost").value) == pytest.approx(after)


def test_url_round_trip(app, cat):
    at = app({"hardware": "h200", "price": "3.1", "slo": "30", "workload": "code", "tuned": "true"})
    assert at.selectbox(key="hardware").value == "h200"
    assert at.number_input(key="price").value == pytest.approx(3.1)
    assert at.checkbox(key="tuned").value is True
    p = planned(cat, hardware="h200", usd_per_gpu_hour=3.1, tpot_slo_ms=30.0, workload="code", tuned=True)
    assert money(metric(at, "Best method CPM").value) == pytest.approx(p.best.usd_per_mtok, abs=6e-4)
    # state goes back to the URL: a link reopens the same scenario
    at.selectbox(key="model").set_value("qwen3-32b").run()
    q = dict(at.query_params)
    assert q["model"] == "qwen3-32b" and q["hardware"] == "h200" and q["slo"] == "30.0"
    at2 = app(q)
    assert [m.value for m in at2.metric] == [m.value for m in at.metric]


def test_bad_url_values_are_ignored_with_a_warning(app):
    at = app({"model": "gpt-9", "slo": "fast"})
    text = " ".join(w.value for w in at.warning)
    assert "model='gpt-9'" in text and "slo='fast'" in text
    assert at.selectbox(key="model").value == "llama-3.3-70b"


def test_methods_page_numbers_and_unavailable_reason(app, cat):
    at = app()
    at.switch_page("views/methods.py").run()
    df = at.dataframe[0].value
    row = df[df["method"] == "EAGLE-3"].iloc[0]
    e3 = planned(cat).method("eagle3")
    assert row["CPM $/Mtok"] == pytest.approx(e3.usd_per_mtok, abs=1e-4)
    assert row["K"] == e3.k and row["best batch"] == e3.batch
    mtp = df[df["method"] == "DeepSeek-style MTP"].iloc[0]
    assert mtp["available"].startswith("unavailable: ") and "MTP" in mtp["available"]
    assert any("unavailable" in i.value for i in at.info)
    at.radio(key="methods_alpha").set_value("tuned").run()
    df2 = at.dataframe[0].value
    e3t = planned(cat, tuned=True).method("eagle3")
    assert df2[df2["method"] == "EAGLE-3"].iloc[0]["CPM $/Mtok"] == pytest.approx(e3t.usd_per_mtok, abs=1e-4)


def test_levers_page_orders(app, cat):
    at = app()
    at.switch_page("views/levers.py").run()
    df = at.dataframe[0].value
    # today runs no speculation: step 0 adopts EAGLE-3 (if it pays), then the seven levers
    assert list(df["#"]) == sorted(df["#"]) and len(df) == len(cat.levers) + 1 and df["#"].iloc[0] == 0
    at.radio(key="levers_order").set_value("return").run()
    assert not at.exception
    df2 = at.dataframe[0].value
    assert sorted(df2["#"]) == sorted(df["#"])
    # the waterfall starts from today's bill (no speculation), the Plan's reference bill
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(planned(cat).economics.reference_bill_usd_per_month, abs=1)


@pytest.fixture
def media(monkeypatch) -> dict[str, bytes]:
    """The files the app hands to the browser (download buttons), by media file id."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files: dict[str, bytes] = {}
    real = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        file_id = real(self, path_or_data, mimetype, kind, filename)
        files[file_id] = path_or_data if isinstance(path_or_data, bytes) else path_or_data.encode()
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return files


def downloaded(at, media: dict[str, bytes], key: str) -> bytes:
    """The bytes the download button `key` on the page gives."""
    url = next(b.proto.url for b in at.get("download_button") if b.proto.id.endswith(key))
    return media[url.rsplit("/", 1)[1].split(".", 1)[0]]


def chart(at, key: str) -> dict:
    return json.loads(next(c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith(key)))


def cli_plan(*flags: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "planner", "plan", *flags], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_one_answer_everywhere(app, cat, media):
    """The CLI's plan JSON, the Plan headline, the Fleet chart, the Levers start, the Methods table, the Report CSV
    (the page's own download) and the Sensitivity page show the same CPM, K, batch, saving, payback, bills and
    P(saving > 0) for one scenario."""
    # today n-gram: the best method (EAGLE-3, from its public head's measured acceptance) differs from today's
    q = {"model": "llama-3.1-8b", "tp": "1", "current": "ngram", "volume_b": "1000", "fleet_shape": "business_hours"}
    kw = dict(model="llama-3.1-8b", tp=1, current_method="ngram", monthly_output_tokens=1e12,
              daily_shape="business_hours")
    p = planned(cat, **kw)
    js = cli_plan("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--current-method", "ngram",
                  "--monthly-output-tokens", "1e12", "--daily-shape", "business_hours")
    best = p.best
    js_best = next(m for m in js["methods"] if m["method"] == best.method)
    assert js_best["usd_per_mtok"] == pytest.approx(best.usd_per_mtok)
    assert (js_best["k"], js_best["batch"]) == (best.k, best.batch)
    e = js["economics"]
    assert e["monthly_saving_usd"] == pytest.approx(p.economics.monthly_saving_usd)
    assert js["reference"]["usd_per_mtok"] == pytest.approx(p.reference.usd_per_mtok)
    configs = {c["method"]: c for c in js["fleet"]["configs"]}
    today_bill, best_bill = configs[js["reference"]["method"]], configs[best.method]
    assert best.method != js["reference"]["method"]  # the scenario shows both fleets
    # at 1,000B tokens/month the fleets differ (60 -> 59 GPUs at the peak): saving and payback are bills'
    assert e["monthly_saving_usd"] > 0 and e["payback_months"] is not None
    # the Plan page: headline and fleet
    at = app(q)
    assert money(metric(at, "Best method CPM").value) == pytest.approx(best.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "CPM today").value) == pytest.approx(p.reference.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "Monthly saving").value) == pytest.approx(e["monthly_saving_usd"], abs=1)
    assert metric(at, "Payback").value == P.fmt_months(e["payback_months"])
    # the risk-weighted NPV: the CLI's, beside the NPV on the page, and the report's below
    assert e["risk_weighted_npv_usd"] == pytest.approx(p.economics.risk_weighted_npv_usd)
    assert f"risk-weighted {P.fmt_usd(e['risk_weighted_npv_usd'])}" in " ".join(c.value for c in at.caption)
    assert int(metric(at, "Peak GPUs today").value.replace(",", "")) == today_bill["peak_gpus"]
    assert money(metric(at, "Monthly bill, autoscaled").value) == pytest.approx(best_bill["usd_per_month_autoscaled"],
                                                                                 abs=1)
    fleet = chart(at, "plan_fleet_chart")["data"]
    assert list(fleet[0]["y"]) == [h["gpus"] for h in today_bill["hours"]]
    assert list(fleet[1]["y"]) == [h["gpus"] for h in best_bill["hours"]]
    # Methods
    at.switch_page("views/methods.py").run()
    df = at.dataframe[0].value
    row = df[df["method"] == best.label].iloc[0]
    assert row["CPM $/Mtok"] == pytest.approx(best.usd_per_mtok, abs=1e-4)
    assert (row["K"], row["best batch"]) == (best.k, best.batch)
    # Levers
    at.switch_page("views/levers.py").run()
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(p.bill(p.reference.method).usd_per_month, abs=1) == pytest.approx(
        p.economics.reference_bill_usd_per_month, abs=1)
    # Report: the CSV the page offers
    at.switch_page("views/report.py").run()
    assert not at.exception
    rows = {(r["section"], r["item"]): r["value"]
            for r in csv.DictReader(io.StringIO(downloaded(at, media, "report_csv").decode("utf-8")))}
    assert float(rows[("headline", "best method CPM")]) == pytest.approx(best.usd_per_mtok, abs=1e-6)
    assert float(rows[("headline", "monthly saving")]) == pytest.approx(e["monthly_saving_usd"], abs=1e-3)
    assert float(rows[("headline", "payback")]) == pytest.approx(e["payback_months"], abs=5e-7)  # 6 decimals in the CSV
    assert int(rows[(f"method {best.method}", "k")]) == best.k
    for role, cfg in (("today", today_bill), ("with speculation", best_bill)):
        assert float(rows[("bill", f"{role}: autoscaled")]) == pytest.approx(cfg["usd_per_month_autoscaled"], abs=1e-3)
        assert float(rows[("bill", f"{role}: fixed at the peak")]) == pytest.approx(cfg["usd_per_month_fixed"],
                                                                                   abs=1e-3)
        assert [int(rows[(f"fleet by hour, {role}", f"hour {h['hour']:02d}")]) for h in cfg["hours"]] == [
            h["gpus"] for h in cfg["hours"]]
    assert float(rows[("headline", "risk-weighted NPV (mean over the Monte Carlo's draws)")]) == pytest.approx(
        e["risk_weighted_npv_usd"], rel=1e-5)
    p_saves = float(rows[("uncertainty", "P(saving > 0)")])
    # one Monte Carlo: the Plan's P(saving > 0) (CLI JSON) is the report's and the Sensitivity page's at its defaults
    assert e["p_saving_positive"] == pytest.approx(p_saves)
    # Sensitivity: the same Monte Carlo
    at.switch_page("views/sensitivity.py").run()
    mc = next(m.value for m in at.markdown if "monthly saving p5" in m.value)
    assert f"saves money in {p_saves * 100:.0f} %" in mc
    # the page's median in whole dollars; the report's CSV holds it to 6 significant digits (56248.5 for 56,248.52)
    shown = float(re.search(r"median \$([\d,]+)", mc).group(1).replace(",", ""))
    assert shown == pytest.approx(float(rows[("uncertainty", "monthly saving median")]), abs=1.0)


def test_the_app_and_the_cli_default_to_the_same_volume(app):
    from planner.request import DEFAULT_MONTHLY_OUTPUT_TOKENS

    js = cli_plan("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4")
    at = app()
    caption = " ".join(c.value for c in at.caption)
    assert at.number_input(key="volume_b").value * 1e9 == js["economics"]["monthly_output_tokens"] == \
        DEFAULT_MONTHLY_OUTPUT_TOKENS
    assert f"{DEFAULT_MONTHLY_OUTPUT_TOKENS / 1e9:,.2f}B output tokens/month (entered in the sidebar)" in caption


def uploaded(app):
    """The app after uploading a 50-minute code trace ('mine.csv') on the Traffic page."""
    data = (b"timestamp,workload,language,prompt_tokens,output_tokens\n"
            + b"".join(f"2026-11-01T00:{i:02d}:00Z,code,english,{1500 + i},{250 + i}\n".encode() for i in range(50)))
    at = app()
    at.switch_page("views/traffic.py").run()
    at.file_uploader(key="traffic_upload").set_value(("mine.csv", data, "text/csv")).run()
    assert not at.exception and not at.error
    return at


def test_a_loaded_trace_plans_its_own_volume_unless_the_user_types_one(app, cat):
    at = uploaded(app)
    own = at.session_state["traffic_profile"].monthly_output_tokens
    assert own is not None and abs(own - at.number_input(key="volume_b").value * 1e9) > 1e6
    at.switch_page("views/plan.py").run()
    assert at.number_input(key="volume_b").disabled
    text = " ".join(c.value for c in at.caption)
    assert f"{own / 1e9:,.2f}B output tokens/month (traffic profile 'mine.csv')" in text
    assert "Using the trace's own" in text
    # the user overrides it: the typed number is planned, and the page says it replaces the trace's
    at.radio(key="volume_source").set_value("manual").run()
    at.number_input(key="volume_b").set_value(42.0).run()
    text = " ".join(c.value for c in at.caption)
    assert "42.00B output tokens/month (entered in the sidebar; it replaces the" in text


def test_sensitivity_monte_carlo_is_seeded(app):
    at = app()
    at.switch_page("views/sensitivity.py").run()
    mc = lambda: next(m.value for m in at.markdown if "monthly saving p5" in m.value)  # noqa: E731
    first = mc()
    at.number_input(key="mc_seed").set_value(7).run()
    assert mc() == first
    at.number_input(key="mc_seed").set_value(8).run()
    assert mc() != first
    assert any("rossover" in m.value for m in at.markdown)
    at.selectbox(key="sens_method").set_value("medusa").run()
    assert not at.exception


def test_sensitivity_shows_a_crossover_where_speculation_stops_paying(app):
    at = app({"model": "llama-3.1-8b", "tp": "1", "slo": "200"})
    at.switch_page("views/sensitivity.py").run()
    text = " ".join(m.value for m in at.markdown)
    assert "rossover" in text


@pytest.mark.parametrize("sample", ["bilingual_saas", "code_completion", "rag_summarization"])
def test_samples_drive_the_other_pages(app, sample):
    at = app()
    at.switch_page("views/traffic.py").run()
    at.button(key=f"traffic_sample_{sample}").click().run()
    assert not at.exception
    assert at.session_state["traffic_profile"] is not None
    at.radio(key="volume_source").set_value("profile").run()
    at.switch_page("views/plan.py").run()
    assert not at.exception
    assert "Traffic profile" in " ".join(c.value for c in at.caption)
    assert at.query_params.get("traffic") == sample


def test_single_row_mix_matches_the_planner(app, cat):
    at = app()
    at.switch_page("views/traffic.py").run()
    at.file_uploader(key="traffic_upload").set_value(
        ("mix.csv", b"workload,language,monthly_output_tokens,prompt_tokens,output_tokens\n"
                    b"code,english,5e9,2000,300\n", "text/csv")).run()
    assert not at.exception and not at.error
    at.radio(key="volume_source").set_value("profile").run()
    at.switch_page("views/plan.py").run()
    p = planned(cat, segments=(P.TrafficSegment("code", "english", 1.0, 2000, 300),), monthly_output_tokens=5e9)
    assert money(metric(at, "Best method CPM").value) == pytest.approx(p.best.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "Monthly saving").value) == pytest.approx(p.economics.monthly_saving_usd, abs=1)


BAD_UPLOADS = {
    "missing column": (b"timestamp,workload,prompt_tokens\n2026-11-01T00:00:00Z,chat,5\n", "column 'output_tokens'"),
    "wrong columns": (b"a,b\n1,2\n", "the file's columns are: a, b"),
    "wrong type": (b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,lots,5\n",
                   "row 1 (line 2), column 'prompt_tokens': value 'lots'"),
    "negative": (b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,5,-3\n",
                 "row 1 (line 2), column 'output_tokens': value -3"),
    "absurd": (b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,chat,5,900000000\n",
               "value 900000000"),
    "unknown workload": (b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,poetry,5,3\n",
                         "column 'workload': value 'poetry'"),
    "non-utf8": (b"timestamp,workload,prompt_tokens,output_tokens\n2026-11-01T00:00:00Z,ch\xffat,5,3\n",
                 "UTF-8"),
    "empty": (b"", "0 bytes"),
    "header only": (b"timestamp,workload,prompt_tokens,output_tokens\n", "at least one data row"),
    "oversized": (b"x" * (100 * 2**20 + 1), "at most 100 MiB"),
}


@pytest.mark.parametrize("kind", list(BAD_UPLOADS))
def test_bad_upload_keeps_the_previous_profile(app, kind):
    data, expected = BAD_UPLOADS[kind]
    at = app()
    at.switch_page("views/traffic.py").run()
    at.button(key="traffic_sample_bilingual_saas").click().run()
    before = at.session_state["traffic_profile"]
    at.file_uploader(key="traffic_upload").set_value(("upload.csv", data, "text/csv")).run()
    assert not at.exception
    err = " ".join(e.value for e in at.error)
    assert expected in err, err
    assert "previous profile 'bilingual_saas.csv' is still in use" in err
    assert at.session_state["traffic_profile"] is before
    at.switch_page("views/plan.py").run()
    assert not at.exception


def test_claims_page_lists_claims_with_verdicts(app):
    at = app()
    at.switch_page("views/claims.py").run()
    df = at.dataframe[0].value
    assert list(df["claim"]) == [c.claim for c in load_claims()]  # every shipped claim applies to the defaults
    assert df["verdict"].map(bool).all() and df["conditions"].map(bool).all()
    assert df["claim"].str.contains("19.4 %").any()
    # MTP K=1 cannot beat its own acceptance length (1.80 at alpha 0.80) at the same batch
    mtp = df[df["claim"].str.contains("DeepSeek-V3 native MTP")]["what the model says"].iloc[0]
    speedup = float(re.search(r"Model: ([0-9.]+)x", mtp).group(1))
    assert "K=1" in mtp and speedup <= 1.80


def test_report_page_command_and_downloads(app, cat):
    at = app()
    at.switch_page("views/report.py").run()
    cmd = at.code[0].value
    assert cmd.startswith("vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4")
    assert "--speculative-config '{" in cmd and '"num_speculative_tokens"' in cmd
    buttons = {b.key: b.proto.label for b in at.get("download_button")}
    assert buttons == {"report_pdf": "Download the board report (PDF)",
                       "report_html": "Download the board report (HTML)",
                       "report_csv": "Download all numbers (CSV)", "report_json": "Download the JSON appendix"}


def test_report_builders(cat):
    p = planned(cat, model="llama-3.1-8b", tp=1, levers_start="auto")
    rows = rep.scenario_rows(p, list(p.levers))
    rows.append({"section": "=cmd|' /C calc'!A0", "item": "+1", "value": "-2", "unit": "@x", "basis": "\tx"})
    text = rep.to_csv(rows)
    last = text.strip().splitlines()[-1]
    assert last.startswith("'=cmd") and ",'+1,'-2,'@x,'\tx" in last
    assert "best method CPM" in text
    html = board_html(board_report(p, cat, generated="2026-11-29"))
    assert p.verdict.split(":")[0] in html
    assert cat.hardware["h100-sxm"].price.date in html and "Assumptions" in html


def test_vllm_command_for_a_draft_model(cat):
    from planner.physics.deploy import vllm_deployment

    model = cat.models["llama-3.3-70b"]
    cmd = vllm_deployment(cat.methods["draft_model"], model, 5, tp=4, draft_model=cat.models["llama-3.1-8b"])
    assert '"model":"meta-llama/Llama-3.1-8B-Instruct"' in cmd["command"]
    assert '"num_speculative_tokens":5' in cmd["command"]
    head = vllm_deployment(cat.methods["eagle3"], model, 3)
    assert "<FILL IN" in head["command"] and any("fill in" in n for n in head["notes"])


def test_a_calibrated_profile_is_selectable_hardware(app, cat, tmp_path, monkeypatch):
    # A profile saved by the calibration package appears beside (not over) the shipped hardware, and the
    # Plan page then uses its fitted efficiencies.
    from calibration.storage.profiles_store import CalibratedProfile, save_profile

    monkeypatch.setenv("SPECPLAN_CALIBRATED_DIR", str(tmp_path))
    prof = CalibratedProfile(name="ci-cpu", hardware="cpu-local", eta_bw=0.9, eta_flops=0.8, t_fixed_s=0.02,
                             t_fixed_draft_s=0.001, t_spec_s=0.01, stderr={}, holdout_mape_pct=9.5,
                             created="2026-11-29", source="test fit")
    save_profile(prof)
    at = app()
    options = at.selectbox(key="hardware").options
    assert any("Calibrated: ci-cpu" in o for o in options)
    assert any("H100" in o for o in options)  # shipped entries stay
    at.selectbox(key="model").set_value("smollm2-135m").run()
    at.selectbox(key="tp").set_value(1).run()
    at.selectbox(key="hardware").set_value("calibrated-ci-cpu").run()
    at.number_input(key="slo").set_value(2000.0).run()
    assert not at.exception, at.exception
    hw = prof.hardware_spec()
    cat2 = cat.with_hardware({"calibrated-ci-cpu": hw})
    p = planned(cat2, model="smollm2-135m", hardware="calibrated-ci-cpu", tp=1, tpot_slo_ms=2000.0)
    # the page shows the planner's CPM as fmt_cpm writes it (three decimals: $0.056 for 0.0556)
    assert metric(at, "CPM today").value == f"{P.fmt_cpm(p.reference.usd_per_mtok)} /Mtok"


def test_fleet_on_the_plan_page_equals_plan(app, cat):
    at = app({"model": "llama-3.1-8b", "tp": "1", "volume_b": "50"})
    at.selectbox(key="fleet_shape").set_value("business_hours").run()
    assert not at.exception
    p = planned(cat, model="llama-3.1-8b", tp=1, monthly_output_tokens=5e10, daily_shape="business_hours")
    today = p.fleet.config(p.reference.method)
    assert int(metric(at, "Peak GPUs today").value.replace(",", "")) == today.peak_gpus
    best = p.fleet.config(p.best.method)
    assert int(metric(at, f"Peak GPUs with {best.label}").value.replace(",", "")) == best.peak_gpus
    assert money(metric(at, "Monthly bill, autoscaled").value) == pytest.approx(best.usd_per_month_autoscaled, abs=1)
    assert at.query_params["fleet_shape"] == "business_hours"


def test_a_link_carries_an_uploaded_profile(app):
    at = uploaded(app)
    digest = at.query_params["profile"]
    assert len(digest) == 64
    at.radio(key="volume_source").set_value("profile").run()
    at.switch_page("views/plan.py").run()
    before = [m.value for m in at.metric]
    # a fresh session from the link: same profile, same numbers
    again = app(dict(at.query_params))
    assert again.session_state["traffic_profile"].name == "mine.csv"
    assert [m.value for m in again.metric] == before
    # a link whose profile this server does not hold says so and shows no profile
    gone = app({**dict(at.query_params), "profile": "0" * 64})
    assert "not in this server's store" in " ".join(w.value for w in gone.warning)
    assert "traffic_profile" not in gone.session_state or gone.session_state["traffic_profile"] is None


def test_report_shows_the_bills_the_hardware_comparison_and_the_spend_of_the_plan(cat):
    """The bills, effective CPMs and probabilities on the economics, the hardware comparison and the spend a plan
    carries reach the CSV and the HTML, with the plan's own numbers."""
    p = planned(cat, model="llama-3.1-8b", tp=1, daily_shape="business_hours", compare_hardware=True,
                monthly_output_tokens=3e11)
    e, hc = p.economics, p.hardware_choice
    assert hc is not None and hc.cheapest is not None
    rows = {(r["section"], r["item"]): r for r in csv.DictReader(io.StringIO(rep.to_csv(rep.scenario_rows(p, []))))}
    assert float(rows[("headline", "bill today")]["value"]) == pytest.approx(e.reference_bill_usd_per_month)
    assert float(rows[("headline", "P(saving > 0)")]["value"]) == pytest.approx(e.p_saving_positive)
    # the CSV writes floats to 6 decimals (views/_report._cell): a $/Mtok figure to the millionth of a dollar
    assert float(rows[("headline", "effective CPM with the best method (bill / output tokens)")]["value"]) == \
        pytest.approx(e.new_effective_usd_per_mtok, abs=5e-7)
    for ch in hc.choices:
        if ch.speculation is not None:
            assert float(rows[("hardware comparison", f"{ch.label}: with speculation")]["value"]) == pytest.approx(
                ch.speculation.usd_per_month)
    c = hc.cheapest
    assert f"{c.tp} x {c.hardware_label} ({c.dtype})" in rows[("hardware comparison", "cheapest")]["basis"]
    html = board_html(board_report(p, cat, generated="2026-12-02"))
    assert "Which GPU type" in html and P.fmt_usd(c.usd_per_month) in html
    assert P.fmt_usd(e.reference_bill_usd_per_month) in html and "The fleet by hour" in html
    # a plan for a stated spend says how the spend became the volume
    ps = planned(cat, model="llama-3.1-8b", tp=1, spend_usd_per_month=100000.0)
    rows = {(r["section"], r["item"]): r for r in csv.DictReader(io.StringIO(rep.to_csv(rep.scenario_rows(ps, []))))}
    assert float(rows[("spend", "spend_usd_per_month")]["value"]) == 100000.0
    assert float(rows[("inputs", "monthly_output_tokens")]["value"]) == pytest.approx(ps.spend.monthly_output_tokens)


def test_spend_as_the_volume_source_plans_what_the_cli_plans_and_travels_in_the_link(app):
    """'What we spend a month' in the sidebar: $100,000 on 32 H100s (TP 4) gives the CLI's volume and bills."""
    js = cli_plan("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4", "--spend-usd-per-month", "100000",
                  "--gpus", "32")
    e = js["economics"]
    at = app()
    at.radio(key="volume_source").set_value("spend").run()
    at.number_input(key="spend_usd").set_value(100000.0).run()
    at.number_input(key="spend_gpus").set_value(32).run()
    assert not at.exception and not at.error, (at.exception, [x.value for x in at.error])
    assert at.number_input(key="volume_b").disabled
    # the Plan page's volume line: the CLI's volume and how the spend became it
    line = next(c.value for c in at.caption if c.value.startswith("Volume: "))
    assert f"{e['monthly_output_tokens'] / 1e9:,.2f}B output tokens/month" in line
    assert js["spend"]["volume_source"] in line
    assert "spend of $100,000/month" in " ".join(c.value for c in at.caption if "TPOT SLO" in c.value)
    assert money(metric(at, "Bill today").value) == pytest.approx(e["reference_bill_usd_per_month"], abs=1)
    assert metric(at, "Bill today").value == f"{P.fmt_usd(e['reference_bill_usd_per_month'])}/month"
    assert money(metric(at, "Monthly saving").value) == pytest.approx(e["monthly_saving_usd"], abs=1)
    assert f"{e['monthly_output_tokens'] / 1e9:,.2f}B" in metric(at, "Monthly saving").help
    # the link carries the spend; a fresh session from it shows the same numbers
    q = dict(at.query_params)
    assert (q["volume_source"], q["spend_gpus"]) == ("spend", "32")  # $100,000 is the default: not in the link
    again = app(q)
    assert (again.radio(key="volume_source").value, again.number_input(key="spend_usd").value) == ("spend", 100000.0)
    assert [m.value for m in again.metric] == [m.value for m in at.metric]
    at.number_input(key="spend_usd").set_value(250000.0).run()
    q = dict(at.query_params)
    assert (q["volume_source"], q["spend_usd"], q["spend_gpus"]) == ("spend", "250000.0", "32")
    again = app(q)
    assert again.number_input(key="spend_usd").value == 250000.0
    assert [m.value for m in again.metric] == [m.value for m in at.metric]
    assert "spend of $250,000/month" in next(c.value for c in again.caption if c.value.startswith("Volume: "))
    at.number_input(key="spend_usd").set_value(100000.0).run()
    # the pages that take a volume plan the same one: the Levers start is the Plan's bill today
    at.switch_page("views/levers.py").run()
    assert not at.exception
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(e["reference_bill_usd_per_month"], abs=1)
    for page in PAGES:  # every page plans the spend (no page falls back to the typed volume silently)
        at.switch_page(page).run()
        assert not at.exception, page
        caption = " ".join(c.value for c in at.caption)
        assert page == "views/traffic.py" or "spend of $100,000/month" in caption, page


@pytest.mark.parametrize(("query", "says"), [
    ({"volume_source": "spend", "spend_usd": "-5"}, "spend_usd='-5'"),  # out of range in a link: ignored, named
    ({"volume_source": "spend", "spend_usd": "1e11"}, "spend_usd='1e11'"),
    ({"volume_source": "spend", "spend_gpus": "-1"}, "spend_gpus='-1'"),
])
def test_a_bad_spend_in_the_link_is_refused_by_name(app, query, says):
    at = app(query)
    assert any(says in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.number_input(key="spend_usd").value == pytest.approx(100000.0)


@pytest.mark.parametrize(("usd", "gpus", "says"), [
    (0.0, 0, "spend_usd_per_month=0.0"),  # no spend
    (100.0, 0, "spend_usd_per_month=100.0"),  # less than one replica's month
    (100000.0, 2, "spend_gpus=2"),  # fewer GPUs than one replica (TP 4)
])
def test_a_bad_spend_typed_in_the_sidebar_shows_an_error_naming_it(app, usd, gpus, says):
    at = app({"volume_source": "spend"})
    at.number_input(key="spend_usd").set_value(usd).run()
    at.number_input(key="spend_gpus").set_value(gpus).run()
    assert not at.exception, at.exception
    assert any(says in x.value for x in at.error), [x.value for x in at.error]


def test_billing_in_the_link_prices_every_page_and_the_tornado_shows_the_bill_saving(app, cat):
    """`billing=fixed` in a link reaches every page's request (the Levers start is the plan's fixed reference bill)
    and the tornado's default measure is the monthly bill saving of planner.uncertainty.sensitivity.tornado."""
    from planner.uncertainty import sensitivity as sens

    q = {"model": "llama-3.1-8b", "tp": "1", "volume_b": "1000", "fleet_shape": "business_hours",
         "billing": "fixed", "current": "eagle3"}
    kw = dict(model="llama-3.1-8b", tp=1, monthly_output_tokens=1e12, daily_shape="business_hours",
              billing="fixed", current_method="eagle3")
    p = planned(cat, **kw)
    auto = planned(cat, **{**kw, "billing": "autoscaled"})
    assert p.economics.reference_bill_usd_per_month != pytest.approx(auto.economics.reference_bill_usd_per_month)
    at = app(q)
    at.switch_page("views/levers.py").run()
    assert not at.exception
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(p.economics.reference_bill_usd_per_month, abs=1)
    at.switch_page("views/sensitivity.py").run()
    assert not at.exception
    method = at.selectbox(key="sens_method").value
    method = p.best.method if method in (None, "auto") else method
    tor = sens.tornado(P.PlanRequest(**{**DEFAULT, **kw, "hours": p.request.hours,
                                         "hours_source": p.request.hours_source}), cat, method)
    bars = chart(at, "sens_tornado")["data"]
    assert bars[0]["base"] == pytest.approx(tor[0].mid_saving_usd, rel=1e-6)
    assert "monthly saving" in chart(at, "sens_tornado")["layout"]["xaxis"]["title"]["text"]


def test_plan_fleet_today_at_another_tp_is_the_headline_fleet(app, cat):
    """4 x H100 misses a 10 ms TPOT without speculation, so today is no speculation at TP=8: the Fleet section shows
    that fleet's GPUs and bill (the headline's), not the best method's under today's name."""
    at = app({"slo": "10", "volume_b": "20"})
    p = planned(cat, tpot_slo_ms=10.0, monthly_output_tokens=2e10)
    today, best = p.reference_fleet, p.best_fleet
    assert today.tp == 8 and today.peak_gpus == p.economics.reference_peak_gpus
    peak = metric(at, "Peak GPUs today")
    assert today.label in peak.label and int(peak.value.replace(",", "")) == today.peak_gpus
    assert int(metric(at, "Peak GPUs with").value.replace(",", "")) == best.peak_gpus
    assert money(metric(at, "Bill today").value) == pytest.approx(p.economics.reference_bill_usd_per_month, abs=1)
    hours = next(c.value for c in at.caption if c.value.startswith("Hours:"))
    assert f"Today's bill: {P.fmt_usd(today.usd_per_month_autoscaled)}/month autoscaled" in hours
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert f"{today.peak_gpus} -> {best.peak_gpus} GPUs" in rec and P.fmt_usd(today.usd_per_month) in rec


def test_a_typed_price_equal_to_the_midpoint_is_entered_and_never_drawn_over(app, cat):
    """Entered means typed, whatever the value: a price typed back to the list midpoint (or carried by a link) is
    the plan's entered price, and the Monte Carlo asked to draw the price leaves it alone."""
    mid = cat.hardware["h100-sxm"].usd_per_gpu_hour_mid

    def price_line(at) -> str:
        return next(c.value for c in at.caption if c.value.startswith("Draws:"))

    at = app({"mc_price": "true"})
    at.switch_page("views/sensitivity.py").run()
    assert not at.session_state["price_set"] and "$/GPU-hour: drawn from the list range" in price_line(at)
    at.number_input(key="price").set_value(mid + 1.0).run()
    at.number_input(key="price").set_value(mid).run()
    assert not at.exception, at.exception
    assert at.session_state["price_set"] and at.number_input(key="price").value == pytest.approx(mid)
    assert f"$/GPU-hour: the entered ${mid:.2f}, never drawn over" in price_line(at)
    linked = app({"mc_price": "true", "price": str(mid)})
    linked.switch_page("views/sensitivity.py").run()
    assert f"the entered ${mid:.2f}, never drawn over" in price_line(linked)
    linked.selectbox(key="hardware").set_value("h200").run()  # another GPU type: its list midpoint, not entered
    assert not linked.session_state["price_set"] and "drawn from the list range" in price_line(linked)
