"""A trace of one whole day is a day: 'covers 24.0 hours, less than a day' was said of requests from 00:00:00 to
23:59:30; hours print without a needless '.0'."""

from __future__ import annotations

import pytest

from profiles import load_catalog
from profiles.traffic import parse_traffic
from profiles.traffic.profile import fmt_span


def _azure_day(last: str) -> bytes:
    rows = [f"2023-11-16 {h:02d}:00:00.0000000,100,10" for h in range(24)] + [f"2023-11-16 {last},100,10"]
    return ("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n").encode()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_a_whole_day_of_requests_is_not_called_less_than_a_day(cat) -> None:
    prof = parse_traffic("AzureLLMInferenceTrace_code.csv", _azure_day("23:59:30.0000000"), cat)
    assert prof.span_s == pytest.approx(86370.0)
    assert "less than a day" not in prof.volume_note and "24 hours" in prof.volume_note
    assert "24.0" not in prof.volume_note
    assert prof.spans_a_day  # measured per hour of day, as a longer trace


def test_a_trace_short_of_a_day_by_more_than_5_minutes_still_says_so(cat) -> None:
    prof = parse_traffic("AzureLLMInferenceTrace_code.csv", _azure_day("23:30:00.0000000"), cat)
    assert "23.5 hours, less than a day" in prof.volume_note
    assert not prof.spans_a_day


def test_hours_print_without_a_needless_decimal() -> None:
    assert fmt_span(86370.0) == "24 hours" and fmt_span(3 * 3600) == "3 hours"
    assert fmt_span(36.5 * 3600) == "36.5 hours" and fmt_span(90.0) == "90 seconds"


@pytest.mark.parametrize("name", ["bilingual_saas.csv", "code_completion.jsonl", "rag_summarization.parquet"])
def test_the_one_day_samples_are_a_day(cat, name: str) -> None:
    from pathlib import Path

    data = (Path(__file__).resolve().parents[2] / "profiles" / "samples" / name).read_bytes()
    prof = parse_traffic(name, data, cat)
    assert "less than a day" not in prof.volume_note and prof.spans_a_day
