"""Hostile or broken measured-acceptance files (profiles/measured_acceptance.py) are refused with a
MeasuredAcceptanceError that names the file, the line or field, the value (cut short) and what is allowed - never
another exception (the sidebar box and the CLI's --acceptance-file catch only that one)."""

from __future__ import annotations

import json

import pytest

from profiles.measured_acceptance import MAX_BYTES, SHOWN, MeasuredAcceptanceError, read_measured_acceptance

_DRAFTS = "vllm:spec_decode_num_drafts_total"
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def metrics(drafts: str, accepted: str, position: str = "0") -> bytes:
    """A /metrics page with one drafts counter and one per-position counter."""
    return (f"# HELP {_DRAFTS} drafts\n# TYPE {_DRAFTS} counter\n{_DRAFTS} {drafts}\n"
            f"# HELP {_PER_POS} accepted\n# TYPE {_PER_POS} counter\n"
            f'{_PER_POS}{{position="{position}"}} {accepted}\n').encode()


def bench(**fields) -> bytes:
    return json.dumps(fields).encode()


# (case, file name, bytes, what the message must say)
CASES = [
    ("nan counter", "metrics.txt", metrics("NaN", "5"), "is nan; a counter is a finite number >= 0"),
    ("inf counter", "metrics.txt", metrics("+Inf", "5"), "is inf; a counter is a finite number >= 0"),
    ("negative counter", "metrics.txt", metrics("10", "-5"), "is -5; a counter is a finite number >= 0"),
    ("inf position label", "metrics.txt", metrics("10", "5", "inf"), "a position is a whole number 0..31"),
    ("inf position", "rates.csv", b"position,rate\ninf,0.7\n", "line 2: position 'inf'; expected a whole number"),
    ("nan position", "rates.csv", b"position,rate\nnan,0.7\n", "line 2: position 'nan'; expected a whole number"),
    ("fractional position", "rates.csv", b"position,rate\n1.5,0.7\n", "expected a whole number"),
    ("repeated position", "rates.csv", b"position,rate\n1,0.7\n1,0.6\n", "line 3: position '1'"),
    ("nan rate", "rates.csv", b"position,rate\n1,nan\n", "line 2: rate 'nan'; expected a finite number"),
    ("rate over 1", "rates.csv", b"position,rate\n1,1.5\n", "is 1.5; a rate is a fraction from 0 to 1"),
    ("401-digit rate", "rates.csv", b"position,rate\n1,0." + b"7" * 401 + b"\n",
     "line 2: a run of 401 digits"),
    ("401-digit rate in JSON", "bench.json",
     b'{"spec_decode_per_position_acceptance_rates": [' + b"1" * 401 + b"]}", "a run of 401 digits"),
    ("5,000-digit integer", "bench.json",
     b'{"spec_decode_num_drafts": ' + b"9" * 5000 + b', "spec_decode_per_position_acceptance_rates": [0.5]}',
     "a run of 5,000 digits"),
    ("5,000-digit count", "hist.csv", b"accepted,count\n0,1\n1," + b"9" * 5000 + b"\n", "line 3: a run of 5,000"),
    ("4 MB of [", "bench.json", b"[" * MAX_BYTES, "JSON nested deeper than 32 levels"),
    ("4 MB of [ in a field", "bench.json", b'{"spec_decode_per_position_acceptance_rates": ' + b"[" * (MAX_BYTES - 60),
     "JSON nested deeper than 32 levels"),
    ("infinite drafts", "bench.json", b'{"spec_decode_num_drafts": 1e400, '
                                      b'"spec_decode_per_position_acceptance_rates": [0.5]}',
     "spec_decode_num_drafts is inf; a count is a finite number >= 0"),
    ("rate as text", "bench.json", bench(spec_decode_per_position_acceptance_rates=["0.5"]),
     "position 1 is '0.5'; a rate is a number from 0 to 1"),
    ("rates not a list", "bench.json", bench(spec_decode_per_position_acceptance_rates={"a": 1}),
     "expected a list of rates"),
    ("a JSON list", "bench.json", b"[0.8, 0.6]", "a bench result is a JSON object"),
    ("200k-character cell", "rates.csv", b"position,rate\n1," + b"x" * 200_000 + b"\n",
     "line 2 has 200,002 characters"),
    ("200k-character quoted cell over lines", "rates.csv", b'position,rate\n1,"' + b"x\n" * 100_000 + b'"\n',
     "not readable as CSV"),
    ("a long cell", "rates.csv", b"position,rate\n1," + b"x" * 500 + b"\n", "a cell of 500 characters"),
    ("histogram past a float", "hist.csv", b"accepted,count\n0,1e308\n1,1e308\n1,1e308\n",
     "the counts add up past the largest number a float holds"),
    ("empty file", "rates.csv", b"", "an empty file"),
    ("blank file", "rates.csv", b" \n\n \n", "an empty file"),
    ("binary garbage", "rates.csv", bytes(range(256)) * 16, "not UTF-8 text (byte 128"),
    ("UTF-8 with NUL", "rates.csv", b"position,rate\n1,0.5\x00\n", "binary data (a NUL byte at line 2)"),
    ("a PNG header", "rates.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text (byte 0"),
    ("CSV with wrong columns", "rates.csv", b"a,b\n1,2\n", "a CSV with columns ['a', 'b']; expected 'position,rate'"),
    ("over the size bound", "big.csv", b"x" * (MAX_BYTES + 1), "at most 4,194,304 bytes"),
]


@pytest.mark.parametrize(("case", "name", "data", "says"), CASES, ids=[c[0] for c in CASES])
def test_each_broken_file_is_refused_with_its_own_error(case, name, data, says):
    with pytest.raises(MeasuredAcceptanceError) as e:
        read_measured_acceptance(name, data)
    msg = str(e.value)
    assert msg.startswith(f"{name}: ") and says in msg, msg
    # the value is quoted cut short: a message is a line a person reads, not the file echoed back
    assert len(msg) < 400 and "\n" not in msg, msg


def test_a_long_value_is_cut_to_about_eighty_characters():
    with pytest.raises(MeasuredAcceptanceError) as e:
        read_measured_acceptance("rates.csv", b"position,rate\n1," + b"7" * 1000 + b"\n")
    quoted = str(e.value).split("(", 1)[1]
    assert quoted.startswith("'" + "7" * (SHOWN - 2)) and "…(1,002 characters)" in quoted


def test_the_bounds_leave_real_files_alone():
    # a bench result with 17-digit floats, long per-request lists and nested metadata still reads
    doc = {"spec_decode_num_drafts": 123456789012, "spec_decode_per_position_acceptance_rates":
           [0.81234567890123456, 0.6, 0.4], "ttfts": [0.12345678901234567] * 50_000, "meta": {"a": [[1, 2], [3]]}}
    m = read_measured_acceptance("bench.json", json.dumps(doc).encode())
    assert m.unconditional == pytest.approx((0.81234567890123456, 0.6, 0.4)) and m.drafts == 123456789012
    m = read_measured_acceptance("metrics.txt", metrics("1e12", "8e11"))
    assert m.unconditional == pytest.approx((0.8,)) and m.drafts == 10**12
