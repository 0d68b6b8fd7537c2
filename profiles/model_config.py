"""A Hugging Face `config.json` -> the planner's ModelSpec (bring your own model).

The counts follow the conventions of profiles/data/models.yaml:
- total_params_b: every weight of the served model, both embedding tables when untied; native MTP modules are not
  counted (DeepSeek-V3's 671B excludes its 14B MTP module); vision towers of multimodal wrappers are not counted.
- active_params_b: what one token multiplies: attention, dense MLPs, shared experts, routers, top-k routed experts
  and both embedding tables when untied (planner.physics.networks.target_net drops the gathered input table itself).
- expert_params_b: one routed expert summed over the MoE layers; kv_elements_per_token_per_layer: 2 x kv_heads x
  head_dim (GQA) or the MLA latent kv_lora_rank + qk_rope_head_dim that vLLM caches.
Parameters are counted by hand: embeddings vocab x hidden; attention q, k, v, o (MLA: q_a, q_b, kv_a, kv_b, o;
DeepSeek sparse attention adds its indexer); gated MLPs 3 x hidden x intermediate (Nemotron's relu2: 2 x); routers
hidden x experts; Mamba-2 and Gated DeltaNet mixers as profiles/model_layers.py counts them; norms,
biases and rotary tables are left out (under 0.1 % of any model here).

The stack is read layer by layer (profiles/model_layers.py): ModelSpec.layer_groups holds each kind of layer with
its count, and every aggregate above is a sum over them. Layers without a KV cache (linear attention, Mamba-2, no
attention) keep a fixed state per sequence (ModelSpec.state_bytes_per_sequence, charged in memory as it is); the
roofline has one sliding window, so in the step's reads those layers stand in as windowed layers whose windows
together hold as many bytes as their state: exact once the context is longer than that window, undercounted below.

Every refusal is a ModelConfigError naming the field, its value and what is supported.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from planner.types import AttentionBlock, LayerGroup, ModelSpec, Sourced
from profiles.config_fields import SUPPORTED, Cfg, ModelConfigError, err
from profiles.model_layers import (
    NO_MLP,
    dense_mlp,
    gated_deltanet_block,
    gqa_block,
    group_layers,
    hybrid_pattern_layers,
    moe_mlp,
    nas_layers,
    stand_in_window,
)

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are 1-60 kB (quantisation ignore lists are the long part)
MAX_DEPTH = 32  # nesting of JSON objects and arrays
NAME_PREFIX = "config:"
PLACEHOLDER_PATH = "path/to/your-model"  # what the deploy command serves when the config names no model
DIGEST_CHARS = 16  # hex characters of the SHA-256 in a parsed model's catalogue name

# Fields of architectures this parser cannot model (a refusal names them): model type -> what the field means.
UNSUPPORTED_FIELDS = {
    "moe_latent_size": "latent MoE: experts on a down-projected hidden state (Nemotron-3 Super)",
    "compress_ratios": "compressed sparse attention (DeepSeek-V4)",
    "hc_mult": "hyper-connections (DeepSeek-V4)",
    "hybrid_layer_pattern": "per-layer attention shapes (MiMo-V2)",
    "o_lora_rank": "low-rank grouped output projection (DeepSeek-V4)",
    "ssm_cfg": "state-space (Mamba) layers",
}
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention", "attention")


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
            raise err("(file)", f"{len(raw):,} bytes", f"a config.json of at most {MAX_CONFIG_BYTES:,} bytes")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise err("(file)", f"byte {exc.start}", "UTF-8 JSON text (a Hugging Face config.json)") from None
        except json.JSONDecodeError as exc:
            raise err("(file)", f"line {exc.lineno}, column {exc.colno}: {exc.msg}",
                       "JSON text (a Hugging Face config.json)") from None
        except (ValueError, RecursionError) as exc:  # nested past the parser's stack; a number of 4,300+ digits
            what = "nested too deeply" if isinstance(exc, RecursionError) else "a number too long to read"
            raise err("(file)", what, "JSON text (a Hugging Face config.json)") from None
    if not isinstance(doc, dict):
        raise err("(file)", type(doc).__name__, "a JSON object (a Hugging Face config.json)")
    if _depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise err("(file)", "deeply nested", f"JSON nested at most {MAX_DEPTH} levels")
    return doc, config_digest(raw)


def _safe_label(text: str) -> str:
    """A visitor's model name as plain text: letters, digits and . _ / - only (no Markdown, HTML or links)."""
    return re.sub(r"[^A-Za-z0-9._/-]", "", text)[:96]


