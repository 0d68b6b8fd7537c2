"""Workload rules: how rows get a workload (the file's column, one workload for the file, a column's values
mapped to workloads, or substring rules on prompt text / model / endpoint; `options.WorkloadRule`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiles.traffic.columns import FileInfo, norm
from profiles.traffic.errors import clip, fail, listing, short_value
from profiles.traffic.options import WorkloadRule, check_workload_rule
from profiles.traffic.validate import Problems, as_text, category_codes, per_value

MAX_NOTED_GUESSES = 6  # values named in the note
MAX_DISTINCT_GUESSES = 1_000  # values remembered for the note (a column of ids must not grow it without bound)

# Words in a file name or in a value of a workload-like column (a model group, a project, a route) and the
# workload they suggest, first match wins: "code" also matches coder and codestral; Chinese names as teams write them.
WORKLOAD_HINTS = (("code", "code"), ("copilot", "code"), ("codex", "code"), ("代码", "code"), ("编程", "code"),
                  ("conv", "chat"), ("chat", "chat"), ("客服", "chat"), ("对话", "chat"), ("rag", "rag_summarization"),
                  ("summar", "rag_summarization"), ("retriev", "rag_summarization"), ("摘要", "rag_summarization"),
                  ("总结", "rag_summarization"), ("agent", "agent"), ("tool", "agent"), ("智能体", "agent"),
                  ("reason", "reasoning"), ("think", "reasoning"), ("推理", "reasoning"), ("translat", "translation"),
                  ("翻译", "translation"))


def guess_workload(name: str, valid: list[str]) -> str | None:
    """The workload a file name or a column value suggests (WORKLOAD_HINTS, case-insensitive), None when none."""
    low = name.lower()
    for key, wl in WORKLOAD_HINTS:
        if key in low and wl in valid:
            return wl
    return None



@dataclass
class WorkloadState:
    """Where the workloads came from, and how many rows fell to the default, summed over batches."""

    base: str = ""
    unmatched: int = 0
    default: str = ""
    unmatched_text: str = ""
    candidate: str = ""  # auto mode: the workload-like column whose values' names were read
    guessed: dict[str, str] = field(default_factory=dict)  # its values that suggested a workload -> that workload

    def note(self) -> str:
        if self.guessed:
            shown = ", ".join(f"{clip(v, 40)} -> {w}" for v, w in list(self.guessed.items())[:MAX_NOTED_GUESSES])
            more = f" and {len(self.guessed) - MAX_NOTED_GUESSES} more" if len(self.guessed) > MAX_NOTED_GUESSES else ""
            base = (f"workloads guessed from the names of the values of '{clip(self.candidate, 60)}', counted as: "
                    f"{shown}{more}; change them on the Traffic page")
            if not self.unmatched:
                return base
            return f"{base}; {self.unmatched:,} rows with other values counted as '{self.default}'"
        if not self.unmatched or self.candidate:
            return self.base
        return f"{self.base}; {self.unmatched:,} rows {self.unmatched_text} counted as '{self.default}'"


def workload_codes(tbl: pa.Table, info: FileInfo, rule: WorkloadRule, name: str, valid: list[str],
                    probs: Problems, state: WorkloadState) -> np.ndarray:
    """Workload codes (into `valid`) for one batch, by the WorkloadRule (see its docstring)."""
    n = tbl.num_rows
    roles = info.roles

    def check(wl: str, what: str) -> int:
        key = norm(wl)
        match = next((i for i, v in enumerate(valid) if v == key), None)
        if match is None:
            raise fail(f"a known workload for {what}: one of {', '.join(sorted(valid))}", value=wl)
        return match

    default_name = rule.workload or "chat"
    if rule.mode == "auto":
        if "workload" in roles:
            col = roles["workload"]
            state.base = f"workloads from the column '{col}'"
            return category_codes(tbl.column(col), col, valid, probs, "workload")
        guess = rule.workload or guess_workload(name, valid)
        wl = guess or "chat"
        how = ("chosen" if rule.workload else f"guessed from the file name '{clip(name, 60)}'" if guess
               else "the default: the file has no workload column")
        cands = info.workload_candidates
        offer = (f"; the column '{clip(cands[0], 60)}' looks like a workload: map its values on the Traffic page"
                 if cands else "; pick the workload or map a column on the Traffic page")
        state.base = f"every request counted as '{wl}' ({how}){offer}"
        fallback = check(wl, "the whole file")
        if not cands or rule.workload:
            return np.full(n, fallback)
        # a workload-like column (model_group, project_id, route ...): a value whose name suggests a workload
        # ('code-assistant', 'qwen-coder') counts as it; the other rows as the file's one workload
        col = state.candidate = cands[0]

        def guess_codes(a: pa.Array) -> np.ndarray:
            out = []
            for v in as_text(a).to_pylist():
                g = guess_workload(v, valid) if v else None
                if g is not None and v not in state.guessed and len(state.guessed) < MAX_DISTINCT_GUESSES:
                    state.guessed[v] = g
                out.append(valid.index(g) if g is not None else -1)
            return np.array(out, dtype=np.int64)

        codes = per_value(tbl.column(col), guess_codes, -1, encode=True).astype(np.int64)
        state.default = valid[fallback]
        state.unmatched += int((codes < 0).sum())
        return np.where(codes < 0, fallback, codes)
    if rule.mode == "fixed":
        state.base = f"every request counted as '{default_name}' (chosen)"
        return np.full(n, check(default_name, "the whole file"))
    default = check(default_name, "rows that nothing matches")
    state.default = valid[default]
    if rule.mode == "map":
        col = _resolve_rule_column(rule.column, info)
        mapping = {norm(k): check(v, f"the value {short_value(k)}") for k, v in rule.mapping}
        direct = {norm(v): i for i, v in enumerate(valid)}
        codes = per_value(tbl.column(col), lambda a: np.array(
            [mapping.get(norm(w), direct.get(norm(w), -1)) for w in as_text(a).to_pylist()], dtype=np.int64),
            -1, encode=True).astype(np.int64)
        state.base = f"workloads from the values of '{col}'"
        state.unmatched_text = "with other values"
    elif rule.mode == "rules":
        check_workload_rule(rule)
        codes = np.full(n, -1, dtype=np.int64)
        lowered: dict[str, pa.ChunkedArray] = {}
        for rcol, text, wl in rule.rules:
            col = _resolve_rule_column(rcol, info)
            target = check(wl, f"the rule '{clip(rcol, 40)} contains {clip(text, 40)}'")
            if not text:
                continue
            if col not in lowered:
                lowered[col] = lower_column(tbl.column(col))
            needle = lower_text(text)
            hit = per_value(lowered[col], lambda a, needle=needle: contains_text(a, needle), False).astype(bool)
            codes = np.where((codes < 0) & hit, target, codes)
        state.base = f"workloads from {len(rule.rules)} rule{'s' if len(rule.rules) != 1 else ''}"
        state.unmatched_text = "that no rule matches"
    else:
        raise fail("a workload mode among auto, fixed, map, rules", value=rule.mode)
    state.unmatched += int((codes < 0).sum())
    return np.where(codes < 0, default, codes)


def lower_text(text: str) -> str:
    """Arrow's lower-casing (the one the column gets), not Python's: 'İ' is one character on both sides."""
    return pc.utf8_lower(pa.scalar(text, pa.string())).as_py()


def lower_column(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column as lower-case text, once per batch for all rules on it (a dictionary's values only).

    Case-insensitive search is lower-casing both sides, then a plain substring search (linear in the text and
    the rule): `match_substring(ignore_case=True)` goes through RE2, whose DFA gives up on a case-folded literal
    of ~900 characters and falls back to a search that costs ~8 s per MiB of text."""
    chunks = []
    for chunk in arr.chunks:
        if pa.types.is_dictionary(chunk.type):
            chunks.append(pa.DictionaryArray.from_arrays(chunk.indices, pc.utf8_lower(as_text(chunk.dictionary))))
        else:
            chunks.append(pc.utf8_lower(as_text(chunk)))
    return pa.chunked_array(chunks, pa.string()) if not chunks else pa.chunked_array(chunks)


def contains_text(lowered: pa.Array, needle: str) -> np.ndarray:
    """Rows of a lower-cased text array that contain the lower-cased `needle` (a plain substring search)."""
    return pc.match_substring(lowered, needle).fill_null(False).to_numpy(zero_copy_only=False)


def _resolve_rule_column(col: str, info: FileInfo) -> str:
    roles = info.roles
    if col in roles and col not in info.columns:
        return roles[col]
    if col in info.columns:
        return col
    match = {norm(c): c for c in info.columns}.get(norm(col))
    if match is None:
        raise fail(f"a column of the file (or one of prompt_text, model, endpoint); the file's columns are: "
                    f"{listing(info.columns)}", column=col)
    return match


def rule_columns(rule: WorkloadRule, info: FileInfo) -> list[str]:
    if rule.mode == "auto":  # a workload-like column read for its values' names (no workload column, none chosen)
        auto = "workload" not in info.roles and not rule.workload and info.workload_candidates
        return [info.workload_candidates[0]] if auto else []
    if rule.mode == "map":
        return [_resolve_rule_column(rule.column, info)]
    if rule.mode == "rules":
        check_workload_rule(rule)
        return [_resolve_rule_column(c, info) for c, _t, _w in rule.rules]
    return []

