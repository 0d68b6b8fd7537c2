"""The whole fit from stored records: acceptance per position and workload, the microbenchmark step-time
fit, the engine fixed-time fit on the train split, predicted vs measured on every run with the held-out
MAPE. Shared by the CLI, the Calibrate page and the tests.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from calibration.analysis.fit import AcceptanceFit, FitResult, fit_acceptance
from calibration.analysis.head_cost import HEAD_METHODS
from calibration.analysis.method_costs import MethodCost, fit_method_terms, method_costs
from calibration.analysis.predict import (
    Comparison,
    EngineParams,
    compare,
    fit_engine,
    fit_microbench,
    machine_for,
    mape_pct,
    split_holdout,
)
from calibration.harness.machine_load import LOAD_MARGIN
from calibration.storage.profiles_store import CalibratedProfile, today
from calibration.storage.store import Store


@dataclass(frozen=True)
class CalibrationReport:
    run_ids: tuple[str, ...]
    microbench_run_id: str | None
    acceptance: tuple[AcceptanceFit, ...]
    step_fit: FitResult | None  # microbenchmark: eta_bw, eta_flops, t_fixed_s (kernel level)
    engine_fit: FitResult  # engine: t_fixed_s, t_fixed_draft_s, t_spec_s on the train split
    params: EngineParams
    comparisons: tuple[Comparison, ...]
    mape_train_pct: float
    mape_holdout_pct: float
    mape_holdout_full_pct: float  # tau predicted as well
    mape_holdout_decode_pct: float  # per-slot decode rate (vLLM's per-request decode time)
    hardware: str
    # a GPU run: the catalogue entry it refines, the node's GPU count and the engine version (CPU runs: "", 0)
    base_hardware: str = ""
    device_count: int = 0
    engine_version: str = ""
    # per head method (calibration.analysis.method_costs): its fit and its terms with intervals
    method_fits: dict[str, FitResult] = dataclasses.field(default_factory=dict)
    method_costs: tuple[MethodCost, ...] = ()
    # machine load (calibration.harness.machine_load): groups refused as "contaminated" (never fitted) and the largest
    # foreign CPU share any measured group saw (NaN when no group recorded one)
    load_refused_groups: int = 0
    max_foreign_cpu_share: float = math.nan
    max_foreign_share_allowed: float = math.nan

    def method_mape_pct(self, method: str, split: str | None = None, full: bool = False) -> float:
        """Throughput MAPE of one method's groups (split None: all of them)."""
        return _safe_mape([c for c in self.comparisons if c.method == method], split, full)

    def load_line(self) -> str:
        """The fit report's line on machine load."""
        if math.isnan(self.max_foreign_cpu_share):
            return "machine load: not recorded for these runs"
        limit = ("" if math.isnan(self.max_foreign_share_allowed) else
                 f" (limit: foreign CPU share above max({self.max_foreign_share_allowed:g}, steady share + "
                 f"{LOAD_MARGIN:g}))")
        return (f"machine load: {self.load_refused_groups} group(s) left out as contaminated by other work{limit}; "
                f"largest foreign CPU share seen {self.max_foreign_cpu_share:.2f}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_ids": list(self.run_ids), "microbench_run_id": self.microbench_run_id,
            "acceptance": [a.to_dict() for a in self.acceptance],
            "step_fit": self.step_fit.to_dict() if self.step_fit else None,
            "engine_fit": self.engine_fit.to_dict(), "params": self.params.to_dict(),
            "comparisons": [c.to_dict() for c in self.comparisons],
            "mape_train_pct": self.mape_train_pct, "mape_holdout_pct": self.mape_holdout_pct,
            "mape_holdout_full_pct": self.mape_holdout_full_pct,
            "mape_holdout_decode_pct": self.mape_holdout_decode_pct, "hardware": self.hardware,
            "base_hardware": self.base_hardware, "device_count": self.device_count,
            "engine_version": self.engine_version,
            "method_fits": {m: f.to_dict() for m, f in self.method_fits.items()},
            "method_costs": [c.to_dict() for c in self.method_costs], "load_refused_groups": self.load_refused_groups,
            "max_foreign_cpu_share": self.max_foreign_cpu_share,
            "max_foreign_share_allowed": self.max_foreign_share_allowed,
        }

    def profile(self, name: str) -> CalibratedProfile:
        se = dict(zip(self.engine_fit.names, self.engine_fit.stderr, strict=True))
        if self.step_fit:
            se.update({k: v for k, v in zip(self.step_fit.names, self.step_fit.stderr, strict=True)
                       if k != "t_fixed_s"})
        # the planner's Efficiency has one compute efficiency: the prefill's own (eta_prefill_flops) stays here
        kept = {k: v for k, v in self.params.to_dict().items() if k not in ("eta_prefill_flops", "method_terms")}
        return CalibratedProfile(
            name=name, hardware=self.hardware, **kept, method_terms=profile_method_terms(self.method_costs),
            acceptance=profile_acceptance(self.acceptance),
            stderr={k: float(v) for k, v in se.items()},
            holdout_mape_pct=float(self.mape_holdout_pct), created=today(),
            source=f"calibration runs {', '.join(self.run_ids)}; microbenchmark {self.microbench_run_id}"
                   + (f"; {self.engine_version}" if self.engine_version else ""),
            base_hardware=self.base_hardware, device_count=self.device_count, engine_version=self.engine_version,
        )


