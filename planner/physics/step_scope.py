"""Which kernel fit a model's step time runs with: the fits' per-step terms hold only for the architectures they saw.

The kernel fit (tools/fit_steptime.py) sets each (GPU, weight dtype)'s per-step and per-layer costs (STAGE_B: the
per-step floor, per-layer and per-layer-per-token kernel costs) end to end on aiconfigurator's TPOT cells. Where
those cells come from one architecture, the fit cannot tell a per-step cost from that architecture's own per-layer
kernels: H200 FP8's cells are DeepSeek-V3 alone (MLA + MoE, block FP8), and its kernel floor (once 8.3 ms "per step";
then 0.17 ms per layer, the per-step cost held at the same GPU's BF16 fit, so another depth pays it for its own layers;
now 0.07 ms per layer, the MLA block timed from its own measured kernel table, roofline.mla_kernel_time_s) is
DeepSeek's layer kernels. Applied to a dense GQA model in FP8 it made an FP8 Llama-3.1-8B step on H200
11 ms against 4.8 ms in BF16. So:

- the STAGE_B terms a fit sets apply to models of the architecture families (arch_family) its TPOT cells cover;
- another model takes them from the fit that covers its family: the same GPU's fit in another dtype first (BF16
  first: per-layer kernels and launch gaps do not depend on the weight dtype), else the same dtype on the GPU with
  the nearest HBM bandwidth, else any fit that covers it; a borrowed set (planner.physics.borrowed) keeps its overhead
  scale;
- a weight dtype with no fit of its own on a kernel-fitted GPU (B200 FP8, whose block-FP8 kernels the fit excludes;
  MXFP4, NVFP4) runs on that GPU's BF16 fit (efficiencies, MoE and collective terms; weights at the dtype's bytes),
  the assumption the speculation fit already states for such rows, instead of hardware.yaml's generic defaults.
The source text says which fit each part came from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from planner.types import Efficiency, Hardware, ModelSpec

STAGE_B = ("t_fixed_s", "t_layer_s", "t_layer_token_s")


def arch_family(model: ModelSpec) -> str:
    """The architecture family a fit's per-layer kernels stand for: attention kind (gqa, mla) and dense or MoE."""
    return f"{model.attention}-{'moe' if model.experts else 'dense'}"


def own_gpu_fit(fitted: Mapping[tuple[str, str], Efficiency], hardware: str, dtype: str
                ) -> tuple[tuple[str, str], Efficiency] | None:
    """The fit a (GPU, dtype) runs with: its own, else the same GPU's BF16 fit (then any of its dtypes); None when
    the GPU has no kernel fit."""
    for key in ((hardware, dtype), (hardware, "bf16"), *sorted(k for k in fitted if k[0] == hardware)):
        if key in fitted:
            return key, fitted[key]
    return None


def _covering(family: str, key: tuple[str, str], families: Mapping[tuple[str, str], frozenset[str]],
              table: Mapping[str, Hardware]) -> tuple[str, str] | None:
    pool = [k for k, fams in families.items() if family in fams and k[0] in table]
    if not pool:
        return None
    bw = table[key[0]].hbm_bandwidth_gb_s if key[0] in table else 1.0

    def rank(k: tuple[str, str]) -> tuple:
        return (k[0] != key[0], k[1] != "bf16" if k[0] == key[0] else k[1] != key[1],
                abs(math.log(table[k[0]].hbm_bandwidth_gb_s / bw)), k)

    return min(pool, key=rank)


def scoped(eff: Efficiency, key: tuple[str, str] | None, model: ModelSpec | None, *,
           fitted: Mapping[tuple[str, str], Efficiency], families: Mapping[tuple[str, str], frozenset[str]],
           table: Mapping[str, Hardware], scale: float = 1.0) -> Efficiency:
    """`eff` (from the fit `key`, its STAGE_B terms times `scale` for a borrowed set) with the STAGE_B terms of a
    fit whose TPOT cells cover the model's family, when `key`'s do not; unchanged without a model or family data."""
    if model is None or key is None or key not in families:
        return eff
    family = arch_family(model)
    if family in families[key]:
        return eff
    alt = _covering(family, key, families, table)
    if alt is None or alt not in fitted:
        return eff
    values = {n: getattr(fitted[alt], n) * scale for n in STAGE_B}
    seen = ", ".join(sorted(families[key]))
    src = dataclasses.replace(eff.source, source=f"{eff.source.source}; per-step and per-layer terms from the "
                                                 f"{alt[0]} / {alt[1]} fit (its TPOT cells cover {family} models; "
                                                 f"the {key[0]} / {key[1]} cells cover {seen} only)")
    return dataclasses.replace(eff, source=src, **values)
