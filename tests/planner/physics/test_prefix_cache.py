"""The prefix-cache share (PlanRequest.prefix_cache_share): the cached prompt tokens are not prefilled again, in the
plan's CPM, the fleet's bill and the assumptions alike; 0 (or none) is exactly today's answer; bad values are refused
naming the field, the value and the range; a Mooncake trace's share flows into the plan unless one is entered."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner import plan as P
from planner.context import make_context
from planner.physics.serving import prefill_time_s
from profiles.request import request_from_traffic
from profiles.traffic import parse_traffic
from tests.profiles.test_traffic_mooncake import FIXTURE, rows, share_by_hand

RAG = dict(model="llama-3.1-8b", hardware="h100-sxm", workload="rag_summarization", monthly_output_tokens=2e10,
           daily_shape="business_hours")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("model,hardware,tp", [("llama-3.1-8b", "h100-sxm", 1), ("deepseek-v3", "h200", 8)])
def test_cached_prefill_is_the_whole_prompt_minus_its_cached_prefix(catalog, model, hardware, tp):
    """Causal prefill of P tokens with its first sP cached = prefill(P) - prefill(sP): the new tokens run their
    GEMMs and attend over everything before them, the cached prefix included."""
    ctx = make_context(P.PlanRequest(model=model, hardware=hardware, tp=tp), catalog)
    p = np.array([600.0, 12_000.0, 100_000.0])
    for s in (0.25, 0.5, 0.9):
        cached = prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=p, tp=tp, cached_share=s)
        whole = prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=p, tp=tp)
        prefix = prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=s * p, tp=tp)
        np.testing.assert_allclose(cached, whole - prefix, rtol=1e-12)
        assert np.all(cached < whole)
    # share 0 is the same arithmetic as no share; share 1 leaves nothing to prefill
    assert np.array_equal(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=p, tp=tp, cached_share=0.0),
                          prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=p, tp=tp))
    assert np.all(prefill_time_s(ctx.target, ctx.hw_params, prompt_tokens=p, tp=tp, cached_share=1.0) == 0)


@pytest.fixture(scope="module")
def rag_plans(catalog):
    return {s: P.plan(P.PlanRequest(**RAG, prefix_cache_share=s), catalog) for s in (None, 0.0, 0.5)}


def test_share_zero_is_exactly_todays_answer(rag_plans):
    none, zero = rag_plans[None], rag_plans[0.0]
    for a, b in zip([none.baseline, *none.methods], [zero.baseline, *zero.methods], strict=True):
        assert (a.method, a.k, a.batch, a.usd_per_mtok, a.tpot_ms) == (b.method, b.k, b.batch, b.usd_per_mtok,
                                                                         b.tpot_ms)
    assert [b.usd_per_month for b in none.bills] == [b.usd_per_month for b in zero.bills]
    assert none.economics.monthly_saving_usd == zero.economics.monthly_saving_usd


def test_half_the_prompt_cached_lowers_prefill_cpm_and_the_bill(rag_plans):
    full, half = rag_plans[0.0], rag_plans[0.5]
    for method in [full.baseline.method] + [m.method for m in full.methods if m.feasible]:
        f_cfg, h_cfg = full.fleet.config(method), half.fleet.config(method)
        # the share of each replica's time spent in prefill falls every hour that has traffic
        busy = [(a.prefill_share, b.prefill_share) for a, b in zip(f_cfg.hours, h_cfg.hours, strict=True)
                if a.prefill_share > 0]
        assert busy and all(b < a for a, b in busy)
        assert half.bill(method).usd_per_month < full.bill(method).usd_per_month
    assert half.baseline.usd_per_mtok < full.baseline.usd_per_mtok
    best_full = min(m.usd_per_mtok for m in full.methods if m.feasible)
    best_half = min(m.usd_per_mtok for m in half.methods if m.feasible)
    assert best_half < best_full


def test_the_assumptions_say_the_share_and_its_source(rag_plans):
    def line(p):
        return next(a for a in p.assumptions if a.what == "prefix cache share")
    assert line(rag_plans[None]).value.startswith("0 % of prompt tokens")
    assert "planner default" in line(rag_plans[None]).source
    assert line(rag_plans[0.5]).value.startswith("50.0 % of prompt tokens")
    assert line(rag_plans[0.5]).source == "entered by the user"


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, True, "half"])
def test_bad_shares_are_refused_naming_field_value_and_range(catalog, bad):
    with pytest.raises(P.PlanError) as exc:
        P.plan(P.PlanRequest(**RAG, prefix_cache_share=bad), catalog)
    msg = str(exc.value)
    assert exc.value.field == "prefix_cache_share" and repr(bad) in msg and "from 0 to 1" in msg


def test_a_mooncake_traces_share_flows_into_the_request_unless_one_is_entered(catalog):
    prof = parse_traffic(FIXTURE.name, FIXTURE.read_bytes(), catalog)
    share, _, _ = share_by_hand(rows())
    common = dict(volume=1e9, volume_typed=False, volume_label="typed", tpot_slo_ms=50.0, model="llama-3.1-8b",
                  hardware="h100-sxm")
    req = request_from_traffic(prof, **common)
    assert req.prefix_cache_share == pytest.approx(share, rel=1e-12)
    assert "Mooncake trace hash_ids" in req.prefix_cache_source and FIXTURE.name in req.prefix_cache_source
    typed = request_from_traffic(prof, prefix_cache_share=0.1, prefix_cache_label="entered in the sidebar", **common)
    assert typed.prefix_cache_share == 0.1
    assert typed.prefix_cache_source.startswith("entered in the sidebar; it replaces the")
    assert request_from_traffic(None, **common).prefix_cache_share is None  # no trace, nothing entered: 0
    # the plan charges the trace's share: the same request at share 0 costs more
    with_trace = P.plan(dataclasses.replace(req, levers_start=None), catalog)
    without = P.plan(dataclasses.replace(req, prefix_cache_share=None, levers_start=None), catalog)
    assert with_trace.baseline.usd_per_mtok < without.baseline.usd_per_mtok


def test_cli_plan_with_a_mooncake_trace_carries_its_name_and_share():
    p = run("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--traffic", str(FIXTURE), "--no-levers")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    share, cached, prompt = share_by_hand(rows())
    assert out["traffic"]["format"] == "Mooncake trace"
    assert out["traffic"]["prefix_reuse"]["share"] == pytest.approx(share, rel=1e-12)
    assert out["traffic"]["prefix_reuse"]["cached_prompt_tokens"] == cached
    assert out["prefix_cache"]["share"] == pytest.approx(share, rel=1e-12)
    line = next(a for a in out["assumptions"] if a["what"] == "prefix cache share")
    assert "Mooncake trace hash_ids" in line["source"] and f"{share * 100:.1f} %" in line["value"]


def test_cli_flag_overrides_the_trace_and_bad_values_fail_clearly():
    p = run("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--traffic", str(FIXTURE), "--no-levers",
            "--prefix-cache-share", "0.2")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["prefix_cache"]["share"] == 0.2
    assert out["prefix_cache"]["source"].startswith("entered (--prefix-cache-share); it replaces the")
    bad = run("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--no-levers", "--prefix-cache-share", "1.5")
    assert bad.returncode == 2
    assert "prefix_cache_share=1.5 is not allowed" in bad.stderr and "from 0 to 1" in bad.stderr
