"""Hardware comparison benchmark (prints figures; no assertions): `python benchmarks/bench_hardware.py`.

planner.decision.hardware_choice.compare_hardware over the catalogue's GPU types (14) (every TP and weight format, no
speculation and each method at its best K, the fleet sized by hour) for the 70B model under a business-hours day, median
of 7 uncached calls, at 10B and 500B output tokens a month (target < 300 ms); and planner.money.spend.volume_for_spend.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.decision.hardware_choice import compare_hardware  # noqa: E402
from planner.money.spend import volume_for_spend  # noqa: E402
from planner.request import PlanRequest  # noqa: E402
from profiles import load_catalog  # noqa: E402


def timed(fn, n: int = 7) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) over n calls after one warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def bench_compare(cat) -> None:
    for volume in (1e10, 5e11):
        req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, daily_shape="business_hours",
                          monthly_output_tokens=volume)
        cmp = compare_hardware(req, cat)
        wall, cpu = timed(lambda r=req: compare_hardware(r, cat))
        sized = sum(c.configs_sized for c in cmp.choices)
        print(f"compare_hardware, {len(cmp.choices)} GPU types, {volume / 1e9:,.0f}B tokens/month: median "
              f"{wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU ({sized} configurations sized; target < 300 ms)")


def bench_spend(cat) -> None:
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, daily_shape="business_hours",
                      spend_usd_per_month=1e5, billing="fixed")
    wall, cpu = timed(lambda: volume_for_spend(req, cat))
    print(f"volume_for_spend ($100,000/month, fixed): median {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU")


if __name__ == "__main__":
    catalog = load_catalog()
    bench_compare(catalog)
    bench_spend(catalog)
