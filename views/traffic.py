"""Traffic: upload a traffic export (CSV with any separator, JSONL, JSON, Parquet, Excel .xlsx; per-request rows,
time-bucketed usage exports or a mix table) or load a shipped sample; the profile drives every other page.

Known exports are recognised by their columns and named; for anything else the page maps columns to roles, and
files without a workload column get one from a workload picker (one workload for the whole file, a column
whose values map to workloads, or rules on prompt text / model / endpoint). A bad upload shows each bad row /
column / value and keeps the previous profile. An upload is parsed again only when the file or its reading
options change, so the sample buttons and "Stop using this profile" work whatever the uploader holds."""

from __future__ import annotations

import hashlib
import math

import plotly.graph_objects as go
import streamlit as st

import i18n
from i18n import N_
from profiles import traffic as tr
from profiles.traffic.guards import size_text
from profiles.uploads import inspect_traffic, traffic_column_values
from views.parts.text import plain, plain_in, quoted
from views.sidebar import state as S

MAX_MB = tr.MAX_UPLOAD_BYTES // 2**20
# Streamlit's uploader counts decimal MB in the browser (100 MiB = 104.9 MB): it lets a little more than the limit
# through, so that the page refuses an over-size file with its own message (.streamlit/config.toml: server side).
UPLOADER_MB = math.ceil(tr.MAX_UPLOAD_BYTES / 1e6) + 1
AUTO = "(automatic)"
NONE = "(none)"
SEPARATORS = {"": N_("sniff"), ",": N_("comma ,"), ";": N_("semicolon ;"), "\t": N_("tab"), "|": N_("pipe |")}
DECIMALS = {"": N_("sniff"), ".": N_("point 1.5"), ",": N_("comma 1,5")}
UNITS = {"auto": N_("by magnitude"), "s": N_("seconds"), "ms": N_("milliseconds"), "us": N_("microseconds"),
         "ns": N_("nanoseconds")}
WL_MODES = {"auto": N_("from the file (its workload column, else one workload)"),
            "fixed": N_("one workload for the whole file"), "map": N_("map a column's values to workloads"),
            "rules": N_("rules on prompt text, model or endpoint")}
MAX_VALUE_PICKERS = 20  # values of a workload column given their own picker (the most common first)
UPLOAD_TYPES = ["csv", "tsv", "txt", "jsonl", "ndjson", "json", "parquet", "pq", "xlsx"]


def _show_errors(name: str, err: tr.TrafficError) -> None:
    lines = "\n".join(f"- {plain(p)}" for p in err.problems)
    rest = err.total - len(err.problems)
    more = (f"\n- ... and {'at least ' if getattr(err, 'at_least', False) else ''}{rest:,} more"
            if rest > 0 else "")
    prev = st.session_state.get(S.PROFILE_KEY)
    keep = (i18n.tr("The previous profile {name} is still in use.", name=quoted(prev.name)) if prev is not None
            else i18n.tr("No profile is loaded; the pages use the sidebar's workload and language."))
    st.error(i18n.tr("{name} was not loaded: {total}{v} "
             "problem{v2}.\n{lines}{more}\n\n{keep}", name=quoted(name), total=f"{err.total:,}", v='+' if getattr(err, 'at_least', False) else '', v2='s' if err.total != 1 else '', lines=lines, more=more, keep=keep))


def _parse_lines(text: str, fields: int) -> tuple[list[tuple[str, ...]], list[str]]:
    """'a => b' (fields 2) or 'column: text => workload' (fields 3) lines; blank lines and # comments skipped."""
    out, bad = [], []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        left, sep, right = line.rpartition("=>")
        if not sep or not left.strip() or not right.strip():
            bad.append(raw)
            continue
        if fields == 2:
            out.append((left.strip(), right.strip()))
            continue
        col, sep2, txt = left.partition(":")
        if not sep2 or not col.strip() or not txt.strip():
            bad.append(raw)
            continue
        out.append((col.strip(), txt.strip(), right.strip()))
    return out, bad


