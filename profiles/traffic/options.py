"""How to read an upload: the column for each role and the rule that gives rows a workload."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from profiles.traffic.errors import clip, fail

# Workload rules are typed on the Traffic page ("def ", "translate", a model name): a few words each. The matcher
# is linear in text x rules (workload.py lower-cases once and searches plainly), so these bound the work.
MAX_RULE_CHARS = 256
MAX_RULES = 100
MAX_MAPPING_PAIRS = 10_000


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


def check_workload_rule(rule: WorkloadRule) -> None:
    """Refuse rule texts over MAX_RULE_CHARS, more than MAX_RULES rules or MAX_MAPPING_PAIRS mapped values,
    naming the rule, its length and the limit."""
    if len(rule.rules) > MAX_RULES:
        raise fail(f"at most {MAX_RULES} workload rules (this reading has {len(rule.rules):,})")
    for i, (col, text, _wl) in enumerate(rule.rules, start=1):
        for what, value in (("column", col), ("text", text)):
            if len(value) > MAX_RULE_CHARS:
                raise fail(f"a workload rule {what} of at most {MAX_RULE_CHARS} characters (rule {i}, "
                            f"'{clip(col, 40)} contains {clip(text, 40)}', has {len(value):,})")
    if len(rule.mapping) > MAX_MAPPING_PAIRS:
        raise fail(f"at most {MAX_MAPPING_PAIRS:,} mapped values (this reading has {len(rule.mapping):,})")


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
    detect_language: bool = True  # prompt text and no language column: languages from the text (traffic.language)


DEFAULT_OPTIONS = ParseOptions()


def options_json(options: ParseOptions | None) -> str:
    """The reading options as canonical JSON (sorted keys): stored beside a kept upload and hashed with it."""
    return json.dumps(dataclasses.asdict(options or ParseOptions()), sort_keys=True)


def options_from_json(text: str) -> ParseOptions:
    """The inverse of options_json (JSON lists back to the tuples the frozen dataclasses hold)."""
    d = json.loads(text)
    wl = d.pop("workload")
    rule = WorkloadRule(**{k: (tuple(tuple(x) for x in v) if isinstance(v, list) else v) for k, v in wl.items()})
    return ParseOptions(**{k: (tuple(tuple(x) for x in v) if isinstance(v, list) else v) for k, v in d.items()},
                        workload=rule)


def upload_digest(data: bytes, options: ParseOptions | None) -> str:
    """SHA-256 of an upload's bytes and its reading options: the same file read another way is another profile."""
    h = hashlib.sha256(data)  # fed in parts: no second copy of a large upload
    h.update(b"\0" + options_json(options).encode())
    return h.hexdigest()
