"""Traffic profiles: a customer's traffic export -> the workload mix, volume and arrival shape the planner uses.

Files: CSV (any of , ; tab | as separator, decimal point or comma; sniffed), JSONL, a JSON array of records,
Parquet, Excel .xlsx (openpyxl, read-only streaming), and the result JSON of `vllm bench serve` and guidellm.

Two shapes are accepted (column names are matched case-insensitively; spaces and hyphens become underscores):

* per-request rows: a timestamp, prompt tokens and output tokens per request, optionally a workload, a
  language (default ``english``), a weight (requests a sampled row stands for) and text/model/endpoint
  columns that workload rules may read (never stored). Synonyms map known exports onto these roles
  (``SYNONYMS``); known exports are recognised and named (``KNOWN_FORMATS``: Azure LLM inference trace,
  BurstGPT, LiteLLM spend log, OpenAI usage export, vllm bench serve, guidellm). Aggregated exports (OpenAI
  usage) carry token *totals* over a request count per time bucket.
* an aggregated mix table: ``workload`` and one of ``share`` (share of output tokens) or
  ``monthly_output_tokens``, optionally ``language``, ``prompt_tokens`` and ``output_tokens`` (means per
  request; default: the workload's typical lengths).

Files without a workload column get one from `WorkloadRule`: one workload for the whole file, a column whose
values map to workloads, or substring rules on prompt text / model / endpoint (`ParseOptions`).

Volume: the observed output-token rate (tokens / first-to-last span) x seconds in an average month, from any
span longer than zero, with a 95 % interval and a sentence saying what it rests on (`volume_note`). The daily
shape comes from the trace when it spans a day or more (`hourly_arrivals`), else from a shape the user picks.

Bounded ingestion: size, rows and columns are checked from headers and metadata before anything is decoded
(Parquet footer: rows, columns, uncompressed bytes incl. dictionary pages; CSV: the header line's field
count; xlsx: the zip directory); only the columns the profile needs are decoded; a cell holds at most
`MAX_FIELD_CHARS` characters. Every error names row, column and value (`TrafficError.problems`) in at most
`MAX_MESSAGE_CHARS` characters. A profile is returned only when every number in it is finite and sane.
"""

from __future__ import annotations

import codecs
import io
import json
import math
import re
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from planner import fleet

MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # 100 MiB: about 2 million per-request CSV rows (= server.maxUploadSize)
MAX_ROWS = 2_000_000
MAX_COLUMNS = 1_000  # the widest known export (LiteLLM spend logs) has ~40 columns
# Python's csv module default field limit; ~32k tokens of prompt text. Longer cells are not traffic metadata.
MAX_FIELD_CHARS = 131_072
MAX_HEADER_BYTES = 1 << 20  # the header line (CSV) or first record (JSONL) must end within 1 MiB
# Parquet: bytes the selected columns may take once decompressed (footer metadata, dictionary pages included).
MAX_DECODED_BYTES = 512 * 1024 * 1024
MAX_PARQUET_FOOTER_BYTES = 16 * 1024 * 1024
MAX_XLSX_XML_BYTES = 1024 * 1024 * 1024  # uncompressed sheet + shared-strings XML (zip-bomb guard)
MAX_JSON_DOC_BYTES = 32 * 1024 * 1024  # a single JSON document (guidellm report, JSON array) is parsed whole
CSV_BLOCK_BYTES = 1 << 20  # CSV is decoded one 1 MiB block at a time; a longer row is refused
# No served model has a context above ~10M tokens; a request beyond 1,048,576 (2^20) tokens is a unit
# error (characters or bytes instead of tokens), not traffic.
MAX_TOKENS_PER_REQUEST = 1_048_576
MAX_WEIGHT = 1_000_000  # one sampled row standing for more than a million requests is a typo
MAX_BUCKET_REQUESTS = 1e10  # aggregated exports: requests in one time bucket
MIN_TIMESTAMP = pd.Timestamp("2000-01-01", tz="UTC")
MAX_TIMESTAMP = pd.Timestamp("2100-01-01", tz="UTC")
DAYS_PER_MONTH = 365.25 / 12.0  # 30.44: average Gregorian month
SECONDS_PER_MONTH = DAYS_PER_MONTH * 86400.0
MAX_PROBLEMS = 20  # problems listed per upload; the count of the rest is given
MAX_MESSAGE_CHARS = 500  # one problem's text, whatever the file holds
MAX_VALUE_CHARS = 60  # a cell value quoted in a problem
Z95 = 1.959964  # two-sided 95 % normal quantile

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
                      "inputtokens", "tokens_in", "prompt_token_count"),
    "output_tokens": ("output_tokens", "completion_tokens", "generatedtokens", "generated_tokens",
                      "response_tokens", "n_generated_tokens_total", "num_output_tokens", "output_len",
                      "completiontokens", "outputtokens", "tokens_out", "completion_token_count"),
    "weight": ("weight", "n_requests", "num_model_requests", "num_requests", "request_count", "requests"),
    "workload": ("workload", "task", "use_case", "usecase"),
    "language": ("language", "lang"),
    "prompt_text": ("prompt_text", "prompt", "input_text", "messages"),
    "model": ("model", "model_name", "snapshot_id", "model_id", "model_group"),
    "endpoint": ("endpoint", "call_type", "api_base", "route", "operation", "log_type", "request_type", "path"),
}
ROLE_LABELS = {
    "timestamp": "timestamp (request start)", "prompt_tokens": "prompt tokens", "output_tokens": "output tokens",
    "workload": "workload", "language": "language", "weight": "weight (requests per row)",
    "prompt_text": "prompt text", "model": "model", "endpoint": "endpoint", "end_time": "end time (buckets)",
}


@dataclass(frozen=True)
class KnownFormat:
    """An export recognised by its columns (normalised names, all required)."""

    label: str
    columns: frozenset[str]
    roles: tuple[tuple[str, str], ...] = ()  # role -> normalised column, where SYNONYMS' order would differ
    totals: bool = False  # token columns are totals per row over `weight` requests (time-bucketed export)


KNOWN_FORMATS = (
    KnownFormat("Azure LLM inference trace", frozenset({"timestamp", "contexttokens", "generatedtokens"})),
    KnownFormat("BurstGPT", frozenset({"timestamp", "model", "request_tokens", "response_tokens"}),
                roles=(("endpoint", "log_type"),)),
    KnownFormat("LiteLLM spend log", frozenset({"starttime", "model", "prompt_tokens", "completion_tokens"}),
                roles=(("timestamp", "starttime"),)),
    KnownFormat("OpenAI usage export", frozenset({"n_context_tokens_total", "n_generated_tokens_total"}),
                roles=(("weight", "n_requests"),), totals=True),
    KnownFormat("OpenAI usage export", frozenset({"input_tokens", "output_tokens", "num_model_requests"}),
                roles=(("weight", "num_model_requests"), ("timestamp", "start_time")), totals=True),
    KnownFormat("Per-request rows (this app's template)",
                frozenset({"timestamp", "workload", "prompt_tokens", "output_tokens"})),
)
VLLM_BENCH = "vllm bench serve result (per request)"
GUIDELLM = "guidellm benchmark report (per request)"

# Daily shapes for traces shorter than a day (hour of day 0..23; normalised to a mean of 1 where used).
# The daily shapes live with the fleet that uses them (one place): planner.fleet.SHAPES.
SHAPES = fleet.SHAPES
SHAPE_LABELS = fleet.SHAPE_LABELS

Format = Literal["csv", "jsonl", "json", "parquet", "xlsx"]


# ---------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------