def _reading_options(fmt_hint: str) -> tr.ParseOptions:
    ss = st.session_state
    return tr.ParseOptions(delimiter=ss.get("traffic_delimiter", ""), decimal=ss.get("traffic_decimal", ""),
                           sheet=ss.get("traffic_sheet", "").strip() if fmt_hint == "xlsx" else "",
                           timestamp_unit=ss.get("traffic_ts_unit", "auto"))


def _inspect(up, data: bytes, base: tr.ParseOptions) -> tr.FileInfo:
    """Header/metadata only, kept per file and reading options (no hashing of the bytes on every rerun)."""
    key = (up.file_id, up.name, len(data), base)
    cached = st.session_state.get("_traffic_info")
    if cached is not None and cached[0] == key:
        return cached[1]
    info = inspect_traffic(up.name, data, base)  # in a child process, under the OS limits
    st.session_state["_traffic_info"] = (key, info)
    return info


def _column_values(up, data: bytes, column: str, base: tr.ParseOptions) -> list[tuple[str, int]]:
    key = (up.file_id, column, base)
    cached = st.session_state.get("_traffic_values")
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        vals = traffic_column_values(up.name, data, column, base)
    except tr.TrafficError:
        vals = []
    st.session_state["_traffic_values"] = (key, vals)
    return vals


