"""plan() benchmarks (prints figures; no assertions): `python benchmarks/bench_plan.py [--compare REV]`.

1. plan() for a 12-segment traffic profile (4 workloads x 3 languages), uncached, median of 30 calls
   (target < 40 ms: the fleet by hour, its bills and P(saving > 0) included); with the levers waterfall as well
   (the Report and the CLI ask for it).
1b. The same with a TTFT SLO and a business-hours day, so the fleet holds both SLOs and the best method's fleet runs
   the K schedule hour by hour (planner.money.kday; the figure says how many K's its hours run): target < 60 ms
   (docs/targets.md); then served "best" (co-located or disaggregated, planner.money.disagg), for information.
2. Plan-page rerun with a 100,000-request profile loaded, in streamlit.testing.v1.AppTest (router, sidebar,
   plan(), charts); each rerun changes the TPOT SLO so the st.cache_data entry misses (target < 150 ms); then
   the same with the TTFT SLO set and the business-hours day (target < 150 ms, docs/targets.md).
3. The 10^6-scenario grid (benchmarks/bench_planner_grid.py; target < 100 ms).
--compare REV: benchmarks 1 and 2 again through REV's code (REV's own bench_plan and bench_page, in a temporary git
worktree), measured in the same run, so the two figures share the machine's load; then plan() for the six methods
the per-engine speculation overheads were added to (SIX_METHODS), the same request in both trees, and for every method
of each tree's catalogue, in ROUNDS interleaved rounds: one worker process per tree, each round CALLS calls in one,
then in the other (order alternating), so slow spells of the machine fall on both; printed as median CPU ms per call
and the ratio now / REV.
`--compare REV --quick`: only the interleaved comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.plan import plan  # noqa: E402
from planner.request import PlanRequest, TrafficSegment  # noqa: E402
from profiles import load_catalog  # noqa: E402

WORKLOADS = ("chat", "code", "rag_summarization", "agent")
LANGUAGES = ("english", "mandarin", "cantonese")


def twelve_segments(cat) -> tuple[TrafficSegment, ...]:
    rng = np.random.default_rng(3)
    shares = rng.dirichlet(np.ones(12))
    segs = []
    for i, (w, lang) in enumerate((w, lang) for w in WORKLOADS for lang in LANGUAGES):
        wl = cat.workloads[w]
        segs.append(TrafficSegment(w, lang, float(shares[i]), float(wl.prompt_tokens * rng.uniform(0.5, 1.5)),
                                     float(wl.output_tokens * rng.uniform(0.5, 1.5))))
    return tuple(segs)


def bench_plan(cat) -> float:
    segs = twelve_segments(cat)
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, segments=segs, monthly_output_tokens=2e10)
    plan(req, cat)  # warm-up (imports, first allocations)
    times, cpu = [], []
    for i in range(30):
        r = dataclasses.replace(req, tpot_slo_ms=40.0 + i)
        t, c = time.perf_counter(), time.process_time()
        plan(r, cat)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    med = statistics.median(times)
    lt = []
    for i in range(5):
        r = dataclasses.replace(req, tpot_slo_ms=40.0 + i, levers_start="auto")
        t = time.perf_counter()
        plan(r, cat)
        lt.append(time.perf_counter() - t)
    print(f"plan(), 12 segments x 6 methods x K x integer batches: median {med * 1e3:.1f} ms wall, "
          f"{statistics.median(cpu) * 1e3:.1f} ms CPU, p90 {np.percentile(times, 90) * 1e3:.1f} ms wall "
          f"(target < 40 ms, fleet and bills included); with the levers waterfall: median "
          f"{statistics.median(lt) * 1e3:.0f} ms")
    return med


TTFT_SLO_MS = 3000.0  # binds the 70B's longest prompts at the busiest hours without ruling a method out
SHAPE = "business_hours"  # a day whose hours' batches differ, so the K schedule gives the hours different K's


def bench_plan_slos(cat, *, calls: int = 30) -> float:
    """plan() with both SLOs, the fleet by hour and the K schedule (module docstring, 1b); returns the median wall s."""
    segs = twelve_segments(cat)
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, segments=segs, monthly_output_tokens=2e10,
                      ttft_slo_ms=TTFT_SLO_MS, daily_shape=SHAPE)
    p = plan(req, cat)  # warm-up, and what the figure covers
    ks = sorted({h.k for h in p.best_fleet.hours}) if p.best_fleet is not None else []
    sched = (p.deploy or {}).get("speculative_config", {}).get("num_speculative_tokens_per_batch_size") or []
    out = {}
    for serving in ("colocated", "best"):
        times, cpu = [], []
        for i in range(calls if serving == "colocated" else max(5, calls // 3)):
            r = dataclasses.replace(req, tpot_slo_ms=40.0 + i, serving=serving)
            t, c = time.perf_counter(), time.process_time()
            plan(r, cat)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        out[serving] = (statistics.median(times), statistics.median(cpu), float(np.percentile(times, 90)))
    (w, c, p90), (bw, bc, _) = out["colocated"], out["best"]
    print(f"plan(), 12 segments, TTFT SLO {TTFT_SLO_MS:g} ms, '{SHAPE}' day: median {w * 1e3:.1f} ms wall, "
          f"{c * 1e3:.1f} ms CPU, p90 {p90 * 1e3:.1f} ms wall (target < 60 ms; the best fleet's hours run K in {ks}, "
          f"a {len(sched)}-range schedule); served 'best' (co-located or disaggregated): median {bw * 1e3:.1f} ms "
          f"wall, {bc * 1e3:.1f} ms CPU")
    return w


REV_SCRIPT = """
import sys
sys.path.insert(0, {bench!r})
import bench_plan as b  # REV's own benchmarks, importing REV's planner (its ROOT is REV's tree)
from profiles import load_catalog
cat = load_catalog()
b.bench_plan(cat)
b.bench_page(cat)
"""


def bench_rev(rev: str) -> None:
    """The same plan() and Plan-page benchmarks through REV's code, from a temporary git worktree, in this run."""
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "rev"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(wt), rev], check=True,
                       capture_output=True)
        try:
            out = subprocess.run([sys.executable, "-c", REV_SCRIPT.format(bench=str(wt / "benchmarks"))], cwd=wt,
                                 capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                print(f"{rev}: failed ({(out.stderr.strip().splitlines() or ['no output'])[-1]})")
                return
            for line in out.stdout.strip().splitlines():
                print(f"[{rev}] {line}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)], capture_output=True)


# The methods the catalogue had before the per-engine overheads (41370db): plan()'s speed is compared on the same work.
SIX_METHODS = ("eagle3", "medusa", "mtp", "p_eagle", "draft_model", "ngram")
ROUNDS, CALLS = 10, 6

# One tree's plan() timed on request: `six N` or `all N` on stdin -> N CPU times (seconds) as JSON on stdout. Only
# the PlanRequest fields that tree has are passed, so an older revision runs the same request.
WORKER = """
import dataclasses, json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from planner.plan import plan
from planner.request import PlanRequest, TrafficSegment
from profiles import load_catalog
cat = load_catalog()
rng = np.random.default_rng(3)
shares = rng.dirichlet(np.ones(12))
segs = []
for i, (w, lang) in enumerate((w, lang) for w in {workloads!r} for lang in {languages!r}):
    wl = cat.workloads[w]
    segs.append(TrafficSegment(w, lang, float(shares[i]), float(wl.prompt_tokens * rng.uniform(0.5, 1.5)),
                               float(wl.output_tokens * rng.uniform(0.5, 1.5))))
# the request's field names: flat dataclass fields before PlanRequest had parts, PART_OF's names after
try:
    from planner.request import PART_OF
    fields = set(PART_OF)
except ImportError:
    fields = {{f.name for f in dataclasses.fields(PlanRequest)}}
base = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, segments=tuple(segs), monthly_output_tokens=2e10)
reqs = {{"six": PlanRequest(**base, methods={six!r}), "all": PlanRequest(**base)}}
assert "methods" in fields
for r in reqs.values():
    plan(r, cat)  # warm-up
print(json.dumps({{"all_methods": len(cat.methods)}}), flush=True)
for line in sys.stdin:
    what, n = line.split()
    out = []
    for i in range(int(n)):
        r = dataclasses.replace(reqs[what], tpot_slo_ms=40.0 + i)
        c = time.process_time()
        plan(r, cat)
        out.append(time.process_time() - c)
    print(json.dumps(out), flush=True)
"""


def _worker(root: Path) -> subprocess.Popen:
    code = WORKER.format(root=str(root), workloads=WORKLOADS, languages=LANGUAGES, six=SIX_METHODS)
    return subprocess.Popen([sys.executable, "-c", code], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def _ask(w: subprocess.Popen, line: str) -> Any:
    w.stdin.write(line + "\n")
    w.stdin.flush()
    got = w.stdout.readline()
    if not got:
        raise RuntimeError(f"worker exited ({w.wait()})")
    return json.loads(got)


def compare_interleaved(rev: str, *, rounds: int = ROUNDS, calls: int = CALLS) -> dict[str, float]:
    """plan() for SIX_METHODS and for every method, here and at REV, in interleaved rounds (module docstring);
    returns {"six": ratio, "all": ratio} (now / REV, median CPU per call)."""
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "rev"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(wt), rev], check=True,
                       capture_output=True)
        workers = {"now": _worker(ROOT), rev: _worker(wt)}
        try:
            n_methods = {who: w.stdout.readline() for who, w in workers.items()}
            n_methods = {who: json.loads(line)["all_methods"] if line else None for who, line in n_methods.items()}
            if None in n_methods.values():
                print(f"{rev}: interleaved comparison failed (a worker did not start)")
                return {}
            times = {(who, what): [] for who in workers for what in ("six", "all")}
            per_round = {"six": [], "all": []}
            for r in range(rounds):
                order = list(workers) if r % 2 == 0 else list(workers)[::-1]
                for what in ("six", "all"):
                    med = {}
                    for who in order:
                        got = _ask(workers[who], f"{what} {calls}")
                        times[(who, what)] += got
                        med[who] = statistics.median(got)
                    per_round[what].append(med["now"] / med[rev])
        finally:
            for w in workers.values():
                w.stdin.close()
                w.wait(timeout=60)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(wt)], capture_output=True)
    ratios = {}
    for what, label in (("six", f"the six original methods ({', '.join(SIX_METHODS)})"),
                        ("all", f"every method ({n_methods['now']} now, {n_methods[rev]} at {rev})")):
        now, then = (statistics.median(times[(who, what)]) for who in ("now", rev))
        ratios[what] = now / then
        rr = per_round[what]
        q1 = [float(np.percentile(times[(who, what)], 25)) for who in ("now", rev)]  # less touched by load spikes
        print(f"plan(), 12 segments, {label}, {rounds} interleaved rounds x {calls} calls: median CPU "
              f"{now * 1e3:.1f} ms now vs {then * 1e3:.1f} ms at {rev}: ratio {now / then:.3f} (per round "
              f"{min(rr):.3f}-{max(rr):.3f}; lower quartiles {q1[0] * 1e3:.1f} vs {q1[1] * 1e3:.1f} ms: "
              f"{q1[0] / q1[1]:.3f})")
    return ratios