def _short(v: Any) -> str:
    """repr of a cell value, cut to MAX_VALUE_CHARS (a 50 MB binary line is never echoed)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v[: MAX_VALUE_CHARS + 1])
        r = repr(b[:MAX_VALUE_CHARS])
        return r + (f"... ({len(v):,} bytes)" if len(v) > MAX_VALUE_CHARS else "")
    if isinstance(v, str) and len(v) > MAX_VALUE_CHARS:
        return repr(v[:MAX_VALUE_CHARS]) + f"... ({len(v):,} characters)"
    r = repr(v)
    return r if len(r) <= MAX_VALUE_CHARS + 2 else r[:MAX_VALUE_CHARS] + "..."


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Problem:
    """One bad cell (or a whole-file problem when row/column are None)."""

    row: int | None  # 1-based data row (the header is not counted)
    column: str | None
    value: Any
    expected: str
    line: int | None = None  # 1-based line of the file (CSV, JSONL) or sheet row (xlsx)
    line_kind: str = "line"

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row:,}" if self.row >= 10_000 else f"row {self.row}")
            if self.line:
                where[-1] += f" ({self.line_kind} {self.line})"
        if self.column is not None:
            where.append(f"column '{_cut(str(self.column), 80)}'")
        head = ", ".join(where)
        val = "" if self.value is None and self.row is None else f"value {_short(self.value)}: "
        text = f"{head}: {val}expected {self.expected}" if head else f"{val}expected {self.expected}"
        return _cut(text)


class TrafficError(ValueError):
    """An upload that cannot become a profile; `problems` lists each bad row / column / value."""

    def __init__(self, problems: list[Problem], total: int | None = None, at_least: bool = False):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        self.at_least = at_least  # the count stopped early: total is a lower bound
        more = (f" (and {'at least ' if at_least else ''}{self.total - 1:,} more problems)" if self.total > 1
                else "")
        super().__init__(f"{problems[0]}{more}")


def _fail(expected: str, *, row: int | None = None, column: str | None = None, value: Any = None,
          line: int | None = None, line_kind: str = "line") -> TrafficError:
    return TrafficError([Problem(row, column, value, expected, line, line_kind)])


def _list(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(_cut(str(n), 40) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ---------------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadRule:
    """How rows get a workload.

    mode "auto": the file's workload column; without one, one workload for the whole file: `workload` if set,
    else guessed from the file name (..._code.csv -> code), else chat (stated in the profile's warnings).
    mode "fixed": `workload` for every row.
    mode "map": the values of `column` map to workloads through `mapping` ((value, workload) pairs, compared
    case-insensitively); a value that is itself a workload name maps to it; the rest get `workload` (or chat).
    mode "rules": `rules` are (column, text, workload): the first rule whose column contains the text
    (case-insensitive substring; column may be a role such as prompt_text, model or endpoint, or a file
    column); rows no rule matches get `workload` (or chat).
    """

    mode: Literal["auto", "fixed", "map", "rules"] = "auto"
    workload: str = ""
    column: str = ""
    mapping: tuple[tuple[str, str], ...] = ()
    rules: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ParseOptions:
    """How to read an upload; the defaults recognise known exports and sniff the rest."""

    columns: tuple[tuple[str, str], ...] = ()  # (role, file column); file column "" = the role has none
    workload: WorkloadRule = WorkloadRule()
    timestamp_unit: Literal["auto", "s", "ms", "us", "ns"] = "auto"  # numeric timestamps; auto by magnitude
    delimiter: str = ""  # CSV: "" sniffs; else one of , ; \t |
    decimal: str = ""  # CSV: "" sniffs; "." or ","
    totals: bool | None = None  # token columns are totals over `weight` requests per row; None = by format
    sheet: str = ""  # xlsx: sheet name; "" = the first sheet

    def column_for(self, role: str) -> str | None:
        for r, c in self.columns:
            if r == role:
                return c
        return None


DEFAULT_OPTIONS = ParseOptions()


# ---------------------------------------------------------------------------------------------------
# The profile
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    """One (workload, language) slice of the traffic."""

    workload: str
    language: str
    requests: float  # weighted request count in the file (or per month for a mix table)
    output_token_share: float  # share of all output tokens, 0..1
    mean_prompt_tokens: float
    mean_output_tokens: float


@dataclass(frozen=True)
class HourlyArrivals:
    """Arrivals by hour of day (0..23, UTC or the file's clock) for the fleet: requests/s and the mean prompt
    and output tokens of the requests arriving in that hour. Over a month, sum_h requests_per_s[h] x 3600 x
    mean_output_tokens[h] x 30.44 days is the monthly output volume (exactly when the trace spans whole days).

    source: "trace" (measured per hour; the trace spans a day or more) or the name of a SHAPES entry scaled to
    the trace's mean rate (shorter traces and mix tables with a monthly volume)."""

    requests_per_s: tuple[float, ...]
    mean_prompt_tokens: tuple[float, ...]
    mean_output_tokens: tuple[float, ...]
    source: str
    note: str


@dataclass(frozen=True)
class TrafficProfile:
    name: str
    kind: Literal["requests", "mix"]
    fmt: str
    segments: tuple[Segment, ...]
    rows: int
    requests: float  # weighted
    output_tokens: float  # weighted total in the file
    span_days: float | None  # first to last timestamp (plus one bucket for aggregated exports)
    monthly_output_tokens: float | None  # extrapolated from the span, or summed from a mix table
    # Request arrival rate per minute bucket (weighted), requests/s: p50, p90, peak. For Little's law.
    arrival_rate_per_s: tuple[float, float, float] | None
    context_tokens_quantiles: tuple[float, float, float, float]  # p10, p50, p90, p99 of prompt+output
    context_hist_edges: tuple[float, ...]
    context_hist_counts: tuple[float, ...]
    per_hour_requests: tuple[float, ...]  # weighted requests by hour of day (UTC), 24 values
    had_prompt_text: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)
    source_format: str = ""  # the recognised export ("Azure LLM inference trace", ...) or how columns matched
    column_map: tuple[tuple[str, str], ...] = ()  # (role, file column) used
    span_s: float | None = None
    monthly_output_tokens_ci95: tuple[float, float] | None = None  # 95 % interval of the monthly volume
    volume_note: str = ""  # where the monthly volume comes from, its span and its uncertainty, in words
    # Measured per hour of day when the trace spans >= 1 day (else None): requests/s and mean lengths.
    hour_requests_per_s: tuple[float, ...] | None = None
    hour_mean_prompt_tokens: tuple[float, ...] | None = None
    hour_mean_output_tokens: tuple[float, ...] | None = None
    # Requests/s per minute from the first timestamp, for traces shorter than a day (else None).
    minute_requests_per_s: tuple[float, ...] | None = None
    time_note: str = ""  # how timestamps were read (unit, time zone, relative)
    workload_note: str = ""  # where each row's workload came from (column, chosen, guessed, mapped, rules)

    def _shares(self, attr: str) -> dict[str, float]:
        """Output-token share per value of a segment attribute (workload or language)."""
        out: dict[str, float] = {}
        for s in self.segments:
            key = getattr(s, attr)
            out[key] = out.get(key, 0.0) + s.output_token_share
        return out

    @property
    def workload_shares(self) -> dict[str, float]:
        return self._shares("workload")

    @property
    def language_shares(self) -> dict[str, float]:
        return self._shares("language")

    @property
    def spans_a_day(self) -> bool:
        return self.hour_requests_per_s is not None

    def mix_key(self) -> tuple[tuple[str, str, float, float, float], ...]:
        """Hashable summary the planner uses: (workload, language, share, prompt, output) per segment."""
        return tuple((s.workload, s.language, round(s.output_token_share, 6), round(s.mean_prompt_tokens, 1),
                      round(s.mean_output_tokens, 1)) for s in self.segments)

    def concurrency(self, tpot_ms: float, quantile: int = 1) -> float | None:
        """Sequences in flight (Little's law: L = arrival rate x time in system), with the time in system
        taken as mean output tokens x TPOT (decode dominates). quantile: 0 p50, 1 p90, 2 peak minute."""
        if self.arrival_rate_per_s is None:
            return None
        mean_out = self.output_tokens / max(self.requests, 1e-12)
        return self.arrival_rate_per_s[quantile] * mean_out * tpot_ms / 1e3

    def hourly_arrivals(self, shape: str = "flat") -> HourlyArrivals | None:
        """Requests/s and mean prompt/output tokens per hour of day (24 values) for the fleet.

        From the trace itself when it spans a day or more (`shape` is then ignored); otherwise the trace's
        mean arrival rate (requests / span; for a mix table, monthly requests / seconds per month) spread
        over the day by SHAPES[shape], normalised so the daily mean rate is unchanged. None when the profile
        has no rate (a mix table of shares only, or every timestamp equal)."""
        mean_p = sum(s.requests * s.mean_prompt_tokens for s in self.segments) / max(self.requests, 1e-12)
        mean_o = self.output_tokens / max(self.requests, 1e-12)
        if self.kind == "mix":
            mean_o = sum(s.requests * s.mean_output_tokens for s in self.segments) / max(self.requests, 1e-12)
        if self.hour_requests_per_s is not None:
            return HourlyArrivals(self.hour_requests_per_s, self.hour_mean_prompt_tokens or (mean_p,) * 24,
                                  self.hour_mean_output_tokens or (mean_o,) * 24, "trace",
                                  f"measured per hour of day over {_fmt_span(self.span_s or 0)}")
        if shape not in SHAPES:
            raise ValueError(f"shape={shape!r} not known: one of {', '.join(SHAPES)}")
        if self.kind == "mix":
            if not self.monthly_output_tokens:
                return None
            mean_rate = self.requests / SECONDS_PER_MONTH
            basis = "the mix table's monthly volume"
        else:
            if not self.span_s:
                return None
            mean_rate = self.requests / self.span_s
            basis = f"the trace's mean rate over {_fmt_span(self.span_s)}"
        w = np.asarray(SHAPES[shape], float)
        w = w / w.mean()
        return HourlyArrivals(tuple(float(x) for x in mean_rate * w), (mean_p,) * 24, (mean_o,) * 24, shape,
                              f"{basis}, spread over the day as '{SHAPE_LABELS[shape]}' (the file does not "
                              "show a whole day)")

    def minute_arrivals(self) -> tuple[float, ...] | None:
        """Requests/s per minute from the first timestamp (traces shorter than a day), else None."""
        return self.minute_requests_per_s


def single_segment_profile(workload: str, language: str, catalog) -> tuple[tuple[str, str, float, float, float], ...]:
    """The mix key of 'no profile': one workload and language with its typical lengths."""
    w = catalog.workloads[workload]
    return ((workload, language, 1.0, float(w.prompt_tokens), float(w.output_tokens)),)


# ---------------------------------------------------------------------------------------------------
# Sources: header / metadata first (bounded), then only the selected columns
# ---------------------------------------------------------------------------------------------------

def norm(name: Any) -> str:
    """Column name as matched: stripped, lower case, spaces and hyphens as underscores."""
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


@dataclass
class _Source:
    fmt: Format
    columns: list[str]  # the file's column names, in order
    read: Callable[[list[str]], pa.Table]  # the selected columns (bounded)
    line_of: Callable[[list[int]], dict[int, int]] = lambda rows: {}  # 1-based data rows -> file lines
    line_kind: str = "line"
    delimiter: str | None = None
    decimal: str | None = None
    label: str | None = None  # a recognised result file (vllm bench, guidellm): the columns are synthetic
    notes: tuple[str, ...] = ()
    string_cols: set[str] = field(default_factory=set)  # columns to read as text (CSV: no type inference)
    stream: Callable[[list[str]], Iterable[pa.Table]] | None = None  # bounded pieces, in order (CSV)


def detect_format(name: str, data: bytes) -> Format:
    low = name.lower()
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    if low.endswith((".xlsx", ".xlsm")):
        return "xlsx"
    if low.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if low.endswith(".json"):
        return "json"
    if low.endswith((".csv", ".txt", ".tsv")):
        return "csv"
    if data[:4] == b"PAR1":
        return "parquet"
    if data[:4] == b"PK\x03\x04":
        return "xlsx"
    head = data[:64].lstrip()
    if head[:1] in (b"{", b"["):
        return "json"
    return "csv"


def _check_utf8(buf: bytes, start: int, delimiter: str = ",", header: list[str] | None = None) -> None:
    """Refuse text that is not UTF-8, naming line and column, without decoding the file into memory."""
    if buf.isascii():
        return
    chunk = 1 << 20
    pos = start
    while pos < len(buf):
        end = min(pos + chunk, len(buf))
        while end < len(buf) and (buf[end] & 0xC0) == 0x80:  # do not split a multi-byte sequence
            end += 1
        try:
            codecs.utf_8_decode(buf[pos:end], "strict", True)
        except UnicodeDecodeError as exc:
            bad = pos + exc.start
            line_start = buf.rfind(b"\n", 0, bad) + 1
            line = buf.count(b"\n", start, bad) + 1
            column = None
            if header:
                idx = buf[line_start:bad].count(delimiter.encode())
                column = header[idx] if idx < len(header) else None
            raise _fail(f"UTF-8 text (byte {bad:,} is not UTF-8; re-export the file as UTF-8)",
                        row=line - 1 if line > 1 else None, column=column, value=buf[bad:bad + 4],
                        line=line) from None
        pos = end


# ---- CSV ------------------------------------------------------------------------------------------

DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _sniff_delimiter(header: bytes, sample: bytes) -> str:
    """The candidate with the most occurrences in the header line, preferring one that also appears the same
    number of times on the next lines (comma on ties)."""
    lines = [ln for ln in sample.split(b"\n")[1:6] if ln.strip()]
    best, best_score = ",", (0, 0)
    for d in DELIMITERS:
        n = header.count(d.encode())
        consistent = sum(1 for ln in lines if ln.count(d.encode()) == n)
        score = (n > 0 and (consistent == len(lines) or not lines), n)
        if score > best_score:
            best, best_score = d, score
    return best


def _sniff_decimal(sample: bytes, delimiter: str) -> str:
    if delimiter == ",":
        return "."
    d = re.escape(delimiter.encode())
    comma = re.search(rb"(?:^|" + d + rb")\"?-?\d+,\d+\"?(?:" + d + rb"|\r?$)", sample, re.M)
    point = re.search(rb"(?:^|" + d + rb")\"?-?\d+\.\d+(?:[eE][-+]?\d+)?\"?(?:" + d + rb"|\r?$)", sample, re.M)
    return "," if comma and not point else "."


def _split_row(row: bytes, delim: bytes) -> list[tuple[int, int]]:
    """Field spans of one CSV row (quote-aware, without copying the fields)."""
    if b'"' not in row:
        spans, pos = [], 0
        while True:
            nxt = row.find(delim, pos)
            if nxt < 0:
                spans.append((pos, len(row)))
                return spans
            spans.append((pos, nxt))
            pos = nxt + 1
    spans, start, quoted = [], 0, False
    for m in re.finditer(b'["' + re.escape(delim) + b"]", row):
        if m.group() == b'"':
            quoted = not quoted
        elif not quoted:
            spans.append((start, m.start()))
            start = m.end()
    spans.append((start, len(row)))
    return spans


def _csv_rows(buf: bytes, start: int, delim: bytes, quoted: bool):
    """Yield (data row, first line, row bytes) from `start` (the header line: row 0); empty lines are skipped
    as pyarrow does. A quoted cell may span lines (its quote count stays odd until it closes)."""
    pos, n = start, len(buf)
    line = buf.count(b"\n", 0, start) + 1
    row = -1
    while pos < n:
        first_line = line
        end = buf.find(b"\n", pos)
        end = n if end < 0 else end
        if quoted:
            quotes = buf.count(b'"', pos, end)
            while quotes % 2 and end < n:
                nxt = buf.find(b"\n", end + 1)
                nxt = n if nxt < 0 else nxt
                quotes += buf.count(b'"', end + 1, nxt)
                line += 1
                end = nxt
        raw = buf[pos:end]
        pos, line = end + 1, line + 1
        if raw in (b"", b"\r"):
            continue
        row += 1
        yield row, first_line, raw[:-1] if raw.endswith(b"\r") else raw


def _longest_line(buf: bytes, start: int) -> int:
    """Length of the longest line from `start` (numpy over 8 MiB chunks: ~0.1 s for 100 MiB)."""
    longest, prev, step = 0, start - 1, 8 << 20
    view = np.frombuffer(buf, dtype=np.uint8)
    for a in range(start, len(buf), step):
        nl = np.flatnonzero(view[a:a + step] == 10) + a
        if nl.size:
            longest = max(longest, int(nl[0] - prev - 1), int(np.diff(nl).max() - 1) if nl.size > 1 else 0)
            prev = int(nl[-1])
    return max(longest, len(buf) - prev - 1)


def _csv_source(data: bytes, options: ParseOptions) -> _Source:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while start < len(data) and data[start:start + 1] in (b"\n", b"\r"):  # leading empty lines
        start += 1
    if not data[start:start + MAX_HEADER_BYTES].strip() and not data[start:].strip():
        raise _fail("a non-empty file (this one is only blank)")
    nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    if nl < 0 and len(data) - start > MAX_HEADER_BYTES:
        raise _fail(f"a header line of at most {MAX_HEADER_BYTES // 2**20} MiB (the first line has no line break "
                    f"in its first {MAX_HEADER_BYTES // 2**20} MiB: is this a text table?)", line=1)
    header = data[start: nl if nl >= 0 else len(data)]
    header = header[:-1] if header.endswith(b"\r") else header
    sample = data[start: start + (64 << 10)]
    if options.delimiter and options.delimiter not in DELIMITERS:
        raise _fail(f"a separator among {', '.join(map(repr, DELIMITERS))}", value=options.delimiter)
    delim = options.delimiter or _sniff_delimiter(header, sample)
    n_cols = len(_split_row(header, delim.encode()))
    if n_cols > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the header line has {n_cols:,})", line=1)
    try:
        head_text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail("a UTF-8 header line", value=header[exc.start:exc.start + 4], line=1) from None
    if '"' in head_text:
        names = [header[a:b].decode("utf-8").strip() for a, b in _split_row(header, delim.encode())]
        names = [n[1:-1].replace('""', '"') if len(n) >= 2 and n[0] == n[-1] == '"' else n for n in names]
    else:
        names = head_text.split(delim)
    names = [n.strip() or f"column {i + 1}" for i, n in enumerate(names)]
    _check_utf8(data, start, delim, names)
    decimal = options.decimal or _sniff_decimal(sample, delim)
    quoted = b'"' in data  # memchr: fast; quoted cells may hold line breaks
    header_line = data.count(b"\n", 0, start) + 1
    if _longest_line(data, start) > MAX_FIELD_CHARS:
        _locate_csv_error(data, start, delim, names, quoted, long_only=True)

    def line_of(rows: list[int]) -> dict[int, int]:
        want = set(rows)
        if not want:
            return {}
        if not quoted and b"\n\n" not in data[start:] and b"\n\r\n" not in data[start:]:
            return {r: r + header_line for r in want}
        out, top = {}, max(want)
        for row, line, _raw in _csv_rows(data, start, delim.encode(), quoted):
            if row in want:
                out[row] = line
            if row >= top:
                break
        return out

    def stream(cols: list[str]) -> Iterable[pa.Table]:
        # Every selected column is read as text: the validation parses numbers and times itself and names
        # each bad cell (pyarrow's type inference on the first block would fail later blocks without a row).
        try:
            reader = pacsv.open_csv(
                pa.BufferReader(pa.py_buffer(data).slice(start)),
                read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=CSV_BLOCK_BYTES),
                parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=quoted),
                convert_options=pacsv.ConvertOptions(
                    include_columns=cols, column_types={c: pa.string() for c in cols}, null_values=[""],
                    strings_can_be_null=True, quoted_strings_can_be_null=True))
            for batch in reader:
                yield pa.Table.from_batches([batch])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            _locate_csv_error(data, start, delim, names, quoted)
            raise _fail(f"a {DELIMITERS[delim]}-separated table ({_cut(str(exc), 200)})") from None

    return _Source("csv", names, lambda cols: pa.concat_tables(list(stream(cols))), line_of, delimiter=delim,
                   decimal=decimal, stream=stream)


