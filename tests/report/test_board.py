"""The board report (report.board): built from the plan the pages show, rendered as a PDF that opens (read back with
pypdf) and as HTML, with the plan's own bills, saving and probability, formatted as money, in one to three pages."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys

import pytest
from pypdf import PdfReader

from planner import plan as P
from planner.formatting import fmt_usd, plan_dict
from profiles import load_catalog
from report.board import appendix_json, board_report
from report.board_html import board_html
from report.board_pdf import board_pdf, latin1

BASE = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=50.0, monthly_output_tokens=1e10,
            volume_source="entered")
SPEND = dict(spend_usd_per_month=150_000.0, volume_source="spend")  # the link ?volume_source=spend&spend_usd=150000
HARDWARE = dict(model="llama-3.1-8b", tp=1, monthly_output_tokens=3e11, daily_shape="business_hours",
                compare_hardware=True)
# a number in scientific notation ("4.383e+04", "1e10"), not a colour's hex digits ("#e4e4e4")
SCIENTIFIC = re.compile(r"(?<![#\w.])\d+(?:\.\d+)?e[+-]?\d+\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def planned(cat, **kw) -> P.Plan:
    return P.plan(P.PlanRequest(**{**BASE, **kw}), cat)


def pdf_text(data: bytes) -> tuple[int, str]:
    reader = PdfReader(io.BytesIO(data))
    return len(reader.pages), "\n".join(page.extract_text() for page in reader.pages)


def per_month(x: float) -> str:
    return f"{fmt_usd(x)}/month"


def the_money(js: dict) -> list[str]:
    """The bills, the saving and P(saving > 0) of the plan's JSON, as the report writes them."""
    e = js["economics"]
    return [per_month(e["reference_bill_usd_per_month"]), per_month(e["new_bill_usd_per_month"]),
            per_month(e["monthly_saving_usd"]), fmt_usd(e["npv_usd"]), fmt_usd(e["risk_weighted_npv_usd"]),
            f"{e['p_saving_positive'] * 100:.0f} %"]


@pytest.mark.parametrize("kw", [SPEND, HARDWARE], ids=["spend", "hardware comparison"])
def test_the_pdf_opens_and_shows_the_plans_bills_saving_and_probability(cat, kw):
    p = planned(cat, **kw)
    js = plan_dict(p)
    pages, text = pdf_text(board_pdf(board_report(p, cat, generated="2026-12-04")))
    assert 1 <= pages <= 3
    flat = " ".join(text.split())
    for figure in the_money(js):
        assert figure in flat, (figure, flat[:1500])
    assert flat.index("Today's monthly bill") < flat.index("The fleet by hour") < flat.index(
        "What the probability depends on") < flat.index("Assumptions")


def test_a_spend_plans_report_draws_at_the_volume_the_spend_buys(cat):
    """The report's Monte Carlo once ran at the sidebar's volume, not the spend's (P 0 % beside 58 %).
    The record reads the plan's own draws, and its tornado runs at the plan's volume: its middle is the saving."""
    p = planned(cat, **SPEND)
    assert p.request.monthly_output_tokens > 10 * BASE["monthly_output_tokens"]  # the spend's volume, not the default
    r = board_report(p, cat, generated="2026-12-04")
    e = p.economics
    assert 0 < e.p_saving_positive < 1
    money = {f.label: f for f in r.money}
    assert money["Probability it pays"].value == f"{e.p_saving_positive * 100:.0f} %"
    assert money["Monthly saving"].value == per_month(e.monthly_saving_usd)
    assert p.reference.method == P.NO_SPEC and p.reference_fleet.tp == p.request.tp  # the tornado's "against"
    assert r.drivers and r.drivers_mid_usd == pytest.approx(e.monthly_saving_usd, abs=1.0)
    assert "what a spend of $150,000/month buys" in r.scenario


def test_the_hardware_comparison_reaches_the_report(cat):
    p = planned(cat, **HARDWARE)
    hc = p.hardware_choice
    r = board_report(p, cat, generated="2026-12-04")
    assert len(r.hardware) == len(hc.choices) and sum(h.cheapest for h in r.hardware) == 1
    cheapest = next(h for h in r.hardware if h.cheapest)
    assert cheapest.gpu == hc.choice(hc.cheapest.hardware).label
    _, text = pdf_text(board_pdf(r))
    flat = " ".join(text.split())
    assert "Which GPU type" in flat and per_month(hc.cheapest.usd_per_month) in flat
    assert "Which GPU type" not in board_html(board_report(planned(cat, **SPEND), cat, generated="2026-12-04"))


def test_the_fleet_by_hour_is_the_plans_two_fleets(cat):
    p = planned(cat, **HARDWARE)
    r = board_report(p, cat, generated="2026-12-04")
    assert [h.today_gpus for h in r.hours] == [h.gpus for h in p.reference_fleet.hours]
    assert [h.recommended_gpus for h in r.hours] == [h.gpus for h in p.best_fleet.hours]
    assert r.max_gpus == max(h.gpus for f in (p.reference_fleet, p.best_fleet) for h in f.hours)
    assert len(r.hours) == 24 and r.recommended_label == f"recommended ({p.best_fleet.label})"
    assert r.today_label == f"today ({p.reference_fleet.label})"
    stay = board_report(planned(cat, **SPEND), cat, generated="2026-12-04")  # P = 58 % is below the 80 % asked
    assert stay.recommended_label == "EAGLE-3 (not recommended)"


