"""Prompt uploads on the Calibrate page (calibration.targets.traffic_prompts): hostile small files are refused in a
fresh child process within 300 MB of peak RSS and 1 s of CPU time, with a message naming what broke which limit; good
files give the first prompts of each workload. The hostile files are built here, the reader is the real one."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibration.targets.traffic_prompts import (
    MAX_PROMPT_CHARS,
    MAX_PROMPT_UPLOAD_BYTES,
    MAX_UPLOAD_WORKLOADS,
    prompts_from_upload,
)

REPO = Path(__file__).resolve().parents[3]
PEAK_RSS_MB = 300
CPU_S = 1.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")

_CHILD = r"""
import json, resource, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from calibration.targets.traffic_prompts import prompts_from_upload
import pyarrow, pyarrow.parquet, pyarrow.csv, pyarrow.json, pandas  # the readers' imports, before the baseline
def hwm_mb():  # peak RSS of this process (VmHWM)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
path = Path({path!r})
data = path.read_bytes()
base, t0 = hwm_mb(), cpu_s()
try:
    got = prompts_from_upload(path.name, data)
    outcome, message = "read", json.dumps({{w: len(p) for w, p in got.items()}})
except ValueError as e:
    outcome, message = "refused", str(e)
except BaseException as e:
    outcome, message = "crashed", f"{{type(e).__name__}}: {{str(e)[:300]}}"
