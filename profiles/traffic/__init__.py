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
values map to workloads, or substring rules on prompt text / model / endpoint (`ParseOptions`). A column that looks
like a model group, project or route (`WORKLOAD_CANDIDATES`: LiteLLM's model_group, the OpenAI usage export's
project_id, a gateway's route or deployment) is reported as `FileInfo.workload_candidates`; `column_values` gives its
values and `guess_workload` the workload each value's name suggests (the Traffic page presets its pickers with them).
Files with prompt text and no language column get their languages from the text (`language`: a detector on an
evenly spaced sample of at most 2,000 rows; Chinese text makes a segment Mandarin; `ParseOptions.detect_language`).

Volume: the observed output-token rate (tokens / first-to-last span) x seconds in an average month, from any
span longer than zero, with a 95 % interval and a sentence saying what it rests on (`volume_note`). The daily
shape comes from the trace when it spans a day or more (`hourly_arrivals`), else from a shape the user picks. A file
whose timestamps sit on buckets coarser than a minute (counts per 5 minutes, hour or day) has no arrival rate per
minute: its concurrency is unknown and `TrafficProfile.arrival_note` says why.

Bounded ingestion: every reader is bounded by what it decodes, not by what a header claims (Parquet: rows and
columns from the footer, decompressed bytes from every page header; CSV: each line's bytes and separators counted
before pyarrow splits a row; xlsx: the zip directory; a JSON document: at most 32 MiB, streamed one record at a
time; JSON lines: 1 MiB a line); only the columns the profile needs are decoded, in bounded pieces; a cell holds
at most `MAX_FIELD_CHARS` characters. Every error names row, column and value
(`TrafficError.problems`) in at most `MAX_MESSAGE_CHARS` characters. A profile is returned only when every
number in it is finite and sane.

The rooms: `sources` (one reader per format and per result file; known exports in `sources.exports`), `columns`
(roles and the column mapping), `options` and `workload` (workload rules), `language` (languages from prompt
text), `limits` and `guards` (bounds, bomb guards, files that are not a table), `validate` and `times` (cells),
`per_request`, `mix` and `volume` (building the profile), `profile` (the profile itself) and `parse` (the entry
points below).
"""

from profiles.traffic.columns import (
    MIX_OPTIONAL,
    MIX_REQUIRED,
    MIX_VOLUME,
    REQUEST_OPTIONAL,
    REQUEST_REQUIRED,
    ROLE_LABELS,
    ROLES,
    SYNONYMS,
    WORKLOAD_CANDIDATES,
    FileInfo,
    norm,
)
from profiles.traffic.errors import Problem, TrafficError
from profiles.traffic.limits import (
    CSV_BLOCK_BYTES,
    DAYS_PER_MONTH,
    MAX_BUCKET_REQUESTS,
    MAX_COLUMNS,
    MAX_DECODED_BYTES,
    MAX_FIELD_CHARS,
    MAX_HEADER_BYTES,
    MAX_JSON_DOC_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_PARQUET_FOOTER_BYTES,
    MAX_PROBLEMS,
    MAX_ROWS,
    MAX_TIMESTAMP,
    MAX_TOKENS_PER_REQUEST,
    MAX_UPLOAD_BYTES,
    MAX_VALUE_CHARS,
    MAX_WEIGHT,
    MAX_XLSX_XML_BYTES,
    MIN_TIMESTAMP,
    SECONDS_PER_MONTH,
)
from profiles.traffic.options import DEFAULT_OPTIONS, ParseOptions, WorkloadRule
from profiles.traffic.parse import column_values, inspect_upload, parse_traffic
from profiles.traffic.profile import (
    SHAPE_LABELS,
    SHAPES,
    HourlyArrivals,
    Segment,
    TrafficProfile,
    single_segment_profile,
)
from profiles.traffic.sources import detect_format
from profiles.traffic.sources.delimited import DELIMITERS
from profiles.traffic.sources.exports import KNOWN_FORMATS, KnownFormat
from profiles.traffic.sources.guidellm import LABEL as GUIDELLM
from profiles.traffic.sources.vllm_bench import LABEL as VLLM_BENCH
from profiles.traffic.workload import WORKLOAD_HINTS, guess_workload

__all__ = [
    "CSV_BLOCK_BYTES", "DAYS_PER_MONTH", "DEFAULT_OPTIONS", "DELIMITERS", "GUIDELLM", "KNOWN_FORMATS",
    "MAX_BUCKET_REQUESTS", "MAX_COLUMNS", "MAX_DECODED_BYTES", "MAX_FIELD_CHARS", "MAX_HEADER_BYTES",
    "MAX_JSON_DOC_BYTES", "MAX_MESSAGE_CHARS", "MAX_PARQUET_FOOTER_BYTES", "MAX_PROBLEMS", "MAX_ROWS",
    "MAX_TIMESTAMP", "MAX_TOKENS_PER_REQUEST", "MAX_UPLOAD_BYTES", "MAX_VALUE_CHARS", "MAX_WEIGHT",
    "MAX_XLSX_XML_BYTES", "MIN_TIMESTAMP", "MIX_OPTIONAL", "MIX_REQUIRED", "MIX_VOLUME", "REQUEST_OPTIONAL",
    "REQUEST_REQUIRED", "ROLES", "ROLE_LABELS", "SECONDS_PER_MONTH", "SHAPES", "SHAPE_LABELS", "SYNONYMS",
    "VLLM_BENCH", "WORKLOAD_CANDIDATES", "WORKLOAD_HINTS", "FileInfo", "HourlyArrivals", "KnownFormat",
    "ParseOptions", "Problem", "Segment", "TrafficError", "TrafficProfile", "WorkloadRule", "column_values",
    "detect_format", "guess_workload", "inspect_upload", "norm", "parse_traffic", "single_segment_profile",
]
