"""The board report as one self-contained HTML page (no script, no network; charts as inline SVG), printable on A4:
it lays out report.board.BoardReport and computes no figure (the charts scale the record's numbers to pixels)."""

from __future__ import annotations

import html

from i18n import tr, using
from report.board import BoardReport

TODAY_COLOUR = "#7f7f7f"
RECOMMENDED_COLOUR = "#2ca02c"
LOW_COLOUR = "#d62728"
HIGH_COLOUR = "#1f77b4"
CSS = ("body{font-family:Helvetica,Arial,'PingFang SC','Microsoft YaHei','Noto Sans CJK SC',sans-serif;"
       "max-width:800px;margin:1.5em auto;color:#222;font-size:14px}"
       "h1{font-size:22px;margin-bottom:2px}h2{font-size:16px;margin:18px 0 6px;border-bottom:1px solid #ccc}"
       ".small{font-size:12px;color:#555}.decision{font-size:16px;font-weight:bold;margin:10px 0}"
       "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e4e4e4;padding:4px 6px;"
       "text-align:left;vertical-align:top;font-size:13px}td.v{font-weight:bold;white-space:nowrap}"
       "tr.best td{background:#eef7ee}@media print{body{margin:0}h2{break-after:avoid}}")


def _e(x: object) -> str:
    return html.escape(str(x))


def _px(x: float) -> str:
    return f"{x:.1f}"


def hours_svg(r: BoardReport, *, width: int = 780, height: int = 220) -> str:
    """GPUs by hour, today (grey) beside the recommended fleet (green)."""
    if not r.hours or r.max_gpus <= 0:
        return ""
    left, bottom, top = 40, 24, 22
    plot_h = height - bottom - top
    slot = (width - left) / len(r.hours)
    two = r.recommended_label != ""
    bar = slot * (0.4 if two else 0.7)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
           f"aria-label='{_e(tr('GPUs by hour'))}'><text x='{left - 4}' y='10' font-size='10' "
           "text-anchor='end'>GPUs</text>"]
    for tick in (0, r.max_gpus // 2, r.max_gpus):
        y = top + plot_h * (1 - tick / r.max_gpus)
        out.append(f"<line x1='{left}' x2='{width}' y1='{_px(y)}' y2='{_px(y)}' stroke='#ddd'/>"
                   f"<text x='{left - 4}' y='{_px(y + 4)}' font-size='10' text-anchor='end'>{tick:,}</text>")
    for i, h in enumerate(r.hours):
        x = left + i * slot + slot * 0.1
        series = [(h.today_gpus, TODAY_COLOUR)] + ([(h.recommended_gpus or 0, RECOMMENDED_COLOUR)] if two else [])
        for j, (g, colour) in enumerate(series):
            bh = plot_h * g / r.max_gpus
            out.append(f"<rect x='{_px(x + j * bar)}' y='{_px(top + plot_h - bh)}' width='{_px(bar)}' "
                       f"height='{_px(bh)}' fill='{colour}'><title>{h.hour:02d}:00 {g:,} GPUs</title></rect>")
        if h.hour % 3 == 0:
            out.append(f"<text x='{_px(left + (i + 0.5) * slot)}' y='{height - 8}' font-size='10' "
                       f"text-anchor='middle'>{h.hour:02d}:00</text>")
    out.append("</svg>")
    return "".join(out)


def drivers_svg(r: BoardReport, *, width: int = 780, row: int = 26) -> str:
    """The tornado: each driver's saving at its low (red) and high (blue) end around the middle saving."""
    if not r.drivers:
        return ""
    label_w, text_w = 250, 95
    plot_w = width - label_w - 2 * text_w
    values = [r.drivers_mid_usd] + [v for d in r.drivers for v in (d.low_usd, d.high_usd)]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return label_w + text_w + plot_w * (v - lo) / span

    height = row * len(r.drivers) + 22
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
           f"aria-label='{_e(tr('Drivers of the saving'))}'>"]
    for i, d in enumerate(r.drivers):
        y = 4 + i * row
        out.append(f"<text x='0' y='{y + 15}' font-size='11'>{_e(d.driver)}</text>")
        for v, colour in ((d.low_usd, LOW_COLOUR), (d.high_usd, HIGH_COLOUR)):
            a, b = sorted((x(r.drivers_mid_usd), x(v)))
            out.append(f"<rect x='{_px(a)}' y='{y + 3}' width='{_px(max(b - a, 1.0))}' height='{row - 8}' "
                       f"fill='{colour}' opacity='0.8'/>")
        out.append(f"<text x='{label_w + text_w - 4}' y='{y + 15}' font-size='10' text-anchor='end'>"
                   f"{_e(d.low_text)}</text><text x='{label_w + text_w + plot_w + 4}' y='{y + 15}' "
                   f"font-size='10'>{_e(d.high_text)}</text>")
    mx = x(r.drivers_mid_usd)
    out.append(f"<line x1='{_px(mx)}' x2='{_px(mx)}' y1='0' y2='{height - 18}' stroke='#333'/>"
               f"<text x='{_px(mx)}' y='{height - 4}' font-size='10' text-anchor='middle'>"
               f"{_e(tr('middle {value}', value=r.drivers_mid_text))}</text></svg>")
    return "".join(out)


