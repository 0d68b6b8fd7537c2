"""The board report as a PDF (fpdf2, pure Python), A4, one to three pages: it lays out report.board.BoardReport and
computes no figure (the charts scale the record's numbers to millimetres).

fpdf2's built-in Helvetica covers Latin-1 only (the PDF standard 14 fonts); the few other characters the plan's
sentences use are written as their ASCII equivalents (`latin1`). A report in Chinese embeds (a subset of) WenQuanYi
Micro Hei, a TrueType collection with Latin and CJK glyphs (Debian's fonts-wqy-microhei, installed by ./dev setup;
SPECPLAN_CJK_FONT names another font file), in place of Helvetica, and keeps every character."""

from __future__ import annotations

import os
from pathlib import Path

from fpdf import FPDF
from fpdf.fonts import FontFace

from i18n import language, tr, using
from report.board import BoardReport

GREY, GREEN, RED, BLUE = (127, 127, 127), (44, 160, 44), (214, 39, 40), (31, 119, 180)
ASCII_FOR = {"\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2026": "...", "\u2018": "'", "\u2019": "'",
             "\u201c": '"', "\u201d": '"', "\u2248": "~", "\u2265": ">=", "\u2264": "<=", "\u2192": "->",
             "\u03b1": "alpha", "\u03c4": "tau", "\u03c3": "sigma", "\u2060": "", "\u00a0": " ", "\u2009": " "}
HEAD = FontFace(emphasis="BOLD", fill_color=(235, 235, 235))
CJK_FONT_ENV = "SPECPLAN_CJK_FONT"
CJK_FONTS = (Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),)  # Debian: fonts-wqy-microhei
CJK = "cjk"  # the family name the Chinese font is registered under


def cjk_font() -> Path:
    """The font file a Chinese report embeds: $SPECPLAN_CJK_FONT, else WenQuanYi Micro Hei where Debian puts it."""
    named = os.environ.get(CJK_FONT_ENV)
    for path in ([Path(named)] if named else []) + list(CJK_FONTS):
        if path.is_file():
            return path
    raise FileNotFoundError(f"{CJK_FONT_ENV}={named!r}: a report in Chinese needs a TrueType font with CJK glyphs: "
                            "install Debian's fonts-wqy-microhei (./dev setup does) or name a .ttf/.ttc file")


def latin1(text: str) -> str:
    """`text` in the characters Helvetica has: the ones above as ASCII, any other as '?' (a report in Chinese keeps
    every character: its font has them)."""
    if language() != "en":
        return str(text)
    return "".join(ASCII_FOR.get(c, c) for c in str(text)).encode("latin-1", "replace").decode("latin-1")


class _Pdf(FPDF):
    def __init__(self, r: BoardReport):
        super().__init__(format="A4")
        self._r = r
        self._cjk = r.lang != "en"
        if self._cjk:
            path = cjk_font()
            for style in ("", "B"):  # one weight: bold text is drawn in the regular face
                self.add_font(CJK, style, str(path))
        self.set_margins(14, 12, 14)
        self.set_auto_page_break(True, margin=14)
        self.set_title(latin1(r.title))
        self.set_creator("specplan")

    def set_font(self, family: str | None = None, style: str = "", size: float = 0) -> None:
        """Helvetica, or the Chinese font in its place."""
        if self._cjk and family is not None and family.lower() == "helvetica":
            family = CJK
        super().set_font(family, style, size)

    def footer(self) -> None:
        self.set_y(-10)
        self.set_font("Helvetica", size=7)
        self.set_text_color(*GREY)
        self.cell(0, 4, latin1(tr("{title}, {date}. Page {page}", title=self._r.title, date=self._r.generated,
                                  page=self.page_no())), align="C")
        self.set_text_color(0, 0, 0)


def _heading(pdf: FPDF, text: str) -> None:
    if pdf.get_y() > pdf.h - 45:  # a heading never ends a page alone
        pdf.add_page()
    pdf.ln(2)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, latin1(text), new_x="LMARGIN", new_y="NEXT")
    pdf.set_draw_color(200, 200, 200)
    pdf.line(pdf.l_margin, pdf.get_y(), pdf.w - pdf.r_margin, pdf.get_y())
    pdf.ln(1.5)


