"""Machine load per group (calibration.harness.machine_load), the protocol's re-measuring of contaminated groups
(calibration.harness.protocol.run_rounds) and the fit report's count (calibration.analysis.report)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from calibration.analysis.report import calibrate, load_summary
from calibration.harness import machine_load as ml
from calibration.harness.protocol import Lane, Protocol, run_rounds
from calibration.storage.store import Store
from tests.calibration.conftest import make_record

# /proc/stat of a 2-CPU machine: user nice system idle iowait irq softirq steal guest guest_nice
STAT_TEXT = """cpu  1000 50 300 5000 70 10 20 5 40 0
cpu0 500 25 150 2500 35 5 10 3 20 0
cpu1 500 25 150 2500 35 5 10 2 20 0
intr 12345 0 0
ctxt 999
"""


def _pid_stat(pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    # pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
    return (f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 100 0 0 0 {utime} {stime} {cutime} {cstime} "
            "20 0 1 0 12345 1000000 200 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n")


def test_parse_system_stat_counts_busy_fields_and_cpus() -> None:
    t = ml.parse_system_stat(STAT_TEXT)
    # busy = user + nice + system + irq + softirq + steal = 1000 + 50 + 300 + 10 + 20 + 5
    assert t.busy_ticks == 1385
    # total leaves guest out (already in user): 1385 + idle 5000 + iowait 70
    assert t.total_ticks == 6455
    assert t.num_cpus == 2


def test_parse_system_stat_refuses_text_without_cpu_line() -> None:
    with pytest.raises(ValueError, match="no aggregate 'cpu ' line"):
        ml.parse_system_stat("intr 1 2 3\n")


def test_parse_proc_stat_reads_fields_after_a_comm_with_spaces_and_parens() -> None:
    p = ml.parse_proc_stat(_pid_stat(4242, "VLLM::Worker (x) y", 17, utime=300, stime=40, cutime=7, cstime=3))
    assert (p.pid, p.ppid, p.cpu_ticks) == (4242, 17, 350)


def test_parse_proc_stat_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="expected 'PID"):
        ml.parse_proc_stat("not a stat line")


def test_tree_ticks_sums_the_process_and_all_descendants_only() -> None:
    procs = [ml.parse_proc_stat(x) for x in (
        _pid_stat(1, "init", 0, 5, 5),
        _pid_stat(10, "python", 1, 100, 20),       # root
        _pid_stat(11, "EngineCore", 10, 30, 5),    # child
        _pid_stat(12, "Worker", 11, 400, 50),      # grandchild
        _pid_stat(20, "stress", 1, 900, 0),        # foreign
    )]
    assert ml.tree_ticks(procs, 10) == (100 + 20 + 30 + 5 + 400 + 50, 3)
    assert ml.tree_ticks(procs, 99) == (0, 0)


def test_group_load_share_arithmetic_by_hand() -> None:
    # 10 s on 2 CPUs at 100 ticks/s: capacity 2000 ticks. System busy grew 1500, own tree 900:
    # foreign (1500 - 900) / 2000 = 0.30, own 900 / 2000 = 0.45
    before = ml.LoadSample(100.0, system_busy_ticks=10_000, own_ticks=2_000, num_cpus=2, own_processes=3)
    after = ml.LoadSample(110.0, system_busy_ticks=11_500, own_ticks=2_900, num_cpus=2, own_processes=3,
                          loadavg_1m=2.5)
    g = ml.group_load(before, after, clock_ticks_per_s=100.0)
    assert g.foreign_cpu_share == pytest.approx(0.30)
    assert g.own_cpu_share == pytest.approx(0.45)
    assert (g.loadavg_1m, g.wall_s, g.reason) == (2.5, 10.0, "")
    assert g.to_extra() == {"foreign_cpu_share": pytest.approx(0.30), "own_cpu_share": pytest.approx(0.45),
                            "loadavg_1m": 2.5}


def test_group_load_clamps_tick_rounding_below_zero() -> None:
    before = ml.LoadSample(0.0, system_busy_ticks=0, own_ticks=0, num_cpus=2, own_processes=1)
    after = ml.LoadSample(1.0, system_busy_ticks=100, own_ticks=103, num_cpus=2, own_processes=1)
    assert ml.group_load(before, after, clock_ticks_per_s=100.0).foreign_cpu_share == 0.0


def test_group_load_without_proc_is_nan_with_a_reason(tmp_path: Path) -> None:
    s = ml.sample(proc_dir=tmp_path / "no-proc")
    assert "not readable" in s.reason
    g = ml.group_load(s, s, clock_ticks_per_s=100.0)
    assert math.isnan(g.foreign_cpu_share) and math.isnan(g.own_cpu_share)
    assert "not readable" in g.reason and g.to_extra()["load_reason"] == g.reason
    assert not ml.is_contaminated(g)


def test_sample_reads_a_fixture_proc_tree(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(STAT_TEXT)
    for pid, ppid, ut in ((10, 1, 100), (11, 10, 40), (20, 1, 900)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_pid_stat(pid, "p", ppid, ut, 0))
    s = ml.sample(pid=10, proc_dir=tmp_path)
    assert (s.system_busy_ticks, s.own_ticks, s.num_cpus, s.own_processes, s.reason) == (1385, 140, 2, 2, "")


def test_threshold_decision() -> None:
    def load(share: float) -> ml.GroupLoad:
        return ml.GroupLoad(share, 0.5, 1.0, 2.0)

    assert ml.CONTAMINATED_SHARE == 0.25
    assert not ml.is_contaminated(load(0.25))
    assert ml.is_contaminated(load(0.26))
    assert ml.is_contaminated(load(0.2), threshold=0.1)
    assert ml.is_contaminated({"foreign_cpu_share": 0.6})
    assert not ml.is_contaminated({"foreign_cpu_share": math.nan})
    assert not ml.is_contaminated({})
    with pytest.raises(ValueError, match="threshold=0"):
        ml.is_contaminated(load(0.5), threshold=0)
    # under a steady load of 0.45 (one CPU-bound job on 2 cores) the limit is 0.45 + 0.15 = 0.60
    assert ml.contamination_limit(reference_share=0.45) == pytest.approx(0.60)
    assert not ml.is_contaminated(load(0.55), reference_share=0.45)
    assert ml.is_contaminated(load(0.65), reference_share=0.45)
    # a quiet reference never lowers the absolute threshold; the limit never exceeds 1
    assert ml.contamination_limit(reference_share=0.02) == 0.25
    assert ml.contamination_limit(reference_share=0.95) == 1.0
    assert not ml.is_contaminated(load(1.0), reference_share=0.95)


def test_reference_share_is_the_median_of_known_shares() -> None:
    assert ml.reference_share([0.1, math.nan, 0.9, 0.2]) == 0.2
    assert ml.reference_share([0.1, 0.3, 0.5, 0.9]) == pytest.approx(0.4)
    assert math.isnan(ml.reference_share([math.nan]))


def test_meminfo_and_interleave_fit() -> None:
    assert ml.parse_meminfo_available("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2048 * 1024
    with pytest.raises(ValueError, match="no MemAvailable"):
        ml.parse_meminfo_available("MemTotal: 100 kB\n")
    gib = 2**30
    # 3 engines x (3 + 1) GiB = 12 GiB against 0.7 x 20 = 14 GiB: fits; against 0.7 x 16 = 11.2: does not
    assert ml.interleave_fits(per_engine_bytes=[3 * gib] * 3, kv_bytes=gib, available_bytes=20 * gib)[0]
    fits, why = ml.interleave_fits(per_engine_bytes=[3 * gib] * 3, kv_bytes=gib, available_bytes=16 * gib)
    assert not fits and "12.0 GiB" in why and "11.2" in why


class _ScriptedLanes:
    """measure() functions that return records with the foreign shares given, in order, per lane."""

    def __init__(self, shares: dict[str, list[float]], pool: int = 100) -> None:
        self.shares = {k: list(v) for k, v in shares.items()}
        self.calls: list[tuple[str, str, int, int, str]] = []
        self.left = dict.fromkeys(shares, pool)

    def lane(self, label: str, method: str = "ngram") -> Lane:
        def measure(workload: str, batch: int, status: str, round_no: int):  # noqa: ANN202
            if self.left[label] < batch:
                return None
            self.left[label] -= batch
            share = self.shares[label].pop(0) if self.shares[label] else 0.0
            if status == "finished" and ml.is_contaminated({"foreign_cpu_share": share}):
                status = "contaminated"
            self.calls.append((label, workload, batch, round_no, status))
            rec = make_record(method=method, config_label=label, workload=workload, num_prompts=batch,
                              wall_time_s=1.0)
            return dataclasses.replace(rec, status=status, extra={"foreign_cpu_share": share, "round": round_no})

        return Lane(label, method != "none", measure)


def test_run_rounds_remeasures_a_contaminated_group_later_and_keeps_only_clean_ones() -> None:
    proto = Protocol(batch_sizes=(1, 2), budget_s=100.0, min_rounds=1, max_rounds=1)
    # groups in order: B=1 clean, B=2 contaminated (0.6), then its retry contaminated (0.5), then clean
    lanes = _ScriptedLanes({"a": [0.0, 0.6, 0.5, 0.1]})
    out = run_rounds(proto, [lanes.lane("a")], ["code"], log=lambda _s: None)
    assert [c[2:] for c in lanes.calls] == [(1, 1, "finished"), (2, 1, "contaminated"), (2, 1, "contaminated"),
                                            (2, 1, "finished")]
    assert [(r.num_prompts, r.status) for r in out] == [(1, "finished"), (2, "finished")]


def test_run_rounds_retries_are_bounded() -> None:
    proto = Protocol(batch_sizes=(4,), budget_s=100.0, min_rounds=1, max_rounds=1, max_load_retries=2)
    lanes = _ScriptedLanes({"a": [0.9] * 10})
    out = run_rounds(proto, [lanes.lane("a")], ["code"], log=lambda _s: None)
    assert out == []
    assert len(lanes.calls) == 1 + 2  # the group and two retries, all refused


def test_run_rounds_retries_stop_when_the_budget_is_spent() -> None:
    proto = Protocol(batch_sizes=(1, 2), budget_s=2.0, min_rounds=1, max_rounds=1, max_load_retries=5)
    lanes = _ScriptedLanes({"a": [0.9] * 10})  # each group 1 s: the round's two groups spend the budget
    run_rounds(proto, [lanes.lane("a")], ["code"], log=lambda _s: None)
    assert len(lanes.calls) == 2


def test_run_rounds_interleaves_lanes_group_by_group() -> None:
    proto = Protocol(batch_sizes=(1, 2), budget_s=100.0, min_rounds=2, max_rounds=2)
    lanes = _ScriptedLanes({"base": [], "ng": []})
    out = run_rounds(proto, [lanes.lane("base", "none"), lanes.lane("ng")], ["code", "chat"], log=lambda _s: None)
    order = [(c[0], c[1], c[2], c[3]) for c in lanes.calls]
    assert order[:8] == [("base", "code", 1, 1), ("ng", "code", 1, 1), ("base", "code", 2, 1), ("ng", "code", 2, 1),
                         ("base", "chat", 1, 1), ("ng", "chat", 1, 1), ("base", "chat", 2, 1), ("ng", "chat", 2, 1)]
    assert len(out) == 16  # 2 lanes x 2 workloads x 2 batch sizes x 2 rounds


def test_interleaved_baseline_repeats_while_a_drafting_lane_measures() -> None:
    # the n-gram lane never reaches its half-width (scripted records have no per-request counts): it stops
    # on the budget (4 groups of 1 s = 2 rounds); the baseline would stop after min_rounds=1 alone
    proto = Protocol(batch_sizes=(1, 2), budget_s=4.0, min_rounds=1, max_rounds=10)
    lanes = _ScriptedLanes({"base": [], "ng": []})
    run_rounds(proto, [lanes.lane("base", "none"), lanes.lane("ng")], ["code"], log=lambda _s: None)
    rounds = {label: max(c[3] for c in lanes.calls if c[0] == label) for label in ("base", "ng")}
    assert rounds == {"base": 2, "ng": 2}
    alone = _ScriptedLanes({"base": []})
    run_rounds(proto, [alone.lane("base", "none")], ["code"], log=lambda _s: None)
    assert max(c[3] for c in alone.calls) == 1


def test_run_rounds_single_lane_stops_on_an_exhausted_pool() -> None:
    proto = Protocol(batch_sizes=(2,), budget_s=100.0, min_rounds=5, max_rounds=5)
    lanes = _ScriptedLanes({"a": []}, pool=5)
    out = run_rounds(proto, [lanes.lane("a")], ["code"], log=lambda _s: None)
    assert len(out) == 2  # 2 + 2 prompts, then 1 left: fewer than a batch


def test_load_summary_and_report_count(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    rid = store.create_run("engine", {}, status="running")
    recs = []
    for i, (method, b) in enumerate([(m, b) for m in ("none", "ngram") for b in (1, 4, 8)]):
        for wl in ("code", "chat"):
            r = make_record(method=method, k=3, workload=wl, run_id=rid, num_prompts=b, output_tokens=32 * b,
                            wall_time_s=0.5 + 0.1 * b + 0.05 * i)
            recs.append(dataclasses.replace(r, extra={"foreign_cpu_share": 0.05, "max_foreign_share": 0.25,
                                                      "batch_size": b}))
    bad = dataclasses.replace(recs[0], status="contaminated",
                              extra={"foreign_cpu_share": 0.62, "max_foreign_share": 0.25})
    warm = dataclasses.replace(recs[1], status="warmup", extra={"foreign_cpu_share": 0.1})
    for r in [*recs, bad, warm]:
        store.add_group(r)
    store.set_status(rid, "succeeded", "")
    s = load_summary(store.groups([rid]))
    assert s == {"refused": 1.0, "max_share": 0.62, "allowed": 0.25}
    rep = calibrate(store, [rid])
    assert rep.load_refused_groups == 1
    assert rep.max_foreign_cpu_share == pytest.approx(0.62)
    assert "1 group(s) left out as contaminated" in rep.load_line() and "0.62" in rep.load_line()
    assert rep.to_dict()["load_refused_groups"] == 1
    # the refused and warm-up groups are never compared (fitted): every compared row is a finished group
    assert len(rep.comparisons) == len(recs)


def test_report_says_when_load_was_not_recorded(tmp_path: Path) -> None:
    assert math.isnan(load_summary([make_record()])["max_share"])


def _family_lane(lanes: _ScriptedLanes, label: str, family: str) -> Lane:
    return dataclasses.replace(lanes.lane(label), family=family)


def test_a_family_runs_its_rounds_together_when_one_member_spends_its_budget() -> None:
    # k2 spends 2 s per round, k4 1 s: alone, k4 would run a third round on prompts k2 never sees
    proto = Protocol(batch_sizes=(1, 2), budget_s=4.0, min_rounds=1, max_rounds=10)
    lanes = _ScriptedLanes({"k2": [], "k4": []})
    slow = lanes.lane("k2")

    def measure_slow(workload: str, batch: int, status: str, round_no: int):  # noqa: ANN202
        return dataclasses.replace(slow.measure(workload, batch, status, round_no), wall_time_s=2.0)

    pair = [Lane("k2", True, measure_slow, family="ngram|"), _family_lane(lanes, "k4", "ngram|")]
    run_rounds(proto, pair, ["code"], log=lambda _s: None)
    rounds = {label: sorted({c[3] for c in lanes.calls if c[0] == label}) for label in ("k2", "k4")}
    assert rounds["k2"] == rounds["k4"] == [1]
    unpaired = _ScriptedLanes({"k2": [], "k4": []})
    slow2 = unpaired.lane("k2")

    def measure_slow2(workload: str, batch: int, status: str, round_no: int):  # noqa: ANN202
        return dataclasses.replace(slow2.measure(workload, batch, status, round_no), wall_time_s=2.0)

    run_rounds(proto, [Lane("k2", True, measure_slow2), unpaired.lane("k4")], ["code"], log=lambda _s: None)
    assert max(c[3] for c in unpaired.calls if c[0] == "k4") > max(c[3] for c in unpaired.calls if c[0] == "k2")


def test_a_member_that_reached_its_interval_goes_on_with_its_family() -> None:
    from calibration.harness.protocol import Stop, StopKind, _paired_reasons

    a, b, c = (Lane(x, True, lambda *_: None, family="f") for x in ("a", "b", "c"))
    solo = Lane("s", True, lambda *_: None)
    active = [(a, "code"), (b, "code"), (solo, "code"), (c, "chat")]
    narrow, budget = Stop(StopKind.HALF_WIDTH, "half-width 0.05 <= 0.1"), Stop(StopKind.BUDGET, "budget 4 s spent")
    out = _paired_reasons({("a", "code"): narrow, ("b", "code"): None,
                           ("s", "code"): Stop(StopKind.HALF_WIDTH, "half-width 0.01 <= 0.1"),
                           ("c", "chat"): budget}, active)
    assert out[("a", "code")] is None and out[("b", "code")] is None
    assert out[("s", "code")].kind is StopKind.HALF_WIDTH  # no family: stops on its own
    assert out[("c", "chat")] == budget  # alone on its workload
    exhausted = Stop(StopKind.EXHAUSTED, "prompt pool exhausted")
    out = _paired_reasons({("a", "code"): narrow, ("b", "code"): exhausted, ("s", "code"): None,
                           ("c", "chat"): None}, active)
    assert out[("a", "code")].kind is StopKind.EXHAUSTED and out[("a", "code")].paired_with == "b"
    assert str(out[("a", "code")]) == "prompt pool exhausted (paired with b)"
    assert out[("b", "code")] == exhausted
