"""A customer's own measured acceptance, read from what their engine already writes: the top tier of the planner's
acceptance (planner.acceptance_tiers: the customer's measurement beats a public head, a family fit and a prior).

Formats (recognised by their content, not their name):
- Prometheus text from a running vLLM's `GET /metrics` (prometheus_client's parser): the counters
  `vllm:spec_decode_num_drafts` and `vllm:spec_decode_num_accepted_tokens_per_pos{position=i}`; the unconditional
  rate at position i is accepted_per_pos[i] / num_drafts (shared/DESIGN.md; vllm/v1/spec_decode/metrics.py).
- `vllm bench serve --save-result` JSON: `spec_decode_num_drafts` and `spec_decode_per_position_acceptance_rates`
  (unconditional rates per position), or only `spec_decode_acceptance_length` (tau, bonus token included) with
  `num_speculative_tokens` / K from the rates.
- CSV, either per-position rates (`position,rate`: unconditional, vLLM's convention, as a speculators evaluation or
  the metrics give them) or a per-step histogram of accepted draft tokens (`accepted,count`: how many verifier steps
  accepted 0, 1, ..., K drafts; K is the largest `accepted` listed, so list K with count 0 if no step took them all).

The result is the conditional per-token alpha per position (alpha_i = p_i / p_(i-1)), the convention the planner's
`--alpha-per-position` takes, with tau and the count it rests on."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass

MAX_BYTES = 4 * 1024 * 1024  # a metrics page or a bench result is kilobytes; a histogram a few lines
MAX_K = 32  # draft positions
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

    @property
    def k(self) -> int:
        return len(self.per_position)

    @property
    def acceptance_length(self) -> float:
        """tau = 1 + sum p_i (bonus token included)."""
        return 1.0 + sum(self.unconditional)

    def describe(self) -> str:
        rates = ", ".join(f"{a:.3f}" for a in self.per_position)
        n = f" over {self.drafts:,} drafts" if self.drafts else ""
        return (f"{self.name} ({self.fmt}): K={self.k}, acceptance length tau {self.acceptance_length:.2f} "
                f"(bonus token included){n}; conditional per-token alpha by position {rates}")


def _error(name: str, what: str) -> MeasuredAcceptanceError:
    return MeasuredAcceptanceError(f"{name}: {what}")


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
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if not s.name.endswith("_total"):
                    continue  # "_created" timestamps
                if fam.name == NUM_DRAFTS:
                    drafts += s.value
                elif fam.name == ACCEPTED_PER_POS:
                    pos = int(s.labels["position"])
                    per_pos[pos] = per_pos.get(pos, 0.0) + s.value
    except (ValueError, KeyError, TypeError) as exc:
        raise _error(name, f"not readable as Prometheus metrics text ({exc})") from None
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
    drafts = int(drafts) if isinstance(drafts, (int, float)) and drafts > 0 else None
    if isinstance(rates, list) and rates:
        try:
            p = [float(x) for x in rates]
        except (TypeError, ValueError):
            raise _error(name, "spec_decode_per_position_acceptance_rates holds a value that is not a number") from None
        return _from_unconditional(name, p, drafts, "vllm bench serve result (per-position rates)")
    raise _error(name, "a JSON document without spec_decode_per_position_acceptance_rates: save the result of "
                       "`vllm bench serve --save-result` against a server that speculates")


def _csv(name: str, text: str) -> MeasuredAcceptance:
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise _error(name, "a CSV needs a header and at least one row")
    head = [c.strip().lower() for c in rows[0]]
    body = rows[1:]
    if len(body) > 4 * MAX_K:
        raise _error(name, f"{len(body)} rows; a per-position table or histogram has at most {MAX_K + 1}")

    def number(r: list[str], col: int, what: str, line: int) -> float:
        try:
            return float(r[col])
        except (IndexError, ValueError):
            raise _error(name, f"line {line}: {what} {r[col] if col < len(r) else ''!r} is not a number") from None

    if "position" in head and "rate" in head:
        ip, ir = head.index("position"), head.index("rate")
        got = {int(number(r, ip, "position", n)): number(r, ir, "rate", n) for n, r in enumerate(body, 2)}
        first = min(got)
        if sorted(got) != list(range(first, first + len(got))) or first not in (0, 1):
            raise _error(name, f"positions {sorted(got)}; expected 1..K (or 0..K-1), each once")
        return _from_unconditional(name, [got[i] for i in sorted(got)], None, "per-position rates (CSV)")
    if "accepted" in head and "count" in head:
        ia, ic = head.index("accepted"), head.index("count")
        hist: dict[int, float] = {}
        for n, r in enumerate(body, 2):
            a, c = number(r, ia, "accepted", n), number(r, ic, "count", n)
            if a != int(a) or not 0 <= a <= MAX_K or c < 0 or c != int(c):
                raise _error(name, f"line {n}: accepted={r[ia]!r}, count={r[ic]!r}; expected whole numbers, accepted "
                                   f"0..{MAX_K}, count >= 0")
            hist[int(a)] = hist.get(int(a), 0.0) + c
        steps = sum(hist.values())
        k = max(hist)
        if steps <= 0 or k < 1:
            raise _error(name, "no verifier steps counted (every count is 0), or no step with an accepted draft listed")
        p = [sum(c for a, c in hist.items() if a >= i) / steps for i in range(1, k + 1)]
        return _from_unconditional(name, p, int(steps), "per-step histogram of accepted drafts (CSV)")
    raise _error(name, f"a CSV with columns {head}; expected 'position,rate' (unconditional per-position rates) or "
                       "'accepted,count' (verifier steps by accepted drafts)")


def read_measured_acceptance(name: str, data: bytes) -> MeasuredAcceptance:
    """One uploaded file -> the measured acceptance in it (MeasuredAcceptanceError says why not)."""
    if len(data) > MAX_BYTES:
        raise _error(name, f"{len(data):,} bytes; a measured acceptance file is at most {MAX_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _error(name, "not UTF-8 text") from None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _error(name, f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return _bench_json(name, doc)
    if NUM_DRAFTS in text or ACCEPTED_PER_POS in text or stripped.startswith("# HELP"):
        return _prometheus(name, text)
    return _csv(name, text)
