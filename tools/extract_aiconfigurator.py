"""Extract the data the step-time fit uses from NVIDIA aiconfigurator (fit-time dependency only).

Two extracts, both small CSVs committed under profiles/data/fitted/ so that tests and the fit run
without aiconfigurator installed:

- ``ops``: measured per-kernel rows of aiconfigurator-core's database (vLLM backend) for H100, H200, B200
  (vLLM 0.24.0), A100 (the only vLLM version it has for A100: 0.14.0) and L40S (0.24.0; its all-reduce
  0.22.0): decode GEMMs, decode attention, custom all-reduce, all-to-all, the MLA decode module (op ``mla:<gemm
  dtype>``) and fused MoE (op ``moe:hidden:inter:experts:topk:tp:distribution``: the catalogue's shapes on every
  token-to-expert distribution measured, every other measured shape at MoE TP 1 on aiconfigurator's own routing
  for it), filtered to decode sizes.
- ``tpot``: aiconfigurator's static decode TPOT estimate (its op-level composition of those kernels) on
  a grid of model x GPU x TP x batch x context, the reference the fitted step time is checked against.

    pip install -r requirements-fit.txt   # in a separate virtualenv
    python tools/extract_aiconfigurator.py ops
    python tools/extract_aiconfigurator.py tpot [--limit N]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import logging
import sys
import time
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parents[1] / "profiles" / "data" / "fitted"
VLLM_VERSION = "0.24.0"
# catalogue hardware -> (aiconfigurator system, its vLLM database version, the version of its all-reduce rows)
SYSTEMS = {"h100-sxm": ("h100_sxm", VLLM_VERSION, VLLM_VERSION), "h200": ("h200_sxm", VLLM_VERSION, VLLM_VERSION),
           "b200": ("b200_sxm", VLLM_VERSION, VLLM_VERSION), "a100-80gb-sxm": ("a100_sxm", "0.14.0", "0.14.0"),
           "l40s": ("l40s", VLLM_VERSION, "0.22.0")}

# (catalog model, aiconfigurator model path, quant kwargs, TP sizes per system, batches)
DENSE_BATCHES = (1, 4, 16, 64, 256, 512)
TPOT_GRID = [
    ("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "bf16", {},
     {"h100-sxm": (1, 2), "h200": (1,), "b200": (1,), "a100-80gb-sxm": (1, 2), "l40s": (1, 2)}),
    ("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "fp8",
     {"gemm_quant_mode": "fp8", "kvcache_quant_mode": "fp8"}, {"h100-sxm": (1,)}),
    ("llama-3.3-70b", "meta-llama/Meta-Llama-3.1-70B", "bf16", {},
     {"h100-sxm": (4, 8), "h200": (2, 4), "b200": (2, 4), "a100-80gb-sxm": (4, 8), "l40s": (4,)}),
    ("qwen3-32b", "Qwen/Qwen3-32B", "bf16", {},
     {"h100-sxm": (1, 2), "h200": (1,), "b200": (1,), "a100-80gb-sxm": (1, 2), "l40s": (2,)}),
    ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "bf16", {"moe_tp_size": None},
     {"h100-sxm": (1,), "h200": (1,), "b200": (1,), "a100-80gb-sxm": (1,), "l40s": (2,)}),
    ("deepseek-v3", "deepseek-ai/DeepSeek-V3", "fp8",
     {"gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block", "kvcache_quant_mode": "fp8",
      "moe_tp_size": None}, {"h200": (8,), "b200": (8,)}),
]
CONTEXTS = (1000, 8000, 32000)
OSL = 16  # decode steps averaged per estimate (TPOT over context isl .. isl + 16)


def _quiet() -> None:
    logging.disable(logging.WARNING)


def extract_tpot(limit: int | None = None, out: Path | None = None) -> Path:
    _quiet()
    from aiconfigurator.cli.api import cli_estimate  # noqa: PLC0415  (fit-time dependency)

    out = out or OUT_DIR / "aiconfigurator_tpot.csv"
    rows = []
    done = 0
    for model, path, dtype, quant, tps in TPOT_GRID:
        for hw, tp_list in tps.items():
            for tp in tp_list:
                for ctx in CONTEXTS:
                    for batch in DENSE_BATCHES:
                        if limit is not None and done >= limit:
                            break
                        kw = dict(quant)
                        if "moe_tp_size" in kw:
                            kw["moe_tp_size"] = tp
                        t0 = time.time()
                        try:
                            r = cli_estimate(model_path=path, system_name=SYSTEMS[hw][0], mode="static_gen",
                                             backend_name="vllm", backend_version=SYSTEMS[hw][1], isl=ctx,
                                             osl=OSL, batch_size=batch, tp_size=tp, **kw)
                        except Exception as exc:  # noqa: BLE001  (record and go on: one bad cell)
                            print(f"skip {model} {hw} tp{tp} b{batch} ctx{ctx}: {exc}", file=sys.stderr)
                            continue
                        oom = bool(r.kv_cache_warning)
                        rows.append(dict(model=model, aic_model=path, hardware=hw, engine="vllm",
                                         engine_version=SYSTEMS[hw][1], dtype=dtype,
                                         kv_dtype=quant.get("kvcache_quant_mode", "bf16"), tp=tp,
                                         batch=batch, isl=ctx, osl=OSL, tpot_ms=round(r.tpot, 5),
                                         oom=int(oom), memory_gb=round(float(r.raw.get("memory", 0.0)), 2)))
                        done += 1
                        print(f"{model} {hw} tp{tp} b{batch} ctx{ctx}: tpot {r.tpot:.3f} ms oom={oom} "
                              f"({time.time() - t0:.1f} s)", flush=True)
                        with out.open("w", newline="") as fh:
                            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                            w.writeheader()
                            w.writerows(rows)
    return out


GEMM_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
GEMM_NK = (1024, 2048, 4096, 7168, 8192, 16384)
# the kernel vLLM runs per GEMM dtype (A100's vLLM 0.14 rows name their BF16 kernel "vllm_default")
GEMM_KERNELS = {"bfloat16": ("torch.nn.functional.linear", "vllm_default"), "fp8": ("CutlassFP8ScaledMMLinearKernel",),
                "fp8_block": ("DeepGemmFp8BlockScaledMMKernel",)}
# decode attention: Hopper FA3, Blackwell TRT-LLM decode, Ada FA2 (vLLM's default FLASH_ATTN backend), A100 (0.14)
ATTN_KERNELS = ("vllm_flash_attn_fa3", "vllm_flashinfer_trtllmdecode", "vllm_flash_attn_fa2", "vllm_flash_attn")
ATTN_BATCHES = (1, 4, 16, 64, 256)
ATTN_STEPS = (127, 1023, 8191, 32767)
# (hidden, moe inter, experts, top-k, dtype, moe TP): DeepSeek-V3 at TP8 and Qwen3-30B-A3B at TP1
MOE_SHAPES = ((7168, 2048, 256, 8, "fp8_block", 8), (2048, 768, 128, 8, "bfloat16", 1))
# Token-to-expert distributions the collector measured: "balanced" (every expert gets m k / E tokens) and
# power laws over the experts (aiconfigurator's decode estimates use power_law_1.01 for DeepSeek-style models
# and power_law_1.2 for the generic MoE family: sdk/models/deepseek.py, sdk/models/moe.py `_power_law_alpha`).
MOE_DISTRIBUTIONS = ("balanced", "power_law_1.01", "power_law_1.2")
# Every other fused-MoE shape the database measured (the shapes of models beyond the catalogue: Mixtral, GPT-OSS,
# Qwen3-MoE sizes, Kimi-K2, GLM, ...), at MoE TP 1, in the kernel dtypes the fit uses, on the distribution
# aiconfigurator's own decode estimate would route that shape with (MOE_ROUTING_DEFAULT), so a model held out of the
# fit finds its MoE priced from other models' kernels (calibration/fitting/steptime_cv.py).
MOE_EXTRA_DTYPES = ("bfloat16", "fp8_block")
MOE_EXTRA_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def moe_routing_default(hidden: int) -> str:
    """aiconfigurator-core 0.12's decode routing for a shape: power_law_1.01 for DeepSeek-style models (hidden 7168:
    DeepSeek-V3/R1, Kimi-K2; sdk/models/deepseek.py), power_law_1.2 for the generic MoE family (sdk/models/moe.py)."""
    return "power_law_1.01" if hidden == 7168 else "power_law_1.2"


# MLA decode module (vLLM's whole MLA attention block: q/kv down- and up-projections, the per-head W_UK / W_UV batched
# matmuls, rotary, the latent KV write and the MLA decode kernel, the output projection; aiconfigurator's
# mla_generation_module table, DeepSeek-V3's MLA at 1-128 heads per GPU). op mla:<gemm dtype>, dtype = KV cache dtype,
# m = batch, n = heads per GPU, k = context tokens (step). Hopper FlashMLA (FP8 cache) / FlashAttention-MLA (BF16),
# Blackwell FlashInfer-MLA, Ada Triton-MLA; A100's vLLM 0.14 database has none.
MLA_HEADS = (16, 32, 64, 128)
MLA_BATCHES = (1, 4, 16, 64, 256)
MLA_STEPS = (128, 1024, 8192, 32768)
MLA_GEMMS = ("bfloat16", "fp8_block")


def _data_root() -> Path:
    import aiconfigurator_core  # noqa: PLC0415  (fit-time dependency)

    return Path(aiconfigurator_core.__file__).resolve().parent / "systems" / "data"


def extract_ops(out: Path | None = None) -> Path:
    """Per-kernel measured rows (vLLM backend, SYSTEMS' versions) for the fit, one CSV with an `op` column."""
    import pandas as pd  # noqa: PLC0415

    root = _data_root()
    frames = []
    for hw, (sysname, version, comm_version) in SYSTEMS.items():
        base = root / sysname
        first = len(frames)
        g = pd.read_parquet(base / "gemm" / "vllm" / version / "gemm_perf.parquet")
        ok = [src in GEMM_KERNELS.get(dt, ()) for src, dt in zip(g.kernel_source, g.gemm_dtype)]
        g = g[g.m.isin(GEMM_MS) & g.n.isin(GEMM_NK) & g.k.isin(GEMM_NK) & pd.Series(ok, index=g.index)]
        frames.append(pd.DataFrame(dict(op="gemm", hardware=hw, dtype=g.gemm_dtype, m=g.m, n=g.n, k=g.k,
                                        latency_ms=g.latency)))
        a = pd.read_parquet(base / "attention" / "vllm" / version / "generation_attention_perf.parquet")
        if "window_size" not in a:  # vLLM 0.14 rows: no sliding-window column (all full attention)
            a = a.assign(window_size=0)
        a = a[(a.window_size == 0) & (a.num_key_value_heads == 8) & (a.head_dim == 128)
              & a.num_heads.isin((8, 16, 32, 64)) & a.kernel_source.isin(ATTN_KERNELS)
              & a.batch_size.isin(ATTN_BATCHES) & a.step.isin(ATTN_STEPS)]
        frames.append(pd.DataFrame(dict(op="attention", hardware=hw, dtype=a.kv_cache_dtype, m=a.batch_size,
                                        n=a.num_heads, k=a.step, latency_ms=a.latency)))
        c = pd.read_parquet(base / "comm" / "vllm" / comm_version / "custom_allreduce_perf.parquet")
        c = c[c.backend == "vllm_graph"]
        frames.append(pd.DataFrame(dict(op="allreduce", hardware=hw, dtype="bfloat16", m=c.num_gpus,
                                        n=c.message_size, k=0, latency_ms=c.latency)))
        # expert-parallel all-to-all (DeepEP low-latency kernels, EP8 in one node): dispatch and combine per token
        # count, op alltoall:hidden:topk:experts:phase, m = EP ranks, n = tokens per rank
        a2a = base / "comm" / "vllm" / version / "moe_a2a_perf.parquet"
        x = pd.read_parquet(a2a) if a2a.is_file() else pd.DataFrame(  # none for A100 and L40S
            columns=["comm_backend", "hidden_size", "topk", "num_experts", "phase", "ep_size", "num_tokens", "latency"])
        x = x[x.comm_backend == "deepep_ll"]
        frames.append(pd.DataFrame(dict(op="alltoall:" + x.hidden_size.astype(str) + ":" + x.topk.astype(str) + ":"
                                        + x.num_experts.astype(str) + ":" + x.phase, hardware=hw, dtype="bfloat16",
                                        m=x.ep_size, n=x.num_tokens, k=x.hidden_size, latency_ms=x.latency / 1e3)))
        mo = pd.read_parquet(base / "moe" / "vllm" / version / "moe_perf.parquet")
        if "distribution" not in mo:
            mo = mo.assign(distribution="balanced")
        for (hidden, inter, experts, topk, dtype, tp), dist in itertools.product(MOE_SHAPES, MOE_DISTRIBUTIONS):
            sel = mo[(mo.hidden_size == hidden) & (mo.inter_size == inter) & (mo.num_experts == experts)
                     & (mo.topk == topk) & (mo.moe_dtype == dtype) & (mo.moe_tp_size == tp)
                     & (mo.moe_ep_size == 1) & (mo.distribution == dist)]
            # vLLM picks one kernel per configuration; take the fastest measured one per token count.
            best = sel.groupby("num_tokens", as_index=False).latency.min()
            frames.append(pd.DataFrame(dict(op=f"moe:{hidden}:{inter}:{experts}:{topk}:{tp}:{dist}", hardware=hw,
                                            dtype=dtype, m=best.num_tokens, n=hidden, k=inter,
                                            latency_ms=best.latency)))
        known = {(h, i, e, k) for h, i, e, k, _, _ in MOE_SHAPES}
        extra = mo[(mo.moe_tp_size == 1) & (mo.moe_ep_size == 1) & mo.moe_dtype.isin(MOE_EXTRA_DTYPES)
                   & mo.num_tokens.isin(MOE_EXTRA_TOKENS)]
        for (hidden, inter, experts, topk, dtype), sel in extra.groupby(
                ["hidden_size", "inter_size", "num_experts", "topk", "moe_dtype"]):
            if (hidden, inter, experts, topk) in known:
                continue
            dist = moe_routing_default(int(hidden))
            best = sel[sel.distribution == dist].groupby("num_tokens", as_index=False).latency.min()
            frames.append(pd.DataFrame(dict(op=f"moe:{hidden}:{inter}:{experts}:{topk}:1:{dist}", hardware=hw,
                                            dtype=dtype, m=best.num_tokens, n=hidden, k=inter,
                                            latency_ms=best.latency)))
        mla_file = base / "mla" / "vllm" / version / "mla_generation_module_perf.parquet"
        if mla_file.is_file():
            ml = pd.read_parquet(mla_file)
            ml = ml[ml.num_heads.isin(MLA_HEADS) & ml.batch_size.isin(MLA_BATCHES) & ml.step.isin(MLA_STEPS)
                    & ml.gemm_type.isin(MLA_GEMMS)]
            best = ml.groupby(["gemm_type", "kv_cache_dtype", "batch_size", "num_heads", "step"],
                              as_index=False).latency.min()
            frames.append(pd.DataFrame(dict(op="mla:" + best.gemm_type, hardware=hw, dtype=best.kv_cache_dtype,
                                            m=best.batch_size, n=best.num_heads, k=best.step,
                                            latency_ms=best.latency)))
        for f in frames[first:]:
            f["source"] = f"aiconfigurator-core 0.12.0 systems/data vllm {version}"
    df = pd.concat([f for f in frames if len(f)], ignore_index=True)
    out = out or OUT_DIR / "aiconfigurator_ops.csv"
    df.to_csv(out, index=False, float_format="%.6g")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["ops", "tpot"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.what == "tpot":
        print(extract_tpot(args.limit, args.out))
    else:
        print(extract_ops(args.out))


if __name__ == "__main__":
    main()
