"""What the Calibrate page shows a reader while a run measures and after it: the progress of a run from the groups
it records (recorded progress, no engine), the job's log apart from the engine's, errors that cannot be computed
said in words (never NaN), the fitted parameters as a table, and no store URL in any error."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from calibration.analysis.plain_report import (
    PARAMETERS,
    QUOTE_LINE,
    STORE_UNREACHABLE,
    error_text,
    holdout_reason,
    number_text,
    parameter_rows,
)
from calibration.measure.spec import EngineConfig
from calibration.run.progress import config_name, planned_measurements, run_progress, split_log, started_config
from calibration.storage.store import Store
from tests.calibration.conftest import make_record

REPO = Path(__file__).resolve().parents[3]
CONFIGS = (EngineConfig("none"), EngineConfig("ngram", 2), EngineConfig("ngram", 4),
           EngineConfig("eagle3", 3, "cost-only"), EngineConfig("draft_model", 2, "smollm2-135m-2l"))
# 2 workloads x 3 batch sizes x 2 rounds = 12 measurements planned per configuration
SPEC = {"model": "smollm2-135m", "configs": [dataclasses.asdict(c) for c in CONFIGS], "workloads": ["code", "chat"],
        "batch_sizes": [1, 4, 8], "min_rounds": 2, "budget_s": 150.0, "interleave": False}


def _group(config: EngineConfig, status: str = "finished", wall_time_s: float = 1.0):
    g = make_record(method=config.method, k=config.k or 3, draft=config.draft, config_label=config.label,
                    wall_time_s=wall_time_s)
    return dataclasses.replace(g, status=status)


def _recorded(upto: int, measured: int) -> list:
    """The groups of a run that finished configurations 0..upto-1 (a warm-up and 12 measurements each) and has
    `measured` measurements of configuration `upto` after its warm-up."""
    out = []
    for c in CONFIGS[:upto]:
        out += [_group(c, "warmup")] + [_group(c) for _ in range(12)]
    if measured >= 0:
        out += [_group(CONFIGS[upto], "warmup")] + [_group(CONFIGS[upto]) for _ in range(measured)]
    return out


def test_the_bar_moves_with_each_configuration_and_each_measurement_in_it() -> None:
    assert planned_measurements(SPEC) == 12
    fractions = []
    for upto in range(len(CONFIGS)):
        for measured in range(13):
            fractions.append(run_progress(SPEC, _recorded(upto, measured), started=upto).fraction)
    assert all(b > a for a, b in zip(fractions, fractions[1:], strict=False)), "every measurement moves the bar"
    assert fractions[0] == 0.0 and fractions[-1] < 1.0
    p = run_progress(SPEC, _recorded(3, 4), started=3)
    assert p.text == "configuration 4 of 5: EAGLE-3 K=3, measurement 4 of 12"
    assert p.fraction == pytest.approx((3 + 4 / 12) / 5)
    assert run_progress(SPEC, _recorded(5, -1), finished=True).fraction == 1.0


def test_a_configuration_announced_before_its_first_group_says_its_engine_is_starting() -> None:
    p = run_progress(SPEC, _recorded(1, -1), started=started_config("configuration 2/5: ngram-k2", 0.0, 5))
    assert p.text.startswith("configuration 2 of 5: n-gram K=2, starting its engine")
    assert p.fraction == pytest.approx(1 / 5)
    assert started_config("", 0.4, 5) == 2  # a local runner's "PROGRESS 2/5" line
    assert started_config("PROGRESS 3/5 eagle3-cost-only-k3", 0.0, 5) == 3  # relayed by a Ray job


def test_measurements_beyond_the_plan_say_why_and_the_bar_stays_below_the_next_configuration() -> None:
    p = run_progress(SPEC, _recorded(1, 20), started=1)
    assert "measurement 20 (12 planned; more until the acceptance interval is narrow enough" in p.text
    assert 1 / 5 < p.fraction < 2 / 5
    slow = [_group(CONFIGS[0], "finished", wall_time_s=75.0)]  # half the budget on one measurement
    assert run_progress(SPEC, slow).fraction == pytest.approx(0.5 / 5)


def test_interleaved_configurations_progress_together() -> None:
    spec = {**SPEC, "interleave": True}
    groups = [_group(c) for c in CONFIGS for _ in range(3)]
    p = run_progress(spec, groups)
    assert p.fraction == pytest.approx(3 / 12)
    assert p.text == "5 configurations measured in turn, measurement 15 of 60; now draft model smollm2-135m-2l K=2"


def test_names_a_reader_sees() -> None:
    assert config_name({"method": "none"}) == "baseline"
    assert config_name(dataclasses.asdict(EngineConfig("eagle3", 3, "cost-only"))) == "EAGLE-3 K=3"


def test_engine_noise_goes_apart_from_the_jobs_own_lines() -> None:
    lines = ["PROGRESS 1/3 ngram-k2",
             "[ngram-k2] engine started in 41.2 s (bfloat16)",
             "WARNING 12-04 19:00:01 [cpu_worker.py:123] NUMA node 0 not found, auto thread binding disabled",
             "[W1204 19:00:02.123 numa.cpp:88] Warning: NUMA is not available",
             "(EngineCore_DP0 pid=123) INFO 12-04 19:00:03 [core.py:80] Initializing a V1 LLM engine",
             "[ngram-k2] code B=4: 128 tokens in 2.00 s (64.0 tok/s), tau=2.100",
             "configuration ngram-k4 failed: the engine process was killed"]
    own, engine = split_log(lines, ["baseline", "ngram-k2", "ngram-k4"])
    assert own == [lines[1], lines[5], lines[6]]
    assert engine == [lines[2], lines[3], lines[4]]


def _comparison(label: str, method: str, split: str, error: float = 10.0):
    from calibration.analysis.predict import Comparison

    return Comparison(config_label=label, workload="code", split=split, measured_output_tokens_per_s=100.0,
                      predicted_output_tokens_per_s=100.0 + error, predicted_full_output_tokens_per_s=100.0,
                      measured_speedup=1.0, predicted_speedup=1.0, measured_acceptance_length=2.0,
                      predicted_acceptance_length=2.0, error_pct=error, error_full_pct=error, method=method)


def test_an_error_that_cannot_be_computed_says_why_not_nan() -> None:
    one_k = [_comparison("baseline", "none", "train"), _comparison("ngram-k2", "ngram", "train")]
    assert holdout_reason(one_k) == ("held-out error needs measurements at two or more K of one method; this run "
                                     "measured one (ngram-k2)")
    assert "only the baseline" in holdout_reason(one_k[:1])
    assert holdout_reason([*one_k, _comparison("ngram-k4", "ngram", "held_out")]) == ""
    assert error_text(math.nan, "why") == "not computed: why" and error_text(12.345, "why") == "12.3 %"
    assert number_text(math.nan) == "-" and number_text(math.inf, missing="n/a") == "n/a"


def test_fitted_parameters_are_rows_with_units_meanings_and_how_each_was_set() -> None:
    from calibration.analysis.fit import FitResult
    from calibration.analysis.predict import EngineParams

    params = EngineParams(eta_bw=0.42, eta_flops=0.3, t_fixed_s=0.0123, t_fixed_draft_s=0.002, t_spec_s=0.0005)
    fit = FitResult(names=("t_fixed_s", "t_fixed_draft_s", "t_spec_s"), params=(0.0123, 0.002, 0.0005),
                    stderr=(0.001, math.nan, math.nan), residuals=(), success=True, message="ok",
                    held={"t_spec_s": "prior: one K; the default"})
    rows = {r["parameter"]: r for r in parameter_rows(params, [None, fit])}
    assert list(rows) == list(PARAMETERS)
    assert rows["t_fixed_s"]["value"] == "12.3" and rows["t_fixed_s"]["unit"] == "ms per step"
    assert rows["t_fixed_s"]["how it was set"] == f"fitted, ± {1.96 * 0.001 * 1e3:.3g} (95 %)"
    assert rows["t_spec_s"]["how it was set"] == "held: one K"
    assert rows["eta_bw"]["how it was set"] == "default (not fitted by this run)"
    assert rows["eta_prefill_flops"]["value"] == "0.3"  # NaN means "the decode step's": said, not shown
    assert all(r["meaning"] for r in rows.values())
    assert not any("nan" in str(v).lower() for r in rows.values() for v in r.values())


# ---- the page ---------------------------------------------------------------------------------------------------
@pytest.fixture
def app_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    import streamlit as st

    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    monkeypatch.delenv("SPECPLAN_CALIBRATE_TOKEN", raising=False)
    st.cache_resource.clear()
    return Store(url)


def _texts(at) -> list[str]:
    out = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "code", "subheader")
           for e in getattr(at, kind)]
    out += [m.value for m in at.metric]
    for d in at.dataframe:
        out += [str(v) for v in d.value.astype(str).to_numpy().ravel()]
    return out


def test_a_one_k_run_shows_no_nan_says_why_and_ties_the_run_to_the_quote(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    rid = app_store.create_run("engine", {}, status="running")
    for w in ("code", "chat"):
        for b, wall in ((1, 1.0), (4, 1.8), (8, 3.0)):
            app_store.add_group(dataclasses.replace(
                make_record(method="none", workload=w, run_id=rid, wall_time_s=wall), num_prompts=b))
            app_store.add_group(dataclasses.replace(
                make_record(method="ngram", k=2, per_pos=(6, 4), workload=w, run_id=rid, wall_time_s=wall * 0.8,
                            config_label="ngram-k2"), num_prompts=b))
    app_store.set_status(rid, "succeeded")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    texts = _texts(at)
    assert not [t for t in texts if "nan" in t.lower().replace("nanosec", "")], "no NaN anywhere on the page"
    assert any("this run measured one (ngram-k2)" in c.value for c in at.caption)
    assert any(m.value == "not computed" for m in at.metric)
    assert any(i.value == QUOTE_LINE for i in at.info)
    params = next(d.value for d in at.dataframe if "meaning" in d.value.columns)
    assert set(params["parameter"]) >= {"t_fixed_s", "eta_bw"} and "ms per step" in set(params["unit"])


def test_a_store_error_names_no_url_and_the_detail_goes_to_the_server_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"not a database at all\n" * 100)
    monkeypatch.setenv("SPECPLAN_STORE_URL", f"sqlite:///{bad}")
    monkeypatch.delenv("SPECPLAN_CALIBRATE_TOKEN", raising=False)
    st.cache_resource.clear()
    with caplog.at_level("WARNING", logger="views.calibrate"):
        at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    [err] = [e.value for e in at.error]
    assert err.startswith(STORE_UNREACHABLE) and str(bad) not in err and "sqlite" not in err
    assert any(str(bad) in r.getMessage() for r in caplog.records)


def test_a_run_message_quoting_the_store_url_reaches_the_page_without_it(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    rid = app_store.create_run("engine", {}, status="running")
    app_store.add_group(make_record(method="none", run_id=rid))
    app_store.set_status(rid, "failed", f"StoreError: calibration store {app_store.url}: cannot write")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    shown = " ".join(_texts(at))
    assert "cannot write" in shown and app_store.url not in shown and "app.db" not in shown


def test_the_job_panel_shows_recorded_progress_in_words(app_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run another tab of this user started (its handle lives elsewhere): the bar and its sentence come from the
    store, from the groups recorded so far and the configuration the job announced."""
    from streamlit.testing.v1 import AppTest

    from calibration.run.admission import JobOwner

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    owner = JobOwner.of(session_id="a-tab-opened-earlier", client="unknown")  # AppTest's client is "unknown"
    rid = app_store.create_run("engine", {**SPEC, "owner": owner.to_dict()}, status="running")
    app_store.heartbeat(rid, "configuration 4/5: eagle3-cost-only-k3")
    for g in _recorded(3, 4):
        app_store.add_group(dataclasses.replace(g, run_id=rid, prompt_set_hash=str(id(g))))
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert not at.exception
    [bar] = [e for e in at.get("progress")]
    share = (3 + 4 / 12) / 5
    assert bar.proto.text == f"{share * 100:.0f} %: configuration 4 of 5: EAGLE-3 K=3, measurement 4 of 12"
    assert bar.proto.value == int(share * 100)  # streamlit keeps whole percent