def profile_method_terms(costs: tuple[MethodCost, ...]) -> dict[str, dict[str, Any]]:
    """The calibrated per-method terms as a profile stores them, keyed by the planner's method id
    (calibration.targets.registry.planner_method; an exact method wins over one costed as it, should two ever map to
    one)."""
    from calibration.targets.registry import planner_method

    out: dict[str, dict[str, Any]] = {}
    for c in sorted(costs, key=lambda c: planner_method(c.method) == c.method):  # exact names last: they win
        out[planner_method(c.method)] = {
            "measured_as": c.method, "t_fixed_draft_s": float(c.t_fixed_draft_s), "t_spec_s": float(c.t_spec_s),
            "t_fixed_draft_s_95": [float(c.t_fixed_draft_s_low), float(c.t_fixed_draft_s_high)],
            "t_spec_s_95": [float(c.t_spec_s_low), float(c.t_spec_s_high)],
            "held": {k: str(v) for k, v in c.held.items()}, "ks": [int(k) for k in c.ks],
            "extra_step_ms_b1": float(c.extra_step_ms_b1), "target_step_ms_b1": float(c.target_step_ms_b1)}
    return out


def profile_acceptance(fits: tuple[AcceptanceFit, ...]) -> dict[str, dict[str, dict[str, Any]]]:
    """Measured acceptance per planner method and workload (the largest-drafts configuration of each), as vLLM
    reports it: mean acceptance length tau (bonus token included) with its 95 % interval, at K."""
    from calibration.targets.registry import planner_method

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for a in sorted(fits, key=lambda a: a.num_drafts):
        if a.method not in ("none",):
            out.setdefault(planner_method(a.method), {})[a.workload] = {
                "measured_as": a.method, "k": int(a.k), "acceptance_length": float(a.acceptance_length),
                "acceptance_length_95": [float(a.acceptance_length_low), float(a.acceptance_length_high)],
                "num_drafts": int(a.num_drafts), "num_requests": int(a.num_requests)}
    return out


def _safe_mape(rows: list[Comparison], split: str | None, full: bool = False, decode: bool = False) -> float:
    try:
        return mape_pct(rows, split, full, decode)
    except ValueError:
        return math.nan


def latest_run_id(store: Store, kind: str) -> str | None:
    for r in store.list_runs(kind=kind):
        if r.status == "succeeded":
            return r.run_id
    return None


