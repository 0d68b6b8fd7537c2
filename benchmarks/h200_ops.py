"""Time a decode step's operations on one GPU with torch and print them beside the planner's prediction for h200.

Never run by CI (it needs a GPU and torch with CUDA); import-safe without torch. Three real layer shapes
(config.json of each model; attention shapes from the catalogue, profiles/data/models.yaml):

- Llama-3.1-8B at TP 1: the projection and MLP GEMMs (qkv 4096 -> 6144, o 4096 -> 4096, gate_up 4096 -> 28672,
  down 14336 -> 4096) at several M, and GQA decode attention (32 heads, 8 KV heads, head_dim 128);
- Qwen3-30B-A3B at TP 1: its MoE layer (hidden 2048, 128 experts, top 8, expert width 768) with random weights and
  real top-k routing of random hidden states, at batch x (K+1) tokens; decode attention (32 heads, 4 KV heads);
- DeepSeek-V3's MoE layer as one GPU of TP 8 holds it (hidden 7168, 256 experts, top 8, expert width 2048 / 8).

Each measured time is the median of CUDA-event timings after warm-up; the prediction is the planner's term for that
operation alone (planner.physics.roofline with the h200 / bf16 kernel fit, profiles/data/fitted/steptime_vllm.yaml):
a GEMM's max(weight bytes / (BW eta_bw(m)), FLOPs / (F eta_f(m))), attention's max(KV bytes / (BW eta_kv), FLOPs /
(F eta_attn)), an MoE layer's expert roofline plus its per-expert, per-layer and per-token terms. The MoE layer here
loops over the experts the tokens touched (one gather, three GEMMs and a scatter each), not vLLM's fused kernel: it
shows whether the touched-expert count and the small-M cost per expert behave as the planner assumes, and sits above
a fused kernel at large batch.

    python benchmarks/h200_ops.py                 # on the GPU (bf16)
    python benchmarks/h200_ops.py --dry-run       # on CPU: tiny shapes, float32, a few repetitions (checks the script)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from a checkout

from planner.physics import roofline as rf  # noqa: E402

GPU = "h200"
BF16_BYTES = 2.0


@dataclasses.dataclass(frozen=True)
class Shapes:
    """One run's shapes: GEMMs (name, k, n), attention (heads, kv heads, head_dim), MoE layers (name, hidden, experts,
    top-k, expert width) and the sizes swept."""

    gemms: tuple[tuple[str, int, int], ...]
    attention: tuple[tuple[str, int, int, int], ...]
    moe: tuple[tuple[str, int, int, int, int], ...]
    gemm_m: tuple[int, ...]
    attn_batch: tuple[int, ...]
    attn_context: tuple[int, ...]
    moe_batch: tuple[int, ...]
    moe_k: tuple[int, ...]
    reps: int


REAL = Shapes(
    gemms=(("llama-3.1-8b qkv", 4096, 6144), ("llama-3.1-8b o", 4096, 4096),
           ("llama-3.1-8b gate_up", 4096, 28672), ("llama-3.1-8b down", 14336, 4096)),
    attention=(("llama-3.1-8b", 32, 8, 128), ("qwen3-30b-a3b", 32, 4, 128)),
    moe=(("qwen3-30b-a3b", 2048, 128, 8, 768), ("deepseek-v3 tp8", 7168, 256, 8, 2048 // 8)),
    gemm_m=(1, 4, 16, 64, 256, 1024), attn_batch=(1, 8, 64), attn_context=(1024, 8192, 32768),
    moe_batch=(1, 8, 32), moe_k=(0, 3, 7), reps=50)
TINY = Shapes(gemms=(("tiny", 64, 96),), attention=(("tiny", 4, 2, 16),), moe=(("tiny", 32, 8, 2, 16),),
              gemm_m=(1, 8), attn_batch=(1, 2), attn_context=(32,), moe_batch=(1, 2), moe_k=(0, 3), reps=3)


def h200_params() -> rf.HwParams:
    """The planner's h200 / bf16 terms (the kernel fit shipped in profiles/data/fitted/steptime_vllm.yaml)."""
    from profiles import load_catalog  # noqa: PLC0415
    from profiles.catalog import load_fitted_efficiencies  # noqa: PLC0415

    cat = load_catalog()
    eff = load_fitted_efficiencies(cat.hardware)[(GPU, "bf16")]
    return rf.hw_params(cat.hardware[GPU], "bf16", eff)


def _net(**kw) -> rf.Net:
    base = dict(dense_weight_bytes=0.0, expert_bytes=0.0, experts=0.0, experts_per_token=0.0, active_params=0.0,
                attn_dim=0.0, kv_bytes_per_token=0.0, layers=1.0, hidden_size=0.0)
    return rf.Net(**{**base, **kw})


def predict_gemm_s(hw: rf.HwParams, m: int, k: int, n: int) -> float:
    net = _net(dense_weight_bytes=n * k * BF16_BYTES, active_params=float(n * k))
    return float(np.maximum(rf.weight_stream_time_s(net, hw, tokens_in_step=m),
                            rf.gemm_compute_time_s(net, hw, tokens_in_step=m)))


def predict_attention_s(hw: rf.HwParams, batch: int, context: int, heads: int, kv_heads: int, head_dim: int) -> float:
    net = _net(attn_dim=float(heads * head_dim), kv_bytes_per_token=2.0 * kv_heads * head_dim * BF16_BYTES,
               kv_shards=float(kv_heads))
    return float(np.maximum(rf.kv_stream_time_s(net, hw, batch=batch, context_tokens=context),
                            rf.attention_compute_time_s(net, hw, tokens_in_step=batch, context_tokens=context)))


