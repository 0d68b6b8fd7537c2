"""End to end on the real CPU engine: one session calibration (conftest.e2e) read by every test here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.analysis.predict import format_table
from calibration.analysis.report import calibrate, format_acceptance, format_fit, format_methods
from calibration.harness import metrics
from calibration.storage.store import Store
from tests.calibration.conftest import (
    E2E,
    E2E_BATCH_SIZES,
    E2E_CONFIGS,
    E2E_MAX_TOKENS,
    E2E_UPLOADED,
    E2E_WORKLOADS,
)

# quiet: the held-out fit times the engine, so this file runs alone after every other test (./dev test)
pytestmark = [pytest.mark.engine, pytest.mark.quiet]
REPO = Path(__file__).resolve().parents[3]
# Held-out throughput MAPE bounds of the CI-sized session calibration (see test_fit_and_predicted_vs_measured):
# with the measured acceptance, and with the acceptance predicted across K (which adds the acceptance estimate's
# own error from the train K's few hundred drafts).
E2E_HOLDOUT_MAPE_BOUND_PCT = 25.0
E2E_HOLDOUT_PREDICTED_TAU_MAPE_BOUND_PCT = 35.0


def test_every_configuration_and_workload_was_measured(e2e: E2E) -> None:
    store = Store(e2e.store_url)
    groups = store.groups([e2e.run_id])
    assert store.get_run(e2e.run_id).status == "succeeded"
    assert {(g.config_label, g.workload) for g in groups} == {
        (c.label, w) for c in E2E_CONFIGS for w in (*E2E_WORKLOADS, *E2E_UPLOADED)}
    for cfg in E2E_CONFIGS:
        mine = [g for g in groups if g.config_label == cfg.label]
        # the protocol: one warm-up group first (recorded, never fitted), then every shipped workload at
        # every batch size on fresh prompts
        assert [g.status for g in mine].count("warmup") == 1 and mine[0].status == "warmup"
        for w in E2E_WORKLOADS:
            done = [g for g in mine if g.workload == w and g.status == "finished"]
            assert sorted(g.num_prompts for g in done) == sorted(E2E_BATCH_SIZES), (cfg.label, w)
            assert len({g.prompt_set_hash for g in done}) == len(done)
            if cfg.method != "none":  # per-request counts for the acceptance interval
                assert sum(len(g.extra["request_drafts"]) for g in done) == sum(E2E_BATCH_SIZES)
        # the uploaded set has 2 prompts: its pool runs out before the largest batch size
        up = [g for g in mine if g.workload in E2E_UPLOADED]
        assert sum(g.num_prompts for g in up) == len(E2E_UPLOADED["uploaded"])
    for g in groups:
        # ignore_eos + max_tokens: every request emits exactly max_tokens tokens
        assert g.output_tokens == g.num_prompts * E2E_MAX_TOKENS, g.config_label
        assert g.wall_time_s > 0
        assert g.engine_version and g.hardware and g.prompt_set_hash
        c = g.counts
        if g.method == "none":
            assert c.num_drafts == 0
            continue
        # n-gram drafts only where the context repeats itself: a one-prompt group may draft nothing, every
        # (configuration, workload) as a whole does
        assert sum(x.counts.num_drafts for x in groups if (x.config_label, x.workload) == (g.config_label, g.workload)
                   ) > 0, (g.config_label, g.workload)
        if c.num_drafts == 0:
            continue
        assert len(c.accepted_per_pos) == g.k
        assert sum(c.accepted_per_pos) == c.num_accepted_tokens
        # a position is only accepted when every earlier one was: counts never grow with position
        assert list(c.accepted_per_pos) == sorted(c.accepted_per_pos, reverse=True)
        assert c.num_draft_tokens <= g.k * c.num_drafts


def test_interleaved_engines_take_turns_and_read_their_own_counters(e2e: E2E) -> None:
    """Every configuration's engine in one child, groups in turn (calibration.measure.engine.run_interleaved): each
    group's counters are its own engine's (vLLM keeps one Prometheus registry per process,
    calibration.measure.engine.MetricsSwitch), and each carries the machine's load while it ran."""
    groups = sorted(Store(e2e.store_url).groups([e2e.run_id]), key=lambda g: g.created_at)
    labels = [c.label for c in E2E_CONFIGS]
    assert [g.config_label for g in groups] == labels * (len(groups) // len(labels))
    for g in groups:
        assert g.extra["interleaved"] is True
        # the metrics delta saw this engine's generated tokens: no other engine's collectors were read
        assert g.extra["generation_tokens"] == g.output_tokens, g.config_label
        assert 0.0 <= g.extra["foreign_cpu_share"] <= 1.0 and g.extra["loadavg_1m"] >= 0.0
        # Prometheus drafts (swapped collectors) agree with the engine's own per-request counts
        assert g.counts.num_drafts == sum(g.extra.get("request_drafts", [0])), g.config_label


def test_uploaded_prompt_text_is_measured_but_never_stored(e2e: E2E) -> None:
    store = Store(e2e.store_url)
    spec = store.get_run(e2e.run_id).spec
    assert "custom_prompts" not in spec
    assert spec["custom_prompt_sets"]["uploaded"]["prompts"] == 2
    # Scan every row of every table through SQL (reading the file bytes in this process would drop
    # SQLite's POSIX locks: sqlite.org/howtocorrupt.html, section 2.2).
    from sqlalchemy import select

    from calibration.storage.store import metadata

    with store.engine.connect() as c:
        dump = "\n".join(str(tuple(row)) for t in metadata.sorted_tables for row in c.execute(select(t)))
    assert "smollm2" in dump  # the scan sees the stored records
    for text in E2E_UPLOADED["uploaded"]:
        assert text not in dump


def test_truncated_layer_draft_really_drafts_and_is_rarely_accepted(e2e: E2E) -> None:
    """The draft model ran (drafts proposed on every group) and a 2-layer draft nearly never agrees with the
    30-layer target (on CPU at K=4, 30 of ~480 drafted tokens). Whether that makes it slower than the baseline
    is a timing: the calibration's fit and report show it, not this test (a per-group throughput comparison
    flipped on a 1 % difference in one CI run)."""
    groups = [g for g in Store(e2e.store_url).groups([e2e.run_id]) if g.status == "finished"]
    drafted = [g for g in groups if g.method == "draft_model"]
    assert drafted
    for g in drafted:
        assert g.counts.num_drafts > 0 and 0 < g.counts.num_draft_tokens <= g.k * g.counts.num_drafts
        assert g.acceptance_length < 1.5, g.config_label


def test_engine_registry_text_parses_to_the_recorded_counts(e2e: E2E) -> None:
    """The engine's own /metrics text (rendered in the engine process) against the stored records: the
    text is cumulative over every group, the recorded warm-up group included."""
    groups = Store(e2e.store_url).groups([e2e.run_id])
    for cfg in E2E_CONFIGS:
        if cfg.method == "none":
            continue
        snap = metrics.snapshot_from_prometheus_text((e2e.metrics_dir / f"metrics-{cfg.label}.txt").read_text())
        total = snap.spec_counts()
        recs = [g for g in groups if g.config_label == cfg.label]
        drafts = sum(g.counts.num_drafts for g in recs)
        accepted = sum(g.counts.num_accepted_tokens for g in recs)
        assert total.num_drafts == drafts
        assert total.num_accepted_tokens == accepted
        assert len(total.accepted_per_pos) == cfg.k


def test_fit_and_predicted_vs_measured(e2e: E2E, capsys: pytest.CaptureFixture[str]) -> None:
    rep = calibrate(Store(e2e.store_url), [e2e.run_id], e2e.microbench_run_id)
    with capsys.disabled():
        print("\n== acceptance per position and workload (CPU engine, SmolLM2-135M)")
        print(format_acceptance(rep.acceptance))
        assert rep.step_fit is not None
        print(format_fit(rep.step_fit, "== microbenchmark step-time fit"))
        print(format_fit(rep.engine_fit, "== engine fixed-time fit (train split)"))
        print(format_table(rep.comparisons))
        print(format_methods(rep))
        print(f"MAPE train {rep.mape_train_pct:.1f} %, held out {rep.mape_holdout_pct:.1f} % "
              f"(held out with predicted tau: {rep.mape_holdout_full_pct:.1f} %; per-slot decode rate: "
              f"{rep.mape_holdout_decode_pct:.1f} %); engine job {e2e.engine_s:.0f} s; bounds "
              f"{E2E_HOLDOUT_MAPE_BOUND_PCT:.0f} % and {E2E_HOLDOUT_PREDICTED_TAU_MAPE_BOUND_PCT:.0f} % "
              "(predicted tau)")
    assert rep.step_fit.success and rep.engine_fit.success
    splits = {c.split for c in rep.comparisons}
    assert splits == {"train", "held_out"}
    finished = [g for g in Store(e2e.store_url).groups([e2e.run_id]) if g.status == "finished"]
    assert len(rep.comparisons) == len(finished)  # warm-up groups are not compared
    # three batch sizes: the per-token term of the step time is fitted, not assumed
    assert {"eta_flops", "eta_bw"} <= set(rep.engine_fit.names)
    assert all(math.isfinite(c.error_pct) for c in rep.comparisons)
    assert math.isfinite(rep.mape_holdout_pct)
    # The fitted per-step overheads are physical: positive, below a second.
    assert 0 < rep.params.t_fixed_s < 1.0
    # The README's ~9 % (held-out MAPE, three runs 8.7-11.4 %) is the full protocol: batch sizes 1,4,8, at least
    # two rounds, 150 s per configuration, ~11 min of engine time. This session calibration is CI-sized (one
    # round, batch sizes 1,2,4, a 2-prompt uploaded set, ~4 min of engine job). Its runs on a 2-core Intel Xeon
    # (AVX-512 BF16 / AMX: bfloat16), 2026-12-02, held-out MAPE with the measured acceptance / with it predicted
    # across K: quiet machine 9.0 / 15.0, 3.0 / 7.3, 6.1 / 9.7, 3.1 / 20.6 %; beside other light jobs 19.1 / 14.1,
    # 8.8 / 9.7 %; beside a browser test suite and two test runs 33.6 / 48.4 % (CI needs a quiet machine). One
    # round of single groups leaves a spread that a 10 % bound would fail about every other run. The bounds are
    # the worst quiet or lightly loaded run with room: 25 % with the measured acceptance (worst 19.1 %), 35 % with
    # it predicted (worst 20.6 %); they were 60 %. Since 2026-12-05 the session calibration is interleaved (every
    # engine in one child, groups in turn, as the CLI runs it on a CPU): load that drifts hits every configuration
    # alike; held-out 9.1 / 9.4 % alone, 8.1 / 9.4 % as ./dev test's second phase (the one-child-per-configuration
    # runs of the day before: 14.6 % and 28.4 % on a quiet machine, 39.9 % beside a benchmark); later that day, as
    # ./dev test's second phase from three fresh clones: 14.5 / 15.3, 9.3 / 8.4, 11.5 / 11.9 %.
    # the cost-only EAGLE-3 head: its own draft-pass term fitted on the K=1 groups (one K: the per-step term held at
    # the n-gram groups' shared overhead), a physical value, and its K=3 groups predicted as held out
    (cost,) = [c for c in rep.method_costs if c.method == "eagle3"]
    assert cost.ks == (1,) and "t_spec_s" in cost.held
    assert 0.0 <= cost.t_fixed_draft_s < 0.5
    assert {c.split for c in rep.comparisons if c.method == "eagle3"} == {"train", "held_out"}
    assert rep.mape_holdout_pct < E2E_HOLDOUT_MAPE_BOUND_PCT
    assert rep.mape_holdout_full_pct < E2E_HOLDOUT_PREDICTED_TAU_MAPE_BOUND_PCT


def test_cli_fit_json_and_calibrated_profile(e2e: E2E, tmp_path: Path) -> None:
    env = {**os.environ, "SPECPLAN_CALIBRATED_DIR": str(tmp_path / "cal"), "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "calibration", "--store", e2e.store_url, "--json", "fit", "--runs", e2e.run_id,
         "--microbench-run", e2e.microbench_run_id, "--save-profile", "cpu-e2e"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert Path(data["profile_path"]).is_file()
    from calibration.storage.profiles_store import list_profiles, load_profile

    os.environ["SPECPLAN_CALIBRATED_DIR"] = str(tmp_path / "cal")
    assert list_profiles() == ["cpu-e2e"]
    prof = load_profile("cpu-e2e")
    assert prof.t_fixed_s == pytest.approx(data["params"]["t_fixed_s"])
    eff = prof.efficiency()
    assert eff.eta_bw == pytest.approx(data["params"]["eta_bw"])
    # saving again under the same name never overwrites
    again = subprocess.run(
        [sys.executable, "-m", "calibration", "--store", e2e.store_url, "fit", "--runs", e2e.run_id,
         "--save-profile", "cpu-e2e"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert again.returncode == 2 and "exists" in again.stderr


def test_nightly_regression_flags_a_drop(e2e: E2E, tmp_path: Path) -> None:
    """History from the real run, then a degraded copy of it (every accepted count, per position and per
    request, cut to a quarter):
    regress exits 0 on the real run, 1 with a clear message on the degraded one."""
    import dataclasses

    from calibration.storage.records import SpecCounts

    url = f"sqlite:///{tmp_path / 'nightly.db'}"
    store = Store(url)
    real = [g for g in Store(e2e.store_url).groups([e2e.run_id]) if g.method == "ngram"]
    for _ in range(3):
        rid = store.create_run("engine", {}, status="succeeded")
        for g in real:
            store.add_group(dataclasses.replace(g, run_id=rid))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def regress(run_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "calibration", "--store", url, "regress", "--from-run", run_id],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=120)

    for r in store.list_runs()[::-1]:
        ok = regress(r.run_id)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    bad_id = store.create_run("engine", {}, status="succeeded")
    for g in real:
        per_pos = tuple(x // 4 for x in g.counts.accepted_per_pos)
        # the per-request counts (the interval's units) degraded alike: no request accepts more than a quarter
        extra = {**g.extra, "request_accepted": [a // 4 for a in g.extra["request_accepted"]]}
        store.add_group(dataclasses.replace(g, run_id=bad_id, extra=extra, counts=SpecCounts(
            g.counts.num_drafts, g.counts.num_draft_tokens, sum(per_pos), per_pos)))
    bad = regress(bad_id)
    assert bad.returncode == 1
    assert "REGRESSION" in bad.stdout and "acceptance regression" in bad.stderr
    assert any(h["regression"] for h in store.history())
