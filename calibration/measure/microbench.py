"""Step-time microbenchmark: times a stack of decoder layers shaped like the target model (torch; CUDA when
available, CPU otherwise) over a grid of batch x tokens-per-sequence x context, for fitting the roofline
efficiencies (eta_bw, eta_flops) and the kernel-level fixed time per step of this machine.

One timed "step" = every decoder layer of the model (RMSNorm, Q/K/V/O projections, attention over a KV
cache of `context_tokens`, gated MLP) plus the final norm and the LM head, on `batch * tokens_per_seq`
new tokens: what `planner.physics.roofline.target_net` counts (active params incl. the tied LM head, KV reads,
attention FLOPs). Weights are random: timing does not depend on their values.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

WARMUP_MAX_CALLS = 20


@dataclass(frozen=True)
class LayerShape:
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int

    def __post_init__(self) -> None:
        for name, v in asdict(self).items():
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}={v!r} not allowed: must be an integer >= 1")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} not allowed: must be a multiple of kv_heads={self.kv_heads}")


# SmolLM2-135M (HuggingFaceTB/SmolLM2-135M-Instruct config.json).
SMOLLM2_135M = LayerShape(layers=30, hidden_size=576, heads=9, kv_heads=3, head_dim=64, intermediate_size=1536,
                          vocab_size=49152)


@dataclass(frozen=True)
class StepSample:
    batch: int
    tokens_per_seq: int
    context_tokens: int
    step_time_s: float  # median over repeats
    step_time_s_min: float
    repeats: int
    device: str
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def layer_shape_of(m: Any) -> LayerShape:
    """The decoder stack of a planner.types.ModelSpec. Intermediate size is not in ModelSpec: it is derived
    from the per-layer params (attention 2h^2 + 2h*kv, gated MLP 3*h*inter), rounded to a multiple of 64;
    matches SmolLM2-135M's 1536 to the rounding."""
    h = m.hidden_size
    per_layer = (m.total_params_b * 1e9 - m.vocab_size * h) / m.layers
    attn = 2 * h * m.heads * m.head_dim + 2 * h * m.kv_heads * m.head_dim
    inter = max(1, int(round((per_layer - attn) / (3 * h) / 64.0)) * 64)
    return LayerShape(m.layers, h, m.heads, m.kv_heads, m.head_dim, inter, m.vocab_size)


def run_microbench(
    shape: LayerShape = SMOLLM2_135M,
    *,
    batches: tuple[int, ...] = (1, 4, 16, 32),
    tokens_per_seq: tuple[int, ...] = (1, 4),
    contexts: tuple[int, ...] = (128, 512),
    repeats: int = 5,
    dtype: str = "bfloat16",
    device: str | None = None,
    threads: int | None = None,
) -> list[StepSample]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    if repeats < 1:
        raise ValueError(f"repeats={repeats} not allowed: must be >= 1")
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if threads:
        torch.set_num_threads(threads)
    dt = getattr(torch, dtype)
    h, nh, nkv, hd, inter = shape.hidden_size, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate_size
    g = torch.Generator(device="cpu").manual_seed(0)

    def w(o: int, i: int) -> torch.Tensor:
        return (torch.randn(o, i, generator=g) * 0.02).to(dev, dt)

    layers = [
        {"qkv": w((nh + 2 * nkv) * hd, h), "o": w(h, nh * hd), "gu": w(2 * inter, h), "d": w(h, inter)}
        for _ in range(shape.layers)
    ]
    lm_head = w(shape.vocab_size, h)
    max_ctx = max(contexts) + max(tokens_per_seq)
    max_b = max(batches)
    # Preallocated KV cache per layer (like vLLM's paged cache): new keys/values are written in place and
    # attention reads the first ctx + n positions; GQA without repeating K/V (enable_gqa).
    kv = [(torch.randn(max_b, nkv, max_ctx, hd, generator=g).to(dev, dt),
           torch.randn(max_b, nkv, max_ctx, hd, generator=g).to(dev, dt)) for _ in range(shape.layers)]

    def rms(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype)

    def step(x: torch.Tensor, ctx: int) -> torch.Tensor:
        b, n, _ = x.shape
        for lw, (kc, vc) in zip(layers, kv, strict=True):
            qkv = rms(x) @ lw["qkv"].T
            q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.view(b, n, nh, hd).transpose(1, 2)
            kc[:b, :, ctx:ctx + n] = k.view(b, n, nkv, hd).transpose(1, 2)
            vc[:b, :, ctx:ctx + n] = v.view(b, n, nkv, hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, kc[:b, :, :ctx + n], vc[:b, :, :ctx + n], enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(b, n, nh * hd) @ lw["o"].T
            gate, up = (rms(x) @ lw["gu"].T).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ lw["d"].T
        return rms(x) @ lm_head.T  # logits for every new position: verification samples all K+1

    def sync() -> None:
        if dev.startswith("cuda"):
            torch.cuda.synchronize()

    out: list[StepSample] = []
    with torch.inference_mode():
        # Warm-up: the first calls in a fresh process are up to 10x slower (thread pool, allocator, kernel
        # selection); run until two consecutive calls agree within 10 % (at most WARMUP_MAX_CALLS).
        x0, prev = torch.randn(1, 1, h).to(dev, dt), math.inf
        for _ in range(WARMUP_MAX_CALLS):
            sync()
            t = time.perf_counter()
            step(x0, min(contexts))
            sync()
            now = time.perf_counter() - t
            if abs(now - prev) < 0.1 * now:
                break
            prev = now
        for b in batches:
            for n in tokens_per_seq:
                for ctx in contexts:
                    x = torch.randn(b, n, h, generator=g).to(dev, dt)
                    times = []
                    step(x, ctx)  # per-shape warm-up: CPU kernels pick and cache primitives per shape
                    for _ in range(repeats):
                        sync()
                        t = time.perf_counter()
                        step(x, ctx)
                        sync()
                        times.append(time.perf_counter() - t)
                    out.append(StepSample(b, n, ctx, statistics.median(times), min(times), repeats, dev, dtype))
    return out
