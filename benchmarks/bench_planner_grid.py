"""Benchmark: >= 1e6 scenarios (hardware x method x K x batch x workload x alpha) in one vectorised call,
against the same model evaluated scenario by scenario in a Python loop, in one run.

Target: the grid in < 100 ms on a 2-core machine and >= 100x faster than the loop.
The loop is timed on a random sample of scenarios and extrapolated per scenario; the sample's values are
checked against the grid's, so both paths compute the same numbers.

    python benchmarks/bench_planner_grid.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.acceptance import rates as acc  # noqa: E402
from planner.physics.roofline import hw_params, target_net  # noqa: E402
from planner.physics.serving import DRAFTING_MODE_CODE, evaluate_arrays  # noqa: E402
from planner.search.candidates import MAX_ALPHA  # noqa: E402
from planner.search.drafting import LOOKUP_DRAFTING, draft_net  # noqa: E402
from planner.search.sweep import evaluate_grid  # noqa: E402
from profiles import load_catalog  # noqa: E402

KS = list(range(1, 9))
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
ALPHAS = np.linspace(0.40, 0.95, 60)


def grid_inputs(cat):
    return dict(
        model=cat.models["llama-3.1-8b"], draft_model=cat.models["llama-3.2-1b"],
        hardware=list(cat.hardware.values()), methods=list(cat.methods.values()),
        workloads=list(cat.workloads.values()), ks=KS, batches=BATCHES, alphas=ALPHAS,
    )


def one_scenario(inp, ih, im, ik, ib, iw, ia):
    """The same model for one scenario, with scalar inputs (what a Python loop would do)."""
    h, m, w = inp["hardware"][ih], inp["methods"][im], inp["workloads"][iw]
    k, b, a = KS[ik], BATCHES[ib], float(ALPHAS[ia])
    model = inp["model"]
    d = draft_net(m, model, inp["draft_model"], "bf16", None)
    draft, draft_total = d.net, d.weight_bytes
    if m.drafting in LOOKUP_DRAFTING:  # prompt lookup (n-gram, ngram_gpu, suffix): the workload's copy share
        a0 = w.ngram_alpha * a / float(np.mean(ALPHAS))
    else:
        a0 = a + w.alpha_shift
    a0 = min(max(a0, 0.0), MAX_ALPHA)
    tau = float(acc.acceptance_length(acc.per_position_alpha(a0, k, m.position_decay)))
    ctx = w.prompt_tokens + w.output_tokens / 2
    return evaluate_arrays(
        target=target_net(model), draft=draft, hw=hw_params(h), mode=DRAFTING_MODE_CODE[m.drafting],
        draft_scales_with_k=m.draft_params_scale_with_k, k=k, batch=b, tau=tau, context_tokens=ctx,
        prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens, usd_per_gpu_hour=h.usd_per_gpu_hour_mid,
        draft_weight_bytes_total=draft_total, draft_is_model=m.drafting == "draft_model",
    )


def main() -> None:
    cat = load_catalog()
    inp = grid_inputs(cat)
    evaluate_grid(**inp)  # warm-up
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        g = evaluate_grid(**inp)
        times.append(time.perf_counter() - t0)
    grid_s = statistics.median(times)
    n = g.size
    shape = g.result.usd_per_mtok.shape
    rng = np.random.default_rng(0)
    sample = [tuple(int(rng.integers(0, d)) for d in shape) for _ in range(400)]
    t0 = time.perf_counter()
    loop_vals = [one_scenario(inp, *idx) for idx in sample]
    loop_per_scenario_s = (time.perf_counter() - t0) / len(sample)
    worst = 0.0
    for idx, r in zip(sample, loop_vals):
        for f in ("usd_per_mtok", "speedup", "tpot_s"):
            gv, lv = float(getattr(g.result, f)[idx]), float(getattr(r, f))
            worst = max(worst, abs(gv - lv) / max(abs(lv), 1e-12))
    loop_total_s = loop_per_scenario_s * n
    print(f"scenarios in grid: {n:,} (shape {shape}: hardware x method x K x batch x workload x alpha)")
    print(f"vectorised grid: median {grid_s * 1e3:.1f} ms over {len(times)} runs "
          f"(min {min(times) * 1e3:.1f} ms); target < 100 ms")
    print(f"python loop: {loop_per_scenario_s * 1e6:.0f} us per scenario -> {loop_total_s:.0f} s for the grid "
          f"(timed on {len(sample)} sampled scenarios)")
    print(f"speed-up vectorised / loop: {loop_total_s / grid_s:,.0f}x; target >= 100x")
    print(f"max relative difference grid vs loop on the sample: {worst:.2e}")
    if worst > 1e-9:
        raise SystemExit("grid and loop disagree")


if __name__ == "__main__":
    main()
