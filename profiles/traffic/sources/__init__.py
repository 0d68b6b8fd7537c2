"""Readers, one per file format and per result file that is not a plain table (vllm bench serve, guidellm);
known exports (Azure, BurstGPT, LiteLLM, OpenAI) are tables recognised by their columns (`exports`). Each reader
checks the bounds from headers and metadata first and returns a `Source`: the file's columns and a bounded reader
of the selected ones."""

from __future__ import annotations

from profiles.traffic.guards import check_size, refuse_not_a_table
from profiles.traffic.options import ParseOptions
from profiles.traffic.sources.base import Format, Source
from profiles.traffic.sources.delimited import csv_source
from profiles.traffic.sources.json_doc import json_doc_source
from profiles.traffic.sources.jsonl import jsonl_source
from profiles.traffic.sources.parquet import parquet_source
from profiles.traffic.sources.xlsx import xlsx_source

READERS = {"csv": csv_source, "jsonl": jsonl_source, "json": json_doc_source, "parquet": parquet_source,
           "xlsx": xlsx_source}



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


def open_source(name: str, data: bytes, options: ParseOptions, max_bytes: int) -> Source:
    """The reader for the upload's format, once its size is within `max_bytes`."""
    if not isinstance(data, (bytes, bytearray)):
        data = bytes(data)
    check_size(data, max_bytes)
    data = bytes(data)
    fmt = detect_format(name, data)
    refuse_not_a_table(data, fmt)
    return READERS[fmt](data, options)