def _locate_csv_error(buf: bytes, start: int, delim: str, names: list[str], quoted: bool,
                      long_only: bool = False) -> None:
    """pyarrow does not say where a ragged row or an oversized cell is; find it (error path only)."""
    d = delim.encode()
    for row, line, raw in _csv_rows(buf, start, d, quoted):
        if long_only and len(raw) <= MAX_FIELD_CHARS:
            continue
        spans = _split_row(raw, d)
        for i, (a, b) in enumerate(spans):
            if b - a > MAX_FIELD_CHARS:
                col = names[i] if i < len(names) else f"field {i + 1}"
                raise _fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters (this one has {b - a:,} bytes; only "
                            "token counts are needed: drop long text columns)", row=row or None, column=col,
                            value=raw[a:a + MAX_VALUE_CHARS].decode("utf-8", "replace"), line=line)
        if row and not long_only and len(spans) != len(names):
            hint = ""
            if len(names) == 1:
                found = [(c, n) for c, n in DELIMITERS.items() if c != delim and c.encode() in raw]
                if found:
                    hint = (f"; the file seems to be separated by {found[0][1]}s ('{found[0][0]}'), not "
                            f"{DELIMITERS[delim]}s: choose '{found[0][1]}' as the separator")
            raise _fail(f"{len(names)} {DELIMITERS[delim]}-separated field{'s' if len(names) != 1 else ''} like "
                        f"the header ({_list(names, 8)}); found {len(spans)}{hint}", row=row,
                        value=raw[:MAX_VALUE_CHARS + 1], line=line)






# ---- JSON lines / JSON documents ------------------------------------------------------------------

def _json_scalar_type(v: Any) -> pa.DataType | None:
    if isinstance(v, bool):
        return pa.bool_()
    if isinstance(v, (int, float)):
        return pa.float64()
    if isinstance(v, str):
        return pa.string()
    return None


def _records_table(records_cols: dict[str, list], cols: list[str]) -> pa.Table:
    arrays = []
    for c in cols:
        vals = records_cols[c]
        try:
            arr = pa.array(vals)
            if pa.types.is_nested(arr.type) or pa.types.is_struct(arr.type):
                raise TypeError
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            arr = pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)[:MAX_FIELD_CHARS + 1])
                            for v in vals], pa.string())
        arrays.append(arr)
    return pa.table(arrays, names=cols)


def _jsonl_source(data: bytes, options: ParseOptions) -> _Source:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while start < len(data) and data[start:start + 1] in b" \t\r\n":
        start += 1
    if start >= len(data):
        raise _fail("a non-empty file (this one is only blank)")
    nl = data.find(b"\n", start, start + MAX_HEADER_BYTES + 1)
    if nl < 0 and len(data) - start > MAX_HEADER_BYTES:
        raise _fail(f"one JSON object per line, the first within {MAX_HEADER_BYTES // 2**20} MiB", line=1)
    _check_utf8(data, start)
    first = data[start: nl if nl >= 0 else len(data)]
    try:
        rec = json.loads(first)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise _fail(f"one JSON object per line ({getattr(exc, 'msg', type(exc).__name__)})", row=1,
                    value=first[:MAX_VALUE_CHARS + 1], line=1) from None
    if not isinstance(rec, dict):
        raise _fail('a JSON object {"column": value, ...} on each line', row=1, value=first[:MAX_VALUE_CHARS + 1],
                    line=1)
    if len(rec) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} keys per record (the first has {len(rec):,})", row=1, line=1)
    names = [str(k) for k in rec]
    blank_lines = b"\n\n" in data or b"\n\r\n" in data or b"\n " in data

    def line_of(rows: list[int]) -> dict[int, int]:
        want = set(rows)
        if not want:
            return {}
        if not blank_lines and start == 0:
            return {r: r for r in want}
        out, row, line, pos, top = {}, 0, 0, 0, max(want)
        while pos < len(data) and row < top:
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            line += 1
            if data[pos:end].strip():
                row += 1
                if row in want:
                    out[row] = line
            pos = end + 1
        return out

    def read(cols: list[str]) -> pa.Table:
        schema = {c: _json_scalar_type(rec.get(c)) for c in cols}
        if all(t is not None for t in schema.values()):
            try:
                return pajson.read_json(
                    pa.BufferReader(pa.py_buffer(data).slice(start)),
                    read_options=pajson.ReadOptions(block_size=16 << 20),
                    parse_options=pajson.ParseOptions(explicit_schema=pa.schema(list(schema.items())),
                                                      unexpected_field_behavior="ignore"))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        return _jsonl_slow(data, start, cols)

    return _Source("jsonl", names, read, line_of)


def _jsonl_slow(data: bytes, start: int, cols: list[str]) -> pa.Table:
    """Line by line: mixed types per column, or a bad line to name. Keeps only the selected keys."""
    out: dict[str, list] = {c: [] for c in cols}
    row, pos, line = 0, start, 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        raw = data[pos:end]
        pos = end + 1
        line += 1
        if not raw.strip():
            continue
        row += 1
        if row > MAX_ROWS:
            raise _fail(f"at most {MAX_ROWS:,} rows")
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
            raise _fail(f"one JSON object per line ({getattr(exc, 'msg', type(exc).__name__)})", row=row,
                        value=raw[:MAX_VALUE_CHARS + 1], line=line) from None
        if not isinstance(rec, dict):
            raise _fail('a JSON object {"column": value, ...}', row=row, value=raw[:MAX_VALUE_CHARS + 1], line=line)
        for c in cols:
            v = rec.get(c)
            if isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                raise _fail(f"a value of at most {MAX_FIELD_CHARS:,} characters ({len(v):,})", row=row, column=c,
                            value=v, line=line)
            out[c].append(v)
    return _records_table(out, cols)


_NUM_LIST = re.compile(rb"\s*\[([-+0-9.eE,\s]*)\]")


def _bench_array(data: bytes, key: bytes) -> np.ndarray | None:
    """A numeric JSON array under `key` in a vllm bench result, read without parsing the whole document
    (generated texts can be large). A key inside a string value is escaped (\\") and not matched."""
    m = re.search(rb'(?<!\\)"' + key + rb'"\s*:', data)
    if not m:
        return None
    lm = _NUM_LIST.match(data, m.end())
    if not lm:
        return None
    body = lm.group(1).strip()
    if not body:
        return np.zeros(0)
    try:
        return np.array([float(x) for x in body.split(b",")], float)
    except ValueError:
        return None


def _bench_scalar(data: bytes, key: bytes) -> Any:
    m = re.search(rb'(?<!\\)"' + key + rb'"\s*:\s*("(?:[^"\\]|\\.){0,200}"|[-+0-9.eE]+|null|true|false)', data)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except json.JSONDecodeError:
        return None


def _vllm_bench_source(data: bytes) -> _Source | None:
    head = data[:4096]
    if b'"input_lens"' not in data or b'"output_lens"' not in data or not head.lstrip().startswith(b"{"):
        return None
    inp, out = _bench_array(data, b"input_lens"), _bench_array(data, b"output_lens")
    if inp is None or out is None:
        return None
    if len(inp) != len(out):
        raise _fail(f"as many input_lens as output_lens ({len(inp):,} and {len(out):,})", column="output_lens")
    if len(inp) > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} requests (this result has {len(inp):,})")
    duration = _bench_scalar(data, b"duration")
    if not isinstance(duration, (int, float)) or not math.isfinite(duration) or duration <= 0:
        raise _fail("a positive 'duration' (seconds) in the vllm bench result", column="duration", value=duration)
    date = _bench_scalar(data, b"date")
    rate = _bench_scalar(data, b"request_rate")
    try:
        t0 = pd.Timestamp(pd.to_datetime(date, format="%Y%m%d-%H%M%S", utc=True)) if isinstance(date, str) else None
    except (ValueError, TypeError):
        t0 = None
    base = (t0.value / 1e9) if t0 is not None and not pd.isna(t0) else 0.0
    n = len(inp)
    # No per-request times in the result: spread the requests evenly over the run (same mean rate).
    ts = base + (np.arange(n) * (duration / max(n - 1, 1)) if n > 1 else np.zeros(n))
    tbl = pa.table({"timestamp": pa.array(ts), "prompt_tokens": pa.array(inp), "output_tokens": pa.array(out)})
    note = (f"vllm bench serve result: {n:,} requests over {duration:,.1f} s at request_rate={rate}; the file has "
            "no per-request times, so arrivals are spread evenly over the run. The rate is the benchmark's, "
            "not your production traffic's.")
    return _Source("json", list(tbl.column_names), lambda cols: tbl.select(cols), label=VLLM_BENCH,
                   notes=(note,))


