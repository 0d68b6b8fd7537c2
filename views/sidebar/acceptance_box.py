"""The sidebar's "Your measured acceptance" box: a file the customer's engine already writes (vLLM /metrics text, a
`vllm bench serve --save-result` JSON, per-position rates, a per-step histogram or per-request spec-decode metrics
as CSV; the last also gives the measured spread the TPOT percentiles use), read by
profiles/measured_acceptance.py and used for one method: the top tier of the planner's acceptance (the customer's
measurement beats a public head, a family fit and a prior). Kept in this session only (a link does not carry it).

The file's name and the reader's messages quoting it are shown with st.text: plain text, never Markdown."""

from __future__ import annotations

from typing import Any

import streamlit as st

from i18n import tr
from profiles.measured_acceptance import MeasuredAcceptanceError
from profiles.uploads import read_acceptance_file

KEY = "_measured_acceptance"  # (method, MeasuredAcceptance, planner Acceptance, K measured at) in use
UPLOAD_KEY = "acceptance_box_upload"
METHOD_KEY = "acceptance_box_method"
MESSAGE_KEY = "_acceptance_box_message"  # ("error" | "ok", plain text)


def _use(cat) -> None:
    ss = st.session_state
    upload = ss.get(UPLOAD_KEY)
    if upload is None:
        ss[MESSAGE_KEY] = ("error", "Upload a file first.")
        return
    method = ss[METHOD_KEY]
    try:
        measured = read_acceptance_file(upload.name, upload.getvalue())  # in a child process, under the OS limits
        # a per-request file without num_spec_tokens is taken at the method's default K
        acceptance, k = measured.for_plan(cat.methods[method].default_k)
    except MeasuredAcceptanceError as exc:
        ss[MESSAGE_KEY] = ("error", f"Not used: {exc}")
        return
    ss[KEY] = (method, measured, acceptance, k)
    at_k = "" if measured.k else f" (taken at {cat.methods[method].label}'s default K={k})"
    ss[MESSAGE_KEY] = ("ok", f"Used for {method}: {measured.describe()}{at_k}")


def _clear() -> None:
    st.session_state.pop(KEY, None)
    st.session_state[MESSAGE_KEY] = ("ok", "Back to the library and the priors.")


def request_fields() -> dict[str, Any]:
    """The PlanRequest fields of the measurement in use (none: {})."""
    got = st.session_state.get(KEY)
    if not got:
        return {}
    method, m, acceptance, k = got
    return {"acceptance": acceptance, "acceptance_method": method, "acceptance_k": k,
            "acceptance_source": f"measured: {m.describe()}"}


def acceptance_box(cat) -> None:
    """Draw the box (inside the sidebar)."""
    ss = st.session_state
    kind, text = ss.get(MESSAGE_KEY) or ("", "")
    with st.expander(tr("Your measured acceptance"), expanded=kind == "error"):
        st.caption(tr("From your own engine: vLLM's /metrics text, a `vllm bench serve --save-result` JSON, or a CSV of "
                      "per-position rates (position,rate), of verifier steps by accepted drafts (accepted,count), or "
                      "one row per request (accepted_tokens,steps[,num_spec_tokens]: vLLM's per-request spec-decode "
                      "metrics; its spread over requests sets the TPOT percentiles). It replaces the library and the "
                      "priors for that method; K is the file's (a per-request file without num_spec_tokens: the "
                      "method's default)."))
        st.selectbox(tr("Method it was measured with"), list(cat.methods), key=METHOD_KEY,
                     format_func=lambda n: cat.methods[n].label)
        st.file_uploader(tr("Upload the measurement"), type=["txt", "prom", "json", "csv"], key=UPLOAD_KEY)
        c1, c2 = st.columns(2)
        c1.button(tr("Use it"), key="acceptance_box_use", on_click=_use, args=(cat,))
        if ss.get(KEY):
            c2.button(tr("Stop using it"), key="acceptance_box_clear", on_click=_clear)
        if kind == "error":
            st.error(tr("This file was not used:"))
        if kind:
            st.text(text)