def calibrate(store: Store, run_ids: list[str] | None = None, microbench_run_id: str | None = None,
              *, default_eta: tuple[float, float] = (0.5, 0.3)) -> CalibrationReport:
    """Fit everything from the store. Without a microbenchmark run the efficiencies stay at
    `default_eta` (eta_bw, eta_flops) and only the engine's fixed times are fitted."""
    if run_ids is None:
        rid = latest_run_id(store, "engine")
        if rid is None:
            raise ValueError("run_ids: no succeeded engine run in the store; run `python -m calibration run`")
        run_ids = [rid]
    # warm-up groups (status "warmup") and groups refused for machine load ("contaminated",
    # calibration.harness.protocol) are stored for inspection, never fitted
    every = store.groups(run_ids)
    records = [r for r in every if (r.source == "engine" or r.wall_time_s > 0) and r.status == "finished"]
    load = load_summary(every)
    if not records:
        why = f" ({load['refused']} left out as contaminated by machine load)" if load["refused"] else ""
        raise ValueError(f"run_ids={run_ids}: no group records in the store {store.display_url}{why}")
    hw = machine_for(records)
    gpu = getattr(hw, "kind", "gpu") == "gpu"
    step_fit = None
    # a catalogue GPU starts from its kernel-fitted efficiencies (the calibration refines them)
    eta_bw, eta_flops = (hw.efficiency.eta_bw, hw.efficiency.eta_flops) if gpu else default_eta
    if microbench_run_id is None:
        microbench_run_id = latest_run_id(store, "microbench")
    if microbench_run_id:
        samples = store.step_samples([microbench_run_id])
        step_fit = fit_microbench(samples, model=records[0].model, hw=hw)
        eta_bw, eta_flops = step_fit.as_dict()["eta_bw"], step_fit.as_dict()["eta_flops"]
    train, _held = split_holdout(records)
    # two stages: the machine (baseline, n-gram, draft-model groups), then each head method's own terms on it
    engine_fit = fit_engine([r for r in train if r.method not in HEAD_METHODS], eta_bw=eta_bw, eta_flops=eta_flops,
                            hw=hw)
    params = EngineParams(**engine_fit.extra["params"])
    method_fits = fit_method_terms(train, params, hw=hw)
    for method, fr in method_fits.items():
        params = params.with_method_terms(method, **fr.as_dict())
    rows = compare(records, params, train, hw=hw)
    return CalibrationReport(
        run_ids=tuple(run_ids), microbench_run_id=microbench_run_id,
        acceptance=tuple(fit_acceptance(records)) if any(r.method != "none" for r in records) else (),
        step_fit=step_fit, engine_fit=engine_fit, params=params, comparisons=tuple(rows),
        method_fits=method_fits, method_costs=method_costs(method_fits, train, params, hw=hw),
        mape_train_pct=_safe_mape(rows, "train"), mape_holdout_pct=_safe_mape(rows, "held_out"),
        mape_holdout_full_pct=_safe_mape(rows, "held_out", full=True),
        mape_holdout_decode_pct=_safe_mape(rows, "held_out", decode=True), hardware=hw.name,
        base_hardware=hw.name if gpu else "",
        device_count=int(records[0].extra.get("device_count", 1)) if gpu else 0,
        engine_version=f"vllm {records[0].engine_version}" if records[0].engine_version else "",
        load_refused_groups=int(load["refused"]), max_foreign_cpu_share=load["max_share"],
        max_foreign_share_allowed=load["allowed"],
    )


def load_summary(groups: list[Any]) -> dict[str, float]:
    """Over a run's groups: how many were refused as "contaminated", the largest foreign CPU share recorded
    (warm-up groups included: they ran on the same machine) and the run's threshold (NaN when unknown)."""
    shares = [float(s) for g in groups if (s := g.extra.get("foreign_cpu_share")) is not None
              and not math.isnan(float(s))]
    limits = {float(g.extra["max_foreign_share"]) for g in groups if "max_foreign_share" in g.extra}
    return {"refused": float(sum(1 for g in groups if g.status == "contaminated")),
            "max_share": max(shares) if shares else math.nan,
            "allowed": min(limits) if limits else math.nan}


