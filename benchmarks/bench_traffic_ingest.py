"""Traffic-ingest benchmark (prints figures; no assertions): `python benchmarks/bench_traffic_ingest.py`.

1. Bombs: each hostile upload (Parquet row bomb, dictionary bombs, 600k-column CSV, cells over 131,072
   characters and over 16 MiB, a 50 MB binary line, 100 MiB + 1 byte) is parsed by profiles.traffic in a fresh
   child process; printed: the outcome (refused or not, and the message's length), the time to refuse (target
   < 1 s) and the child's peak RSS (target < 300 MB; Python + numpy + pandas + pyarrow alone take ~120 MB,
   printed as "baseline").
2. Ingest: a 1,000,000-row per-request CSV in a child process: time (target < 5 s) and the peak RSS added by
   the parse over the file size (target <= 3x; the file's own bytes are already in memory before the parse,
   as they are in the app, and are not counted; the absolute peak is printed too).

tests/profiles/test_traffic_bombs.py imports `make_bombs` and `measure` and asserts the refusals and the
memory bound (not the times: CI machines are slow and shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
HEADER = b"timestamp,workload,prompt_tokens,output_tokens\n"
MIB = 2**20


def _parquet(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path, compression="zstd", row_group_size=max(table.num_rows, 1))
    return path


def make_bombs(d: Path) -> dict[str, Path]:
    """Write each bomb under `d`; name -> path. Small on disk, huge once decoded."""
    d.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    # 60 million rows of one repeated value: ~1 MB of RLE / dictionary pages
    n = 60_000_000
    one = pa.repeat(pa.scalar(1, pa.int8()), n)
    out["parquet row bomb (60M rows)"] = _parquet(d / "rows.parquet", pa.table(
        {"timestamp": one, "workload": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), ["chat"]),
         "prompt_tokens": one, "output_tokens": one}))
    del one
    # 2,000,000 rows (the row limit) pointing at one long dictionary string: 3.2 GB once decoded
    rows = 2_000_000
    idx = pa.array(np.zeros(rows, np.int32))
    ts = pa.array(np.full(rows, 1_790_000_000, np.int64))
    tok = pa.array(np.full(rows, 100, np.int32))
    out["parquet dictionary bomb (1.6 KB x 2M rows)"] = _parquet(d / "dict.parquet", pa.table(
        {"timestamp": ts, "workload": pa.DictionaryArray.from_arrays(idx, ["x" * 1600]), "prompt_tokens": tok,
         "output_tokens": tok}))
    out["parquet dictionary bomb (200k-char cell x 2M rows)"] = _parquet(d / "dict_long.parquet", pa.table(
        {"timestamp": ts, "workload": pa.DictionaryArray.from_arrays(idx, ["chat" + " " * 200_000]),
         "prompt_tokens": tok, "output_tokens": tok}))
    cols = 600_000
    wide = d / "wide.csv"
    wide.write_bytes(",".join(f"c{i}" for i in range(cols)).encode() + b"\n" + b",".join([b"1"] * cols) + b"\n")
    out["CSV with 600k columns"] = wide
    for label, size in (("CSV cell over 131,072 characters", 140_000), ("CSV cell over 16 MiB", 17 * MIB)):
        p = d / f"cell_{size}.csv"
        p.write_bytes(HEADER + b"2026-11-01T00:00:00Z,chat,1,1\n2026-11-01T00:00:01Z," + b"a" * size + b",1,1\n")
        out[label] = p
    rng = np.random.default_rng(0)
    junk = rng.integers(0, 256, 50 * MIB, dtype=np.uint8)
    junk[junk == 10] = 11  # no line break anywhere: one 50 MB line
    (d / "binary.csv").write_bytes(junk.tobytes())
    out["binary file, one 50 MB line"] = d / "binary.csv"
    big = d / "big.csv"
    with big.open("wb") as f:
        f.write(b"x" * (100 * MIB + 1))
    out["100 MiB + 1 byte"] = big
    return out


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import pyarrow as pa
from profiles import load_catalog
from profiles.traffic import TrafficError, column_values, inspect_upload, parse_traffic
def status_kib(key):  # VmHWM: peak RSS of this process (ru_maxrss would carry the parent's peak across exec)
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
cat = load_catalog()
path = Path({path!r})
base = status_kib("VmHWM")
data = path.read_bytes()
after_read = status_kib("VmHWM")
for fn in {fns!r}:
    with open("/proc/self/clear_refs", "w") as f:  # "5": the peak restarts from the current RSS
        f.write("5")
    t, c = time.perf_counter(), cpu_s()
    try:
        if fn == "parse":
            outcome, message = "parsed", f"{{parse_traffic(path.name, data, cat).rows}} rows"
        elif fn == "inspect":
            outcome, message = "opened", f"{{len(inspect_upload(path.name, data).columns)}} columns"
        else:
            outcome, message = "read", f"{{len(column_values(path.name, data, {column!r}))}} values"
    except TrafficError as e:
        outcome, message = "refused", str(e)
    except BaseException as e:
        outcome, message = "crashed", f"{{type(e).__name__}}: {{str(e)[:300]}}"
    dt, cpu = time.perf_counter() - t, cpu_s() - c
    peak = status_kib("VmHWM")
    print(json.dumps(dict(fn=fn, outcome=outcome, message=message, seconds=dt, cpu_s=cpu, peak_mb=peak / 1024,
                          baseline_mb=base / 1024, after_read_mb=after_read / 1024, added_mb=(peak - base) / 1024,
                          rss_after_mb=status_kib("VmRSS") / 1024, arrow_pool_mb=pa.total_allocated_bytes() / 2**20,
                          file_mb=len(data) / 2**20)), flush=True)
"""

