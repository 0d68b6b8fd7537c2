"""Readers that turn vLLM's metrics into calibration records.

Three sources, one record type (`records.GroupRecord`):
- the offline engine: `LLM(..., disable_log_stats=False).get_metrics()` (vllm/v1/metrics/reader.py:
  Counter / Vector / Gauge / Histogram objects with `.name` like "vllm:spec_decode_num_drafts");
- a live server's Prometheus `/metrics` text (two scrapes, the deltas), parsed with prometheus_client's
  own text parser; counters there carry a `_total` suffix;
- `vllm bench serve --save-result` JSON (vllm/benchmarks/serve.py): `spec_decode_acceptance_rate` is a
  PERCENT (accepted / draft tokens * 100), `spec_decode_acceptance_length` = 1 + accepted / drafts,
  `spec_decode_per_position_acceptance_rates[i]` = accepted_per_pos[i] / drafts.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration.storage.records import GroupRecord, SpecCounts

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
GENERATION_TOKENS = "vllm:generation_tokens"
PROMPT_TOKENS = "vllm:prompt_tokens"
# Histogram observed once per engine step with that step's scheduled tokens: its count is the step count.
ITERATION_TOKENS = "vllm:iteration_tokens_total"
PREFILL_TIME = "vllm:request_prefill_time_seconds"
DECODE_TIME = "vllm:request_decode_time_seconds"
HISTOGRAMS = (ITERATION_TOKENS, PREFILL_TIME, DECODE_TIME)
PERCENT = 100.0


@dataclass(frozen=True)
class MetricSnapshot:
    """Cumulative values at one instant, summed over label sets (engines, models) as vLLM's bench does."""

    counters: dict[str, float] = field(default_factory=dict)  # name without "_total"
    per_pos: dict[int, float] = field(default_factory=dict)
    histograms: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (count, sum)

    def minus(self, before: MetricSnapshot) -> MetricSnapshot:
        return MetricSnapshot(
            counters={k: v - before.counters.get(k, 0.0) for k, v in self.counters.items()},
            per_pos={k: v - before.per_pos.get(k, 0.0) for k, v in self.per_pos.items()},
            histograms={
                k: (c - before.histograms.get(k, (0.0, 0.0))[0], s - before.histograms.get(k, (0.0, 0.0))[1])
                for k, (c, s) in self.histograms.items()
            },
        )

    def spec_counts(self) -> SpecCounts:
        k = max(self.per_pos) + 1 if self.per_pos else 0
        return SpecCounts(
            num_drafts=int(round(self.counters.get(DRAFTS, 0.0))),
            num_draft_tokens=int(round(self.counters.get(DRAFT_TOKENS, 0.0))),
            num_accepted_tokens=int(round(self.counters.get(ACCEPTED, 0.0))),
            accepted_per_pos=tuple(int(round(self.per_pos.get(i, 0.0))) for i in range(k)),
        )

    def extra(self) -> dict[str, float]:
        """Step count and time sums that the step-time fit uses (engine_steps = iteration histogram count)."""
        out: dict[str, float] = {}
        if ITERATION_TOKENS in self.histograms:
            out["engine_steps"] = self.histograms[ITERATION_TOKENS][0]
            out["scheduled_tokens"] = self.histograms[ITERATION_TOKENS][1]
        if PREFILL_TIME in self.histograms:
            out["prefill_time_s_sum"] = self.histograms[PREFILL_TIME][1]
        if DECODE_TIME in self.histograms:
            out["decode_time_s_sum"] = self.histograms[DECODE_TIME][1]
        for name, key in ((GENERATION_TOKENS, "generation_tokens"), (PROMPT_TOKENS, "prompt_tokens")):
            if name in self.counters:
                out[key] = self.counters[name]
        return out


def _add(d: dict, key: Any, value: float) -> None:
    d[key] = d.get(key, 0.0) + float(value)


def snapshot_from_get_metrics(metrics: Iterable[Any]) -> MetricSnapshot:
    """From `LLM.get_metrics()`: objects with `.name` and `.value` (Counter/Gauge), `.values` (Vector) or
    `.count`/`.sum` (Histogram), as in vllm/v1/metrics/reader.py."""
    counters: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    hists: dict[str, tuple[float, float]] = {}
    for m in metrics:
        name = m.name
        if name == ACCEPTED_PER_POS and hasattr(m, "values"):
            for i, v in enumerate(m.values):
                _add(per_pos, i, v)
        elif hasattr(m, "buckets"):
            if name in HISTOGRAMS:
                c, s = hists.get(name, (0.0, 0.0))
                hists[name] = (c + float(m.count), s + float(m.sum))
        elif hasattr(m, "value") and type(m).__name__ == "Counter":
            _add(counters, name, m.value)
    return MetricSnapshot(counters, per_pos, hists)


