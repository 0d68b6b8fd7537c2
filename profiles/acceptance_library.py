"""The acceptance library's two tables, read and validated: measured acceptance per model, head, method, dataset, K
and temperature (acceptance.csv) and the public draft heads per model and method (heads.csv), under
profiles/data/acceptance/ by default. The planner gets plain frozen records
(planner.acceptance.library.AcceptanceLibrary).

Every error names the file, the row id, the column, the value and what is allowed. A missing file is an empty
table (the planner then falls back to its lower tiers: family fit, prior).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from planner.acceptance.library import CONVENTIONS, METHODS, AcceptanceLibrary, HeadRecord, LibraryRow

ACCEPTANCE_DIR = Path(__file__).resolve().parent / "data" / "acceptance"
ACCEPTANCE_COLUMNS = ("id", "source", "title", "date", "model", "model_key", "head", "method", "engine",
                      "engine_version", "gpu", "dataset", "workload", "k", "tree", "temperature", "acceptance_length",
                      "draft_acceptance_rate", "per_position", "per_position_convention", "notes", "quote", "verified")
HEADS_COLUMNS = ("model", "model_key", "method", "head", "source", "date", "notes")
NOT_STATED = "not stated"
# a tree as SGLang states it; a source may leave its width and node count unstated (such a row is kept as measured
# and never enters a fit: only chains and width-1 trees do)
TREE_RE = re.compile(r"^steps=(\d+),topk=(\d+|not stated),draft_tokens=(\d+|not stated)$")
# the source's date, or 'not stated' where it gives none, each with an optional note in brackets
DATE_RE = re.compile(r"^(\d{4}(-\d{2}(-\d{2})?)?|not stated)( \(.+\))?$")
DATE_ALLOWED = "an ISO date YYYY-MM-DD (or YYYY-MM, YYYY) or 'not stated', optionally followed by a note in brackets"
MAX_K = 64


class AcceptanceLibraryError(ValueError):
    """A row of the acceptance library holds a value outside what is allowed."""

    def __init__(self, file: str, row: str, column: str, value: Any, allowed: str):
        self.file, self.row, self.column, self.value = file, row, column, value
        super().__init__(f"{file}: row {row}: column '{column}' = {value!r} is not allowed: {allowed}")


def _read(path: Path, columns: tuple[str, ...]):
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise AcceptanceLibraryError(path.name, "(header)", missing[0], "(missing)",
                                     "the columns " + ", ".join(columns))
    return df.map(lambda v: v.strip() if isinstance(v, str) else v)


def _number(err, column: str, text: str, lo: float, hi: float, allowed: str, *, optional: bool = True
            ) -> float | None:
    if text == "" and optional:
        return None
    try:
        v = float(text)
    except ValueError:
        raise err(column, text, allowed) from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise err(column, text, allowed)
    return v


def _parse_row(file: str, rec: dict[str, str], line: int, model_keys: Iterable[str] | None,
               workload_keys: Iterable[str] | None) -> LibraryRow:
    rid = rec["id"] or f"(line {line})"

    def err(column: str, value: Any, allowed: str) -> AcceptanceLibraryError:
        return AcceptanceLibraryError(file, rid, column, value, allowed)

    if not rec["id"]:
        raise err("id", "", "a unique, non-empty row id")
    for col in ("source", "model", "dataset"):
        if not rec[col]:
            raise err(col, "", "text (the source, the model as the source names it, the dataset)")
    if not DATE_RE.match(rec["date"]):
        raise err("date", rec["date"], DATE_ALLOWED)
    if rec["method"] not in METHODS:
        raise err("method", rec["method"], "one of " + ", ".join(METHODS))
    if rec["model_key"] and model_keys is not None and rec["model_key"] not in set(model_keys):
        raise err("model_key", rec["model_key"], "a model name in profiles/data/models.yaml, or empty")
    if rec["workload"] and workload_keys is not None and rec["workload"] not in set(workload_keys):
        raise err("workload", rec["workload"], "a workload name in profiles/data/workloads.yaml, or empty")
    k = _number(err, "k", rec["k"], 1, MAX_K, f"an integer K from 1 to {MAX_K}", optional=False)
    if k != int(k):
        raise err("k", rec["k"], f"an integer K from 1 to {MAX_K}")
    k = int(k)
    tree = rec["tree"] or "chain"
    m = TREE_RE.match(tree)
    if tree != "chain" and m is None:
        raise err("tree", tree, "'chain' or 'steps=S,topk=T,draft_tokens=N' (T and N may be 'not stated')")
    temp = None if rec["temperature"].lower() in ("", NOT_STATED) else _number(
        err, "temperature", rec["temperature"], 0.0, 2.0, "a number from 0 to 2, or 'not stated'")
    # tokens a step can accept besides the bonus one (a tree of unstated size: up to the largest K we read)
    verify_k = (int(m.group(3)) - 1 if m.group(3).isdigit() else MAX_K) if m else k
    tau = _number(err, "acceptance_length", rec["acceptance_length"], 1.0, verify_k + 1.0,
                  f"tau including the bonus token, from 1 to K+1 = {verify_k + 1}")
    rate = _number(err, "draft_acceptance_rate", rec["draft_acceptance_rate"], 0.0, 1.0,
                   "vLLM's accepted / drafted, a fraction from 0 to 1 (not percent)")
    per_pos: tuple[float, ...] = ()
    conv = rec["per_position_convention"]
    if rec["per_position"]:
        try:
            per_pos = tuple(float(x) for x in rec["per_position"].split(";"))
        except ValueError:
            raise err("per_position", rec["per_position"], "numbers separated by ';' (e.g. 0.8;0.6;0.45)") from None
        if any(not (0.0 <= x <= 1.0) for x in per_pos):
            raise err("per_position", rec["per_position"], "rates from 0 to 1 per draft position")
        if len(per_pos) > k:
            raise err("per_position", rec["per_position"], f"at most K={k} positions")
        if conv not in CONVENTIONS:
            raise err("per_position_convention", conv, " or ".join(CONVENTIONS))
        if conv == "unconditional" and any(b > a + 1e-9 for a, b in zip(per_pos, per_pos[1:], strict=False)):
            raise err("per_position", rec["per_position"],
                      "non-increasing rates: unconditional p_i = accepted_per_pos[i] / num_drafts never grows")
    elif conv:
        raise err("per_position_convention", conv, "empty when per_position is empty")
    if tau is None and rate is not None:
        tau = 1.0 + rate * verify_k  # vLLM: rate = (tau - 1) / K
    if tau is None and not per_pos:
        raise err("acceptance_length", "", "a measured tau (or draft_acceptance_rate, or per_position)")
    return LibraryRow(id=rec["id"], source=rec["source"], title=rec["title"], date=rec["date"], model=rec["model"],
                      model_key=rec["model_key"], head=rec["head"], method=rec["method"], engine=rec["engine"],
                      dataset=rec["dataset"], workload=rec["workload"], k=k, tree=tree, temperature=temp,
                      acceptance_length=tau, per_position=per_pos, per_position_convention=conv if per_pos else "")


def load_rows(path: str | Path, *, model_keys: Iterable[str] | None = None,
              workload_keys: Iterable[str] | None = None) -> tuple[LibraryRow, ...]:
    """acceptance.csv -> validated rows (an absent file: none)."""
    path = Path(path)
    if not path.is_file():
        return ()
    df = _read(path, ACCEPTANCE_COLUMNS)
    keys = list(model_keys) if model_keys is not None else None
    wls = list(workload_keys) if workload_keys is not None else None
    rows, seen = [], set()
    for i, rec in enumerate(df.to_dict("records")):
        row = _parse_row(path.name, rec, i + 2, keys, wls)
        if row.id in seen:
            raise AcceptanceLibraryError(path.name, row.id, "id", row.id, "a unique row id (this one repeats)")
        seen.add(row.id)
        rows.append(row)
    return tuple(rows)


def load_heads(path: str | Path, *, model_keys: Iterable[str] | None = None) -> tuple[HeadRecord, ...]:
    """heads.csv -> validated public heads (an absent file: none). Rows are named by their line (heads.csv has no
    id column)."""
    path = Path(path)
    if not path.is_file():
        return ()
    df = _read(path, HEADS_COLUMNS)
    keys = set(model_keys) if model_keys is not None else None
    out = []
    for i, rec in enumerate(df.to_dict("records")):
        rid = f"line {i + 2} ({rec['head'] or rec['model']})"
        if rec["method"] not in METHODS:
            raise AcceptanceLibraryError(path.name, rid, "method", rec["method"], "one of " + ", ".join(METHODS))
        for col in ("model", "head", "source"):
            if not rec[col]:
                raise AcceptanceLibraryError(path.name, rid, col, "", "text (the model, the head's id or 'native "
                                                                      "MTP', a checkable source)")
        if rec["model_key"] and keys is not None and rec["model_key"] not in keys:
            raise AcceptanceLibraryError(path.name, rid, "model_key", rec["model_key"],
                                         "a model name in profiles/data/models.yaml, or empty")
        if not DATE_RE.match(rec["date"]):
            raise AcceptanceLibraryError(path.name, rid, "date", rec["date"], DATE_ALLOWED)
        out.append(HeadRecord(rec["model"], rec["model_key"], rec["method"], rec["head"], rec["source"], rec["date"],
                              rec["notes"]))
    return tuple(out)


def load_library(directory: str | Path | None = None, *, model_keys: Iterable[str] | None = None,
                 workload_keys: Iterable[str] | None = None) -> AcceptanceLibrary:
    """acceptance.csv and heads.csv of `directory` (default profiles/data/acceptance/) as the planner's
    AcceptanceLibrary; either file may be absent."""
    d = Path(directory) if directory is not None else ACCEPTANCE_DIR
    keys = list(model_keys) if model_keys is not None else None
    return AcceptanceLibrary(rows=load_rows(d / "acceptance.csv", model_keys=keys, workload_keys=workload_keys),
                             heads=load_heads(d / "heads.csv", model_keys=keys), path=str(d))
