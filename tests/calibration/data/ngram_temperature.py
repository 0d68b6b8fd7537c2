"""Regenerates ngram_temperature_cpu.json (run by hand, ~3 minutes on 2 CPU cores; not in CI):
the offline CPU engine, n-gram K=3, the 8 shipped code prompts x 32 tokens (chat template, ignore_eos), the
same prompts at temperature 0 (greedy), 0.001 (the sampling path, but a near-greedy distribution) and 1.0
(what a server uses when a request names no temperature), then greedy again.

Usage: ~/.cache/specplan/venv/bin/python tests/calibration/data/ngram_temperature.py
"""

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))


def main() -> None:
    from vllm import LLM, SamplingParams

    from calibration.harness.metrics import snapshot_from_get_metrics
    from calibration.measure.spec import load_prompts
    from calibration.storage.records import package_versions
    from calibration.targets.model_assets import ensure_target

    llm = LLM(model=str(ensure_target().path), dtype="bfloat16", enforce_eager=True, gpu_memory_utilization=0.3,
              disable_log_stats=False, max_model_len=2048, seed=0, enable_prefix_caching=False,
              speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
                                  "prompt_lookup_min": 2})
    tok = llm.get_tokenizer()
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
               for p in load_prompts("code", 8)]
    runs = []
    for temp in (0.0, 1e-3, 1.0, 0.0):
        before = snapshot_from_get_metrics(llm.get_metrics())
        llm.generate(prompts, SamplingParams(temperature=temp, max_tokens=32, ignore_eos=True, seed=0), use_tqdm=False)
        c = snapshot_from_get_metrics(llm.get_metrics()).minus(before).spec_counts()
        runs.append({"temperature": temp, "drafts": c.num_drafts, "draft_tokens": c.num_draft_tokens,
                     "accepted": c.num_accepted_tokens})
        print(runs[-1], flush=True)
    out = {"engine": package_versions(), "method": "ngram", "k": 3, "prompts": "code x 8", "max_tokens": 32,
           "runs": runs}
    (Path(__file__).parent / "ngram_temperature_cpu.json").write_text(json.dumps(out, indent=1) + "\n")
    from calibration.measure.engine import shutdown_engine

    shutdown_engine(llm)  # the engine-core process outlives os._exit otherwise
    os._exit(0)


if __name__ == "__main__":
    main()
