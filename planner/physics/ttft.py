"""Time to first token (TTFT) of one replica: waiting for the prefill lane, then the request's own prefill.

The engines (vLLM V1, SGLang with chunked prefill) schedule prefill in chunks that share every step with the running
decode batch: each step first takes the batch's decode tokens (B per step, B (K + 1) with speculation: the verifier
checks K drafts and a bonus token per sequence), then fills the rest of its token budget (vLLM's
max_num_batched_tokens, SGLang's chunked_prefill_size) with prompt tokens. A prompt of P new tokens (the prefix-cache
share s of its P_0 tokens is not recomputed: P = P_0 (1 - s)) therefore
  - rides n = ceil(P / c) steps, c = budget - B (K + 1) prompt tokens per step (at least one), and
  - costs its prefill GPU time t_p (planner.physics.serving.prefill_time_s: the target's, plus for speculation the
  draft's
    own prefill of the prompt: an EAGLE head's one layer, a draft model's layers, an MTP module, each as
    planner.physics.networks sizes its network, LM head included: an upper bound, since the engines compute draft logits
    for the last prompt position only; n-gram and suffix lookups prefill nothing), while each of those steps also
    runs the decode part T_step(B) (the verifier step with its drafting under speculation: TPOT x acceptance
    length).
Its own prefill latency is S_own = t_p + n T_step(B).

Queueing: the prefill lane is one FCFS server (the engines admit waiting prompts first come, first served) that
packs prompts into the chunk budget; per request it is busy S_lane = t_p + (P / c) T_step(B) (short prompts share a
step). Arrivals come at lambda requests/s per replica; the wait is Kingman's G/G/1 mean
    W = u S_lane (ca^2 + cv^2) / (2 (1 - u)),   u = lambda S_lane   (< 1; TTFT infinite at u >= 1)
with cv^2 the squared coefficient of variation of the service time (1: prompt lengths spread like an exponential,
the M/M/1 case; planner assumption, stated in the plan's assumptions) and ca^2 that of the arrivals' spacing
(1: Poisson arrivals, where the formula is Pollaczek-Khinchine's exact M/G/1 mean; 0: a benchmark's constant rate,
guidellm's --profile constant).
    TTFT = W + T_step(B) / 2 + S_own + t_front
with T_step(B) / 2 the mean wait for the step in flight when the request arrives (the engines schedule a new prompt at
the next step boundary; a step of fixed length T leaves T / 2 on average), t_front the engine's front-end time that
no GPU step holds (ENGINE_OVERHEAD_S: the HTTP request, tokenisation, admission into the scheduler, handing the first
token back through detokenisation and the stream).
This is the chunked-prefill-share approximation, not a c-server M/G/c: one replica's prefill is one lane, however many
sequences decode. Speculation raises TTFT three ways: a longer step T_step (verify K + 1 tokens and draft; also a
longer step in flight to wait for), fewer prompt tokens per step (B (K + 1) decode tokens take the budget) and the
draft's own prefill.

A closed loop (a benchmark's --max-concurrency N: N users, each sends its next request when the last one ends) is
`closed_loop`: the throughput X where N = X (TTFT + O x TPOT seen), the decode batch B = X O TPOT seen (Little's law
on each stage); an arriving user finds the prefill lane as the other N - 1 keep it (the arrival theorem of closed
networks: the wait at the rate X (N - 1) / N, none at N = 1). The decode batch a prompt's chunks share their steps
with is the other users' part of it, B (N - 1) / N (each of the N - 1 others decodes a share B / N of the time): at
N = 1 a prompt runs alone, its steps carry no decode tokens. Where the prefill lane saturates (u -> 1) the throughput
is the lane's, 1 / S_lane, whatever the decode speed: speculation then shortens TPOT, lengthens S_lane (B (K + 1)
budget tokens, longer steps, the draft's prefill) and the users it returns sooner wait longer for their first token,
at flat throughput.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Token budget of one engine step (prefill chunk + decode tokens): vLLM V1's max_num_batched_tokens for its API
# server on a GPU with >= 70 GiB (H100, H200, B200: 8192; vLLM issue 51494 prints max_num_batched_tokens=8192 at
# startup with no scheduler overrides), SGLang's chunked_prefill_size on 80 GB GPUs (8192). Planner assumption for
# every engine and GPU (2026-12-04).
DEFAULT_BATCHED_TOKENS = 8192
# Squared coefficient of variation of a request's prefill time: 1, prompt lengths spread like an exponential (M/M/1);
# 0 would be equal prompts (M/D/1, half the wait). Planner assumption (2026-12-04).
SERVICE_SCV = 1.0
# The engine's front-end time per request outside the GPU steps (t_front above), seconds, per engine. Fitted on the
# fitting rows of profiles/data/published/published_ttft.csv (role "fit") as measured - modelled TTFT without it:
# vLLM on GPUStack's Qwen3.5-35B-A3B row at 1 request/s (vLLM 0.17.1, 1 x H200; 46.01 ms measured, 29.04 modelled),
# SGLang on GPUStack's Qwen3-8B-FP8 row at concurrency 4 (SGLang 0.5.3.post3, 1 x H100; 39.66 measured, 15.04
# modelled). benchmarks/accuracy.py refits them from the rows (ttft_scenario.fitted_overhead_s) and prints both; the
# rows marked "check" never enter them. One row per engine: a planner assumption until a calibration measures its
# own (2026-12-05). TensorRT-LLM has no fitting row and takes vLLM's.
ENGINE_OVERHEAD_S = {"vllm": 0.01697, "sglang": 0.02462}
DEFAULT_OVERHEAD_S = ENGINE_OVERHEAD_S["vllm"]  # where the engine is not known (the fleet's TTFT) or has no fit


def engine_overhead_s(engine: str) -> float:
    """The front-end time of `engine` (ENGINE_OVERHEAD_S; vLLM's where it has none), seconds."""
    return ENGINE_OVERHEAD_S.get(engine, DEFAULT_OVERHEAD_S)


MAX_TTFT_SLO_MS = 3_600_000  # one hour: the most a TTFT SLO may state (PlanRequest.ttft_slo_ms)


@dataclass(frozen=True)
class Ttft:
    """TTFT of a replica at a load (arrays broadcast over the inputs; seconds)."""

    queue_s: np.ndarray  # mean wait for the prefill lane (M/G/1)
    own_prefill_s: np.ndarray  # the request's own prefill: its GPU time + the decode part of the steps it rides
    ttft_s: np.ndarray  # queue_s + boundary_s + own_prefill_s + overhead_s (inf where the lane is saturated)
    lane_share: np.ndarray  # u: the share of time the prefill lane is busy
    steps: np.ndarray  # steps the prompt's chunks ride
    overhead_s: float = DEFAULT_OVERHEAD_S  # the engine's front-end time (DEFAULT_OVERHEAD_S)
    boundary_s: np.ndarray | float = 0.0  # the wait for the step in flight at arrival: T_step(B) / 2

    @property
    def ttft_ms(self) -> np.ndarray:
        return self.ttft_s * 1e3


def ttft(*, requests_per_s, prefill_s, new_prompt_tokens, step_s, batch, tokens_per_seq=1.0,
         batched_tokens=DEFAULT_BATCHED_TOKENS, service_scv: float = SERVICE_SCV,
         overhead_s: float = DEFAULT_OVERHEAD_S, arrival_scv: float = 1.0) -> Ttft:
    """TTFT of one replica (module docstring).

    requests_per_s: arrivals per replica; prefill_s: GPU-seconds of one prompt's prefill on the replica (target and,
    under speculation, draft; prefix-cache share applied); new_prompt_tokens: the prompt tokens not served from the
    prefix cache, P; step_s: the decode step at `batch` without a prefill chunk (no speculation: TPOT; speculation:
    TPOT x acceptance length); tokens_per_seq: decode tokens each sequence puts in a step (1, or K + 1 / a tree's
    verify tokens); batched_tokens: the step's token budget; overhead_s: the engine's front-end time, added to every
    request's TTFT (not to the lane: it holds no GPU); arrival_scv: ca^2 of the arrivals (1 Poisson, 0 constant
    rate)."""
    lam = np.asarray(requests_per_s, float)
    tp = np.asarray(prefill_s, float)
    p = np.maximum(np.asarray(new_prompt_tokens, float), 1.0)  # a fully cached prompt still computes its last token
    t = np.asarray(step_s, float)
    chunk = np.maximum(np.asarray(batched_tokens, float) - np.asarray(batch, float) * np.asarray(tokens_per_seq, float),
                       1.0)
    steps = np.ceil(p / chunk - 1e-9)
    own = tp + steps * t
    lane = tp + p / chunk * t
    u = lam * lane
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(u < 1.0, u * lane * (arrival_scv + service_scv) / (2.0 * np.where(u < 1.0, 1.0 - u, 1.0)),
                        np.inf)
    boundary = 0.5 * t  # the step in flight when the request arrives: it joins at the next step
    return Ttft(queue_s=wait, own_prefill_s=own, ttft_s=wait + boundary + own + overhead_s, lane_share=u, steps=steps,
                overhead_s=overhead_s, boundary_s=boundary)


@dataclass(frozen=True)
class ClosedLoop:
    """A replica under a closed loop of `concurrency` users (a benchmark's --max-concurrency)."""

    concurrency: float
    requests_per_s: float  # X
    batch: float  # sequences decoding, X O TPOT seen
    tpot_s: float  # TPOT seen (decode stretched by the prefill share)
    ttft_s: float
    output_tokens_per_s: float  # X O
    lane_share: float = 0.0  # u at the solution: near 1 where the prefill lane sets the throughput (prefill-bound)


def closed_loop(*, concurrency: float, output_tokens: float, prefill_s: float, new_prompt_tokens: float,
                tpot_at: Callable[[float], float], acceptance_length: float = 1.0, tokens_per_seq: float = 1.0,
                max_batch: float = math.inf, batched_tokens: float = DEFAULT_BATCHED_TOKENS,
                service_scv: float = SERVICE_SCV, target_prefill_s: float | None = None,
                overhead_s: float = DEFAULT_OVERHEAD_S) -> ClosedLoop:
    """The steady state of N = `concurrency` users on one replica: the throughput X (requests/s) with
    N = X (TTFT(X) + O TPOT seen(X)), bisected (the right side grows with X). tpot_at(b): the decode TPOT at batch b
    (seconds per output token, before the prefill share); the decode batch b = X O TPOT seen, at most `max_batch`
    (the engine's max_num_seqs: requests beyond it wait, counted in TTFT as N - X O TPOT - X S_own). The prefill
    share rho = X target_prefill_s (the target's prefill, as planner.physics.replica charges it; None: prefill_s)
    stretches decode: TPOT seen = TPOT(b) / (1 - rho (N - 1) / N) (the others' prompts; none at N = 1). A prompt's
    chunks share their steps with the other users' decoding sequences, b (N - 1) / N (module docstring); below one
    sequence the step's decode part scales with it (none at N = 1). overhead_s: the engine's front-end time in every
    TTFT. Raises ValueError for fewer than one user."""
    n, out = float(concurrency), float(output_tokens)
    if not n >= 1.0:
        raise ValueError(f"concurrency {concurrency!r}: a closed loop needs at least one user (allowed: >= 1)")
    others_share = (n - 1.0) / n  # of the users, the others: what an arriving user finds (module docstring)
    rho_pre = float(prefill_s if target_prefill_s is None else target_prefill_s)

    def state(x: float) -> tuple[float, float, float, float]:
        if x * rho_pre >= 1.0:
            return math.inf, math.inf, math.inf, math.inf
        rho = x * rho_pre * others_share  # the other users' prompts interleave with a user's decode, not its own
        b = min(max(n, 1.0), max_batch)
        # the batch is a fixed point of b = x O TPOT(b) / (1 - rho): a few passes from the largest (TPOT grows with b)
        for _ in range(30):
            seen = tpot_at(max(b, 1.0)) / (1.0 - rho)
            nb = min(x * out * seen, max_batch, n)
            if abs(nb - b) < 1e-6 * max(b, 1.0):
                b = nb
                break
            b = nb
        seen = tpot_at(max(b, 1.0)) / (1.0 - rho)
        if x * out * seen > max_batch * (1.0 + 1e-9):  # more than max_num_seqs would decode: admission queues
            return math.inf, seen, b, math.inf
        others = b * others_share
        kw = dict(prefill_s=prefill_s, new_prompt_tokens=new_prompt_tokens,
                  step_s=tpot_at(max(others, 1.0)) * acceptance_length * min(others, 1.0), batch=others,
                  tokens_per_seq=tokens_per_seq, batched_tokens=batched_tokens, service_scv=service_scv,
                  overhead_s=overhead_s)
        u = float(ttft(requests_per_s=x, **kw).lane_share)
        if u >= 1.0:
            return math.inf, seen, b, u
        # an arriving user finds the lane as the other N - 1 users keep it (the arrival theorem of closed networks):
        # the wait at their arrival rate x (N - 1) / N; one user never queues behind itself
        t = ttft(requests_per_s=x * others_share, **kw)
        return float(t.ttft_s), seen, b, u

    lo, hi = 0.0, 1.0
    while (f_hi := state(hi)) and math.isfinite(f_hi[0]) and hi * (f_hi[0] + out * f_hi[1]) < n:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        f, seen, _, _ = state(mid)
        if math.isfinite(f) and mid * (f + out * seen) < n:
            lo = mid
        else:
            hi = mid
    x = lo
    f, seen, b, u = state(x)
    # what the users do not spend decoding they spend waiting for their first token (Little's law: N = X x time)
    ttft_s = max(f, n / x - out * seen) if x > 0 else math.inf
    return ClosedLoop(concurrency=n, requests_per_s=x, batch=b, tpot_s=seen, ttft_s=ttft_s,
                      output_tokens_per_s=x * out, lane_share=u)


@dataclass(frozen=True)
class TtftInputs:
    """What a fleet needs beyond its TPOT curves to state and honour TTFT, per configuration (C) and hour (H)."""

    prefill_s: np.ndarray  # (C, H) GPU-seconds of one prompt's prefill: the target's and the draft's own
    new_prompt_tokens: np.ndarray  # (H,) prompt tokens not served from the prefix cache
    step_factor: np.ndarray  # (C,) the decode step over the decode TPOT: the acceptance length (1: no speculation)
    tokens_per_seq: np.ndarray  # (C,) decode tokens a sequence puts in a step: 1, K + 1, a tree's verify tokens
    slo_ms: float | None = None  # None: TTFT stated, not a constraint
    batched_tokens: float = DEFAULT_BATCHED_TOKENS

    def rows(self, config: np.ndarray, hour: np.ndarray) -> TtftInputs:
        """The inputs of rows (configuration, hour) flattened along one axis."""
        return TtftInputs(prefill_s=self.prefill_s[config, hour], new_prompt_tokens=self.new_prompt_tokens[hour],
                          step_factor=self.step_factor[config], tokens_per_seq=self.tokens_per_seq[config],
                          slo_ms=self.slo_ms, batched_tokens=self.batched_tokens)


def at_load(inputs: TtftInputs, *, requests_per_s, tpot_s, batch) -> Ttft:
    """TTFT of rows of a fleet (inputs.rows) at an arrival rate per replica and a decode TPOT (seconds per token,
    before the prefill share) at `batch`; leading axes of `tpot_s` / `batch` beyond the rows broadcast (add axes to
    the row inputs yourself where they are 2-D)."""
    return ttft(requests_per_s=requests_per_s, prefill_s=inputs.prefill_s, new_prompt_tokens=inputs.new_prompt_tokens,
                step_s=np.asarray(tpot_s, float) * inputs.step_factor, batch=batch,
                tokens_per_seq=inputs.tokens_per_seq, batched_tokens=inputs.batched_tokens)
