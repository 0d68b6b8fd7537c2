"""The CLI's --tpot-percentile / --ttft-percentile (default: the mean, said in the JSON) and a per-request
--acceptance-file whose spread sets the TPOT percentile."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run

BASE = ("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--no-levers")


def test_the_default_is_the_mean_and_says_so():
    p = run(*BASE)
    assert p.returncode == 0, p.stderr
    lat = json.loads(p.stdout)["latency"]
    assert (lat["tpot_percentile"], lat["ttft_percentile"]) == ("mean", "mean")


def test_a_per_request_file_sets_the_p90_tpot(tmp_path):
    f = tmp_path / "per_request.csv"
    # three requests at 2, 1.67 and 1.83 tokens per step: pooled tau = 880 tokens / 480 steps
    f.write_text("accepted_tokens,steps,num_spec_tokens\n150,150,3\n100,150,3\n150,180,3\n")
    p = run(*BASE, "--method", "eagle3", "--acceptance-file", str(f), "--tpot-percentile", "p90",
            "--ttft-percentile", "p99", "--ttft-slo-ms", "5000")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["latency"]["tpot_percentile"], out["latency"]["ttft_percentile"]) == ("p90", "p99")
    e3 = next(m for m in out["methods"] if m["method"] == "eagle3")
    tau = 880 / 480
    rel = sorted(tau / t for t in (2.0, 250 / 150, 330 / 180))  # a request's TPOT over the mean TPOT
    p90 = rel[1] + 0.8 * (rel[2] - rel[1])  # linear between order statistics: position 0.9 x 2 = 1.8
    assert e3["tpot_at_slo_ms"] == pytest.approx(e3["tpot_ms"] * p90, rel=1e-9)
    assert any(a["what"] == "TPOT SLO statistic" and "measured per-request spread" in a["value"]
               for a in out["assumptions"])


@pytest.mark.parametrize("flag,value", [("--tpot-percentile", "p95"), ("--ttft-percentile", "median")])
def test_a_percentile_outside_the_list_is_one_error_line(flag, value):
    p = run(*BASE, flag, value)
    assert p.returncode == 2
    field = flag.removeprefix("--").replace("-", "_")
    assert f"{field}={value!r} is not allowed: one of mean, p50, p90, p99" in p.stderr
