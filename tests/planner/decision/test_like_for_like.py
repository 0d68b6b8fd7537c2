"""GPU choices like for like (planner.decision.hardware_choice: the request's weight format unless other formats are
asked for, and then the words say what the format changed; price labels from planner.price) and the Plan's levers
starting where the Plan does (planner.decision.levers.plan_levers: the Plan's today, its recommended method)."""

from __future__ import annotations

import dataclasses

import pytest

from planner import plan as P
from planner.decision.hardware_choice import compare_hardware, hardware_sentence
from planner.money.spend import request_for_spend, volume_for_spend
from planner.price import gpu_price, price_label
from planner.request import NO_SPEC, PlanError


def cmp_request(**kw) -> P.PlanRequest:
    base = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, daily_shape="business_hours",
                monthly_output_tokens=1e10)
    return P.PlanRequest(**{**base, **kw})


def options(cmp):
    return [o for c in cmp.choices for o in (c.no_speculation, c.speculation, c.own_format) if o is not None]


@pytest.fixture(scope="module")
def both(catalog):
    """(like for like, other formats allowed) for the same request."""
    req = cmp_request()
    return (compare_hardware(req, catalog),
            compare_hardware(dataclasses.replace(req, compare_other_formats=True), catalog))


def test_the_default_comparison_keeps_bf16_on_every_gpu_type(both):
    same, _ = both
    assert not same.other_formats and same.dtype == "bf16"
    assert options(same) and all(o.dtype == "bf16" for o in options(same))
    assert same.format_changes == ()
    assert "runs your bf16 weights" in same.note


def test_other_formats_change_the_weights_and_say_so(both, catalog):
    same, other = both
    assert other.other_formats
    changed = [c for c in other.choices if c.cheapest is not None and c.cheapest.dtype != "bf16"]
    assert changed  # fp8 / 4-bit weights win somewhere
    lines = other.format_changes
    assert len(lines) == len(changed)
    h200 = other.choice("h200")
    assert h200.cheapest.dtype == "fp8"
    line = next(x for x in lines if x.startswith("NVIDIA H200 SXM 141GB at fp8"))
    assert "cheaper weights, not only a cheaper GPU" in line
    # the like-for-like fleet it names is the one the default comparison finds on that GPU type
    assert h200.own_format.dtype == "bf16"
    assert h200.own_format.usd_per_month == pytest.approx(same.choice("h200").cheapest.usd_per_month)
    assert f"against ${h200.own_format.usd_per_month:,.0f}/month at your bf16 weights" in line
    assert h200.cheapest.usd_per_month < h200.own_format.usd_per_month
    # the request's own GPU type at fp8: cheaper weights on the same GPU
    assert any(x.startswith("NVIDIA H100 SXM 80GB at ") and "on your own GPU type" in x for x in lines)
    # the verdict's sentence says the weights changed
    said = hardware_sentence(other, cmp_request(compare_other_formats=True), catalog)
    assert "cheaper weights" in said and "may cost quality" in said


def test_a_gpu_that_cannot_run_the_weights_says_why(catalog):
    # DeepSeek-V3's bf16 weights (~1.3 TB) fit no 8 x H200 (1.1 TB) replica: listed without a fleet, with the reason
    cmp = compare_hardware(P.PlanRequest(model="deepseek-v3", hardware="b300", tp=8, dtype="bf16",
                                         monthly_output_tokens=1e10), catalog)
    h200 = cmp.choice("h200")
    assert h200.cheapest is None and h200.own_format is None
    assert "cannot run DeepSeek-V3" in h200.note and "bf16 weights do not fit in memory at any TP up to 8" in h200.note
    assert all(o.dtype == "bf16" for o in options(cmp))


def test_the_other_formats_switch_is_checked(catalog):
    with pytest.raises(PlanError, match="compare_other_formats='yes'"):
        P.validate(cmp_request(compare_other_formats="yes"), catalog)


def test_a_price_is_entered_only_when_typed(catalog):
    h100 = catalog.hardware["h100-sxm"]
    listed = price_label(h100, gpu_price(h100, None))
    assert listed == f"list price ({h100.price.source}, {h100.price.date})"
    # typed at the list midpoint itself: still entered
    assert price_label(h100, gpu_price(h100, h100.usd_per_gpu_hour_mid)) == "entered"
    cmp = compare_hardware(cmp_request(), catalog, prices={"h200": 3.1})
    assert cmp.choice("h200").price_source == "entered"
    assert cmp.choice("h100-sxm").price_source == listed
    assert cmp.choice("b200").price_source.startswith("list price (")


