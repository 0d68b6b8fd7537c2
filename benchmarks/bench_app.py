"""App benchmarks (prints figures; no assertions): run `python benchmarks/bench_app.py`.

1. Ingest: a 1,000,000-row per-request CSV through profiles.traffic.parse_traffic (target < 5 s).
(The Plan-page rerun with a 100,000-request profile is in bench_plan.py.)
"""

from __future__ import annotations

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


if __name__ == "__main__":
    catalog = load_catalog()
    bench_ingest(catalog)
