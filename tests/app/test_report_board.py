"""The Report page's board report (PDF) for a spend-mode link and a hardware-comparison link says what the Plan
page, the Sensitivity page and the CLI's plan JSON say (the report's Monte Carlo once ran at another volume than a
spend's plan, and the report left the hardware comparison out)."""

from __future__ import annotations

import csv
import io

import pytest
from pypdf import PdfReader

from planner.formatting import fmt_usd
from tests.app.pages import cli_plan, downloaded, metric, money

PLAN_FLAGS = ("--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4")  # the sidebar's defaults


def pdf_text(data: bytes) -> tuple[int, str]:
    reader = PdfReader(io.BytesIO(data))
    return len(reader.pages), " ".join(" ".join(page.extract_text() for page in reader.pages).split())


def the_money(js: dict) -> list[str]:
    e = js["economics"]
    return [f"{fmt_usd(e['reference_bill_usd_per_month'])}/month", f"{fmt_usd(e['new_bill_usd_per_month'])}/month",
            f"{fmt_usd(e['monthly_saving_usd'])}/month", f"{e['p_saving_positive'] * 100:.0f} %"]


def test_a_spend_link_gives_one_probability_on_every_page_and_in_the_pdf(app, media):  # noqa: F811
    js = cli_plan(*PLAN_FLAGS, "--spend-usd-per-month", "150000")
    e = js["economics"]
    assert 0 < e["p_saving_positive"] < 1  # a plan whose probability can differ between pages
    at = app({"volume_source": "spend", "spend_usd": "150000"})
    assert money(metric(at, "Monthly saving").value) == round(e["monthly_saving_usd"])
    at.switch_page("views/report.py").run()
    assert not at.exception, at.exception
    how = next(m.value for m in at.markdown if m.value.startswith("**How sure"))
    assert f"saves money in {e['p_saving_positive'] * 100:.0f} %" in how, how
    pages, text = pdf_text(downloaded(at, media, "report_pdf"))
    assert 1 <= pages <= 3
    for figure in the_money(js):
        assert figure in text, (figure, text[:1200])
    at.switch_page("views/sensitivity.py").run()
    mc = next(m.value for m in at.markdown if "monthly saving p5" in m.value)
    assert f"saves money in {e['p_saving_positive'] * 100:.0f} %" in mc


def test_a_hardware_comparison_link_reaches_the_pdf(app, media):  # noqa: F811
    js = cli_plan(*PLAN_FLAGS, "--compare-hardware")
    cheapest = js["hardware_comparison"]["cheapest"]
    at = app({"hw_compare": "true"})
    at.switch_page("views/report.py").run()
    assert not at.exception, at.exception
    pages, text = pdf_text(downloaded(at, media, "report_pdf"))
    assert 1 <= pages <= 3
    for figure in the_money(js):
        assert figure in text, (figure, text[:1200])
    assert "Which GPU type" in text and f"{fmt_usd(cheapest['usd_per_month'])}/month" in text
    assert cheapest["hardware_label"] in text
    # the CSV the page offers carries the comparison too, and the page says the cheaper GPU type's sentence
    rows = {(r["section"], r["item"]): r for r in csv.DictReader(io.StringIO(
        downloaded(at, media, "report_csv").decode("utf-8")))}
    assert float(rows[("hardware comparison", "cheapest")]["value"]) == pytest.approx(cheapest["usd_per_month"])
    assert any("A cheaper GPU for this traffic" in m.value for m in at.markdown)
