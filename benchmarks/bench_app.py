"""App benchmarks (prints figures; no assertions): run `python benchmarks/bench_app.py`.

1. Ingest: a 1,000,000-row per-request CSV through profiles.traffic.parse_traffic (target < 5 s).
2. Plan rerun: with a 100,000-request profile loaded, change one input and rerun the Plan page in
   streamlit.testing.v1.AppTest (the whole script: router, sidebar, planner calls, charts); median over
   reruns that each change the TPOT SLO to a new value, so the st.cache_data entries miss (target < 300 ms).
   Also the page's compute function alone (views.plan.compute's planner work, uncached).
"""

from __future__ import annotations

import dataclasses
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiles import load_catalog  # noqa: E402
from profiles.traffic import parse_traffic  # noqa: E402


def make_requests_csv(n: int, seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp("2026-11-01T00:00:00Z")
    secs = np.sort(rng.uniform(0, 7 * 86400, n)).astype("int64")
    workloads = np.array(["chat", "code", "rag_summarization", "agent"])
    languages = np.array(["english", "mandarin", "cantonese"])
    df = pd.DataFrame({
        "timestamp": (t0 + pd.to_timedelta(secs, unit="s")).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "workload": workloads[rng.choice(4, n, p=[0.5, 0.3, 0.1, 0.1])],
        "language": languages[rng.choice(3, n, p=[0.6, 0.25, 0.15])],
        "prompt_tokens": rng.integers(50, 8000, n),
        "output_tokens": rng.integers(10, 1500, n),
    })
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue().encode()


def bench_ingest(cat) -> None:
    data = make_requests_csv(1_000_000)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        prof = parse_traffic("big.csv", data, cat)
        times.append(time.perf_counter() - t)
    print(f"ingest 1,000,000-row CSV ({len(data) / 2**20:.0f} MiB): median {statistics.median(times):.2f} s "
          f"(runs {', '.join(f'{x:.2f}' for x in times)}); {len(prof.segments)} segments (target < 5 s)")


def bench_plan_rerun(cat) -> None:
    from streamlit.testing.v1 import AppTest

    from views import _model as mdl

    data = make_requests_csv(100_000, seed=2)
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
    print(f"Plan rerun after changing the TPOT SLO, 100,000-request profile ({len(prof.segments)} segments), "
          f"AppTest: median {statistics.median(times) * 1e3:.0f} ms, p90 {np.percentile(times, 90) * 1e3:.0f} ms "
          "(target < 300 ms)")
    inp = mdl.PlanInputs()
    mix = prof.mix_key()
    ctimes = []
    for i in range(10):
        t = time.perf_counter()
        x = dataclasses.replace(inp, tpot_slo_ms=80.0 + i)
        mdl.plan_summary(x, mix, cat, mix_is_profile=True)
        for w in mdl.WHICH:
            mdl.method_table(x, mix, cat, which=w, tuned=True)
        ctimes.append(time.perf_counter() - t)
    print(f"Plan compute alone (planner calls, uncached): median {statistics.median(ctimes) * 1e3:.0f} ms")


if __name__ == "__main__":
    catalog = load_catalog()
    bench_ingest(catalog)
    bench_plan_rerun(catalog)
