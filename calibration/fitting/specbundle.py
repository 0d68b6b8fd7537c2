"""The 90 SpecBundle rows of the published table (`SBD_*`) as planner evaluations (calibration/fitting/speculation.py).

Source: github:sgl-project/SpecForge/docs/spec_bundle/public/raw_data/data.json@d9952d16 (SpecForge PR #382,
2025-12-23; dashboard "Hardware: H200"), measured by SpecForge's benchmarks/bench_eagle3.py: one
`sglang.launch_server` per config with `--max-running-requests` and `--cuda-graph-max-bs` = the batch size, that many
prompts in parallel, temperature 0, max_new_tokens 2048. Speedup = output tok/s with EAGLE-3 / without, at the same
batch size (README beside the table: `verified = yes (speedup derived)`); tau = SGLang's accept_length (tokens per
verify step, bonus included).

The row id states the configuration: SBD_<target>_<benchmark>_<sb|old>_s<steps>t<topk>n<num_draft_tokens>. SGLang's
config maps onto the planner as: K = steps; topk 1: a chain of K drafted tokens, K + 1 = num_draft_tokens verified;
topk > 1: a tree with `steps` draft passes of `topk` tokens per sequence each and num_draft_tokens verified tokens
per sequence (the root included), as the PI5 row of the same engine.

Stated per target (TARGETS): the catalogue model (with why where the row's model is a variant), the dtype and the TP.
The source states neither dtype nor TP. dtype: bench_eagle3.py's documented command passes `--dtype bfloat16`, so the
BF16 checkpoint; Kimi-K2-Instruct ships only an FP8 (block-128) checkpoint. TP: the smallest TP at which the target's
weights fit on H200 by the planner's own memory rule (planner.physics.roofline: 90 % of HBM, 3 % of it reserved for
activations), raised by TP_RULE where the source's own no-speculation throughput rules it out, except Kimi-K2 (see its
note).

TP_RULE: the source states each target's no-speculation output throughput at the batch size (the `speedup_baseline`
column), measured over the whole run (prefill, request turnover and the batch's tail included), so batch / that
throughput is an upper bound on the decode step without speculation. A TP at which the planner's decode step (the
kernel-fitted step time, planner.physics.serving.evaluate_arrays' baseline_step_time_s) exceeds that bound on a
benchmark is ruled out: the target is mapped to the smallest TP in 1, 2, 4, 8 that is not. (L70B at TP 2 would need its
70.5 GB of weights per GPU read in 14.8 ms, prefill included: 99 % of the H200's 4.8 TB/s.) The rule and the numbers in
the notes are checked by tests/planner/physics/test_speculation_fit.py against the catalogue and the CSV.
"""

from __future__ import annotations

import re

SOURCE_NOTE = "SpecBundle (SpecForge bench_eagle3.py, SGLang, H200)"

