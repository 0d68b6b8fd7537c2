"""The report's CSV: every record is one row when read back (by the csv module and by pandas) whatever the cells
hold (CR, LF, CRLF, quotes, delimiters), and no cell a spreadsheet would run as a formula arrives unprotected,
neither at the start of a cell nor after a line break inside one."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from views.parts import report as rep

HOSTILE = ["x\r=1+1", "x\n=1+1", "x\r\n@SUM(A1)", '"=HYPERLINK(""http://evil"")"', "a,b", "=cmd|' /C calc'!A0",
           "+1", "-2", "@x", "\tx", "\r=2", "\n=3", "plain"]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def rows() -> list[dict]:
    return [{"section": s, "item": f"item {i}", "value": 1.5 * i, "note": s[::-1]} for i, s in enumerate(HOSTILE)]


def test_a_carriage_return_inside_a_cell_is_quoted():
    text = rep.to_csv([{"a": "x\r=1+1", "b": 1}])
    assert text == 'a,b\r\n"x\r=1+1",1\r\n'


def test_csv_reads_back_one_row_per_record_and_no_bare_formula():
    text = rep.to_csv(rows())
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back[0] == ["section", "item", "value", "note"]
    assert len(back) == len(HOSTILE) + 1
    for rec, got in zip(rows(), back[1:], strict=True):
        assert got[1] == rec["item"]  # the row is the record's own row: nothing split off or merged
        for cell, original in ((got[0], rec["section"]), (got[3], rec["note"])):
            assert not cell.startswith(FORMULA_START), cell
            assert cell in (original, "'" + original)  # the text itself survives, at most a quote in front
    df = pd.read_csv(io.StringIO(text, newline=""), dtype=str, keep_default_na=False)
    assert len(df) == len(HOSTILE) and list(df["item"]) == [r["item"] for r in rows()]
    assert not any(str(v).startswith(FORMULA_START) for col in df.columns for v in df[col])


def test_every_physical_line_starting_with_a_formula_is_inside_a_quoted_cell():
    """A reader that splits on CR or LF alone (as some spreadsheet imports do) still sees no line starting with a
    formula character outside quotes: such a line can only be the continuation of a quoted cell."""
    text = rep.to_csv(rows())
    in_quotes = False
    for ch_line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not in_quotes:
            assert not ch_line.startswith(FORMULA_START[:4]), ch_line
        in_quotes ^= ch_line.count('"') % 2 == 1


def test_the_bill_today_in_the_csv_is_the_headline_when_today_is_another_tp(cat):
    """4 x H100 misses a 10 ms TPOT without speculation, so today is no speculation at TP=8: the CSV's fleet rows
    carry the headline's GPUs and bill, not the best method's fleet under today's name."""
    from planner import plan as P

    p = P.plan(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=10.0,
                             monthly_output_tokens=2e10), cat)
    assert p.reference_fleet.tp == 8
    back = list(csv.DictReader(io.StringIO(rep.to_csv(rep.scenario_rows(p, [], None)), newline="")))
    value = {(r["section"], r["item"]): r["value"] for r in back}
    peak, bill = int(value[("bill", "today: peak GPUs")]), float(value[("bill", "today: autoscaled")])
    assert peak == int(value[("headline", "peak GPUs today")]) == p.economics.reference_peak_gpus
    assert bill == pytest.approx(float(value[("headline", "bill today")]), rel=1e-9)
    assert bill == pytest.approx(p.economics.reference_bill_usd_per_month, rel=1e-9)
    assert int(value[("bill", "with speculation: peak GPUs")]) == p.economics.new_peak_gpus < peak
    hours = [r for r in back if r["section"] == "fleet by hour, today"]
    assert len(hours) == 24 and all("TP=8" in r["basis"] for r in hours)
