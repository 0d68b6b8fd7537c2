"""CLI fuzz: random but type-valid flags for `plan`, `compare`, `evaluate`, `levers` and `convert`, run in-process
through cli.main.main (no subprocesses), each run checked (prints counts; exit code 1 if any run failed):

    python benchmarks/fuzz_cli.py [--runs 1000] [--seed 0] [--show 3]

Names come from the catalogue (`python -m planner list models|hardware|...`); about 25 % of the numbers are extreme
(0, negatives, 1e12, tiny floats, huge K and batch, an SLO of 0.001 ms, a price of 0, ...), and --acceptance-file
gets a file that is well-formed or broken. A run passes when:
- it ends with exit code 0 (JSON on stdout) or 2 with exactly one `error: ...` line on stderr: never a traceback;
- no number under a money field (its name mentions usd, saving, bill, cost or npv) is NaN where a number is due (NaN
  is the planner's "none" in a record that is not feasible, available or applied, and at an alpha-band end that
  misses the SLO: NAN_MEANS_NONE), and none that cannot be below zero (a price, a bill, a cost; not a saving, an NPV
  or a change, which are signed) is negative;
- a recommendation names a method whose row in `methods` is feasible (fits memory and meets the SLO), at the same K
  and batch, with its TPOT under the SLO.
tests/cli/test_cli_fuzz.py runs ~60 of these cases on every test run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cli import main as cli  # noqa: E402

COMMANDS = ("plan", "compare", "evaluate", "levers", "convert")
EXTREME_SHARE = 0.25
MONEY_WORDS = ("usd", "saving", "bill", "cost", "npv")
SIGNED_WORDS = ("saving", "npv", "change", "delta", "pct")  # money that may fall below zero
EXTREME_INTS = (0, -1, -7, 10**6, 10**9, 10**12, 2**31)
EXTREME_FLOATS = (0.0, -1.0, -1e6, 1e12, 1e300, 1e-12, 5e-324, 1e-3)

# --acceptance-file contents: well-formed ones and the broken shapes profiles/measured_acceptance.py refuses
_METRICS = ("# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total {d}\n"
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} {a0}\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="1"}} {a1}\n')
ACCEPTANCE_FILES: dict[str, bytes] = {
    "rates.csv": b"position,rate\n1,0.8\n2,0.6\n3,0.4\n",
    "one_rate.csv": b"position,rate\n1,0.7\n",
    "zero_rates.csv": b"position,rate\n1,0\n2,0\n",
    "full_rates.csv": b"position,rate\n1,1\n2,1\n3,1\n4,1\n",
    "hist.csv": b"accepted,count\n0,100\n1,80\n2,60\n3,60\n",
    "metrics.txt": _METRICS.format(d=1000, a0=800, a1=500).encode(),
    "bench.json": json.dumps({"spec_decode_num_drafts": 10, "spec_decode_per_position_acceptance_rates":
                              [0.9, 0.8, 0.7, 0.6, 0.5]}).encode(),
    "inf_position.csv": b"position,rate\ninf,0.7\n",
    "nan_counter.txt": _METRICS.format(d="NaN", a0=1, a1=1).encode(),
    "inf_counter.txt": _METRICS.format(d="+Inf", a0=1, a1=1).encode(),
    "digits.csv": b"position,rate\n1,0." + b"7" * 401 + b"\n",
    "brackets.json": b"[" * 100_000,
    "cell.csv": b"position,rate\n1," + b"x" * 200_000 + b"\n",
    "empty.csv": b"",
    "png.csv": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "columns.csv": b"a,b\n1,2\n",
}


def catalogue_names() -> dict[str, list[str]]:
    """models, hardware, methods, workloads, languages: as `python -m planner list ...` prints them."""
    names = {}
    for what in ("models", "hardware", "methods", "workloads", "languages"):
        got: list[Any] = []
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["list", what], emit=got.append)
        if code != 0:
            raise SystemExit(f"`python -m planner list {what}` failed")
        names[what] = sorted(got[0])
    return names


class _Gen:
    """One run's flags from a seeded random.Random."""

    def __init__(self, rng: random.Random, names: dict[str, list[str]], files: dict[str, str]):
        self.rng, self.names, self.files = rng, names, files

    def extreme(self) -> bool:
        return self.rng.random() < EXTREME_SHARE

    def int_(self, lo: int, hi: int) -> str:
        return str(self.rng.choice(EXTREME_INTS) if self.extreme() else self.rng.randint(lo, hi))

    def float_(self, lo: float, hi: float) -> str:
        return repr(self.rng.choice(EXTREME_FLOATS) if self.extreme() else round(self.rng.uniform(lo, hi), 4))

    def maybe(self, p: float = 0.3) -> bool:
        return self.rng.random() < p

    def acceptance(self) -> list[str]:
        r = self.rng
        kind = r.choice(["none", "none", "alpha", "per_position", "dar", "length", "file"])
        if kind == "alpha":
            return ["--alpha", self.float_(0.3, 0.95)]
        if kind == "per_position":
            n = int(self.int_(1, 6)) if not self.extreme() else r.choice([1, 40])
            vals = [self.float_(0.2, 1.0) for _ in range(max(1, min(n, 40)))]
            return ["--alpha-per-position", ",".join(vals)]
        if kind == "dar":
            return ["--draft-acceptance-rate", self.float_(0.1, 0.9)]
        if kind == "length":
            return ["--acceptance-length", self.float_(1.0, 5.0)]
        if kind == "file":
            return ["--acceptance-file", self.files[r.choice(sorted(self.files))]]
        return []

    def scenario(self, cmd: str) -> list[str]:
        r, n = self.rng, self.names
        argv = ["--model", r.choice(n["models"]), "--hardware", r.choice(n["hardware"])]
        if cmd == "evaluate" or self.maybe(0.5):
            argv += ["--method", r.choice(n["methods"])]
        if self.maybe(0.4):
            argv += ["--k", self.int_(1, 8)]
        if cmd == "evaluate" and self.maybe(0.5) or self.maybe(0.15):
            argv += ["--batch", self.int_(1, 256)]
        if self.maybe(0.4):
            argv += ["--workload", r.choice(n["workloads"])]
        if self.maybe(0.3):
            argv += ["--language", r.choice(n["languages"])]
        for flag, lo, hi in (("--context-tokens", 128, 32_768), ("--prompt-tokens", 16, 16_384),
                             ("--output-tokens", 16, 4096)):
            if self.maybe(0.15):
                argv += [flag, self.int_(lo, hi)]
        if self.maybe(0.5):
            argv += ["--tp", str(r.choice([1, 2, 4, 8])) if not self.extreme() else self.int_(1, 8)]
        if self.maybe(0.1):
            argv += ["--attention-dp"]
        if self.maybe(0.2):
            argv += ["--dtype", r.choice(["bf16", "fp8", "nvfp4", "mxfp4"])]
        if self.maybe(0.15):
            argv += ["--kv-dtype", r.choice(["bf16", "fp8"])]
        if self.maybe(0.3):
            argv += ["--usd-per-gpu-hour", self.float_(0.5, 12.0)]
        if self.maybe(0.2):
            argv += ["--engine", r.choice(["vllm", "sglang", "trtllm"])]
        if self.maybe(0.5):
            argv += ["--tpot-slo-ms", self.float_(5.0, 200.0) if not self.maybe(0.05) else "0.001"]
        if self.maybe(0.1):
            argv += ["--draft-cost-ratio", self.float_(0.01, 0.5)]
        if self.maybe(0.1):
            argv += ["--tuned"]
        if self.maybe(0.2):
            argv += ["--temperature", self.float_(0.0, 2.0)]
        if self.maybe(0.08):
            argv += ["--tree"]
        elif self.maybe(0.05):
            argv += ["--tree-steps", self.int_(1, 6), "--tree-topk", self.int_(1, 8),
                     "--tree-draft-tokens", self.int_(2, 64)]
        if self.maybe(0.3):
            argv += ["--monthly-output-tokens", self.float_(1e6, 1e11)]
        return argv + self.acceptance()

    def plan_flags(self) -> list[str]:
        r, argv = self.rng, []
        if self.maybe(0.15):
            argv += ["--engineering-usd-per-week", self.float_(0.0, 20_000.0)]
        if self.maybe(0.15):
            argv += ["--discount-rate", self.float_(0.0, 0.3)]
        if self.maybe(0.15):
            argv += ["--horizon-months", self.int_(1, 60)]
        if self.maybe(0.3):
            argv += ["--billing", r.choice(["autoscaled", "fixed"])]
        if self.maybe(0.15):
            argv += ["--confidence", self.float_(0.5, 0.99)]
        if self.maybe(0.1):
            argv += ["--price-range"]
        if self.maybe(0.15):
            argv += ["--prefix-cache-share", self.float_(0.0, 0.9)]
        return argv

    def argv(self, cmd: str) -> list[str]:
        r = self.rng
        if cmd == "convert":
            flag, lo, hi = r.choice([("--alpha", 0.0, 1.0), ("--draft-acceptance-rate", 0.0, 1.0),
                                     ("--acceptance-length", 1.0, 6.0)])
            return ["convert", "--k", self.int_(1, 8), flag, self.float_(lo, hi)]
        argv = [cmd, *self.scenario(cmd)]
        if cmd in ("plan", "compare", "levers"):
            argv += self.plan_flags()
        if cmd == "plan":
            if self.maybe(0.3):
                argv += ["--current-method", r.choice(["none", *self.names["methods"]])]
            argv += ["--no-levers"] if self.maybe(0.6) else []
            if self.maybe(0.3):
                argv += ["--daily-shape", r.choice(["flat", "business_hours", "consumer_evening"])]
            if self.maybe(0.15):
                argv += ["--spend-usd-per-month", self.float_(1_000.0, 1e6)]
                if self.maybe(0.5):
                    argv += ["--gpus", self.int_(1, 256)]
            if self.maybe(0.04):
                argv += ["--compare-hardware"]
                if self.maybe(0.5):
                    argv += ["--gpu-price", f"{r.choice(self.names['hardware'])}={self.float_(0.5, 10.0)}"]
        return argv