# {id target code: (catalogue model, dtype, tp, batch, note)}
TARGETS: dict[str, tuple[str, str, int, int, str]] = {
    "L8B": ("llama-3.1-8b", "bf16", 1, 1,
            "TP 1 assumed (not stated): the smallest TP its BF16 weights fit (16 GB); TP_RULE keeps it"),
    "L70B": ("llama-3.3-70b", "bf16", 4, 8,
             "TP 4 (not stated; TP_RULE): at TP 2, where its BF16 weights (141 GB) would fit, the planner's decode "
             "step at batch 8 (20.4 ms; 70.5 GB of weights per GPU, 14.7 ms at the whole 4.8 TB/s) exceeds the "
             "source's own no-speculation whole-run time per step, 8 / 540.5 tok/s = 14.8 ms (MT-Bench), prefill "
             "included; at TP 4: 12.1 ms"),
    "SCOUT": ("llama-4-scout", "bf16", 2, 8,
              "TP 2 assumed (not stated): the smallest TP its BF16 text weights (215 GB) fit; TP_RULE keeps it"),
    "Q30A3": ("qwen3-30b-a3b", "bf16", 4, 8,
              "Qwen3-30B-A3B-Instruct-2507 planned as qwen3-30b-a3b: the same architecture (config.json: 48 layers, "
              "hidden 2048, 32/4 heads, 128 experts top-8, moe_intermediate 768; 2507 changes the weights and the "
              "context length only); TP 4 (not stated; TP_RULE): at TP 1 (its BF16 weights, 61 GB, fit one H200) and "
              "TP 2 the planner's decode step at batch 8 (8.4, 6.2 ms) exceeds the source's no-speculation whole-run "
              "time per step on MT-Bench, 8 / 1341.4 tok/s = 5.96 ms; at TP 4: 4.9 ms"),
    "QC30A3": ("qwen3-30b-a3b", "bf16", 4, 8,
               "Qwen3-Coder-30B-A3B-Instruct planned as qwen3-30b-a3b: the same architecture (config.json: 48 layers, "
               "hidden 2048, 32/4 heads, 128 experts top-8, moe_intermediate 768); TP 4 (not stated; TP_RULE): at TP "
               "1 and 2 the planner's decode step at batch 8 (8.6, 6.3 ms) exceeds the source's no-speculation "
               "whole-run time per step on LiveCodeBench, 8 / 1506.3 tok/s = 5.31 ms; at TP 4: 4.9 ms (TP 8 until "
               "2026-12-05, when the kernel fit's MoE step, then fitted on two shapes, put TP 4 at 5.7 ms)"),
    "Q235": ("qwen3-235b-a22b", "bf16", 8, 8,
             "Qwen3-235B-A22B-Instruct-2507 planned as qwen3-235b-a22b: the same architecture (94 layers, hidden "
             "4096, 128 experts top-8); TP 8 (not stated; TP_RULE): at TP 4, where its BF16 weights (470 GB) "
             "would fit, the planner's decode step at batch 8 (17.0 ms) exceeds the source's no-speculation whole-run "
             "time per step, 8 / 529.9 tok/s = 15.1 ms (MT-Bench); at TP 8: 12.0 ms"),
    "KIMI": ("kimi-k2", "fp8", 8, 8,
             "FP8 (the only checkpoint Moonshot ships); TP 8 assumed (not stated): one 8 x H200 node, as SGLang's "
             "Kimi-K2 cookbook states ('Requires 8 GPUs with >=140GB each (H200/B200)'); the planner's 90 %-of-HBM "
             "rule would need 16 GPUs (1026 GB of weights against 985 GB usable on 8), 8 H200s (1128 GB) hold them; "
             "TP_RULE: its decode step at TP 8 (18.7 ms) is 1 % over the MT-Bench whole-run 8 / 430.9 tok/s = 18.6 ms "
             "and under the GSM8K 23.7 ms; 8 is one node's most"),
}
# Mean context per decoded token (prompt + half the answer), assumptions from each benchmarker's prompt: MT-Bench a
# ~100-token question with answers of a few hundred tokens; GSM8K five worked examples as chat turns (~800 tokens,
# cached by the radix tree after the first request) + the question, answers ~150-250 tokens; HumanEval a ~150-token
# function stub, answers ~300-400; LiveCodeBench a ~500-token problem, answers ~1,000-1,500.
CONTEXT_TOKENS = {"mtbench": 400.0, "gsm8k": 1000.0, "humaneval": 350.0, "livecodebench": 1250.0}
# Rows the fit leaves out, with why ({id prefix: reason}).
LEFT_OUT = {
    "SBD_SCOUT_mtbench_": "the Scout MT-Bench cells share one no-speculation throughput (502.1 tok/s) that is "
                          "inconsistent with the speculative runs divided by it: in SBD_SCOUT_mtbench_{old,sb}_s3t1n4 "
                          "the speedup (2.495, 2.594) exceeds the stated acceptance length (2.354, 2.491), impossible "
                          "when a verify step is never cheaper than a decode step (README beside the table: doubtful); "
                          "the same "
                          "target's GSM8K cells (no-spec 455.9 tok/s) are kept",
}
ID_RE = re.compile(r"^SBD_(?P<target>[A-Z0-9]+)_(?P<bench>[a-z0-9]+)_(?P<draft>sb|old)_s(?P<steps>\d+)t(?P<topk>\d+)"
                   r"n(?P<ndt>\d+)$")


def left_out(rid: str) -> str | None:
    """Why an SBD row is left out of the fit (LEFT_OUT), None when it is fitted."""
    return next((why for prefix, why in LEFT_OUT.items() if rid.startswith(prefix)), None)


def config(rid: str) -> dict | None:
    """The planner configuration of one SBD row (speculation.SpecRow fields other than id, source, tau, speedup),
    None when `rid` is not an SBD id. Raises ValueError for an SBD id whose target or benchmark has no mapping."""
    m = ID_RE.match(rid)
    if m is None:
        return None
    if m["target"] not in TARGETS:
        raise ValueError(f"row {rid}: target code {m['target']!r} not mapped (allowed: {', '.join(TARGETS)})")
    if m["bench"] not in CONTEXT_TOKENS:
        raise ValueError(f"row {rid}: benchmark {m['bench']!r} has no context assumption "
                         f"(allowed: {', '.join(CONTEXT_TOKENS)})")
    model, dtype, tp, batch, note = TARGETS[m["target"]]
    steps, topk, ndt = int(m["steps"]), int(m["topk"]), int(m["ndt"])
    cfg = dict(engine="sglang", model=model, hardware="h200", dtype=dtype, tp=tp, batch=batch, method="eagle3",
               k=steps, context_tokens=CONTEXT_TOKENS[m["bench"]])
    if topk == 1:
        if ndt != steps + 1:
            raise ValueError(f"row {rid}: a chain (topk 1) verifies steps + 1 tokens, the id says {ndt}")
        shape = f"chain K={steps} ({ndt} verified tokens)"
    else:
        cfg.update(verify_tokens=float(ndt), draft_passes=float(steps), draft_tokens_per_pass=float(topk))
        shape = f"tree: {steps} draft passes of {topk} tokens, {ndt} verified tokens incl. the root"
    cfg["assumption"] = (f"{SOURCE_NOTE}: {shape}; batch {batch} (bench_eagle3.py batch_size); {dtype.upper()} "
                         f"({'bench_eagle3.py documents --dtype bfloat16' if dtype == 'bf16' else 'as shipped'}); "
                         f"{note}; context ~{CONTEXT_TOKENS[m['bench']]:g} tokens ({m['bench']}, assumption); "
                         "speedup = whole-run output tok/s ratio (prefill and request turnover included)")
    return cfg