def predict_moe_s(hw: rf.HwParams, batch: int, tokens_per_seq: int, hidden: int, experts: int, topk: int,
                  width: int) -> float:
    """One MoE layer's routed experts as the planner prices them in a verify step of batch x tokens_per_seq tokens."""
    params = 3.0 * hidden * width
    net = _net(expert_bytes=params * BF16_BYTES, experts=float(experts), experts_per_token=float(topk),
               active_params=topk * params, expert_params=params, moe_layers=1.0, hidden_size=float(hidden))
    m = batch * tokens_per_seq
    routed = rf.routed_tokens(batch, tokens_per_seq, hw.moe_verify_overlap)
    core = np.maximum(rf.weight_stream_time_s(net, hw, tokens_in_step=m, routed=routed),
                      rf.gemm_compute_time_s(net, hw, tokens_in_step=m, routed=routed))
    return float(core + rf.moe_expert_time_s(net, hw, tokens_in_step=routed)
                 + rf.moe_token_time_s(net, hw, tokens_in_step=m))


def _timer(device: str):
    """A function that times fn() `reps` times after warm-up and returns the median seconds."""
    import torch  # noqa: PLC0415

    def run(fn, reps: int) -> float:
        for _ in range(3):
            fn()
        out = []
        for _ in range(reps):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                out.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
        return statistics.median(out)

    return run


def moe_layer(x, gate, w13, w2, topk: int):
    """Routed experts of one MoE layer: softmax top-k routing, then for each touched expert its tokens' SwiGLU MLP,
    weighted and scattered back. Returns (output, experts touched)."""
    import torch  # noqa: PLC0415

    probs = torch.softmax(x @ gate, dim=-1)
    weights, chosen = torch.topk(probs, topk, dim=-1)
    out = torch.zeros_like(x)
    touched = torch.unique(chosen)
    for e in touched.tolist():
        rows, slot = (chosen == e).nonzero(as_tuple=True)
        h = x[rows] @ w13[e]
        a, b = h.chunk(2, dim=-1)
        y = (torch.nn.functional.silu(a) * b) @ w2[e]
        out.index_add_(0, rows, y * weights[rows, slot].unsqueeze(-1))
    return out, int(touched.numel())


def run(shapes: Shapes, device: str, dtype_name: str) -> None:
    import torch  # noqa: PLC0415

    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    hw = h200_params()
    time_s = _timer(device)
    print(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), {dtype_name}; "
          f"prediction: the planner's {GPU} / bf16 terms")
    print("\n== GEMM  (M x K) @ (K x N)")
    print(f"{'shape':24} {'M':>6} {'measured us':>12} {'planner us':>11} {'ratio':>6}")
    for name, k, n in shapes.gemms:
        w = torch.randn(k, n, device=device, dtype=dtype)
        for m in shapes.gemm_m:
            x = torch.randn(m, k, device=device, dtype=dtype)
            t = time_s(lambda x=x, w=w: x @ w, shapes.reps)
            p = predict_gemm_s(hw, m, k, n)
            print(f"{name:24} {m:6} {t * 1e6:12.1f} {p * 1e6:11.2f} {t / p:6.2f}")
    print("\n== SDPA decode attention (one query token per sequence, GQA)")
    print(f"{'model':24} {'batch':>6} {'context':>8} {'measured us':>12} {'planner us':>11} {'ratio':>6}")
    for name, heads, kv_heads, d in shapes.attention:
        for b in shapes.attn_batch:
            for ctx in shapes.attn_context:
                q = torch.randn(b, heads, 1, d, device=device, dtype=dtype)
                kv = [torch.randn(b, kv_heads, ctx, d, device=device, dtype=dtype) for _ in range(2)]
                t = time_s(functools.partial(torch.nn.functional.scaled_dot_product_attention, q, kv[0], kv[1],
                                             enable_gqa=True), shapes.reps)
                p = predict_attention_s(hw, b, ctx, heads, kv_heads, d)
                print(f"{name:24} {b:6} {ctx:8} {t * 1e6:12.1f} {p * 1e6:11.2f} {t / p:6.2f}")
    print("\n== MoE layer, random weights, real top-k routing, batch x (K+1) tokens (loop over touched experts)")
    print(f"{'model':24} {'batch':>6} {'K':>3} {'tokens':>7} {'touched':>8} {'measured us':>12} {'planner us':>11} "
          f"{'ratio':>6}")
    for name, hidden, experts, topk, width in shapes.moe:
        gate = torch.randn(hidden, experts, device=device, dtype=dtype)
        w13 = torch.randn(experts, hidden, 2 * width, device=device, dtype=dtype) * hidden ** -0.5
        w2 = torch.randn(experts, width, hidden, device=device, dtype=dtype) * width ** -0.5
        for b in shapes.moe_batch:
            for k in shapes.moe_k:
                x = torch.randn(b * (k + 1), hidden, device=device, dtype=dtype)
                _, touched = moe_layer(x, gate, w13, w2, topk)
                t = time_s(functools.partial(moe_layer, x, gate, w13, w2, topk), shapes.reps)
                p = predict_moe_s(hw, b, k + 1, hidden, experts, topk, width)
                print(f"{name:24} {b:6} {k:3} {b * (k + 1):7} {touched:8} {t * 1e6:12.1f} {p * 1e6:11.2f} "
                      f"{t / p:6.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU in float32 (checks the script)")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        print("needs torch (pip install torch); nothing timed", file=sys.stderr)
        return 2
    if args.dry_run:
        run(TINY, "cpu", "float32")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run to check the script on CPU", file=sys.stderr)
        return 2
    run(REAL, "cuda", "bfloat16")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
