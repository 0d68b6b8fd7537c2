"""Prompts for a calibration run from an uploaded traffic export (CSV, JSONL or Parquet) with a
`prompt_text` column and an optional `workload` column. The planner's traffic parser discards prompt text
(profiles/traffic/); only a calibration run uses it, and only in memory (never stored: the store keeps a
hash of the prompt set)."""

from __future__ import annotations

import io
import re

MAX_PROMPT_CHARS = 8000  # longer prompts are cut: calibration measures decode, not long prefill
MAX_PROMPTS_PER_WORKLOAD = 64
WORKLOAD_RE = re.compile(r"[^a-z0-9_-]+")


def _workload_name(raw: object) -> str:
    name = WORKLOAD_RE.sub("-", str(raw).strip().lower()).strip("-")[:32]
    return name or "uploaded"


def prompts_from_upload(filename: str, data: bytes, *, per_workload: int = MAX_PROMPTS_PER_WORKLOAD
                        ) -> dict[str, list[str]]:
    """{workload: [prompt, ...]} from an uploaded file; raises ValueError naming what is wrong."""
    import pandas as pd

    name = filename.lower()
    try:
        if name.endswith(".csv"):
            df = pd.read_csv(io.BytesIO(data))
        elif name.endswith((".jsonl", ".ndjson")):
            df = pd.read_json(io.BytesIO(data), lines=True)
        elif name.endswith(".parquet"):
            df = pd.read_parquet(io.BytesIO(data))
        else:
            raise ValueError(f"file={filename!r} not allowed: upload .csv, .jsonl or .parquet")
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - any parser error becomes one clear message
        raise ValueError(f"file={filename!r} could not be read: {type(e).__name__}: {e}") from e
    if "prompt_text" not in df.columns:
        raise ValueError(f"file={filename!r} has no 'prompt_text' column; columns: {list(df.columns)[:12]}")
    if not 1 <= per_workload <= MAX_PROMPTS_PER_WORKLOAD:
        raise ValueError(f"per_workload={per_workload} not allowed: 1..{MAX_PROMPTS_PER_WORKLOAD}")
    out: dict[str, list[str]] = {}
    workloads = df["workload"] if "workload" in df.columns else ["uploaded"] * len(df)
    for w, text in zip(workloads, df["prompt_text"], strict=True):
        if not isinstance(text, str) or not text.strip():
            continue
        bucket = out.setdefault(_workload_name(w), [])
        if len(bucket) < per_workload:
            bucket.append(text[:MAX_PROMPT_CHARS])
    if not out:
        raise ValueError(f"file={filename!r}: no non-empty prompt_text values")
    return out
