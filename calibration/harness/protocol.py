"""The measurement protocol: warm-up, batch sizes, repeats and adaptive stopping on the acceptance interval.

Per engine configuration (one engine start):
  1. warm-up: the first group on a fresh engine runs slower (allocation, first kernels); it is measured like
     any group but recorded with status "warmup" and never enters a fit;
  2. rounds: each round measures every workload at every batch size (>= 3 sizes, so the per-step and
     per-token terms of the step time are separately identifiable), each group on fresh prompts;
  3. stopping, per workload: after at least `min_rounds` rounds, a workload stops when the 95 % interval
     of its mean acceptance length has half-width <= `target_half_width`, or when the configuration's
     engine-time budget is spent; the baseline (no drafts) stops after `min_rounds` repeats;
  4. load: a group during which other work took more than `max_foreign_share` of the machine, or, under a
     steady load, more than that load plus a margin (calibration.harness.machine_load.contamination_limit), is
     recorded with status "contaminated" (never fitted, like "warm-up") and
     measured again on fresh prompts at the end of its round, at most `max_load_retries` times, while the
     configuration's budget remains;
  5. interleaving (`run_rounds` with several lanes): when several configurations' engines live in one
     process, each group (workload, batch size) is measured for every configuration in turn before the next
     group, so a load that drifts over minutes hits every configuration alike; the baseline then repeats as
     long as a drafting configuration still measures the workload (within its own budget); lanes of one
     family (one method and draft at several K) run a workload's rounds together: the family goes on while
     one of them still wants more and stops when one of them must stop (budget, prompts, max rounds), so
     no round of one K lacks the other K's group on the same prompts.

The interval (`acceptance_length_interval`): mean acceptance length tau = 1 + A / D, A = accepted draft
tokens and D = drafting steps summed over requests, is a ratio estimator; requests are the independent
units (drafts within one request share its prompt, so how much of the output copies the prompt: they are
correlated, and a binomial interval over drafts would be too narrow). Its variance by linearisation
(Cochran 1977, "Sampling Techniques", 3rd ed., section 6.3):
    var(A/D) = n / (n - 1) * sum_i (a_i - r d_i)^2 / D^2,    r = A / D,
and the interval is r +- t_{0.975, n-1} * sqrt(var) (Student t with n - 1 degrees of freedom: conservative
while few requests are in). Chosen over a bootstrap because it is closed-form (it is recomputed after
every group) and agrees with the bootstrap for the tens to hundreds of requests used here.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from calibration.harness.machine_load import CONTAMINATED_SHARE

DEFAULT_BATCH_SIZES = (1, 4, 8)
DEFAULT_TARGET_HALF_WIDTH = 0.05  # tokens of mean acceptance length
DEFAULT_BUDGET_S = 150.0  # engine seconds per configuration after start and warm-up (CLI / app default)
DEFAULT_MIN_ROUNDS = 2  # repeats: every batch size measured at least twice per workload
MIN_REQUESTS_FOR_STOP = 8  # below this, the t interval rests on too few requests to trust a stop
DEFAULT_MAX_LOAD_RETRIES = 2  # re-measures of one contaminated group per round


@dataclass(frozen=True)
class AcceptanceInterval:
    """Mean acceptance length (bonus token included) with its 95 % interval, from per-request counts."""

    acceptance_length: float
    low: float
    high: float
    half_width: float  # inf with fewer than 2 drafting requests
    num_requests: int
    num_drafts: int

    def to_dict(self) -> dict[str, float]:
        return {"acceptance_length": self.acceptance_length, "low": self.low, "high": self.high,
                "half_width": self.half_width, "num_requests": self.num_requests, "num_drafts": self.num_drafts}


def acceptance_length_interval(drafts: Sequence[int], accepted: Sequence[int],
                               level: float = 0.95) -> AcceptanceInterval:
    """Ratio-estimator interval of tau = 1 + sum(accepted) / sum(drafts) over requests (module docstring).

    drafts[i]: drafting (verify) steps of request i (vLLM's per-request `num_spec_steps`);
    accepted[i]: its accepted draft tokens (`num_accepted_draft_tokens`)."""
    if len(drafts) != len(accepted):
        raise ValueError(f"drafts has {len(drafts)} requests, accepted has {len(accepted)}: must match")
    for i, (d, a) in enumerate(zip(drafts, accepted, strict=True)):
        if d < 0 or a < 0:
            raise ValueError(f"request {i}: drafts={d}, accepted={a} not allowed: counts must be >= 0")
    n = len(drafts)
    total_d, total_a = float(sum(drafts)), float(sum(accepted))
    if total_d == 0:
        return AcceptanceInterval(math.nan, math.nan, math.nan, math.inf, n, 0)
    r = total_a / total_d
    if n < 2:
        return AcceptanceInterval(1.0 + r, math.nan, math.nan, math.inf, n, int(total_d))
    ss = sum((a - r * d) ** 2 for d, a in zip(drafts, accepted, strict=True))
    se = math.sqrt(n / (n - 1) * ss) / total_d
    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * se
    return AcceptanceInterval(1.0 + r, 1.0 + r - half, 1.0 + r + half, half, n, int(total_d))


def fixed_sweep_requests(k: int, target_half_width: float, level: float = 0.95) -> int:
    """Requests a fixed-size sweep needs to guarantee the half-width without knowing the variance: a
    request's acceptance length lies in [1, K + 1], so its standard deviation is at most K / 2
    (Popoviciu's inequality), and n = (z * K / 2 / h)^2."""
    if k < 1 or target_half_width <= 0:
        raise ValueError(f"k={k}, target_half_width={target_half_width} not allowed: need k >= 1, h > 0")
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    return math.ceil((z * k / 2.0 / target_half_width) ** 2)


@dataclass(frozen=True)
class Protocol:
    """How one configuration is measured; see the module docstring."""

    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    target_half_width: float = DEFAULT_TARGET_HALF_WIDTH
    budget_s: float = DEFAULT_BUDGET_S
    min_rounds: int = DEFAULT_MIN_ROUNDS
    max_rounds: int = 1000
    max_foreign_share: float = CONTAMINATED_SHARE  # calibration.harness.machine_load: above it a group is refused
    max_load_retries: int = DEFAULT_MAX_LOAD_RETRIES

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(not 1 <= b <= 64 for b in self.batch_sizes):
            raise ValueError(f"batch_sizes={self.batch_sizes} not allowed: one or more sizes in 1..64")
        if not self.target_half_width >= 0:
            raise ValueError(f"target_half_width={self.target_half_width} not allowed: must be >= 0")
        if not self.budget_s > 0:
            raise ValueError(f"budget_s={self.budget_s} not allowed: must be > 0")
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"min_rounds={self.min_rounds}, max_rounds={self.max_rounds} not allowed: "
                             "need 1 <= min_rounds <= max_rounds")
        if not 0 < self.max_foreign_share <= 1:
            raise ValueError(f"max_foreign_share={self.max_foreign_share} not allowed: a share in (0, 1]")
        if not 0 <= self.max_load_retries <= 10:
            raise ValueError(f"max_load_retries={self.max_load_retries} not allowed: 0..10")

    def stop_reason(self, *, speculative: bool, rounds: int, elapsed_s: float,
                    interval: AcceptanceInterval | None) -> Stop | None:
        """Why a workload stops after `rounds` rounds, or None to go on."""
        if rounds >= self.max_rounds:
            return Stop(StopKind.MAX_ROUNDS, f"max rounds {self.max_rounds}")
        if rounds < self.min_rounds:
            return Stop(StopKind.BUDGET, "budget spent") if elapsed_s >= self.budget_s else None
        if not speculative:
            return Stop(StopKind.REPEATS, f"{rounds} repeats")
        if (interval is not None and interval.num_requests >= MIN_REQUESTS_FOR_STOP
                and interval.half_width <= self.target_half_width):
            return Stop(StopKind.HALF_WIDTH, f"half-width {interval.half_width:.3f} <= {self.target_half_width}")
        if elapsed_s >= self.budget_s:
            return Stop(StopKind.BUDGET, f"budget {self.budget_s:.0f} s spent")
        return None


class StopKind(enum.Enum):
    """Why a workload's rounds end: the rules act on the kind, the log prints the words."""

    MAX_ROUNDS = "max rounds"
    BUDGET = "budget"
    REPEATS = "repeats"  # a baseline lane's fixed repeats
    HALF_WIDTH = "half-width"  # the acceptance interval is narrow enough
    EXHAUSTED = "prompt pool exhausted"


@dataclass(frozen=True)
class Stop:
    kind: StopKind
    text: str
    paired_with: str = ""  # the family member whose stop this lane shares

    def __str__(self) -> str:
        return self.text + (f" (paired with {self.paired_with})" if self.paired_with else "")


# measure(workload, batch, status, round_no): one group on fresh prompts, committed; its status is "finished",
# or "contaminated" when the machine's load refused it; None when the workload's prompt pool is exhausted.
Measure = Callable[[str, int, str, int], Any]


@dataclass(frozen=True)
class Lane:
    """One configuration's engine as the rounds see it."""

    label: str
    speculative: bool
    measure: Measure
    # Lanes of one family (the same method and draft at different K) start and stop each workload's rounds
    # together, so every group of one K has a group of the other K on the same prompts (the fit predicts one
    # K's throughput from the other's acceptance on the same traffic); "" = a family of its own.
    family: str = ""


def run_rounds(protocol: Protocol, lanes: Sequence[Lane], workloads: Sequence[str],
               log: Callable[[str], None] = print) -> list[Any]:
    """Rounds of groups under `protocol` (module docstring, steps 2-5) after each lane's warm-up; returns the
    fitted ("finished") records in measured order. With several lanes every group is measured for each lane
    in turn (A/B windows one group long); each lane keeps its own budget, intervals and stopping."""
    out: list[Any] = []
    elapsed = {lane.label: 0.0 for lane in lanes}
    drafts: dict[tuple[str, str], list[int]] = {(lane.label, w): [] for lane in lanes for w in workloads}
    accepted: dict[tuple[str, str], list[int]] = {key: [] for key in drafts}
    active = [(lane, w) for w in workloads for lane in lanes]
    round_no = 0

    def keep(lane: Lane, workload: str, rec: Any) -> None:
        out.append(rec)
        drafts[(lane.label, workload)] += rec.extra.get("request_drafts", [])
        accepted[(lane.label, workload)] += rec.extra.get("request_accepted", [])

    while active:
        round_no += 1
        exhausted: set[tuple[str, str]] = set()
        refused: list[tuple[Lane, str, int]] = []
        for workload in workloads:
            lanes_now = []
            families = {lane.label: _family(lane, active, w) for lane, w in active if w == workload}
            for lane, w in list(active):
                if w != workload:
                    continue
                spent = [m for m in families[lane.label] if elapsed[m.label] >= protocol.budget_s]
                if round_no > 1 and spent:  # one round each, then the budget (the family's first to spend it)
                    active.remove((lane, w))
                    paired = "" if spent[0] is lane else f" (paired with {spent[0].label})"
                    log(f"[{lane.label}] {w} stopped after {round_no - 1} rounds: budget "
                        f"{protocol.budget_s:.0f} s spent{paired}")
                else:
                    lanes_now.append(lane)
            for batch in protocol.batch_sizes:
                for lane in lanes_now:
                    if (lane.label, workload) in exhausted:
                        continue
                    rec = lane.measure(workload, batch, "finished", round_no)
                    if rec is None:
                        exhausted.add((lane.label, workload))
                        continue
                    elapsed[lane.label] += rec.wall_time_s
                    if rec.status == "contaminated":
                        refused.append((lane, workload, batch))
                    else:
                        keep(lane, workload, rec)
        # contaminated groups again, later (the load may have passed), on fresh prompts, while budget remains
        for lane, workload, batch in refused:
            for attempt in range(1, protocol.max_load_retries + 1):
                if (lane.label, workload) in exhausted or elapsed[lane.label] >= protocol.budget_s:
                    break
                rec = lane.measure(workload, batch, "finished", round_no)
                if rec is None:
                    exhausted.add((lane.label, workload))
                    break
                elapsed[lane.label] += rec.wall_time_s
                if rec.status != "contaminated":
                    keep(lane, workload, rec)
                    break
                log(f"[{lane.label}] {workload} B={batch}: still contaminated after retry {attempt}")
        reasons: dict[tuple[str, str], Stop | None] = {}
        for lane, workload in active:
            key = (lane.label, workload)
            interval = acceptance_length_interval(drafts[key], accepted[key]) if lane.speculative else None
            reasons[key] = (Stop(StopKind.EXHAUSTED, "prompt pool exhausted") if key in exhausted else
                            protocol.stop_reason(speculative=lane.speculative, rounds=round_no,
                                                 elapsed_s=elapsed[lane.label], interval=interval))
        reasons = _paired_reasons(reasons, active)
        for lane, workload in list(active):
            key = (lane.label, workload)
            interval = acceptance_length_interval(drafts[key], accepted[key]) if lane.speculative else None
            reason = reasons[key]
            # interleaved: the baseline's repeats go on while a drafting lane still measures this workload (until
            # its own budget), so that the baseline sees the same load as the configurations it is compared with
            if (reason and not lane.speculative and key not in exhausted and reason.kind is StopKind.REPEATS
                    and any(other.speculative and reasons[(other.label, w)] is None for other, w in active
                            if w == workload)):
                reason = None
            if interval is not None:
                log(f"[{lane.label}] {workload} round {round_no}: tau={interval.acceptance_length:.3f} "
                    f"95% [{interval.low:.3f}, {interval.high:.3f}] half-width {interval.half_width:.3f} "
                    f"(target {protocol.target_half_width}; {interval.num_requests} requests, "
                    f"{interval.num_drafts} drafts; {elapsed[lane.label]:.0f}/{protocol.budget_s:.0f} s)")
            else:
                log(f"[{lane.label}] {workload} round {round_no}: "
                    f"{elapsed[lane.label]:.0f}/{protocol.budget_s:.0f} s")
            if reason:
                active.remove((lane, workload))
                log(f"[{lane.label}] {workload} stopped after {round_no} rounds: {reason}")
    return out


def _family(lane: Lane, active: Sequence[tuple[Lane, str]], workload: str) -> list[Lane]:
    """`lane` and the active lanes of its family on `workload` (just `lane` without a family)."""
    if not lane.family:
        return [lane]
    return [other for other, w in active if w == workload and other.family == lane.family]


def _paired_reasons(reasons: dict[tuple[str, str], Stop | None],
                    active: Sequence[tuple[Lane, str]]) -> dict[tuple[str, str], Stop | None]:
    """Stop reasons with families kept together: while one member still wants more rounds (no reason) the
    members that reached their half-width go on; a member that must stop (budget, prompts, max rounds)
    stops the whole family with it."""
    out = dict(reasons)
    for lane, workload in active:
        members = _family(lane, active, workload)
        if len(members) < 2:
            continue
        mine = reasons[(lane.label, workload)]
        hard = [(m, reasons[(m.label, workload)]) for m in members
                if reasons[(m.label, workload)] and reasons[(m.label, workload)].kind is not StopKind.HALF_WIDTH]
        if hard:
            m, why = hard[0]
            out[(lane.label, workload)] = why if m is lane else dataclasses.replace(why, paired_with=m.label)
        elif mine and any(reasons[(m.label, workload)] is None for m in members):
            out[(lane.label, workload)] = None  # reached its half-width; goes on with its family
    return out


# ---------------------------------------------------------------------------------------------------
# Prompt pools: the shipped prompts, then seeded variants of the same kind, so that every measured request
# is a distinct prompt (greedy decoding repeats itself exactly: a repeated prompt adds no information).
# ---------------------------------------------------------------------------------------------------
_NAMES = ("alpha", "beta", "gamma", "delta", "total", "count", "value", "item", "node", "width", "height",
          "price", "score", "index", "limit", "offset", "weight", "speed", "label", "buffer")
_OPS = ("+", "-", "*", "//", "%")
_TOPICS = ("the water cycle", "compound interest", "how vaccines work", "photosynthesis", "the stock market",
           "black holes", "machine learning", "the French revolution", "climate change", "how a bicycle works",
           "time zones", "inflation", "the immune system", "electric cars", "the internet", "volcanoes",
           "sleep", "coffee", "the moon landing", "recycling", "earthquakes", "bees", "chess", "jazz")
_ASKS = ("Explain {t} to a ten-year-old.", "What are three surprising facts about {t}?",
         "Write a short paragraph about {t}.", "Give me two pros and two cons of {t}.",
         "Summarize {t} in three sentences.", "Why does {t} matter?", "Write a haiku about {t}.")


def _code_variant(rng: random.Random) -> str:
    def fn() -> str:
        name = f"{rng.choice(_NAMES)}_{rng.choice(_NAMES)}"
        a, b = rng.sample(_NAMES, 2)
        body = [f"def {name}({a}, {b}):"]
        for _ in range(rng.randint(1, 3)):
            c = rng.choice(_NAMES)
            body.append(f"    {c} = {a} {rng.choice(_OPS)} {rng.randint(1, 9)} {rng.choice(_OPS)} {b}")
            if rng.random() < 0.4:
                body.append(f"    if {c} > {rng.randint(10, 99)}:\n        return {c}")
            a = c
        body.append(f"    return {a}")
        return "\n".join(body)

    code = "\n\n".join(fn() for _ in range(rng.randint(1, 3)))
    return f"Rewrite this Python code exactly, adding a docstring to each function:\n\n{code}\n"


def _chat_variant(rng: random.Random) -> str:
    return rng.choice(_ASKS).format(t=rng.choice(_TOPICS))


def _rag_variant(rng: random.Random) -> str:
    facts = [f"The {rng.choice(_NAMES)} of site {rng.randint(1, 99)} is {rng.randint(10, 999)}."
             for _ in range(rng.randint(3, 6))]
    q = facts[rng.randrange(len(facts))].split(" is ")[0]
    return "Context:\n" + "\n".join(facts) + f"\n\nQuestion: what is {q[4:].lower()}? Quote the context."


VARIANTS = {"code": _code_variant, "chat": _chat_variant, "rag": _rag_variant}


def extend_prompts(workload: str, shipped: list[str], n: int, seed: int = 0) -> list[str]:
    """`n` distinct prompts: the shipped ones first, then seeded variants of the workload's kind (none for a
    workload without a generator, e.g. an uploaded traffic set: then only what was given)."""
    out = list(dict.fromkeys(shipped))[:n]
    gen = VARIANTS.get(workload)
    if gen is None:
        return out
    rng = random.Random(f"{workload}-{seed}")
    seen = set(out)
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        p = gen(rng)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def interval_progress(groups: Sequence[object]) -> list[dict[str, float | int | str]]:
    """How the acceptance-length interval narrowed: per (configuration, workload) and round, the cumulative
    interval over every request measured so far (warm-up groups left out). `groups`: GroupRecords, in the
    order they were measured; records without per-request counts are skipped."""
    drafts: dict[tuple[str, str], list[int]] = {}
    accepted: dict[tuple[str, str], list[int]] = {}
    last_round: dict[tuple[str, str], int] = {}
    rows: dict[tuple[str, str, int], dict[str, float | int | str]] = {}
    for g in groups:
        extra = getattr(g, "extra", {})
        if getattr(g, "status", "finished") != "finished" or "request_drafts" not in extra:
            continue
        key = (g.config_label, g.workload)  # type: ignore[attr-defined]
        drafts.setdefault(key, []).extend(extra["request_drafts"])
        accepted.setdefault(key, []).extend(extra["request_accepted"])
        rnd = int(extra.get("round", last_round.get(key, 0) + 1))
        last_round[key] = rnd
        iv = acceptance_length_interval(drafts[key], accepted[key])
        rows[(*key, rnd)] = {"config": key[0], "workload": key[1], "round": rnd, **iv.to_dict()}
    return list(rows.values())