def _options_ui(up, data: bytes) -> tr.ParseOptions | None:
    """The reading options (every widget keyed): separator, decimal mark, sheet, time unit, column roles and
    the workload picker. Returns the ParseOptions to parse with, or None when the file cannot be opened."""
    cat = S.catalog()
    fmt = tr.detect_format(up.name, data[:64])
    base = _reading_options(fmt)
    try:
        info = _inspect(up, data, base)
    except tr.TrafficError as err:
        _show_errors(up.name, err)
        info = None
    needs = info is None or info.kind == "unknown" or (info.kind == "requests" and "workload" not in info.roles)
    with st.expander(i18n.tr("Reading options: separator, columns, workloads"), expanded=needs):
        c = st.columns(4)
        c[0].selectbox(i18n.tr("Separator"), list(SEPARATORS), key="traffic_delimiter", format_func={k: i18n.tr(v) for k, v in SEPARATORS.items()}.get,
                       disabled=fmt != "csv", help=i18n.tr("CSV only; 'sniff' picks the most frequent of , ; tab | in the header."))
        c[1].selectbox(i18n.tr("Decimal mark"), list(DECIMALS), key="traffic_decimal", format_func={k: i18n.tr(v) for k, v in DECIMALS.items()}.get,
                       disabled=fmt != "csv", help=i18n.tr("European Excel writes 1,5 with ';' as the separator."))
        c[2].selectbox(i18n.tr("Numeric timestamps in"), list(UNITS), key="traffic_ts_unit", format_func={k: i18n.tr(v) for k, v in UNITS.items()}.get,
                       help=i18n.tr("Unix time: by magnitude, seconds (~1.7e9), milliseconds (~1.7e12), ... Numbers before "
                            "the year 2000 are read as seconds since the trace began."))
        c[3].text_input(i18n.tr("Sheet (xlsx)"), key="traffic_sheet", disabled=fmt != "xlsx",
                        placeholder=i18n.tr("the first sheet"))
        if info is None:
            return None
        cols = list(info.columns)
        if info.format_label:
            st.caption(f"Recognised: **{plain(info.format_label)}** ({info.fmt}"
                       + (f", separator {SEPARATORS.get(info.delimiter, info.delimiter)!s}, decimal "
                          f"{DECIMALS.get(info.decimal, info.decimal)}" if info.fmt == "csv" else "") + "). Columns: "
                       + ", ".join(f"{tr.ROLE_LABELS.get(r, r)} = {quoted(col)}" for r, col in info.mapping) + ".")
        else:
            st.warning(i18n.tr("Columns not recognised: map the file's columns below (the file's columns: {cols}).",
                               cols=", ".join(plain(c) for c in cols[:30]) + (" ..." if len(cols) > 30 else "")))
        st.markdown(i18n.tr("**Columns** (automatic: matched by name; known exports and synonyms such as ContextTokens, "
                    "completion_tokens, 'Request tokens' are recognised)"))
        mapping = []
        roles = [r for r in tr.ROLES if r != "end_time"] + (["end_time"] if info.totals else [])
        grid = st.columns(4)
        for key in [f"traffic_col_{r}" for r in roles] + ["traffic_wl_column"]:
            if key in st.session_state and st.session_state[key] not in [AUTO, NONE] + cols:
                del st.session_state[key]  # a column of a previous file
        for i, role in enumerate(roles):
            choice = grid[i % 4].selectbox(tr.ROLE_LABELS[role], [AUTO, NONE] + cols, key=f"traffic_col_{role}",
                                           help=i18n.tr("Automatic: {get}", get=plain(dict(info.mapping).get(role, 'no column found'))))
            if choice == NONE:
                mapping.append((role, ""))
            elif choice != AUTO:
                mapping.append((role, choice))
        st.markdown(i18n.tr("**Workloads**"))
        _offer_candidate(up.file_id, info)
        mode = st.radio(i18n.tr("Workload of each request"), list(WL_MODES), key="traffic_wl_mode",
                        format_func={k: i18n.tr(v) for k, v in WL_MODES.items()}.get,
                        horizontal=True)
        wl_names = list(cat.workloads)
        rule = tr.WorkloadRule()
        if mode == "auto":
            st.caption(i18n.tr("Uses the file's workload column; a file without one is counted as one workload, guessed from "
                       "the file name (..._code.csv -> code) or Chat, and the page says so."))
        elif mode == "fixed":
            wl = st.selectbox(i18n.tr("Workload for the whole file"), wl_names, key="traffic_wl_fixed",
                              format_func=lambda n: cat.workloads[n].label)
            rule = tr.WorkloadRule(mode="fixed", workload=wl)
        else:
            default = st.selectbox(i18n.tr("Workload of rows nothing matches"), wl_names, key="traffic_wl_default",
                                   format_func=lambda n: cat.workloads[n].label)
            if mode == "map":
                col = st.selectbox(i18n.tr("Column whose values name the workload"), cols, key="traffic_wl_column")
                vals = _column_values(up, data, col, base)
                if vals:
                    st.caption("Most common values: " + ", ".join(f"{quoted(v)} ({n:,})" for v, n in vals[:15]))
                chosen = _value_workloads(col, vals, wl_names, default)
                text = st.text_area(i18n.tr("More values => workload, one per line (they override the choices above; "
                                            "values that are workload names map to themselves)"), key="traffic_wl_map",
                                    placeholder="GPT-4 => reasoning\nChatGPT => chat")
                pairs, bad = _parse_lines(text, 2)
                rule = tr.WorkloadRule(mode="map", column=col, mapping=tuple(chosen + pairs), workload=default)
            else:
                text = st.text_area(i18n.tr("Rules, one per line: column: text => workload (first match wins; the text is "
                                    "matched anywhere in the cell, ignoring case; column may be prompt_text, model, "
                                    "endpoint or any column of the file)"), key="traffic_wl_rules",
                                    placeholder="model: gpt-4 => reasoning\nprompt_text: def  => code")
                rules, bad = _parse_lines(text, 3)
                rule = tr.WorkloadRule(mode="rules", rules=tuple(rules), workload=default)
            if bad:
                st.warning(i18n.tr("Lines not understood (ignored): ") + "; ".join(plain(repr(b[:60])) for b in bad[:5]))
        detect = True
        if "prompt_text" in info.roles and "language" not in info.roles:
            detect = st.checkbox(i18n.tr("Detect each request's language from its prompt text (the file has no "
                                         "language column)"), value=True, key="traffic_detect_language",
                                 help=i18n.tr("A sample of the prompts is read by a language detector (py3langid); "
                                              "Chinese text counts as Mandarin. The text is not kept."))
    return tr.ParseOptions(columns=tuple(mapping), workload=rule, timestamp_unit=base.timestamp_unit,
                           delimiter=base.delimiter, decimal=base.decimal, sheet=base.sheet, detect_language=detect)