def cases(seed: int, runs: int, names: dict[str, list[str]], files: dict[str, str]) -> Iterator[list[str]]:
    """`runs` argument lists, the same ones for the same seed."""
    rng = random.Random(seed)
    gen = _Gen(rng, names, files)
    for _ in range(runs):
        yield gen.argv(rng.choice(COMMANDS))


def _walk(obj: Any, key: str = "", parent: dict | None = None) -> Iterator[tuple[str, Any, dict | None]]:
    """(field name, value, the record holding it) for every leaf."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, str(k), obj)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v, key, parent)
    else:
        yield key, obj, parent


# NaN is the planner's "no number here", written as null: in a record that is not feasible, not available or not
# applied (planner/search/points.py unavailable(), planner/answer.py's lever step), and at an end of the alpha band that
# misses the SLO (planner/search/points.py: usd_per_mtok_low / _high); and a $/Mtok over a volume of 0 tokens.
NAN_MEANS_NONE = ("usd_per_mtok_low", "usd_per_mtok_high")


def _nan_allowed(key: str, parent: dict | None, no_volume: bool) -> bool:
    if no_volume and key.endswith("effective_usd_per_mtok"):
        return True  # a bill / no output tokens: "nan without a volume" (planner/money/bill.py)
    return key in NAN_MEANS_NONE or (parent is not None and any(
        parent.get(flag) is False for flag in ("feasible", "available", "applied")))


def money_problems(obj: Any) -> list[str]:
    """'nan money: FIELD' / 'negative money: FIELD' for every money number that is NaN where a number is due, or
    below zero where it cannot be."""
    out = []
    econ = obj.get("economics") if isinstance(obj, dict) else None
    no_volume = isinstance(econ, dict) and econ.get("monthly_output_tokens") == 0
    for key, v, parent in _walk(obj):
        low = key.lower()
        if not any(w in low for w in MONEY_WORDS) or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if math.isnan(v) and not _nan_allowed(key, parent, no_volume):
            out.append(f"nan money: {key}")
        elif v < 0 and not any(w in low for w in SIGNED_WORDS):
            out.append(f"negative money: {key}")
    return out


def recommendation_problems(obj: Any) -> list[str]:
    """A recommendation whose method row is not feasible (meets_slo: its TPOT is under the SLO), is not at its K
    and batch, or has no finite TPOT or $/Mtok."""
    if not isinstance(obj, dict) or not obj.get("recommendation"):
        return []
    rec = obj["recommendation"]
    rows = [m for m in obj.get("methods", []) if m["method"] == rec["method"]]
    if not rows:
        return ["infeasible recommendation: its method is not in methods"]
    m = rows[0]
    if not (m["feasible"] and m["fits_memory"] and m["meets_slo"]):
        return [f"infeasible recommendation: feasible={m['feasible']}, fits_memory={m['fits_memory']}, "
                f"meets_slo={m['meets_slo']}"]
    if (m["k"], m["batch"]) != (rec["k"], rec["batch"]):
        return ["infeasible recommendation: not its row's K and batch"]
    if not all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in (m["tpot_ms"], rec["usd_per_mtok"])):
        return ["infeasible recommendation: no finite TPOT or $/Mtok"]
    return []


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int | None
    problems: tuple[str, ...]  # failure classes; empty: the run passed
    detail: str
    seconds: float


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow


def run_one(argv: list[str], *, limit_s: int = 0) -> Outcome:
    """One CLI call in this process, checked; limit_s > 0: a call still running after that many seconds is stopped
    and counted as 'slow' (SIGALRM; main thread only)."""
    got: list[Any] = []
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code: int | None = None
    problems: list[str] = []
    detail = ""

    def emit(result: Any) -> None:
        got.append(result)
        cli._print(result)  # the real writer: a result that is not JSON-serialisable fails here, as on the CLI

    if limit_s:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv, emit=emit)
    except _Slow:
        problems.append(f"slow: over {limit_s} s")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - what the CLI let through is what this counts
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f for f in reversed(tb) if "/planner/" in f.filename or "/profiles/" in f.filename), tb[-1])
        problems.append(f"traceback: {type(exc).__name__} at {Path(where.filename).name}:{where.lineno}")
        detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        if limit_s:
            signal.alarm(0)
    seconds = time.perf_counter() - t0
    if code == 2:
        lines = err.getvalue().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append("error not one 'error:' line")
            detail = err.getvalue()[:300]
    elif code == 0:
        problems += money_problems(got[0] if got else None)
        if argv[0] == "plan":
            problems += recommendation_problems(got[0] if got else None)
        if problems:
            detail = "; ".join(problems)
    elif code is not None:
        problems.append(f"exit code {code}")
    return Outcome(tuple(argv), code, tuple(dict.fromkeys(problems)), detail, seconds)


@contextlib.contextmanager
def acceptance_files() -> Iterator[dict[str, str]]:
    """ACCEPTANCE_FILES written to a temporary folder: name -> path."""
    with tempfile.TemporaryDirectory(prefix="fuzz_cli_") as tmp:
        paths = {}
        for name, data in ACCEPTANCE_FILES.items():
            (Path(tmp) / name).write_bytes(data)
            paths[name] = str(Path(tmp) / name)
        yield paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=3, help="example argument lists printed per failure class")
    ap.add_argument("--limit-s", type=int, default=120, help="a run over this many seconds is a failure ('slow')")
    ap.add_argument("--memory-gb", type=float, default=4.0,
                    help="address-space limit of this process: a run that allocates past it fails with MemoryError "
                         "(counted) instead of the machine's out-of-memory killer ending the whole fuzz")
    ap.add_argument("--log", type=Path, help="write each run (argv, exit code, failures, seconds) as a JSON line")
    a = ap.parse_args()
    limit = int(a.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    names = catalogue_names()
    by_class: Counter[str] = Counter()
    examples: dict[str, list[Outcome]] = {}
    codes: Counter[str] = Counter()
    seconds: dict[str, list[float]] = {c: [] for c in COMMANDS}
    t0 = time.perf_counter()
    with acceptance_files() as files:
        log = a.log.open("w") if a.log else None
        for i, argv in enumerate(cases(a.seed, a.runs, names, files), 1):
            if log:
                log.write(json.dumps({"run": i, "argv": argv}) + "\n")
                log.flush()
            o = run_one(argv, limit_s=a.limit_s)
            if log:
                log.write(json.dumps({"run": i, "code": o.code, "problems": o.problems, "detail": o.detail,
                                      "seconds": round(o.seconds, 3)}) + "\n")
            codes[f"{argv[0]} exit {o.code}"] += 1
            seconds[argv[0]].append(o.seconds)
            for p in o.problems:
                by_class[p] += 1
                examples.setdefault(p, []).append(o)
            if i % 50 == 0:
                print(f"{i} runs, {sum(1 for _ in by_class.elements())} failures, "
                      f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    failed = len({o.argv for v in examples.values() for o in v})
    print(f"{a.runs} runs (seed {a.seed}) in {time.perf_counter() - t0:.0f} s; {failed} failed")
    for k in sorted(codes):
        print(f"  {k}: {codes[k]}")
    for c in COMMANDS:
        s = sorted(seconds[c])
        if s:
            print(f"  {c}: {len(s)} runs, median {s[len(s) // 2] * 1e3:.0f} ms, max {s[-1] * 1e3:.0f} ms")
    for cls, n in by_class.most_common():
        print(f"FAIL {n:4d}  {cls}")
        for o in examples[cls][: a.show]:
            print(f"        python -m planner {' '.join(o.argv)}\n          {o.detail[:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
