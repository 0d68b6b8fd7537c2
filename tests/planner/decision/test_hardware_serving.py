"""The hardware comparison where the request's serving is disaggregated or best (planner.decision.hardware_choice):
co-located and disaggregated fleets, with and without speculation, per GPU type; the cheapest is picked among those
the serving allows, each meeting both SLOs, and on the request's own GPU type it is the plan's own fleet."""

from __future__ import annotations

import dataclasses

import pytest

from planner import plan as P
from planner.decision.hardware_choice import compare_hardware
from report.board import board_report
from tests.planner.money.test_disagg import _req

TTFT_MS = 200.0
TIGHT_MS = 50.0


@pytest.fixture(scope="module")
def best(catalog):
    req = _req(serving="best", methods=None, ttft_slo_ms=TTFT_MS)
    return P.plan(dataclasses.replace(req, compare_hardware=True), catalog)


def _four(c):
    return (c.no_speculation, c.speculation, c.disaggregated_no_speculation, c.disaggregated_speculation)


def test_best_compares_four_fleets_per_gpu_type_and_picks_the_cheapest(best, catalog):
    cmp = best.hardware_choice
    assert cmp.disaggregated and cmp.serving == "best"
    own = cmp.choice("h100-sxm")
    assert all(o is not None for o in _four(own))
    assert {o.serving for o in _four(own)} == {"colocated", "disaggregated"}
    every = [o for c in cmp.choices for o in _four(c) if o is not None]
    assert any(o.serving == "disaggregated" for o in every)
    assert cmp.cheapest.usd_per_month == pytest.approx(min(o.usd_per_month for o in every))
    # on its own GPU type the comparison's cheapest is the plan's cheapest headline fleet (same points, same bills)
    fleets = [f for f in (best.reference_fleet, best.best_fleet) if f is not None]
    assert cmp.requested.usd_per_month == pytest.approx(min(f.usd_per_month for f in fleets))
    # the disaggregated fleet with speculation on its own GPU type is the plan's disaggregated best: it meets both SLOs
    dis = P.plan(dataclasses.replace(best.request, serving="disaggregated", compare_hardware=False), catalog)
    assert own.disaggregated_speculation.usd_per_month == pytest.approx(dis.best_fleet.usd_per_month)
    assert own.disaggregated_speculation.prefill_tp == dis.best_fleet.pools[0].tp
    for h in dis.best_fleet.hours:
        assert h.feasible and h.tpot_ms <= best.request.tpot_slo_ms and h.ttft_ms <= TTFT_MS


def test_disaggregated_picks_only_disaggregated_fleets_and_colocated_compares_none(catalog):
    req = _req(serving="disaggregated", methods=None, ttft_slo_ms=TTFT_MS)
    cmp = compare_hardware(req, catalog)
    assert cmp.cheapest.serving == "disaggregated" and cmp.requested.serving == "disaggregated"
    assert all(o.serving == "disaggregated" for c in cmp.choices for o in c.options)
    # the co-located fleets are still shown beside them
    assert any(c.speculation is not None for c in cmp.choices)
    assert cmp.cheapest.usd_per_month == pytest.approx(min(
        o.usd_per_month for c in cmp.choices for o in (c.disaggregated_no_speculation, c.disaggregated_speculation)
        if o is not None))
    co = compare_hardware(dataclasses.replace(req, serving="colocated"), catalog)
    assert not co.disaggregated
    assert all(c.disaggregated_no_speculation is None and c.disaggregated_speculation is None for c in co.choices)
    assert all(o.serving == "colocated" for c in co.choices for o in c.options)


def test_a_tight_ttft_slo_rules_fleets_out_of_the_pick(catalog):
    """At 50 ms TTFT (the engine's front-end time and the step in flight included) the co-located fleet with
    speculation needs more GPUs than at 200 ms (the chunked prefill rides the slower speculative steps): the pick is
    never a fleet that breaks the TTFT SLO."""
    loose = compare_hardware(_req(serving="best", methods=None, ttft_slo_ms=TTFT_MS), catalog).choice("h100-sxm")
    tight_cmp = compare_hardware(_req(serving="best", methods=None, ttft_slo_ms=TIGHT_MS), catalog)
    tight = tight_cmp.choice("h100-sxm")
    assert tight.speculation.usd_per_month > loose.speculation.usd_per_month
    p = P.plan(_req(serving="best", methods=None, ttft_slo_ms=TIGHT_MS), catalog)
    assert p.best_fleet.ttft_ms <= TIGHT_MS and all(h.ttft_ms <= TIGHT_MS for h in p.best_fleet.hours)
    assert tight_cmp.requested.usd_per_month == pytest.approx(min(p.best_fleet.usd_per_month,
                                                                  p.reference_fleet.usd_per_month))


def test_the_board_report_shows_a_co_located_and_a_disaggregated_row_per_gpu_type(best, catalog):
    r = board_report(best, catalog, generated="2026-12-05")
    cmp = best.hardware_choice
    assert len(r.hardware) == 2 * len(cmp.choices)
    labels = [h.gpu for h in r.hardware]
    own = cmp.choice("h100-sxm")
    assert f"{own.label}, co-located" in labels and f"{own.label}, disaggregated" in labels
    flagged = [h for h in r.hardware if h.cheapest]
    assert len(flagged) == 1
    assert flagged[0].gpu.endswith("co-located" if cmp.cheapest.serving == "colocated" else "disaggregated")
    row = r.hardware[labels.index(f"{own.label}, disaggregated")]
    assert "disaggregated: prefill" in row.with_speculation