def _offer_candidate(file_id: str, info: tr.FileInfo) -> None:
    """A file without a workload column whose columns include one that looks like a workload (a model group, a
    project, a route: FileInfo.workload_candidates) opens with its values mapped, once per file; the user's later
    choices stand."""
    ss = st.session_state
    if ss.get("_traffic_wl_offered") == file_id:
        return
    ss["_traffic_wl_offered"] = file_id
    if ss.pop("_traffic_wl_preset", False) and ss.get("traffic_wl_mode") == "map":
        ss["traffic_wl_mode"] = "auto"  # the previous file's preset, not a choice for this one
    if info.kind == "requests" and "workload" not in info.roles and info.workload_candidates:
        ss["traffic_wl_mode"] = "map"
        ss["traffic_wl_column"] = info.workload_candidates[0]
        ss["_traffic_wl_preset"] = True


def _value_workloads(col: str, vals: list[tuple[str, int]], wl_names: list[str], default: str
                     ) -> list[tuple[str, str]]:
    """A workload picker for each of the column's most common values, preset to the workload its name suggests
    (tr.guess_workload: 'code' for code, coder, copilot ...) or to the default; returns (value, workload) pairs."""
    cat = S.catalog()
    shown = vals[:MAX_VALUE_PICKERS]
    if not shown:
        return []
    st.caption(i18n.tr("Workload of each value of {col} (preset from the value's name; values not listed get the "
                       "workload of rows nothing matches):", col=quoted(col)))
    grid = st.columns(3)
    pairs = []
    for i, (value, n) in enumerate(shown):
        guess = tr.guess_workload(value, wl_names) or default
        key = "traffic_wl_value_" + hashlib.sha256(f"{col}\0{value}".encode()).hexdigest()[:16]
        wl = grid[i % 3].selectbox(i18n.tr("{value} ({n} rows)", value=plain(value), n=f"{n:,}"), wl_names, index=wl_names.index(guess), key=key,
                                   format_func=lambda w: cat.workloads[w].label)
        pairs.append((value, wl))
    return pairs


def _handle_upload() -> None:
    up = st.file_uploader(i18n.tr("Upload your traffic: a gateway or cloud export, a trace or a mix table (CSV, JSONL, "
                          "JSON, Parquet or Excel .xlsx; at most {MAX_MB} MiB = {v} MB and "
                          "{MAX_ROWS} rows)", MAX_MB=MAX_MB, v=f"{tr.MAX_UPLOAD_BYTES / 1e6:.1f}", MAX_ROWS=f"{tr.MAX_ROWS:,}"), type=UPLOAD_TYPES, key="traffic_upload", max_upload_size=UPLOADER_MB)
    if up is None:
        return
    _drop_older_uploads(up.file_id)
    data = up.getvalue()
    if len(data) > tr.MAX_UPLOAD_BYTES:  # the server refuses these too (server.maxUploadSize)
        _show_errors(up.name, tr.TrafficError([tr.Problem(
            None, None, None, f"a file of at most {size_text(tr.MAX_UPLOAD_BYTES)} (this one has {len(data):,} bytes)")]))
        return
    options = _options_ui(up, data)
    if options is None:
        return
    sig = (up.file_id, up.name, len(data), options)
    ss = st.session_state
    if ss.get("_traffic_upload_sig") != sig:  # a new file or new options: parse (once)
        ss["_traffic_upload_sig"] = sig
        try:
            prof = S.load_upload(up.name, data, options)
            ss["_traffic_upload_result"] = ("ok", f"Loaded '{prof.name}': {prof.rows:,} rows, "
                                                  f"{len(prof.segments)} workload-language segments."
                                            + (" Kept for shared links: a link to any page reopens this profile."
                                               if ss.get("profile") else
                                               " " + ss.pop("_profile_keep_error", "")))
        except tr.TrafficError as err:
            ss["_traffic_upload_result"] = ("error", err)
        except Exception as err:  # noqa: BLE001 - never crash the page on an upload
            ss["_traffic_upload_result"] = ("error", tr.TrafficError([tr.Problem(
                None, None, None, f"a readable file ({type(err).__name__}: {str(err)[:200]})")]))
    kind, payload = ss.get("_traffic_upload_result", ("", None))
    if kind == "error":
        _show_errors(up.name, payload)
    elif kind == "ok":
        if ss.get(S.PROFILE_ORIGIN_KEY) == f"upload:{up.name}":
            st.success(plain_in(payload, up.name))
        else:
            st.info(i18n.tr("{name} is still in the uploader but not in use (another profile was chosen). Change a "
                    "reading option or upload it again to use it.", name=quoted(up.name)))