def board_html(r: BoardReport) -> str:
    """The report as one HTML document, labelled in the record's language."""
    with using(r.lang):
        return _board_html(r)


def _board_html(r: BoardReport) -> str:
    lang = "zh-CN" if r.lang == "zh-CN" else "en"
    out = [f"<!doctype html><html lang='{lang}'><head><meta charset='utf-8'>"
           f"<title>{_e(r.title)} ({_e(r.generated)})</title>"
           f"<style>{CSS}</style></head><body>",
           f"<h1>{_e(r.title)}</h1><p class='small'>{_e(r.generated)}. {_e(r.scenario)}</p>",
           f"<p class='decision'>{_e(r.decision)}</p>"]
    if r.decision_note:
        out.append(f"<p class='small'>{_e(r.decision_note)}</p>")
    if r.elsewhere:
        out.append(f"<p>{_e(r.elsewhere)}</p>")
    if r.knee:
        out.append(f"<p><b>{_e(r.knee)}</b></p>")
    out.append(f"<h2>{_e(tr('The money'))}</h2><table>")
    out += [f"<tr><td>{_e(f.label)}</td><td class='v'>{_e(f.value)}</td><td class='small'>{_e(f.note)}</td></tr>"
            for f in r.money]
    out.append("</table>")
    out.append(f"<h2>{_e(tr('The fleet by hour: GPUs today and with the change'))}</h2>"
               f"<p class='small'>{_e(r.fleet_note)}</p>")
    if r.hours:
        legend = f"<span style='color:{TODAY_COLOUR}'>&#9632;</span> {_e(r.today_label)}"
        if r.recommended_label:
            legend += f" &nbsp; <span style='color:{RECOMMENDED_COLOUR}'>&#9632;</span> {_e(r.recommended_label)}"
        out.append(f"<p class='small'>{legend}</p>" + hours_svg(r))
    out.append(f"<h2>{_e(tr('What the probability depends on'))}</h2><p class='small'>{_e(r.drivers_note)} "
               f"<span style='color:{LOW_COLOUR}'>&#9632;</span> {_e(tr('low end'))}, "
               f"<span style='color:{HIGH_COLOUR}'>&#9632;</span> {_e(tr('high end'))}.</p>"
               + drivers_svg(r))
    if r.serving:
        out.append(f"<h2>{_e(tr('Co-located or disaggregated'))}</h2><p class='small'>{_e(r.serving_note)}</p>"
                   f"<table><tr><th>{_e(tr('fleet'))}</th><th>{_e(tr('serving'))}</th><th>{_e(tr('bill'))}</th>"
                   f"<th>{_e(tr('latency'))}</th></tr>")
        headline = _e(tr(" (the headline)"))
        out += [f"<tr{' class=best' if s.picked else ''}><td>{_e(s.fleet)}{headline if s.picked else ''}"
                f"</td><td>{_e(s.serving)}</td><td>{_e(s.bill)}</td><td>{_e(s.latency)}</td></tr>" for s in r.serving]
        out.append("</table>")
    if r.hardware:
        out.append(f"<h2>{_e(tr('Which GPU type'))}</h2><p class='small'>{_e(r.hardware_note)}</p>"
                   "<table><tr><th>GPU</th>"
                   f"<th>{_e(tr('price'))}</th><th>{_e(tr('without speculation'))}</th>"
                   f"<th>{_e(tr('with speculation'))}</th></tr>")
        cheapest = _e(tr(" (cheapest)"))
        out += [f"<tr{' class=best' if h.cheapest else ''}><td>{_e(h.gpu)}{cheapest if h.cheapest else ''}"
                f"</td><td>{_e(h.price)}</td><td>{_e(h.without)}</td><td>{_e(h.with_speculation)}</td></tr>"
                for h in r.hardware]
        out.append("</table>")
    out.append(f"<h2>{_e(tr('Assumptions'))}</h2><p class='small'>{_e(r.acceptance)}</p><table><tr>"
               f"<th>{_e(tr('assumption'))}</th><th>{_e(tr('value'))}</th><th>{_e(tr('source, date'))}</th></tr>")
    out += [f"<tr><td>{_e(a.what)}</td><td class='small'>{_e(a.value)}</td><td class='small'>{_e(a.source)}, "
            f"{_e(a.date)}</td></tr>" for a in r.assumptions]
    out.append(f"</table><p class='small'>{_e(r.appendix_note)}</p></body></html>")
    return "".join(out)
