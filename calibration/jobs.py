"""Job kinds and the job process entry point shared by every runner.

`python -m calibration.jobs --kind engine|microbench --run-id ID --store-url URL --spec JSON` runs one job
and records its outcome in the store; progress goes to stdout as lines ("PROGRESS i/n label" and free
text), which the local runner streams and the Ray runner relays through the store's run message.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from calibration.store import Store

JOB_KINDS = ("engine", "microbench")


@dataclass(frozen=True)
class MicrobenchSpec:
    model: str = "smollm2-135m"
    batches: tuple[int, ...] = (1, 4, 16, 32)
    tokens_per_seq: tuple[int, ...] = (1, 4)
    contexts: tuple[int, ...] = (128, 512)
    repeats: int = 5

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MicrobenchSpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def execute(kind: str, spec: dict[str, Any], run_id: str, store_url: str,
            log: Callable[[str], None] = print) -> str:
    """Run one job to its end; returns the final state written to the store."""
    if kind not in JOB_KINDS:
        raise ValueError(f"kind={kind!r} not allowed; allowed: {JOB_KINDS}")
    store = Store(store_url)
    if kind == "engine":
        from calibration.engine import JobSpec, run_job

        return run_job(JobSpec.from_dict(spec), run_id, store_url, log=log)
    from calibration.microbench import run_microbench
    from calibration.predict import model_spec

    ms = MicrobenchSpec.from_dict(spec)
    m = model_spec(ms.model)
    from calibration.microbench import LayerShape

    # Intermediate size is not in ModelSpec: derive it from the per-layer params (attention 2h^2 + 2h*kv,
    # gated MLP 3*h*inter); matches SmolLM2-135M's 1536 to the rounding.
    h = m.hidden_size
    per_layer = (m.total_params_b * 1e9 - m.vocab_size * h) / m.layers
    attn = 2 * h * m.heads * m.head_dim + 2 * h * m.kv_heads * m.head_dim
    inter = max(1, int(round((per_layer - attn) / (3 * h) / 64.0)) * 64)
    shape = LayerShape(m.layers, h, m.heads, m.kv_heads, m.head_dim, inter, m.vocab_size)
    points = len(ms.batches) * len(ms.tokens_per_seq) * len(ms.contexts)
    store.set_status(run_id, "running", f"microbenchmark {points} points")
    try:
        log(f"PROGRESS 0/1 microbench {asdict(shape)}")
        samples = run_microbench(shape, batches=ms.batches, tokens_per_seq=ms.tokens_per_seq,
                                 contexts=ms.contexts, repeats=ms.repeats)
        store.add_step_samples(run_id, [{**s.to_dict(), "model": ms.model} for s in samples])
        for s in samples:
            log(f"b={s.batch} n={s.tokens_per_seq} ctx={s.context_tokens}: {s.step_time_s * 1e3:.2f} ms")
        log("PROGRESS 1/1 done")
        store.set_status(run_id, "succeeded", f"{len(samples)} samples")
        return "succeeded"
    except BaseException as e:
        store.set_status(run_id, "failed", f"{type(e).__name__}: {e}")
        raise


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.jobs")
    p.add_argument("--kind", required=True, choices=JOB_KINDS)
    p.add_argument("--run-id", required=True)
    p.add_argument("--store-url", required=True)
    p.add_argument("--spec", required=True, help="job spec JSON, or '-' to read it from stdin")
    a = p.parse_args(argv)
    spec = json.loads(sys.stdin.read() if a.spec == "-" else a.spec)
    state = execute(a.kind, spec, a.run_id, a.store_url, log=lambda s: print(s, flush=True))
    return 0 if state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