def format_acceptance(fits: tuple[AcceptanceFit, ...] | list[AcceptanceFit]) -> str:
    lines = [f"{'config':34} {'workload':8} {'drafts':>6} {'reqs':>5} {'tau [95% CI]':>22}  "
             "p_i (unconditional) [Jeffreys 95%]"]
    for a in fits:
        per = ", ".join(f"{p:.2f}[{lo:.2f},{hi:.2f}]" for p, lo, hi in zip(a.p_per_pos, a.p_low, a.p_high,
                                                                           strict=True))
        lines.append(f"{a.config_label:34} {a.workload:8} {a.num_drafts:6d} {a.num_requests:5d} "
                     f"{a.acceptance_length:6.3f} [{a.acceptance_length_low:5.2f},{a.acceptance_length_high:5.2f}]"
                     f"   {per}")
    return "\n".join(lines)


def format_methods(rep: CalibrationReport) -> str:
    """Per method: its calibrated draft cost (calibration.analysis.method_costs) and predicted against measured
    throughput over its groups (fitted and held out), the MAPE of each split."""
    from calibration.analysis.method_costs import format_method_costs

    lines = []
    if rep.method_costs:
        lines += ["== draft cost per method (per draft pass and per verifier step, 95 % CI)",
                  format_method_costs(rep.method_costs)]
    lines.append(f"== predicted vs measured per method (output tokens/s, mean over groups; MAPE)\n"
                 f"{'method':12} {'split':8} {'groups':>6} {'measured':>9} {'predicted':>9} {'MAPE %':>7} "
                 f"{'MAPE % (tau predicted)':>22}")
    for method in sorted({c.method for c in rep.comparisons}):
        for split in ("train", "held_out"):
            rows = [c for c in rep.comparisons if c.method == method and c.split == split]
            if not rows:
                continue
            meas = sum(c.measured_output_tokens_per_s for c in rows) / len(rows)
            pred = sum(c.predicted_output_tokens_per_s for c in rows) / len(rows)
            full = rep.method_mape_pct(method, split, full=True)
            lines.append(f"{'baseline' if method == 'none' else method:12} {split:8} {len(rows):6d} {meas:9.1f} "
                         f"{pred:9.1f} {rep.method_mape_pct(method, split):7.1f} "
                         f"{'-' if not math.isfinite(full) else f'{full:.1f}':>22}")
    return "\n".join(lines)


def format_fit(fr: FitResult, title: str) -> str:
    # a parameter held at a prior has no standard error: say which prior instead of "± nan"
    parts = [f"{n}={p:.4g} " + (f"({fr.held[n]})" if n in fr.held else f"± {s:.2g}")
             for n, p, s in zip(fr.names, fr.params, fr.stderr, strict=True)]
    rms = math.sqrt(sum(r * r for r in fr.residuals) / max(len(fr.residuals), 1))
    return f"{title}: {'; '.join(parts)} (n={fr.n_points}, rms rel. residual {rms:.3f}, {fr.message})"


def predicted_step_times_s(samples: list[dict[str, Any]], *, eta_bw: float, eta_flops: float,
                           t_fixed_s: float) -> list[float]:
    """The roofline step time (planner.physics.roofline.step_time_s on this machine, efficiencies as given) of each
    microbenchmark sample (its model, dtype, batch, tokens per sequence and context), in seconds: what the
    step-time fit predicts for the points it was fitted on."""
    from calibration.analysis.predict import engine_net, machine
    from calibration.targets import model_assets
    from planner.physics.roofline import hw_params, step_time_s

    hw = dataclasses.replace(hw_params(machine()), eta_bw=eta_bw, eta_flops=eta_flops)
    out = []
    for s in samples:
        net = engine_net(s.get("model", model_assets.TARGET_NAME), s.get("dtype", "bfloat16"))
        t, _ = step_time_s(net, hw, batch=s["batch"], tokens_per_seq=s["tokens_per_seq"],
                           context_tokens=s["context_tokens"], t_fixed_s=t_fixed_s)
        out.append(float(t))
    return out
