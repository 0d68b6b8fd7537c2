"""Workload rules: a rule text over MAX_RULE_CHARS (or too many rules) is refused naming the rule, its length and
the limit; the matcher is case-insensitive (non-ASCII letters included) on plain and dictionary-encoded columns,
and has no slow case: the rule that made RE2 fall back to ~8 s per MiB of text is matched in linear time."""

from __future__ import annotations

import io
import resource

import pandas as pd
import pyarrow as pa
import pytest

from profiles import load_catalog
from profiles.traffic import ParseOptions, TrafficError, WorkloadRule, parse_traffic
from profiles.traffic.options import MAX_RULE_CHARS, MAX_RULES, check_workload_rule
from profiles.traffic.workload import contains_text, lower_column, lower_text


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def csv_of(prompts: list[str]) -> bytes:
    out = io.StringIO()
    pd.DataFrame({"timestamp": [f"2026-11-01T00:{i // 60:02d}:{i % 60:02d}Z" for i in range(len(prompts))],
                  "prompt_text": prompts, "prompt_tokens": 10, "output_tokens": 100}).to_csv(out, index=False)
    return out.getvalue().encode()


def parse_rules(cat, data: bytes, rules, name: str = "t.csv"):
    rule = WorkloadRule(mode="rules", rules=tuple(rules), workload="chat")
    return parse_traffic(name, data, cat, options=ParseOptions(workload=rule))


def test_a_rule_over_the_limit_is_refused_naming_rule_length_and_limit(cat):
    long = "x" * (MAX_RULE_CHARS + 1)
    with pytest.raises(TrafficError) as ei:
        parse_rules(cat, csv_of(["hello"]), [("prompt_text", "def ", "code"), ("prompt_text", long, "code")])
    msg = str(ei.value)
    assert f"at most {MAX_RULE_CHARS} characters" in msg
    assert "rule 2" in msg and f"has {MAX_RULE_CHARS + 1:,}" in msg
    with pytest.raises(TrafficError, match=f"at most {MAX_RULES} workload rules"):
        check_workload_rule(WorkloadRule(mode="rules", rules=(("prompt_text", "a", "chat"),) * (MAX_RULES + 1)))
    check_workload_rule(WorkloadRule(mode="rules", rules=(("prompt_text", "y" * MAX_RULE_CHARS, "chat"),)))


def test_matching_ignores_case_including_non_ascii(cat):
    prompts = ["Écrivez une fonction", "ÉCRIVEZ UN RÉSUMÉ", "écrivez", "Straße", "İstanbul trip", "hello"]
    prof = parse_rules(cat, csv_of(prompts), [("prompt_text", "éCRIVEZ UNE", "code"), ("prompt_text", "résumé",
                                                                                        "rag_summarization"),
                                              ("prompt_text", "STRASSE", "agent"), ("prompt_text", "straße", "agent"),
                                              ("prompt_text", "İSTANBUL", "translation")])
    n = len(prompts)
    # 'écrivez' alone matches neither 'écrivez une' nor 'résumé'; 'Straße' is not 'STRASSE' (no ß -> ss folding)
    assert prof.workload_shares == pytest.approx({"code": 1 / n, "rag_summarization": 1 / n, "agent": 1 / n,
                                                  "translation": 1 / n, "chat": 2 / n})


def test_dictionary_encoded_column_is_matched_per_value(cat):
    df = pd.DataFrame({"timestamp": pd.date_range("2026-11-01", periods=6, freq="min", tz="UTC"),
                       "prompt_text": pd.Categorical(["Def main", "DEF x", "hi", "hi", "ÉLAN", "élan"]),
                       "prompt_tokens": 10, "output_tokens": 100})
    buf = io.BytesIO()
    df.to_parquet(buf)
    prof = parse_rules(cat, buf.getvalue(), [("prompt_text", "def", "code"), ("prompt_text", "Élan", "agent")],
                       name="t.parquet")
    assert prof.workload_shares == pytest.approx({"code": 2 / 6, "agent": 2 / 6, "chat": 2 / 6})


def test_lower_casing_is_the_same_on_both_sides():
    col = pa.chunked_array([pa.array(["İ", "É", "Σ", None])])
    assert lower_column(col).to_pylist() == [lower_text("İ"), lower_text("É"), lower_text("Σ"), None]
    assert lower_text("ÉCOLE") == "école"


def test_the_rule_that_was_slow_is_linear(cat):
    """A rule at the limit whose every prefix matches everywhere ('aaa...b' in 'AAA...'): RE2 fell back to
    ~8 s per MiB with a 900-character rule; 8 MiB through parse_traffic now takes well under a second of CPU."""
    rows = 1600
    data = csv_of(["A" * 5000] * rows)
    rule = "a" * (MAX_RULE_CHARS - 1) + "b"
    t = resource.getrusage(resource.RUSAGE_SELF)
    prof = parse_rules(cat, data, [("prompt_text", rule, "code"), ("prompt_text", "a" * MAX_RULE_CHARS, "agent")])
    u = resource.getrusage(resource.RUSAGE_SELF)
    assert prof.workload_shares == pytest.approx({"agent": 1.0})
    assert (u.ru_utime + u.ru_stime) - (t.ru_utime + t.ru_stime) < 2.0


def test_the_matcher_has_no_slow_case_even_past_the_limit():
    """The matcher itself, with a 4,000-character needle over 8 MiB: `match_substring(ignore_case=True)` took
    ~8-16 s per MiB on this input (benchmarks/bench_rules.py)."""
    col = pa.chunked_array([pa.array(["A" * 5000] * 1600)])
    needle = lower_text("a" * 3999 + "B")
    t = resource.getrusage(resource.RUSAGE_SELF)
    hits = contains_text(lower_column(col).chunk(0), needle)
    u = resource.getrusage(resource.RUSAGE_SELF)
    assert not hits.any() and contains_text(lower_column(col).chunk(0), "a" * 4000).all()
    assert (u.ru_utime + u.ru_stime) - (t.ru_utime + t.ru_stime) < 0.5
