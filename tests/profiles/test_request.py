"""The one traffic-to-request adapter (profiles.request): which volume is planned, and that the batch cap and the
fleet's hours follow it; the reading options' round trip through the store's JSON."""

from __future__ import annotations

import pytest

from planner.fleet import DAYS_PER_MONTH  # the fleet's month: its hours x 24 x this many days
from profiles import load_catalog
from profiles.request import request_from_traffic
from profiles.traffic import ParseOptions, WorkloadRule, parse_traffic
from profiles.traffic.options import options_from_json, options_json, upload_digest

FIELDS = dict(model="llama-3.1-8b", hardware="h100-sxm")
MONTH_S = 365.25 / 12 * 86400


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def hour_trace(cat):
    """One hour, a request every 10 s of 100 output tokens: 360 requests, 36,000 tokens in 3,590 s."""
    rows = "".join(f"2026-11-02T10:{s // 60:02d}:{s % 60:02d}Z,chat,300,100\n" for s in range(0, 3600, 10))
    return parse_traffic("hour.csv", ("timestamp,workload,prompt_tokens,output_tokens\n" + rows).encode(), cat)


def _req(prof, **kw):
    args = dict(volume=7e9, volume_typed=True, volume_label="typed", tpot_slo_ms=50.0, fleet=True, shape="flat")
    args.update(kw)
    return request_from_traffic(prof, **args, **FIELDS)


def test_the_trace_volume_is_used_unless_one_is_typed(hour_trace):
    own = 36_000 / 3590 * MONTH_S
    req = _req(hour_trace, volume_typed=False)
    assert req.monthly_output_tokens == pytest.approx(own) and req.volume_source == "traffic profile 'hour.csv'"
    # its own hours, unscaled: 360 requests over 3,590 s, flat over the day
    assert [h.requests_per_s for h in req.hours] == pytest.approx([360 / 3590] * 24)
    typed = _req(hour_trace)
    assert typed.monthly_output_tokens == 7e9
    assert typed.volume_source.startswith("typed; it replaces the") and "hour.csv" in typed.volume_source


def test_a_typed_volume_scales_the_fleet_and_the_cap(hour_trace):
    typed = _req(hour_trace, volume=7e9)
    # the fleet's month: rate x 100 tokens x 86,400 s x DAYS_PER_MONTH = 7e9 tokens
    want = 7e9 / (100 * 86400 * DAYS_PER_MONTH)
    assert [h.requests_per_s for h in typed.hours] == pytest.approx([want] * 24, rel=1e-12)
    assert "scaled to 7B output tokens/month" in typed.hours_source
    # Little's law at the median minute: 6 requests/min x 100 tokens x 50 ms = 0.5 in flight, x the volume ratio
    own = 36_000 / 3590 * MONTH_S
    assert typed.batch_cap == pytest.approx(0.1 * 100 * 0.05 * 7e9 / own)
    assert _req(hour_trace, volume_typed=False).batch_cap == 1.0  # 0.5 in flight: at least one sequence


def test_no_profile_and_a_mix_of_shares_plan_the_typed_volume(cat):
    req = _req(None, volume_typed=False)
    assert (req.monthly_output_tokens, req.volume_source, req.hours, req.segments, req.batch_cap) == (
        7e9, "typed", (), (), None)
    mix = parse_traffic("mix.csv", b"workload,share\nchat,0.5\ncode,0.5\n", cat)
    req = _req(mix, volume_typed=False)
    assert req.monthly_output_tokens == 7e9 and req.hours == () and req.daily_shape == "flat"
    assert {s.workload for s in req.segments} == {"chat", "code"}
    assert _req(mix, fleet=False).daily_shape is None


def test_options_round_trip_and_digest():
    opts = ParseOptions(columns=(("timestamp", "when"),), delimiter=";",
                        workload=WorkloadRule(mode="rules", rules=(("model", "mini", "chat"),)))
    assert options_from_json(options_json(opts)) == opts
    assert options_from_json(options_json(None)) == ParseOptions()
    assert upload_digest(b"x", opts) != upload_digest(b"x", None) != upload_digest(b"y", None)
    assert len(upload_digest(b"x", None)) == 64
