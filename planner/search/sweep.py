"""Evaluate a whole grid of scenarios in one vectorised call.

Axes of every output array: (hardware, method, K, batch, workload, alpha). Step times do not depend on
alpha, so they are computed on the smaller (hardware, method, K, batch, workload) grid and broadcast;
only acceptance length, TPOT, throughput and CPM are computed at full size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.acceptance import rates as acc
from planner.physics.roofline import hw_params, stack, target_net
from planner.physics.serving import DRAFTING_MODE_CODE, SpecResult, evaluate_arrays
from planner.search.candidates import MAX_ALPHA
from planner.search.drafting import draft_net
from planner.types import LOOKUP_DRAFTING, Hardware, Method, ModelSpec, Workload

AXES = ("hardware", "method", "k", "batch", "workload", "alpha")


@dataclass(frozen=True)
class Grid:
    result: SpecResult
    hardware: tuple[str, ...]
    methods: tuple[str, ...]
    ks: np.ndarray
    batches: np.ndarray
    workloads: tuple[str, ...]
    alphas: np.ndarray

    @property
    def size(self) -> int:
        return int(np.prod(self.result.usd_per_mtok.shape))


def _reshape(values: Sequence[float], axis: int, ndim: int = 6) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = len(values)
    return np.asarray(values, float).reshape(shape)


def alpha_for(methods: Sequence[Method], workloads: Sequence[Workload], alphas: np.ndarray) -> np.ndarray:
    """Per-token alpha at position 1 on (1, method, 1, 1, workload, alpha): the alpha axis shifted by the
    workload for trained drafters; prompt lookup takes the workload's n-gram alpha scaled by alpha/mid
    so that the alpha axis still sweeps it."""
    a = _reshape(alphas, 5)
    shift = _reshape([w.alpha_shift for w in workloads], 4)
    ngram = _reshape([w.ngram_alpha for w in workloads], 4)
    is_ngram = _reshape([m.drafting in LOOKUP_DRAFTING for m in methods], 1).astype(bool)
    mid = float(np.mean(alphas)) if len(alphas) else 1.0
    return np.clip(np.where(is_ngram, ngram * a / mid, a + shift), 0.0, MAX_ALPHA)


def evaluate_grid(
    *,
    model: ModelSpec,
    draft_model: ModelSpec | None,
    hardware: Sequence[Hardware],
    methods: Sequence[Method],
    workloads: Sequence[Workload],
    ks: Sequence[int],
    batches: Sequence[float],
    alphas: Sequence[float],
    dtype: str = "bf16",
    tp: int = 1,
    efficiencies: Sequence | None = None,
) -> Grid:
    """efficiencies: one Efficiency per hardware (planner.search.scenario.efficiency_for gives the fitted ones); None:
    each hardware's defaults."""
    ks_arr = np.asarray(ks, float)
    effs = efficiencies if efficiencies is not None else [None] * len(hardware)
    hw = stack([hw_params(h, dtype, e) for h, e in zip(hardware, effs, strict=True)], 0, 6)
    drafts = [draft_net(m, model, draft_model, dtype, None) for m in methods]
    draft_nets = stack([d.net for d in drafts], 1, 6)
    alpha0 = alpha_for(methods, workloads, np.asarray(alphas, float))
    decay = _reshape([m.position_decay for m in methods], 1)
    tau = acc.acceptance_length_decay(alpha0, _reshape(ks_arr, 2), decay)
    prompt = _reshape([w.prompt_tokens for w in workloads], 4)
    out = _reshape([w.output_tokens for w in workloads], 4)
    res = evaluate_arrays(
        target=target_net(model, dtype),
        draft=draft_nets,
        hw=hw,
        mode=_reshape([DRAFTING_MODE_CODE[m.drafting] for m in methods], 1),
        draft_scales_with_k=_reshape([m.draft_params_scale_with_k for m in methods], 1).astype(bool),
        k=_reshape(ks_arr, 2),
        batch=_reshape(batches, 3),
        tau=tau,
        context_tokens=prompt + out / 2.0,
        prompt_tokens=prompt,
        output_tokens=out,
        usd_per_gpu_hour=_reshape([h.usd_per_gpu_hour_mid for h in hardware], 0),
        tp=tp,
        draft_weight_bytes_total=_reshape([d.weight_bytes for d in drafts], 1),
        draft_is_model=_reshape([m.drafting == "draft_model" for m in methods], 1).astype(bool),
    )
    return Grid(res, tuple(h.name for h in hardware), tuple(m.name for m in methods), ks_arr,
                np.asarray(batches, float), tuple(w.name for w in workloads), np.asarray(alphas, float))
