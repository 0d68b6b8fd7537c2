"""Frozen records the planner reads and returns.

Units are in the field names. Profiles (YAML under profiles/data) load into these records; the planner
never reads files itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Dtype = Literal["bf16", "fp8"]
# How a method produces its K draft tokens (planner.physics.serving.DRAFTING_MODE_CODE gives each its cost terms).
DraftingMode = Literal[
    "sequential_head",  # EAGLE-3: K sequential passes of a ~1-layer head on the target's hidden states
    "parallel_head",  # P-EAGLE / MEDUSA: all K draft tokens in one pass
    "native_module",  # MTP: the model's own module(s), K sequential passes of the module
    "draft_model",  # a separate smaller model: K sequential steps on its own roofline
    "ngram",  # prompt lookup on the host (vLLM ngram, suffix decoding): no accelerator pass
    # DFlash / DSpark: one pass of a small multi-layer drafter over a block of K mask queries (+ the bonus token);
    # the verified tokens enter only as context K/V projected from the target's hidden states
    "block_parallel",
    "ngram_gpu",  # prompt lookup as a GPU kernel (vLLM ngram_gpu): no draft network, no host lookup
]
# Drafting modes that look tokens up instead of running a draft network: their acceptance is the workload's
# n-gram alpha (the share of output that copies earlier text), not the method's trained range.
LOOKUP_DRAFTING: tuple[str, ...] = ("ngram", "ngram_gpu")
AlphaConvention = Literal["per_token", "draft_acceptance_rate", "acceptance_length"]

BYTES_PER_PARAM: dict[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0,
    # 4-bit formats carry block scales: NVFP4 = FP4 (E2M1) + one FP8 (E4M3) scale per 16 values
    # = 4.5 bits; MXFP4 (OCP Microscaling v1.0) = FP4 + one E8M0 scale per 32 values = 4.25 bits.
    "nvfp4": 4.5 / 8.0,
    "mxfp4": 4.25 / 8.0,
}
# Weight formats the roofline understands, and the formats a KV cache can hold (vLLM --kv-cache-dtype).
WEIGHT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "nvfp4", "mxfp4")
KV_CACHE_DTYPES: tuple[str, ...] = ("bf16", "fp8")


@dataclass(frozen=True)
class Sourced:
    """Where a number comes from: a source and the date it was taken (ISO)."""

    source: str
    date: str


@dataclass(frozen=True)
class Efficiency:
    """Roofline efficiencies and fixed overheads for one (hardware, engine) pair.

    Defaults are assumptions until a calibration fit replaces them (calibration/analysis/fit.py).
    """

    eta_bw: float  # achieved / peak memory bandwidth in decode steps
    eta_flops: float  # achieved / peak dense tensor FLOP/s
    t_fixed_s: float  # per verifier step: scheduler, sampling, kernel launches
    t_fixed_draft_s: float  # per draft pass: launches, sampling of the draft tokens
    allreduce_latency_s: float  # per all-reduce under tensor parallel
    source: Sourced
    # per verifier step of any speculative configuration: proposer bookkeeping, rejection sampling
    t_spec_s: float = 0.0
    # Step-time terms of planner/physics/roofline.py. Defaults reproduce the single-roofline model.
    t_layer_s: float = 0.0  # per decoder layer per step: norms, rotary, activation and launch gaps
    t_layer_token_s: float = 0.0  # per decoder layer per token in the step: the same kernels' per-token work
    t_expert_s: float = 0.0  # per touched routed expert per MoE layer: one grouped-GEMM problem
    t_moe_layer_s: float = 0.0  # per MoE layer per step: routing, permute/unpermute, grouped-GEMM launch
    # per routed token (token-expert pair) per MoE layer: permutation, routing and the grouped GEMM's extra row
    # tiles on the experts that skewed routing loads most (planner.physics.roofline.moe_token_time_s)
    t_moe_token_s: float = 0.0
    # squared coefficient of variation of expert popularity under the router (0: uniform routing); the experts
    # m tokens touch saturate more slowly as it grows (planner.physics.roofline.touched_experts)
    moe_routing_skew: float = 0.0
    # MLA attention block (planner.physics.roofline.mla_kernel_time_s), beyond its roofline: per MLA layer per step
    # (the block's ~10 kernel launches and syncs), and per query head per token in the step (the per-head W_UK / W_UV
    # batched matmuls, rotary, latent writes)
    t_mla_layer_s: float = 0.0
    t_mla_head_token_s: float = 0.0
    eta_bw_tokens_scale: float = 0.0  # 1 / tokens at which weight streaming falls to half its efficiency
    flops_tokens_half: float = 0.0  # tokens per step at which GEMMs reach half their peak efficiency
    eta_kv_bw: float = 0.0  # attention KV streaming efficiency; 0: same as eta_bw
    eta_attn_flops: float = 0.0  # decode attention compute efficiency; 0: same as eta_flops
    eta_allreduce: float = 1.0  # achieved / peak interconnect bandwidth in all-reduces
    # Expert-parallel all-to-all (attention data parallel, planner.physics.roofline.alltoall_time_s): per dispatch or
    # combine, latency and achieved / peak interconnect bandwidth. Defaults: assumption from vLLM 0.24's DeepEP
    # low-latency kernels (~50 us a phase at small batch on H100, H200 and B200; aiconfigurator-core 0.12),
    # replaced by the kernel fit where that hardware has data.
    alltoall_latency_s: float = 5e-5
    eta_alltoall: float = 0.3
    per_op_roofline: float = 0.0  # 0: one roofline over the whole step; 1: GEMMs and attention each
    # Speculation terms, fitted by tools/fit_speculation.py; defaults reproduce the first
    # planner. Per drafted token of each sequence, the sampler's work on its extra target row (logits to fp32,
    # softmax, sampling and rejection): this many passes over an fp32 row of the target's vocabulary at HBM
    # bandwidth (planner.physics.serving.sampler_time_s).
    sampler_vocab_passes: float = 0.0
    t_ngram_s: float = 0.0  # n-gram proposer: host lookup time per sequence per step
    # share of a sequence's extra verify tokens routed to experts its other tokens already chose (MoE targets)
    moe_verify_overlap: float = 0.0
    # True: a calibration run measured this set whole (calibration.storage.profiles_store); the published speculation
    # fit does not replace its terms (planner.search.scenario.efficiency_for)
    calibrated: bool = False
    # Per method, measured by a calibration run on this hardware (calibration.storage.profiles_store): (planner method
    # id, t_fixed_draft_s per draft pass, t_spec_s per verifier step); those methods use them instead of the two above.
    method_terms: tuple[tuple[str, float, float], ...] = ()
    # Acceptance the same calibration measured, per (planner method id, workload): (method, workload, K, mean
    # acceptance length tau with the bonus token, its 95 % low, high). Shown beside the plan; the plan's acceptance
    # itself comes from the method's alpha range.
    calibrated_acceptance: tuple[tuple[str, str, int, float, float, float], ...] = ()


@dataclass(frozen=True)
class Hardware:
    name: str
    label: str
    hbm_gb: float  # accelerator memory per device, GB (1e9 bytes)
    hbm_bandwidth_gb_s: float  # peak memory bandwidth, GB/s
    bf16_tflops: float  # dense (no sparsity) BF16 peak, TFLOP/s
    fp8_tflops: float  # dense FP8 peak, TFLOP/s
    interconnect_gb_s: float  # per-device unidirectional bandwidth for tensor-parallel all-reduce, GB/s
    max_tp: int
    usd_per_gpu_hour_low: float
    usd_per_gpu_hour_high: float
    price: Sourced
    specs: Sourced
    efficiency: Efficiency
    kind: Literal["gpu", "cpu"] = "gpu"
    # dense FP4 (NVFP4/MXFP4) peak, TFLOP/s; 0 = no FP4 tensor cores: FP4 weights run as W4A16 in BF16
    fp4_tflops: float = 0.0
    # architecture (planner.physics.borrowed.ARCHITECTURES: hopper, blackwell, cdna3, ...; or only the vendor, nvidia or
    # amd; "" unknown): a GPU without kernel data borrows step-time terms from a kernel-fitted GPU of the same one first
    architecture: str = ""
    # GPUs in one NVLink / Infinity Fabric domain at interconnect_gb_s (GB200 NVL72: 72); 0: max_tp. Shown, not
    # searched: the plan's tensor parallel stops at max_tp (planner.request.TP_OPTIONS)
    scale_up_gpus: int = 0

    @property
    def usd_per_gpu_hour_mid(self) -> float:
        return 0.5 * (self.usd_per_gpu_hour_low + self.usd_per_gpu_hour_high)

    def peak_tflops(self, dtype: str) -> float:
        if dtype == "fp8":
            return self.fp8_tflops
        if dtype in ("nvfp4", "mxfp4") and self.fp4_tflops > 0:
            return self.fp4_tflops
        return self.bf16_tflops


MixerKind = Literal["gqa", "mla", "sliding", "linear", "mamba2", "linear_replacement", "none"]
MlpKind = Literal["dense", "moe", "linear_replacement", "none"]


@dataclass(frozen=True)
class AttentionBlock:
    """The token mixer of one decoder layer. gqa / mla / sliding keep a KV entry per token of context (sliding: at
    most window_tokens); linear (Gated DeltaNet) and mamba2 keep a fixed state per sequence; linear_replacement (a
    hidden x hidden projection) and none keep nothing."""

    kind: MixerKind
    params: int  # weights of the block
    kv_elements_per_token: int = 0  # cached per token: 2 x kv_heads x head_dim (GQA), latent + rope key (MLA)
    window_tokens: int = 0  # sliding: the tokens it keeps
    state_bytes_per_sequence: int = 0  # linear / mamba2: recurrent state + convolution state, bytes
    heads: int = 0  # query heads (GQA, MLA); value heads (linear); SSM heads (mamba2)
    kv_heads: int = 0  # KV heads (GQA); key heads (linear)
    head_dim: int = 0  # query/key head width (GQA, MLA, linear keys, mamba2 heads)
    state_size: int = 0  # mamba2 d_state; linear: value head width
    groups: int = 0  # mamba2 n_groups (B and C projections)
    conv_kernel: int = 0  # linear / mamba2 causal convolution width


@dataclass(frozen=True)
class MlpBlock:
    """The channel mixer of one decoder layer: a dense MLP, routed experts (with shared experts and a router), a
    hidden x hidden projection (linear_replacement) or nothing."""

    kind: MlpKind
    params: int  # all its weights, every routed expert included
    active_params: int  # the weights one token multiplies
    width: int = 0  # dense: intermediate size; moe: one routed expert's
    experts: int = 0  # routed experts
    experts_per_token: int = 0
    shared_width: int = 0  # shared experts' total intermediate width
    gated: bool = True  # 3 matrices (SwiGLU); False: 2 (Nemotron's relu2)
    expert_params: int = 0  # one routed expert's weights
    shared_params: int = 0  # the shared experts' weights
    router_params: int = 0  # the router's weights (hidden x experts)


@dataclass(frozen=True)
class LayerGroup:
    """`count` decoder layers of one kind (not necessarily adjacent)."""

    count: int
    attention: AttentionBlock
    mlp: MlpBlock


@dataclass(frozen=True)
class ModelSpec:
    name: str
    label: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    total_params_b: float  # all weights, billions
    active_params_b: float  # weights used per token, billions (= total for dense models)
    experts: int  # routed experts per MoE layer; 0 for dense
    experts_per_token: int  # routed experts each token selects
    expert_params_b: float  # one routed expert summed over all MoE layers, billions
    kv_elements_per_token_per_layer: int  # 2 * kv_heads * head_dim; MLA caches a compressed latent
    native_methods: tuple[str, ...]  # e.g. ("mtp",)
    draft_model: str | None  # a smaller model of the same tokenizer family, for the draft_model method
    max_context_tokens: int
    source: Sourced
    hf_id: str = ""
    # Memory and format physics; defaults reproduce the plain GQA model counted as before.
    # Tied: the input embedding is the LM head (read once per step). Untied: the input table is only
    # gathered (batch rows per step), so it is resident but not streamed.
    tied_embeddings: bool = True
    attention: Literal["gqa", "mla"] = "gqa"
    mla_kv_lora_rank: int = 0  # MLA compressed latent width (DeepSeek-V3: 512)
    mla_qk_rope_head_dim: int = 0  # MLA decoupled rotary key width (DeepSeek-V3: 64)
    sliding_window_tokens: int = 0  # window of the sliding-window layers (GPT-OSS: 128); 0 = none
    sliding_window_layers: int = 0  # layers that attend only within the window (GPT-OSS: 18 of 36)
    moe_layers: int = 0  # layers with routed experts (DeepSeek-V3: 58 of 61); 0 = all layers when MoE
    # 4-bit weight formats quantise these components; the rest stays BF16. "experts": routed experts only
    # (GPT-OSS MXFP4 checkpoint); "linear": every linear layer but embeddings and LM head.
    fp4_scope: Literal["experts", "linear"] = "linear"
    # The stack layer by layer, grouped by kind (profiles/model_config.py fills it from a config.json; the aggregates
    # above are derived from it there); empty for hand-entered catalogue models.
    layer_groups: tuple[LayerGroup, ...] = ()
    # Fixed recurrent state one sequence holds whatever its length (linear attention, Mamba-2: state + convolution
    # state), bytes over the whole stack. The roofline reads it through sliding_window_* stand-ins (state_window_layers
    # of the sliding_window_layers); memory charges these bytes instead of their windows.
    state_bytes_per_sequence: float = 0.0
    state_window_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def embedding_params_b(self) -> float:
        """One vocab x hidden table, billions."""
        return self.vocab_size * self.hidden_size / 1e9

    @property
    def routed_params_b(self) -> float:
        return self.experts * self.expert_params_b

    @property
    def dense_params_b(self) -> float:
        """Weights every step reads whatever the routing: attention, shared experts, embeddings."""
        return self.total_params_b - self.routed_params_b


@dataclass(frozen=True)
class AlphaRange:
    low: float
    high: float

    @property
    def mid(self) -> float:
        return 0.5 * (self.low + self.high)


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    drafting: DraftingMode
    vllm_method: str | None  # speculative_config "method" value; None when vLLM has no such method
    # Draft network size in dense decoder-layer equivalents (12 h^2 params each; MEDUSA's residual
    # block is h^2 = 1/12 layer); for a native module, the share of the model's own layers.
    draft_layers: float
    draft_kv_layers: float  # layers of attention with a KV cache in the draft network
    draft_reads_lm_head: bool  # reads a vocab x hidden LM head per pass
    draft_vocab: int | None  # reduced draft vocabulary (EAGLE-3: 32k); None = the target's
    draft_params_scale_with_k: bool  # MEDUSA: one head per position
    tree: bool
    alpha_default: AlphaRange
    alpha_tuned: AlphaRange
    alpha_convention: AlphaConvention
    # Conditional acceptance at draft position i is alpha * position_decay ** (i - 1).
    position_decay: float
    requires_native: str | None  # the model must list this in native_methods
    default_k: int
    max_k: int
    setup_gpu_hours: float  # one-time draft training, A100-hours; 0 when nothing is trained
    setup_engineering_weeks: float
    setup_note: str
    claimed_speedup: tuple[float, float] | None
    source: Sourced
    # Target hidden states fused once per speculative step by a 3h -> h style projection over the verified
    # tokens (EAGLE-3: low, middle and high layers = 3); 0 for heads that read only the last hidden state.
    draft_fusion_inputs: int = 0
    # Hidden-width inputs of a projection the head runs on EVERY draft pass, n*h -> h (EAGLE-1/2: fc over [token
    # embedding; hidden state] = 2, vLLM llama_eagle.py `self.fc(torch.cat((input_embeds, hidden_states)))`); 0: none.
    draft_pass_fc_inputs: int = 0


@dataclass(frozen=True)
class Workload:
    name: str
    label: str
    alpha_shift: float  # added to per-token alpha of trained drafters (head, MTP, draft model)
    ngram_alpha: float  # per-token alpha of prompt lookup on this workload (copying from the input)
    default_k: int
    prompt_tokens: int  # typical prompt length
    output_tokens: int  # typical output length
    source: Sourced
    # public benchmark datasets that stand for this workload in the acceptance library (planner.acceptance.library)
    datasets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Language:
    name: str
    label: str
    alpha_shift: float  # shift when the draft head was not trained on this language
    source: Sourced


@dataclass(frozen=True)
class Lever:
    number: int  # position in the seed article's order
    name: str
    label: str
    # alpha: add alpha_gain; switch_to_head: draft model -> EAGLE-3 head (+alpha_gain over the draft
    # model); tune_k: best K; tree: tree verification; draft_cost: multiply draft time;
    # switch_to_mtp: MTP where the model ships it; speedup: multiply throughput (VSD).
    kind: Literal["alpha", "switch_to_head", "tune_k", "tree", "draft_cost", "switch_to_mtp", "speedup"]
    alpha_gain: AlphaRange  # added to per-token alpha
    draft_cost_factor: float  # multiplies the draft pass time (FP8 head: 0.6)
    speedup_factor: float  # multiplies throughput (VSD: 1.096)
    one_time_usd: AlphaRange  # compute cost per language-workload, USD
    engineering_weeks: float
    applies_to: tuple[str, ...]  # method names; empty = all
    note: str
    source: Sourced


@dataclass(frozen=True)
class Acceptance:
    """Acceptance in any of the three conventions; converted by planner.acceptance.rates."""

    convention: AlphaConvention
    value: float | None = None
    per_position: tuple[float, ...] | None = None  # conditional per-token alpha per draft position


@dataclass(frozen=True)
class Scenario:
    """One question: model on hardware with a method, K, batch and acceptance. Shared by app and CLI."""

    model: str
    hardware: str
    method: str
    k: int = 4
    batch: int | None = None  # None: best batch under the TPOT SLO
    acceptance: Acceptance | None = None  # None: the method's default alpha range midpoint + shifts
    workload: str = "chat"
    language: str = "english"
    context_tokens: int | None = None  # None: workload prompt + half its output
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    tp: int = 1
    dtype: Dtype = "bf16"
    kv_dtype: str | None = None  # KV cache bf16 / fp8; None: fp8 with fp8 weights, else bf16
    attention_dp: bool = False  # MoE: attention data parallel + expert parallel over the tp GPUs
    usd_per_gpu_hour: float | None = None  # None: hardware mid price
    tpot_slo_ms: float = 50.0
    draft_cost_ratio: float | None = None  # override the derived c
    tuned: bool = False  # use the method's tuned alpha range
    monthly_output_tokens: float = 1e10
    efficiency: Efficiency | None = None  # None: the hardware's defaults (or a calibrated profile)
    tree: bool = False  # verify a token tree (methods with tree support) instead of a chain
    tree_width: int = 3  # candidates at depth 1 of the default tree
    tree_shape: Any = None  # a stated tree (planner.acceptance.trees.TreeShape): its depth is K, its nodes are verified
    alpha_shift_extra: float = 0.0  # levers: added to per-token alpha
    draft_cost_factor: float = 1.0  # levers: multiplies the draft pass time (FP8 head)
    speedup_factor: float = 1.0  # levers: multiplies decode throughput (VSD)
    temperature: float = 0.0  # sampling temperature of the requests (0: greedy); planner.request.check_temperature
    engine: str = "vllm"  # serving engine (planner.physics.engines.ENGINES): its own speculation overheads
    engine_version: str | None = None


class Catalog(Protocol):
    """What the planner reads of a catalogue (profiles.catalog.Catalog is the record that satisfies it): the named
    tables, prices, the fitted and borrowed step-time terms and their errors, the speculation fit and engines, the
    acceptance library."""

    hardware: Mapping[str, Hardware]
    models: Mapping[str, ModelSpec]
    methods: Mapping[str, Method]
    workloads: Mapping[str, Workload]
    languages: Mapping[str, Language]
    levers: Mapping[str, Lever]
    prices: Mapping[str, Any]
    price_sources: Mapping[str, Sourced]
    fitted_efficiency: Mapping[tuple[str, str], Efficiency]
    fitted_tpot_error: Mapping[tuple[str, str], float]
    borrowed_efficiency: Mapping[tuple[str, str], Efficiency]
    fitted_families: Mapping[tuple[str, str], frozenset]
    borrowed_donors: Mapping[tuple[str, str], tuple]
    fitted_speculation: Mapping[str, float]
    fitted_speculation_source: Sourced | None
    fitted_speculation_stderr: Mapping[str, float]
    speculation_engines: Mapping[str, Any]
    speculation_class_error: Mapping[tuple[str, str], tuple[float, int]]
    speculation_overall_error: tuple[float, int] | None
    speculation_switching: Mapping[str, Any]
    acceptance_library: Any

    @property
    def engineering_usd_per_week(self) -> float: ...

    def method_available(self, method: str, model: str) -> tuple[bool, str]: ...

