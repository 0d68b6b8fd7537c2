"""Workload-rule matching benchmark (prints figures; no assertions): `python benchmarks/bench_rules.py [MiB]`.

Case-insensitive "column contains text" over a column of prompt text, the rule text 100, 900 and 4,000 characters
long, on the worst text for it (the rule's first characters repeated, so every position is a partial match) and on
ordinary words:

- before: `pc.match_substring(ignore_case=True)` (RE2: its DFA gives up on a case-folded literal of ~900 characters
  and the fallback costs seconds per MiB);
- after: the matcher profiles/traffic/workload.py uses (the column lower-cased once, then a plain substring
  search, linear in text and rule).

CPU seconds per MiB of text are printed (the process's user + system time; other work on the machine does not
count). The rule length limit (MAX_RULE_CHARS) refuses the longer rules before any matching; they are measured
here to show the matcher has no slow case even without it.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiles.traffic.options import MAX_RULE_CHARS  # noqa: E402
from profiles.traffic.workload import contains_text, lower_column, lower_text  # noqa: E402

MIB = 2**20


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _column(text: str, mib: float) -> pa.ChunkedArray:
    n = max(1, int(mib * MIB) // len(text.encode()))
    return pa.chunked_array([pa.array([text] * n, pa.string())])


def before(col: pa.ChunkedArray, rule: str) -> int:
    return int(pc.sum(pc.match_substring(col, rule, ignore_case=True)).as_py() or 0)


def after(col: pa.ChunkedArray, rule: str) -> int:
    needle = lower_text(rule)
    return sum(int(contains_text(chunk, needle).sum()) for chunk in lower_column(col).chunks)


def timed(fn, col: pa.ChunkedArray, rule: str, mib: float) -> str:
    t = _cpu_s()
    hits = fn(col, rule)
    dt = _cpu_s() - t
    return f"{dt:7.3f} s ({dt / mib:7.3f} s/MiB, {hits:,} hits)"


def main(mib: float = 4.0) -> None:
    print(f"Workload rule matching, {mib:g} MiB of text per case (CPU time); MAX_RULE_CHARS = {MAX_RULE_CHARS}")
    words = "Please ÉCRIVEZ a short summary of the following document and translate it to English. " * 12
    for length in (100, 900, 4000):
        worst_rule = "a" * (length - 1) + "b"
        cases = (("worst case: 'aaa...b' in 'aaa...'", _column("A" * 5000, mib), worst_rule),
                 ("words: a rule that is not there", _column(words, mib), ("écrivez un résumé " * 300)[:length]))
        for label, col, rule in cases:
            print(f"  rule of {length:5,} chars, {label:36s} before {timed(before, col, rule, mib)}   "
                  f"after {timed(after, col, rule, mib)}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
