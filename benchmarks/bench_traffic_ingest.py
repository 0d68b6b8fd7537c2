"""Traffic-ingest benchmark (prints figures; no assertions): `python benchmarks/bench_traffic_ingest.py` (section 3's
comparison alone: `--limits`).

1. Bombs: each hostile upload (Parquet row bomb, dictionary bombs and a footer that understates the pages,
   600k-column CSV, cells over 131,072 characters and over 16 MiB, rows of 10 and 25 MiB of commas, a 50 MB
   binary line, JSON that grows 30x once built, a record of 30 MiB, vllm bench results of 99 MiB and of 7M
   requests, a guidellm-shaped report, a JSON line of 30 MiB, 20 million JSON lines, 100 MiB + 1 byte) goes
   through parse_traffic, inspect_upload and column_values in a fresh child process; printed per call: the
   outcome (refused or not, and the message's length), wall and CPU time (target < 1 s) and the peak RSS over
   the interpreter with its imports (target < 300 MB; Python + numpy + pandas + pyarrow alone take ~115 MB).
2. Ingest: a 1,000,000-row per-request CSV in a child process: time (target < 5 s) and the peak RSS added by
   the parse over the file size (target <= 3x; the file's own bytes are already in memory before the parse,
   as they are in the app, and are not counted; the absolute peak is printed too), then the same rows as Parquet.
3. OS limits (profiles.sandbox, through profiles.uploads): the same CSV parsed in this process and in a child under
   the limits, alternated (target: < 10 % slower), and each bomb plus the nested-XML xlsx through the
   limited path: this process's peak RSS added (target < 300 MB), the child's peak RSS and CPU.

tests/profiles/test_traffic_bombs.py imports `make_bombs` and `measure_all` and asserts the refusals, the memory
bound and the CPU time of each call (not the wall time: CI machines are slow and shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
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


def _thrift(ttype: int, v) -> bytes:
    """Thrift compact-protocol encoding of a value as profiles.traffic.sources.parquet_pages.read_value returns it."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            if n < 0x80:
                return bytes(out + bytes([n]))
            out.append((n & 0x7F) | 0x80)
            n >>= 7

    def zz(n: int) -> int:
        return (n << 1) ^ (n >> 63)

    if ttype in (1, 2):
        return b"\x01" if v else b"\x02"
    if ttype == 3:
        return bytes([v])
    if ttype in (4, 5, 6):
        return varint(zz(v))
    if ttype == 7:
        return v
    if ttype == 8:
        return varint(len(v)) + v
    if ttype in (9, 10):
        etype, items = v
        head = bytes([(len(items) << 4) | etype]) if len(items) < 15 else bytes([0xF0 | etype]) + varint(len(items))
        return head + b"".join(_thrift(etype, x) for x in items)
    if ttype == 11:
        kt, vt, pairs = v
        if not pairs:
            return b"\x00"
        return varint(len(pairs)) + bytes([(kt << 4) | vt]) + b"".join(
            _thrift(kt, k) + _thrift(vt, x) for k, x in pairs)
    out, last = bytearray(), 0
    for fid, ft, x in v:
        wire = (1 if x else 2) if ft in (1, 2) else ft
        out += bytes([((fid - last) << 4) | wire]) if 0 < fid - last <= 15 else bytes([wire]) + varint(zz(fid))
        last = fid
        if ft not in (1, 2):
            out += _thrift(ft, x)
    return bytes(out + b"\x00")


def understate_footer(path: Path, chunk_bytes: int = 1000) -> Path:
    """Rewrite a Parquet file's footer so that every column chunk's total_uncompressed_size (ColumnMetaData field
    6) and every row group's total_byte_size (RowGroup field 2) say `chunk_bytes`: the pages stay as they are."""
    if str(ROOT) not in sys.path:  # run as a script
        sys.path.insert(0, str(ROOT))
    from profiles.traffic.sources.parquet_pages import STRUCT, read_value

    data = path.read_bytes()
    n = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - n
    meta, _ = read_value(data, start, len(data) - 8, STRUCT)

    def patch(fields, field_id, value):
        return [(f, t, value if f == field_id else v) for f, t, v in fields]

    groups = []
    for rg in dict((f, v) for f, _t, v in meta)[4][1]:
        cols = dict((f, v) for f, _t, v in rg)[1][1]
        cols = [[(f, t, patch(v, 6, chunk_bytes) if f == 3 else v) for f, t, v in cc] for cc in cols]
        groups.append([(f, t, (12, cols) if f == 1 else v) for f, t, v in patch(rg, 2, chunk_bytes)])
    footer = _thrift(12, [(f, t, (12, groups) if f == 4 else v) for f, t, v in meta])
    path.write_bytes(data[:start] + footer + len(footer).to_bytes(4, "little") + b"PAR1")
    return path