def test_a_method_term_without_an_interval_says_so_instead_of_nan() -> None:
    from calibration.analysis.method_costs import MethodCost

    c = MethodCost(method="eagle3", t_fixed_draft_s=0.004, t_fixed_draft_s_low=math.nan,
                   t_fixed_draft_s_high=math.nan, t_spec_s=0.001, t_spec_s_low=0.0005, t_spec_s_high=0.0015, held={},
                   ks=(3,), num_groups=2, extra_step_ms_b1=5.0, target_step_ms_b1=20.0, rms_rel_residual=0.1)
    assert c.term_text("t_fixed_draft_s") == "4.000 ms (no interval: too few groups)"
    assert c.term_text("t_spec_s") == "1.000 ms [0.500, 1.500]"


def test_a_relayed_engine_warning_as_the_runs_message_goes_to_the_expander(app_store: Store,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray job relays "[..." lines as its run's message: a NUMA warning is engine output, not the job's news."""
    from streamlit.testing.v1 import AppTest

    from calibration.run.admission import JobOwner

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    owner = JobOwner.of(session_id="a-tab-opened-earlier", client="unknown")
    rid = app_store.create_run("engine", {**SPEC, "owner": owner.to_dict()}, status="running")
    warning = "[W1204 19:00:02.123 numa.cpp:88] Warning: NUMA is not available"
    app_store.heartbeat(rid, warning)
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert not at.exception
    assert at.code[0].value == "(starting)"
    [engine] = [e for e in at.expander if e.label.startswith("Engine output")]
    assert engine.code[0].value == warning
