"""Every page driven by widget keys; numbers shown are checked against the planner called directly."""

from __future__ import annotations

import re

import pytest

from planner import scenario as sc
from planner.types import Scenario
from views import _report as rep

PAGES = ["views/plan.py", "views/methods.py", "views/levers.py", "views/sensitivity.py", "views/traffic.py",
         "views/claims.py", "views/report.py"]


def money(text: str) -> float:
    return float(re.search(r"-?\$?(-?[\d,]+\.?\d*)", text.replace("$-", "-$")).group(1).replace(",", ""))


def metric(at, prefix: str):
    return next(m for m in at.metric if m.label.startswith(prefix))


def best_label_method(at, cat) -> str:
    label = metric(at, "Best:").label
    return next(n for n, m in cat.methods.items() if f"Best: {m.label} (K=" in label)


def planner_best(cat, method, **kw):
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", method=method, tp=4, tpot_slo_ms=50.0,
                usd_per_gpu_hour=cat.hardware["h100-sxm"].usd_per_gpu_hour_mid)
    base.update(kw)
    return sc.best(Scenario(**base), cat)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_defaults(app, page):
    at = app()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.title[0].value


def test_plan_headline_matches_the_planner(app, cat):
    at = app()
    method = best_label_method(at, cat)
    spec, _ = planner_best(cat, method)
    _, base = planner_best(cat, "ngram")
    assert money(metric(at, "Best:").value) == pytest.approx(spec.usd_per_mtok, abs=6e-4)
    assert money(metric(at, "CPM today").value) == pytest.approx(base.baseline_usd_per_mtok, abs=6e-4)
    # the chosen method is the cheapest available one (each at its own best K and batch)
    others = [planner_best(cat, n)[0].usd_per_mtok for n in cat.methods if cat.method_available(n, "llama-3.3-70b")[0]]
    assert spec.usd_per_mtok == pytest.approx(min(others))
    saving = (base.baseline_usd_per_mtok - spec.usd_per_mtok) * 2e10 / 1e6
    assert money(metric(at, "Monthly saving").value) == pytest.approx(saving, rel=2e-3, abs=1)
    rec = next(m.value for m in at.markdown if m.value.startswith("**Recommendation:**"))
    assert cat.methods[method].label in rec and f"K={spec.k}" in rec
    assert "range" in " ".join(c.value for c in at.caption)


def test_plan_follows_inputs_and_price_default_follows_hardware(app, cat):
    at = app()
    at.selectbox(key="hardware").set_value("h200").run()
    assert at.number_input(key="price").value == pytest.approx(cat.hardware["h200"].usd_per_gpu_hour_mid)
    at.number_input(key="slo").set_value(25.0).run()
    at.selectbox(key="workload").set_value("code").run()
    assert not at.exception
    method = best_label_method(at, cat)
    spec, base = planner_best(cat, method, hardware="h200", tpot_slo_ms=25.0, workload="code",
                              usd_per_gpu_hour=cat.hardware["h200"].usd_per_gpu_hour_mid)
    assert money(metric(at, "Best:").value) == pytest.approx(spec.usd_per_mtok, abs=6e-4)


def test_current_method_changes_the_saving(app, cat):
    at = app()
    at.selectbox(key="current").set_value("eagle3").run()
    method = best_label_method(at, cat)
    cur, _ = planner_best(cat, "eagle3")
    assert money(metric(at, "CPM today").value) == pytest.approx(cur.usd_per_mtok, abs=6e-4)
    best, _ = planner_best(cat, method)
    saving = (cur.usd_per_mtok - best.usd_per_mtok) * 2e10 / 1e6
    assert money(metric(at, "Monthly saving").value) == pytest.approx(saving, rel=5e-3, abs=1)


def test_url_round_trip(app, cat):
    at = app({"hardware": "h200", "price": "3.1", "slo": "30", "workload": "code", "tuned": "true"})
    assert at.selectbox(key="hardware").value == "h200"
    assert at.number_input(key="price").value == pytest.approx(3.1)
    assert at.checkbox(key="tuned").value is True
    method = best_label_method(at, cat)
    spec, _ = planner_best(cat, method, hardware="h200", usd_per_gpu_hour=3.1, tpot_slo_ms=30.0, workload="code",
                           tuned=True)
    assert money(metric(at, "Best:").value) == pytest.approx(spec.usd_per_mtok, abs=6e-4)
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
    spec, _ = planner_best(cat, "eagle3")
    assert row["CPM $/Mtok"] == pytest.approx(spec.usd_per_mtok, abs=1e-4)
    assert row["K"] == spec.k and row["best batch"] == spec.batch
    mtp = df[df["method"] == "DeepSeek-style MTP"].iloc[0]
    assert mtp["available"].startswith("no: ") and "MTP" in mtp["available"]
    assert any("unavailable" in i.value for i in at.info)
    at.radio(key="methods_alpha").set_value("tuned").run()
    df2 = at.dataframe[0].value
    spec_t, _ = planner_best(cat, "eagle3", tuned=True)
    assert df2[df2["method"] == "EAGLE-3"].iloc[0]["CPM $/Mtok"] == pytest.approx(spec_t.usd_per_mtok, abs=1e-4)


