"""One answer everywhere with both SLOs (issue 33): the CLI's plan JSON, the Plan headline, the fleet chart and the
pools table, the Levers start and the Report CSV (the page's own download) agree on the TPOT and TTFT SLOs and what
each headline fleet achieves, the K schedule (the deploy command's, and each hour's K of the fleet that bills it)
and, served disaggregated, both pools' bills; a co-located case and a disaggregated one."""

from __future__ import annotations

import csv
import io

import pytest

from planner import plan as P
from planner.money.kday import k_at_batch
from tests.app.pages import chart, cli_plan, downloaded, metric, money

TTFT_SLO_MS = 500.0
TPOT_SLO_MS = 50.0
# today n-gram, the best method EAGLE-3 (test_pages.test_one_answer_everywhere's scenario) with a TTFT SLO
QUERY = {"model": "llama-3.1-8b", "tp": "1", "current": "ngram", "volume_b": "1000", "fleet_shape": "business_hours",
         "slo": f"{TPOT_SLO_MS:g}", "ttft_set": "true", "ttft_slo": f"{TTFT_SLO_MS:g}"}
FLAGS = ("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--current-method", "ngram", "--monthly-output-tokens",
         "1e12", "--daily-shape", "business_hours", "--tpot-slo-ms", f"{TPOT_SLO_MS:g}", "--ttft-slo-ms",
         f"{TTFT_SLO_MS:g}")


def _ms(text: str, what: str) -> float:
    """The number after `what` in a caption ('TPOT 25.6 ms, TTFT 73.3 ms' -> 25.6 for 'TPOT')."""
    return float(text.split(f"{what} ", 1)[1].split(" ms", 1)[0])


