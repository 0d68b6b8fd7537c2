"""Reader bombs (upload files built to exhaust memory or CPU), one per traffic reader (prints figures; no assertions):
`python benchmarks/bench_reader_bombs.py [--small]`.

Each file is opened through parse_traffic and inspect_upload in one fresh child process (`measure_many`; `--root
DIR` runs another checkout's readers, e.g. main's for the figures before the fix); printed: outcome, CPU seconds,
peak RSS growth in the call. The files are the issue's
repros, kept small on disk by compression where the repro is (xlsx, Parquet); `--small` builds the versions the
tests use (tests/profiles/test_reader_bombs.py asserts the refusals, the memory and the CPU time).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_traffic_ingest import ROOT  # noqa: E402
from bench_xlsx_ingest import HEADER, MAIN, Part, cells, workbook  # noqa: E402

CSV_ROWS = "timestamp,prompt_tokens,output_tokens\n1700000000,100,10\n1700000060,200,20\n"


def _noise(n_bytes: int) -> bytes:
    """Incompressible text (base64 of random bytes) that lets a regular part pass the compression-ratio check."""
    return base64.b64encode(os.urandom(n_bytes * 3 // 4))


def _xlsx_bombs(d: Path, small: bool) -> dict[str, Path]:
    out = {}
    open_tags = 1_000_000 if small else 10_000_000
    out["xlsx: 10M nested elements"] = workbook(d / "nested.xlsx", Part.repeated(
        f'<worksheet xmlns="{MAIN}"><sheetData><!--'.encode() + _noise(768 << 10 if not small else 100 << 10)
        + b"-->", b"<a>", open_tags, b""))
    before = 10_000_000 if small else 100_000_000
    out["xlsx: 100M elements before row 1"] = workbook(d / "before.xlsx", Part.repeated(
        f'<worksheet xmlns="{MAIN}"><!--'.encode() + _noise(before * 4 // 150) + b"--><sheetData>", b"<x/>",
        before, cells(1, HEADER) + cells(2, [1_790_000_000, "chat", 100, 10]) + b"</sheetData></worksheet>"))
    strings = 1_400_000 if small else 14_000_000
    sst_noise = b"<si><t>" + _noise(strings * 17 // 150) + b"</t></si>"  # one string more
    out["xlsx: header cell at shared string 14,000,003"] = workbook(
        d / "sst_index.xlsx",
        Part.of(f'<worksheet xmlns="{MAIN}"><sheetData>'.encode()
                + cells(1, [f"#{strings + 4}", "workload", "prompt_tokens", "output_tokens"])
                + b"</sheetData></worksheet>"),
        Part.repeated(f'<sst xmlns="{MAIN}">'.encode() + sst_noise, b"<si><t>a</t></si>", strings, b"</sst>"))
    out["xlsx: the same, the count declared"] = workbook(
        d / "sst_declared.xlsx",
        Part.of(f'<worksheet xmlns="{MAIN}"><sheetData>'.encode()
                + cells(1, [f"#{strings + 4}", "workload", "prompt_tokens", "output_tokens"])
                + b"</sheetData></worksheet>"),
        Part.repeated(f'<sst xmlns="{MAIN}" uniqueCount="{strings}">'.encode() + b"<!--" + _noise(strings * 17 // 150)
                      + b"-->", b"<si><t>a</t></si>", strings, b"</sst>"))  # a comment: walked by expat
    return out


def mooncake_trace(requests: int, ids_per_request: int, input_length: int = 1000, ts: int = 0) -> bytes:
    lines = []
    for r in range(requests):
        ids = ",".join(str(r * ids_per_request + i) for i in range(ids_per_request))
        lines.append(f'{{"timestamp": {ts + r}, "input_length": {input_length}, "output_length": 10, '
                     f'"hash_ids": [{ids}]}}')
    return ("\n".join(lines) + "\n").encode()


def parquet_dictionary(path: Path, value_mib: int, rows: int, small_values: int = 0) -> Path:
    """One text value of `value_mib` MiB (plus `small_values` short ones) referenced by every row, zstd."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = pa.array(["x" * (value_mib << 20)] + [f"w{i}" for i in range(small_values)])
    tbl = pa.table({"timestamp": pa.array(range(1_700_000_000, 1_700_000_000 + rows), pa.int64()),
                    "workload": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), words),
                    "prompt_tokens": pa.array([100] * rows, pa.int64()),
                    "output_tokens": pa.array([10] * rows, pa.int64())})
    del words
    pq.write_table(tbl, path, compression="zstd", row_group_size=rows)
    return path


