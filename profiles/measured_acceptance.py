"""A customer's own measured acceptance, read from what their engine already writes: the top tier of the planner's
acceptance (planner.acceptance.tiers: the customer's measurement beats a public head, a family fit and a prior).

Formats (recognised by their content, not their name):
- Prometheus text from a running vLLM's `GET /metrics` (prometheus_client's parser): the counters
  `vllm:spec_decode_num_drafts` and `vllm:spec_decode_num_accepted_tokens_per_pos{position=i}`; the unconditional
  rate at position i is accepted_per_pos[i] / num_drafts (vllm/v1/spec_decode/metrics.py).
- `vllm bench serve --save-result` JSON: `spec_decode_num_drafts` and `spec_decode_per_position_acceptance_rates`
  (unconditional rates per position), or only `spec_decode_acceptance_length` (tau, bonus token included) with
  `num_speculative_tokens` / K from the rates.
- CSV, either per-position rates (`position,rate`: unconditional, vLLM's convention, as a speculators evaluation or
  the metrics give them) or a per-step histogram of accepted draft tokens (`accepted,count`: how many verifier steps
  accepted 0, 1, ..., K drafts; K is the largest `accepted` listed, so list K with count 0 if no step took them all),
  or one row per request (`accepted_tokens,steps`, optionally `num_spec_tokens`: vLLM's per-request spec-decode
  metrics, `--per-request-spec-decode-metrics summary`, fields num_accepted_draft_tokens, num_spec_steps and
  num_spec_tokens, whose names are accepted too). A request's steps each emit its accepted drafts plus a bonus token:
  it emitted accepted + steps tokens in `steps` steps. The pooled acceptance length is tau = sum(accepted + steps) /
  sum(steps); each request's TPOT over the mean TPOT is tau / ((accepted + steps) / steps), and its percentiles over
  requests are the measured spread the planner's TPOT percentiles use (planner.acceptance.tails). With
  num_spec_tokens the rates are the i.i.d. chain with that tau at that K; without it, K is stated where the file is
  used (the CLI's --k, else the method's default K).

The result is the conditional per-token alpha per position (alpha_i = p_i / p_(i-1)), the convention the planner's
`--alpha-per-position` takes, with tau and the count it rests on."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field

from planner.types import Acceptance

MAX_BYTES = 4 * 1024 * 1024  # a metrics page or a bench result is kilobytes; a histogram a few lines
MAX_K = 32  # draft positions
# A counter or a rate is at most ~20 digits (a float64 carries 17 significant ones); a longer run of digits is not a
# measurement, and Python refuses to turn one of over 4,300 digits into an int (sys.get_int_max_str_digits).
MAX_DIGITS = 64
MAX_REQUESTS = 200_000  # rows of a per-request CSV: a benchmark run is thousands of requests
MAX_CSV_LINE = 1_000  # characters on a line of a two-column CSV (a number and a number)
MAX_CELL = 100  # characters in a CSV cell: a column name or a number
MAX_JSON_DEPTH = 32  # nesting of a bench result: an object of lists of numbers is depth 2
SHOWN = 80  # characters of an offending value quoted in a message
_DIGIT_RUN = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
NUM_DRAFTS = "vllm:spec_decode_num_drafts"


class MeasuredAcceptanceError(ValueError):
    """A file that is not a measured acceptance we can read: says which file, what was found and what is expected."""


@dataclass(frozen=True)
class MeasuredAcceptance:
    """Conditional per-token alpha per draft position (planner convention), from one file."""

    per_position: tuple[float, ...]  # conditional alpha_i, i = 1..K
    unconditional: tuple[float, ...]  # p_i = accepted at position i / drafts (vLLM's per-position rate)
    drafts: int | None  # verifier steps the rates rest on (None: the file does not say)
    fmt: str  # which format it was read as
    name: str  # the file's name
    # A per-request file: the pooled tau when the file states no K (per_position is then empty), the requests it
    # rests on, and a request's TPOT over the mean TPOT at percentiles 0..100 (planner.types.Acceptance.tpot_spread)
    tau: float | None = None
    requests: int | None = None
    tpot_spread: tuple[float, ...] | None = field(default=None, repr=False)

    @property
    def k(self) -> int:
        """Draft positions the file states (0: a per-request file without num_spec_tokens)."""
        return len(self.per_position)

    @property
    def acceptance_length(self) -> float:
        """tau = 1 + sum p_i (bonus token included); a per-request file's pooled tau."""
        return self.tau if self.tau is not None else 1.0 + sum(self.unconditional)

    def describe(self) -> str:
        n = f" over {self.drafts:,} drafts" if self.drafts else ""
        if self.requests:
            n += f" and {self.requests:,} requests"
        head = f"{self.name} ({self.fmt}): " + (f"K={self.k}, " if self.k else "K not in the file, ")
        spread = ("" if self.tpot_spread is None else
                  f"; a request's TPOT over the mean: p50 {self.tpot_spread[50]:.2f}x, p90 {self.tpot_spread[90]:.2f}x,"
                  f" p99 {self.tpot_spread[99]:.2f}x")
        if not self.k:
            return f"{head}acceptance length tau {self.acceptance_length:.2f} (bonus token included){n}{spread}"
        rates = ", ".join(f"{a:.3f}" for a in self.per_position)
        return (f"{head}acceptance length tau {self.acceptance_length:.2f} (bonus token included){n}; conditional "
                f"per-token alpha by position {rates}{spread}")

    def for_plan(self, default_k: int) -> tuple[Acceptance, int]:
        """(the planner's Acceptance, the K it was measured at): the per-position alpha at the file's K, or a
        per-request file's pooled tau at `default_k` (the K stated where the file is used) when the file has none;
        the measured spread rides along."""
        if self.k:
            return Acceptance("per_token", per_position=self.per_position, tpot_spread=self.tpot_spread), self.k
        if self.acceptance_length > default_k + 1.0 + 1e-9:
            raise _error(self.name, f"acceptance length {self.acceptance_length:.3f} at K={default_k}; a step emits at "
                                    f"most K + 1 tokens, so this file was measured at K >= "
                                    f"{math.ceil(self.acceptance_length - 1.0 - 1e-9)}: add a num_spec_tokens column "
                                    "or state K")
        return (Acceptance("acceptance_length", value=self.acceptance_length, tpot_spread=self.tpot_spread),
                default_k)


