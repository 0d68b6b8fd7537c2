"""The sidebar's SLO statistic (views.sidebar.slo_box: mean by default, p50 / p90 / p99): it round-trips in the URL,
the Plan page states it with the SLO and plans what plan() does; a bad value in a link is ignored and said; a
per-request acceptance file is taken at the method's default K."""

from __future__ import annotations

import dataclasses

from planner import plan as P
from tests.app.test_acceptance_box import _use


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_the_default_is_the_mean_and_the_page_says_so(app):
    at = app()
    assert at.selectbox(key="tpot_pct").value == "mean"
    assert at.selectbox(key="ttft_pct").disabled
    assert "Held: the 50 ms mean TPOT SLO (means over requests: the default" in _captions(at)
    assert "TPOT SLO 50 ms (mean)" in _captions(at)


def test_a_p99_tpot_slo_round_trips_in_the_url_and_plans_what_plan_does(app, cat):
    at = app()
    at.selectbox(key="tpot_pct").set_value("p99").run()
    assert not at.exception, at.exception
    q = dict(at.query_params)
    assert q["tpot_pct"] == "p99"
    at2 = app(q)
    assert at2.selectbox(key="tpot_pct").value == "p99"
    p = P.plan(dataclasses.replace(P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4),
                                   tpot_percentile="p99"), cat)
    rec = next(m.value for m in at2.markdown if m.value.startswith("**Recommendation:**"))
    assert p.verdict in rec
    held = next(c.value for c in at2.caption if c.value.startswith("Held:"))
    assert held.startswith("Held: the 50 ms p99 TPOT SLO")
    if p.best is not None:
        assert f"{p.best.label}'s p99 TPOT {p.best.tpot_at_slo_ms:.1f} ms" in held


def test_a_bad_percentile_in_a_link_is_ignored_and_said(app):
    at = app({"tpot_pct": "p95"})
    assert at.selectbox(key="tpot_pct").value == "mean"
    assert any("tpot_pct" in w.value for w in [*at.warning, *at.error, *at.info, *at.markdown, *at.caption])


def test_a_per_request_file_is_taken_at_the_methods_default_k(app, cat):
    body = b"accepted_tokens,steps\n300,150\n200,150\n150,120\n"
    at = _use(app({"model": "llama-3.1-8b", "tp": "1"}), "per_request.csv", body)
    texts = " ".join(t.value for t in at.text)
    k = cat.methods["eagle3"].default_k
    assert "Used for eagle3: per_request.csv" in texts and f"default K={k}" in texts and "p99" in texts
    method, _, acceptance, k_used = at.session_state["_measured_acceptance"]
    assert (method, k_used, acceptance.convention) == ("eagle3", k, "acceptance_length")
    assert acceptance.tpot_spread is not None and len(acceptance.tpot_spread) == 101