def _guidellm_records(doc: Any) -> list[dict] | None:
    """Per-request records in a guidellm report: dicts carrying prompt_tokens and output_tokens (under
    benchmarks[].requests.successful, or wherever they are)."""
    found: list[dict] = []
    stack = [doc]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > 5_000_000:
            break
        if isinstance(node, dict):
            if "prompt_tokens" in node and "output_tokens" in node and not isinstance(node["output_tokens"], dict):
                found.append(node)
                continue
            for k, v in node.items():
                if k in ("errored", "incomplete"):
                    continue  # failed requests produced no (or partial) output
                stack.append(v)
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return found or None


def _json_doc_source(data: bytes, options: ParseOptions) -> _Source:
    src = _vllm_bench_source(data)
    if src is not None:
        return src
    stripped = data.lstrip()
    first_nl = stripped.find(b"\n")
    # One JSON object per line in a .json file: read as JSON lines.
    if stripped[:1] == b"{" and first_nl > 0:
        try:
            if isinstance(json.loads(stripped[:first_nl]), dict):
                return _jsonl_source(data, options)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
            pass
    if stripped[:1] == b"{" and first_nl < 0 and b'"guidellm' not in data[:65536] and b'"benchmarks"' not in data:
        return _jsonl_source(data, options)
    if len(data) > MAX_JSON_DOC_BYTES:
        raise _fail(f"a JSON document of at most {MAX_JSON_DOC_BYTES // 2**20} MiB (this one is "
                    f"{len(data) / 2**20:.1f} MiB); export JSON lines (one request per line) instead")
    _check_utf8(data, 0)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise _fail(f"a JSON document ({getattr(exc, 'msg', type(exc).__name__)})", line=line,
                    row=None) from None
    label = None
    if isinstance(doc, list):
        records = doc
        if not all(isinstance(r, dict) for r in records[:1000]):
            raise _fail('a JSON array of objects [{"column": value, ...}, ...]')
    else:
        records = _guidellm_records(doc) if isinstance(doc, dict) else None
        if records is None:
            raise _fail("JSON lines (one request per line), a JSON array of requests, a vllm bench serve result "
                        "(input_lens, output_lens) or a guidellm report")
        label = GUIDELLM
    if len(records) > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} rows (this file has {len(records):,})")
    records = [r for r in records if isinstance(r, dict)]
    if not records:
        raise _fail("at least one request record")
    names: list[str] = list(dict.fromkeys(k for r in records[:1000] for k in r))
    if len(names) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} keys per record (found {len(names):,})")
    notes: tuple[str, ...] = ()
    if label == GUIDELLM:
        tkey = next((k for k in ("start_time", "request_start_time", "first_token_time", "end_time", "timestamp")
                     if k in names), None)
        rows = {"timestamp": [r.get(tkey) if tkey else None for r in records],
                "prompt_tokens": [r.get("prompt_tokens") for r in records],
                "output_tokens": [r.get("output_tokens") for r in records]}
        tbl = _records_table(rows, ["timestamp", "prompt_tokens", "output_tokens"])
        notes = (f"guidellm report: {len(records):,} successful requests; times from '{tkey}'. The arrival "
                 "rate is the benchmark's, not your production traffic's.",)
        return _Source("json", tbl.column_names, lambda cols: tbl.select(cols), label=label, notes=notes)

    def read(cols: list[str]) -> pa.Table:
        return _records_table({c: [r.get(c) for r in records] for c in cols}, cols)

    return _Source("json", names, read, line_of=lambda rows: {})


# ---- Parquet --------------------------------------------------------------------------------------

def _parquet_source(data: bytes, options: ParseOptions) -> _Source:
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise _fail("a Parquet file (it must start and end with 'PAR1')")
    footer = int.from_bytes(data[-8:-4], "little")
    if footer > MAX_PARQUET_FOOTER_BYTES or footer > len(data) - 12:
        raise _fail(f"a Parquet footer of at most {MAX_PARQUET_FOOTER_BYTES // 2**20} MiB within the file "
                    f"(it says {footer:,} bytes)")
    try:
        pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
        md = pf.metadata
        arrow_schema = pf.schema_arrow
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError, TypeError) as exc:
        raise _fail(f"a Parquet file ({_cut(str(exc), 200)})") from None
    if md.num_rows > MAX_ROWS:
        raise _fail(f"at most {MAX_ROWS:,} rows (the file's metadata says {md.num_rows:,}); sample the log and "
                    "add a 'weight' column, or upload an aggregated mix table")
    if md.num_columns > MAX_COLUMNS or len(arrow_schema) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (this file has {md.num_columns:,})")
    names = list(arrow_schema.names)
    leaf_index: dict[str, int] = {}  # top-level column -> its leaf column; -1 when nested
    for j in range(md.num_columns):
        path = md.schema.column(j).path
        top = path.split(".")[0]
        leaf_index[top] = -1 if ("." in path or top in leaf_index) else j

    def read(cols: list[str]) -> pa.Table:
        total = 0
        for c in cols:
            f = arrow_schema.field(c)
            if pa.types.is_nested(f.type) or c not in leaf_index or leaf_index[c] < 0:
                raise _fail(f"a flat column (numbers or text), not {_cut(str(f.type), 80)}", column=c)
            j = leaf_index[c]
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                cc = rg.column(j)
                if cc.num_values > rg.num_rows:
                    raise _fail(f"at most one value per row (row group {g} says {cc.num_values:,} values for "
                                f"{rg.num_rows:,} rows)", column=c)
                total += cc.total_uncompressed_size
                # dictionary-decoded strings are kept as a dictionary + 4-byte indices (read_dictionary below)
                total += rg.num_rows * (4 if cc.physical_type == "BYTE_ARRAY" else 0)
        if total > MAX_DECODED_BYTES:
            raise _fail(f"at most {MAX_DECODED_BYTES // 2**20} MiB in the columns used once decompressed (the "
                        f"file's metadata says {total / 2**20:,.0f} MiB)")
        strings = [c for c in cols if pa.types.is_string(arrow_schema.field(c).type)
                   or pa.types.is_large_string(arrow_schema.field(c).type)
                   or pa.types.is_binary(arrow_schema.field(c).type)]
        try:
            # Strings stay dictionary-encoded: a dictionary bomb (one long string on every row) costs its
            # dictionary once plus 4 bytes a row, not its decoded size.
            return pq.read_table(pa.BufferReader(pa.py_buffer(data)), columns=cols, read_dictionary=strings or None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
            raise _fail(f"a readable Parquet file ({_cut(str(exc), 200)})") from None

    return _Source("parquet", names, read)


# ---- xlsx ------------------------------------------------------------------------------------------

def _xlsx_source(data: bytes, options: ParseOptions) -> _Source:
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - pinned in requirements.txt
        raise _fail("a CSV export (reading .xlsx needs the openpyxl package)") from None
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _fail(f"an Excel .xlsx workbook ({_cut(str(exc), 120)})") from None
    xml = sum(i.file_size for i in infos if i.filename.startswith("xl/"))
    if xml > MAX_XLSX_XML_BYTES:
        raise _fail(f"an .xlsx workbook of at most {MAX_XLSX_XML_BYTES // 2**20} MiB uncompressed (this one "
                    f"unpacks to {xml / 2**20:,.0f} MiB)")
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many kinds on a damaged workbook
        raise _fail(f"an Excel .xlsx workbook ({type(exc).__name__}: {_cut(str(exc), 120)})") from None
    if options.sheet:
        if options.sheet not in wb.sheetnames:
            raise _fail(f"a sheet named one of {_list(wb.sheetnames)}", value=options.sheet)
        ws = wb[options.sheet]
    else:
        ws = wb.worksheets[0]
    try:
        max_col = ws.max_column or 0
        max_row = ws.max_row or 0
    except Exception:  # noqa: BLE001 - a sheet without a dimension tag
        max_col = max_row = 0
    if max_col > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the sheet '{ws.title}' has {max_col:,})")
    if max_row > MAX_ROWS + 1:
        raise _fail(f"at most {MAX_ROWS:,} rows (the sheet '{ws.title}' has {max_row:,})")
    rows_iter = ws.iter_rows(values_only=True)
    header_row = 0
    header: tuple = ()
    for header in rows_iter:
        header_row += 1
        if any(v is not None and str(v).strip() for v in header):
            break
    if not header or not any(v is not None for v in header):
        raise _fail("a header row in the first sheet")
    if len(header) > MAX_COLUMNS:
        raise _fail(f"at most {MAX_COLUMNS:,} columns (the header row has {len(header):,})")
    last = max(i for i, v in enumerate(header) if v is not None and str(v).strip())
    names = [str(v).strip() if v is not None and str(v).strip() else f"column {i + 1}"
             for i, v in enumerate(header[: last + 1])]
    sheet_rows: list[int] = []
    sheet_title = ws.title

    def read(cols: list[str]) -> pa.Table:
        idx = [names.index(c) for c in cols]
        out: dict[str, list] = {c: [] for c in cols}
        sheet_rows.clear()
        n = 0
        for r, values in enumerate(rows_iter, start=header_row + 1):
            if not any(v is not None for v in values):
                continue
            n += 1
            if n > MAX_ROWS:
                raise _fail(f"at most {MAX_ROWS:,} rows (sheet '{sheet_title}')")
            sheet_rows.append(r)
            for c, i in zip(cols, idx, strict=True):
                v = values[i] if i < len(values) else None
                if isinstance(v, str) and len(v) > MAX_FIELD_CHARS:
                    raise _fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters", row=n, column=c, value=v,
                                line=r, line_kind="sheet row")
                if hasattr(v, "isoformat") and not isinstance(v, str):
                    v = pd.Timestamp(v)
                out[c].append(v)
        wb.close()
        for c in cols:  # Excel dates arrive as datetimes; mixed with text they become text
            vals = out[c]
            if any(isinstance(v, pd.Timestamp) for v in vals):
                out[c] = [v.isoformat() if isinstance(v, pd.Timestamp) else v for v in vals]
        return _records_table(out, cols)

    return _Source("xlsx", names, read, line_of=lambda rows: {r: sheet_rows[r - 1] for r in rows
                                                               if 0 < r <= len(sheet_rows)},
                   line_kind="sheet row")


def _open(name: str, data: bytes, options: ParseOptions, max_bytes: int) -> _Source:
    if not isinstance(data, (bytes, bytearray)):
        data = bytes(data)
    if len(data) == 0:
        raise _fail("a non-empty file (this one has 0 bytes)")
    if len(data) > max_bytes:
        raise _fail(f"a file of at most {max_bytes / 2**20:.0f} MiB (this one is {len(data) / 2**20:.1f} MiB); "
                    "sample the log (and add a 'weight' column) or upload an aggregated mix table")
    data = bytes(data)
    fmt = detect_format(name, data)
    opener = {"csv": _csv_source, "jsonl": _jsonl_source, "json": _json_doc_source, "parquet": _parquet_source,
              "xlsx": _xlsx_source}[fmt]
    return opener(data, options)


# ---------------------------------------------------------------------------------------------------
# Columns -> roles
# ---------------------------------------------------------------------------------------------------

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

    @property
    def roles(self) -> dict[str, str]:
        return dict(self.mapping)


def _check_duplicates(columns: list[str]) -> None:
    seen: dict[str, str] = {}
    for c in columns:
        k = norm(c)
        if k in seen:
            raise _fail(f"distinct column names; '{_cut(seen[k], 40)}' and '{_cut(c, 40)}' are the same name once "
                        "case, spaces and hyphens are ignored: rename or drop one", column=c)
        seen[k] = c


