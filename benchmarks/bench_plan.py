"""plan() benchmarks (prints figures; no assertions): `python benchmarks/bench_plan.py [--compare REV]`.

1. plan() for a 12-segment traffic profile (4 workloads x 3 languages), uncached, median of 30 calls
   (target < 40 ms: the fleet by hour, its bills and P(saving > 0) included); with the levers waterfall as well
   (the Report and the CLI ask for it).
2. Plan-page rerun with a 100,000-request profile loaded, in streamlit.testing.v1.AppTest (router, sidebar,
   plan(), charts); each rerun changes the TPOT SLO so the st.cache_data entry misses (target < 150 ms).
3. The 10^6-scenario grid (benchmarks/bench_planner_grid.py; target < 100 ms).
--compare REV: benchmarks 1 and 2 again through REV's code (REV's own bench_plan and bench_page, in a temporary git
worktree), measured in the same run, so the two figures share the machine's load.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def bench_page(cat) -> None:
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
    at.number_input(key="slo").set_value(45.0).run()  # warm-up
    times = []
    for i in range(15):
        w = at.number_input(key="slo").set_value(60.0 + i)
        t = time.perf_counter()
        w.run()
        times.append(time.perf_counter() - t)
        assert not at.exception
    print(f"Plan-page rerun after changing the TPOT SLO, 100,000-request profile ({len(prof.segments)} segments), "
          f"AppTest: median {statistics.median(times) * 1e3:.0f} ms, p90 {np.percentile(times, 90) * 1e3:.0f} ms "
          "(target < 150 ms)")


def bench_grid() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_planner_grid.py")], capture_output=True,
                         text=True, timeout=900)
    print(out.stdout.strip() or out.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    catalog = load_catalog()
    bench_plan(catalog)
    bench_page(catalog)
    if "--compare" in sys.argv:
        bench_rev(sys.argv[sys.argv.index("--compare") + 1])
    bench_grid()
