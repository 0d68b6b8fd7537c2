"""A Hugging Face `config.json` -> the planner's ModelSpec (bring your own model).

The counts follow the conventions of profiles/data/models.yaml:
- total_params_b: every weight of the served model, both embedding tables when untied; native MTP modules are not
  counted (DeepSeek-V3's 671B excludes its 14B MTP module); vision towers of multimodal wrappers are not counted.
- active_params_b: what one token multiplies: attention, dense MLPs, shared experts, routers, top-k routed experts
  and both embedding tables when untied (planner.networks.target_net drops the gathered input table itself).
- expert_params_b: one routed expert summed over the MoE layers; kv_elements_per_token_per_layer: 2 x kv_heads x
  head_dim (GQA) or the MLA latent kv_lora_rank + qk_rope_head_dim that vLLM caches.
Parameters are counted by hand: embeddings vocab x hidden; attention q, k, v, o (MLA: q_a, q_b, kv_a, kv_b, o;
DeepSeek sparse attention adds its indexer); gated MLPs 3 x hidden x intermediate; routers hidden x experts; norms,
biases and rotary tables are left out (under 0.1 % of any model here).

Linear-attention layers (Qwen3-Next, Qwen3.5 `layer_types` "linear_attention": Gated DeltaNet) keep a fixed state
per sequence instead of a KV entry per token. ModelSpec has one sliding window, so such a model is modelled with its
linear layers as windowed layers whose window holds as many bytes as the state (conv state included): memory and
reads are exact once the context is longer than that window and undercounted below it; the result's notes say so.

Every refusal is a ModelConfigError naming the field, its value and what is supported.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.types import ModelSpec, Sourced

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are 1-60 kB (quantisation ignore lists are the long part)
MAX_DEPTH = 32  # nesting of JSON objects and arrays
NAME_PREFIX = "config:"
PLACEHOLDER_PATH = "path/to/your-model"  # what the deploy command serves when the config names no model
DIGEST_CHARS = 16  # hex characters of the SHA-256 in a parsed model's catalogue name

# Fields of architectures this parser cannot model (a refusal names them): model type -> what the field means.
UNSUPPORTED_FIELDS = {
    "hybrid_override_pattern": "Mamba / attention hybrid layers (Nemotron-H)",
    "compress_ratios": "compressed sparse attention (DeepSeek-V4)",
    "hc_mult": "hyper-connections (DeepSeek-V4)",
    "hybrid_layer_pattern": "per-layer attention shapes (MiMo-V2)",
    "o_lora_rank": "low-rank grouped output projection (DeepSeek-V4)",
    "ssm_cfg": "state-space (Mamba) layers",
}
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention", "attention")
SUPPORTED = ("decoder-only transformers: dense or MoE (routed and shared experts, first dense layers), GQA or MLA "
             "attention, sliding-window and linear-attention layers, native MTP layers")


class ModelConfigError(ValueError):
    """A config.json the planner cannot model: the message names the field, its value and what is supported."""


@dataclass(frozen=True)
class ParsedModel:
    spec: ModelSpec
    weight_dtype: str | None  # the checkpoint's weight format (quantization_config); None: unquantised or not modelled
    notes: tuple[str, ...]  # what was assumed or approximated, in plain words
    digest: str  # SHA-256 (hex) of the config bytes
    breakdown: Mapping[str, float]  # parameters per component, billions (embeddings, attention, mlp, experts ...)


def config_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_name(digest: str) -> str:
    """The catalogue name of a parsed config: `config:<first 16 hex of its SHA-256>`."""
    return NAME_PREFIX + digest[:DIGEST_CHARS]


def is_config_name(name: str) -> bool:
    return (isinstance(name, str) and name.startswith(NAME_PREFIX) and len(name) == len(NAME_PREFIX) + DIGEST_CHARS
            and all(c in "0123456789abcdef" for c in name[len(NAME_PREFIX):]))


def _err(field: str, value: Any, allowed: str) -> ModelConfigError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ModelConfigError(f"config.json field '{field}' = {shown}: expected {allowed}")


def _depth(obj: Any, limit: int) -> int:
    """Nesting depth of a JSON value, iteratively (a deep document cannot exhaust the interpreter's stack)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return deepest


def load_config(data: bytes | str | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(the config as a dict, the SHA-256 of its bytes); a dict is digested as its sorted compact JSON."""
    if isinstance(data, Mapping):
        raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        doc: Any = dict(data)
    else:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_CONFIG_BYTES:
            raise _err("(file)", f"{len(raw):,} bytes", f"a config.json of at most {MAX_CONFIG_BYTES:,} bytes")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _err("(file)", f"byte {exc.start}", "UTF-8 JSON text (a Hugging Face config.json)") from None
        except json.JSONDecodeError as exc:
            raise _err("(file)", f"line {exc.lineno}, column {exc.colno}: {exc.msg}",
                       "JSON text (a Hugging Face config.json)") from None
        except (ValueError, RecursionError) as exc:  # nested past the parser's stack; a number of 4,300+ digits
            what = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long to read"
            raise _err("(file)", what, "JSON text (a Hugging Face config.json)") from None
    if not isinstance(doc, dict):
        raise _err("(file)", type(doc).__name__, "a JSON object (a Hugging Face config.json)")
    if _depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise _err("(file)", "deeply nested", f"JSON nested at most {MAX_DEPTH} levels")
    return doc, config_digest(raw)


class _Cfg:
    """Typed reads of one config level; a multimodal wrapper's text_config wins over its top level."""

    def __init__(self, doc: dict[str, Any]):
        text = doc.get("text_config")
        self.prefix = ""
        if text is not None:
            if not isinstance(text, dict):
                raise _err("text_config", text, "a JSON object (the language model's config)")
            self.prefix = "text_config."
        self.top = doc
        self.c = {**{k: v for k, v in doc.items() if k != "text_config"}, **(text or {})}

    def where(self, key: str) -> str:
        text = self.top.get("text_config")
        return f"{self.prefix}{key}" if isinstance(text, dict) and key in text else key

    def has(self, key: str) -> bool:
        return self.c.get(key) is not None

    def int(self, key: str, default: Any = ..., *, lo: int = 1, hi: int = 10_000_000) -> int:
        v = self.c.get(key)
        if v is None:
            if default is ...:
                raise _err(key, "(missing)", f"an integer: this field is required ({SUPPORTED})")
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) \
                or not lo <= v <= hi:
            raise _err(self.where(key), v, f"an integer in [{lo}, {hi:,}]")
        return int(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.c.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise _err(self.where(key), v, "true or false")
        return v

    def str(self, key: str) -> str:
        v = self.c.get(key)
        return v if isinstance(v, str) else ""


def _safe_label(text: str) -> str:
    """A visitor's model name as plain text: letters, digits and . _ / - only (no Markdown, HTML or links)."""
    return re.sub(r"[^A-Za-z0-9._/-]", "", text)[:96]


def _quantisation(q: Any, notes: list[str]) -> tuple[str | None, str]:
    """(weight dtype, fp4 scope) a quantization_config implies; a format the planner has no place for is stated in
    the notes and planned in the format the user picks."""
    if q is None:
        return None, "linear"
    if not isinstance(q, dict):
        raise _err("quantization_config", q, "a JSON object")
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).upper()
    kept = q.get("modules_to_not_convert") or q.get("ignore") or q.get("exclude_modules") or []
    skip = " ".join(str(m) for m in kept) if isinstance(kept, list) else ""
    scope = "experts" if "attn" in skip else "linear"  # attention left unquantised: only the experts are 4-bit
    if method == "fp8" or (method in ("", "modelopt") and algo == "FP8"):
        return "fp8", "linear"
    if method == "mxfp4":
        return "mxfp4", scope
    if method == "modelopt" and algo == "NVFP4":
        return "nvfp4", scope
    if method == "compressed-tensors":
        kinds = set()
        for group in (q.get("config_groups") or {}).values():
            w = group.get("weights") if isinstance(group, dict) else None
            if isinstance(w, dict):
                kinds.add((w.get("num_bits"), str(w.get("type", "")).lower()))
        if kinds == {(8, "float")}:
            return "fp8", "linear"
        if kinds == {(4, "float")}:
            return "nvfp4", scope
        notes.append(f"quantization_config (compressed-tensors, weights {sorted(kinds)}) is not a format the planner "
                     "models (bf16, fp8, nvfp4, mxfp4): the plan uses the weight format you pick")
        return None, "linear"
    label = " ".join(x for x in (method and f"quant_method {method}", algo and f"quant_algo {algo}") if x)
    notes.append(f"quantization_config ({_safe_label(label.replace(' ', '_')) or 'no quant_method'}) is not a format "
                 "the planner models (bf16, fp8, nvfp4, mxfp4): the plan uses the weight format you pick")
    return None, "linear"


def _layer_kinds(cfg: _Cfg, layers: int) -> list[str]:
    """Each layer's attention: full, sliding or linear (layer_types, else Qwen3-Next's full_attention_interval)."""
    types = cfg.c.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise _err(cfg.where("layer_types"), types, f"a list of {layers} layer types (num_hidden_layers)")
        out = []
        for i, t in enumerate(types):
            if t not in LAYER_TYPES:
                raise _err(f"{cfg.where('layer_types')}[{i}]", t, "one of " + ", ".join(LAYER_TYPES))
            out.append({"sliding_attention": "sliding", "linear_attention": "linear"}.get(t, "full"))
        return out
    if cfg.has("full_attention_interval") and cfg.has("linear_num_value_heads"):
        every = cfg.int("full_attention_interval", hi=layers)
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
    chunk, no_rope = cfg.c.get("attention_chunk_size"), cfg.c.get("no_rope_layers")
    if chunk and no_rope is None and cfg.str("model_type").startswith("llama4"):
        # transformers' Llama4TextConfig default: every no_rope_layer_interval-th layer is NoPE (global)
        every = cfg.int("no_rope_layer_interval", 4, hi=layers)
        no_rope = [int((i + 1) % every != 0) for i in range(layers)]
    if chunk and isinstance(no_rope, list) and len(no_rope) == layers:
        # Llama 4: RoPE layers attend within chunks of attention_chunk_size, the NoPE layers (0) see everything
        return ["sliding" if flag else "full" for flag in no_rope]
    window = cfg.c.get("sliding_window")
    if window and cfg.bool("use_sliding_window", True) and cfg.str("model_type") in ("mistral", "mixtral"):
        return ["sliding"] * layers
    return ["full"] * layers


def _moe_layers(cfg: _Cfg, layers: int) -> list[bool]:
    """Which layers hold routed experts (first_k_dense_replace, mlp_only_layers, decoder_sparse_step,
    interleave_moe_layer_step, moe_layer_freq)."""
    first_dense = cfg.int("first_k_dense_replace", 0, lo=0, hi=layers)
    step = cfg.int("decoder_sparse_step", 1, hi=layers) if cfg.has("decoder_sparse_step") else \
        cfg.int("interleave_moe_layer_step", 1, hi=layers)
    freq = cfg.c.get("moe_layer_freq", 1)
    if not isinstance(freq, int) or isinstance(freq, bool) or not 1 <= freq <= layers:
        raise _err(cfg.where("moe_layer_freq"), freq, "an integer in [1, num_hidden_layers] (every n-th layer is MoE)")
    dense_list = cfg.c.get("mlp_only_layers") or []
    if not isinstance(dense_list, list) or not all(isinstance(i, int) for i in dense_list):
        raise _err(cfg.where("mlp_only_layers"), dense_list, "a list of layer indices")
    out = []
    for i in range(layers):
        moe = i >= first_dense and (i + 1) % step == 0 and (i - first_dense) % freq == 0 and i not in dense_list
        out.append(moe)
    return out


def parse_model_config(data: bytes | str | Mapping[str, Any], *, today: str | None = None) -> ParsedModel:
    """A Hugging Face config.json (bytes, text or a parsed dict) -> ParsedModel whose spec is named
    `config:<digest>`. Raises ModelConfigError for anything it cannot model."""
    doc, digest = load_config(data)
    cfg = _Cfg(doc)
    notes: list[str] = []
    for key, what in UNSUPPORTED_FIELDS.items():
        if cfg.has(key):
            raise _err(cfg.where(key), cfg.c[key], f"no '{key}': {what} is not modelled; supported: {SUPPORTED}")
    if cfg.bool("is_encoder_decoder", False):
        raise _err("is_encoder_decoder", True,
                   f"false: encoder-decoder models are not modelled; supported: {SUPPORTED}")
    if cfg.prefix:
        notes.append("multimodal wrapper: the language model (text_config) is planned; the vision tower is not counted")

    h = cfg.int("hidden_size", hi=1_000_000)
    layers = cfg.int("num_hidden_layers", hi=10_000)
    heads = cfg.int("num_attention_heads", hi=100_000)
    kv_heads = cfg.int("num_key_value_heads", heads, hi=heads)
    vocab = cfg.int("vocab_size", hi=100_000_000)
    tied_raw = cfg.c.get("tie_word_embeddings")
    tied = cfg.bool("tie_word_embeddings", False)
    if tied_raw is None:
        notes.append("tie_word_embeddings absent: untied embeddings assumed (the decoder configs' default)")
    max_ctx = cfg.int("max_position_embeddings", 4096, hi=1_000_000_000)
    mla = cfg.has("kv_lora_rank")
    kinds = _layer_kinds(cfg, layers)
    n_linear, n_sliding = kinds.count("linear"), kinds.count("sliding")
    if mla and (n_linear or n_sliding):
        raise _err(cfg.where("layer_types"), "sliding or linear layers with MLA", f"one kind of attention; {SUPPORTED}")
    if n_linear and n_sliding:
        raise _err(cfg.where("layer_types"), "both sliding_attention and linear_attention",
                   "one kind of windowed layer per model (the planner holds one window)")

    # ---- attention ----
    q_lora = cfg.int("q_lora_rank", 0, lo=0, hi=1_000_000) if mla else 0
    if mla:
        r = cfg.int("kv_lora_rank", hi=1_000_000)
        rope = cfg.int("qk_rope_head_dim", hi=100_000)
        nope = cfg.int("qk_nope_head_dim", hi=100_000)
        v_dim = cfg.int("v_head_dim", hi=100_000)
        head_dim = nope + rope
        kv_heads = heads  # each head expands its own k and v from the latent (models.yaml: DeepSeek-V3 128 / 128)
        q_params = (h * q_lora + q_lora * heads * head_dim) if q_lora else h * heads * head_dim
        attn = q_params + h * (r + rope) + r * heads * (nope + v_dim) + heads * v_dim * h
        kv_el = r + rope
        if cfg.has("index_topk"):  # DeepSeek sparse attention (V3.2, GLM-5): a lightning indexer per layer
            ih, idim = cfg.int("index_n_heads", hi=100_000), cfg.int("index_head_dim", hi=100_000)
            attn += (q_lora or h) * ih * idim + h * idim + h * ih
            kv_el += (idim + 1) // 2  # its FP8 key cache (index_head_dim bytes) in BF16-element units
            notes.append(f"sparse attention (index_topk {cfg.int('index_topk')}): the indexer's FP8 key cache is "
                         "counted; attention reads are planned over the whole context (an upper bound on long "
                         "contexts)")
        full_attn = linear_attn = attn
    else:
        head_dim = cfg.int("head_dim", 0, lo=0, hi=100_000) or (h // heads)
        if not cfg.has("head_dim") and h % heads:
            raise _err("hidden_size", h, f"a multiple of num_attention_heads ({heads}) when head_dim is absent")
        gate = 2 if cfg.bool("attn_output_gate", False) else 1
        full_attn = h * heads * head_dim * gate + 2 * h * kv_heads * head_dim + heads * head_dim * h
        kv_el = 2 * kv_heads * head_dim
        linear_attn = 0
        if n_linear:
            nk, nv = cfg.int("linear_num_key_heads", hi=100_000), cfg.int("linear_num_value_heads", hi=100_000)
            dk, dv = cfg.int("linear_key_head_dim", hi=100_000), cfg.int("linear_value_head_dim", hi=100_000)
            kernel = cfg.int("linear_conv_kernel_dim", 4, hi=1_000)
            key_dim, value_dim = nk * dk, nv * dv
            conv_ch = 2 * key_dim + value_dim
            linear_attn = h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + conv_ch * kernel + value_dim * h
            state = nv * dk * dv * (2 if cfg.str("mamba_ssm_dtype") in ("float32", "fp32") else 1) \
                + (kernel - 1) * conv_ch
            window = math.ceil(state / kv_el)
            notes.append(f"{n_linear} of {layers} layers are linear attention: a fixed state of {state:,} BF16-element "
                         f"equivalents per layer per sequence, planned as a window of {window:,} tokens of KV (exact "
                         "once the context is longer; undercounted below it)")
    attention = sum(linear_attn if k == "linear" else full_attn for k in kinds)

    # ---- MLP and experts ----
    experts = 0
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if cfg.has(key):
            experts = cfg.int(key, lo=0, hi=1_000_000)
            break
    inter = cfg.int("intermediate_size", 0, lo=0, hi=10_000_000)
    mlp_dense = experts_all = shared = router = 0
    top_k = moe_n = 0
    expert_layer = 0
    if experts:
        top_k = cfg.int("num_experts_per_tok", None, hi=experts) or cfg.int("experts_per_token", hi=experts)
        moe_inter = cfg.int("moe_intermediate_size", 0, lo=0, hi=10_000_000) or inter
        if not moe_inter:
            raise _err("moe_intermediate_size", "(missing)", "an integer (the routed experts' width)")
        is_moe = _moe_layers(cfg, layers)
        moe_n = sum(is_moe)
        dense_inter = cfg.int("intermediate_size_mlp", 0, lo=0) or inter
        if moe_n < layers and not dense_inter:
            raise _err("intermediate_size", "(missing)", "an integer (the dense layers' MLP width)")
        mlp_dense = (layers - moe_n) * 3 * h * dense_inter
        expert_layer = 3 * h * moe_inter
        experts_all = moe_n * experts * expert_layer
        router = moe_n * h * experts
        if cfg.has("shared_expert_intermediate_size"):
            shared_w = cfg.int("shared_expert_intermediate_size", lo=0)
        elif cfg.has("n_shared_experts"):
            shared_w = cfg.int("n_shared_experts", lo=0, hi=1_000) * moe_inter
        elif cfg.has("shared_intermediate_size"):
            shared_w = cfg.int("shared_intermediate_size", lo=0)
        elif cfg.str("model_type").startswith("llama4"):
            shared_w = inter  # Llama 4: one shared expert as wide as a routed one
        else:
            shared_w = 0
        shared = moe_n * 3 * h * shared_w
    else:
        if not inter:
            raise _err("intermediate_size", "(missing)", "an integer (the MLP width)")
        mlp_dense = layers * 3 * h * inter
    emb = vocab * h * (1 if tied else 2)
    total = emb + attention + mlp_dense + experts_all + shared + router
    active = emb + attention + mlp_dense + shared + router + moe_n * top_k * expert_layer

    # ---- native MTP, quantisation, naming ----
    mtp = cfg.int("num_nextn_predict_layers", 0, lo=0, hi=100) or cfg.int("mtp_num_hidden_layers", 0, lo=0, hi=100) \
        or cfg.int("num_mtp_modules", 0, lo=0, hi=100) * cfg.bool("use_mtp", True)
    if mtp:
        notes.append(f"{mtp} native MTP module(s): not counted in the parameters (as DeepSeek-V3's 671B), drafted by "
                     "the 'mtp' method")
    dtype, scope = _quantisation(cfg.c.get("quantization_config"), notes)
    hf_id = _safe_label(str(doc.get("_name_or_path") or ""))
    if not hf_id:
        notes.append(f"no _name_or_path: the deploy command serves '{PLACEHOLDER_PATH}' (replace it with yours)")
    window_tokens = 0
    if n_sliding:
        key = "sliding_window" if cfg.has("sliding_window") else "attention_chunk_size"
        window_tokens = cfg.int(key, hi=100_000_000)
    elif n_linear:
        window_tokens = window
    arch = doc.get("architectures")
    arch_name = _safe_label(arch[0]) if isinstance(arch, list) and arch and isinstance(arch[0], str) else ""
    short = digest[:DIGEST_CHARS]
    label = f"{hf_id or arch_name or 'Your model'} (config {short[:8]}, {total / 1e9:,.1f}B"
    label += f" MoE, {active / 1e9:,.1f}B active)" if experts else ")"
    when = today or dt.date.today().isoformat()
    spec = ModelSpec(
        name=model_name(digest), label=label, layers=layers, hidden_size=h, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, total_params_b=total / 1e9, active_params_b=active / 1e9,
        experts=experts, experts_per_token=top_k, expert_params_b=moe_n * expert_layer / 1e9,
        kv_elements_per_token_per_layer=kv_el, native_methods=("mtp",) if mtp else (), draft_model=None,
        max_context_tokens=max_ctx, hf_id=hf_id or PLACEHOLDER_PATH,
        source=Sourced(f"config.json sha256 {short} ({hf_id or arch_name or 'uploaded'}), parsed by "
                       "profiles/model_config.py" + ("; " + "; ".join(notes) if notes else ""), when),
        tied_embeddings=tied, attention="mla" if mla else "gqa", mla_kv_lora_rank=cfg.int("kv_lora_rank") if mla else 0,
        mla_qk_rope_head_dim=cfg.int("qk_rope_head_dim") if mla else 0, sliding_window_tokens=window_tokens,
        sliding_window_layers=n_sliding or n_linear, moe_layers=moe_n if experts else 0, fp4_scope=scope,
    )
    breakdown = {"embeddings": emb / 1e9, "attention": attention / 1e9, "dense_mlp": mlp_dense / 1e9,
                 "routed_experts": experts_all / 1e9, "shared_experts": shared / 1e9, "routers": router / 1e9}
    return ParsedModel(spec=spec, weight_dtype=dtype, notes=tuple(notes), digest=digest, breakdown=breakdown)