def _quantisation(q: Any, notes: list[str]) -> tuple[str | None, str]:
    """(weight dtype, fp4 scope) a quantization_config implies; a format the planner has no place for is stated in
    the notes and planned in the format the user picks."""
    if q is None:
        return None, "linear"
    if not isinstance(q, dict):
        raise err("quantization_config", q, "a JSON object")
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
        groups = q.get("config_groups") or {}
        if not isinstance(groups, dict):
            raise err("quantization_config.config_groups", groups, "a JSON object of quantisation groups")
        for name, group in groups.items():
            w = group.get("weights") if isinstance(group, dict) else None
            if isinstance(w, dict):
                bits = w.get("num_bits")
                if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int)):
                    raise err(f"quantization_config.config_groups.{_safe_label(str(name))}.weights.num_bits", bits,
                               "an integer number of bits (4, 8)")
                kinds.add((bits, str(w.get("type", "")).lower()))
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


def _layer_kinds(cfg: Cfg, layers: int) -> list[str]:
    """Each layer's attention: full, sliding or linear (layer_types, else Qwen3-Next's full_attention_interval)."""
    types = cfg.c.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise err(cfg.where("layer_types"), types, f"a list of {layers} layer types (num_hidden_layers)")
        out = []
        for i, t in enumerate(types):
            if t not in LAYER_TYPES:
                raise err(f"{cfg.where('layer_types')}[{i}]", t, "one of " + ", ".join(LAYER_TYPES))
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


def _moe_layers(cfg: Cfg, layers: int) -> list[bool]:
    """Which layers hold routed experts (first_k_dense_replace, mlp_only_layers, decoder_sparse_step,
    interleave_moe_layer_step, moe_layer_freq: every n-th layer, or a list of 0 / 1 per layer as MiniMax-M3's).
    Every list is at most num_hidden_layers long and read once (a set), so a parse stays linear in the layers."""
    first_dense = cfg.int("first_k_dense_replace", 0, lo=0, hi=layers)
    step = cfg.int("decoder_sparse_step", 1, hi=layers) if cfg.has("decoder_sparse_step") else \
        cfg.int("interleave_moe_layer_step", 1, hi=layers)
    freq = cfg.c.get("moe_layer_freq", 1)
    flags: list[int] | None = None
    if isinstance(freq, list):
        if len(freq) != layers or not all(f in (0, 1) and not isinstance(f, float) for f in freq):
            raise err(cfg.where("moe_layer_freq"), freq, f"a list of {layers} entries (num_hidden_layers), each 0 "
                       "(dense) or 1 (MoE), or an integer n (every n-th layer is MoE)")
        flags, freq = [int(f) for f in freq], 1
    elif not isinstance(freq, int) or isinstance(freq, bool) or not 1 <= freq <= layers:
        raise err(cfg.where("moe_layer_freq"), freq, "an integer in [1, num_hidden_layers] (every n-th layer is MoE) "
                   "or a list of 0 / 1 per layer")
    dense_list = cfg.c.get("mlp_only_layers") or []
    if not isinstance(dense_list, list) or len(dense_list) > layers \
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense_list):
        raise err(cfg.where("mlp_only_layers"), dense_list,
                   f"a list of at most {layers} layer indices (num_hidden_layers)")
    dense = set(dense_list)
    return [i >= first_dense and (i + 1) % step == 0 and (i - first_dense) % freq == 0
            and (flags is None or flags[i] == 1) and i not in dense for i in range(layers)]


def _shared_width(cfg: Cfg, moe_inter: int, inter: int) -> int:
    """The shared experts' total intermediate width."""
    if cfg.has("shared_expert_intermediate_size"):
        return cfg.int("shared_expert_intermediate_size", lo=0)
    if cfg.has("moe_shared_expert_intermediate_size"):  # Nemotron-H
        return cfg.int("moe_shared_expert_intermediate_size", lo=0)
    if cfg.has("n_shared_experts"):
        return cfg.int("n_shared_experts", lo=0, hi=1_000) * moe_inter
    if cfg.has("shared_intermediate_size"):
        return cfg.int("shared_intermediate_size", lo=0)
    if cfg.str("model_type").startswith("llama4"):
        return inter  # Llama 4: one shared expert as wide as a routed one
    return 0