def _error(name: str, what: str) -> MeasuredAcceptanceError:
    return MeasuredAcceptanceError(f"{name}: {what}")


def _cut(value: object) -> str:
    """repr of a value quoted in a message, at most SHOWN characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN - 1]}…({len(text):,} characters)"


def _line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _check_digit_runs(name: str, text: str) -> None:
    m = _DIGIT_RUN.search(text)
    if m:
        raise _error(name, f"line {_line_of(text, m.start())}: a run of {len(m.group()):,} digits "
                           f"({_cut(m.group())}); a counter or a rate has at most {MAX_DIGITS} digits")


def _check_json_depth(name: str, text: str) -> None:
    """Refuse nesting deeper than MAX_JSON_DEPTH before json.loads, which recurses once per level."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = 0
    for i, c in enumerate(brackets):
        depth += 1 if c in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise _error(name, f"JSON nested deeper than {MAX_JSON_DEPTH} levels ({_cut(brackets[:i + 1])}); a "
                               "bench result is an object of numbers and lists of numbers")


def _from_unconditional(name: str, p: list[float], drafts: int | None, fmt: str) -> MeasuredAcceptance:
    if not p:
        raise _error(name, "no per-position acceptance in it")
    if len(p) > MAX_K:
        raise _error(name, f"{len(p)} draft positions; at most {MAX_K} are read")
    for i, x in enumerate(p, 1):
        if not (math.isfinite(x) and 0.0 <= x <= 1.0):
            raise _error(name, f"the rate at position {i} is {x!r}; a rate is a fraction from 0 to 1 (not percent)")
    for i in range(1, len(p)):
        if p[i] > p[i - 1] + 1e-9:
            raise _error(name, f"the rate at position {i + 1} ({p[i]:.4f}) is above position {i}'s ({p[i - 1]:.4f}); "
                               "unconditional rates (accepted at position i / drafts) never grow with i")
    cond, prev = [], 1.0
    for x in p:
        cond.append(x / prev if prev > 0 else 0.0)
        prev = x
    return MeasuredAcceptance(tuple(cond), tuple(p), drafts, fmt, name)