def _plan(src: _Source, options: ParseOptions) -> FileInfo:
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
            raise _fail(f"a role among {', '.join(ROLES)}", value=role)
        if col == "":
            roles.pop(role, None)
            continue
        if col not in cols:
            match = by_norm.get(norm(col))
            if match is None:
                raise _fail(f"a column of the file for {ROLE_LABELS[role]}; the file's columns are: {_list(cols)}",
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
    return FileInfo(src.fmt, tuple(cols), kind, label, tuple((r, roles[r]) for r in ROLES if r in roles), missing,
                    totals, src.delimiter, src.decimal, src.notes)


def inspect_upload(name: str, data: bytes, options: ParseOptions | None = None, *,
                   max_bytes: int = MAX_UPLOAD_BYTES) -> FileInfo:
    """The file's columns, the recognised export and the role of each column, from its header or metadata
    only (nothing is decoded). Raises TrafficError when the file cannot be opened."""
    return _plan(_open(name, data, options or DEFAULT_OPTIONS, max_bytes), options or DEFAULT_OPTIONS)


def column_values(name: str, data: bytes, column: str, options: ParseOptions | None = None, *, limit: int = 40,
                  max_bytes: int = MAX_UPLOAD_BYTES) -> list[tuple[str, int]]:
    """The most common values of one column (for mapping values to workloads), most frequent first."""
    options = options or DEFAULT_OPTIONS
    src = _open(name, data, options, max_bytes)
    if column not in src.columns:
        raise _fail(f"a column of the file; the file's columns are: {_list(src.columns)}", column=column)
    arr = _read(src, [column], [column]).column(0)
    counts: dict[str, int] = {}
    for chunk in arr.chunks:
        enc = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
        words = _text(enc.dictionary).to_pylist()
        idx = enc.indices.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
        for w, k in zip(words, np.bincount(idx, minlength=len(words)), strict=True):
            if w is not None and k:
                counts[w] = counts.get(w, 0) + int(k)
    pairs = sorted(counts.items(), key=lambda x: -x[1])
    return [(_cut(v, 80), n) for v, n in pairs[:limit]]


# ---------------------------------------------------------------------------------------------------
# Validation (vectorised over arrow / numpy; problems collected in row order)
# ---------------------------------------------------------------------------------------------------

def _text(a: pa.Array) -> pa.Array:
    """A plain (non-dictionary) array as UTF-8 text."""
    if pa.types.is_string(a.type):
        return a
    try:
        return a.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else str(v) for v in a.to_pylist()], pa.string())


def _per_value(arr: pa.ChunkedArray, fn: Callable[[pa.Array], np.ndarray], null_value: Any,
               encode: bool = False) -> np.ndarray:
    """fn over the values of a column, row by row, computed once per distinct value where the column is
    dictionary-encoded (Parquet strings are read that way) or `encode` asks for it: a dictionary bomb (one
    long string on two million rows) is never expanded. Nulls get `null_value`."""
    out = []
    for chunk in arr.chunks:
        if encode and not pa.types.is_dictionary(chunk.type):
            chunk = pc.dictionary_encode(chunk)
        if pa.types.is_dictionary(chunk.type):
            res = np.asarray(fn(chunk.dictionary))
            res = np.append(res, np.array([null_value], dtype=res.dtype if res.size else object))
            idx = chunk.indices.fill_null(len(chunk.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
            out.append(res[idx])
        else:
            res = np.asarray(fn(chunk))
            if chunk.null_count:
                res = np.where(chunk.is_null().to_numpy(zero_copy_only=False), null_value, res)
            out.append(res)
    return np.concatenate(out) if out else np.zeros(0)


def _value_type(arr: pa.ChunkedArray) -> pa.DataType:
    return arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type


def _null_mask(arr: pa.ChunkedArray) -> np.ndarray:
    return arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else np.zeros(len(arr), bool)


class _Problems:
    def __init__(self, src: _Source):
        self.items: list[tuple[int, str, Any, str]] = []
        self.total = 0
        self.src = src
        self.offset = 0  # rows before the current batch

    def add_mask(self, mask: np.ndarray, column: str, expected: str, raw: pa.ChunkedArray,
                 shown: np.ndarray | None = None) -> None:
        """A problem per True row of `mask`; the value quoted is the cell (or `shown`, the number read)."""
        idx = np.flatnonzero(np.asarray(mask))
        if idx.size == 0:
            return
        self.total += int(idx.size)
        for i in idx[:MAX_PROBLEMS]:
            if shown is not None:
                v = float(shown[int(i)])
                v = int(v) if v.is_integer() and abs(v) < 1e15 else v
            else:
                v = raw[int(i)].as_py() if raw is not None else None
            self.items.append((self.offset + int(i) + 1, column, _plain(v), expected))

    def raise_if_any(self, at_least: bool = False) -> None:
        if not self.items:
            return
        self.items.sort(key=lambda p: (p[0], p[1]))
        items = self.items[:MAX_PROBLEMS]
        lines = self.src.line_of([r for r, *_ in items])
        raise TrafficError([Problem(r, c, v, e, lines.get(r), self.src.line_kind) for r, c, v, e in items],
                           self.total, at_least)

    def raise_if_full(self) -> None:
        """Stop early once a whole page of problems is found (a 2M-row column of bad values is refused
        without checking the other columns)."""
        if len(self.items) >= MAX_PROBLEMS:
            self.raise_if_any(at_least=True)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, str, int, float)) or v is None:
        return v
    return str(v)


def _numeric(arr: pa.ChunkedArray, col: str, probs: _Problems, *, integer: bool, low: float, high: float,
             what: str, low_inclusive: bool = True, decimal: str | None = None) -> np.ndarray:
    """Float64 values of a column; a problem for each empty, non-numeric, NaN, out-of-range or fractional cell."""
    n = len(arr)
    t = _value_type(arr)
    null = _null_mask(arr)
    if pa.types.is_boolean(t):
        probs.add_mask(~null, col, f"a number ({what}), not true/false", arr)
        probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
        return np.zeros(n)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        def conv(a: pa.Array) -> np.ndarray:
            return a.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        def conv(a: pa.Array) -> np.ndarray:
            s = pc.utf8_trim_whitespace(_text(a))
            if decimal == ",":
                s = pc.replace_substring(s, ",", ".")
            try:
                return s.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return pd.to_numeric(pd.Series(s.to_pylist(), dtype=object), errors="coerce").to_numpy(float)
    else:
        probs.add_mask(~null, col, f"a number ({what}), not {_cut(str(t), 40)}", arr)
        probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
        return np.zeros(n)
    vals = _per_value(arr, conv, np.nan).astype(float)
    nan = np.isnan(vals)
    probs.add_mask(null, col, f"a value ({what}); the cell is empty", arr)
    probs.add_mask(nan & ~null, col, f"a number ({what})", arr)
    ok = ~nan
    with np.errstate(invalid="ignore"):
        too_low = ok & ((vals < low) if low_inclusive else (vals <= low))
        too_high = ok & (vals > high)
        frac = ok & ~too_low & ~too_high & (np.floor(vals) != vals) if integer else np.zeros(n, bool)
    bound = ">=" if low_inclusive else ">"
    probs.add_mask(too_low, col, f"{what} {bound} {low:g}", arr, vals)
    probs.add_mask(too_high, col, f"{what} <= {high:,.0f}" + (" (larger is not plausible for one request)"
                                                             if "token" in what else ""), arr, vals)
    probs.add_mask(frac, col, f"a whole number ({what})", arr, vals)
    return np.where(ok & ~too_low & ~too_high, vals, 0.0)


def _codes(arr: pa.ChunkedArray, col: str, valid: list[str], probs: _Problems, kind: str,
           default: str | None = None) -> np.ndarray:
    """Codes into `valid` for a text column, names matched case-insensitively; unknown names name the valid
    ones. Works per distinct value, not per row."""
    lookup = {norm(v): i for i, v in enumerate(valid)}
    codes = _per_value(arr, lambda a: np.array([lookup.get(norm(w), -1) for w in _text(a).to_pylist()],
                                               dtype=np.int64), -2, encode=True).astype(np.int64)
    missing = codes == -2
    if default is not None:
        codes = np.where(missing, valid.index(default), codes)
    else:
        probs.add_mask(missing, col, f"a {kind} name; the cell is empty", arr)
    probs.add_mask(codes == -1, col, f"a known {kind}: one of {', '.join(sorted(valid))}", arr)
    return np.where(codes < 0, 0, codes)


def _epoch_unit(vals: np.ndarray) -> tuple[float, str]:
    """Seconds per unit of numeric timestamps, by magnitude: Unix seconds (~1.7e9 today), ms (~1.7e12),
    us (~1.7e15) or ns (~1.7e18); values before 2000 in seconds are read as seconds since the trace began."""
    finite = vals[:: max(len(vals) // 10_000, 1)]  # the median of a sample decides the unit
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 1.0, "s"
    mag = float(np.median(np.abs(finite)))
    for limit, scale, unit in ((1e11, 1.0, "s"), (1e14, 1e-3, "ms"), (1e17, 1e-6, "us")):
        if mag < limit:
            return scale, unit
    return 1e-9, "ns"


UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _timestamps(arr: pa.ChunkedArray, col: str, probs: _Problems, state: _TimeState) -> np.ndarray:
    """Seconds since the Unix epoch (UTC; text without a zone offset is read as UTC) as float64.
    Accepts ISO 8601 (2026-11-29T10:15:00Z, 2023-11-16 18:15:46.6805900), Unix s / ms / us / ns (by magnitude,
    decided on the first batch; `state` keeps the decision and a note), Parquet and Excel date-times. Numbers
    before the year 2000 are seconds since the trace began (BurstGPT)."""
    n = len(arr)
    t = _value_type(arr)
    null = _null_mask(arr)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        def conv(a: pa.Array) -> np.ndarray:
            if pa.types.is_date(a.type):
                a = a.cast(pa.timestamp("s"))
            return a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False) * UNIT_SCALE[a.type.unit]
        secs = _per_value(arr, conv, 0.0).astype(float)
        bad = np.zeros(n, bool)
        state.note = state.note or ("date-times in the file's own type"
                                    + ("" if getattr(t, "tz", None) else " (no time zone: read as UTC)"))
        state.relative = False
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        vals = _per_value(arr, lambda a: a.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False),
                          np.nan).astype(float)
        secs, bad = _epoch_seconds(vals, state)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        def conv(a: pa.Array) -> np.ndarray:
            s, b = _parse_time_text(_text(a), state)
            return np.where(b, np.nan, s)
        secs = _per_value(arr, conv, np.nan).astype(float)
        bad = np.isnan(secs)
        secs = np.where(bad, 0.0, secs)
    else:
        probs.add_mask(~null, col, f"a timestamp, not {_cut(str(t), 40)}", arr)
        return np.zeros(n)
    bad &= ~null
    probs.add_mask(null, col, "a timestamp; the cell is empty", arr)
    probs.add_mask(bad, col, "an ISO 8601 timestamp (2026-11-29T10:15:00Z) or Unix seconds / milliseconds", arr)
    if not state.relative:
        ok = ~bad & ~null
        lo, hi = MIN_TIMESTAMP.value / 1e9, MAX_TIMESTAMP.value / 1e9
        out = ok & ((secs < lo) | (secs > hi))
        probs.add_mask(out, col, "a date between 2000-01-01 and 2100-01-01", arr)
    return secs


def _epoch_seconds(vals: np.ndarray, state: _TimeState) -> tuple[np.ndarray, np.ndarray]:
    """Numeric timestamps -> seconds (unit by magnitude on the first batch unless given), and a bad mask."""
    if state.scale is None:
        scale, unit_name = _epoch_unit(vals) if state.unit == "auto" else (UNIT_SCALE[state.unit], state.unit)
        state.scale = scale
        fin = vals[np.isfinite(vals)] * scale
        state.relative = bool(fin.size and fin.max() < MIN_TIMESTAMP.value / 1e9)
        if state.relative:
            names = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
            state.note = state.note or (f"numbers before the year 2000 read as {names[unit_name]} since the trace "
                                        "began (no date); hours of the day count from its start")
        else:
            names = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
            state.note = state.note or f"numbers read as Unix {names[unit_name]}"
    secs = vals * state.scale
    bad = ~np.isfinite(secs)
    return np.where(bad, 0.0, secs), bad