def _drop_older_uploads(file_id: str) -> None:
    """Streamlit keeps every file a session uploads in the server's memory until the session ends
    (streamlit/runtime/memory_uploaded_file_manager.py; the browser deletes a file only when its x is clicked). The
    uploader holds one file: when another arrives, the previous one is dropped from the server's memory."""
    ss = st.session_state
    prev = ss.get("_traffic_upload_file_id")
    ss["_traffic_upload_file_id"] = file_id
    if not prev or prev == file_id:
        return
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
    if remove is not None:  # the in-memory manager (streamlit run, AppTest); others keep their own files
        remove(session_id=ctx.session_id, file_id=prev)


def _fmt_tokens(x: float) -> str:
    return f"{x / 1e9:,.3f}B" if x >= 1e8 else f"{x / 1e6:,.2f}M"


def _summary(prof: tr.TrafficProfile) -> None:
    cat = S.catalog()
    slo_ms = float(st.session_state["slo"])
    if prof.source_format:
        st.caption(f"Format: {prof.source_format} ({prof.fmt}). " + (plain(prof.time_note) + ". " if prof.time_note else "")
                   + (plain(prof.workload_note[:1].upper() + prof.workload_note[1:]) + "." if prof.workload_note else ""))
    c = st.columns(4)
    c[0].metric(i18n.tr("Rows"), f"{prof.rows:,}", help=i18n.tr("{kind} format, {fmt}", kind=prof.kind, fmt=prof.fmt))
    c[1].metric(i18n.tr("Requests (weighted)"), f"{prof.requests:,.0f}",
                help=i18n.tr("A 'weight' column (or an export's request count per time bucket) says how many requests each "
                     "row stands for."))
    ci = prof.monthly_output_tokens_ci95
    c[2].metric(i18n.tr("Output tokens per month"), _fmt_tokens(prof.monthly_output_tokens)
                if prof.monthly_output_tokens else "n/a",
                delta=i18n.tr("95 % interval {low} to {high}", low=_fmt_tokens(ci[0]), high=_fmt_tokens(ci[1])) if ci else None,
                delta_color="off",
                help=i18n.tr("Output tokens in the file / its time span x 30.44 days (average month)")
                if prof.kind == "requests" else i18n.tr("Sum of the mix table's monthly_output_tokens."))
    conc = prof.concurrency(slo_ms, 0)
    c[3].metric(i18n.tr("Concurrent sequences (median minute)"),
                f"{conc:,.1f}" if conc is not None else i18n.tr("unknown") if prof.arrival_note else "n/a",
                help=plain(prof.arrival_note) if prof.arrival_note else
                i18n.tr("Little's law: arrival rate x mean output tokens x TPOT SLO. Caps the batch the planner "
                        "may assume (a replica cannot batch more sequences than are in flight); a volume typed in "
                        "the sidebar scales it with the arrivals."))
    if prof.language_note:
        st.caption(plain(prof.language_note[:1].upper() + prof.language_note[1:]) + ".")
    if prof.volume_note:
        st.info(i18n.tr("**Volume.** {volume_note}", volume_note=plain(prof.volume_note)))
    if prof.prefix_reuse is not None:
        pr = prof.prefix_reuse
        st.info(i18n.tr("**Prefix reuse: {v} % of prompt tokens** (from the {source}). "
                "{note}. The plan takes it as the prefix-cache share of prefill unless you set one in "
                "the sidebar.", v=f"{pr.share * 100:.1f}", source=plain(pr.source), note=plain(pr.note)))
    if prof.arrival_rate_per_s:
        r = prof.arrival_rate_per_s
        st.caption(i18n.tr("Arrival rate per minute: p50 {v}, p90 {v2}, peak {v3} requests/s.", v=f"{r[0]:.3g}", v2=f"{r[1]:.3g}", v3=f"{r[2]:.3g}"))
    for w in prof.warnings:
        if w != prof.volume_note:
            st.warning(plain(w))
    st.checkbox(i18n.tr("Cap the batch at my traffic's concurrency (median minute)"), key="traffic_cap",
                disabled=prof.arrival_rate_per_s is None)
    rows = [{"workload": cat.workloads[s.workload].label, "language": cat.languages[s.language].label,
             "share of output tokens": f"{s.output_token_share * 100:.1f} %", "requests": round(s.requests),
             "mean prompt tokens": round(s.mean_prompt_tokens), "mean output tokens": round(s.mean_output_tokens),
             "alpha shift (workload + language)": round(cat.workloads[s.workload].alpha_shift
                                                        + cat.languages[s.language].alpha_shift, 3)}
            for s in prof.segments]
    st.dataframe(rows, key="traffic_mix_table", hide_index=True,  # headers in the reader's language
                 column_config={c: st.column_config.Column(label=i18n.tr_known(c)) for c in (rows[0] if rows else {})})
    st.caption(i18n.tr("Alpha shifts are per-token, added to each trained drafter's alpha (workloads.yaml, languages.yaml: "
               "long-context summarization -15 to -22 pp, a language without its own head -12 to -18 pp; seed "
               "article, 2026-04-15)."))
    col1, col2 = st.columns(2)
    ws, ls = prof.workload_shares, prof.language_shares
    fig = go.Figure(go.Bar(x=[cat.workloads[w].label for w in ws], y=[v * 100 for v in ws.values()],
                           name="workload"))
    fig.add_bar(x=[cat.languages[x].label for x in ls], y=[v * 100 for v in ls.values()], name="language")
    fig.update_layout(yaxis_title="% of output tokens", height=340, legend={"orientation": "h", "y": -0.3})
    col1.plotly_chart(fig, key="traffic_mix_chart", width="stretch")
    e = prof.context_hist_edges
    fig = go.Figure(go.Bar(x=[(e[i] * e[i + 1]) ** 0.5 for i in range(len(e) - 1)], y=prof.context_hist_counts))
    fig.update_xaxes(type="log", title=i18n.tr("context tokens per request (prompt + output)"))
    fig.update_layout(yaxis_title="requests", height=340)
    col2.plotly_chart(fig, key="traffic_context_chart", width="stretch")
    q = prof.context_tokens_quantiles
    st.caption(i18n.tr("Context tokens p10 {v}, p50 {v2}, p90 {v3}, p99 {v4}. KV-cache "
               "memory and attention cost follow the context; each segment is evaluated at its mean prompt "
               "and output lengths.", v=f"{q[0]:,.0f}", v2=f"{q[1]:,.0f}", v3=f"{q[2]:,.0f}", v4=f"{q[3]:,.0f}"))
    _daily_shape(prof)