def _prometheus(name: str, text: str) -> MeasuredAcceptance:
    from prometheus_client.parser import text_string_to_metric_families

    drafts, per_pos = 0.0, {}

    def counter(s) -> float:
        if not (math.isfinite(s.value) and s.value >= 0):
            raise _error(name, f"{s.name}{_cut(s.labels)} is {s.value!r}; a counter is a finite number >= 0")
        return s.value

    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if not s.name.endswith("_total"):
                    continue  # "_created" timestamps
                if fam.name == NUM_DRAFTS:
                    drafts += counter(s)
                elif fam.name == ACCEPTED_PER_POS:
                    label = s.labels.get("position", "")
                    if not (label.isascii() and label.isdigit() and len(label) <= 2 and int(label) < MAX_K):
                        raise _error(name, f"{s.name} position={_cut(label)}; a position is a whole number "
                                           f"0..{MAX_K - 1}")
                    pos = int(label)
                    per_pos[pos] = per_pos.get(pos, 0.0) + counter(s)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        if isinstance(exc, MeasuredAcceptanceError):
            raise
        raise _error(name, f"not readable as Prometheus metrics text ({_cut(str(exc))})") from None
    if not math.isfinite(drafts) or any(not math.isfinite(v) for v in per_pos.values()):
        raise _error(name, "the counters add up past the largest number a float holds (1.8e308); a counter is a "
                           "finite number")
    if drafts <= 0:
        raise _error(name, f"no {NUM_DRAFTS}_total above 0: the engine has not speculated since it started, or this "
                           "is not a speculating vLLM's /metrics")
    if sorted(per_pos) != list(range(len(per_pos))):
        raise _error(name, f"{ACCEPTED_PER_POS} positions {sorted(per_pos)}; expected 0, 1, ..., K-1")
    return _from_unconditional(name, [per_pos[i] / drafts for i in range(len(per_pos))], int(drafts),
                               "vLLM /metrics (Prometheus text)")


def _bench_json(name: str, doc: dict) -> MeasuredAcceptance:
    rates = doc.get("spec_decode_per_position_acceptance_rates")
    drafts = doc.get("spec_decode_num_drafts")
    if drafts is not None and (isinstance(drafts, bool) or not isinstance(drafts, (int, float))
                               or not math.isfinite(drafts) or drafts < 0):
        raise _error(name, f"spec_decode_num_drafts is {_cut(drafts)}; a count is a finite number >= 0")
    drafts = int(drafts) if drafts else None
    if isinstance(rates, list) and rates:
        if len(rates) > MAX_K:
            raise _error(name, f"spec_decode_per_position_acceptance_rates has {len(rates)} positions; at most "
                               f"{MAX_K} are read")
        for i, x in enumerate(rates, 1):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise _error(name, f"spec_decode_per_position_acceptance_rates position {i} is {_cut(x)}; a rate "
                                   "is a number from 0 to 1")
        p = [float(x) for x in rates]  # ints of at most MAX_DIGITS digits: float() cannot overflow
        return _from_unconditional(name, p, drafts, "vllm bench serve result (per-position rates)")
    if rates is not None:
        raise _error(name, f"spec_decode_per_position_acceptance_rates is {_cut(rates)}; expected a list of rates "
                           "from 0 to 1, one per draft position")
    raise _error(name, "a JSON document without spec_decode_per_position_acceptance_rates: save the result of "
                       "`vllm bench serve --save-result` against a server that speculates")


def _csv_rows(name: str, text: str) -> list[tuple[int, list[str]]]:
    """(line, cells) of the non-blank rows, each line and cell bounded."""
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_CSV_LINE:
            raise _error(name, f"line {n} has {len(line):,} characters ({_cut(line)}); a line of this CSV is at most "
                               f"{MAX_CSV_LINE:,}")
    rows, reader = [], csv.reader(io.StringIO(text))
    try:
        for r in reader:
            if any(c.strip() for c in r):
                rows.append((reader.line_num, r))
    except csv.Error as exc:  # a quoted cell running over lines past the field limit, a stray quote
        raise _error(name, f"line {reader.line_num}: not readable as CSV ({_cut(str(exc))})") from None
    for n, r in rows:
        for c in r:
            if len(c) > MAX_CELL:
                raise _error(name, f"line {n}: a cell of {len(c):,} characters ({_cut(c)}); a cell is a column "
                                   f"name or a number, at most {MAX_CELL} characters")
    return rows


