"""A disaggregated fleet's decode pool runs K per hour's batch as the co-located fleet does (planner.money.disagg
.schedule_decode, planner.money.kday): one schedule, its own deployment's, the one the deploy command prints."""

from __future__ import annotations

import math
import re

import pytest

from planner.money.kday import k_at_batch
from planner.plan import plan
from tests.planner.money.test_kday import PEAK, _day_request


@pytest.fixture(scope="module")
def split(catalog):
    return plan(_day_request(serving="disaggregated"), catalog)


def test_the_decode_pool_bills_each_hour_at_the_printed_schedules_k(split):
    f = split.best_fleet
    assert f.serving == "disaggregated" and f.method == "dflash"
    sched = split.deploy["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert len({k for *_, k in sched}) > 1  # a schedule, not one K
    pre, dec = f.pools
    for h, d in zip(f.hours, dec.hours, strict=True):
        assert d.k == k_at_batch(sched, d.batch) == h.k  # the hour's K is the printed schedule's at its batch
        assert d.tpot_ms <= split.request.tpot_slo_ms
    # the night (one decode replica, a small batch) drafts more than the peak: the one-K fleet billed the peak's K
    night = [h.k for h in f.hours if h.requests_per_s < PEAK]
    peak = [h.k for h in f.hours if h.requests_per_s == PEAK]
    assert set(peak) == {split.best.k} and min(night) > max(peak)
    # the bill is both pools', and the headline's
    assert pre.usd_per_month + dec.usd_per_month == pytest.approx(f.usd_per_month)
    assert split.economics.new_bill_usd_per_month == pytest.approx(f.usd_per_month)


def test_the_deploy_command_is_the_decode_pools(split):
    f = split.best_fleet
    pre, dec = f.pools
    cmd = split.deploy["vllm_command"] if split.deploy.get("vllm_command") else split.deploy["command"]
    assert re.search(rf"--max-num-seqs {f.batch}\b", cmd)
    assert f.batch == math.ceil(dec.batch - 1e-9)  # its busiest hour's sequences per replica, rounded up
    sched = split.deploy["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert sched[-1][1] == f.batch  # the schedule runs up to the decode pool's --max-num-seqs
    note = next(n for n in split.deploy["notes"] if n.startswith("disaggregated"))
    assert f"TP {dec.tp}" in note and f"TP {pre.tp}" in note


def test_co_located_and_disaggregated_print_their_own_schedule(catalog, split):
    co = plan(_day_request(), catalog)
    sc = co.deploy["speculative_config"]["num_speculative_tokens_per_batch_size"]
    sd = split.deploy["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert sc[-1][1] == co.best_fleet.batch != split.best_fleet.batch == sd[-1][1]
    for h in co.best_fleet.hours:
        assert h.k == k_at_batch(sc, h.batch)


def test_served_best_the_plan_carries_the_four_fleets_it_weighed_and_shows_the_cheaper(catalog):
    from tests.planner.money.test_disagg import _req

    p = plan(_req(serving="best"), catalog)
    opts = p.serving_options
    assert [(f.role, f.serving) for f in opts] == [("today", "colocated"), ("best", "colocated"),
                                                   ("today", "disaggregated"), ("best", "disaggregated")]
    for role, head in (("today", p.reference_fleet), ("best", p.best_fleet)):
        mine = [f for f in opts if f.role == role and f.feasible]
        cheapest = min(mine, key=lambda f: (f.usd_per_month, f.serving != "colocated"))
        assert head.usd_per_month == pytest.approx(cheapest.usd_per_month) and head.serving == cheapest.serving
    co = plan(_req(serving="colocated"), catalog)
    assert co.serving_options == ()
    dis = plan(_req(serving="disaggregated"), catalog)
    assert {f.serving for f in dis.serving_options} == {"disaggregated"}
