"""Columns -> roles: the roles a per-request file or a mix table needs, the synonyms known exports use for them,
and the mapping of a file's columns onto roles (a recognised export first, then synonyms, then the user's
choices on the Traffic page)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from profiles.traffic.errors import clip, fail, listing
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Source
from profiles.traffic.sources.exports import KNOWN_FORMATS

REQUEST_REQUIRED = ("timestamp", "prompt_tokens", "output_tokens")
REQUEST_OPTIONAL = ("workload", "language", "weight", "prompt_text", "model", "endpoint", "end_time")
ROLES = REQUEST_REQUIRED + REQUEST_OPTIONAL
MIX_REQUIRED = ("workload",)
MIX_VOLUME = ("share", "monthly_output_tokens")
MIX_OPTIONAL = ("language", "prompt_tokens", "output_tokens")

# Normalised column names (lower case, spaces/hyphens -> underscores) per role, in order of preference.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamp", "starttime", "start_time", "aggregation_timestamp", "created_at", "created",
                  "request_time", "arrival_time", "request_start_time", "time", "datetime", "date", "ts"),
    "end_time": ("end_time", "endtime"),
    "prompt_tokens": ("prompt_tokens", "input_tokens", "contexttokens", "context_tokens", "request_tokens",
                      "n_context_tokens_total", "num_prompt_tokens", "prompt_len", "input_len", "prompttokens",
                      "inputtokens", "tokens_in", "prompt_token_count", "input_length"),
    "output_tokens": ("output_tokens", "completion_tokens", "generatedtokens", "generated_tokens",
                      "response_tokens", "n_generated_tokens_total", "num_output_tokens", "output_len",
                      "completiontokens", "outputtokens", "tokens_out", "completion_token_count", "output_length"),
    "weight": ("weight", "n_requests", "num_model_requests", "num_requests", "request_count", "requests"),
    "workload": ("workload", "task", "use_case", "usecase"),
    "language": ("language", "lang"),
    "prompt_text": ("prompt_text", "prompt", "input_text", "messages"),
    "model": ("model", "model_name", "snapshot_id", "model_id", "model_group"),
    "endpoint": ("endpoint", "call_type", "api_base", "route", "operation", "log_type", "request_type", "path"),
}
# Columns whose values name a model group, a project, an application or a route (normalised names, most telling
# first): offered as the workload of a file without a workload column (FileInfo.workload_candidates). LiteLLM's
# spend logs carry model_group (the proxy's model alias) and model; OpenAI's usage export, grouped by project or
# model, carries project_id and model; gateways name a route or a deployment.
WORKLOAD_CANDIDATES = ("model_group", "project_id", "project_name", "project", "application", "app_name", "app",
                       "route", "route_name", "deployment", "deployment_name", "deployment_id", "service", "feature",
                       "model", "model_name", "model_id", "endpoint")
ROLE_LABELS = {
    "timestamp": "timestamp (request start)", "prompt_tokens": "prompt tokens", "output_tokens": "output tokens",
    "workload": "workload", "language": "language", "weight": "weight (requests per row)",
    "prompt_text": "prompt text", "model": "model", "endpoint": "endpoint", "end_time": "end time (buckets)",
}



def norm(name: Any) -> str:
    """Column name as matched: stripped, lower case, spaces and hyphens as underscores."""
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


@dataclass(frozen=True)
class FileInfo:
    """What an upload holds, read from its header or metadata only (for the Traffic page's mapping UI)."""

    fmt: str
    columns: tuple[str, ...]
    kind: Literal["requests", "mix", "unknown"]
    format_label: str  # recognised export, "columns matched by name", or "" when required columns are missing
    mapping: tuple[tuple[str, str], ...]  # (role, file column) chosen
    missing: tuple[str, ...]  # required roles without a column
    totals: bool
    delimiter: str | None = None
    decimal: str | None = None
    notes: tuple[str, ...] = ()
    # file columns that look like a workload (a model group, project or route; WORKLOAD_CANDIDATES), most telling
    # first; empty when the file has a workload column
    workload_candidates: tuple[str, ...] = ()

    @property
    def roles(self) -> dict[str, str]:
        return dict(self.mapping)


def _check_duplicates(columns: list[str]) -> None:
    seen: dict[str, str] = {}
    for c in columns:
        k = norm(c)
        if k in seen:
            raise fail(f"distinct column names; '{clip(seen[k], 40)}' and '{clip(c, 40)}' are the same name once "
                        "case, spaces and hyphens are ignored: rename or drop one", column=c)
        seen[k] = c


def map_columns(src: Source, options: ParseOptions) -> FileInfo:
    cols = src.columns
    _check_duplicates(cols)
    by_norm = {norm(c): c for c in cols}
    known = None
    if src.label is None:
        keys = set(by_norm)
        known = next((k for k in KNOWN_FORMATS if k.columns <= keys), None)
    roles: dict[str, str] = {}
    for role in ROLES:
        pref = dict(known.roles).get(role) if known else None
        if pref and pref in by_norm:
            roles[role] = by_norm[pref]
            continue
        for syn in SYNONYMS[role]:
            if syn in by_norm and by_norm[syn] not in roles.values():
                roles[role] = by_norm[syn]
                break
    for role, col in options.columns:
        if role not in ROLES:
            raise fail(f"a role among {', '.join(ROLES)}", value=role)
        if col == "":
            roles.pop(role, None)
            continue
        if col not in cols:
            match = by_norm.get(norm(col))
            if match is None:
                raise fail(f"a column of the file for {ROLE_LABELS[role]}; the file's columns are: {listing(cols)}",
                            column=col)
            col = match
        roles[role] = col
    totals = known.totals if known else False
    if options.totals is not None:
        totals = options.totals
    mix_cols = [c for c in MIX_VOLUME if c in by_norm]
    if "timestamp" not in roles and mix_cols:
        mapping = {"workload": by_norm.get("workload"), "language": by_norm.get("language"),
                   mix_cols[0]: by_norm[mix_cols[0]], "prompt_tokens": by_norm.get("prompt_tokens"),
                   "output_tokens": by_norm.get("output_tokens")}
        mapping = {k: v for k, v in mapping.items() if v is not None}
        missing = tuple(r for r in MIX_REQUIRED if r not in mapping)
        return FileInfo(src.fmt, tuple(cols), "mix", "Mix table (this app's template)" if not missing else "",
                        tuple(mapping.items()), missing, False, src.delimiter, src.decimal, src.notes)
    missing = tuple(r for r in REQUEST_REQUIRED if r not in roles)
    if src.label:
        label = src.label
    elif known and not missing:
        label = known.label
    else:
        label = "" if missing else "Columns matched by name"
    kind = "requests" if not missing else "unknown"
    used = {roles[r] for r in REQUEST_REQUIRED + ("weight", "end_time", "prompt_text") if r in roles}
    candidates = () if "workload" in roles else tuple(
        by_norm[c] for c in WORKLOAD_CANDIDATES if c in by_norm and by_norm[c] not in used)
    return FileInfo(src.fmt, tuple(cols), kind, label, tuple((r, roles[r]) for r in ROLES if r in roles), missing,
                    totals, src.delimiter, src.decimal, src.notes, candidates)