def _csv(name: str, text: str) -> MeasuredAcceptance:
    rows = _csv_rows(name, text)
    if len(rows) < 2:
        raise _error(name, "a CSV needs a header and at least one row")
    head = [c.strip().lower() for c in rows[0][1]]
    body = rows[1:]
    if _column(head, ACCEPTED_NAMES) is not None and _column(head, STEPS_NAMES) is not None:
        return _per_request(name, head, body)
    if len(body) > 4 * MAX_K:
        raise _error(name, f"{len(body)} rows; a per-position table or histogram has at most {MAX_K + 1}")

    def number(r: list[str], col: int, what: str, line: int, *, whole: bool = False) -> float:
        cell = r[col] if col < len(r) else ""
        try:
            x = float(cell)
        except ValueError:
            raise _error(name, f"line {line}: {what} {_cut(cell)} is not a number") from None
        if not math.isfinite(x) or (whole and x != int(x)):
            kind = "a whole number" if whole else "a finite number"
            raise _error(name, f"line {line}: {what} {_cut(cell)}; expected {kind}")
        return x

    if "position" in head and "rate" in head:
        ip, ir = head.index("position"), head.index("rate")
        got: dict[int, float] = {}
        for n, r in body:
            pos = number(r, ip, "position", n, whole=True)
            if not 0 <= pos <= MAX_K or int(pos) in got:
                raise _error(name, f"line {n}: position {_cut(r[ip])}; positions are 1..K (or 0..K-1), K at most "
                                   f"{MAX_K}, each once")
            got[int(pos)] = number(r, ir, "rate", n)
        first = min(got)
        if sorted(got) != list(range(first, first + len(got))) or first not in (0, 1):
            raise _error(name, f"positions {sorted(got)}; expected 1..K (or 0..K-1), each once")
        return _from_unconditional(name, [got[i] for i in sorted(got)], None, "per-position rates (CSV)")
    if "accepted" in head and "count" in head:
        ia, ic = head.index("accepted"), head.index("count")
        hist: dict[int, float] = {}
        for n, r in body:
            a, c = number(r, ia, "accepted", n, whole=True), number(r, ic, "count", n, whole=True)
            if not 0 <= a <= MAX_K or c < 0:
                raise _error(name, f"line {n}: accepted={_cut(r[ia])}, count={_cut(r[ic])}; expected whole numbers, "
                                   f"accepted 0..{MAX_K}, count >= 0")
            hist[int(a)] = hist.get(int(a), 0.0) + c
        steps = sum(hist.values())
        k = max(hist)
        if not math.isfinite(steps):
            raise _error(name, "the counts add up past the largest number a float holds (1.8e308); a count is a "
                               "finite number")
        if steps <= 0 or k < 1:
            raise _error(name, "no verifier steps counted (every count is 0), or no step with an accepted draft listed")
        p = [sum(c for a, c in hist.items() if a >= i) / steps for i in range(1, k + 1)]
        return _from_unconditional(name, p, int(steps), "per-step histogram of accepted drafts (CSV)")
    raise _error(name, f"a CSV with columns {_cut(head)}; expected 'position,rate' (unconditional per-position rates) "
                       "or 'accepted,count' (verifier steps by accepted drafts)")


ACCEPTED_NAMES = ("accepted_tokens", "num_accepted_draft_tokens")
STEPS_NAMES = ("steps", "num_spec_steps")
K_NAMES = ("num_spec_tokens", "k")


def _column(head: list[str], names: tuple[str, ...]) -> int | None:
    for n in names:
        if n in head:
            return head.index(n)
    return None