def _parse_time_text(s: pa.Array, state: _TimeState) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, bad mask) for a plain text array; arrow's ISO 8601 cast first (C++, fast)."""
    n = len(s)
    s = pc.utf8_trim_whitespace(s)
    for target, note in ((pa.timestamp("ns", "UTC"), "ISO 8601 with a time zone"),
                         (pa.timestamp("ns"), "ISO 8601 without a time zone: read as UTC")):
        try:
            ts = s.cast(target)
            state.note = state.note or note
            state.relative = False
            return ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False) / 1e9, np.zeros(n, bool)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    try:  # numbers written as text (CSV, JSON "1700000000")
        vals = s.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        return _epoch_seconds(vals, state)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # mixed forms: pandas' ISO 8601 reader per distinct text; what it cannot read becomes a problem
    enc = pc.dictionary_encode(s)
    words = pd.Series(enc.dictionary.to_pylist(), dtype=object)
    parsed = pd.to_datetime(words, utc=True, errors="coerce", format="ISO8601")
    word_secs = ((parsed - pd.Timestamp("1970-01-01", tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(float)
    num = pd.to_numeric(words, errors="coerce").to_numpy(float)
    if np.isfinite(num).any():
        nsecs, nbad = _epoch_seconds(num, state)
        word_secs = np.where(np.isnan(word_secs) & ~nbad, nsecs, word_secs)
    else:
        state.relative = False
    state.note = state.note or "ISO 8601 (mixed forms; text without a zone read as UTC)"
    table = np.append(word_secs, np.nan)
    idx = enc.indices.fill_null(len(words)).to_numpy(zero_copy_only=False).astype(np.int64)
    secs = table[idx]
    bad = ~np.isfinite(secs)
    return np.where(bad, 0.0, secs), bad




def _guess_workload(name: str, valid: list[str]) -> str | None:
    low = name.lower()
    hints = (("code", "code"), ("conv", "chat"), ("chat", "chat"), ("rag", "rag_summarization"),
             ("summar", "rag_summarization"), ("agent", "agent"), ("tool", "agent"), ("reason", "reasoning"),
             ("translat", "translation"))
    for key, wl in hints:
        if key in low and wl in valid:
            return wl
    return None


@dataclass
class _WorkloadState:
    """Where the workloads came from, and how many rows fell to the default, summed over batches."""

    base: str = ""
    unmatched: int = 0
    default: str = ""
    unmatched_text: str = ""

    def note(self) -> str:
        if not self.unmatched:
            return self.base
        return f"{self.base}; {self.unmatched:,} rows {self.unmatched_text} counted as '{self.default}'"


def _workload_codes(tbl: pa.Table, info: FileInfo, rule: WorkloadRule, name: str, valid: list[str],
                    probs: _Problems, state: _WorkloadState) -> np.ndarray:
    """Workload codes (into `valid`) for one batch, by the WorkloadRule (see its docstring)."""
    n = tbl.num_rows
    roles = info.roles

    def check(wl: str, what: str) -> int:
        key = norm(wl)
        match = next((i for i, v in enumerate(valid) if v == key), None)
        if match is None:
            raise _fail(f"a known workload for {what}: one of {', '.join(sorted(valid))}", value=wl)
        return match

    default_name = rule.workload or "chat"
    if rule.mode == "auto":
        if "workload" in roles:
            col = roles["workload"]
            state.base = f"workloads from the column '{col}'"
            return _codes(tbl.column(col), col, valid, probs, "workload")
        guess = rule.workload or _guess_workload(name, valid)
        wl = guess or "chat"
        how = ("chosen" if rule.workload else f"guessed from the file name '{_cut(name, 60)}'" if guess
               else "the default: the file has no workload column")
        state.base = (f"every request counted as '{wl}' ({how}); pick the workload or map a column on the "
                      "Traffic page")
        return np.full(n, check(wl, "the whole file"))
    if rule.mode == "fixed":
        state.base = f"every request counted as '{default_name}' (chosen)"
        return np.full(n, check(default_name, "the whole file"))
    default = check(default_name, "rows that nothing matches")
    state.default = valid[default]
    if rule.mode == "map":
        col = _resolve_rule_column(rule.column, info)
        mapping = {norm(k): check(v, f"the value {_short(k)}") for k, v in rule.mapping}
        direct = {norm(v): i for i, v in enumerate(valid)}
        codes = _per_value(tbl.column(col), lambda a: np.array(
            [mapping.get(norm(w), direct.get(norm(w), -1)) for w in _text(a).to_pylist()], dtype=np.int64),
            -1, encode=True).astype(np.int64)
        state.base = f"workloads from the values of '{col}'"
        state.unmatched_text = "with other values"
    elif rule.mode == "rules":
        codes = np.full(n, -1, dtype=np.int64)
        for rcol, text, wl in rule.rules:
            col = _resolve_rule_column(rcol, info)
            target = check(wl, f"the rule '{_cut(rcol, 40)} contains {_cut(text, 40)}'")
            if not text:
                continue
            hit = _per_value(tbl.column(col), lambda a, text=text: pc.match_substring(
                _text(a), text, ignore_case=True).fill_null(False).to_numpy(zero_copy_only=False), False).astype(bool)
            codes = np.where((codes < 0) & hit, target, codes)
        state.base = f"workloads from {len(rule.rules)} rule{'s' if len(rule.rules) != 1 else ''}"
        state.unmatched_text = "that no rule matches"
    else:
        raise _fail("a workload mode among auto, fixed, map, rules", value=rule.mode)
    state.unmatched += int((codes < 0).sum())
    return np.where(codes < 0, default, codes)


def _resolve_rule_column(col: str, info: FileInfo) -> str:
    roles = info.roles
    if col in roles and col not in info.columns:
        return roles[col]
    if col in info.columns:
        return col
    match = {norm(c): c for c in info.columns}.get(norm(col))
    if match is None:
        raise _fail(f"a column of the file (or one of prompt_text, model, endpoint); the file's columns are: "
                    f"{_list(info.columns)}", column=col)
    return match


def _rule_columns(rule: WorkloadRule, info: FileInfo) -> list[str]:
    if rule.mode == "map":
        return [_resolve_rule_column(rule.column, info)]
    if rule.mode == "rules":
        return [_resolve_rule_column(c, info) for c, _t, _w in rule.rules]
    return []


def _check_cell_lengths(tbl: pa.Table, probs: _Problems) -> None:
    """Refuse any text cell over MAX_FIELD_CHARS (dictionary columns: checked on the dictionary)."""
    for c in tbl.column_names:
        arr = tbl.column(c)
        t = _value_type(arr)
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t)):
            continue
        long = _per_value(arr, lambda a: pc.greater(pc.binary_length(a), MAX_FIELD_CHARS).fill_null(False)
                          .to_numpy(zero_copy_only=False), False).astype(bool)
        if long.any():
            i = int(np.flatnonzero(long)[0])
            v = arr[i].as_py()
            row = probs.offset + i + 1
            line = probs.src.line_of([row]).get(row)
            raise _fail(f"a cell of at most {MAX_FIELD_CHARS:,} characters (this one has {len(v):,}; only token "
                        "counts are needed: drop long text columns)", row=row, column=c, value=v, line=line,
                        line_kind=probs.src.line_kind)


# ---------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------

def parse_traffic(name: str, data: bytes, catalog, *, max_bytes: int = MAX_UPLOAD_BYTES,
                  options: ParseOptions | None = None) -> TrafficProfile:
    """Parse an upload into a TrafficProfile; raises TrafficError (only) naming rows, columns and values."""
    options = options or DEFAULT_OPTIONS
    try:
        return _parse(name, data, catalog, max_bytes, options)
    except TrafficError:
        raise
    except MemoryError:
        raise _fail("a smaller file (reading this one ran out of memory)") from None
    except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError, RecursionError,
            UnicodeError, zipfile.BadZipFile, EOFError, OSError) as exc:
        # a reader failure not anticipated above: still the parser's own error, and short
        raise _fail(f"a readable traffic file ({type(exc).__name__}: {_cut(str(exc), 200)})") from None


def _parse(name: str, data: bytes, catalog, max_bytes: int, options: ParseOptions) -> TrafficProfile:
    src = _open(name, data, options, max_bytes)
    info = _plan(src, options)
    if info.kind == "unknown":
        if len(info.columns) == 1:
            col = info.columns[0]
            found = [(c, lbl) for c, lbl in DELIMITERS.items() if c in col and c != src.delimiter]
            if found:
                raise _fail(f"more than one column: the header has one field, '{_cut(col, 80)}', with {found[0][1]}s "
                            f"('{found[0][0]}') in it: choose '{found[0][1]}' as the separator", column=col)
        if len(info.missing) < len(REQUEST_REQUIRED):  # a per-request file with a column not found
            raise TrafficError([Problem(
                None, r, None, f"a column '{r}' (per-request format; also read as: "
                f"{_list(SYNONYMS[r][1:], 4)}; or map one on the Traffic page); the file's columns are: "
                f"{_list(info.columns, 15)}") for r in info.missing])
        missing = ", ".join(ROLE_LABELS[r] for r in info.missing)
        raise TrafficError([Problem(
            None, None, None,
            f"per-request columns ({missing} not found; map them to the file's columns on the Traffic page) or a "
            f"mix table (workload and share or monthly_output_tokens); the file's columns are: "
            f"{_list(info.columns, 15)}")])
    if info.kind == "mix":
        if info.missing:
            raise _fail(f"a column 'workload' (mix-table format); the file's columns are: {_list(info.columns)}",
                        column="workload")
        return _mix_profile(name, src, info, catalog)
    return _requests_profile(name, src, info, catalog, options)


BATCH_ROWS = 1 << 18  # rows validated at a time (a problem page stops the read early)


def _batches(src: _Source, cols: list[str], text_cols: Iterable[str]) -> Iterable[pa.Table]:
    """The selected columns in pieces of at most BATCH_ROWS rows (CSV: streamed from the bytes, one block at
    a time, so a large file never exists decoded in full); refuses more than MAX_ROWS rows as it goes."""
    cols = list(dict.fromkeys(cols))
    src.string_cols.update(text_cols)
    if src.stream is not None:
        pieces = src.stream(cols)
    else:
        tbl = src.read(cols)
        if tbl.num_rows > MAX_ROWS:
            raise _fail(f"at most {MAX_ROWS:,} rows (this file has {tbl.num_rows:,})")
        pieces = (tbl.slice(i, BATCH_ROWS) for i in range(0, max(tbl.num_rows, 1), BATCH_ROWS))
    rows = 0
    for piece in pieces:
        rows += piece.num_rows
        if rows > MAX_ROWS:
            raise _fail(f"at most {MAX_ROWS:,} rows (this file has more)")
        if piece.num_rows:
            yield piece
    if rows == 0:
        raise _fail("at least one data row below the header")


def _read(src: _Source, cols: list[str], text_cols: Iterable[str]) -> pa.Table:
    """All selected rows at once (mix tables, column values: small)."""
    return pa.concat_tables(list(_batches(src, cols, text_cols)))


def _fmt_span(s: float) -> str:
    if s < 120:
        return f"{s:,.0f} seconds" if s >= 10 else f"{s:,.1f} seconds"
    if s < 2 * 3600:
        return f"{s / 60:,.0f} minutes"
    if s < 2 * 86400:
        return f"{s / 3600:,.1f} hours"
    return f"{s / 86400:,.1f} days"