def bench_page(cat, *, slos: bool = False) -> None:
    """The Plan-page rerun (module docstring, 2); slos: with the TTFT SLO set and the business-hours day."""
    from streamlit.testing.v1 import AppTest

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_app import make_requests_csv

    data = make_requests_csv(100_000, seed=2)
    os.chdir(ROOT)  # Streamlit reads ./.streamlit/config.toml, as under `./dev app`
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("views/traffic.py").run()
    at.file_uploader(key="traffic_upload").set_value(("traffic_100k.csv", data, "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.switch_page("views/plan.py").run()
    prof = at.session_state["traffic_profile"]
    what = ""
    if slos:
        at.checkbox(key="ttft_set").check().run()
        at.number_input(key="ttft_slo").set_value(TTFT_SLO_MS).run()
        at.selectbox(key="fleet_shape").set_value(SHAPE).run()
        assert not at.exception, at.exception
        what = f", TTFT SLO {TTFT_SLO_MS:g} ms and the '{SHAPE}' day"
    at.number_input(key="slo").set_value(45.0).run()  # warm-up
    times, cpu = [], []
    for i in range(15):
        w = at.number_input(key="slo").set_value(60.0 + i)
        t, c = time.perf_counter(), time.process_time()
        w.run()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        assert not at.exception
    print(f"Plan-page rerun after changing the TPOT SLO, 100,000-request profile ({len(prof.segments)} segments"
          f"{what}), "
          f"AppTest: median {statistics.median(times) * 1e3:.0f} ms wall ({statistics.median(cpu) * 1e3:.0f} ms CPU, "
          f"every thread of the process), p90 {np.percentile(times, 90) * 1e3:.0f} ms "
          "(target < 150 ms)")


def bench_grid() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_planner_grid.py")], capture_output=True,
                         text=True, timeout=900)
    print(out.stdout.strip() or out.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    rev_arg = sys.argv[sys.argv.index("--compare") + 1] if "--compare" in sys.argv else None
    if rev_arg is not None and "--quick" in sys.argv:
        compare_interleaved(rev_arg)
        sys.exit(0)
    catalog = load_catalog()
    bench_plan(catalog)
    bench_plan_slos(catalog)
    bench_page(catalog)
    bench_page(catalog, slos=True)
    if rev_arg is not None:
        bench_rev(rev_arg)
        compare_interleaved(rev_arg)
    bench_grid()
