"""Traffic: upload a traffic profile (CSV, JSONL, Parquet; per-request rows or a mix table) or load a
shipped sample; the profile drives every other page. A bad upload shows each bad row / column / value and
keeps the previous profile."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from profiles import traffic as tr
from views import _state as S

MAX_MB = tr.MAX_UPLOAD_BYTES // 2**20


def _show_errors(name: str, err: tr.TrafficError) -> None:
    lines = "\n".join(f"- {p}" for p in err.problems)
    more = f"\n- ... and {err.total - len(err.problems)} more" if err.total > len(err.problems) else ""
    prev = st.session_state.get(S.PROFILE_KEY)
    keep = (f"The previous profile '{prev.name}' is still in use." if prev is not None
            else "No profile is loaded; the pages use the sidebar's workload and language.")
    st.error(f"'{name}' was not loaded: {err.total} problem{'s' if err.total != 1 else ''}.\n{lines}{more}\n\n{keep}")


def _handle_upload() -> None:
    up = st.file_uploader(f"Upload a traffic profile (CSV, JSONL or Parquet; at most {MAX_MB} MiB and "
                          f"{tr.MAX_ROWS:,} rows)", type=["csv", "jsonl", "ndjson", "json", "parquet", "pq"],
                          key="traffic_upload", max_upload_size=MAX_MB)
    if up is None:
        return
    data = up.getvalue()
    try:
        prof = S.load_upload(up.name, data)
    except tr.TrafficError as err:
        _show_errors(up.name, err)
        return
    except Exception as err:  # never crash the page on an upload
        _show_errors(up.name, tr.TrafficError([tr.Problem(None, None, None, f"a readable file ({err})")]))
        return
    st.success(f"Loaded '{prof.name}': {prof.rows:,} rows, {len(prof.segments)} workload-language segments.")


def _summary(prof: tr.TrafficProfile) -> None:
    cat = S.catalog()
    inp = S.inputs()
    c = st.columns(4)
    c[0].metric("Rows", f"{prof.rows:,}", help=f"{prof.kind} format, {prof.fmt}")
    c[1].metric("Requests (weighted)", f"{prof.requests:,.0f}",
                help="A 'weight' column says how many requests each sampled row stands for.")
    c[2].metric("Output tokens per month", f"{prof.monthly_output_tokens / 1e9:,.2f}B"
                if prof.monthly_output_tokens else "n/a",
                help="Output tokens in the file / its time span x 30.44 days (average month)"
                if prof.kind == "requests" else "Sum of the mix table's monthly_output_tokens.")
    conc = prof.concurrency(inp.tpot_slo_ms, 0)
    c[3].metric("Concurrent sequences (median minute)", f"{conc:,.0f}" if conc is not None else "n/a",
                help="Little's law: arrival rate x mean output tokens x TPOT SLO. Caps the batch the planner "
                     "may assume (a replica cannot batch more sequences than are in flight).")
    if prof.span_days:
        st.caption(f"Time span {prof.span_days:.2f} days" + (
            f"; arrival rate p50 {prof.arrival_rate_per_s[0]:.2f}, p90 {prof.arrival_rate_per_s[1]:.2f}, "
            f"peak {prof.arrival_rate_per_s[2]:.2f} requests/s" if prof.arrival_rate_per_s else ""))
    for w in prof.warnings:
        st.warning(w)
    st.checkbox("Cap the batch at my traffic's concurrency (median minute)", key="traffic_cap",
                disabled=prof.arrival_rate_per_s is None)
    rows = [{"workload": cat.workloads[s.workload].label, "language": cat.languages[s.language].label,
             "share of output tokens": f"{s.output_token_share * 100:.1f} %", "requests": round(s.requests),
             "mean prompt tokens": round(s.mean_prompt_tokens), "mean output tokens": round(s.mean_output_tokens),
             "alpha shift (workload + language)": round(cat.workloads[s.workload].alpha_shift
                                                        + cat.languages[s.language].alpha_shift, 3)}
            for s in prof.segments]
    st.dataframe(rows, key="traffic_mix_table", hide_index=True)
    st.caption("Alpha shifts are per-token, added to each trained drafter's alpha (workloads.yaml, languages.yaml: "
               "long-context summarization -15 to -22 pp, a language without its own head -12 to -18 pp; seed "
               "article, 2026-04-15).")
    col1, col2 = st.columns(2)
    ws, ls = prof.workload_shares, prof.language_shares
    fig = go.Figure(go.Bar(x=[cat.workloads[w].label for w in ws], y=[v * 100 for v in ws.values()],
                           name="workload"))
    fig.add_bar(x=[cat.languages[x].label for x in ls], y=[v * 100 for v in ls.values()], name="language")
    fig.update_layout(yaxis_title="% of output tokens", height=340, legend={"orientation": "h", "y": -0.3})
    col1.plotly_chart(fig, key="traffic_mix_chart", width="stretch")
    e = prof.context_hist_edges
    fig = go.Figure(go.Bar(x=[(e[i] * e[i + 1]) ** 0.5 for i in range(len(e) - 1)], y=prof.context_hist_counts))
    fig.update_xaxes(type="log", title="context tokens per request (prompt + output)")
    fig.update_layout(yaxis_title="requests", height=340)
    col2.plotly_chart(fig, key="traffic_context_chart", width="stretch")
    q = prof.context_tokens_quantiles
    st.caption(f"Context tokens p10 {q[0]:,.0f}, p50 {q[1]:,.0f}, p90 {q[2]:,.0f}, p99 {q[3]:,.0f}. KV-cache "
               "memory and attention cost follow the context; each segment is evaluated at its mean prompt "
               "and output lengths.")
    if prof.kind == "requests" and any(prof.per_hour_requests):
        fig = go.Figure(go.Bar(x=list(range(24)), y=prof.per_hour_requests))
        fig.update_layout(xaxis_title="hour of day (UTC)", yaxis_title="requests (weighted)", height=300)
        st.plotly_chart(fig, key="traffic_hour_chart", width="stretch")


def render() -> None:
    st.title("Traffic profile")
    st.markdown(
        "Per-request rows: **timestamp, workload, prompt_tokens, output_tokens** (+ optional **language**, "
        "**weight** = requests a sampled row stands for, **prompt_text**, read and discarded). Or a mix table: "
        "**workload** and **share** or **monthly_output_tokens** (+ optional language, prompt_tokens, "
        "output_tokens as means). Workloads: " + ", ".join(S.catalog().workloads) + ". Languages: "
        + ", ".join(S.catalog().languages) + ".")
    c = st.columns(5)
    for i, (name, (label, _fname)) in enumerate(S.SAMPLES.items()):
        if c[i].button(f"Sample: {label}", key=f"traffic_sample_{name}"):
            S.load_sample(name)
    c[3].download_button("Template: per-request CSV", (S.SAMPLES_DIR / "template_requests.csv").read_bytes(),
                         file_name="template_requests.csv", mime="text/csv", key="traffic_template_requests")
    c[4].download_button("Template: mix table CSV", (S.SAMPLES_DIR / "template_mix.csv").read_bytes(),
                         file_name="template_mix.csv", mime="text/csv", key="traffic_template_mix")
    _handle_upload()
    prof = st.session_state.get(S.PROFILE_KEY)
    if prof is None:
        st.info("No traffic profile loaded: every page uses the sidebar's single workload and language. Load a "
                "sample or upload your export.")
        return
    origin = st.session_state.get(S.PROFILE_ORIGIN_KEY) or ""
    st.subheader(f"Profile in use: {prof.name}")
    st.caption(f"Origin: {origin}. It drives the workload and language mix, the batch cap and (if chosen in "
               "the sidebar) the monthly volume on every page.")
    if st.button("Stop using this profile", key="traffic_clear"):
        S.clear_profile()
        st.rerun()
    _summary(prof)


if __name__ == "__main__":
    render()
