"""A plan at a monthly volume of 0: the verdict says why there is no TPOT to compare, never "n/a TPOT instead of
n/a"."""

from __future__ import annotations

from planner import plan as P


def test_zero_volume_verdict_says_why_no_tpot_is_compared(catalog) -> None:
    req = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, usd_per_gpu_hour=4.40,
                        monthly_output_tokens=0.0, daily_shape="flat", billing="fixed")
    p = P.plan(req, catalog)
    assert p.recommendation is None
    assert "n/a" not in p.verdict and "nan" not in p.verdict
    assert "the monthly volume is 0, so the fleet serves no tokens" in p.verdict
    assert p.verdict.endswith("Stay with no speculation.")