def _daily_shape(prof: tr.TrafficProfile) -> None:
    st.subheader(i18n.tr("Arrivals by hour of day"))
    if not prof.spans_a_day:
        st.selectbox(i18n.tr("Daily shape (the file shows less than a day)"), list(tr.SHAPES), key="fleet_shape",
                     format_func=tr.SHAPE_LABELS.get,
                     help=i18n.tr("How the mean arrival rate spreads over the day for the fleet sizing; the monthly volume "
                          "does not change."))
    arr = prof.hourly_arrivals(S.arrival_shape())
    if arr is None:
        st.caption(i18n.tr("No arrival rate: the profile has no time span (a mix table of shares, or one timestamp)."))
        return
    fig = go.Figure(go.Bar(x=list(range(24)), y=list(arr.requests_per_s),
                           name="measured" if arr.source == "trace" else f"assumed: {arr.source}"))
    fig.update_layout(xaxis_title=i18n.tr("hour of day (UTC, or the file's clock)"), yaxis_title=i18n.tr("requests/s"), height=300)
    st.plotly_chart(fig, key="traffic_hour_chart", width="stretch")
    st.caption(i18n.tr("Requests/s by hour: {note}.", note=plain(arr.note)))
    if prof.minute_requests_per_s and len(prof.minute_requests_per_s) > 1:
        fig = go.Figure(go.Scatter(x=list(range(len(prof.minute_requests_per_s))), y=list(prof.minute_requests_per_s),
                                   mode="lines"))
        fig.update_layout(xaxis_title=i18n.tr("minute from the first request"), yaxis_title=i18n.tr("requests/s"), height=260)
        st.plotly_chart(fig, key="traffic_minute_chart", width="stretch")