def test_levers_page_orders(app, cat):
    at = app()
    at.switch_page("views/levers.py").run()
    df = at.dataframe[0].value
    assert list(df["#"]) == sorted(df["#"]) and len(df) == len(cat.levers)
    assert any("VSD pays" in i.value for i in at.info)
    at.radio(key="levers_order").set_value("return").run()
    assert not at.exception
    df2 = at.dataframe[0].value
    assert sorted(df2["#"]) == sorted(df["#"])
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    spec, _ = sc.best(Scenario(model="llama-3.3-70b", hardware="h100-sxm", method="eagle3", tp=4,
                               usd_per_gpu_hour=cat.hardware["h100-sxm"].usd_per_gpu_hour_mid), cat, ks=[4])
    assert start == pytest.approx(spec.usd_per_mtok, abs=6e-4)


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
    method = best_label_method(at, cat)
    spec, _ = planner_best(cat, method, workload="code", prompt_tokens=2000, output_tokens=300)
    _, base = planner_best(cat, "ngram", workload="code", prompt_tokens=2000, output_tokens=300)
    assert money(metric(at, "Best:").value) == pytest.approx(spec.usd_per_mtok, abs=6e-4)
    saving = (base.baseline_usd_per_mtok - spec.usd_per_mtok) * 5e9 / 1e6
    assert money(metric(at, "Monthly saving").value) == pytest.approx(saving, rel=5e-3, abs=1)


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
    assert len(df) >= 12
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
    keys = {b.key for b in at.get("download_button")} if at.get("download_button") else set()
    assert {"report_html", "report_csv"} <= keys or len(at.get("download_button")) >= 2


def test_report_builders(cat):
    from views import _model as mdl
    inp = mdl.PlanInputs()
    mix = mdl.default_mix(inp, cat)
    summ = mdl.plan_summary(inp, mix, cat)
    rows = rep.scenario_rows(inp, summ, mix, [])
    rows.append({"section": "=cmd|' /C calc'!A0", "item": "+1", "value": "-2", "unit": "@x", "basis": "\tx"})
    text = rep.to_csv(rows)
    last = text.strip().splitlines()[-1]
    assert last.startswith("'=cmd") and ",'+1,'-2,'@x,'\tx" in last
    assert "best method CPM (mid alpha)" in text
    html = rep.html_report(inp=inp, catalog=cat, summary=summ, mix=mix, figures=[], command=None, levers=[],
                           today="2026-11-29")
    assert summ["recommendation"].split(":")[0] in html
    assert cat.hardware["h100-sxm"].price.date in html and "Assumptions" in html


def test_vllm_command_for_a_draft_model(cat):
    from views import _model as mdl
    cmd = mdl.vllm_command(mdl.PlanInputs(), "draft_model", 5, cat)
    assert '"model": "meta-llama/Llama-3.1-8B-Instruct"' in cmd["command"]
    assert '"num_speculative_tokens": 5' in cmd["command"]
    head = mdl.vllm_command(mdl.PlanInputs(), "eagle3", 3, cat)
    assert "<FILL IN" in head["command"] and any("fill in" in n for n in head["notes"])


def test_a_calibrated_profile_is_selectable_hardware(app, cat, tmp_path, monkeypatch):
    # A profile saved by the calibration package appears beside (not over) the shipped hardware, and the
    # Plan page then uses its fitted efficiencies.
    from calibration.profiles_store import CalibratedProfile, save_profile

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
    assert not at.exception, at.exception
    hw = prof.hardware_spec()
    cat2 = cat.with_hardware({"calibrated-ci-cpu": hw})
    _, base = planner_best(cat2, "ngram", model="smollm2-135m", hardware="calibrated-ci-cpu", tp=1,
                           usd_per_gpu_hour=hw.usd_per_gpu_hour_mid)
    assert money(metric(at, "CPM today").value) == pytest.approx(base.baseline_usd_per_mtok, rel=2e-3)
