"""`python -m planner ...`: the planner for scripts, notebooks and CI jobs; prints JSON.

    python -m planner convert --acceptance-length 2.8 --k 3
    python -m planner evaluate --model llama-3.1-8b --hardware h100-sxm --method eagle3 --k 4 --batch 8 --alpha 0.7
    python -m planner compare --model llama-3.3-70b --hardware h100-sxm --tp 4 --workload code
    python -m planner plan --model llama-3.3-70b --hardware h100-sxm --tp 4 [--traffic FILE] [--current-method X]
    python -m planner plan --model-config config.json --hardware h200 --tp 8   (your own model)
    python -m planner plan --model llama-3.1-8b --hardware-spec my_gpu.yaml   (your own GPU)
    python -m planner plan --model llama-3.3-70b --hardware h100-sxm --tp 4 --spend-usd-per-month 100000 --gpus 32
    python -m planner plan --model llama-3.3-70b --hardware h100-sxm --tp 4 --compare-hardware [--gpu-price h200=3.1]
    python -m planner report --format pdf --out plan.pdf --model llama-3.3-70b --hardware h100-sxm --tp 4  (the board
        report: the flags of `plan`, written as PDF or HTML)
    python -m planner levers --model llama-3.3-70b --hardware h100-sxm --tp 4 --method draft_model
    python -m planner list models|hardware|methods|workloads|languages|levers
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli import flags
from planner.acceptance import rates as acc
from planner.formatting import json_text, jsonable, plan_dict
from planner.request import DEFAULT_MONTHLY_OUTPUT_TOKENS, PlanRequest
from planner.types import Acceptance, Scenario


def _catalog(args=None):
    """The catalogue; with --model-config FILE, plus the model parsed from that config.json (named `config:<digest>`,
    which becomes args.model; its checkpoint's weight format becomes --dtype unless one was given)."""
    # profiles depends on planner, not the other way round; the CLI is the one place that joins them.
    from profiles import load_catalog

    if getattr(args, "traffic", None) or getattr(args, "model_config", None):
        from profiles import sandbox  # the readers' fork server warms up while the catalogue loads

        sandbox.start()
    cat = load_catalog()
    path = getattr(args, "model_config", None)
    if path:
        from profiles.uploads import read_model_config  # in a child process, under the OS limits

        try:
            with open(path, "rb") as fh:
                data = fh.read(2_000_001)
        except OSError as exc:
            raise ValueError(f"--model-config={path!r}: cannot read the file ({exc.strerror})") from None
        parsed = read_model_config(data)
        cat = cat.with_models({parsed.spec.name: parsed.spec})
        args.model = parsed.spec.name
        if args.dtype is None:
            args.dtype = parsed.weight_dtype or "bf16"
        args.parsed_model = parsed
    if args is not None and getattr(args, "dtype", "") is None:
        args.dtype = "bf16"
    if getattr(args, "hardware_spec", None):  # named `spec:<digest>`, which becomes args.hardware
        from profiles.hardware_spec import read_hardware_spec, with_hardware_spec

        spec = read_hardware_spec(args.hardware_spec)
        cat, args.hardware = with_hardware_spec(cat, spec), spec.name
    return cat


def _model_json(args) -> dict[str, Any] | None:
    """What --model-config parsed: the catalogue entry, its parameter breakdown and what was assumed."""
    parsed = getattr(args, "parsed_model", None)
    if parsed is None:
        return None
    import dataclasses

    return {"name": parsed.spec.name, "spec": dataclasses.asdict(parsed.spec), "weight_dtype": parsed.weight_dtype,
            "params_b": dict(parsed.breakdown), "notes": list(parsed.notes)}


def _print(obj: Any) -> None:
    print(json_text(obj))


def _per_position(args) -> tuple[float, ...] | None:
    """The conditional per-token alpha per position given by --alpha-per-position or read from --acceptance-file."""
    f = getattr(args, "acceptance_file", None)
    return (f.per_position or None) if f is not None else args.alpha_per_position


def _acceptance(args) -> Acceptance | None:
    f = getattr(args, "acceptance_file", None)
    spread = f.tpot_spread if f is not None else None  # a per-request file's measured TPOT spread
    if f is not None and not f.k:  # a per-request file without num_spec_tokens: its tau at --k or the method's K
        return Acceptance("acceptance_length", value=f.acceptance_length, tpot_spread=spread)
    if args.alpha is not None:
        return Acceptance("per_token", value=args.alpha)
    if _per_position(args) is not None:
        return Acceptance("per_token", per_position=_per_position(args), tpot_spread=spread)
    if args.draft_acceptance_rate is not None:
        return Acceptance("draft_acceptance_rate", value=args.draft_acceptance_rate)
    if args.acceptance_length is not None:
        return Acceptance("acceptance_length", value=args.acceptance_length)
    return None


def tree_shape(args):
    """--tree FILE or --tree-steps/--tree-topk/--tree-draft-tokens -> planner.acceptance.trees.TreeShape (None: no
    stated tree)."""
    from planner.acceptance.trees import TreeShape

    sg = (args.tree_steps, args.tree_topk, args.tree_draft_tokens)
    if any(v is not None for v in sg):
        if None in sg:
            raise ValueError("--tree-steps, --tree-topk and --tree-draft-tokens go together (SGLang's three flags)")
        return TreeShape.from_sglang(*sg)
    if args.tree in (None, "default"):
        return None
    try:
        doc = json.loads(open(args.tree, encoding="utf-8").read())
    except OSError as exc:
        raise ValueError(f"--tree={args.tree!r}: cannot read the file ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--tree={args.tree!r}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(doc, dict) and "sglang" in doc:
        return TreeShape.from_sglang(*doc["sglang"])
    return TreeShape.from_vllm_token_tree(doc if not isinstance(doc, str) else doc)


def _scenario(args, catalog) -> Scenario:
    method = catalog.methods[args.method]
    shape = tree_shape(args)
    k = args.k if args.k is not None else (
        shape.depth if shape is not None else
        len(_per_position(args)) if _per_position(args) else method.default_k)
    return Scenario(
        model=args.model, hardware=args.hardware, method=args.method, k=k, batch=args.batch,
        acceptance=_acceptance(args), workload=args.workload, language=args.language,
        context_tokens=args.context_tokens, prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens, tp=args.tp, attention_dp=args.attention_dp, dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        usd_per_gpu_hour=args.usd_per_gpu_hour, tpot_slo_ms=args.tpot_slo_ms,
        draft_cost_ratio=args.draft_cost_ratio, tuned=args.tuned, tree=args.tree is not None or shape is not None,
        tree_shape=shape,
        monthly_output_tokens=args.monthly_output_tokens, temperature=args.temperature,
        engine=getattr(args, "engine", PlanRequest.engine), engine_version=getattr(args, "engine_version", None),
    )


def cmd_convert(args) -> Any:
    return acc.convert(k=args.k, alpha=args.alpha, draft_acceptance_rate_value=args.draft_acceptance_rate,
                       acceptance_length_value=args.acceptance_length)


def cmd_evaluate(args) -> Any:
    import dataclasses

    from planner.search.scenario import best_batch, evaluate

    cat = _catalog(args)
    s = _scenario(args, cat)
    batch_source = "entered (--batch)"
    if s.batch is None:  # the batch plan() would choose at this K
        s = dataclasses.replace(s, batch=best_batch(s, cat))
        batch_source = "the cheapest batch under the TPOT SLO that fits memory, at this K (no --batch given)"
    ev = evaluate(s, cat)
    out = ev.to_dict()
    out["batch_source"] = batch_source
    out["engine"] = s.engine
    out["conventions"] = {
        "alpha_per_token": "i.i.d. per-token alpha with the same acceptance length",
        "alpha_per_position": "conditional per-token acceptance at each draft position",
        "draft_acceptance_rate": "vLLM: accepted / drafted = (acceptance_length - 1) / K",
        "acceptance_length": "tokens per verifier step, bonus token included",
    }
    out["assumptions"] = _assumptions(cat, s)
    if _model_json(args):
        out["model_config"] = _model_json(args)
    return out


def _assumptions(cat, s: Scenario) -> dict:
    from planner.context import efficiency_for  # noqa: PLC0415
    from planner.price import gpu_price  # noqa: PLC0415

    hw = cat.hardware[s.hardware]
    price = gpu_price(hw, s.usd_per_gpu_hour)
    # what the step time and speculation ran with (fit, borrowed, default; the engine's speculation terms)
    eff = efficiency_for(cat, s.hardware, s.dtype, s.efficiency, engine=s.engine, model=cat.models.get(s.model))
    band = (getattr(cat, "fitted_tpot_error", None) or {}).get((s.hardware, s.dtype))
    return {
        "price": {"usd_per_gpu_hour": price.usd_per_gpu_hour, "source": "user" if price.entered else hw.price.source,
                  "date": None if price.entered else hw.price.date},
        "efficiency": {"eta_bw": eff.eta_bw, "eta_flops": eff.eta_flops, "t_fixed_s": eff.t_fixed_s,
                       "source": eff.source.source, "date": eff.source.date,
                       "tpot_error": band},  # relative TPOT error of the step-time set (held-out or stated band)
        "prefill": "prompt GPU time (compute-bound) charged to output tokens in usd_per_mtok; "
                   "TPOT is decode-only",
        "speculation": {"engine": s.engine, "t_spec_s": eff.t_spec_s, "t_fixed_draft_s": eff.t_fixed_draft_s,
                        "sampler_vocab_passes": eff.sampler_vocab_passes},
    }


def _traffic(args, cat):
    """The --traffic file's profile (None without one)."""
    if not getattr(args, "traffic", None):
        return None
    from pathlib import Path

    from profiles.uploads import read_traffic  # in a child process, under the OS limits

    path = Path(args.traffic)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"--traffic={args.traffic!r}: cannot read the file ({exc.strerror})") from None
    return read_traffic(path.name, data, cat)


def traffic_json(prof) -> dict[str, Any]:
    """The traffic summary: the file, its recognised format, its volume and, for a trace with prompt block hashes
    (Mooncake), its prefix-reuse share."""
    reuse = prof.prefix_reuse
    return {"name": prof.name, "format": prof.source_format, "kind": prof.kind, "rows": prof.rows,
            "requests": prof.requests, "span_s": prof.span_s, "monthly_output_tokens": prof.monthly_output_tokens,
            "workload_shares": prof.workload_shares,
            "prefix_reuse": None if reuse is None else {
                "share": reuse.share, "cached_prompt_tokens": reuse.cached_tokens,
                "prompt_tokens": reuse.prompt_tokens, "block_tokens": reuse.block_tokens, "source": reuse.source,
                "note": reuse.note}}


def _plan_request(args, cat, *, levers: bool = False, prof=None):
    """The CLI's flags -> planner.plan.PlanRequest, built by the one traffic-to-request adapter the app uses
    (profiles.request.request_from_traffic); prof: the --traffic profile when the caller has read it already."""
    from planner.plan import CostAssumptions, default_costs
    from profiles.request import request_from_traffic

    prof = prof if prof is not None else _traffic(args, cat)
    costs = default_costs(cat)
    changes = {k: v for k, v in (("engineering_usd_per_week", args.engineering_usd_per_week),
                                 ("annual_discount_rate", args.discount_rate),
                                 ("horizon_months", args.horizon_months)) if v is not None}
    if changes:
        costs = CostAssumptions(**{**costs.__dict__, **changes})
    acceptance = _acceptance(args)
    method = getattr(args, "method", None) or "eagle3"
    k_meas = args.k if args.k is not None else (len(_per_position(args)) if _per_position(args) else None)
    shape = getattr(args, "daily_shape", None)
    return request_from_traffic(
        prof, volume=args.monthly_output_tokens, volume_typed=args.monthly_output_tokens_given,
        volume_label="entered (--monthly-output-tokens)", tpot_slo_ms=args.tpot_slo_ms,
        fleet=prof is not None or shape is not None, shape=shape,
        model=args.model, hardware=args.hardware, tp=args.tp, attention_dp=args.attention_dp, dtype=args.dtype,
        kv_dtype=args.kv_dtype, usd_per_gpu_hour=args.usd_per_gpu_hour,
        workload=args.workload, language=args.language, current_method=getattr(args, "current_method", "none"),
        tuned=args.tuned, costs=costs, acceptance=acceptance,
        acceptance_method=method if acceptance is not None else None, acceptance_k=k_meas,
        acceptance_source=(f"measured: {args.acceptance_file.describe()}"
                           if getattr(args, "acceptance_file", None) is not None else ""),
        levers_start="auto" if levers else None, billing=getattr(args, "billing", PlanRequest.billing),
        confidence=getattr(args, "confidence", PlanRequest.confidence), price_range=getattr(args, "price_range", False),
        engine=getattr(args, "engine", PlanRequest.engine), engine_version=getattr(args, "engine_version", None),
        prefix_cache_share=getattr(args, "prefix_cache_share", None),
        prefix_cache_label="entered (--prefix-cache-share)",
        temperature=args.temperature, ttft_slo_ms=getattr(args, "ttft_slo_ms", None),
        tpot_percentile=getattr(args, "tpot_percentile", PlanRequest.tpot_percentile),
        ttft_percentile=getattr(args, "ttft_percentile", PlanRequest.ttft_percentile))


def with_spend_and_hardware(req, args):
    """--spend-usd-per-month, --gpus, --billing, --compare-hardware, --compare-other-formats, --gpu-price and
    --serving on a plan request."""
    import dataclasses

    return dataclasses.replace(req, spend_usd_per_month=args.spend_usd_per_month, spend_gpus=args.gpus,
                               billing=args.billing, compare_hardware=args.compare_hardware,
                               compare_other_formats=args.compare_other_formats,
                               hardware_prices=tuple(args.gpu_price or ()),
                               serving=getattr(args, "serving", PlanRequest.serving))


def cmd_plan(args) -> Any:
    from planner.plan import plan

    cat = _catalog(args)
    prof = _traffic(args, cat)
    p = plan(with_spend_and_hardware(_plan_request(args, cat, levers=not args.no_levers, prof=prof), args), cat)
    out = plan_dict(p)
    if p.economics.monthly_saving_usd is not None:  # the saving at +-20 % of the SLO (planner.checks.knee)
        from planner.checks.knee import knee_sentence, slo_knee

        knee = slo_knee(p, cat)
        out["slo_knee"] = {**jsonable(knee), "sentence": knee_sentence(knee)}
    if prof is not None:
        out["traffic"] = traffic_json(prof)
    if _model_json(args):
        out["model_config"] = _model_json(args)
    return out


def cmd_report(args) -> Any:
    """The board report (report.board) of the plan `plan` gives for the same flags, written to --out as a PDF or an
    HTML page; prints where it went and the decision."""
    import datetime as dt

    from planner.plan import plan
    from planner.request import PlanError
    from report.board import board_report
    from report.board_html import board_html
    from report.board_pdf import board_pdf

    cat = _catalog(args)
    prof = _traffic(args, cat)
    p = plan(with_spend_and_hardware(_plan_request(args, cat, levers=not args.no_levers, prof=prof), args), cat)
    r = board_report(p, cat, generated=dt.date.today().isoformat(), lang=args.lang)
    data = board_pdf(r) if args.format == "pdf" else board_html(r).encode("utf-8")
    out = Path(args.out)
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise PlanError("--out", args.out, f"a file in a folder that exists and can be written ({exc.strerror})"
                        ) from None
    return {"report": str(out), "format": args.format, "bytes": len(data), "decision": r.decision}


def cmd_compare(args) -> Any:
    """Every method at its own best K and batch under the same SLO (plan()'s methods table). A measured
    acceptance applies to --method only; the other methods keep the profiles' acceptance."""
    from planner.plan import plan

    cat = _catalog(args)
    p = plan(_plan_request(args, cat), cat)
    out = plan_dict(p)
    return {"model": args.model, "hardware": args.hardware, "tpot_slo_ms": args.tpot_slo_ms,
            "note": "each method at its own best K and batch under the same TPOT SLO; baseline at its own best "
                    "batch" + (f"; the measured acceptance applies to {args.method} only" if _acceptance(args) else ""),
            "baseline": out["baseline"], "methods": out["methods"], "assumptions": out["assumptions"],
            **({"model_config": _model_json(args)} if _model_json(args) else {})}


def cmd_levers(args) -> Any:
    from planner.decision.levers import summarize
    from planner.plan import default_costs, levers, order_by_return

    cat = _catalog(args)
    req = _plan_request(args, cat)
    start = args.method or "none"  # the starting (today's) method; none: step 0 adopts EAGLE-3 if it pays
    steps = levers(req, cat, start)
    order = order_by_return(steps)
    costs = req.costs or default_costs(cat)
    total = summarize(steps, req.monthly_output_tokens, horizon_months=costs.horizon_months,
                      annual_discount_rate=costs.annual_discount_rate)
    return {"start": start, "billing": req.billing, "applied_set": total.__dict__,
            "article_order": [st.__dict__ for st in steps],
            "by_return": [st.__dict__ for st in levers(req, cat, start, order)]}


def cmd_list(args) -> Any:
    cat = _catalog()
    table = getattr(cat, args.what)
    return {name: getattr(rec, "label", name) for name, rec in table.items()}


def build_parser() -> argparse.ArgumentParser:
    p = flags.Parser(prog="python -m planner", description=__doc__,
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
    flags.add_scenario(e, method_required=True)
    e.set_defaults(func=cmd_evaluate)
    m = sub.add_parser("compare", help="every method at iso-TPOT-SLO")
    flags.add_scenario(m, method_required=False)
    flags.add_plan_flags(m)
    m.set_defaults(func=cmd_compare)
    lv = sub.add_parser("levers", help="the seven levers as a waterfall")
    flags.add_scenario(lv, method_required=False)
    flags.add_plan_flags(lv)
    pl = sub.add_parser("plan", help="the whole answer: recommendation, baseline, methods, economics, levers")
    rp = sub.add_parser("report", help="the board report (PDF or HTML) of the plan for the same flags as `plan`")
    rp.add_argument("--format", choices=["pdf", "html"], default="pdf", help="the report's format (default pdf)")
    rp.add_argument("--out", required=True, help="the file to write the report to")
    rp.add_argument("--lang", choices=["en", "zh-CN"], default="en",
                    help="the report's language (default en; zh-CN: Simplified Chinese, the planner's sentences stay "
                         "English)")
    rp.set_defaults(func=cmd_report)
    for parser in (pl, rp):  # `report` takes the flags of `plan`
        flags.add_plan_command_flags(parser)
    pl.set_defaults(func=cmd_plan)
    lv.set_defaults(func=cmd_levers)
    ls = sub.add_parser("list", help="names in the profiles")
    ls.add_argument("what", choices=["models", "hardware", "methods", "workloads", "languages", "levers"])
    ls.set_defaults(func=cmd_list)
    return p


def _refuse(exc: Exception) -> int:
    """A refused input as one `error: ...` line on stderr (a message's own line breaks become spaces); exit code 2."""
    print("error: " + " ".join(str(exc).split()), file=sys.stderr)
    return 2


def main(argv: list[str] | None = None, *, emit: Callable[[Any], None] = _print) -> int:
    """Run one command; a refused input (a UsageError of cli.flags, or a ValueError/KeyError subclass the planner and
    the profiles' readers raise: PlanError, TrafficError, ModelConfigError, MeasuredAcceptanceError, an unknown name) is
    one `error:` line and exit code 2. emit: what writes the command's result (default: JSON on stdout, inf/nan as
    null); benchmarks/fuzz_cli.py passes one that also keeps the result as computed, NaN included."""
    try:
        args = build_parser().parse_args(argv)
    except flags.UsageError as exc:
        return _refuse(exc)
    if hasattr(args, "monthly_output_tokens"):
        args.monthly_output_tokens_given = args.monthly_output_tokens is not None
        if args.monthly_output_tokens is None:
            args.monthly_output_tokens = DEFAULT_MONTHLY_OUTPUT_TOKENS
    try:
        emit(args.func(args))
    except KeyError as exc:  # unknown names: the message lists the valid ones and the closest match
        return _refuse(exc)
    except ValueError as exc:
        return _refuse(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
