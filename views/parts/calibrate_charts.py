"""The Calibrate page's charts: the acceptance interval narrowing, acceptance per draft position, predicted
against measured throughput and the step-time fit."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from calibration.harness.protocol import DEFAULT_TARGET_HALF_WIDTH


def narrowing_figure(progress: list[dict]) -> go.Figure:
    """Half-width of the mean acceptance length's 95 % interval after each round, per configuration and
    workload, against the stopping target."""
    fig = go.Figure()
    keys = list(dict.fromkeys((p["config"], p["workload"]) for p in progress))
    for cfg, w in keys:
        rows = [p for p in progress if (p["config"], p["workload"]) == (cfg, w) and math.isfinite(p["half_width"])]
        fig.add_scatter(x=[p["num_requests"] for p in rows], y=[p["half_width"] for p in rows],
                        mode="lines+markers", name=f"{cfg} / {w}",
                        text=[f"round {p['round']}: tau {p['acceptance_length']:.3f} "
                              f"[{p['low']:.3f}, {p['high']:.3f}]" for p in rows])
    fig.add_hline(y=DEFAULT_TARGET_HALF_WIDTH, line_dash="dot", annotation_text="default target")
    fig.update_layout(xaxis_title="requests measured", yaxis_title="acceptance length 95 % half-width (tokens)",
                      yaxis_type="log", height=340, margin={"t": 30})
    return fig


def acceptance_figure(rep: Any) -> go.Figure:
    fig = go.Figure()
    for a in rep.acceptance:
        x = list(range(1, a.k + 1))
        fig.add_scatter(
            x=x, y=list(a.p_per_pos), mode="lines+markers", name=f"{a.config_label} / {a.workload}",
            error_y={"type": "data", "symmetric": False,
                     "array": [h - p for h, p in zip(a.p_high, a.p_per_pos, strict=True)],
                     "arrayminus": [p - lo for p, lo in zip(a.p_per_pos, a.p_low, strict=True)]},
        )
    fig.update_layout(xaxis_title="draft position i", yaxis_title="unconditional acceptance p_i (95 % Jeffreys)",
                      yaxis_range=[0, 1.05], height=380, margin={"t": 30})
    return fig


def pvm_figure(rep: Any) -> go.Figure:
    """Predicted against measured output tokens/s, one colour per method, circles fitted and diamonds held out."""
    fig = go.Figure()
    methods = sorted({c.method for c in rep.comparisons})
    for method in methods:
        for split, symbol in (("train", "circle"), ("held_out", "diamond")):
            rows = [c for c in rep.comparisons if c.method == method and c.split == split]
            if not rows:
                continue
            name = "baseline" if method == "none" else method
            fig.add_scatter(x=[c.measured_output_tokens_per_s for c in rows],
                            y=[c.predicted_output_tokens_per_s for c in rows], mode="markers",
                            name=f"{name} ({'held out' if split == 'held_out' else 'fitted'})", legendgroup=name,
                            marker={"symbol": symbol, "size": 10},
                            text=[f"{c.config_label} / {c.workload} / B={c.batch_size}" for c in rows])
    vals = [c.measured_output_tokens_per_s for c in rep.comparisons] + [
        c.predicted_output_tokens_per_s for c in rep.comparisons]
    hi = max(v for v in vals if math.isfinite(v)) * 1.1
    fig.add_scatter(x=[0, hi], y=[0, hi], mode="lines", name="predicted = measured", line={"dash": "dot"})
    fig.update_layout(xaxis_title="measured output tokens/s", yaxis_title="predicted output tokens/s",
                      height=380, margin={"t": 30})
    return fig


def step_figure(rep: Any, samples: list[dict]) -> go.Figure | None:
    if rep.step_fit is None or not samples:
        return None
    from calibration.analysis.report import predicted_step_times_s

    p = rep.step_fit.as_dict()
    pred = predicted_step_times_s(samples, eta_bw=p["eta_bw"], eta_flops=p["eta_flops"], t_fixed_s=p["t_fixed_s"])
    fig = go.Figure()
    fig.add_scatter(x=[s["step_time_s"] * 1e3 for s in samples], y=[v * 1e3 for v in pred], mode="markers",
                    text=[f"B={s['batch']} n={s['tokens_per_seq']} ctx={s['context_tokens']}" for s in samples],
                    name="microbenchmark points")
    hi = max(max(s["step_time_s"] for s in samples), max(pred)) * 1.1e3
    fig.add_scatter(x=[0, hi], y=[0, hi], mode="lines", name="fit = measured", line={"dash": "dot"})
    fig.update_layout(xaxis_title="measured step time (ms)", yaxis_title="roofline fit (ms)", height=380,
                      margin={"t": 30})
    return fig
