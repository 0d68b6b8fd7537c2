"""Readers against real text produced by the CPU engine (tests/calibration/data/README.md)."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator

import pytest

from calibration.harness import metrics
from calibration.storage.records import SpecCounts
from tests.calibration.conftest import DATA


def _grep_counter(text: str, name: str) -> float:
    """Independent reference: sum the sample lines of `name` with a regex (not the parser under test)."""
    return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def test_engine_registry_text_parses_to_its_counters() -> None:
    text = (DATA / "engine_registry_ngram_k4.txt").read_text()
    snap = metrics.snapshot_from_prometheus_text(text)
    counts = snap.spec_counts()
    assert counts.num_drafts == _grep_counter(text, "vllm:spec_decode_num_drafts_total") > 0
    assert counts.num_draft_tokens == _grep_counter(text, "vllm:spec_decode_num_draft_tokens_total")
    assert counts.num_accepted_tokens == _grep_counter(text, "vllm:spec_decode_num_accepted_tokens_total") > 0
    assert len(counts.accepted_per_pos) == 4  # K=4
    assert sum(counts.accepted_per_pos) == counts.num_accepted_tokens
    assert list(counts.accepted_per_pos) == sorted(counts.accepted_per_pos, reverse=True)
    # "_created" samples (timestamps) must not leak into the counters
    assert snap.counters[metrics.GENERATION_TOKENS] == _grep_counter(text, "vllm:generation_tokens_total")
    steps, _ = snap.histograms[metrics.ITERATION_TOKENS]
    assert steps == _grep_counter(text, "vllm:iteration_tokens_total_count") > 0


def test_server_scrapes_delta_matches_bench_json_counts() -> None:
    """Two real scrapes around a real `vllm bench serve`: our deltas equal the counts the benchmark
    computed itself from the same server (vllm/benchmarks/serve.py)."""
    before = metrics.snapshot_from_prometheus_text((DATA / "server_metrics_before.txt").read_text())
    after = metrics.snapshot_from_prometheus_text((DATA / "server_metrics_after.txt").read_text())
    rec = metrics.record_from_snapshots(before, after, wall_time_s=5.0, run_id="r", workload="code",
                                        model="smollm2-135m", method="ngram", k=3)
    bench = json.loads((DATA / "bench_ngram_k3.json").read_text())
    assert rec.counts.num_drafts == bench["spec_decode_num_drafts"] > 0
    assert rec.counts.num_draft_tokens == bench["spec_decode_draft_tokens"]
    assert rec.counts.num_accepted_tokens == bench["spec_decode_accepted_tokens"]
    assert rec.output_tokens == bench["total_output_tokens"]
    assert len(rec.counts.accepted_per_pos) == 3


def test_bench_json_record_treats_acceptance_rate_as_percent() -> None:
    bench = json.loads((DATA / "bench_ngram_k3.json").read_text())
    rec = metrics.record_from_bench_json(DATA / "bench_ngram_k3.json", run_id="r", workload="code",
                                         method="ngram")
    assert rec.source == "bench_json"
    assert rec.k == len(bench["spec_decode_per_position_acceptance_rates"]) == 3
    assert rec.wall_time_s == bench["duration"]
    assert rec.output_tokens_per_s == pytest.approx(bench["output_throughput"])
    assert rec.counts.num_drafts == bench["spec_decode_num_drafts"]
    assert rec.acceptance_length == pytest.approx(bench["spec_decode_acceptance_length"])


def test_bench_json_with_a_fraction_instead_of_percent_is_rejected() -> None:
    data = {"duration": 10.0, "completed": 4, "total_output_tokens": 400, "spec_decode_num_drafts": 100,
            "spec_decode_draft_tokens": 300, "spec_decode_accepted_tokens": 150,
            "spec_decode_acceptance_rate": 0.5,  # a fraction: the real file has 50.0
            "spec_decode_per_position_acceptance_rates": [0.8, 0.5, 0.2]}
    with pytest.raises(ValueError, match="spec_decode_acceptance_rate=0.5"):
        metrics.record_from_bench_json(data, run_id="r", workload="w")
    data["spec_decode_acceptance_rate"] = 50.0
    rec = metrics.record_from_bench_json(data, run_id="r", workload="w")
    assert rec.counts.accepted_per_pos == (80, 50, 20)
    assert rec.acceptance_length == pytest.approx(2.5)


def test_bench_json_missing_fields_names_them() -> None:
    with pytest.raises(ValueError, match="'duration'"):
        metrics.record_from_bench_json({"completed": 1}, run_id="r", workload="w")


def test_empty_metrics_text_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        metrics.snapshot_from_prometheus_text("  \n")


def test_counter_reset_between_scrapes_is_rejected() -> None:
    after = metrics.snapshot_from_prometheus_text((DATA / "server_metrics_before.txt").read_text())
    before = metrics.snapshot_from_prometheus_text((DATA / "server_metrics_after.txt").read_text())
    with pytest.raises(ValueError, match="counter reset"):
        after.minus(before).spec_counts()


def test_scrape_rejects_non_http_urls() -> None:
    with pytest.raises(ValueError, match="url='file:///etc/passwd'"):
        metrics.scrape("file:///etc/passwd")


@pytest.fixture
def metrics_server() -> Iterator[str]:
    """A loopback HTTP server answering GET /metrics with the real 'before' then 'after' scrape."""
    pages = [(DATA / "server_metrics_before.txt").read_bytes(), (DATA / "server_metrics_after.txt").read_bytes()]
    served: list[int] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = pages[min(len(served), 1)]
            served.append(1)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    srv.shutdown()


def test_import_prometheus_takes_two_scrapes_and_the_deltas(metrics_server: str) -> None:
    rec = metrics.import_prometheus(metrics_server, interval_s=0.05, run_id="r", workload="code",
                                    model="smollm2-135m", method="ngram")
    bench = json.loads((DATA / "bench_ngram_k3.json").read_text())
    assert rec.source == "prometheus"
    assert rec.counts.num_drafts == bench["spec_decode_num_drafts"]
    assert rec.wall_time_s >= 0.05


def test_get_metrics_objects_are_read_like_the_text() -> None:
    """vllm's reader objects (duck-typed: same attribute names as vllm/v1/metrics/reader.py)."""

    class Counter:
        def __init__(self, name: str, value: int) -> None:
            self.name, self.value, self.labels = name, value, {}

    class Vector:
        def __init__(self, name: str, values: list[int]) -> None:
            self.name, self.values, self.labels = name, values, {}

    snap = metrics.snapshot_from_get_metrics([
        Counter(metrics.DRAFTS, 10), Counter(metrics.DRAFT_TOKENS, 30), Counter(metrics.ACCEPTED, 12),
        Vector(metrics.ACCEPTED_PER_POS, [7, 4, 1]), Counter(metrics.DRAFTS, 5),  # a second engine
    ])
    assert snap.spec_counts() == SpecCounts(15, 30, 12, (7, 4, 1))