def _fmt_tokens(x: float) -> str:
    """Tokens with a unit: 0.188B, 35.1M, 8.2k, 212."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if x >= scale * 0.1 and (unit != "k" or x >= 1e3):
            return f"{x / scale:,.3g}{unit}"
    return f"{x:,.0f}"


@dataclass
class _TimeState:
    """Decisions taken on the first batch and kept for the rest (unit of numeric timestamps, relative)."""

    unit: str
    scale: float | None = None
    relative: bool | None = None
    note: str = ""


class _Acc:
    """Streaming accumulators: per-segment and per-hour sums, a fine context histogram, and three compact
    per-row arrays (start time, requests, output tokens) for the time bins."""

    # Fine log bins for context lengths: width 1 below ~60 tokens, 1.7 % wide above (quantiles to +-0.9 %).
    EDGES = np.unique(np.concatenate([np.arange(0, 64), np.geomspace(64, 2.0 * 2**21, 600).round()]))

    def __init__(self, nseg: int):
        self.seg = np.zeros((3, nseg))  # requests, prompt tokens, output tokens
        self.hour = np.zeros((3, 24))
        self.ctx = np.zeros(len(self.EDGES) - 1)
        self.ctx_max = 0.0
        self.var = 0.0
        self.secs: list[np.ndarray] = []
        self.w: list[np.ndarray] = []
        self.wo: list[np.ndarray] = []
        self.keep_secs: list[np.ndarray] = []
        self.end_widths: list[np.ndarray] = []
        self.rows = 0

    def add(self, key: np.ndarray, secs: np.ndarray, w: np.ndarray, wp: np.ndarray, wo: np.ndarray,
            keep: np.ndarray, var: np.ndarray) -> None:
        nseg = self.seg.shape[1]
        for i, x in enumerate((w, wp, wo)):
            self.seg[i] += np.bincount(key, weights=x, minlength=nseg)
        hod = ((secs % 86400) // 3600).astype(np.int64)
        for i, x in enumerate((w, wp, wo)):
            self.hour[i] += np.bincount(hod, weights=x, minlength=24)
        with np.errstate(divide="ignore", invalid="ignore"):
            ctx = np.where(w > 0, (wp + wo) / np.where(w > 0, w, 1.0), 0.0)
        self.ctx += np.histogram(np.clip(ctx[keep], 0, self.EDGES[-1] - 1), bins=self.EDGES, weights=w[keep])[0]
        if keep.any():
            self.ctx_max = max(self.ctx_max, float(ctx[keep].max()))
        self.var += float(var.sum())
        self.secs.append(secs)
        self.w.append(w.astype(np.float32))
        self.wo.append(wo.astype(np.float32))
        self.keep_secs.append(secs[keep])
        self.rows += len(secs)

    def context_stats(self) -> tuple[tuple[float, float, float, float], tuple[float, ...], tuple[float, ...]]:
        """p10/p50/p90/p99 of prompt + output tokens per request (request-weighted, interpolated in the fine
        bins) and a 24-bin log histogram for display."""
        tot = self.ctx.sum()
        if not tot > 0:
            return (0.0, 0.0, 0.0, 0.0), (1.0, 2.0), (0.0,)
        cum = np.concatenate([[0.0], np.cumsum(self.ctx)]) / tot
        qs = tuple(float(np.interp(q, cum, self.EDGES)) for q in (0.10, 0.50, 0.90, 0.99))
        qs = tuple(min(q, self.ctx_max) for q in qs)
        hi = max(self.ctx_max, 2.0)
        edges = np.unique(np.geomspace(1.0, hi * 1.0001, 25).round())
        # re-bin the fine histogram onto the display edges (by fine-bin lower edge)
        which = np.clip(np.searchsorted(edges, self.EDGES[:-1], side="right") - 1, 0, len(edges) - 2)
        counts = np.bincount(which, weights=self.ctx, minlength=len(edges) - 1)[: len(edges) - 1]
        return qs, tuple(float(e) for e in edges), tuple(float(x) for x in counts)


def _lookahead(it):
    """Yield (item, is_last) pairs."""
    it = iter(it)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, False
        prev = item
    yield prev, True


def _requests_profile(name: str, src: _Source, info: FileInfo, catalog, options: ParseOptions) -> TrafficProfile:
    roles = info.roles
    rule = options.workload
    valid_wl = list(catalog.workloads.keys())
    valid_lang = list(catalog.languages.keys())
    text_cols = [roles[r] for r in ("workload", "language", "prompt_text", "model", "endpoint") if r in roles]
    rule_cols = _rule_columns(rule, info)
    use = [roles["timestamp"], roles["prompt_tokens"], roles["output_tokens"]]
    if rule.mode == "auto" and "workload" in roles:
        use.append(roles["workload"])
    use += [roles[r] for r in ("language", "weight") if r in roles]
    totals = info.totals
    if totals and "end_time" in roles:
        use.append(roles["end_time"])
    use += rule_cols
    use = list(dict.fromkeys(use))
    probs = _Problems(src)
    L = len(valid_lang)
    acc = _Acc(len(valid_wl) * L)
    tstate = _TimeState(options.timestamp_unit)
    estate = _TimeState(options.timestamp_unit)
    wstate = _WorkloadState()
    english = valid_lang.index("english") if "english" in valid_lang else 0
    tok_high = MAX_TOKENS_PER_REQUEST * (MAX_BUCKET_REQUESTS if totals else 1)
    what = "tokens (total over the row's requests)" if totals else "tokens"
    row0 = 0
    for tbl, last in _lookahead(_batches(src, use, text_cols + rule_cols)):
        n = tbl.num_rows
        probs.offset = row0
        row0 += n
        if row0 > MAX_ROWS:
            raise _fail(f"at most {MAX_ROWS:,} rows (this file has more)")
        _check_cell_lengths(tbl, probs)
        wl_codes = _workload_codes(tbl, info, rule, name, valid_wl, probs, wstate)
        lang_codes = (_codes(tbl.column(roles["language"]), roles["language"], valid_lang, probs, "language",
                             default="english") if "language" in roles else np.full(n, english))
        prompt = _numeric(tbl.column(roles["prompt_tokens"]), roles["prompt_tokens"], probs, integer=True, low=0,
                          high=tok_high, what="prompt " + what, decimal=src.decimal)
        output = _numeric(tbl.column(roles["output_tokens"]), roles["output_tokens"], probs, integer=True, low=0,
                          high=tok_high, what="output " + what, decimal=src.decimal)
        if "weight" in roles:
            wcol = roles["weight"]
            weight = (_numeric(tbl.column(wcol), wcol, probs, integer=True, low=0, high=MAX_BUCKET_REQUESTS,
                               what="requests in the row", decimal=src.decimal) if totals else
                      _numeric(tbl.column(wcol), wcol, probs, integer=False, low=0, high=MAX_WEIGHT,
                               what="a request weight", low_inclusive=False, decimal=src.decimal))
        else:
            weight = np.ones(n)
        secs = _timestamps(tbl.column(roles["timestamp"]), roles["timestamp"], probs, tstate)
        end_secs = None
        if totals:
            # tokens per request in a bucket must be plausible; a bucket with tokens but no requests is an error
            per_req_p = prompt / np.maximum(weight, 1)
            per_req_o = output / np.maximum(weight, 1)
            if "weight" in roles:
                probs.add_mask((weight == 0) & ((prompt > 0) | (output > 0)), roles["weight"],
                               "at least one request in a row that has tokens", tbl.column(roles["weight"]))
            probs.add_mask(per_req_o > MAX_TOKENS_PER_REQUEST, roles["output_tokens"],
                           f"at most {MAX_TOKENS_PER_REQUEST:,} output tokens per request in the row",
                           tbl.column(roles["output_tokens"]))
            probs.add_mask(per_req_p > MAX_TOKENS_PER_REQUEST, roles["prompt_tokens"],
                           f"at most {MAX_TOKENS_PER_REQUEST:,} prompt tokens per request in the row",
                           tbl.column(roles["prompt_tokens"]))
            if "end_time" in roles:
                end_secs = _timestamps(tbl.column(roles["end_time"]), roles["end_time"], probs, estate)
        if probs.items:
            if len(probs.items) >= MAX_PROBLEMS and not last:
                probs.raise_if_any(at_least=True)  # a page of problems: do not decode the rest of the file
            continue
        if totals:
            w, wp, wo = weight, prompt, output
            keep = w > 0
            # compound Poisson: a bucket of n requests of mean o tokens, Var = n o^2
            var = np.where(keep, wo ** 2 / np.maximum(w, 1), 0.0)
            if end_secs is not None:
                acc.end_widths.append((end_secs - secs)[keep])
        else:
            w, wp, wo = weight, weight * prompt, weight * output
            keep = w > 0
            var = wo ** 2  # a row of weight w: w requests of o tokens, sampled together: Var = (w o)^2
        acc.add(wl_codes * L + lang_codes, secs, w, wp, wo, keep, var)
    probs.raise_if_any()
    if acc.rows == 0:
        raise _fail("at least one data row below the header")
    return _finish_requests(name, src, info, acc, valid_wl, valid_lang, totals, tstate, wstate, use, roles,
                            rule_cols)


def _finish_requests(name, src, info, acc: _Acc, valid_wl, valid_lang, totals, tstate, wstate, use, roles,
                     rule_cols) -> TrafficProfile:
    L = len(valid_lang)
    seg_w, seg_wp, seg_wo = acc.seg
    total_out = float(seg_wo.sum())
    total_req = float(seg_w.sum())
    n = acc.rows
    if not total_out > 0:
        raise _fail("some output tokens (every row has 0)", column=roles["output_tokens"], value=0)
    order = sorted(range(len(seg_w)), key=lambda k: (valid_wl[k // L], valid_lang[k % L]))
    segments = tuple(
        Segment(workload=valid_wl[k // L], language=valid_lang[k % L], requests=float(seg_w[k]),
                output_token_share=float(seg_wo[k] / total_out), mean_prompt_tokens=float(seg_wp[k] / seg_w[k]),
                mean_output_tokens=float(seg_wo[k] / seg_w[k]))
        for k in order if seg_w[k] > 0)
    secs = np.concatenate(acc.secs)
    acc.secs.clear()
    keep_secs = np.concatenate(acc.keep_secs)
    acc.keep_secs.clear()
    ts = keep_secs if keep_secs.size else secs
    t0, t1 = float(ts.min()), float(ts.max())
    del keep_secs, ts
    # time span: first to last request (aggregated exports: plus one bucket)
    bucket_s = 0.0
    if totals:
        if acc.end_widths and sum(len(x) for x in acc.end_widths):
            bucket_s = float(np.median(np.concatenate(acc.end_widths)))
        else:
            uniq = np.unique(secs)
            bucket_s = float(np.diff(uniq).min()) if uniq.size > 1 else 0.0
        bucket_s = max(bucket_s, 0.0)
    span_s = t1 - t0 + bucket_s
    warnings: list[str] = list(src.notes)
    wl_note = wstate.note()
    if "counted as" in wl_note:
        warnings.append(wl_note[0].upper() + wl_note[1:] + ".")
    rel = None
    minute_rates = None
    hour_rate = hour_p = hour_o = None
    rate = None
    monthly = ci = None
    if span_s > 0:
        w = np.concatenate(acc.w)
        acc.w.clear()
        monthly = total_out / span_s * SECONDS_PER_MONTH
        # 95 % interval: the larger of (a) compound-Poisson noise in the token total (acc.var) and (b) the
        # spread between the totals of equal time bins (minutes; days once the trace spans 2+ days), which
        # also catches bursts. Neither covers what the file did not see (other hours, other weeks).
        rel_p = math.sqrt(acc.var) / total_out
        bin_s = 86400.0 if span_s >= 2 * 86400 else 60.0
        nbins = int(span_s // bin_s)
        rel_b = 0.0
        if nbins >= 2:
            wo = np.concatenate(acc.wo)
            acc.wo.clear()
            b = np.minimum(((secs - t0) // bin_s).astype(np.int64), nbins - 1)
            tot = np.bincount(b, weights=wo, minlength=nbins)[:nbins]
            del b, wo
            if tot.mean() > 0:
                rel_b = float(tot.std(ddof=1) / tot.mean() / math.sqrt(nbins))
        rel = max(rel_p, rel_b)
        ci = (max(0.0, monthly * (1 - Z95 * rel)), monthly * (1 + Z95 * rel))
        # arrival rate per minute (Little's law): whole minutes; a trace under a minute is one bin
        bin_r = 60.0 if span_s >= 60 else span_s
        if totals and bucket_s > bin_r:
            bin_r = bucket_s  # an aggregated export's requests sit at the start of their bucket
        nb = max(int(span_s // bin_r), 1)
        b = np.minimum(((secs - t0) // bin_r).astype(np.int64), nb - 1)
        per_bin = np.bincount(b, weights=w, minlength=nb)[:nb] / bin_r
        del b, w
        rate = (float(np.quantile(per_bin, 0.5)), float(np.quantile(per_bin, 0.9)), float(per_bin.max()))
        if span_s < 86400:
            minute_rates = (tuple(float(x) for x in per_bin) if bin_r == 60.0
                            else (float(per_bin[0]),) if nb == 1 and not totals else None)
        elif bucket_s <= 3600:
            # per hour of day, measured: requests / seconds of that hour the trace covers
            req_h, p_h, o_h = acc.hour
            expo = _hour_exposure(t0, t0 + span_s)
            hour_rate = tuple(float(r / e) if e > 0 else 0.0 for r, e in zip(req_h, expo, strict=True))
            mp, mo = float(seg_wp.sum() / total_req), total_out / total_req
            hour_p = tuple(float(p / r) if r > 0 else mp for p, r in zip(p_h, req_h, strict=True))
            hour_o = tuple(float(o / r) if r > 0 else mo for o, r in zip(o_h, req_h, strict=True))
        else:
            warnings.append(f"Time buckets of {_fmt_span(bucket_s)}: too coarse for a daily shape; pick one below.")
    del secs
    qs, edges, counts = acc.context_stats()
    # the volume, in words
    relative = bool(tstate.relative)
    fmt_t = "%Y-%m-%d %H:%M:%S" if span_s < 7200 else "%Y-%m-%d %H:%M"
    when = "" if relative else (
        f" ({pd.Timestamp(t0, unit='s', tz='UTC').strftime(fmt_t)} to "
        f"{pd.Timestamp(t1 + bucket_s, unit='s', tz='UTC').strftime(fmt_t)} UTC)")
    if monthly is not None:
        assert ci is not None and rel is not None
        volume_note = (
            f"{_fmt_tokens(monthly)} output tokens/month: {total_req:,.0f} requests and {_fmt_tokens(total_out)} "
            f"output tokens in {_fmt_span(span_s)}{when}, scaled to an average month ({DAYS_PER_MONTH:.2f} days); "
            f"95 % interval {_fmt_tokens(ci[0])} to {_fmt_tokens(ci[1])} (\u00b1{Z95 * rel * 100:.1f} %, "
            f"Poisson noise and the spread between {'days' if span_s >= 2 * 86400 else 'minutes'}).")
        if span_s < 86400:
            volume_note += (f" The trace covers {_fmt_span(span_s)}, less than a day: the month is assumed to look "
                            "like this stretch, and other hours of the day may differ.")
        elif span_s < 7 * 86400:
            volume_note += " The trace covers less than a week: weekdays and weekends may differ."
    else:
        volume_note = (f"No monthly volume: all {n:,} rows have the same timestamp, so the file has no time span to "
                       "scale. Enter the monthly volume on the Plan page.")
        warnings.append(volume_note)
    had_text = "prompt_text" in roles
    if had_text:
        warnings.append("Prompt text was used only for workload rules (if any) and not kept: the planner keeps token "
                        "counts only.")
    used = set(use)
    extra = [c for c in info.columns if c not in used and c != roles.get("prompt_text")]
    if extra:
        warnings.append(f"Columns not used: {_list(extra, 10)}.")
    prof = TrafficProfile(
        name=name, kind="requests", fmt=src.fmt, segments=segments, rows=n, requests=total_req,
        output_tokens=total_out, span_days=span_s / 86400.0 if span_s > 0 else None, monthly_output_tokens=monthly,
        arrival_rate_per_s=rate, context_tokens_quantiles=qs, context_hist_edges=edges, context_hist_counts=counts,
        per_hour_requests=tuple(float(x) for x in acc.hour[0]), had_prompt_text=had_text,
        warnings=tuple(warnings), source_format=info.format_label, column_map=info.mapping,
        span_s=span_s if span_s > 0 else None, monthly_output_tokens_ci95=ci, volume_note=volume_note,
        hour_requests_per_s=hour_rate, hour_mean_prompt_tokens=hour_p, hour_mean_output_tokens=hour_o,
        minute_requests_per_s=minute_rates, time_note=tstate.note, workload_note=wl_note,
    )
    _check_sane(prof)
    return prof


def _hour_exposure(t0: float, t1: float) -> np.ndarray:
    """Seconds of [t0, t1) that fall in each hour of the day (UTC)."""
    expo = np.zeros(24)
    span = t1 - t0
    full_days = math.floor(span / 86400)
    expo += full_days * 3600.0
    a = t0 + full_days * 86400
    while a < t1:
        h = int((a % 86400) // 3600)
        nxt = min(t1, (math.floor(a / 3600) + 1) * 3600.0)
        expo[h] += nxt - a
        a = nxt
    return expo


def _context_stats(ctx: np.ndarray, weights: np.ndarray):
    if ctx.size == 0 or not weights.sum() > 0:
        return (0.0, 0.0, 0.0, 0.0), (1.0, 2.0), (0.0,)
    order = np.argsort(ctx, kind="stable")
    c, w = ctx[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    qs = tuple(float(c[min(np.searchsorted(cum, q), len(c) - 1)]) for q in (0.10, 0.50, 0.90, 0.99))
    hi = max(float(c[-1]), 2.0)
    edges = np.unique(np.geomspace(1.0, hi * 1.0001, 25).round())
    counts, edges = np.histogram(ctx, bins=edges, weights=weights)
    return qs, tuple(float(e) for e in edges), tuple(float(x) for x in counts)


def _mix_profile(name: str, src: _Source, info: FileInfo, catalog) -> TrafficProfile:
    roles = info.roles
    vol_col = "monthly_output_tokens" if "monthly_output_tokens" in roles else "share"
    use = [roles["workload"], roles[vol_col]] + [roles[c] for c in ("language", "prompt_tokens", "output_tokens")
                                                 if c in roles]
    tbl = _read(src, use, [roles["workload"]] + ([roles["language"]] if "language" in roles else []))
    probs = _Problems(src)
    _check_cell_lengths(tbl, probs)
    valid_wl = list(catalog.workloads.keys())
    valid_lang = list(catalog.languages.keys())
    wl = _codes(tbl.column(roles["workload"]), roles["workload"], valid_wl, probs, "workload")
    lang = (_codes(tbl.column(roles["language"]), roles["language"], valid_lang, probs, "language",
                   default="english") if "language" in roles
            else np.full(tbl.num_rows, valid_lang.index("english") if "english" in valid_lang else 0))
    vol = _numeric(tbl.column(roles[vol_col]), roles[vol_col], probs, integer=False, low=0,
                   high=1e16 if vol_col != "share" else 100,
                   what="monthly output tokens" if vol_col != "share" else "a share (0-1 or percent)",
                   decimal=src.decimal)
    lengths = {}
    for col in ("prompt_tokens", "output_tokens"):
        if col in roles:
            # a mean below one token per request makes requests = tokens / mean explode (1e-320 -> inf)
            lengths[col] = _numeric(tbl.column(roles[col]), roles[col], probs, integer=False, low=1,
                                    high=MAX_TOKENS_PER_REQUEST, what=f"mean {col.replace('_', ' ')} per request",
                                    decimal=src.decimal)
    probs.raise_if_any()
    if not vol.sum() > 0:
        raise _fail("a positive total (every row is 0)", column=roles[vol_col], value=0.0)
    warnings = []
    if vol_col == "share" and not (abs(vol.sum() - 1) < 0.02 or abs(vol.sum() - 100) < 2):
        warnings.append(f"Shares add up to {vol.sum():g}, not 1 or 100; they were rescaled to 100 %.")
    share = vol / vol.sum()
    typical_p = np.array([catalog.workloads[valid_wl[i]].prompt_tokens for i in wl], float)
    typical_o = np.array([catalog.workloads[valid_wl[i]].output_tokens for i in wl], float)
    p = lengths.get("prompt_tokens", typical_p)
    o = lengths.get("output_tokens", typical_o)
    L = len(valid_lang)
    key = wl * L + lang
    nseg = len(valid_wl) * L
    g_share = np.bincount(key, weights=share, minlength=nseg)
    g_req = np.bincount(key, weights=share / o, minlength=nseg)
    g_wp = np.bincount(key, weights=share / o * p, minlength=nseg)
    monthly = float(vol.sum()) if vol_col == "monthly_output_tokens" else None
    req_scale = monthly if monthly else 1.0
    segments = tuple(
        Segment(workload=valid_wl[k // L], language=valid_lang[k % L], requests=float(g_req[k] * req_scale),
                output_token_share=float(g_share[k]), mean_prompt_tokens=float(g_wp[k] / g_req[k]),
                mean_output_tokens=float(g_share[k] / g_req[k]))
        for k in sorted(range(nseg), key=lambda k: (valid_wl[k // L], valid_lang[k % L])) if g_share[k] > 0)
    ctx = np.array([s.mean_prompt_tokens + s.mean_output_tokens for s in segments])
    qs, edges, counts = _context_stats(ctx, np.array([s.requests for s in segments]))
    total_req = sum(s.requests for s in segments)
    note = (f"{_fmt_tokens(monthly)} output tokens/month: the sum of the mix table's monthly_output_tokens."
            if monthly else "A mix table of shares has no volume: enter the monthly volume on the Plan page.")
    prof = TrafficProfile(
        name=name, kind="mix", fmt=src.fmt, segments=segments, rows=tbl.num_rows, requests=total_req,
        output_tokens=monthly or 1.0, span_days=DAYS_PER_MONTH if monthly else None,
        monthly_output_tokens=monthly, arrival_rate_per_s=None, context_tokens_quantiles=qs,
        context_hist_edges=edges, context_hist_counts=counts, per_hour_requests=tuple([0.0] * 24),
        warnings=tuple(warnings), source_format=info.format_label, column_map=info.mapping,
        span_s=SECONDS_PER_MONTH if monthly else None, volume_note=note,
    )
    _check_sane(prof)
    return prof


def _check_sane(prof: TrafficProfile) -> None:
    """Nothing replaces a good profile unless every number in the new one is finite and plausible."""
    bad: list[str] = []

    def fin(x: float | None, what: str, low: float = 0.0) -> None:
        if x is not None and not (math.isfinite(x) and x >= low):
            bad.append(f"{what} = {x!r}")

    if not prof.segments:
        bad.append("no segment with requests")
    for s in prof.segments:
        fin(s.requests, f"requests of {s.workload}/{s.language}")
        fin(s.output_token_share, f"share of {s.workload}/{s.language}")
        fin(s.mean_prompt_tokens, f"mean prompt tokens of {s.workload}/{s.language}")
        fin(s.mean_output_tokens, f"mean output tokens of {s.workload}/{s.language}")
        if s.mean_output_tokens > MAX_TOKENS_PER_REQUEST or s.mean_prompt_tokens > MAX_TOKENS_PER_REQUEST:
            bad.append(f"mean tokens of {s.workload}/{s.language} above {MAX_TOKENS_PER_REQUEST:,}")
    total = sum(s.output_token_share for s in prof.segments)
    if not abs(total - 1.0) < 1e-6:
        bad.append(f"shares add up to {total!r}")
    fin(prof.requests, "requests")
    fin(prof.output_tokens, "output tokens")
    fin(prof.monthly_output_tokens, "monthly output tokens")
    for x in (prof.arrival_rate_per_s or ()) + (prof.hour_requests_per_s or ()) + prof.context_tokens_quantiles:
        fin(x, "a rate or context length")
    if bad:
        raise _fail("finite, plausible numbers throughout the profile (" + "; ".join(bad[:3]) + ")")