def render() -> None:
    st.title(i18n.tr("Traffic profile"))
    st.markdown(
        i18n.tr("Upload what your gateway or cloud console exports. Recognised by their columns: **Azure LLM "
                "inference traces**, **BurstGPT**, **LiteLLM spend logs**, **OpenAI usage exports**, per-request "
                "results of **vllm bench serve** and **guidellm**, and this app's template (**timestamp, workload, "
                "prompt_tokens, output_tokens** + optional **language**, **weight**). Anything else: map its columns "
                "below. Or a mix table: **workload** and **share** or **monthly_output_tokens** (+ optional language, "
                "prompt_tokens, output_tokens as means). Workloads: {workloads}. Languages: {languages}.",
                workloads=", ".join(S.catalog().workloads), languages=", ".join(S.catalog().languages)))
    c = st.columns(5)
    for i, (name, (label, _fname)) in enumerate(S.SAMPLES.items()):
        if c[i].button(i18n.tr("Sample: {label}", label=label), key=f"traffic_sample_{name}"):
            S.load_sample(name)
    c[3].download_button(i18n.tr("Template: per-request CSV"), (S.SAMPLES_DIR / "template_requests.csv").read_bytes(),
                         file_name="template_requests.csv", mime="text/csv", key="traffic_template_requests")
    c[4].download_button(i18n.tr("Template: mix table CSV"), (S.SAMPLES_DIR / "template_mix.csv").read_bytes(),
                         file_name="template_mix.csv", mime="text/csv", key="traffic_template_mix")
    _handle_upload()
    prof = st.session_state.get(S.PROFILE_KEY)
    if prof is None:
        st.info(i18n.tr("No traffic profile loaded: every page uses the sidebar's single workload and language. Load a "
                "sample or upload your export."))
        return
    origin = st.session_state.get(S.PROFILE_ORIGIN_KEY) or ""
    st.subheader(i18n.tr("Profile in use: {name}", name=plain(prof.name)))
    st.caption(i18n.tr("Origin: {origin}. It drives the workload and language mix, the batch cap and the monthly "
               "volume on every page (unless 'the number I type' is picked in the sidebar).", origin=plain(origin)))
    if st.button(i18n.tr("Stop using this profile"), key="traffic_clear"):
        S.clear_profile()
        st.rerun()
    _summary(prof)


if __name__ == "__main__":
    render()