FUNCTIONS = ("parse", "inspect", "values")  # parse_traffic, inspect_upload, column_values


def measure_all(path: Path, fns: tuple[str, ...] = FUNCTIONS, timeout_s: float = 300.0,
                column: str = "workload") -> dict[str, dict]:
    """Run each of `fns` (parse: parse_traffic, inspect: inspect_upload, values: column_values of `column`) on
    `path`, one after the other in one fresh Python process; per function: outcome, message, seconds (wall) and
    cpu_s (user + sys of the call), peak RSS during the call (VmHWM, reset before each call), the baseline after
    the imports (a bare interpreter with numpy, pandas, pyarrow and the catalog), added_mb = peak - baseline
    (the file's own bytes and anything an earlier call kept included), RSS and Arrow's pool after the call, in
    MB. A function whose process died is reported as crashed."""
    code = _CHILD.format(root=str(ROOT), path=str(path), fns=tuple(fns), column=column)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    out = {}
    for line in res.stdout.strip().splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r.pop("fn")] = r
    nan = float("nan")
    for fn in fns:
        out.setdefault(fn, {"outcome": "crashed", "message": res.stderr[-500:], "seconds": nan, "cpu_s": nan,
                            "peak_mb": nan, "baseline_mb": nan, "after_read_mb": nan, "added_mb": nan,
                            "rss_after_mb": nan, "arrow_pool_mb": nan, "file_mb": path.stat().st_size / MIB})
    return out


def measure(path: Path, timeout_s: float = 300.0, fn: str = "parse", column: str = "workload") -> dict:
    """`measure_all` for one function (parse_traffic unless `fn` says otherwise)."""
    return measure_all(path, (fn,), timeout_s, column)[fn]


def make_requests_csv(n: int, seed: int = 1) -> bytes:
    """The same synthetic week of requests bench_app.py ingests (one generator for both benchmarks)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_app import make_requests_csv as make

    return make(n, seed)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        print("Bombs (each parsed in a fresh process; targets: refused in < 1 s, peak RSS < 300 MB)")
        for label, path in make_bombs(d / "bombs").items():
            r = measure(path)
            print(f"  {label:52s} {path.stat().st_size / MIB:8.2f} MiB  {r['outcome']:8s} in {r['seconds']:6.3f} s, "
                  f"peak RSS {r['peak_mb']:6.0f} MB (baseline {r['baseline_mb']:.0f} MB, after reading the file "
                  f"{r['after_read_mb']:.0f} MB); message {len(r['message'])} chars")
            print(f"      {r['message'][:160]}")
            path.unlink()
        data = make_requests_csv(1_000_000)
        p = d / "requests_1m.csv"
        p.write_bytes(data)
        del data
        runs = [measure(p) for _ in range(3)]
        times = sorted(r["seconds"] for r in runs)
        r = runs[0]
        added = r["peak_mb"] - r["after_read_mb"]
        print(f"Ingest: 1,000,000-row per-request CSV ({r['file_mb']:.1f} MiB), {r['outcome']} ({r['message']}): "
              f"median {times[1]:.2f} s (runs {', '.join(f'{x:.2f}' for x in times)}; target < 5 s)")
        print(f"  peak RSS {r['peak_mb']:.0f} MB = baseline {r['baseline_mb']:.0f} MB + file "
              f"{r['after_read_mb'] - r['baseline_mb']:.0f} MB + parse {added:.0f} MB; parse / file size = "
              f"{added / r['file_mb']:.2f}x (target <= 3x); absolute peak / file size = "
              f"{r['peak_mb'] / r['file_mb']:.2f}x")


if __name__ == "__main__":
    main()