print(json.dumps(dict(outcome=outcome, message=message, cpu_s=cpu_s() - t0, peak_mb=hwm_mb(), baseline_mb=base)))
"""


def measure_prompts(path: Path) -> dict:
    """prompts_from_upload on `path` in a fresh Python process: outcome, message, CPU seconds, peak RSS."""
    res = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(REPO), path=str(path))], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", row_group_size=max(table.num_rows, 1), write_statistics=False)
    return buf.getvalue()


def _one_string_on_every_row(text: str, rows: int) -> pa.Table:
    return pa.table({"prompt_text": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), [text]),
                     "workload": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int8)), ["chat"])})


_LINE = MAX_PROMPT_UPLOAD_BYTES - 64  # a line just inside the size limit
# name -> (what writes the file's bytes, what the refusal must say); the bytes are written by the module's fixture,
# not when the tests are collected (every test worker collects every file)
BOMBS: dict[str, tuple[Callable[[], bytes], str]] = {
    # what pandas turned into 3.95 GB: one 4,000-character prompt on a million rows, a few KB on disk
    "dictionary rows.parquet": (lambda: _parquet(_one_string_on_every_row("p" * 4000, 1_000_000)),
                                "1,000,000 rows (the file's metadata); at most 20,000 rows allowed"),
    # within the row limit, one 100,000-character prompt on every row: 2 GB as Python strings
    "dictionary long.parquet": (lambda: _parquet(_one_string_on_every_row("q" * 100_000, 20_000)),
                                "row 1, column 'prompt_text': value 'qqqq"),
    # one 200 MB dictionary string: refused from the footer before any page is decoded
    "dictionary huge.parquet": (lambda: _parquet(_one_string_on_every_row("r" * 200_000_000, 2)),
                                "once decompressed (the file's metadata); at most 67,108,864 bytes allowed"),
    # a header, then a row made only of commas (every field built before any check, in a naive reader)
    "commas.csv": (lambda: b"prompt_text,workload\n" + b"," * _LINE + b"\n",
                   f"line 2 has {_LINE:,} bytes; at most 131,072 bytes per line allowed"),
    "one line.jsonl": (lambda: b'{"prompt_text": "' + b"s" * (_LINE - 19) + b'"}\n',
                       f"line 1 has {_LINE:,} bytes; at most 131,072 bytes per line allowed"),
    "too big.csv": (lambda: b"prompt_text\n" + b"t\n" * (MAX_PROMPT_UPLOAD_BYTES // 2),
                    "size 4,194,316 bytes; at most 4,194,304 bytes (4 MiB) allowed for a prompt set"),
}


@pytest.fixture(scope="module")
def bomb_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    d = tmp_path_factory.mktemp("prompt_bombs")
    out = {}
    for name, (write, expected) in BOMBS.items():
        (d / name).write_bytes(write())
        out[name] = (d / name, expected)
    return out


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_hostile_prompt_file_is_refused_within_the_memory_and_time_bounds(bomb_files, name: str) -> None:
    path, expected = bomb_files[name]
    assert path.stat().st_size <= MAX_PROMPT_UPLOAD_BYTES + 64
    r = measure_prompts(path)
    assert r["outcome"] == "refused", r
    assert r["message"].startswith(f"file='{name}'") and expected in r["message"], r["message"]
    assert len(r["message"]) < 500
    assert r["peak_mb"] < PEAK_RSS_MB, r
    assert r["cpu_s"] < CPU_S, r


def test_the_dictionary_bombs_are_a_few_kilobytes(bomb_files) -> None:
    for name in ("dictionary rows.parquet", "dictionary long.parquet", "dictionary huge.parquet"):
        assert bomb_files[name][0].stat().st_size < 64 * 1024, name


def test_a_long_prompt_is_refused_naming_row_column_value_and_limit() -> None:
    csv = b"prompt_text,workload\nshort one,chat\n" + b"w" * (MAX_PROMPT_CHARS + 1) + b",code\n"
    with pytest.raises(ValueError) as e:
        prompts_from_upload("p.csv", csv)
    msg = str(e.value)
    assert msg.startswith("file='p.csv', row 2, column 'prompt_text': value 'wwww")
    assert f"({MAX_PROMPT_CHARS + 1:,} characters): at most {MAX_PROMPT_CHARS:,} characters per prompt allowed" in msg
    ok = prompts_from_upload("p.csv", b"prompt_text\n" + b"w" * MAX_PROMPT_CHARS + b"\n")
    assert [len(p) for p in ok["uploaded"]] == [MAX_PROMPT_CHARS]


def test_too_many_workloads_and_non_text_prompts_are_refused() -> None:
    lines = [json.dumps({"prompt_text": f"p{i}", "workload": f"w{i}"}) for i in range(MAX_UPLOAD_WORKLOADS + 1)]
    with pytest.raises(ValueError, match=f"row {MAX_UPLOAD_WORKLOADS + 1}, column 'workload': value "
                                         f"'w{MAX_UPLOAD_WORKLOADS}' is workload number {MAX_UPLOAD_WORKLOADS + 1}; "
                                         f"at most {MAX_UPLOAD_WORKLOADS} workloads allowed"):
        prompts_from_upload("w.jsonl", "\n".join(lines).encode())
    with pytest.raises(ValueError, match="row 1, column 'prompt_text': text values expected; the column holds int64"):
        prompts_from_upload("n.parquet", _parquet(pa.table({"prompt_text": [1, 2]})))


def test_a_dictionary_encoded_parquet_gives_the_first_prompts_of_each_workload() -> None:
    rows = 5000
    text = pa.DictionaryArray.from_arrays(pa.array(np.arange(rows, dtype=np.int32) % 3),
                                          ["write a function", "  ", "summarise this"])
    workload = pa.array(["Code" if i % 2 else "chat" for i in range(rows)])
    got = prompts_from_upload("t.parquet", _parquet(pa.table({"prompt_text": text, "workload": workload})),
                              per_workload=4)
    # rows 0, 1, 2, 3, ...: text index i % 3 (index 1 is blank), workload chat on even rows, code on odd ones
    assert got == {"chat": ["write a function", "summarise this", "write a function", "summarise this"],
                   "code": ["write a function", "summarise this", "write a function", "summarise this"]}


def test_a_parquet_footer_that_understates_its_pages_is_refused_within_the_bounds(tmp_path: Path) -> None:
    """Where the traffic readers walk the page headers (profiles.traffic.sources.parquet_pages), a footer that
    says 1,000 bytes for a 200 MB dictionary page is caught before the page is decoded."""
    pytest.importorskip("profiles.traffic.sources.parquet_pages")
    bench = pytest.importorskip("benchmarks.bench_traffic_ingest")
    understate = getattr(bench, "understate_footer", None)
    if understate is None:
        pytest.skip("benchmarks.bench_traffic_ingest has no understate_footer")
    path = tmp_path / "understated.parquet"
    path.write_bytes(_parquet(_one_string_on_every_row("u" * 200_000_000, 2)))
    understate(path)
    assert pq.read_metadata(path).row_group(0).column(0).total_uncompressed_size <= 1000
    r = measure_prompts(path)
    assert r["outcome"] == "refused", r
    assert "their pages hold" in r["message"] and "at most 67,108,864 bytes allowed" in r["message"], r["message"]
    assert r["peak_mb"] < PEAK_RSS_MB, r
    assert r["cpu_s"] < CPU_S, r
