"""profiles.traffic.language: the language of requests from their prompt text when an export has text and no language
column. Chinese text makes a segment Mandarin, a JSON messages list is read by its contents, each workload's tokens
split in its rows' proportions (every row of a small file; an evenly spaced sample of a large one), and a language
column or the option turned off leaves the text unread."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow as pa
import pytest

from profiles import load_catalog
from profiles.traffic import ParseOptions, parse_traffic
from profiles.traffic.language import (
    DETECT_CHARS,
    DETECT_ROWS,
    LanguageSample,
    detect_language,
    detection_text,
    row_priority,
)

ZH = ["请帮我把这段代码改成异步的版本，并解释一下原因。", "把下面的会议纪要总结成三条要点。",
      "这个接口返回401是什么意思？我已经带了token。"]
EN = ["Write a function that merges two sorted lists in Python.", "Summarize this support ticket in two sentences.",
      "Explain why this SQL query is slow and which index would help."]


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def trace(rows: list[tuple[str, int, int]], *, language: list[str] | None = None) -> bytes:
    """A per-request CSV: one row per (prompt text, prompt tokens, output tokens), a second apart."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["timestamp", "prompt_tokens", "output_tokens", "prompt"] + (["language"] if language else []))
    for i, (text, p, o) in enumerate(rows):
        w.writerow([f"2026-11-02T09:{i // 60 % 60:02d}:{i % 60:02d}Z", p, o, text]
                   + ([language[i]] if language else []))
    return out.getvalue().encode()


@pytest.mark.parametrize(("text", "language"), [
    (EN[0], "english"),
    (ZH[0], "mandarin"),
    ("你今日食咗飯未呀？我哋一齊去飲茶啦", "cantonese"),
    ("Peux-tu résumer ce document en trois points ?", "other_no_head"),
    ("この文章を英語に翻訳してください", "other_no_head"),
    # a Chinese question about English code: the Chinese characters decide
    ("def merge(a, b):\n    return sorted(a + b)\n# 为什么这个函数很慢？", "mandarin"),
])
def test_each_text_gets_the_catalogue_language(text, language):
    assert detect_language(text) == language


@pytest.mark.parametrize("text", ["hi", "ok", "yes!", "12345 67890", ""])
def test_a_text_too_short_to_tell_has_no_language(text):
    assert detect_language(text) is None


def test_a_json_messages_list_is_read_by_its_contents_not_its_keys():
    msgs = json.dumps([{"role": "system", "content": "You are a helpful assistant."},
                       {"role": "user", "content": ZH[1]}], ensure_ascii=True)  # Chinese as \\u escapes
    text = detection_text(msgs)
    assert ZH[1] in text and "role" not in text and "\\u" not in text
    assert detect_language(text) == "mandarin"
    long = "x" * 10_000 + ZH[0]
    assert detection_text(long).endswith(ZH[0]) and len(detection_text(long)) == DETECT_CHARS


def test_chinese_prompts_make_mandarin_segments_with_their_own_tokens(cat):
    # 6 English rows (100 prompt, 50 output tokens), 4 Chinese rows (300 prompt, 200 output)
    rows = [(EN[i % 3], 100, 50) for i in range(6)] + [(ZH[i % 3], 300, 200) for i in range(4)]
    prof = parse_traffic("t.csv", trace(rows), cat)
    total_out = 6 * 50 + 4 * 200
    assert prof.language_shares == pytest.approx({"english": 300 / total_out, "mandarin": 800 / total_out})
    seg = {s.language: s for s in prof.segments}
    assert (seg["mandarin"].requests, seg["mandarin"].mean_prompt_tokens, seg["mandarin"].mean_output_tokens) == \
        pytest.approx((4, 300, 200))
    assert (seg["english"].requests, seg["english"].mean_prompt_tokens) == pytest.approx((6, 100))
    assert "the prompt text of every row" in prof.language_note and "mandarin 40 %" in prof.language_note


def test_short_texts_are_left_out_of_the_proportions(cat):
    rows = [(EN[0], 100, 50), (ZH[0], 100, 50), ("ok", 100, 50), ("", 100, 50)]
    prof = parse_traffic("t.csv", trace(rows), cat)
    assert prof.language_shares == pytest.approx({"english": 0.5, "mandarin": 0.5})
    assert "2 sampled rows too short to tell" in prof.language_note


def test_a_language_column_or_the_option_off_leaves_the_text_unread(cat):
    rows = [(ZH[0], 100, 50), (ZH[1], 100, 50)]
    prof = parse_traffic("t.csv", trace(rows, language=["english", "english"]), cat)
    assert prof.language_shares == {"english": 1.0} and prof.language_note == ""
    prof = parse_traffic("t.csv", trace(rows), cat, options=ParseOptions(detect_language=False))
    assert prof.language_shares == {"english": 1.0} and prof.language_note == ""


def test_a_large_file_is_read_from_a_sample_whose_shares_match_the_file(cat):
    rng = np.random.default_rng(7)
    n = 3 * DETECT_ROWS
    chinese = rng.random(n) < 0.3
    rows = [(ZH[i % 3] if z else EN[i % 3], 100, 40) for i, z in enumerate(chinese)]
    prof = parse_traffic("t.csv", trace(rows), cat)
    truth = chinese.mean()
    # a uniform sample of m = DETECT_ROWS of n rows: the standard error of a share is sqrt(p q / m x (1 - m / n))
    m = DETECT_ROWS
    se = float(np.sqrt(truth * (1 - truth) / m * (1 - m / n)))
    assert abs(prof.language_shares["mandarin"] - truth) < 4 * se
    assert f"from the prompt text of a sample of {m:,} of its {n:,} rows, spread over the file" in prof.language_note


def test_rows_that_alternate_are_sampled_evenly_in_every_workload(cat):
    # workloads alternate row by row and every third row is Chinese: a fixed stride of an even step would see one
    # workload only; the sample sees both, each a third Chinese
    n = 4 * DETECT_ROWS
    rows = [(ZH[0] if i % 3 == 1 else EN[0], 100, 40) for i in range(n)]
    lines = trace(rows).decode().splitlines()
    body = [f"{line},{'code' if i % 2 else 'chat'}" for i, line in enumerate(lines[1:])]
    prof = parse_traffic("t.csv", ("\n".join([lines[0] + ",workload"] + body) + "\n").encode(), cat)
    by = {(s.workload, s.language): s.requests for s in prof.segments}
    for wl in ("chat", "code"):
        share = by[(wl, "mandarin")] / (by[(wl, "mandarin")] + by[(wl, "english")])
        assert abs(share - 1 / 3) < 4 * np.sqrt(2 / 9 / (DETECT_ROWS / 2)), (wl, share)


def test_the_sample_stays_within_its_cap_whatever_the_batches():
    sample = LanguageSample(["english", "mandarin", "cantonese", "other_no_head"])
    n_rows = 0
    for n in (1, 999, 5_000, 37, 20_000, 3):  # batches as a CSV stream gives them: uneven
        text = pa.chunked_array([pa.array([EN[0]] * n)])
        ones = np.ones(n)
        sample.add(text, np.zeros(n, dtype=np.int64), ones, ones, ones)
        n_rows += n
        assert len(sample.texts) == min(n_rows, DETECT_ROWS) == sample.rows.shape[1]
    # the kept rows are the DETECT_ROWS of lowest priority over all rows seen, whatever the batches were
    every = row_priority(np.arange(n_rows, dtype=np.int64))
    assert np.array_equal(np.sort(sample.rows[0]), np.sort(every)[:DETECT_ROWS])
