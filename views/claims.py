"""Claims: each numeric claim of the seed article next to what the model says, and the conditions (alpha
convention, K, batch, hardware) under which it holds or fails. The claims and their thresholds are
profiles/data/claims.yaml; planner.checks.claims evaluates them; this page draws the rows."""

from __future__ import annotations

import streamlit as st

from i18n import tr
from planner import plan as P
from planner.checks import claims as C
from profiles.claims import load_claims
from views.sidebar import state as S

COLOUR = {C.Status.HOLDS: "green", C.Status.DIFFERS: "orange", C.Status.OUTSIDE: "gray"}


@st.cache_resource(show_spinner=False)
def claims() -> tuple[C.Claim, ...]:
    return load_claims(catalog=S.catalog())


@st.cache_data(max_entries=8, show_spinner=False)
def evaluate_claims(req: P.PlanRequest) -> tuple[C.ClaimRow, ...]:
    return C.evaluate_claims(req, S.catalog(), claims())


def render() -> None:
    req = S.page_header(tr("The seed article's claims vs the model"))
    if req is None:
        return
    rows = evaluate_claims(req)
    for i, r in enumerate(rows):
        with st.container(border=True, key=f"claim_{i}"):
            st.markdown(f"**{r.claim}** · _{r.attributed_to}_")
            c1, c2 = st.columns([1, 4])
            c1.markdown(f"**:{COLOUR[r.status]}[{r.verdict}]**")
            c2.markdown(r.model_says)
            c2.caption(tr("Conditions: {conditions}", conditions=r.conditions))
    with st.expander(tr("All claims as a table"), expanded=False):
        st.dataframe([r.as_dict() for r in rows], key="claims_table", hide_index=True)
    st.subheader(tr("Seed acceptance ranges vs the acceptance library"))
    st.caption(tr("The seed's alpha ranges are per-token alpha at draft position 1 (decaying by each method's assumed "
               "position decay); the library holds measured acceptance lengths tau at K (bonus token included). Both "
               "are shown as tau at the same K, and the library's tau as the i.i.d. per-token alpha with that tau."))
    st.dataframe(C.seed_vs_library(S.catalog()), key="seed_vs_library", hide_index=True)
    st.subheader(tr("Seed levers vs the acceptance library"))
    st.caption(tr("A lever's acceptance effect is measured by a pair of library rows that differ only in that lever. "
               "Trees: each SGLang tree (top-k > 1) beside the chain of its depth on the same model, head, dataset, "
               "engine and temperature, as i.i.d. per-token alpha at K = depth."))
    st.dataframe(C.seed_levers_vs_library(S.catalog()), key="seed_levers_vs_library", hide_index=True)
    st.caption(tr("Claims are priors, not truths: each row says where the claim holds and where it fails under the "
               "model, with its conditions. Acceptance conventions: alpha is per-token; vLLM's draft acceptance "
               "rate is (tau-1)/K; tau (acceptance length) counts the bonus token."))


if __name__ == "__main__":
    render()