def _understated_parquet(path: Path) -> Path:
    """2,000,000 rows whose 'workload' strings (800 bytes each, plain-encoded: no dictionary) decode to 1.6 GB
    from ~0.2 MB of zstd pages; the footer then says 1,000 bytes per column chunk. Written as 20 row groups from
    one 100,000-row table (~85 MB in memory here)."""
    rows = 100_000
    text = pa.array(["x" * 800] * rows)
    tbl = pa.table({"timestamp": pa.array(np.arange(rows, dtype=np.int64) + 1_790_000_000), "workload": text,
                    "prompt_tokens": pa.array(np.full(rows, 100, np.int32)),
                    "output_tokens": pa.array(np.full(rows, 10, np.int32))})
    with pq.ParquetWriter(path, tbl.schema, compression="zstd", use_dictionary=False) as w:
        for _ in range(20):
            w.write_table(tbl, row_group_size=rows)
    return understate_footer(path)


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
    out["parquet footer understating its size (1.6 GB of pages)"] = _understated_parquet(d / "understated.parquet")
    for size in (10, 25):
        p = d / f"commas_{size}.csv"
        p.write_bytes(HEADER + b"," * (size * MIB) + b"\n")
        out[f"CSV row of {size} MiB of commas"] = p
    p = d / "comma_lines.csv"
    p.write_bytes(HEADER + (b"," * 104_856 + b"\n") * 250)
    out["CSV of 25 MiB of commas in 250 lines"] = p
    p = d / "empty_records.json"
    p.write_bytes(b"[" + b"{}," * ((32 * MIB - 3) // 3) + b"{}]")
    out["JSON array of 32 MiB of {} records"] = p
    p = d / "one_record.json"
    p.write_bytes(b'[{"timestamp": 1790000000, "prompt_tokens": [' + b"[]," * (10 * MIB) + b'[]], "output_tokens": 1}]')
    out["JSON array with one 30 MiB record"] = p
    head = b'{"date": "20251101-120000", "duration": 50.0, "request_rate": 4.0, "input_lens": ['
    lens = b"100," * ((99 * MIB - 200) // 8) + b"100"
    p = d / "bench_99.json"
    p.write_bytes(head + lens + b'], "output_lens": [' + lens + b"]}\n{}\n")
    out["vllm bench result of 99 MiB"] = p
    lens = b"0," * (7 * MIB) + b"0"
    p = d / "bench_lens.json"
    p.write_bytes(head + lens + b'], "output_lens": [' + lens + b"]}")
    out["vllm bench result with 7M requests (28 MiB)"] = p
    p = d / "guidellm_like.json"
    p.write_bytes(b'{"benchmarks": [' + b"{}," * (10 * MIB) + b"{}]}")
    out["guidellm-like report of 30 MiB of {}"] = p
    p = d / "line.jsonl"
    first = b'{"timestamp": "2026-11-01T00:00:00Z", "workload": "chat", "prompt_tokens": 1, "output_tokens": 1}\n'
    p.write_bytes(first + b'{"timestamp": "2026-11-01T00:00:01Z", "workload": "' + b"a" * (30 * MIB) + b'"}\n')
    out["JSON lines with one 30 MiB line"] = p
    p = d / "empty_lines.jsonl"
    p.write_bytes(b'{"timestamp": 1790000000, "workload": "chat", "prompt_tokens": 1, "output_tokens": 1}\n'
                  + b"{}\n" * (20_000_000))
    out["JSON lines: 20 million {} lines (57 MiB)"] = p
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


def measure_bounded(path: Path, fn: str = "parse", column: str = "workload") -> dict:
    """`fn` (parse, inspect or values) on `path` through profiles.uploads (a child process under the OS limits),
    called from this process: outcome, message, wall seconds, this process's peak RSS added by the call (VmHWM,
    reset before it) and the worker's peak RSS and CPU seconds (its own account when it answered; else psutil
    samples of the fork server's workers every 10 ms: the CPU each used since the call began, up to the last sample,
    and the largest RSS seen, which counts the heap a reused worker kept from earlier calls)."""
    import threading

    import psutil

    _root_on_path()
    from profiles import load_catalog, sandbox
    from profiles.traffic import TrafficError
    from profiles.uploads import inspect_traffic, read_traffic, traffic_column_values

    cat = load_catalog()
    sandbox.prepare()
    data = path.read_bytes()
    server = psutil.Process(sandbox._server[0].pid)
    seen = {"rss": 0.0, "cpu": 0.0}
    done = threading.Event()
    start_cpu: dict[int, float] = {}  # a worker's CPU before this call (workers are reused across calls)

    def cpu_of(p: psutil.Process) -> float:
        t = p.cpu_times()
        return t.user + t.system

    for child in server.children():
        try:
            start_cpu[child.pid] = cpu_of(child)
        except psutil.Error:
            pass

    def sample() -> None:
        while not done.is_set():
            for child in server.children():
                try:
                    seen["rss"] = max(seen["rss"], child.memory_info().rss / MIB)
                    seen["cpu"] = max(seen["cpu"], cpu_of(child) - start_cpu.get(child.pid, 0.0))
                except psutil.Error:
                    pass
            done.wait(0.01)

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status_mb("VmHWM")
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t = time.perf_counter()
    try:
        if fn == "parse":
            outcome, message = "parsed", f"{read_traffic(path.name, data, cat).rows} rows"
        elif fn == "inspect":
            outcome, message = "opened", f"{len(inspect_traffic(path.name, data).columns)} columns"
        else:
            outcome, message = "read", f"{len(traffic_column_values(path.name, data, column))} values"
    except TrafficError as e:
        outcome, message = "refused", str(e)
    dt = time.perf_counter() - t
    done.set()
    th.join()
    usage = sandbox.last_usage()  # the worker's own account when it answered; else the samples
    return dict(outcome=outcome, message=message, seconds=dt, parent_added_mb=_status_mb("VmHWM") - base,
                child_peak_mb=usage.peak_mb if usage else seen["rss"],
                child_cpu_s=usage.cpu_s if usage else seen["cpu"])


def _root_on_path() -> None:
    if str(ROOT) not in sys.path:  # run as a script
        sys.path.insert(0, str(ROOT))


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def compare_bounded(data: bytes, name: str = "requests.csv", runs: int = 5) -> dict[str, list[float]]:
    """parse_traffic in this process and through profiles.uploads.read_traffic (a worker under the OS limits, reused
    from call to call as in the app), alternated `runs` times on the same bytes (the two profiles must be equal):
    sorted wall seconds of each ("here", "there"), CPU seconds ("here_cpu": this process; "there_cpu": this
    process plus the worker, from its own account) and minor page faults ("here_faults", "there_faults", counted
    alike), which a machine shared with other work does not blur as it blurs wall time. The first of each is cold
    (this process's heap, a fresh worker's): counted in the lists, and also apart ("first": here, there)."""
    import resource

    _root_on_path()
    from profiles import load_catalog, sandbox
    from profiles.traffic import parse_traffic
    from profiles.uploads import read_traffic

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    cat = load_catalog()
    sandbox.prepare()
    out: dict[str, list[float]] = {k: [] for k in ("here", "there", "here_cpu", "there_cpu", "here_faults",
                                                   "there_faults")}
    for _ in range(runs):
        t, c, f = time.perf_counter(), cpu(), faults()
        a = parse_traffic(name, data, cat)
        out["here"].append(time.perf_counter() - t)
        out["here_cpu"].append(cpu() - c)
        out["here_faults"].append(faults() - f)
        t, c, f = time.perf_counter(), cpu(), faults()
        b = read_traffic(name, data, cat)
        out["there"].append(time.perf_counter() - t)
        usage = sandbox.last_usage()
        out["there_cpu"].append(cpu() - c + usage.cpu_s)
        out["there_faults"].append(faults() - f + usage.page_faults)
        assert a == b, "the bounded parse differs from the in-process one"
    first = [out["here"][0], out["there"][0]]
    return {**{k: sorted(v) for k, v in out.items()}, "first": first}


def print_compare_bounded(data: bytes, name: str, runs: int = 5) -> None:
    """compare_bounded's medians and lower quartiles (a shared machine slows some runs, rarely speeds one up)."""
    r = compare_bounded(data, name, runs)
    mid, low = len(r["here"]) // 2, len(r["here"]) // 4
    print(f"OS limits: the same CSV ({len(data) / MIB:.1f} MiB) parsed in this process vs in a worker under the limits "
          f"(profiles.uploads), alternated {len(r['here'])} times: median wall {r['here'][mid]:.2f} s vs "
          f"{r['there'][mid]:.2f} s ({r['there'][mid] / r['here'][mid] - 1:+.1%}; target < +10 %), lower quartile "
          f"{r['here'][low]:.2f} s vs {r['there'][low]:.2f} s ({r['there'][low] / r['here'][low] - 1:+.1%}); median "
          f"CPU {r['here_cpu'][mid]:.2f} s vs {r['there_cpu'][mid]:.2f} s "
          f"({r['there_cpu'][mid] / r['here_cpu'][mid] - 1:+.1%}, the child's included), lower quartile "
          f"{r['here_cpu'][low]:.2f} s vs {r['there_cpu'][low]:.2f} s "
          f"({r['there_cpu'][low] / r['here_cpu'][low] - 1:+.1%}); wall runs {', '.join(f'{x:.2f}' for x in r['here'])}"
          f" vs {', '.join(f'{x:.2f}' for x in r['there'])}; the first (cold) pair {r['first'][0]:.2f} s vs "
          f"{r['first'][1]:.2f} s; median page faults {r['here_faults'][mid]:,.0f} vs {r['there_faults'][mid]:,.0f}")


def make_nested_xlsx(path: Path, depth: int = 10_000_000) -> Path:
    """An .xlsx whose sheet is `<worksheet><sheetData>` and `depth` nested `<a>` elements, then a 768 KiB base64
    comment (random, so it does not deflate): ~825 KB on disk; an XML parser that builds the tree or counts its
    depth in memory holds ~1.4 GB before it finds the header."""
    import base64
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_xlsx_ingest import MAIN, Part, workbook

    noise = base64.b64encode(random.Random(34).randbytes(768 * 1024))  # 768 KiB of random bytes, as base64
    sheet = Part.repeated(f'<worksheet xmlns="{MAIN}"><sheetData>'.encode(), b"<a>", depth,
                          b"<!--" + noise + b"-->")
    return workbook(path, sheet)


def make_requests_csv(n: int, seed: int = 1) -> bytes:
    """The same synthetic week of requests bench_app.py ingests (one generator for both benchmarks)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_app import make_requests_csv as make

    return make(n, seed)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        print("Bombs: parse_traffic, inspect_upload and column_values('workload') on each, in a fresh process "
              "(targets: refused in < 1 s, peak RSS < 300 MB above the interpreter with its imports)")
        for label, path in make_bombs(d / "bombs").items():
            rs = measure_all(path)
            print(f"  {label} ({path.stat().st_size / MIB:.2f} MiB; interpreter {rs['parse']['baseline_mb']:.0f} MB)")
            for fn, r in rs.items():
                print(f"    {fn:8s} {r['outcome']:8s} wall {r['seconds']:6.3f} s, CPU {r['cpu_s']:6.3f} s, peak RSS "
                      f"+{r['added_mb']:4.0f} MB (absolute {r['peak_mb']:4.0f} MB, after the call "
                      f"{r['rss_after_mb']:4.0f} MB); message {len(r['message'])} chars")
            print(f"      {rs['parse']['message'][:160]}")
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
              f"median {times[1]:.2f} s (runs {', '.join(f'{x:.2f}' for x in times)}; CPU {r['cpu_s']:.2f} s; "
              "target < 5 s)")
        print(f"  peak RSS {r['peak_mb']:.0f} MB = baseline {r['baseline_mb']:.0f} MB + file "
              f"{r['after_read_mb'] - r['baseline_mb']:.0f} MB + parse {added:.0f} MB; parse / file size = "
              f"{added / r['file_mb']:.2f}x (target <= 3x); absolute peak / file size = "
              f"{r['peak_mb'] / r['file_mb']:.2f}x; RSS after the parse {r['rss_after_mb']:.0f} MB")
        print_compare_bounded(p.read_bytes(), p.name)
        print("OS limits: bombs through profiles.uploads (parse; the nested-XML xlsx also inspect): this process's "
              "peak RSS added (target < 300 MB), the child's peak RSS and CPU")
        bombs = make_bombs(d / "bombs2")
        bombs["xlsx: 10,000,000 nested <a>"] = make_nested_xlsx(d / "nested.xlsx")
        for label, path in bombs.items():
            for fn in ("inspect", "parse") if path.suffix == ".xlsx" else ("parse",):
                r = measure_bounded(path, fn)
                print(f"  {label[:48]:48s} {fn:7s} {r['outcome']:8s} wall {r['seconds']:6.2f} s, this process "
                      f"+{r['parent_added_mb']:4.0f} MB, child peak {r['child_peak_mb']:5.0f} MB, CPU "
                      f"{r['child_cpu_s']:5.2f} s; {r['message'][:90]}")
            path.unlink()
        pq.write_table(_csv_table(p), d / "r.parquet")
        r = measure(d / "r.parquet")
        print(f"Ingest: the same rows as Parquet ({r['file_mb']:.1f} MiB), {r['outcome']}: {r['seconds']:.2f} s "
              f"(CPU {r['cpu_s']:.2f} s), peak RSS +{r['added_mb']:.0f} MB over the interpreter, RSS after the parse "
              f"{r['rss_after_mb']:.0f} MB (interpreter {r['baseline_mb']:.0f} MB)")


def _csv_table(path: Path) -> pa.Table:
    import pyarrow.csv as pacsv

    return pacsv.read_csv(path)


if __name__ == "__main__":
    if sys.argv[1:] == ["--limits"]:  # only the in-process vs limited comparison, on the 1,000,000-row CSV
        print_compare_bounded(make_requests_csv(1_000_000), "requests_1m.csv", runs=9)
    else:
        main()