def make_reader_bombs(d: Path, small: bool = False) -> dict[str, Path]:
    """label -> path of each hostile file (`small`: the sizes the tests use)."""
    d.mkdir(parents=True, exist_ok=True)
    out = _xlsx_bombs(d, small)
    n = 3 if small else 99
    (d / "mooncake.jsonl").write_bytes(mooncake_trace(n, 130_000))
    out["mooncake: 130,000 hash ids per request"] = d / "mooncake.jsonl"
    (d / "mooncake_neg.jsonl").write_bytes(mooncake_trace(3, 2, ts=-10**15))
    out["mooncake: negative timestamps"] = d / "mooncake_neg.jsonl"
    # The repro holds 440 MiB on 2M rows; pyarrow's writer takes > 6 GB to write that, so the benchmark
    # writes 40 MiB on 300,000 rows at every size (the bound and the check do not depend on the size).
    out["parquet: one 440 MiB dictionary string"] = parquet_dictionary(d / "dict.parquet", 40, 300_000)
    out["parquet: a 90 MiB string among 1,000 short ones"] = parquet_dictionary(
        d / "dict_mixed.parquet", 90, 300_000, small_values=1_000)
    digits = 4 << 20 if small else 16 << 20
    (d / "bench_int.json").write_bytes(b'{"input_lens": [' + b"7" * digits + b'], "output_lens": [1], '
                                       b'"duration": 10, "date": "20250101-000000"}')
    out["vllm bench: a 16 MiB integer"] = d / "bench_int.json"
    (d / "guidellm_int.json").write_bytes(
        b'{"benchmarks": [{"requests": {"successful": [{"prompt_tokens": 1' + b"0" * digits
        + b', "output_tokens": 3}]}}]}')
    out["guidellm: a 16 MiB integer"] = d / "guidellm_int.json"
    depth = 1_000_000 if small else 8_000_000
    (d / "guidellm_deep.json").write_bytes(b'{"benchmarks": ' + b"[" * depth + b"]" * depth + b"}")
    out["guidellm: nested lists"] = d / "guidellm_deep.json"
    (d / "array_deep.json").write_bytes(b"[" + b"[" * 40_000 + b"]" * 40_000 + b"]")
    out["JSON array: 40,000 nested lists"] = d / "array_deep.json"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("requests.csv", CSV_ROWS)
    (d / "zipped.csv").write_bytes(buf.getvalue())
    out["csv: a zip named .csv"] = d / "zipped.csv"
    (d / "utf16be.csv").write_bytes(CSV_ROWS.encode("utf-16-be"))
    out["csv: UTF-16 BE without a byte-order mark"] = d / "utf16be.csv"
    (d / "image.csv").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(4096))
    out["csv: a PNG image"] = d / "image.csv"
    (d / "random.csv").write_bytes(os.urandom(1 << 16))
    out["csv: random bytes"] = d / "random.csv"
    return out


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from profiles.traffic import TrafficError, inspect_upload, parse_traffic
from profiles import load_catalog
def kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
cat = load_catalog()
for label, path in {files!r}:
    data = Path(path).read_bytes()
    for fn in {fns!r}:
        with open("/proc/self/clear_refs", "w") as f:  # "5": the peak restarts from the current RSS
            f.write("5")
        rss, c = kib("VmRSS"), cpu_s()
        try:
            if fn == "parse":
                outcome, message = "parsed", f"{{parse_traffic(Path(path).name, data, cat).rows}} rows"
            else:
                outcome, message = "opened", f"{{len(inspect_upload(Path(path).name, data).columns)}} columns"
        except TrafficError as e:
            outcome, message = "refused", str(e)
        except BaseException as e:
            outcome, message = "crashed", f"{{type(e).__name__}}: {{str(e)[:300]}}"
        print(json.dumps(dict(label=label, fn=fn, outcome=outcome, message=message, cpu_s=cpu_s() - c,
                              growth_mb=(kib("VmHWM") - rss) / 1024)), flush=True)
    del data
"""


def measure_many(files: dict[str, Path], fns: tuple[str, ...] = ("parse", "inspect"), root: Path = ROOT,
                 timeout_s: float = 3600.0) -> dict[tuple[str, str], dict]:
    """(label, fn) -> outcome, message, CPU seconds and peak RSS growth (MB, VmHWM reset before each call) of
    parse_traffic / inspect_upload on each file, all in one fresh Python process (one import of the app's
    libraries); `root`: the checkout whose readers run (a base checkout gives the "before" figures)."""
    code = _CHILD.format(root=str(root), files=[(k, str(v)) for k, v in files.items()], fns=fns)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[(r.pop("label"), r.pop("fn"))] = r
    for label in files:
        for fn in fns:
            out.setdefault((label, fn), {"outcome": "crashed", "message": res.stderr[-300:], "cpu_s": float("nan"),
                                         "growth_mb": float("nan")})
    return out


def main() -> None:
    small = "--small" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        print("Reader bombs, each opened in a fresh process: outcome, CPU, peak RSS growth in the call")
        root = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else ROOT
        files = make_reader_bombs(Path(tmp), small)
        results = measure_many(files, root=root)
        for (label, fn), r in results.items():
            print(f"  {label:48s} {files[label].stat().st_size / 1024:8.0f} KB {fn:8s} {r['outcome']:8s} CPU "
                  f"{r['cpu_s']:6.2f} s, peak +{r['growth_mb']:5.0f} MB: {r['message'][:120]}", flush=True)


if __name__ == "__main__":
    main()
