"""Every page driven by widget keys; numbers shown are checked against planner.plan.plan() called directly."""

from __future__ import annotations

import re

import pytest

from planner import plan as P
from profiles.claims import load_claims
from report.board import board_report
from report.board_html import board_html
from tests.app.pages import PAGES, metric, money, planned
from views.parts import report as rep


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
