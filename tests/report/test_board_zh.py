"""The board report in Simplified Chinese: the PDF embeds a CJK font (WenQuanYi Micro Hei, Debian's
fonts-wqy-microhei, installed by ./dev setup) and opens with Chinese headings and the plan's money in US$ per 月; the
HTML says lang='zh-CN'; the English report is unchanged by the switch."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from pypdf import PdfReader

import i18n
from i18n.numbers import fmt_per_month
from planner import plan as P
from profiles import load_catalog
from report.board import board_report
from report.board_html import board_html
from report.board_pdf import board_pdf

BASE = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=50.0, monthly_output_tokens=1e10,
            volume_source="entered")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def plan(cat):
    return P.plan(P.PlanRequest(**BASE), cat)


def pdf_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def test_the_chinese_pdf_opens_with_chinese_headings_and_the_plans_bill(cat, plan, monkeypatch):
    monkeypatch.setenv(i18n.STRICT_ENV, "1")
    r = board_report(plan, cat, generated="2026-12-05", lang="zh-CN")
    data = board_pdf(r)
    reader = PdfReader(io.BytesIO(data))
    assert 1 <= len(reader.pages) <= 3
    text = pdf_text(data)
    assert r.decision.startswith("建议"), r.decision  # the decision in Chinese, from the plan's fields
    assert r.decision_note.startswith("规划器英文原文") and plan.verdict in r.decision_note
    for heading in ("投机解码：决策与资金", "资金", "假设", "当前月度账单", "每月节省", "建议"):
        assert heading in text, heading
    with i18n.using("zh-CN"):
        bill = fmt_per_month(plan.economics.reference_bill_usd_per_month)
    assert bill.startswith("US$") and bill.endswith("/月")
    assert bill in text
    fonts = {str(f.get_object().get("/BaseFont")) for page in reader.pages
             for f in (page.get("/Resources", {}).get("/Font", {}) or {}).values()}
    assert any("WenQuanYi" in f or "MicroHei" in f for f in fonts), fonts
    assert "⟦" not in text  # no key missing from the Chinese catalogue


def test_the_chinese_html_is_marked_and_has_no_missing_string(cat, plan, monkeypatch):
    monkeypatch.setenv(i18n.STRICT_ENV, "1")
    html = board_html(board_report(plan, cat, generated="2026-12-05", lang="zh-CN"))
    assert "<html lang='zh-CN'>" in html
    assert "概率取决于什么" in html and "⟦" not in html


def test_the_english_report_is_still_english_after_a_chinese_one(cat, plan):
    board_report(plan, cat, generated="2026-12-05", lang="zh-CN")
    text = pdf_text(board_pdf(board_report(plan, cat, generated="2026-12-05")))
    assert "The money" in text and "资金" not in text
    assert i18n.language() == "en"


def test_the_cli_writes_the_report_in_chinese(tmp_path):
    out = tmp_path / "r.pdf"
    res = subprocess.run([sys.executable, "-m", "planner", "report", "--model", "llama-3.3-70b", "--hardware",
                          "h100-sxm", "--tp", "4", "--lang", "zh-CN", "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "资金" in pdf_text(out.read_bytes())


def test_the_knee_sentence_in_chinese_names_the_three_savings():
    from planner.answer import SloKnee
    from report.board import knee_text

    k = SloKnee(slo_ms=30.0, saving_usd=29_000.0, low_slo_ms=24.0, low_saving_usd=None, high_slo_ms=36.0,
                high_saving_usd=0.0, on_knee=True)
    with i18n.using("zh-CN"):
        text = knee_text(k)
    assert text.startswith("这个结论处在 SLO 的拐点上") and "US$29,000/月" in text and "未计算节省" in text
    assert "knee of the SLO" in knee_text(k)  # English: the planner's own sentence