def name_from_file(file_name: str) -> str:
    """The model's name an uploaded file's name gives ("zai-org--GLM-4.7-Flash.json" -> "zai-org/GLM-4.7-Flash", the
    hub's download naming; "GLM-4.7-Flash-config.json" -> "GLM-4.7-Flash"), as plain text; "" for a bare
    "config.json"."""
    stem = re.sub(r"\.json$", "", str(file_name).rsplit("/", 1)[-1], flags=re.IGNORECASE)
    stem = re.sub(r"(^|[-_.])config$|^config([-_.]|$)", "", stem, flags=re.IGNORECASE)
    return _safe_label(stem.replace("--", "/"))


def parse_model_config(data: bytes | str | Mapping[str, Any], *, today: str | None = None,
                       file_name: str = "") -> ParsedModel:
    """A Hugging Face config.json (bytes, text or a parsed dict) -> ParsedModel whose spec is named
    `config:<digest>`; its label names the model by `_name_or_path`, else by the uploaded `file_name`
    (name_from_file), else by its architecture class. Raises ModelConfigError for anything it cannot model, and for
    any slip of the reader itself (a value of a type no check above foresaw), so a caller catches one error."""
    try:
        return _parse(data, today=today, file_name=file_name)
    except ModelConfigError:
        raise
    except (ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError) as exc:
        raise err("(file)", f"{type(exc).__name__}: {exc}", f"a config.json this reader can model; {SUPPORTED}") \
            from None