@pytest.mark.parametrize("kw", [SPEND, HARDWARE], ids=["spend", "hardware comparison"])
def test_the_html_has_no_raw_field_names_and_no_scientific_notation(cat, kw):
    p = planned(cat, **kw)
    doc = board_html(board_report(p, cat, generated="2026-12-04"))
    fields = {f.name for f in dataclasses.fields(p.economics)} | {f.name for f in dataclasses.fields(p)}
    raw = sorted(n for n in fields if "_" in n and n in doc)
    assert raw == [], raw
    assert SCIENTIFIC.findall(doc) == []
    assert SCIENTIFIC.findall("1: usd_per_month 4.383e+04, 1e10") == ["4.383e+04", "1e10"]  # it would see one
    assert "<script" not in doc and per_month(p.economics.reference_bill_usd_per_month) in doc


def test_the_json_appendix_is_the_plans_json(cat):
    p = planned(cat, **SPEND)
    js = json.loads(appendix_json(p))
    assert js["economics"]["monthly_saving_usd"] == pytest.approx(p.economics.monthly_saving_usd)
    assert js["spend"]["spend_usd_per_month"] == 150_000.0 and "reference_fleet" in js


def test_assumptions_keep_the_decisions_methods_and_drop_the_others(cat):
    p = planned(cat, **SPEND)
    r = board_report(p, cat, generated="2026-12-04")
    whats = [a.what for a in r.assumptions]
    assert any(w.startswith(f"{p.best.label} acceptance") for w in whats)
    assert not any(w.startswith("MEDUSA") for w in whats) and len(whats) < len(p.assumptions)
    assert all(a.date for a in r.assumptions)


def test_text_outside_latin1_is_written_in_ascii():
    assert latin1("α 0.62 – 0.68 ≥ 80 % → τ … 中") == "alpha 0.62 - 0.68 >= 80 % -> tau ... ?"


def test_the_cli_writes_the_report(tmp_path):
    out = tmp_path / "plan.pdf"
    run = subprocess.run([sys.executable, "-m", "planner", "report", "--format", "pdf", "--out", str(out),
                          "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4", "--spend-usd-per-month",
                          "150000", "--no-levers"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["report"] == str(out)
    pages, text = pdf_text(out.read_bytes())
    assert 1 <= pages <= 3 and "$12,857/month" in " ".join(text.split())
    bad = subprocess.run([sys.executable, "-m", "planner", "report", "--out", str(tmp_path / "no" / "x.pdf"),
                          "--model", "llama-3.1-8b", "--hardware", "h100-sxm"], capture_output=True, text=True,
                         timeout=180)
    assert bad.returncode == 2 and "--out=" in bad.stderr and "folder that exists" in bad.stderr


def test_the_decision_is_one_sentence_and_a_cheaper_gpu_is_the_next(cat):
    p = planned(cat, **HARDWARE)
    r = board_report(p, cat, generated="2026-12-04")
    assert p.hardware_choice.cheaper_elsewhere is not None
    assert r.elsewhere.startswith("A cheaper GPU for this traffic") and f"{r.decision} {r.elsewhere}" == p.verdict
    assert r.decision.count(". ") == 0 and r.decision.endswith(".")
    plain = board_report(planned(cat, **SPEND), cat, generated="2026-12-04")
    assert plain.decision == planned(cat, **SPEND).verdict and plain.elsewhere == ""


def test_the_drivers_say_what_they_are_drawn_against(cat):
    """The tornado draws the best method against no speculation on the requested TP: when today is another fleet
    the note says the headline's saving is not the bars'; when no speculation cannot serve there, no bar is drawn."""
    other = board_report(planned(cat, model="llama-3.1-8b", tp=1, current_method="ngram", monthly_output_tokens=1e12),
                         cat, generated="2026-12-04")
    assert other.drivers and "Today runs n-gram" in other.drivers_note and "1 GPU per replica" in other.drivers_note
    missed = board_report(planned(cat, tpot_slo_ms=10.0), cat, generated="2026-12-04")
    assert missed.drivers == () and "cannot serve this traffic under the SLO" in missed.drivers_note
    stay = board_report(planned(cat, current_method="eagle3"), cat, generated="2026-12-04")
    assert [f.label for f in stay.money][:2] == ["Today's monthly bill", "Monthly saving"]
    assert stay.money[1].value == "none: no switch"


def test_served_best_the_report_shows_the_fleets_weighed_co_located_and_disaggregated(cat):
    """Issue 33: the board report (HTML and PDF) shows today's and the best method's fleets co-located and
    disaggregated, with their bills, and marks the headline's; served co-located it has no such section."""
    one_k = (P.TrafficSegment("chat", "english", 1.0, 1000, 1000),)
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tpot_slo_ms=20.0, ttft_slo_ms=200.0,
                             segments=one_k, monthly_output_tokens=100 * 1000 * 86400 * 30.4375, serving="best",
                             methods=("eagle3",)), cat)
    r = board_report(p, cat, generated="2026-12-05")
    assert [s.serving.split(":")[0] for s in r.serving] == ["co-located", "co-located", "disaggregated",
                                                           "disaggregated"]
    assert [s.bill for s in r.serving] == [fmt_usd(f.usd_per_month) + "/month" if f.feasible else "misses an SLO"
                                           for f in p.serving_options]
    picked = [f for f, s in zip(p.serving_options, r.serving, strict=True) if s.picked]
    assert sorted(f.usd_per_month for f in picked) == pytest.approx(
        sorted([p.reference_fleet.usd_per_month, p.best_fleet.usd_per_month]))
    assert "TTFT SLO 200 ms" in r.serving_note
    html = board_html(r)
    assert "Co-located or disaggregated" in html and html.count("(the headline)") == len(picked)
    text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(board_pdf(r))).pages)
    assert "Co-located or disaggregated" in text and "prefill" in text
    plain = board_report(planned(cat), cat, generated="2026-12-05")
    assert plain.serving == () and "Co-located or disaggregated" not in board_html(plain)
