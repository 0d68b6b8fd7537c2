"""Mooncake traces (kvcache-ai/Mooncake FAST25-release/traces, JSON lines of timestamp in ms, input_length,
output_length and hash_ids, one id per 512-token prompt block) are recognised by their fields, named, mapped onto
the per-request columns, and their hash_ids give the prefix-reuse share.

The fixture (tests/profiles/traffic/mooncake_trace.jsonl) is written in the published format: a 1024-token system
prompt (ids 0, 1) shared by most conversations, later turns that repeat their conversation's earlier blocks, one-off
prompts sharing nothing, and two prompts repeated whole (their partial last block is cached too). The share is
computed here from the file's lines with a plain set, not by the code under test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from profiles import load_catalog
from profiles.traffic import TrafficError, parse_traffic

FIXTURE = Path(__file__).parent / "traffic" / "mooncake_trace.jsonl"
MONTH_S = 30.4375 * 86400  # seconds in an average month


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def share_by_hand(records: list[dict]) -> tuple[float, float, float]:
    """(share, cached tokens, prompt tokens): a block's tokens are 512, the last block's input_length - 512 (n-1);
    a block is cached when its id was seen before (no eviction)."""
    seen: set[int] = set()
    cached = prompt = 0
    for r in records:
        ids, length = r["hash_ids"], r["input_length"]
        prompt += length
        for i, h in enumerate(ids):
            tokens = 512 if i < len(ids) - 1 else length - 512 * (len(ids) - 1)
            if h in seen:
                cached += tokens
            seen.add(h)
    return cached / prompt, cached, prompt


def test_the_fixture_is_in_the_published_format():
    recs = rows()
    assert 30 <= len(recs) <= 60
    for r in recs:
        assert set(r) == {"timestamp", "input_length", "output_length", "hash_ids"}
        # Mooncake's traces: one id per started block of 512 prompt tokens
        assert len(r["hash_ids"]) == math.ceil(r["input_length"] / 512)
    assert recs[0]["timestamp"] == 0  # milliseconds since the first request


def test_mooncake_trace_is_recognised_named_and_mapped(cat):
    recs = rows()
    prof = parse_traffic(FIXTURE.name, FIXTURE.read_bytes(), cat)
    assert prof.source_format == "Mooncake trace"
    assert dict(prof.column_map)["prompt_tokens"] == "input_length"
    assert dict(prof.column_map)["output_tokens"] == "output_length"
    assert prof.requests == len(recs)
    seg = prof.segments[0]
    assert seg.mean_prompt_tokens == pytest.approx(sum(r["input_length"] for r in recs) / len(recs))
    assert seg.mean_output_tokens == pytest.approx(sum(r["output_length"] for r in recs) / len(recs))
    # timestamps are milliseconds: the span is the last arrival / 1000 seconds, and the volume follows from it
    span_s = (recs[-1]["timestamp"] - recs[0]["timestamp"]) / 1000
    assert prof.span_s == pytest.approx(span_s)
    assert prof.monthly_output_tokens == pytest.approx(sum(r["output_length"] for r in recs) / span_s * MONTH_S)


def test_prefix_reuse_share_matches_a_hand_count(cat):
    share, cached, prompt = share_by_hand(rows())
    reuse = parse_traffic(FIXTURE.name, FIXTURE.read_bytes(), cat).prefix_reuse
    assert reuse is not None
    assert reuse.share == pytest.approx(share, rel=1e-12)
    assert (reuse.cached_tokens, reuse.prompt_tokens) == (cached, prompt)
    assert reuse.block_tokens == 512 and reuse.source == "Mooncake trace hash_ids"
    assert "upper bound" in reuse.note and "no eviction" in reuse.note
    assert 0.3 < share < 0.9  # the fixture has real reuse, and prompts that share nothing


def test_a_repeated_prompt_caches_its_partial_last_block(cat):
    lines = [{"timestamp": 0, "input_length": 700, "output_length": 10, "hash_ids": [7, 8]},
             {"timestamp": 500, "input_length": 700, "output_length": 10, "hash_ids": [7, 8]},
             {"timestamp": 900, "input_length": 600, "output_length": 10, "hash_ids": [7, 9]}]
    data = "".join(json.dumps(r) + "\n" for r in lines).encode()
    reuse = parse_traffic("t.jsonl", data, cat).prefix_reuse
    # second prompt: 512 + 188 cached; third: its first block (512) cached, its own 88-token tail not
    assert reuse.cached_tokens == 512 + 188 + 512
    assert reuse.share == pytest.approx((512 + 188 + 512) / 2000)


def test_a_json_file_and_lengths_written_as_text_give_the_same_share(cat):
    """A .json file of JSON lines and the line-by-line reader (a value pyarrow would not take) agree."""
    recs = rows()
    fast = parse_traffic("trace.json", FIXTURE.read_bytes(), cat)
    assert fast.source_format == "Mooncake trace"
    recs[3] = {**recs[3], "output_length": str(recs[3]["output_length"])}  # a string: the slow path
    slow = parse_traffic("trace.jsonl", "".join(json.dumps(r) + "\n" for r in recs).encode(), cat)
    assert slow.prefix_reuse.share == pytest.approx(fast.prefix_reuse.share, rel=1e-12)
    assert slow.requests == fast.requests


def test_bad_hash_ids_name_the_line(cat):
    lines = FIXTURE.read_text().splitlines()
    bad = json.loads(lines[4])
    bad["hash_ids"] = [0, 1.5]
    lines[4] = json.dumps(bad)
    with pytest.raises(TrafficError) as exc:
        parse_traffic("t.jsonl", ("\n".join(lines) + "\n").encode(), cat)
    p = exc.value.problems[0]
    assert p.column == "hash_ids" and p.row == 5 and "integer block hash ids" in str(p)


def test_a_file_without_hash_ids_is_not_a_mooncake_trace(cat):
    data = b'{"timestamp": 1700000000, "input_length": 100, "output_length": 10}\n' \
           b'{"timestamp": 1700000060, "input_length": 300, "output_length": 30}\n'
    prof = parse_traffic("t.jsonl", data, cat)
    assert prof.source_format != "Mooncake trace" and prof.prefix_reuse is None
    assert prof.segments[0].mean_prompt_tokens == 200  # input_length is still read as the prompt tokens