def _percentiles(values: list[float]) -> tuple[float, ...]:
    """Percentiles 0, 1, ..., 100 of `values`, linear between order statistics (numpy's default)."""
    v = sorted(values)
    out = []
    for q in range(101):
        x = q / 100.0 * (len(v) - 1)
        i = int(x)
        j = min(i + 1, len(v) - 1)
        out.append(v[i] + (x - i) * (v[j] - v[i]))
    return tuple(out)


def _per_request(name: str, head: list[str], body: list[tuple[int, list[str]]]) -> MeasuredAcceptance:
    """A per-request CSV (accepted_tokens,steps[,num_spec_tokens]) -> the pooled tau and the TPOT spread."""
    if len(body) > MAX_REQUESTS:
        raise _error(name, f"{len(body):,} request rows; at most {MAX_REQUESTS:,} are read")
    ia, is_, ik = _column(head, ACCEPTED_NAMES), _column(head, STEPS_NAMES), _column(head, K_NAMES)

    def whole(r: list[str], col: int, field_name: str, line: int, low: int) -> int:
        cell = r[col].strip() if col < len(r) else ""
        try:
            x = float(cell)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and x == int(x) and x >= low):
            raise _error(name, f"line {line}: {field_name}={_cut(cell)}; expected a whole number >= {low}")
        return int(x)

    k_file: int | None = None
    tokens, steps, ratios = 0, 0, []
    for line, r in body:
        a = whole(r, ia, head[ia], line, 0)
        s = whole(r, is_, head[is_], line, 1)
        if ik is not None:
            k = whole(r, ik, head[ik], line, 1)
            if k > MAX_K or (k_file is not None and k != k_file):
                raise _error(name, f"line {line}: {head[ik]}={_cut(r[ik])}; expected one K from 1 to {MAX_K} on "
                                   f"every row (the first row has {k_file if k_file is not None else k})")
            k_file = k
        limit = (k_file if k_file is not None else MAX_K) * s
        if a > limit:
            raise _error(name, f"line {line}: {head[ia]}={a:,} with {head[is_]}={s:,}; a step accepts at most "
                               f"K = {k_file if k_file is not None else MAX_K} drafts, so at most {limit:,}")
        tokens += a + s
        steps += s
        ratios.append(s / (a + s))  # steps per token: a request's TPOT in units of the step time
    tau = tokens / steps
    spread = _percentiles([tau * x for x in ratios])  # TPOT over the mean TPOT (step time / tau)
    fmt = "per-request spec-decode metrics (CSV)"
    if k_file is None:
        return MeasuredAcceptance((), (), steps, fmt, name, tau=tau, requests=len(body), tpot_spread=spread)
    from planner.acceptance.rates import alpha_from_acceptance_length

    alpha = float(alpha_from_acceptance_length(min(tau, k_file + 1.0), k_file))
    cond = (alpha,) * k_file
    p = tuple(alpha ** (i + 1) for i in range(k_file))
    return MeasuredAcceptance(cond, p, steps, fmt, name, tau=tau, requests=len(body), tpot_spread=spread)


def read_measured_acceptance(name: str, data: bytes) -> MeasuredAcceptance:
    """One uploaded file -> the measured acceptance in it (MeasuredAcceptanceError says why not)."""
    if len(data) > MAX_BYTES:
        raise _error(name, f"{len(data):,} bytes; a measured acceptance file is at most {MAX_BYTES:,} bytes")
    if not data.strip():
        raise _error(name, "an empty file; expected vLLM /metrics text, a bench result JSON or a CSV")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(name, f"not UTF-8 text (byte {exc.start:,} is {_cut(data[exc.start:exc.start + 8])}); "
                           "expected vLLM /metrics text, a bench result JSON or a CSV") from None
    if "\x00" in text:
        raise _error(name, f"binary data (a NUL byte at line {_line_of(text, text.index(chr(0)))}); expected vLLM "
                           "/metrics text, a bench result JSON or a CSV")
    _check_digit_runs(name, text)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        _check_json_depth(name, text)
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _error(name, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(doc, dict):
            raise _error(name, f"a JSON {type(doc).__name__} ({_cut(doc)}); a bench result is a JSON object")
        return _bench_json(name, doc)
    if NUM_DRAFTS in text or ACCEPTED_PER_POS in text or stripped.startswith("# HELP"):
        return _prometheus(name, text)
    return _csv(name, text)
