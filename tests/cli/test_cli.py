"""The CLI prints JSON with the fields scripts rely on and fails with clear messages."""

import json
import subprocess
import sys

import pytest

from planner.acceptance import rates as acc
from profiles import load_catalog


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=60)


def test_convert_from_acceptance_length():
    out = json.loads(run("convert", "--acceptance-length", "2.8", "--k", "3").stdout)
    assert out["draft_acceptance_rate"] == pytest.approx(0.6)
    assert float(acc.acceptance_length_iid(out["alpha_per_token"], 3)) == pytest.approx(2.8)


def test_evaluate_prints_the_required_fields():
    p = run("evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3", "--k", "4",
            "--batch", "8", "--alpha", "0.7")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("acceptance_length", "speedup", "output_tokens_per_s", "baseline_output_tokens_per_s", "tpot_ms",
                "baseline_tpot_ms", "usd_per_mtok", "baseline_usd_per_mtok", "draft_cost_ratio", "verifier_bound"):
        assert key in out
    assert out["verifier_bound"] in ("memory", "compute")
    assert out["acceptance_length"] == pytest.approx(float(acc.acceptance_length_iid(0.7, 4)))
    assert out["usd_per_mtok"] < out["baseline_usd_per_mtok"]


def test_evaluate_with_per_position_and_override():
    p = run("evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3",
            "--alpha-per-position", "0.9,0.8,0.7", "--batch", "1", "--draft-cost-ratio", "0.05")
    out = json.loads(p.stdout)
    assert out["k"] == 3 and out["draft_cost_ratio"] == pytest.approx(0.05)
    # Leviathan's form; the fitted step time makes verifying 4 tokens cost slightly more than 1 at batch 1
    leviathan = (1 + 0.9 + 0.72 + 0.504) / (1 + 3 * 0.05)
    assert leviathan * 0.98 <= out["speedup"] <= leviathan


def test_compare_covers_every_method():
    out = json.loads(run("compare", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4").stdout)
    names = {m["method"]: m for m in out["methods"]}
    assert set(names) == set(load_catalog().methods)
    assert {"eagle3", "eagle", "medusa", "mtp", "p_eagle", "draft_model", "ngram", "dflash", "dspark", "suffix",
            "ngram_gpu"} <= set(names)
    assert not names["mtp"]["available"]
    assert all(m["tpot_ms"] <= 50 for m in out["methods"] if m["available"])


def test_unknown_name_lists_valid_and_closest():
    p = run("evaluate", "--model", "llama-3.1-8b", "--hardware", "h10", "--method", "eagle3")
    assert p.returncode == 2
    assert "unknown hardware 'h10'" in p.stderr and "h100-sxm" in p.stderr and "Valid hardware names" in p.stderr


def test_out_of_range_input_fails_with_field_and_value():
    p = run("convert", "--acceptance-length", "9", "--k", "3")
    assert p.returncode == 2 and "acceptance_length=9.0" in p.stderr


def test_plan_prices_the_bill_it_is_asked_for_and_always_sizes_the_fleet(catalog):
    """--billing fixed: the saving is the fixed fleets' bill difference, as plan() computes it; without a shape
    the fleet is still sized (the default flat day, stated); the CPMs are labelled at full load."""
    from planner import plan as P

    args = ("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--monthly-output-tokens", "1e11",
            "--no-levers")
    fixed = run(*args, "--billing", "fixed", "--confidence", "0.9")
    assert fixed.returncode == 0, fixed.stderr
    js = json.loads(fixed.stdout)
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", monthly_output_tokens=1e11, billing="fixed",
                             confidence=0.9), catalog)
    e = js["economics"]
    assert e["billing"] == "fixed" and e["monthly_saving_usd"] == pytest.approx(p.economics.monthly_saving_usd)
    assert e["monthly_saving_usd"] == pytest.approx(e["reference_bill_usd_per_month"] - e["new_bill_usd_per_month"])
    assert {b["method"]: b["usd_per_month"] for b in js["bills"]} == pytest.approx(
        {b.method: b.usd_per_month for b in p.bills})
    assert js["fleet"] is not None and "'flat' daily shape (no daily shape given" in js["fleet"]["shape_source"]
    assert "at full load" in js["conventions"]["usd_per_mtok"]
    bad = run(*args, "--billing", "monthly")
    assert bad.returncode != 0 and "monthly" in bad.stderr


def test_plan_json_today_at_another_tp_matches_the_headline():
    """4 x H100 misses a 10 ms TPOT without speculation: today is no speculation at TP=8, and the JSON's two fleets
    carry the headline's GPUs and bills."""
    r = run("plan", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--tp", "4", "--tpot-slo-ms", "10",
            "--monthly-output-tokens", "2e10", "--no-levers")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    today, best, e = d["reference_fleet"], d["best_fleet"], d["economics"]
    assert (today["method"], today["tp"]) == ("none", 8) and d["reference"]["tp"] == 8
    assert (today["peak_gpus"], today["usd_per_month"]) == (e["reference_peak_gpus"], e["reference_bill_usd_per_month"])
    assert (best["peak_gpus"], best["usd_per_month"]) == (e["new_peak_gpus"], e["new_bill_usd_per_month"])
    assert f"{today['peak_gpus']} -> {best['peak_gpus']} GPUs" in d["verdict"]
    assert len(today["hours"]) == 24 and max(h["gpus"] for h in today["hours"]) == today["peak_gpus"]
    assert d["reference"]["note"].startswith("today's configuration on 4 x")