@pytest.mark.parametrize("serving", ["colocated", "disaggregated"])
def test_both_slos_the_k_schedule_and_both_pools_agree_everywhere(app, cat, media, serving):  # noqa: F811
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tp=1, current_method="ngram",
                             monthly_output_tokens=1e12, daily_shape="business_hours", tpot_slo_ms=TPOT_SLO_MS,
                             ttft_slo_ms=TTFT_SLO_MS, serving=serving), cat)
    js = cli_plan(*FLAGS, "--serving", serving)
    lat = js["latency"]
    assert (lat["tpot_slo_ms"], lat["ttft_slo_ms"]) == (TPOT_SLO_MS, TTFT_SLO_MS)
    today, best = js["reference_fleet"], js["best_fleet"]
    assert (today["serving"], best["serving"]) == (serving, serving) == (js["serving"]["today"], js["serving"]["best"])
    for role, f, pf in (("today", today, p.reference_fleet), ("best", best, p.best_fleet)):
        assert lat[role]["tpot_ms"] == pytest.approx(f["tpot_ms"]) == pytest.approx(pf.tpot_ms)
        assert lat[role]["ttft_ms"] == pytest.approx(f["ttft_ms"]) == pytest.approx(pf.ttft_ms)
        assert f["tpot_ms"] <= TPOT_SLO_MS and f["ttft_ms"] <= TTFT_SLO_MS  # both SLOs met
        assert f["usd_per_month"] == pytest.approx(pf.usd_per_month)
        if serving == "disaggregated":  # both pools' bills make the fleet's
            assert [q["role"] for q in f["pools"]] == ["prefill", "decode"]
            assert sum(q["usd_per_month"] for q in f["pools"]) == pytest.approx(f["usd_per_month"])
        else:
            assert f["pools"] == []
    # the K schedule: the deploy command's, and the K each hour of the best fleet bills at its batch
    sched = js["deploy"]["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert sched == p.deploy["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert len({k for *_, k in sched}) > 1 and sched[-1][1] == best["batch"]
    hours_k = [h["k"] for h in best["hours"]]
    batches = [h["batch"] for h in (best["pools"][1]["hours"] if best["pools"] else best["hours"])]
    assert hours_k == [k_at_batch(sched, b) for b in batches]

    # the Plan page: the SLOs, the headline's latencies and bills, the fleet chart, the pools
    at = app({**QUERY, "serving": serving})
    caps = [c.value for c in at.caption]
    assert any(f"TPOT SLO {TPOT_SLO_MS:g} ms (mean), TTFT SLO {TTFT_SLO_MS:g} ms (mean)" in c for c in caps)
    for f in (today, best):
        cap = next(c for c in caps if f"TPOT {f['tpot_ms']:.1f} ms" in c)
        assert _ms(cap, "TPOT") == pytest.approx(f["tpot_ms"], abs=0.05)
        assert _ms(cap, "TTFT") == pytest.approx(f["ttft_ms"], abs=0.05)
    assert money(metric(at, "Bill today").value) == pytest.approx(today["usd_per_month"], abs=1)
    assert money(metric(at, "Bill with").value) == pytest.approx(best["usd_per_month"], abs=1)
    fleet = chart(at, "plan_fleet_chart")["data"]
    assert list(fleet[0]["y"]) == [h["gpus"] for h in today["hours"]]
    assert list(fleet[1]["y"]) == [h["gpus"] for h in best["hours"]]
    tables = [d for d in at.dataframe if "$/month" in d.value.columns and "pool" in d.value.columns]
    if serving == "disaggregated":
        shown = [money(v) for v in tables[0].value["$/month"]]
        assert shown == pytest.approx([q["usd_per_month"] for f in (today, best) for q in f["pools"]], abs=1)
    else:
        assert tables == []
    # the fleets the serving choice weighed (the CLI's serving_options): their bills, the headline's among them
    weighed = [d.value for d in at.dataframe if "in the headline" in d.value.columns]
    assert bool(weighed) == (serving != "colocated") == bool(js["serving_options"])
    if weighed:
        col = next(c for c in weighed[0].columns if c.startswith("$/month"))
        assert [money(v) for v in weighed[0][col]] == pytest.approx(
            [f["usd_per_month"] for f in js["serving_options"]], abs=1)
        picked = [f for f, shown in zip(js["serving_options"], weighed[0]["in the headline"], strict=True) if shown]
        assert sorted(f["usd_per_month"] for f in picked) == pytest.approx(
            sorted([today["usd_per_month"], best["usd_per_month"]]))
    # the deployment the page shows is the one the fleet billed
    assert any(f"batch {a}-{b}: K={k}" in c for c in caps for a, b, k in sched[:1])

    # Levers: they start from the headline's today (the plan's own waterfall and the page's)
    assert js["levers"][0]["bill_usd_per_month_before"] == pytest.approx(today["usd_per_month"], rel=1e-9)
    at.switch_page("views/levers.py").run()
    start = money(next(m.value for m in at.markdown if m.value.startswith("**From")))
    assert start == pytest.approx(today["usd_per_month"], abs=1)

    # Report: the CSV the page offers
    at.switch_page("views/report.py").run()
    assert not at.exception
    rows = {(r["section"], r["item"]): r["value"]
            for r in csv.DictReader(io.StringIO(downloaded(at, media, "report_csv").decode("utf-8")))}
    assert float(rows[("inputs", "tpot_slo_ms")]) == TPOT_SLO_MS
    assert float(rows[("inputs", "ttft_slo_ms")]) == TTFT_SLO_MS
    assert rows[("inputs", "serving")] == serving
    for role, f in (("today", today), ("with speculation", best)):
        assert float(rows[("latency", f"{role}: TPOT")]) == pytest.approx(f["tpot_ms"], rel=1e-5)
        assert float(rows[("latency", f"{role}: TTFT")]) == pytest.approx(f["ttft_ms"], rel=1e-5)
        assert float(rows[("bill", f"{role}: {f['billing']}")]) == pytest.approx(f["usd_per_month"], abs=1e-3)
        assert [int(rows[(f"fleet by hour, {role}", f"hour {h['hour']:02d}")]) for h in f["hours"]] == [
            h["gpus"] for h in f["hours"]]
        for q in f["pools"]:
            assert float(rows[("bill", f"{role}: {q['role']} pool: {f['billing']}")]) == pytest.approx(
                q["usd_per_month"], abs=1e-3)
            assert float(rows[("bill", f"{role}: {q['role']} pool: fixed at the peak")]) == pytest.approx(
                q["usd_per_month_fixed"], abs=1e-3)
    assert [int(rows[("K by hour, with speculation", f"hour {h:02d}")]) for h in range(24)] == hours_k
    assert rows[("deploy", "K per batch size")] == "; ".join(f"{a}-{b}: K={k}" for a, b, k in sched)