def _para(pdf: FPDF, text: str, *, size: float = 8.5, style: str = "") -> None:
    pdf.set_font("Helvetica", style, size)
    pdf.multi_cell(0, size * 0.45, latin1(text), new_x="LMARGIN", new_y="NEXT", align="L")
    pdf.ln(1)


def _hours_chart(pdf: FPDF, r: BoardReport) -> None:
    if not r.hours or r.max_gpus <= 0:
        return
    left, width, height = pdf.l_margin + 10, pdf.w - pdf.l_margin - pdf.r_margin - 10, 42
    if pdf.get_y() + height + 13 > pdf.h - 14:
        pdf.add_page()
    top = pdf.get_y() + 5
    base = top + height
    pdf.set_font("Helvetica", size=6.5)
    pdf.set_draw_color(220, 220, 220)
    for tick in (0, r.max_gpus // 2, r.max_gpus):
        y = base - height * tick / r.max_gpus
        pdf.line(left, y, left + width, y)
        pdf.set_xy(pdf.l_margin, y - 1.5)
        pdf.cell(9, 3, f"{tick:,}", align="R")
    pdf.set_xy(pdf.l_margin, top - 4)
    pdf.cell(9, 3, "GPUs", align="R")
    slot = width / len(r.hours)
    two = r.recommended_label != ""
    bar = slot * (0.4 if two else 0.7)
    for i, h in enumerate(r.hours):
        x = left + i * slot + slot * 0.1
        series = [(h.today_gpus, GREY)] + ([(h.recommended_gpus or 0, GREEN)] if two else [])
        for j, (g, colour) in enumerate(series):
            bh = height * g / r.max_gpus
            pdf.set_fill_color(*colour)
            if bh > 0:
                pdf.rect(x + j * bar, base - bh, bar, bh, style="F")
        if h.hour % 3 == 0:
            pdf.set_xy(left + i * slot - 2, base + 0.5)
            pdf.cell(slot + 4, 3, f"{h.hour:02d}:00", align="C")
    pdf.set_xy(pdf.l_margin, base + 4)
    pdf.set_font("Helvetica", size=7.5)
    for colour, text in [(GREY, r.today_label)] + ([(GREEN, r.recommended_label)] if two else []):
        pdf.set_fill_color(*colour)
        pdf.rect(pdf.get_x(), pdf.get_y() + 1, 2.5, 2.5, style="F")
        pdf.set_x(pdf.get_x() + 3.5)
        pdf.cell(pdf.get_string_width(latin1(text)) + 6, 4, latin1(text))
    pdf.set_xy(pdf.l_margin, base + 9)


def _drivers_chart(pdf: FPDF, r: BoardReport) -> None:
    if not r.drivers:
        return
    row = 6.0
    label_w, text_w = 62, 24
    plot_w = pdf.w - pdf.l_margin - pdf.r_margin - label_w - 2 * text_w
    height = row * len(r.drivers) + 6
    if pdf.get_y() + height > pdf.h - 14:
        pdf.add_page()
    values = [r.drivers_mid_usd] + [v for d in r.drivers for v in (d.low_usd, d.high_usd)]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    x0 = pdf.l_margin + label_w + text_w

    def x(v: float) -> float:
        return x0 + plot_w * (v - lo) / span

    top = pdf.get_y()
    pdf.set_font("Helvetica", size=7)
    for i, d in enumerate(r.drivers):
        y = top + i * row
        pdf.set_xy(pdf.l_margin, y)
        pdf.cell(label_w, row, latin1(d.driver[:48]))
        pdf.cell(text_w - 1, row, latin1(d.low_text), align="R")
        for v, colour in ((d.low_usd, RED), (d.high_usd, BLUE)):
            a, b = sorted((x(r.drivers_mid_usd), x(v)))
            pdf.set_fill_color(*colour)
            pdf.rect(a, y + 1, max(b - a, 0.3), row - 2, style="F")
        pdf.set_xy(x0 + plot_w + 1, y)
        pdf.cell(text_w, row, latin1(d.high_text))
    mx = x(r.drivers_mid_usd)
    pdf.set_draw_color(50, 50, 50)
    pdf.line(mx, top, mx, top + row * len(r.drivers))
    pdf.set_xy(mx - 30, top + row * len(r.drivers))
    pdf.cell(60, 4, latin1(tr("middle {value}", value=r.drivers_mid_text)), align="C")
    pdf.set_xy(pdf.l_margin, top + height)


def _table(pdf: FPDF, header: tuple[str, ...] | None, rows: list[tuple[str, ...]], widths: tuple[float, ...],
           *, size: float = 8, bold_col: int | None = None, highlight: set[int] | None = None) -> None:
    pdf.set_font("Helvetica", size=size)
    pdf.set_draw_color(225, 225, 225)
    pdf.set_fill_color(255, 255, 255)  # the charts leave their last colour set; a table row is white unless highlighted
    with pdf.table(col_widths=widths, headings_style=HEAD, first_row_as_headings=header is not None,
                   line_height=size * 0.45, padding=0.8, text_align="LEFT", borders_layout="HORIZONTAL_LINES"
                   ) as t:
        if header is not None:
            t.row([latin1(h) for h in header])
        for i, cells in enumerate(rows):
            style = FontFace(fill_color=(238, 247, 238)) if highlight and i in highlight else None
            row = t.row(style=style)
            for j, c in enumerate(cells):
                row.cell(latin1(c), style=FontFace(emphasis="BOLD") if j == bold_col else None)


def board_pdf(r: BoardReport) -> bytes:
    """The report as PDF bytes, labelled in the record's language."""
    with using(r.lang):
        return _board_pdf(r)


def _board_pdf(r: BoardReport) -> bytes:
    pdf = _Pdf(r)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 15)
    pdf.cell(0, 8, latin1(r.title), new_x="LMARGIN", new_y="NEXT")
    _para(pdf, f"{r.generated}. {r.scenario}", size=8)
    _para(pdf, r.decision, size=10.5, style="B")
    if r.decision_note:
        _para(pdf, r.decision_note, size=7.5)
    if r.elsewhere:
        _para(pdf, r.elsewhere, size=9)
    if r.knee:
        _para(pdf, r.knee, size=9, style="B")
    _heading(pdf, tr("The money"))
    _table(pdf, None, [(f.label, f.value, f.note) for f in r.money], (40, 34, 108), size=8.5, bold_col=1)
    _heading(pdf, tr("The fleet by hour: GPUs today and with the change"))
    _para(pdf, r.fleet_note, size=7.5)
    _hours_chart(pdf, r)
    _heading(pdf, tr("What the probability depends on"))
    _para(pdf, r.drivers_note + tr(" Red: the driver's low end; blue: its high end."), size=7.5)
    _drivers_chart(pdf, r)
    if r.serving:
        _heading(pdf, tr("Co-located or disaggregated"))
        _para(pdf, r.serving_note, size=7.5)
        _table(pdf, (tr("fleet"), tr("serving"), tr("bill"), tr("latency")),
               [(s.fleet + (tr(" (the headline)") if s.picked else ""), s.serving, s.bill, s.latency)
                for s in r.serving],
               (52, 62, 30, 38), size=7, highlight={i for i, s in enumerate(r.serving) if s.picked})
    if r.hardware:
        _heading(pdf, tr("Which GPU type"))
        _para(pdf, r.hardware_note, size=7.5)
        _table(pdf, ("GPU", tr("price"), tr("without speculation"), tr("with speculation")),
               [(h.gpu + (tr(" (cheapest)") if h.cheapest else ""), h.price, h.without, h.with_speculation)
                for h in r.hardware], (30, 42, 55, 55), size=7,
               highlight={i for i, h in enumerate(r.hardware) if h.cheapest})
    _heading(pdf, tr("Assumptions"))
    _para(pdf, r.acceptance, size=7)
    _table(pdf, (tr("assumption"), tr("value"), tr("source, date")),
           [(a.what, a.value, f"{a.source}, {a.date}") for a in r.assumptions], (38, 82, 62), size=6.5)
    _para(pdf, r.appendix_note, size=7.5)
    return bytes(pdf.output())