def snapshot_from_prometheus_text(text: str) -> MetricSnapshot:
    """From Prometheus exposition text (`GET /metrics`), with prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    if not text.strip():
        raise ValueError("metrics text is empty: expected Prometheus exposition format from GET /metrics")
    counters: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    hists: dict[str, list[float]] = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        if fam.type == "counter":
            for s in fam.samples:
                if not s.name.endswith("_total"):
                    continue  # skip "_created" timestamps
                if fam.name == ACCEPTED_PER_POS:
                    _add(per_pos, int(s.labels["position"]), s.value)
                else:
                    _add(counters, fam.name, s.value)
        elif fam.type == "histogram" and fam.name in HISTOGRAMS:
            acc = hists.setdefault(fam.name, [0.0, 0.0])
            for s in fam.samples:
                if s.name == fam.name + "_count":
                    acc[0] += s.value
                elif s.name == fam.name + "_sum":
                    acc[1] += s.value
    return MetricSnapshot(counters, per_pos, {k: (v[0], v[1]) for k, v in hists.items()})


def scrape(url: str, timeout_s: float = 10.0) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"url={url!r} not allowed: must be an http(s) URL of a vLLM server's /metrics")
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (scheme checked above)
        return resp.read().decode()


def record_from_snapshots(
    before: MetricSnapshot,
    after: MetricSnapshot,
    *,
    wall_time_s: float,
    run_id: str,
    workload: str,
    model: str,
    method: str,
    k: int | None = None,
    draft: str | None = None,
    config_label: str = "",
    source: str = "prometheus",
    num_prompts: int | None = None,
    max_output_tokens: int = 0,
    prompt_set_hash: str = "",
    hardware: str = "",
) -> GroupRecord:
    """Deltas between two snapshots as one record. K defaults to draft tokens per draft."""
    delta = after.minus(before)
    counts = delta.spec_counts()
    if k is None:
        k = round(counts.num_draft_tokens / counts.num_drafts) if counts.num_drafts else 0
    if method != "none" and k < 1:
        raise ValueError(f"k={k} not allowed for method={method!r}: no drafts between the two scrapes")
    extra = delta.extra()
    return GroupRecord(
        run_id=run_id,
        config_label=config_label or (f"{method}-k{k}" if method != "none" else "baseline"),
        workload=workload,
        model=model,
        method=method,
        k=k if method != "none" else 0,
        draft=draft,
        prompt_set_hash=prompt_set_hash,
        num_prompts=int(num_prompts if num_prompts is not None else delta.histograms.get(DECODE_TIME, (0, 0))[0]),
        prompt_tokens=int(round(extra.get("prompt_tokens", 0.0))),
        output_tokens=int(round(extra.get("generation_tokens", 0.0))),
        max_output_tokens=max_output_tokens,
        counts=counts,
        wall_time_s=wall_time_s,
        source=source,
        hardware=hardware,
        created_at=time.time(),
        extra=extra,
    )


def import_prometheus(
    url: str, *, interval_s: float, run_id: str, workload: str, model: str, method: str,
    k: int | None = None, draft: str | None = None,
) -> GroupRecord:
    """Scrape `url` twice, `interval_s` apart, and return the deltas as one record."""
    if not interval_s > 0:
        raise ValueError(f"interval_s={interval_s} not allowed: must be > 0")
    t0 = time.perf_counter()
    before = snapshot_from_prometheus_text(scrape(url))
    time.sleep(interval_s)
    after = snapshot_from_prometheus_text(scrape(url))
    return record_from_snapshots(
        before, after, wall_time_s=time.perf_counter() - t0, run_id=run_id, workload=workload, model=model,
        method=method, k=k, draft=draft, source="prometheus",
    )


def record_from_bench_json(
    data: dict[str, Any] | str | Path, *, run_id: str, workload: str, model: str | None = None,
    method: str | None = None, draft: str | None = None,
) -> GroupRecord:
    """One `vllm bench serve --save-result` JSON as a record (vllm/benchmarks/serve.py field names)."""
    if not isinstance(data, dict):
        data = json.loads(Path(data).read_text())
    for key in ("duration", "completed", "total_output_tokens"):
        if key not in data:
            raise ValueError(f"bench JSON lacks field {key!r}: not a `vllm bench serve --save-result` file?")
    duration_s = float(data["duration"])
    has_spec = "spec_decode_num_drafts" in data
    if has_spec:
        drafts = int(data["spec_decode_num_drafts"])
        draft_tokens = int(data["spec_decode_draft_tokens"])
        accepted = int(data["spec_decode_accepted_tokens"])
        rates = [float(r) for r in data.get("spec_decode_per_position_acceptance_rates", [])]
        # Per-position rates are accepted_per_pos[i] / drafts (serve.py); rounding restores the counts.
        per_pos = tuple(int(round(r * drafts)) for r in rates)
        rate_pct = float(data.get("spec_decode_acceptance_rate", math.nan))
        if draft_tokens and math.isfinite(rate_pct) and abs(rate_pct / PERCENT - accepted / draft_tokens) > 1e-3:
            raise ValueError(
                f"spec_decode_acceptance_rate={rate_pct} is inconsistent with accepted/draft tokens "
                f"{accepted}/{draft_tokens}: expected a percent"
            )
        k = len(rates) or (round(draft_tokens / drafts) if drafts else 0)
        counts = SpecCounts(drafts, draft_tokens, accepted, per_pos)
        method = method or "other"
    else:
        counts = SpecCounts()
        k = 0
        method = "none"
    return GroupRecord(
        run_id=run_id,
        config_label=str(data.get("label") or (f"{method}-k{k}" if k else "baseline")),
        workload=workload,
        model=model or str(data.get("model_id", "")),
        method=method,
        k=k,
        draft=draft,
        prompt_set_hash="",
        num_prompts=int(data["completed"]),
        prompt_tokens=int(data.get("total_input_tokens", 0)),
        output_tokens=int(data["total_output_tokens"]),
        max_output_tokens=0,
        counts=counts,
        wall_time_s=duration_s,
        source="bench_json",
        created_at=time.time(),
        extra={k2: float(data[k2]) for k2 in ("output_throughput", "mean_tpot_ms", "median_itl_ms",
                                              "spec_decode_acceptance_length") if k2 in data},
    )
