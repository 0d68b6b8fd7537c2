"""The draft side of a verifier step for a head or native-module method (EAGLE-3, P-EAGLE, EAGLE, MEDUSA, MTP) on
the calibration machine: the planner's own draft time (planner.physics.serving.draft_time_s) on the planner's network
for the method (planner.physics.networks.head_net), so that the engine calibration and the plan mean the same by a draft
pass. The per-method terms are fitted by calibration.analysis.method_costs."""

from __future__ import annotations

import dataclasses
from typing import Any

# Registry methods whose drafter is a head on the target or the target's native module (no separate model).
HEAD_METHODS = ("eagle3", "p_eagle", "eagle", "medusa", "mtp")


def head_net_for(method: str, model_name: str, dtype: str = "bfloat16") -> tuple[Any, Any]:
    """(planner Method, draft Net) of a head method on the calibration model `model_name`, its bytes in the engine's
    dtype (float32 streams twice bf16's bytes)."""
    from calibration.harness.engine_settings import DTYPE_BYTES_VS_BF16
    from calibration.targets.catalog import catalog, model_spec
    from calibration.targets.registry import planner_method
    from planner.physics.networks import head_net

    cat = catalog()
    if cat is None:
        raise ValueError("the planner's catalogue did not load: the head's network is unknown")
    meth = cat.methods[planner_method(method)]
    net = head_net(meth, model_spec(model_name), "bf16")
    f = DTYPE_BYTES_VS_BF16.get(dtype, 1.0)
    if f != 1.0:
        net = dataclasses.replace(net, dense_weight_bytes=net.dense_weight_bytes * f,
                                  kv_bytes_per_token=net.kv_bytes_per_token * f,
                                  fusion_weight_bytes=net.fusion_weight_bytes * f)
    return meth, net


def head_draft_times_s(rec: Any, hwp: Any, *, batch: float, verify_tokens: float, context_tokens: float,
                       prompt_tokens: float, t_fixed_draft_s: float) -> tuple[float, float]:
    """(draft side of one verifier step, the head's pass over the prompt at prefill), seconds, for the group `rec`
    of a head method: planner.physics.serving.draft_time_s with this method's per-pass fixed time."""
    from planner.physics.roofline import step_time_s
    from planner.physics.serving import DRAFTING_MODE_CODE, MODE_PARALLEL, draft_time_s

    meth, net = head_net_for(rec.method, rec.model, str(rec.extra.get("dtype", "bfloat16")))
    hw = dataclasses.replace(hwp, t_fixed_draft_s=t_fixed_draft_s)
    mode = DRAFTING_MODE_CODE[meth.drafting]
    t, _, _ = draft_time_s(net, hw, mode=mode, draft_scales_with_k=meth.draft_params_scale_with_k, k=float(rec.k),
                           batch=batch, verify_tokens=verify_tokens, context_tokens=context_tokens)
    prefill = 0.0
    if not meth.draft_params_scale_with_k:
        # A head with its own KV cache (EAGLE, EAGLE-3, P-EAGLE, MTP) runs once over the prompt's hidden states
        # after the target's prefill (vLLM's EAGLE proposer drafts from every position); MEDUSA reads only the
        # last hidden state. A parallel head's pass adds its K - 1 mask tokens.
        tokens = prompt_tokens + (rec.k - 1.0 if mode == MODE_PARALLEL else 0.0)
        p, _ = step_time_s(net, hw, batch=batch, tokens_per_seq=tokens, context_tokens=prompt_tokens / 2.0,
                           t_fixed_s=t_fixed_draft_s)
        prefill = float(p)
    return float(t), prefill
