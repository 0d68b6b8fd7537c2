"""`python -m planner ...`: the planner for scripts, notebooks and CI jobs; prints JSON.

    python -m planner convert --acceptance-length 2.8 --k 3
    python -m planner evaluate --model llama-3.1-8b --hardware h100-sxm --method eagle3 --k 4 --batch 8 --alpha 0.7
    python -m planner compare --model llama-3.3-70b --hardware h100-sxm --tp 4 --workload code
    python -m planner levers --model llama-3.3-70b --hardware h100-sxm --tp 4 --method draft_model
    python -m planner list models|hardware|methods|workloads|languages|levers
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from planner import acceptance as acc
from planner.types import Acceptance, Scenario


def _catalog():
    # profiles depends on planner, not the other way round; the CLI is the one place that joins them.
    from profiles import load_catalog

    return load_catalog()


def _json_default(o: Any):
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(obj: Any) -> Any:
    """inf/nan are not JSON: write them as null (with the key kept)."""
    if isinstance(obj, float) and (math.isinf(obj) or math.isnan(obj)):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _print(obj: Any) -> None:
    print(json.dumps(_clean(obj), indent=2, default=_json_default, allow_nan=False))


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--alpha-per-position={text!r}: expected comma-separated numbers like 0.8,0.7,0.6"
        ) from None


def _add_acceptance(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--alpha", type=float, help="per-token acceptance alpha (i.i.d. over positions)")
    g.add_argument("--alpha-per-position", type=_floats, help="conditional per-token alpha per position")
    g.add_argument("--draft-acceptance-rate", type=float, help="vLLM's accepted / drafted, in [0, 1]")
    g.add_argument("--acceptance-length", type=float, help="tokens per verifier step, bonus included")


def _add_scenario(p: argparse.ArgumentParser, *, method_required: bool) -> None:
    p.add_argument("--model", required=True)
    p.add_argument("--hardware", required=True)
    p.add_argument("--method", required=method_required, default="eagle3")
    p.add_argument("--k", type=int, default=None, help="draft tokens per step (default: the method's)")
    p.add_argument("--batch", type=int, default=None, help="concurrent sequences (default: best under SLO)")
    p.add_argument("--workload", default="chat")
    p.add_argument("--language", default="english")
    p.add_argument("--context-tokens", type=int)
    p.add_argument("--prompt-tokens", type=int)
    p.add_argument("--output-tokens", type=int)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dtype", choices=["bf16", "fp8"], default="bf16")
    p.add_argument("--usd-per-gpu-hour", type=float)
    p.add_argument("--tpot-slo-ms", type=float, default=50.0)
    p.add_argument("--draft-cost-ratio", type=float, help="override c = draft pass time / target step time")
    p.add_argument("--tuned", action="store_true", help="use the method's tuned alpha range")
    p.add_argument("--tree", action="store_true", help="tree verification (methods that support it)")
    p.add_argument("--monthly-output-tokens", type=float, default=1e10)
    _add_acceptance(p)


def _acceptance(args) -> Acceptance | None:
    if args.alpha is not None:
        return Acceptance("per_token", value=args.alpha)
    if args.alpha_per_position is not None:
        return Acceptance("per_token", per_position=args.alpha_per_position)
    if args.draft_acceptance_rate is not None:
        return Acceptance("draft_acceptance_rate", value=args.draft_acceptance_rate)
    if args.acceptance_length is not None:
        return Acceptance("acceptance_length", value=args.acceptance_length)
    return None


def _scenario(args, catalog) -> Scenario:
    method = catalog.methods[args.method]
    k = args.k if args.k is not None else (
        len(args.alpha_per_position) if args.alpha_per_position else method.default_k)
    return Scenario(
        model=args.model, hardware=args.hardware, method=args.method, k=k, batch=args.batch,
        acceptance=_acceptance(args), workload=args.workload, language=args.language,
        context_tokens=args.context_tokens, prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens, tp=args.tp, dtype=args.dtype,
        usd_per_gpu_hour=args.usd_per_gpu_hour, tpot_slo_ms=args.tpot_slo_ms,
        draft_cost_ratio=args.draft_cost_ratio, tuned=args.tuned, tree=args.tree,
        monthly_output_tokens=args.monthly_output_tokens,
    )


def cmd_convert(args) -> Any:
    return acc.convert(k=args.k, alpha=args.alpha, draft_acceptance_rate_value=args.draft_acceptance_rate,
                       acceptance_length_value=args.acceptance_length)


def cmd_evaluate(args) -> Any:
    from planner.scenario import evaluate

    cat = _catalog()
    s = _scenario(args, cat)
    ev = evaluate(s, cat)
    out = ev.to_dict()
    out["conventions"] = {
        "alpha_per_token": "i.i.d. per-token alpha with the same acceptance length",
        "alpha_per_position": "conditional per-token acceptance at each draft position",
        "draft_acceptance_rate": "vLLM: accepted / drafted = (acceptance_length - 1) / K",
        "acceptance_length": "tokens per verifier step, bonus token included",
    }
    out["assumptions"] = _assumptions(cat, s)
    return out


def _assumptions(cat, s: Scenario) -> dict:
    hw = cat.hardware[s.hardware]
    eff = s.efficiency or hw.efficiency
    return {
        "price": {"usd_per_gpu_hour": s.usd_per_gpu_hour or hw.usd_per_gpu_hour_mid,
                  "source": "user" if s.usd_per_gpu_hour else hw.price.source,
                  "date": None if s.usd_per_gpu_hour else hw.price.date},
        "efficiency": {"eta_bw": eff.eta_bw, "eta_flops": eff.eta_flops, "t_fixed_s": eff.t_fixed_s,
                       "source": eff.source.source, "date": eff.source.date},
        "prefill": "prompt GPU time (compute-bound) charged to output tokens in usd_per_mtok; "
                   "TPOT is decode-only",
    }


def cmd_compare(args) -> Any:
    from planner.scenario import compare

    cat = _catalog()
    s = _scenario(args, cat)
    return {"model": s.model, "hardware": s.hardware, "workload": s.workload, "tpot_slo_ms": s.tpot_slo_ms,
            "note": "each method at its own best K and batch under the same TPOT SLO; baseline at its own "
                    "best batch",
            "methods": compare(s, cat), "assumptions": _assumptions(cat, s)}


def cmd_levers(args) -> Any:
    from planner.levers import order_by_return, waterfall

    cat = _catalog()
    s = _scenario(args, cat)
    steps = waterfall(s, cat)
    order = order_by_return(steps)
    return {"article_order": [st.to_dict() for st in steps],
            "by_return": [st.to_dict() for st in waterfall(s, cat, order=order)]}


def cmd_list(args) -> Any:
    cat = _catalog()
    table = getattr(cat, args.what)
    return {name: getattr(rec, "label", name) for name, rec in table.items()}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m planner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="convert between the three acceptance conventions")
    c.add_argument("--k", type=int, required=True)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--alpha", type=float)
    g.add_argument("--draft-acceptance-rate", type=float)
    g.add_argument("--acceptance-length", type=float)
    c.set_defaults(func=cmd_convert)
    e = sub.add_parser("evaluate", help="one scenario")
    _add_scenario(e, method_required=True)
    e.set_defaults(func=cmd_evaluate)
    m = sub.add_parser("compare", help="every method at iso-TPOT-SLO")
    _add_scenario(m, method_required=False)
    m.set_defaults(func=cmd_compare)
    lv = sub.add_parser("levers", help="the seven levers as a waterfall")
    _add_scenario(lv, method_required=False)
    lv.set_defaults(func=cmd_levers)
    ls = sub.add_parser("list", help="names in the profiles")
    ls.add_argument("what", choices=["models", "hardware", "methods", "workloads", "languages", "levers"])
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _print(args.func(args))
    except KeyError as exc:  # unknown names: the message lists the valid ones and the closest match
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