def test_a_spend_at_the_list_price_is_not_labelled_entered(catalog):
    # a spend at the list midpoint leaves the price unentered on the request it plans: the H100's own row says list
    # price, with or without the spend's source passed on
    req = cmp_request(spend_usd_per_month=150_000.0, monthly_output_tokens=1e9)
    sv = volume_for_spend(req, catalog)
    spent = dataclasses.replace(request_for_spend(req, sv), spend_usd_per_month=None)
    assert spent.usd_per_gpu_hour is None and sv.price_listed
    h100 = catalog.hardware["h100-sxm"]
    cmp = compare_hardware(spent, catalog, own_price_source=sv.price_source)
    assert cmp.choice("h100-sxm").price_source == f"list price ({h100.price.source}, {h100.price.date})"
    typed = compare_hardware(dataclasses.replace(spent, usd_per_gpu_hour=2.5), catalog, own_price_source="entered")
    assert typed.choice("h100-sxm").price_source == "entered"


def test_deepseek_levers_start_from_the_plans_mtp(catalog):
    """The Plan picks MTP for DeepSeek-V3; the waterfall's step 0 adopts MTP at MTP's one-time cost (the Plan's),
    from the Plan's today bill, not EAGLE-3."""
    p = P.plan(P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", monthly_output_tokens=1e11,
                             levers_start="auto"), catalog)
    assert p.recommendation is not None and p.recommendation.method == "mtp"
    step0 = p.levers[0]
    assert step0.lever == "adopt" and "MTP" in step0.label and step0.applied and step0.method == "mtp"
    assert step0.one_time_usd_high == pytest.approx(p.economics.one_time_high_usd)
    assert step0.one_time_usd_low == pytest.approx(p.economics.one_time_low_usd)
    assert step0.bill_usd_per_month_before == pytest.approx(p.reference_fleet.usd_per_month)
    assert "EAGLE-3" not in step0.label


def test_levers_start_from_today_when_the_plan_stays(catalog):
    """One 4 x H100 replica: the Plan stays on no speculation, so the waterfall starts from it and step 0 tries
    EAGLE-3 (the seed's levers build on it)."""
    p = P.plan(cmp_request(workload="chat", tpot_slo_ms=50, levers_start="auto"), catalog)
    assert p.recommendation is None and p.reference.method == NO_SPEC
    assert p.levers[0].label == "Adopt EAGLE-3" and not p.levers[0].applied


def test_dp_attention_levers_start_from_the_plans_plain_tp_today(catalog):
    """DeepSeek-V3 fp8 on 8 x H200 with data-parallel attention at a 30 ms SLO: the Plan's today is no speculation on
    plain TP (cheaper than data-parallel attention without speculation); the waterfall starts from that bill, and
    its step 0 saves the Plan's saving."""
    p = P.plan(P.PlanRequest(model="deepseek-v3", hardware="h200", tp=8, dtype="fp8", attention_dp=True,
                             tpot_slo_ms=30, monthly_output_tokens=1e11, levers_start="auto"), catalog)
    ref = p.reference
    assert ref.method == NO_SPEC and ref.attention_dp is False
    dp_bill = next(b.usd_per_month for b in p.bills if b.method == NO_SPEC)
    assert p.reference_fleet.usd_per_month < dp_bill
    step0 = p.levers[0]
    assert step0.bill_usd_per_month_before == pytest.approx(p.reference_fleet.usd_per_month)
    assert step0.usd_per_mtok_before == pytest.approx(ref.usd_per_mtok)
    assert step0.applied and step0.method == p.recommendation.method
    assert step0.monthly_saving_usd == pytest.approx(p.economics.monthly_saving_usd, rel=0.02)


def test_cli_compare_other_formats_says_what_changed():
    import json
    import subprocess
    import sys

    def run(*flags: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "planner", "plan", "--model", "llama-3.3-70b", "--hardware",
                              "h100-sxm", "--tp", "4", "--no-levers", "--compare-hardware", *flags],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["hardware_comparison"]

    same, other = run(), run("--compare-other-formats")
    assert not same["other_formats"] and same["format_changes"] == []
    assert {o["dtype"] for c in same["choices"] for o in (c["no_speculation"], c["speculation"]) if o} == {"bf16"}
    assert other["other_formats"] and any("cheaper weights" in x for x in other["format_changes"])