def _parse(data: bytes | str | Mapping[str, Any], *, today: str | None, file_name: str = "") -> ParsedModel:
    doc, digest = load_config(data)
    cfg = Cfg(doc)
    notes: list[str] = []
    for key, what in UNSUPPORTED_FIELDS.items():
        if cfg.has(key):
            raise err(cfg.where(key), cfg.c[key], f"no '{key}': {what} is not modelled; supported: {SUPPORTED}")
    if cfg.bool("is_encoder_decoder", False):
        raise err("is_encoder_decoder", True,
                   f"false: encoder-decoder models are not modelled; supported: {SUPPORTED}")
    sparse = cfg.c.get("sparse_attention_config")
    if isinstance(sparse, dict) and sparse.get("use_sparse_attention"):
        notes.append("sparse_attention_config (block-sparse attention, MiniMax-M3): its indexer's weights and key "
                     "cache are not counted and attention reads are planned over the whole context")
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
    hybrid, nas = cfg.has("hybrid_override_pattern"), cfg.has("block_configs")
    if hybrid and nas:
        raise err("block_configs", "(with hybrid_override_pattern)", "one per-layer layout, not both")
    kinds = ["full"] * layers if hybrid or nas else _layer_kinds(cfg, layers)
    n_linear, n_sliding = kinds.count("linear"), kinds.count("sliding")
    if mla and (n_linear or n_sliding or hybrid or nas):
        raise err(cfg.where("layer_types"), "sliding, linear or per-layer layers with MLA",
                   f"one kind of attention; {SUPPORTED}")
    if n_linear and n_sliding:
        raise err(cfg.where("layer_types"), "both sliding_attention and linear_attention",
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
        full = AttentionBlock("mla", attn, kv_elements_per_token=kv_el, heads=heads, kv_heads=heads,
                              head_dim=head_dim)
    else:
        # head_dim (attention_head_dim: Nemotron-H 56B), else hidden / heads; 0 would be a KV cache of 0 bytes
        key = "head_dim" if cfg.has("head_dim") or not cfg.has("attention_head_dim") else "attention_head_dim"
        head_dim = cfg.int(key, 0, hi=100_000) or h // heads
        if not cfg.has(key) and h % heads:
            raise err("hidden_size", h, f"a multiple of num_attention_heads ({heads}) when head_dim is absent")
        gate = 2 if cfg.bool("attn_output_gate", False) else 1
        full = gqa_block(h=h, heads=heads, kv_heads=kv_heads, head_dim=head_dim, gate=gate)
    window = 0
    if n_sliding:
        key = "sliding_window" if cfg.has("sliding_window") else "attention_chunk_size"
        window = cfg.int(key, hi=100_000_000)
    by_kind = {"full": full, "sliding": replace(full, kind="sliding", window_tokens=window),
               "linear": gated_deltanet_block(cfg, h) if n_linear else full}

    # ---- MLP and experts ----
    experts = 0
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if cfg.has(key):
            experts = cfg.int(key, lo=0, hi=1_000_000)
            break
    inter = cfg.int("intermediate_size", 0, lo=0, hi=10_000_000)
    gated = (cfg.str("mlp_hidden_act") or cfg.str("hidden_act")) != "relu2"  # Nemotron: relu2, two matrices
    moe = None
    if experts:
        top_k = cfg.int("num_experts_per_tok", None, hi=experts) or cfg.int("experts_per_token", hi=experts)
        moe_inter = cfg.int("moe_intermediate_size", 0, lo=0, hi=10_000_000) or inter
        if not moe_inter:
            raise err("moe_intermediate_size", "(missing)", "an integer (the routed experts' width)")
        moe = moe_mlp(h=h, experts=experts, top_k=top_k, width=moe_inter,
                      shared_width=_shared_width(cfg, moe_inter, inter), gated=gated)
    dense_inter = cfg.int("intermediate_size_mlp", 0, lo=0) or cfg.int("dense_intermediate_size", 0, lo=0) or inter
    if hybrid:
        attn_layers, mlp_layers = hybrid_pattern_layers(cfg, h=h, layers=layers, attention=full, moe=moe,
                                                        dense_width=dense_inter)
        notes.append(f"hybrid_override_pattern: each of the {layers} layers holds one mixer (Mamba-2, attention, "
                     "MLP or MoE); the step time still counts each as a whole decoder layer (two all-reduces under "
                     "tensor parallel, one layer's fixed overheads), an overestimate of those terms")
    elif nas:
        attn_layers, mlp_layers = nas_layers(cfg, h=h, heads=heads, head_dim=head_dim, layers=layers)
    else:
        attn_layers = [by_kind[k] for k in kinds]
        is_moe = _moe_layers(cfg, layers) if moe else [False] * layers
        if not all(is_moe) and not dense_inter:
            raise err("intermediate_size", "(missing)",
                       "an integer (the dense layers' MLP width)" if moe else "an integer (the MLP width)")
        dense = dense_mlp(h=h, width=dense_inter, gated=gated) if not all(is_moe) else NO_MLP
        mlp_layers = [moe if flag and moe else dense for flag in is_moe]
    groups = group_layers(attn_layers, mlp_layers)
    return _assemble(cfg, doc, digest, groups, notes, tied=tied, vocab=vocab, h=h, layers=layers, heads=heads,
                     head_dim=head_dim, max_ctx=max_ctx, mla=mla, window=window, today=today, file_name=file_name)


def _assemble(cfg: Cfg, doc: dict[str, Any], digest: str, groups: tuple[LayerGroup, ...], notes: list[str], *,
              tied: bool, vocab: int, h: int, layers: int, heads: int, head_dim: int, max_ctx: int, mla: bool,
              window: int, today: str | None, file_name: str = "") -> ParsedModel:
    """The ModelSpec's aggregates from the layer groups (sums over count x block)."""
    def total(of) -> int:
        return sum(g.count * of(g) for g in groups)

    attention = total(lambda g: g.attention.params)
    mlp_dense = total(lambda g: g.mlp.params if g.mlp.kind != "moe" else 0)
    experts_all = total(lambda g: g.mlp.experts * g.mlp.expert_params)
    shared, router = total(lambda g: g.mlp.shared_params), total(lambda g: g.mlp.router_params)
    expert_layer_sum = total(lambda g: g.mlp.expert_params)
    moe_n = total(lambda g: g.mlp.kind == "moe")
    moe_groups = [g.mlp for g in groups if g.mlp.kind == "moe"]
    experts = moe_groups[0].experts if moe_groups else 0
    top_k = moe_groups[0].experts_per_token if moe_groups else 0
    emb = vocab * h * (1 if tied else 2)
    total_params = emb + attention + mlp_dense + experts_all + shared + router
    active = emb + total(lambda g: g.attention.params + g.mlp.active_params)

    kv_widths = {(g.attention.kv_elements_per_token, g.attention.kv_heads) for g in groups
                 if g.attention.kv_elements_per_token}
    if len(kv_widths) != 1:
        raise err(cfg.where("block_configs"), f"{len(kv_widths)} KV cache widths across attention layers",
                   "one KV width (the same KV heads in every attention layer)")
    (kv_el, kv_heads), = kv_widths
    n_sliding = total(lambda g: g.attention.kind == "sliding")
    n_state, state_bytes, stand_in = stand_in_window(groups, kv_el)
    if n_sliding and n_state:
        raise err(cfg.where("layer_types"), "sliding-window layers and layers without a KV cache",
                   "one kind of windowed layer per model (the planner holds one window)")
    described = {"linear": "linear attention (Gated DeltaNet)", "mamba2": "Mamba-2",
                 "linear_replacement": "a linear layer in place of attention", "none": "no attention"}
    for kind, what in described.items():
        n = total(lambda g, kind=kind: g.attention.kind == kind)
        if n:
            per = next(g.attention.state_bytes_per_sequence for g in groups if g.attention.kind == kind)
            notes.append(f"{n} of {layers} layers are {what}: " + (f"a fixed state of {per:,} bytes per layer per "
                         "sequence, charged in memory" if per else "no KV cache") + "; the step's reads plan these "
                         f"layers as a window of {stand_in:,} token{'s' * (stand_in != 1)} of KV (exact once the "
                         "context is longer; undercounted below it)")

    mtp = cfg.int("num_nextn_predict_layers", 0, lo=0, hi=100) or cfg.int("mtp_num_hidden_layers", 0, lo=0, hi=100) \
        or cfg.int("num_mtp_modules", 0, lo=0, hi=100) * cfg.bool("use_mtp", True)
    if mtp:
        notes.append(f"{mtp} native MTP module(s): not counted in the parameters (as DeepSeek-V3's 671B), drafted by "
                     "the 'mtp' method")
    dtype, scope = _quantisation(cfg.c.get("quantization_config"), notes)
    hf_id = _safe_label(str(doc.get("_name_or_path") or ""))
    if not hf_id:
        notes.append(f"no _name_or_path: the deploy command serves '{PLACEHOLDER_PATH}' (replace it with yours)")
    arch = doc.get("architectures")
    arch_name = _safe_label(arch[0]) if isinstance(arch, list) and arch and isinstance(arch[0], str) else ""
    short = digest[:DIGEST_CHARS]
    name = hf_id or name_from_file(file_name) or arch_name or "Your model"
    label = f"{name} (config {short[:8]}, {total_params / 1e9:,.1f}B"
    label += f" MoE, {active / 1e9:,.1f}B active)" if experts else ")"
    when = today or dt.date.today().isoformat()
    spec = ModelSpec(
        name=model_name(digest), label=label, layers=layers, hidden_size=h, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, total_params_b=total_params / 1e9, active_params_b=active / 1e9,
        experts=experts, experts_per_token=top_k, expert_params_b=expert_layer_sum / 1e9,
        kv_elements_per_token_per_layer=kv_el, native_methods=("mtp",) if mtp else (), draft_model=None,
        max_context_tokens=max_ctx, hf_id=hf_id or PLACEHOLDER_PATH,
        source=Sourced(f"config.json sha256 {short} ({hf_id or arch_name or 'uploaded'}), parsed by "
                       "profiles/model_config.py" + ("; " + "; ".join(notes) if notes else ""), when),
        tied_embeddings=tied, attention="mla" if mla else "gqa", mla_kv_lora_rank=cfg.int("kv_lora_rank") if mla else 0,
        mla_qk_rope_head_dim=cfg.int("qk_rope_head_dim") if mla else 0,
        sliding_window_tokens=window if n_sliding else stand_in, sliding_window_layers=n_sliding or n_state,
        moe_layers=moe_n if experts else 0, fp4_scope=scope, layer_groups=groups,
        state_bytes_per_sequence=float(state_bytes), state_window_layers=n_state,
    )
    breakdown = {"embeddings": emb / 1e9, "attention": attention / 1e9, "dense_mlp": mlp_dense / 1e9,
                 "routed_experts": experts_all / 1e9, "shared_experts": shared / 1e9, "routers": router / 1e9}
    return ParsedModel(spec=spec, weight_dtype=dtype, notes=tuple(notes), digest=digest, breakdown=breakdown)
