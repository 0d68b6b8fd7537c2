"""The acceptance library and its tiers: customer measurement > public head > family fit > prior; which heads exist
and the setup cost that follows; temperature; the loader's errors. Fixture rows (tests/planner/data/acceptance) are
synthetic test data, not measurements."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from planner.acceptance import library, tiers
from planner.acceptance import rates as acc
from planner.context import make_context
from planner.plan import plan
from planner.request import PlanError, PlanRequest
from planner.search.scenario import evaluate
from planner.types import Acceptance, Scenario
from profiles.acceptance_library import AcceptanceLibraryError, load_library

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "acceptance"


@pytest.fixture(scope="module")
def lib_catalog(catalog):
    lib = load_library(FIXTURE, model_keys=list(catalog.models), workload_keys=list(catalog.workloads))
    return dataclasses.replace(catalog, acceptance_library=lib)


@pytest.fixture(scope="module")
def empty_catalog(catalog):
    return dataclasses.replace(catalog, acceptance_library=library.EMPTY)


def ev(cat, model="llama-3.1-8b", method="eagle3", workload="chat", k=3, which="mid", **kw):
    return evaluate(Scenario(model=model, hardware="h100-sxm", method=method, k=k, batch=1, workload=workload, **kw),
                    cat, which=which)


def fixture_rows(cat, **match):
    return [r for r in cat.acceptance_library.rows if all(getattr(r, k) == v for k, v in match.items())]


# ------------------------------------------------------------------------------------------------ tiers


def test_public_head_rows_replace_the_prior(lib_catalog, empty_catalog):
    e = ev(lib_catalog)
    assert e.acceptance_tier == "public head"
    assert "FX1" in e.acceptance_source and "FX2" in e.acceptance_source
    assert "FX3" not in e.acceptance_source  # measured at temperature 1: not a greedy row
    # the fit goes through the greedy rows: tau at K=3 near FX1's 2.90 (FX1's per-position counters say the same)
    fx1 = fixture_rows(lib_catalog, id="FX1")[0]
    assert e.acceptance_length == pytest.approx(fx1.acceptance_length, abs=0.08)
    prior = ev(empty_catalog)
    assert prior.acceptance_tier == "prior"
    assert abs(e.acceptance_length - prior.acceptance_length) > 0.3


def test_public_head_fits_the_growth_with_k_across_rows(lib_catalog):
    fx2 = fixture_rows(lib_catalog, id="FX2")[0]
    assert ev(lib_catalog, k=7).acceptance_length == pytest.approx(fx2.acceptance_length, abs=0.1)


def test_family_fit_for_a_model_without_rows(lib_catalog):
    e = ev(lib_catalog, model="qwen3-32b")
    assert e.acceptance_tier == "family fit"
    for m in ("llama-3.1-8b", "llama-3.3-70b", "qwen3-8b", "vicuna-7b"):
        assert m in e.acceptance_source
    taus = [r.acceptance_length for r in lib_catalog.acceptance_library.rows
            if r.method == "eagle3" and r.chain_k == 3 and r.dataset == "MT-Bench" and r.temperature == 0]
    lo, hi = ev(lib_catalog, model="qwen3-32b", which="low"), ev(lib_catalog, model="qwen3-32b", which="high")
    assert lo.acceptance_length < min(taus) and hi.acceptance_length > max(taus)


def test_prior_where_the_library_has_nothing(lib_catalog, catalog):
    e = ev(lib_catalog, method="medusa")
    assert e.acceptance_tier == "prior"
    m = catalog.methods["medusa"]
    want = float(acc.acceptance_length_decay(m.alpha_default.mid, 3, m.position_decay))
    assert e.acceptance_length == pytest.approx(want, rel=1e-9)


def test_tier_order_customer_public_family_prior(lib_catalog, empty_catalog):
    measured = ev(lib_catalog, acceptance=Acceptance("acceptance_length", value=2.2))
    assert (measured.acceptance_tier, measured.acceptance_length) == ("customer", pytest.approx(2.2))
    order = [measured.acceptance_tier, ev(lib_catalog).acceptance_tier,
             ev(lib_catalog, model="qwen3-32b").acceptance_tier, ev(empty_catalog).acceptance_tier]
    assert order == list(tiers.TIERS)


def test_calibrated_acceptance_is_the_customer_tier(lib_catalog):
    req = PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", workload="chat")
    ctx = make_context(req, lib_catalog)
    eff = dataclasses.replace(ctx.eff, calibrated_acceptance=(("eagle3", "chat", 4, 2.5, 2.4, 2.6),),
                              source=dataclasses.replace(ctx.eff.source, source="my calibration"))
    ctx2 = make_context(dataclasses.replace(req, efficiency=eff), lib_catalog)
    est = tiers.estimate(ctx2, "eagle3", "chat", False)
    assert est.tier == "customer" and "my calibration" in est.source
    assert float(acc.acceptance_length(est.center(4))) == pytest.approx(2.5, abs=1e-6)
    assert tiers.estimate(ctx, "eagle3", "chat", False).tier == "public head"


def test_plan_reports_tier_and_source_per_method(lib_catalog):
    p = plan(PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", workload="chat",
                         methods=("eagle3", "medusa")), lib_catalog)
    by = {m.method: m for m in p.methods}
    assert by["eagle3"].acceptance_tier == "public head" and "FX1" in by["eagle3"].acceptance_source
    assert by["medusa"].acceptance_tier == "prior"
    names = [a.what for a in p.assumptions]
    assert "EAGLE-3 acceptance: public head" in names and "sampling temperature" in names


def test_family_band_at_least_the_leave_one_model_out_error(lib_catalog):
    lib = lib_catalog.acceptance_library
    datasets = tiers.workload_datasets(lib_catalog, "chat")
    loo = library.leave_one_model_out(lib, "eagle3", "chat", datasets, 0.0)
    assert loo.n_points > 0 and loo.rmse_tau > 0
    for k, err in loo.rmse_tau_by_k:
        mid = ev(lib_catalog, model="qwen3-32b", k=k).acceptance_length
        lo = ev(lib_catalog, model="qwen3-32b", k=k, which="low").acceptance_length
        hi = ev(lib_catalog, model="qwen3-32b", k=k, which="high").acceptance_length
        assert min(hi - mid, mid - lo) >= err - 1e-6, (k, err, lo, mid, hi)


def test_leave_one_model_out_predicts_each_model_from_the_others(lib_catalog):
    lib = lib_catalog.acceptance_library
    loo = library.leave_one_model_out(lib, "eagle3")
    assert set(loo.models) == {"llama-3.1-8b", "llama-3.3-70b", "qwen3-8b", "vicuna-7b"}
    # refitting without vicuna-7b and predicting its one row gives the same error as the LOO holds for it
    others = [r for r in library.usable_rows(lib, "eagle3", library.ANY_DATASET, (), 0.0) if r.model_key != "vicuna-7b"]
    a, d, _ = library.fit_profile(library.rescaled_points(others, 0.0, library.temperature_slope(lib, "eagle3")[0]))
    fx8 = fixture_rows(lib_catalog, id="FX8")[0]
    err = float(library.tau_profile(a, d, [4])[0]) - fx8.acceptance_length
    assert abs(err) <= loo.rmse_tau * np.sqrt(loo.n_points) + 1e-9


def test_fit_profile_round_trip():
    a, d = 0.82, 0.93
    ks = np.arange(1, 8)
    pts = list(zip(ks.tolist(), library.tau_profile(a, d, ks).tolist(), strict=True))
    fa, fd, rmse = library.fit_profile(pts)
    assert (fa, fd) == (pytest.approx(a, abs=1e-4), pytest.approx(d, abs=1e-4)) and rmse < 1e-6
    with pytest.raises(ValueError, match="no \\(K, tau\\) points"):
        library.fit_profile([])


# ------------------------------------------------------------------------------------------------ heads


def test_model_without_a_head_pays_training(lib_catalog, catalog):
    req = PlanRequest(model="qwen3-32b", hardware="h100-sxm", workload="chat")
    ctx = make_context(req, lib_catalog)
    st = tiers.head_status(ctx, "eagle3")
    assert not st.heads and st.sentence.startswith("no public EAGLE-3 head for Qwen3-32B")
    m = catalog.methods["eagle3"]
    assert st.setup_gpu_hours == m.setup_gpu_hours and f"{m.setup_gpu_hours:g} GPU-hours" in st.sentence
    assert tiers.one_time_usd(ctx, m) == ctx.costs.one_time_usd(m)
    with_head = make_context(dataclasses.replace(req, model="llama-3.1-8b"), lib_catalog)
    st2 = tiers.head_status(with_head, "eagle3")
    assert st2.sentence.startswith("a public EAGLE-3 head exists (fixture/EAGLE3-LLaMA3.1-Instruct-8B")
    eng = m.setup_engineering_weeks * with_head.costs.engineering_usd_per_week
    assert tiers.one_time_usd(with_head, m) == (eng, eng)
    assert tiers.one_time_usd(with_head, m)[1] < tiers.one_time_usd(ctx, m)[0]


def test_native_mtp_needs_no_head_and_stays_unavailable_without_modules(lib_catalog):
    ctx = make_context(PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), lib_catalog)
    assert tiers.head_status(ctx, "mtp").sentence == ""
    p = plan(PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=("mtp",)), lib_catalog)
    assert not p.methods[0].available


def test_plan_setup_cost_follows_the_head(lib_catalog):
    kw = dict(hardware="h100-sxm", workload="chat", methods=("eagle3",))
    have = plan(PlanRequest(model="llama-3.1-8b", **kw), lib_catalog).methods[0]
    lack = plan(PlanRequest(model="qwen3-32b", **kw), lib_catalog).methods[0]
    assert "a public EAGLE-3 head exists" in have.head and "no public EAGLE-3 head" in lack.head
    assert have.one_time_usd_high < lack.one_time_usd_low


# ------------------------------------------------------------------------------------------------ temperature


@pytest.mark.parametrize("bad", [-0.1, 2.5, float("nan"), "hot", True])
def test_temperature_validation(catalog, bad):
    with pytest.raises(PlanError, match="temperature=.*from 0 \\(greedy\\) to 2"):
        plan(PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", temperature=bad), catalog)
    with pytest.raises(PlanError, match="temperature"):
        ev(catalog, temperature=bad)


def test_temperature_uses_rows_measured_at_it(lib_catalog):
    hot = ev(lib_catalog, temperature=1.0)
    assert hot.acceptance_tier == "public head" and "FX3" in hot.acceptance_source
    assert hot.acceptance_length == pytest.approx(fixture_rows(lib_catalog, id="FX3")[0].acceptance_length, abs=0.02)
    assert hot.acceptance_length < ev(lib_catalog).acceptance_length


def test_temperature_lowers_a_prior_by_the_stated_slope(empty_catalog, catalog):
    cold, hot = ev(empty_catalog, method="medusa"), ev(empty_catalog, method="medusa", temperature=1.0)
    m = catalog.methods["medusa"]
    factor = library.temperature_factor(library.TEMPERATURE_SLOPE, 1.0)
    want = float(acc.acceptance_length_decay(m.alpha_default.mid * factor, 3, m.position_decay))
    assert hot.acceptance_length == pytest.approx(want, rel=1e-9) and hot.acceptance_length < cold.acceptance_length
    assert "temperature 1" in hot.acceptance_source


def test_temperature_slope_is_fitted_from_paired_rows(lib_catalog):
    slope, src = library.temperature_slope(lib_catalog.acceptance_library, "eagle3")
    a0 = float(acc.alpha_from_acceptance_length(2.90, 3))
    a1 = float(acc.alpha_from_acceptance_length(2.55, 3))
    assert slope == pytest.approx(1 - a1 / a0) and "FX1" in src and "FX3" in src
    assert library.temperature_slope(lib_catalog.acceptance_library, "medusa") == (library.TEMPERATURE_SLOPE,
                                                                                   "assumption")


def test_cli_temperature_flag_and_tier_in_json(monkeypatch):
    from cli import main as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3", "--k",
                       "3", "--workload", "chat", "--temperature", "0.7"])
    assert rc == 0
    d = json.loads(out.getvalue())
    assert d["temperature"] == 0.7 and d["acceptance_tier"] in tiers.TIERS and d["acceptance_source"]
    assert d["batch"] >= 1 and "no --batch" in d["batch_source"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3",
                       "--batch", "1", "--temperature", "3"])
    assert rc == 2 and "temperature=3.0 is not allowed" in err.getvalue()


# ------------------------------------------------------------------------------------------------ loader


def test_absent_files_give_an_empty_library(tmp_path):
    lib = load_library(tmp_path)
    assert lib.rows == () and lib.heads == ()


def _bad(tmp_path, column, value, row="FX2"):
    shutil.copy(FIXTURE / "heads.csv", tmp_path / "heads.csv")
    import csv

    with open(FIXTURE / "acceptance.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        if r["id"] == row:
            r[column] = value
    with open(tmp_path / "acceptance.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return tmp_path


@pytest.mark.parametrize(("column", "value", "allowed"), [
    ("method", "eagle9", "one of eagle, eagle3"),
    ("acceptance_length", "8.5", "from 1 to K+1 = 8"),
    ("k", "2.5", "an integer K"),
    ("tree", "topk=2", "'chain' or 'steps=S,topk=T,draft_tokens=N'"),
    ("temperature", "warm", "from 0 to 2, or 'not stated'"),
    ("draft_acceptance_rate", "48", "not percent"),
    ("model_key", "llama-9b", "a model name in profiles/data/models.yaml"),
    ("date", "Dec 2026", "an ISO date"),
    ("per_position", "0.5;0.7", "non-increasing"),
    ("id", "FX1", "a unique row id"),
])
def test_loader_errors_name_file_row_column_value_allowed(catalog, tmp_path, column, value, allowed):
    d = _bad(tmp_path, column, value, row="FX1" if column == "per_position" else "FX2")  # FX1: unconditional
    with pytest.raises(AcceptanceLibraryError) as exc:
        load_library(d, model_keys=list(catalog.models), workload_keys=list(catalog.workloads))
    msg = str(exc.value)
    assert msg.startswith("acceptance.csv: row FX") and f"column '{column}'" in msg and repr(value) in msg
    assert allowed in msg


def test_loader_names_a_missing_column(tmp_path):
    (tmp_path / "acceptance.csv").write_text("id,source\nA,x\n", encoding="utf-8")
    with pytest.raises(AcceptanceLibraryError, match="acceptance.csv: row \\(header\\): column 'title'"):
        load_library(tmp_path)


def test_shipped_library_loads_with_the_catalogue(catalog):
    lib = tiers.library_of(catalog)
    assert isinstance(lib, library.AcceptanceLibrary)
    assert all(r.model_key == "" or r.model_key in catalog.models for r in lib.rows)


def test_claims_table_shows_seed_and_library_at_the_same_k(lib_catalog, catalog):
    from planner.checks.claims import seed_vs_library

    rows = {(r["method"], r["K"]): r for r in seed_vs_library(lib_catalog)}
    m = catalog.methods["eagle3"]
    r = rows[(m.label, 7)]  # FX2 alone measured K=7
    lo = float(acc.acceptance_length_decay(m.alpha_default.low, 7, m.position_decay))
    assert r["seed as tau at K"].startswith(f"{lo:.2f}-") and r["rows"] == "FX2"
    assert r["library as i.i.d. alpha"].startswith(f"{float(acc.alpha_from_acceptance_length(3.40, 7)):.2f}")
    assert r["verdict"] == "seed range below the measurements"
    assert rows[(catalog.methods["medusa"].label, catalog.methods["medusa"].default_k)]["verdict"] == "no measurement"


def test_rows_of_models_outside_the_catalogue_count_in_the_family_fit(lib_catalog):
    lib = lib_catalog.acceptance_library
    fx4 = fixture_rows(lib_catalog, id="FX4")[0]
    extra = dataclasses.replace(fx4, id="FX-EXT", model="Some-Model-Not-In-The-Catalogue", model_key="",
                                acceptance_length=2.2)
    lib2 = dataclasses.replace(lib, rows=(*lib.rows, extra))
    ds = tiers.workload_datasets(lib_catalog, "chat")
    fam = library.family_fit(lib2, "eagle3", "chat", ds, 0.0, "qwen3-32b")
    assert "Some-Model-Not-In-The-Catalogue" in fam.models and "FX-EXT" in fam.row_ids
    assert fam.a < library.family_fit(lib, "eagle3", "chat", ds, 0.0, "qwen3-32b").a  # its lower tau pulls the fit down
