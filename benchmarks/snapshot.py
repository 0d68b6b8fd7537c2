"""Snapshot the planner's answers, then compare two snapshots field by field (a refactor must not move them).

    python benchmarks/snapshot.py --out /tmp/before.json          # on the old code
    python benchmarks/snapshot.py --out /tmp/after.json           # on the new code
    python benchmarks/snapshot.py --compare /tmp/before.json /tmp/after.json [--rtol 1e-9]

Covers the CLI's JSON (plan, compare, evaluate, levers, convert, with and without a traffic file, fleet, trees,
DP attention, fp8, several GPUs and models), the sensitivity functions (batch sweep, tree vs chain, best K per batch,
the alpha x K heatmap, tornado, a seeded Monte Carlo) and the traffic profiles of the shipped samples. Each case is
an argv or a named call, so the same list runs on any layout of the code; only `_api()` knows module names.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

M70 = ["--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4"]
M8 = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm"]
CLI_CASES: dict[str, list[str]] = {
    "plan_default": ["plan", *M70],
    "plan_business_30ms_10B": ["plan", *M70, "--daily-shape", "business_hours", "--tpot-slo-ms", "30",
                               "--monthly-output-tokens", "1e10"],
    "plan_business_30ms_500B": ["plan", *M70, "--daily-shape", "business_hours", "--tpot-slo-ms", "30",
                                "--monthly-output-tokens", "5e11"],
    "plan_code_traffic": ["plan", *M8, "--traffic", "profiles/samples/code_completion.jsonl"],
    "plan_bilingual_traffic": ["plan", *M70, "--traffic", "profiles/samples/bilingual_saas.csv",
                               "--monthly-output-tokens", "5e10"],
    "plan_rag_traffic": ["plan", "--model", "llama-3.3-70b", "--hardware", "h200", "--tp", "2",
                         "--traffic", "profiles/samples/rag_summarization.parquet",
                         "--daily-shape", "consumer_evening"],
    "plan_h200_tp8_fp8kv": ["plan", "--model", "llama-3.3-70b", "--hardware", "h200", "--tp", "8",
                            "--daily-shape", "business_hours", "--kv-dtype", "fp8"],
    "plan_tree_sglang": ["plan", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "8",
                         "--tree-steps", "8", "--tree-topk", "8", "--tree-draft-tokens", "64"],
    "plan_deepseek_dp": ["plan", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--dtype", "fp8",
                         "--attention-dp"],
    "plan_deepseek_tp": ["plan", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--dtype", "fp8",
                         "--workload", "code"],
    "plan_current_eagle3_tuned": ["plan", *M70, "--current-method", "eagle3", "--tuned", "--workload", "code",
                                  "--tpot-slo-ms", "30"],
    "plan_measured_alpha": ["plan", *M8, "--method", "eagle3", "--acceptance-length", "2.8", "--k", "3",
                            "--workload", "chat", "--usd-per-gpu-hour", "2.5"],
    "plan_a100": ["plan", "--model", "llama-3.1-8b", "--hardware", "a100-80gb-sxm", "--workload", "reasoning",
                  "--horizon-months", "24", "--discount-rate", "0.08"],
    "plan_b200_fp8": ["plan", "--model", "llama-3.3-70b", "--hardware", "b200", "--tp", "2", "--dtype", "fp8",
                      "--language", "cantonese"],
    "plan_mi300x": ["plan", "--model", "llama-3.3-70b", "--hardware", "mi300x", "--tp", "2",
                    "--workload", "rag_summarization"],
    "plan_l40s": ["plan", "--model", "llama-3.1-8b", "--hardware", "l40s", "--tpot-slo-ms", "80"],
    "compare_code_30": ["compare", *M70, "--workload", "code", "--tpot-slo-ms", "30"],
    "compare_measured": ["compare", *M70, "--method", "medusa", "--alpha", "0.7"],
    "evaluate_eagle3": ["evaluate", *M8, "--method", "eagle3", "--k", "4", "--batch", "8", "--alpha", "0.7"],
    "evaluate_best_batch": ["evaluate", *M8, "--method", "p_eagle", "--workload", "code"],
    "evaluate_tree": ["evaluate", *M70, "--method", "eagle3", "--tree", "--acceptance-length", "3.1", "--batch", "2"],
    "evaluate_draft_model": ["evaluate", *M70, "--method", "draft_model", "--k", "4", "--batch", "16"],
    "evaluate_mtp": ["evaluate", "--model", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--dtype", "fp8",
                     "--method", "mtp", "--k", "1", "--batch", "1", "--draft-acceptance-rate", "0.8"],
    "evaluate_ngram": ["evaluate", *M8, "--method", "ngram", "--k", "3", "--batch", "4", "--workload", "code",
                       "--alpha-per-position", "0.8,0.7,0.6"],
    "levers_draft_model": ["levers", *M70, "--method", "draft_model"],
    "levers_eagle3_code": ["levers", *M70, "--method", "eagle3", "--workload", "code"],
    "convert_tau": ["convert", "--acceptance-length", "2.8", "--k", "3"],
    "convert_rate": ["convert", "--draft-acceptance-rate", "0.6", "--k", "5"],
}


def _json(obj: Any) -> Any:
    """Dataclasses, numpy arrays and scalars -> plain JSON values (inf/nan as strings, so they compare)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _json(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    return obj


def _cli(argv: list[str]) -> Any:
    from cli.main import main

    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        rc = main(argv)
    if rc != 0:
        return {"rc": rc, "stderr": err.getvalue()}
    return json.loads(buf.getvalue())


def _api():
    """The module names of today's layout (the one place to edit when code moves)."""
    import types  # noqa: PLC0415

    from planner.plan import PlanRequest
    from planner.search import batch_sweeps
    from planner.uncertainty import sensitivity
    from profiles import load_catalog
    from profiles.traffic import parse_traffic

    sens = types.SimpleNamespace(**{k: v for m in (batch_sweeps, sensitivity) for k, v in vars(m).items()})
    return load_catalog(), PlanRequest, sens, parse_traffic


def _api_cases() -> dict[str, Any]:
    import numpy as np

    cat, PlanRequest, sens, parse_traffic = _api()
    req = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, workload="code", tpot_slo_ms=30)
    req8 = PlanRequest(model="llama-3.1-8b", hardware="h200", workload="chat")
    out: dict[str, Any] = {
        "batch_sweep_eagle3": sens.batch_sweep(req, cat, "eagle3"),
        "batch_sweep_mtp": sens.batch_sweep(
            PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8"), cat, "mtp"),
        "tree_vs_chain": sens.tree_vs_chain(req, cat, "eagle3"),
        "optimal_k_by_batch": sens.optimal_k_by_batch(req8, cat, "eagle3", [1, 4, 16, 64, 256]),
        "alpha_k_heatmap": sens.alpha_k_heatmap(req8, cat, "medusa", batch=4, alphas=np.linspace(0.4, 0.9, 6)),
        "tornado": sens.tornado(req, cat, "eagle3"),
        "monte_carlo": sens.monte_carlo(req, cat, "eagle3", k=3, samples=200, seed=11),
        "monte_carlo_fixed_price": sens.monte_carlo(req8, cat, "p_eagle", k=2, samples=100, seed=3,
                                                    sample_price=False),
    }
    for name in ("code_completion.jsonl", "bilingual_saas.csv", "rag_summarization.parquet",
                 "template_requests.csv", "template_mix.csv"):
        path = ROOT / "profiles" / "samples" / name
        prof = parse_traffic(name, path.read_bytes(), cat)
        arr = prof.hourly_arrivals("business_hours")
        out[f"traffic_{name}"] = {
            "mix": prof.mix_key(), "monthly_output_tokens": prof.monthly_output_tokens,
            "concurrency_50ms": prof.concurrency(50.0, quantile=0),
            "hourly": None if arr is None else _json(arr),
        }
    return out


def snapshot() -> dict[str, Any]:
    out = {f"cli:{k}": _cli(v) for k, v in CLI_CASES.items()}
    out.update({f"api:{k}": v for k, v in _api_cases().items()})
    return _json(out)


def compare(a: Any, b: Any, *, rtol: float, path: str = "") -> list[str]:
    """Field-by-field differences: numbers within rtol (relative), everything else equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}.{k}: only before" for k in a.keys() - b.keys()]
        diffs += [f"{path}.{k}: only after" for k in b.keys() - a.keys()]
        for k in sorted(a.keys() & b.keys()):
            diffs += compare(a[k], b[k], rtol=rtol, path=f"{path}.{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in compare(x, y, rtol=rtol, path=f"{path}[{i}]")]
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if a == b or abs(a - b) <= rtol * max(abs(a), abs(b)):
            return []
        return [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {str(a)[:200]!r} != {str(b)[:200]!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--rtol", type=float, default=1e-9)
    ap.add_argument("--only", default="", help="compare only keys starting with this prefix")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.compare)
        if args.only:
            a = {k: v for k, v in a.items() if k.startswith(args.only)}
            b = {k: v for k, v in b.items() if k.startswith(args.only)}
        diffs = compare(a, b, rtol=args.rtol)
        for d in diffs[:400]:
            print(d)
        print(f"{len(diffs)} differences over {len(a)} cases")
        return 1 if diffs else 0
    if not args.out:
        ap.error("--out FILE or --compare BEFORE AFTER")
    snap = snapshot()
    args.out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"{len(snap)} cases -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
