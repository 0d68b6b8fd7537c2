"""Throughput, TPOT and CPM for a baseline and a speculative configuration; best batch and best K.

Per verifier step of a replica with batch B (Leviathan et al. 2023, section 3.4):
    T_spec = T_verify(B, n) + T_draft(B) ,  n = K + 1 (chain) or N (tree nodes)
    T_draft = T_pass(B, first) + (passes(K) - 1) * T_pass(B) + T_fusion(B n) + T_overhead(B, K)
    tokens per step = B * tau ,  TPOT = T_spec / tau ,  decode throughput = B * tau / T_spec
Baseline: T_base = T_verify(B, 1), throughput = B / T_base.
With a draft cost ratio c (one draft pass / one baseline target step at the same batch), batch 1 and a
memory-bound verifier this reduces to Leviathan's S = tau / (passes * c + 1).

Prefill: each request's prompt is processed once; we charge its GPU time to the request's output tokens.
Prefill is taken compute-bound (chunked prefill batches thousands of tokens per step):
    t_prefill = P * (2 * active_params + 2 * attn_dim * P) / (F * eta_flops * tp)
(attention over a causal prompt averages P/2 context tokens: 4 * attn_dim * P/2 per token). The replica at full
load shares its time between decode and prefill (planner.physics.replica):
    GPU-seconds per output token = TPOT seen / B = T_step / (B * tau) + t_prefill / O.
tpot_s is the decode TPOT; tpot_seen_s the TPOT a user sees at full load (decode / (1 - prefill share)).
CPM = GPUs * $/GPU-hour * 1e6 / (3600 * output tokens/s).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from planner.physics.replica import replica_load
from planner.physics.roofline import (
    HwParams,
    Net,
    data_parallel_split,
    fusion_time_s,
    kv_cache_bytes_per_sequence,
    max_batch,
    replica_weight_bytes,
    step_time_s,
    step_time_terms,
)

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MTOK = 1e6

# Drafting modes as integers, so methods vectorise: passes(K) and tokens per pass.
# MODE_NONE: no draft pass, a host lookup per sequence (n-gram, suffix decoding) or no speculation;
# MODE_BLOCK: DFlash / DSpark block drafting; MODE_GPU_LOOKUP: n-gram lookup as a GPU kernel (no host time).
MODE_SEQUENTIAL, MODE_PARALLEL, MODE_NONE, MODE_BLOCK, MODE_GPU_LOOKUP = 0, 1, 2, 3, 4
DRAFTING_MODE_CODE = {
    "sequential_head": MODE_SEQUENTIAL,
    "native_module": MODE_SEQUENTIAL,
    "draft_model": MODE_SEQUENTIAL,
    "parallel_head": MODE_PARALLEL,
    "ngram": MODE_NONE,
    "block_parallel": MODE_BLOCK,
    "ngram_gpu": MODE_GPU_LOOKUP,
}


def draft_passes(mode: np.ndarray | int, k: np.ndarray | float) -> np.ndarray:
    """Draft forward passes per verifier step: K sequential, 1 parallel or block (DFlash, DSpark), 0 for lookups."""
    mode = np.asarray(mode)
    k = np.asarray(k, float)
    return np.where(mode == MODE_SEQUENTIAL, k, np.where((mode == MODE_PARALLEL) | (mode == MODE_BLOCK), 1.0, 0.0))


def draft_tokens_per_pass(mode: np.ndarray | int, k: np.ndarray | float) -> np.ndarray:
    """Tokens per sequence in one draft pass: 1 sequential, K in one parallel pass (P-EAGLE, MEDUSA), K + 1 in a
    block pass (DFlash: the bonus token and K mask queries, vLLM SpeculativeConfig.max_num_new_slots_for_drafting;
    DSpark's anchor-as-first layout runs K, charged K + 1 here: one token per sequence over)."""
    mode = np.asarray(mode)
    k = np.asarray(k, float)
    return np.where(mode == MODE_PARALLEL, k, np.where(mode == MODE_BLOCK, k + 1.0, 1.0))


def first_draft_pass_tokens(mode, draft_scales_with_k, tokens_per_pass, verify_tokens) -> np.ndarray:
    """Tokens per sequence in a step's first draft pass. A sequential head, native module or draft model drafts
    from every verified position of the step (vLLM v1's EAGLE/MTP/draft-model proposer runs its first forward
    over the B * (K+1) verified tokens, then one token per sequence per pass): max(tokens per pass, n). A
    parallel head (P-EAGLE) runs the verified tokens and its K - 1 mask tokens in its one pass:
    tokens per pass + n - 1. MEDUSA's heads read the last hidden state only: one token per head. A block drafter
    (DFlash, DSpark) queries its block only: the verified tokens reach it as context K/V, projected once per step
    (head_net's fusion terms), not as queries through its layers."""
    tpp = np.asarray(tokens_per_pass, float)
    n = np.asarray(verify_tokens, float)
    mode = np.asarray(mode)
    first = np.where(mode == MODE_PARALLEL, tpp + n - 1.0, np.where(mode == MODE_BLOCK, tpp, np.maximum(tpp, n)))
    return np.where(np.asarray(draft_scales_with_k), tpp, first)


FP32_BYTES = 4.0  # a logits row is processed in fp32 by the sampler (vLLM's sampler and rejection sampler)


def sampler_time_s(hw: HwParams, *, batch, drafted_tokens, vocab_size) -> np.ndarray:
    """The sampler's work on the extra target rows of a speculative step, seconds:
        sampler_vocab_passes * B * D * V * 4 B / HBM bandwidth ,   D = verify tokens - 1
    Each drafted token a sequence's verifier checks adds one target row of V logits that the sampler turns to
    fp32, softmaxes, samples or compares and rejects: memory-bound passes over a B * D x V fp32 tensor, on every
    TP rank (the logits are gathered whole), so the time scales with the target's vocabulary and falls with the
    GPU's bandwidth. sampler_vocab_passes is an effective pass count fitted to published speedups
    (tools/fit_speculation.py); it also carries whatever else grows per drafted token (KV slots, metadata)."""
    rows = np.asarray(batch, float) * np.asarray(drafted_tokens, float)
    return (np.asarray(hw.sampler_vocab_passes, float) * rows * np.asarray(vocab_size, float) * FP32_BYTES
            / np.asarray(hw.bandwidth_bytes_s, float))


def speculation_overhead_s(hw: HwParams, *, mode, batch, drafted_tokens, vocab_size) -> np.ndarray:
    """Per speculative step, beyond the draft passes, seconds (fitted: tools/fit_speculation.py):
        t_spec_s + sampler_time_s(B, D, V) + [n-gram] t_ngram_s * B ,   D = verify tokens - 1
    t_spec_s: proposer set-up, rejection-sampler launch, bookkeeping per step; sampler_time_s: per drafted token
    of each sequence that the verifier checks (its target row of the vocabulary sampled and compared): D = K for
    a chain, the tree's N - 1 draft nodes for a tree (every node gets a KV slot, a target row and a comparison,
    not only the K of its deepest path); t_ngram_s: the n-gram proposer's host lookup per sequence (vLLM's numba
    prompt lookup; no GPU pass)."""
    b = np.asarray(batch, float)
    ngram = np.where(np.asarray(mode) == MODE_NONE, np.asarray(hw.t_ngram_s, float) * b, 0.0)
    return (np.asarray(hw.t_spec_s, float)
            + sampler_time_s(hw, batch=b, drafted_tokens=drafted_tokens, vocab_size=vocab_size) + ngram)


def prefill_time_s(target: Net, hw: HwParams, *, prompt_tokens, tp=1, cached_share=0.0,
                   chunk_tokens=None) -> np.ndarray:
    """GPU-seconds to prefill one prompt of P tokens, compute-bound (module docstring), of which a share s is served
    from the prefix cache: the P s cached tokens are not recomputed; the P (1 - s) new ones (the prompt's tail) run
    the GEMMs and attend over the whole context before them, cached part included (their attention still reads the
    cached KV):
        flops = 2 * active_params * P (1 - s) + 4 * attn_dim * sum_{j = Ps..P} j
              = P (1 - s) * (2 * active_params + 2 * attn_dim * P (1 + s))
    s = 0 is the full prompt exactly (the same floating-point operations as before the share existed).

    chunk_tokens = C (the engine's step token budget): the prompt as the engine runs it instead
    (prefill_chunk_steps_s): ceil(P (1 - s) / C) steps of the step model, each at its own GEMM efficiency, with its
    all-reduces, per-layer kernel time and weight stream; None keeps the compute-only figure above (the fleet's
    per-token cost)."""
    if chunk_tokens is not None:
        return prefill_chunk_steps_s(target, hw, prompt_tokens=prompt_tokens, tp=tp, cached_share=cached_share,
                                     chunk_tokens=chunk_tokens)
    p = np.asarray(prompt_tokens, float)
    s = np.asarray(cached_share, float)
    flops = p * (1.0 - s) * (2.0 * np.asarray(target.active_params) + 2.0 * np.asarray(target.attn_dim) * p * (1.0 + s))
    return flops / (np.asarray(hw.peak_flops_s) * np.asarray(hw.eta_flops) * np.asarray(tp, float))


def prefill_chunk_steps_s(target: Net, hw: HwParams, *, prompt_tokens, tp=1, cached_share=0.0,
                          chunk_tokens) -> np.ndarray:
    """Seconds to prefill one prompt alone as a chunked-prefill engine runs it: its q = P (1 - s) new tokens in
    n = floor(q / C) full chunks of C tokens and a remainder r = q - n C, each chunk one forward step of the step
    model (planner.physics.roofline.step_time_terms at one sequence of C, resp. r, tokens), so each chunk pays what a
    real prefill GEMM at that M pays: the GEMM efficiency at M tokens (eta_flops_at), the TP all-reduces of its
    activations, the per-layer kernel time, the weight stream and the fixed step time, not the peak-FLOP figure.
    A chunk's attention reads the context before it: the full chunks' mean context is P s + n C / 2 (exact where every
    full chunk's step is bound by the same terms: attention FLOPs and KV reads are linear in the context), the
    remainder's P s + n C + r / 2. (MLA targets keep the step model's absorbed attention factor.) A fully cached
    prompt still computes its last token (q >= 1)."""
    p = np.asarray(prompt_tokens, float)
    s = np.asarray(cached_share, float)
    c = np.asarray(chunk_tokens, float)
    q = np.maximum(p * (1.0 - s), 1.0)
    n = np.floor(q / c + 1e-9)
    r = np.maximum(q - n * c, 0.0)
    cached = p * s
    full = step_time_terms(target, hw, batch=1.0, tokens_per_seq=c, context_tokens=cached + n * c / 2.0, tp=tp).total_s
    rest = step_time_terms(target, hw, batch=1.0, tokens_per_seq=np.maximum(r, 1.0),
                           context_tokens=cached + n * c + r / 2.0, tp=tp).total_s
    return n * full + np.where(r > 0.0, rest, 0.0)


def usd_per_mtok(*, gpus, usd_per_gpu_hour, output_tokens_per_s) -> np.ndarray:
    """CPM = GPUs * $/GPU-hour * 1e6 / (3600 * output tokens/s): dollars per million output tokens."""
    with np.errstate(divide="ignore"):
        return (
            np.asarray(gpus, float) * np.asarray(usd_per_gpu_hour, float) * TOKENS_PER_MTOK
            / (SECONDS_PER_HOUR * np.asarray(output_tokens_per_s, float))
        )


@dataclass(frozen=True)
class SpecResult:
    """Arrays broadcast over every input of evaluate_arrays()."""

    acceptance_length: np.ndarray
    step_time_s: np.ndarray
    baseline_step_time_s: np.ndarray
    verify_time_s: np.ndarray
    draft_time_s: np.ndarray
    draft_cost_ratio: np.ndarray
    tpot_s: np.ndarray  # decode only
    baseline_tpot_s: np.ndarray
    tpot_seen_s: np.ndarray  # at full load with prefill sharing the replica (planner.physics.replica): the SLO's TPOT
    baseline_tpot_seen_s: np.ndarray
    prefill_share: np.ndarray  # share of the replica's time on prefill at full load
    baseline_prefill_share: np.ndarray
    output_tokens_per_s: np.ndarray  # decode only
    baseline_output_tokens_per_s: np.ndarray
    effective_output_tokens_per_s: np.ndarray  # prefill GPU time included
    baseline_effective_output_tokens_per_s: np.ndarray
    speedup: np.ndarray  # baseline TPOT / speculative TPOT at the same batch
    usd_per_mtok: np.ndarray  # prefill included
    baseline_usd_per_mtok: np.ndarray
    compute_bound: np.ndarray  # verifier step compute-bound
    baseline_compute_bound: np.ndarray
    max_batch: np.ndarray
    fits_memory: np.ndarray
    baseline_max_batch: np.ndarray  # without draft weights or draft KV
    baseline_fits_memory: np.ndarray


# Drafting modes whose engine reserves the step's drafted tokens' KV slots ahead of the step: vLLM's scheduler sets
# num_lookahead_tokens = num_speculative_tokens only for EAGLE-type proposers (EAGLE, EAGLE-3, MTP) and draft
# models, and allocate_slots reserves them for every running request each step; n-gram, suffix decoding and MEDUSA
# keep 0 (vllm/v1/core/sched/scheduler.py, Scheduler.__init__). Block drafting (DFlash, DSpark) stores its draft
# K/V for the step's tokens too (planner.physics.networks.head_net), so it reserves them as well.
LOOKAHEAD_MODES = (MODE_SEQUENTIAL, MODE_BLOCK)


@dataclass(frozen=True)
class SequenceMemory:
    """Bytes one running sequence holds over the replica's GPUs, by term (memory_max_batch); arrays broadcast."""

    kv: np.ndarray  # the verifier's KV cache (and fixed recurrent state) at the sequence's tokens
    lookahead_kv: np.ndarray  # the verifier's KV slots reserved for the step's drafted tokens (K; a tree's nodes)
    draft_kv: np.ndarray  # the draft's own KV (a head's or MTP module's layers, a draft model's), slots included
    draft_states: np.ndarray  # hybrid models: one recurrent state (SSM + conv) per verified token of the step

    @property
    def speculative(self) -> np.ndarray:
        return self.kv + self.lookahead_kv + self.draft_kv + self.draft_states


def sequence_memory(*, target: Net, draft: Net, mode, sequence_tokens, verify_tokens, kv_tp=1) -> SequenceMemory:
    """Bytes a running sequence holds with speculation (SequenceMemory's terms; `kv` alone without it):
        lookahead_kv = KV(L + D) - KV(L) ,  D = verify_tokens - 1 (K for a chain, a tree's nodes) in LOOKAHEAD_MODES
        draft_kv = draft KV(L + D)
        draft_states = verify_tokens * the verifier's recurrent state per sequence
    L = prompt + output tokens; KV(.) is kv_cache_bytes_per_sequence. Hybrid models (Gated DeltaNet, Mamba-2) keep
    the state after every verified token of the step, so a rejection rolls back to the accepted one: SGLang's
    MambaPool allocates intermediate_ssm_state_cache and intermediate_conv_window_cache of
    speculative_num_draft_tokens (K + 1 for a chain) per request slot beside the running state
    (python/sglang/srt/mem_cache/memory_pool.py). Models whose state is planned as a window (the catalogue's
    hand-entered hybrids: ModelSpec.state_bytes_per_sequence 0) are charged no draft states."""
    seq = np.asarray(sequence_tokens, float)
    n = np.asarray(verify_tokens, float)
    mode = np.asarray(mode)
    reserves = (mode == LOOKAHEAD_MODES[0]) | (mode == LOOKAHEAD_MODES[1])
    lookahead = np.where(reserves, n - 1.0, 0.0)
    kv = kv_cache_bytes_per_sequence(target, sequence_tokens=seq, tp=kv_tp)
    lookahead_kv = kv_cache_bytes_per_sequence(target, sequence_tokens=seq + lookahead, tp=kv_tp) - kv
    no_draft = (mode == MODE_NONE) | (mode == MODE_GPU_LOOKUP)
    draft_kv = np.where(no_draft, 0.0, kv_cache_bytes_per_sequence(draft, sequence_tokens=seq + lookahead, tp=kv_tp))
    state = np.asarray(target.state_bytes_per_sequence, float)
    states = n * state if np.any(state) else np.zeros(())
    return SequenceMemory(kv=kv, lookahead_kv=lookahead_kv, draft_kv=draft_kv, draft_states=states)


def engine_verify_tokens(verify_tokens) -> np.ndarray:
    """Verified tokens per sequence the engine's memory is set for, on the planner's five axes (sample, candidate,
    K, segment, batch): its configuration (K, the tree) whatever the draw and the segment, so the largest over
    those axes (the same number for a chain); other shapes as given."""
    n = np.asarray(verify_tokens, float)
    return n.max(axis=(0, 3), keepdims=True) if n.ndim == 5 else n


def memory_max_batch(*, target: Net, draft: Net, hw: HwParams, mode, prompt_tokens, output_tokens, tp=1,
                     draft_weight_bytes_total=0.0, draft_is_model=False,
                     attention_dp=0.0, verify_tokens=1.0) -> tuple[np.ndarray, np.ndarray]:
    """(largest batch with the draft, largest batch without it) that fit memory: every resident weight (all
    experts) + draft weights (a head's fusion included) + each sequence's memory (MLA latent replicated on every TP
    rank; sliding-window layers hold only their window), from planner.physics.roofline.max_batch. With the draft a
    sequence holds sequence_memory's terms too: the lookahead KV slots of the step's drafted tokens, the draft's own KV
    and, on hybrid models, a recurrent state per verified token (verify_tokens: K + 1 for a chain, a tree's nodes + 1).
    `draft` is already scaled for K (MEDUSA's K heads). Under attention data parallel every GPU holds the
    non-expert weights and a draft model whole, and a sequence's KV once (planner.physics.roofline.replica_weight_bytes,
    data_parallel_split)."""
    seq_tokens = np.asarray(prompt_tokens, float) + np.asarray(output_tokens, float)
    kv_tp, _, copies = data_parallel_split(tp, attention_dp)  # copies: of a draft model, one per GPU under DP
    target_bytes = replica_weight_bytes(target, tp=tp, attention_dp=attention_dp)
    mem = sequence_memory(target=target, draft=draft, mode=mode, sequence_tokens=seq_tokens,
                          verify_tokens=verify_tokens, kv_tp=kv_tp)
    # a head's weights: its per-pass network and its once-per-step fusion (EAGLE-3's 3h -> h fc), on every GPU
    # under attention DP as the head's other weights
    head_bytes = (replica_weight_bytes(draft, tp=tp, attention_dp=attention_dp)
                  + np.asarray(draft.fusion_weight_bytes, float) * copies)
    draft_bytes = np.where(np.asarray(draft_is_model), np.asarray(draft_weight_bytes_total, float) * copies,
                           head_bytes)
    mb = max_batch(hw=hw, weight_bytes_total=target_bytes + draft_bytes, kv_bytes_per_sequence=mem.speculative,
                   tp=tp)
    base_mb = max_batch(hw=hw, weight_bytes_total=target_bytes, kv_bytes_per_sequence=mem.kv, tp=tp)
    return mb, base_mb


def _full(x, shape: tuple[int, ...]) -> np.ndarray:
    """x on the result's shape: itself when it has it already, else a read-only broadcast view."""
    x = np.asarray(x)
    return x if x.shape == shape else np.broadcast_to(x, shape)


def _result_ndim(*inputs) -> int:
    """Dimensions of the broadcast result of evaluate_arrays' inputs (networks and hardware field by field)."""
    nd = 0
    for x in inputs:
        if dataclasses.is_dataclass(x):
            nd = max(nd, max(getattr(v, "ndim", 0) for v in vars(x).values()))  # fields: arrays or numbers
        elif x is not None:
            nd = max(nd, np.ndim(x))
    return nd


def _pair(a, b, ndim: int) -> np.ndarray:
    """a and b stacked on a new leading axis, each padded to ndim dimensions (the pair axis stays in front
    whatever the other inputs broadcast to)."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    return np.stack([a, b]).reshape((2,) + (1,) * (ndim - a.ndim) + a.shape)


def draft_time_s(draft: Net, hw: HwParams, *, mode, draft_scales_with_k, k, batch, verify_tokens, context_tokens,
                 tp=1, attention_dp=0.0, draft_cost_factor=1.0, draft_passes_override=None,
                 draft_tokens_per_pass_override=None, ndim: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The draft side of one speculative step on the accelerator, seconds: (all draft passes, one later pass, passes).
        T_draft = T_pass(first) + (passes - 1) * T_pass(tokens_pp) + T_fusion
    each pass a step of the draft network with hw.t_fixed_draft_s as its fixed time. The planner's evaluate_arrays
    and the engine calibration (calibration.analysis.method_costs) both call this, so a calibrated per-pass time means
    the same thing in both. Arguments as evaluate_arrays'; ndim: the broadcast result's dimensions when the caller
    knows more inputs than these."""
    b = np.asarray(batch, float)
    n_verify = np.asarray(verify_tokens, float)
    nd = _result_ndim(draft, hw, b, n_verify, k, context_tokens, tp, attention_dp) if ndim is None else ndim
    passes = draft_passes(mode, k)
    if draft_passes_override is not None:  # a token tree: its steps (NaN: the drafting mode's default)
        ov = np.asarray(draft_passes_override, float)
        passes = np.where(np.isnan(ov), passes, ov)
    scale = np.where(np.asarray(draft_scales_with_k), k, 1.0)
    scaled = draft.scaled(scale)
    # MEDUSA: K heads, each reading the same last hidden state: one token per head per sequence (the K heads are
    # in `scaled`), so FLOPs and bytes are linear in K. P-EAGLE: one head drafting K tokens in one pass.
    tokens_pp = np.where(np.asarray(draft_scales_with_k), 1.0, draft_tokens_per_pass(mode, k))
    if draft_tokens_per_pass_override is not None:  # a token tree: topk (or its widest level) per sequence per pass
        ov = np.asarray(draft_tokens_per_pass_override, float)
        tokens_pp = np.where(np.isnan(ov), tokens_pp, ov)
    factor = np.asarray(draft_cost_factor, float)
    unit = bool(np.all(factor == 1.0))  # no FP8 lever anywhere: x * 1 is x, skipped on the whole grid
    first_tokens = first_draft_pass_tokens(mode, draft_scales_with_k, tokens_pp, n_verify)
    d2, _ = step_time_s(scaled, hw, batch=b, tokens_per_seq=_pair(tokens_pp, first_tokens, nd),
                        context_tokens=context_tokens, tp=tp, t_fixed_s=hw.t_fixed_draft_s, attention_dp=attention_dp)
    pass_t, first_t = (d2[0] if unit else d2[0] * factor), d2[1]
    # data parallel: each GPU fuses its own sequences' hidden states with the whole projection
    tp_d, share, _ = data_parallel_split(tp, attention_dp)
    fusion_t = fusion_time_s(scaled, hw, batch=b * share, tokens_per_seq=n_verify, tp=tp_d)
    if unit:
        gpu_draft_t = np.where(passes > 0, first_t + fusion_t + (passes - 1.0) * pass_t, 0.0)
    else:
        gpu_draft_t = np.where(passes > 0, first_t * factor + fusion_t * factor + (passes - 1.0) * pass_t, 0.0)
    return gpu_draft_t, pass_t, passes


def evaluate_arrays(
    *,
    target: Net,
    draft: Net,
    hw: HwParams,
    mode: np.ndarray | int,
    draft_scales_with_k: np.ndarray | bool,
    k: np.ndarray | float,
    batch: np.ndarray | float,
    tau: np.ndarray | float,
    context_tokens: np.ndarray | float,
    prompt_tokens: np.ndarray | float,
    output_tokens: np.ndarray | float,
    usd_per_gpu_hour: np.ndarray | float,
    tp: np.ndarray | float = 1,
    verify_tokens: np.ndarray | float | None = None,
    draft_cost_ratio: np.ndarray | float | None = None,
    draft_cost_factor: np.ndarray | float = 1.0,
    draft_weight_bytes_total: np.ndarray | float = 0.0,
    draft_is_model: np.ndarray | bool = False,
    draft_passes_override: np.ndarray | float | None = None,
    draft_tokens_per_pass_override: np.ndarray | float | None = None,
    draft_context_tokens: np.ndarray | float | None = None,
    attention_dp: np.ndarray | float = 0.0,
    with_memory: bool = True,
    prefix_cache_share: np.ndarray | float = 0.0,
) -> SpecResult:
    """The whole model over broadcast arrays: one call evaluates a grid of scenarios.

    tau: mean acceptance length (bonus token included). verify_tokens: tokens per sequence the verifier
    checks (default K+1; a tree's node count + 1). draft_cost_ratio: override c. draft_cost_factor:
    multiplies the draft pass time (FP8 draft head lever). draft_is_model: the draft network uses the
    verifier's t_fixed-like launch overhead per pass of its own (t_fixed_draft_s in both cases).
    draft_passes_override / draft_tokens_per_pass_override: a token tree's draft steps and tokens per sequence per
    step (planner.acceptance.trees.TreeShape); NaN entries keep the drafting mode's default. draft_context_tokens:
    context the draft attends to (default context_tokens; a self-speculative draft with a StreamingLLM KV budget reads
    only that budget: MagicDec, arXiv 2408.11049). attention_dp: 1 where the replica's tp GPUs run attention data
    parallel and the experts expert parallel (planner.physics.roofline.step_time_terms), 0 for tensor parallel.
    with_memory=False: skip memory_max_batch (it does not depend on the batch) for a caller that has it already;
    the max_batch fields are NaN and the fits_memory fields False then. prefix_cache_share: the share of prompt
    tokens served from the prefix cache (prefill_time_s); 0 charges every prompt's prefill in full.

    Draft side of a step (speculation_overhead_s and first_draft_pass_tokens):
        T_draft = T_pass(first) + (passes - 1) * T_pass(tokens_pp) + T_fusion + speculation_overhead_s
    (speculation_overhead_s counts the drafted tokens the verifier checks: n - 1, K for a chain, a tree's nodes.)
    The first pass of a head, native module or draft model runs over the step's verified tokens (vLLM's EAGLE
    proposer drafts from every verified position), the next ones over one token (topk for a tree) per sequence;
    T_fusion is EAGLE-3's once-per-step 3h -> h projection (planner.physics.roofline.fusion_time_s).
    """
    k = np.asarray(k, float)
    b = np.asarray(batch, float)
    n_verify = k + 1.0 if verify_tokens is None else np.asarray(verify_tokens, float)
    tau = np.asarray(tau, float)
    nd = _result_ndim(target, draft, hw, b, n_verify, tau, k, context_tokens, tp, attention_dp)
    # one step_time_s call per network for its two token counts (plain decode and verify; a draft's later and
    # first passes): the same elementwise numbers, half the per-call cost
    t2, cb2 = step_time_s(target, hw, batch=b, tokens_per_seq=_pair(1.0, n_verify, nd),
                          context_tokens=context_tokens, tp=tp, attention_dp=attention_dp)
    (base_t, verify_t), (base_cb, verify_cb) = t2, cb2
    gpu_draft_t, pass_t, passes = draft_time_s(
        draft, hw, mode=mode, draft_scales_with_k=draft_scales_with_k, k=k, batch=b, verify_tokens=n_verify,
        context_tokens=context_tokens if draft_context_tokens is None else draft_context_tokens, tp=tp,
        attention_dp=attention_dp, draft_cost_factor=draft_cost_factor, draft_passes_override=draft_passes_override,
        draft_tokens_per_pass_override=draft_tokens_per_pass_override, ndim=nd)
    # Any speculative step pays the speculation overhead (rejection sampling, proposer bookkeeping); an explicit
    # draft cost ratio c stands for every draft-side cost, so the overhead is folded into it then.
    spec_overhead = speculation_overhead_s(hw, mode=mode, batch=b, drafted_tokens=n_verify - 1.0,
                                           vocab_size=target.vocab_size)
    if draft_cost_ratio is not None:
        pass_t = np.asarray(draft_cost_ratio, float) * base_t
        gpu_draft_t = passes * pass_t
        spec_overhead = 0.0
    draft_t = gpu_draft_t + spec_overhead
    c = pass_t / base_t  # Leviathan's c: one draft pass / one target step (t_spec_s not included)
    spec_t = verify_t + draft_t
    tpot = spec_t / tau
    thr = b * tau / spec_t
    base_thr = b / base_t
    pre = prefill_time_s(target, hw, prompt_tokens=prompt_tokens, tp=tp, cached_share=prefix_cache_share)
    out = np.asarray(output_tokens, float)
    # the replica at full load at this batch, prefill sharing its time (planner.physics.replica): TPOT seen, tokens/s
    full = replica_load(tpot_s=tpot, batch=b, prefill_s=pre, output_tokens=out)
    base_full = replica_load(tpot_s=base_t, batch=b, prefill_s=pre, output_tokens=out)
    eff, base_eff = full.output_tokens_per_s, base_full.output_tokens_per_s
    if with_memory:
        scaled = draft.scaled(np.where(np.asarray(draft_scales_with_k), k, 1.0))
        mb, base_mb = memory_max_batch(target=target, draft=scaled, hw=hw, mode=mode, prompt_tokens=prompt_tokens,
                                       output_tokens=out, tp=tp, draft_weight_bytes_total=draft_weight_bytes_total,
                                       draft_is_model=draft_is_model, attention_dp=attention_dp,
                                       verify_tokens=engine_verify_tokens(n_verify))
    else:
        mb = base_mb = np.nan
    return SpecResult(
        acceptance_length=_full(tau, thr.shape),
        step_time_s=spec_t,
        baseline_step_time_s=_full(base_t, thr.shape),
        verify_time_s=verify_t,
        draft_time_s=_full(draft_t, thr.shape),
        draft_cost_ratio=_full(c, thr.shape),
        tpot_s=tpot,
        baseline_tpot_s=_full(base_t, thr.shape),
        tpot_seen_s=_full(full.tpot_seen_s, thr.shape),
        baseline_tpot_seen_s=_full(base_full.tpot_seen_s, thr.shape),
        prefill_share=_full(full.prefill_share, thr.shape),
        baseline_prefill_share=_full(base_full.prefill_share, thr.shape),
        output_tokens_per_s=thr,
        baseline_output_tokens_per_s=_full(base_thr, thr.shape),
        effective_output_tokens_per_s=eff,
        baseline_effective_output_tokens_per_s=_full(base_eff, thr.shape),
        speedup=base_t / tpot,
        usd_per_mtok=usd_per_mtok(gpus=tp, usd_per_gpu_hour=usd_per_gpu_hour, output_tokens_per_s=eff),
        baseline_usd_per_mtok=_full(
            usd_per_mtok(gpus=tp, usd_per_gpu_hour=usd_per_gpu_hour, output_tokens_per_s=base_eff),
            thr.shape),
        compute_bound=_full(verify_cb, thr.shape),
        baseline_compute_bound=_full(base_cb, thr.shape),
        max_batch=_full(mb, thr.shape),
        fits_memory=_full(b <= mb, thr.shape),
        baseline_max_batch=_full(base_mb, thr.shape),
        baseline_fits_memory=_full(b <= base_mb, thr.shape),
    )
