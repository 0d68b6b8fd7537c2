"""The sidebar's two latency targets: the TPOT SLO and, when the user states one, the TTFT SLO (PlanRequest.ttft_slo_ms;
planner.physics.ttft), each with the statistic it holds over requests (mean by default, or p50 / p90 / p99:
PlanRequest.tpot_percentile, ttft_percentile; planner.acceptance.tails), and how prefill and decode are served
(PlanRequest.serving; planner.money.disagg). Their URL keys: slo (views.sidebar.state), tpot_pct, ttft_set, ttft_slo,
ttft_pct and serving (here)."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from i18n import N_, tr
from planner.physics.ttft import MAX_TTFT_SLO_MS
from planner.request import SERVINGS, SLO_PERCENTILES, PlanRequest
from views.sidebar.url_values import url_bool

TTFT_DEFAULT_MS = 2000.0  # the value the input starts at when the user turns the TTFT SLO on



# URL parameters: (default, parser, check), turned into views.sidebar.state.Param by views.sidebar.state._params
PARAMS: dict[str, tuple] = {
    "ttft_set": (False, url_bool, lambda v: isinstance(v, bool)),
    "ttft_slo": (TTFT_DEFAULT_MS, float, lambda v: math.isfinite(v) and 0.0 < v <= MAX_TTFT_SLO_MS),
    "serving": (SERVINGS[0], str, lambda v: v in SERVINGS),
    "tpot_pct": (PlanRequest.tpot_percentile, str, lambda v: v in SLO_PERCENTILES),
    "ttft_pct": (PlanRequest.ttft_percentile, str, lambda v: v in SLO_PERCENTILES),
}
PERCENTILE_LABELS = {"mean": N_("mean (default)"), "p50": N_("p50 (median)"), "p90": N_("p90"), "p99": N_("p99")}
SERVING_LABELS = {"colocated": N_("co-located"), "disaggregated": N_("disaggregated prefill/decode"),
                  "best": N_("the cheaper of the two")}


def slo_inputs() -> None:
    """The TPOT SLO, then the TTFT SLO (off: none stated, TTFT reported only)."""
    ss = st.session_state
    statistic = {k: tr(v) for k, v in PERCENTILE_LABELS.items()}.get  # both SLOs' statistic, in the reader's language
    st.number_input(tr("TPOT SLO, ms per output token"), min_value=1.0, max_value=60000.0, step=5.0, key="slo",
                    help=tr("TPOT (time per output token) is the latency each user sees between tokens. Every "
                            "method is compared at its own best batch under this target."))
    st.selectbox(tr("TPOT SLO holds at"), list(SLO_PERCENTILES), key="tpot_pct", format_func=statistic,
                 help=tr("The statistic over requests the TPOT SLO holds. Mean (default): the mean TPOT, as the "
                         "planner has always read it. p90 / p99: 90 % / 99 % of requests see at most the SLO; under "
                         "speculation a request's TPOT varies with the tokens each verifier step accepts (from the "
                         "per-position acceptance, or your per-request measurement), so fewer sequences per replica "
                         "meet it. Without speculation a step emits one token: no spread is modelled (nor from a "
                         "changing batch)."))
    st.checkbox(tr("Set a TTFT SLO"), key="ttft_set",
                help=tr("TTFT (time to first token): the mean wait for a request's first token, its queue for the "
                     "prefill lane and its own chunked prefill (the draft's too, with speculation). Off: TTFT is "
                     "shown, not a constraint. On: a batch or a fleet that breaks it is not feasible; the fleet adds "
                     "replicas until both SLOs hold."))
    st.number_input(tr("TTFT SLO, ms to the first token"), min_value=1.0, max_value=float(MAX_TTFT_SLO_MS), step=100.0,
                    key="ttft_slo", disabled=not ss.get("ttft_set", False))
    st.selectbox(tr("TTFT SLO holds at"), list(SLO_PERCENTILES), key="ttft_pct", format_func=statistic,
                 disabled=not ss.get("ttft_set", False),
                 help=tr("The statistic over requests the TTFT SLO holds: the mean (default), or p50 / p90 / p99 from "
                         "the exponential tail of the wait for the prefill lane (exact for an M/M/1 lane)."))
    st.radio(tr("Prefill and decode"), list(SERVINGS), key="serving",
             format_func={k: tr(v) for k, v in SERVING_LABELS.items()}.get,
             help=tr("Co-located: every replica prefills and decodes (chunked prefill shares its steps). Disaggregated: "
                  "a prefill pool sized for the TTFT SLO and a decode pool for the TPOT SLO, each at its own TP, "
                  "the prompt's KV cache sent between them over the GPU's interconnect; the bill is both pools'. "
                  "The cheaper of the two: the plan compares both, with and without speculation."))


def request_fields() -> dict[str, Any]:
    """The request's ttft_slo_ms (None unless the user turned the TTFT SLO on), the statistic each SLO holds and
    serving from the sidebar."""
    ss = st.session_state
    return {"ttft_slo_ms": float(ss["ttft_slo"]) if ss.get("ttft_set") and "ttft_slo" in ss else None,
            "tpot_percentile": ss.get("tpot_pct", PlanRequest.tpot_percentile),
            "ttft_percentile": ss.get("ttft_pct", PlanRequest.ttft_percentile),
            "serving": ss.get("serving", SERVINGS[0])}


def tpot_phrase(req) -> str:
    """"TPOT SLO N ms (mean)" for the scenario caption: the SLO and the statistic it holds."""
    return tr("TPOT SLO {ms} ms ({stat})", ms=f"{req.tpot_slo_ms:g}", stat=req.tpot_percentile)


def ttft_phrase(req) -> str:
    """", TTFT SLO N ms (p90)" for the scenario caption where the request states one, else ""."""
    return (tr(", TTFT SLO {ms} ms ({stat})", ms=f"{req.ttft_slo_ms:g}", stat=req.ttft_percentile)
            if req.ttft_slo_ms is not None else "")
