"""Bounds on an upload: size, rows, columns, cell length, decoded bytes, tokens per request, dates. Every reader
checks them from headers and metadata before it decodes anything (the bomb guards in `guards`)."""

from __future__ import annotations

import pandas as pd

from planner.fleet import DAYS_PER_MONTH  # one value for the planner and the traffic: 365.25 / 12

# 100 MiB: about 2 million per-request CSV rows (.streamlit/config.toml lets a little more reach the page)
MAX_UPLOAD_BYTES = 100 * 1024 * 1024
MAX_ROWS = 2_000_000
MAX_COLUMNS = 1_000  # the widest known export (LiteLLM spend logs) has ~40 columns
# Python's csv module default field limit; ~32k tokens of prompt text. Longer cells are not traffic metadata.
MAX_FIELD_CHARS = 131_072
MAX_HEADER_BYTES = 1 << 20  # the header line (CSV) or first record (JSONL) must end within 1 MiB
# Parquet: bytes the selected columns may take once decompressed (footer metadata, dictionary pages included).
MAX_DECODED_BYTES = 512 * 1024 * 1024
MAX_PARQUET_FOOTER_BYTES = 16 * 1024 * 1024
# Page headers walked (in Python) over the selected columns: Arrow's writer cuts a page at 1 MiB or 20,000 rows,
# so 2 million rows of ten columns take ~1,000; 100,000 are walked in ~0.5 s.
MAX_PARQUET_PAGES = 100_000
PARQUET_BATCH_ROWS = 1 << 16  # rows decoded at a time from a Parquet file
MAX_XLSX_XML_BYTES = 1024 * 1024 * 1024  # uncompressed sheet + shared-strings XML (zip-bomb guard)
MAX_JSON_DOC_BYTES = 32 * 1024 * 1024  # a single JSON document (guidellm report, JSON array), streamed
# Objects and lists open at once in a JSON document (a guidellm report nests ~8 deep): ijson's item builder costs
# quadratic time and memory in the depth (40,000 nested lists, an 80 KB file: 12 s and 3.8 GB).
MAX_JSON_DEPTH = 64
# Characters of one JSON number: yajl re-reads a number cut by its input buffer, so its cost grows with the square
# of its length (a 16 MiB integer: 9.7 s per pass). A token count or a Unix time in ns has at most 20 digits.
MAX_JSON_NUMBER_CHARS = 100
CSV_BLOCK_BYTES = 1 << 20  # CSV is decoded one 1 MiB block at a time; a longer row is refused
# One request record: a JSON line or an element of a JSON document (a CSV row is bounded by CSV_BLOCK_BYTES). A
# record of 1 MiB builds at most ~35 MB of Python objects.
MAX_RECORD_BYTES = 1 << 20
# No served model has a context above ~10M tokens; a request beyond 1,048,576 (2^20) tokens is a unit
# error (characters or bytes instead of tokens), not traffic.
MAX_TOKENS_PER_REQUEST = 1_048_576
MAX_WEIGHT = 1_000_000  # one sampled row standing for more than a million requests is a typo
MAX_BUCKET_REQUESTS = 1e10  # aggregated exports: requests in one time bucket
MIN_TIMESTAMP = pd.Timestamp("2000-01-01", tz="UTC")
MAX_TIMESTAMP = pd.Timestamp("2100-01-01", tz="UTC")
SECONDS_PER_MONTH = DAYS_PER_MONTH * 86400.0
MAX_DISTINCT_VALUES = 100_000  # values of one column listed for mapping to workloads (a category, not an id)
MAX_PROBLEMS = 20  # problems listed per upload; the count of the rest is given
MAX_MESSAGE_CHARS = 500  # one problem's text, whatever the file holds
MAX_VALUE_CHARS = 60  # a cell value quoted in a problem
Z95 = 1.959964  # two-sided 95 % normal quantile
