"""The vLLM configuration to deploy for a method: `vllm serve MODEL --speculative-config '{...}'`.

Keys follow vLLM's SpeculativeConfig (vllm/config/speculative.py, vLLM 0.32): method,
num_speculative_tokens, model (draft model or head path), prompt_lookup_max / prompt_lookup_min (n-gram),
parallel_drafting (P-EAGLE, vLLM >= 0.16.0: "all speculative tokens are generated in parallel ... requires the
speculative model be trained to support parallel drafting"), num_speculative_tokens_per_batch_size (K per
batch size: inclusive (first batch, last batch, K) ranges starting at 1, vllm/v1/spec_decode/dynamic/utils.py;
K = 0 turns drafting off for those batch sizes). vLLM has no token trees any more (`speculative_token_tree` and
tree attention were removed): a tree deploys on SGLang (its flags), vLLM drafts a chain.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from planner.types import Method, ModelSpec

HEAD_PLACEHOLDER = "<path-or-hub-id-of-your-{label}-head>"


def speculative_config(method: Method, model: ModelSpec, k: int, *, draft_model: ModelSpec | None = None,
                       head_path: str | None = None) -> dict[str, Any]:
    if method.vllm_method is None:
        raise ValueError(f"method={method.name!r} has no vLLM speculative method")
    cfg: dict[str, Any] = {"method": method.vllm_method, "num_speculative_tokens": int(k)}
    if method.vllm_method == "suffix":
        pass  # suffix decoding: its suffix_decoding_* defaults (tree depth 24, 10000 cached requests)
    elif method.drafting in ("ngram", "ngram_gpu"):
        cfg.update(prompt_lookup_max=4, prompt_lookup_min=2)
    elif method.drafting == "draft_model":
        if draft_model is None:
            raise ValueError(f"model={model.name!r} has no draft model in the profiles")
        cfg["model"] = draft_model.hf_id or draft_model.name
    elif method.drafting == "native_module":
        pass  # vLLM loads the MTP module from the target checkpoint
    elif method.vllm_method == "dspark" and "dspark" in model.native_methods and head_path is None:
        pass  # DeepSeek-V4 ships its DSpark stages in the checkpoint: vLLM loads them from the target
    else:
        # DFlash / DSpark: vLLM sets parallel_drafting itself for these methods (SpeculativeConfig.__post_init__)
        cfg["model"] = head_path or HEAD_PLACEHOLDER.format(label=method.label)
        if method.drafting == "parallel_head" and method.vllm_method == "eagle3":
            cfg["parallel_drafting"] = True
    return cfg


def k_schedule(k_by_batch: Sequence[tuple[int, int]], *, max_batch: int) -> list[tuple[int, int, int]]:
    """vLLM's num_speculative_tokens_per_batch_size from (batch, best K) points (0 = no drafting pays): each
    point's K holds from its batch up to the next point's batch - 1, the last up to `max_batch`; equal
    neighbours merge. The first range starts at batch 1 (vLLM refuses a schedule that does not)."""
    pts = sorted((int(b), int(k)) for b, k in k_by_batch if 1 <= int(b) <= max_batch)
    if not pts:
        raise ValueError(f"k_by_batch={list(k_by_batch)} not allowed: needs a point with 1 <= batch <= {max_batch}")
    if any(k < 0 for _, k in pts):
        raise ValueError(f"k_by_batch={pts} not allowed: every K must be >= 0")
    pts[0] = (1, pts[0][1])
    out: list[tuple[int, int, int]] = []
    for i, (b, k) in enumerate(pts):
        end = pts[i + 1][0] - 1 if i + 1 < len(pts) else int(max_batch)
        if end < b:
            continue
        if out and out[-1][2] == k:
            out[-1] = (out[-1][0], end, k)
        else:
            out.append((b, end, k))
    return out


def vllm_deployment(method: Method, model: ModelSpec, k: int, *, tp: int = 1, attention_dp: bool = False,
                    dtype: str = "bf16",
                    max_num_seqs: int | None = None, draft_model: ModelSpec | None = None,
                    head_path: str | None = None, tree_shape=None, kv_dtype: str = "bf16",
                    k_per_batch: Sequence[tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """The `vllm serve` command for a method, its speculative config and what the operator must fill in.

    The one place a deployment command is built (the Plan, Report and CLI all show this). With a token tree
    (planner.acceptance.trees.TreeShape): SGLang's three flags (`sglang_flags`); vLLM drafts a chain of the tree's depth
    (it has no token trees). `k_per_batch` (`k_schedule`): K per batch size for vLLM, num_speculative_tokens
    then being its largest K. attention_dp: the tp GPUs run attention data parallel with expert-parallel MoE
    (`--data-parallel-size tp --enable-expert-parallel`); `--max-num-seqs` is then per data-parallel rank."""
    target = model.hf_id or model.name
    head = head_path or f"<FILL IN: path or HF id of your {method.label} head for {target}>"
    notes = []
    if tree_shape is not None and not tree_shape.is_chain:
        notes.append(f"vLLM has no token trees (speculative_token_tree was removed): this command drafts a chain of "
                     f"K={tree_shape.depth}; the tree's figures ({tree_shape.draft_nodes} draft nodes) hold on SGLang "
                     "(its flags below)")
        k = tree_shape.depth
    schedule = [tuple(int(x) for x in r) for r in k_per_batch] if k_per_batch else None
    if schedule and len({r[2] for r in schedule}) > 1:
        k = max(r[2] for r in schedule)
    cfg = speculative_config(method, model, k, draft_model=draft_model, head_path=head)
    if schedule and len({r[2] for r in schedule}) > 1:
        cfg["num_speculative_tokens_per_batch_size"] = [list(r) for r in schedule]
        notes.append("K per batch size (num_speculative_tokens_per_batch_size, vLLM's dynamic speculative decoding): "
                     + ", ".join(f"batch {a}-{b}: K={kk}" for a, b, kk in schedule)
                     + "; thresholds where the CPM curves of two K's cross, none costing more than 5 % of a "
                     "replica's throughput at its boundary (planner model: check them against your own load test)")
    sglang_flags = None
    if tree_shape is not None:
        try:
            sglang_flags = tree_shape.to_sglang_flags()
        except ValueError:
            sglang_flags = tree_shape.as_sglang().to_sglang_flags()
            notes.append("SGLang takes no explicit node list: its flags give the nearest dynamic tree")
    if method.drafting == "draft_model" and draft_model is not None:
        notes.append(f"draft model: {draft_model.label} (same tokenizer as {model.label})")
    elif method.drafting in ("sequential_head", "parallel_head", "block_parallel") and "model" in cfg \
            and head_path is None:
        notes.append(f"fill in 'model' with the {method.label} head trained for {target} (a local path or a Hugging "
                     f"Face id); {method.setup_note}")
        if cfg.get("parallel_drafting"):
            notes.append("P-EAGLE: parallel_drafting=true (vLLM >= 0.16.0) needs a head trained for parallel "
                         "drafting")
    elif method.drafting == "native_module":
        notes.append(f"the MTP module ships inside {target}; nothing to fill in")
    notes += _method_notes(method)
    parts = ["vllm", "serve", target]
    if attention_dp and tp > 1:
        parts += ["--data-parallel-size", str(int(tp)), "--enable-expert-parallel"]
        notes.append(f"data-parallel attention over {int(tp)} GPUs with expert-parallel MoE: each GPU schedules its "
                     "own sequences (--max-num-seqs is per GPU)")
        if max_num_seqs:
            max_num_seqs = -(-int(max_num_seqs) // int(tp))
    elif tp > 1:
        parts += ["--tensor-parallel-size", str(int(tp))]
    if dtype == "fp8":
        parts += ["--quantization", "fp8"]
    elif dtype in ("nvfp4", "mxfp4"):
        notes.append(f"{dtype} weights: serve a checkpoint quantised to {dtype} (vLLM reads its quantization_config)")
    if kv_dtype == "fp8":
        parts += ["--kv-cache-dtype", "fp8"]
    if max_num_seqs:
        parts += ["--max-num-seqs", str(int(max_num_seqs))]
    parts += ["--speculative-config", json.dumps(cfg, separators=(",", ":"))]
    return {"command": " ".join(shlex.quote(p) for p in parts), "speculative_config": cfg, "notes": notes,
            "sglang_flags": sglang_flags}


# What each engine-side method needs beyond its speculative_config (the pinned vLLM 0.32.0's own rules,
# vllm/config/speculative.py; version notes from the PR that added each).
METHOD_NOTES: dict[str, str] = {
    "suffix": "suffix decoding needs Arctic Inference beside vLLM: `pip install arctic-inference==0.1.1` (vLLM refuses "
              "method 'suffix' without it); it drafts only where its suffix tree matches (vLLM PR 25784)",
    "ngram_gpu": "ngram_gpu: vLLM's n-gram lookup as a GPU kernel, for async scheduling (vLLM PR 29184)",
    "dflash": "DFlash (vLLM >= 0.19.0): K = the drafter's block size - 1 (a b16 drafter takes K up to 15); its "
              "attention backend must support non-causal attention (speculative_config attention_backend)",
    "dspark": "DSpark (vLLM PR 46995): enable_adaptive_verification=true lets vLLM size each request's verify length "
              "from the confidence head under load (not in the planner's figures, which verify K per step)",
}


def _method_notes(method: Method) -> list[str]:
    note = METHOD_NOTES.get(method.vllm_method or "")
    return [note] if note else []


def vllm_serve_command(method: Method, model: ModelSpec, k: int, *, tp: int = 1, dtype: str = "bf16",
                       draft_model: ModelSpec | None = None, head_path: str | None = None) -> str:
    return vllm_deployment(method, model, k, tp=tp, dtype=dtype, draft_model=draft_model,
                           head_path=head_path)["command"]


# SGLang's --speculative-algorithm per vLLM speculative method (sglang/srt/speculative/spec_info.py: EAGLE, EAGLE3,
# NEXTN for MTP modules, STANDALONE for a separate draft model, NGRAM for prompt lookup).
# SGLang's --speculative-algorithm per planner method (sglang 0.5.23 srt/speculative/spec_info.py SpeculativeAlgorithm:
# DFLASH, DSPARK, EAGLE, EAGLE3, STANDALONE, NGRAM; NEXTN is its alias for a model's own MTP layers). MEDUSA and suffix
# decoding are not SGLang algorithms: None, the plan deploys them on vLLM.
SGLANG_ALGORITHM = {"eagle": "EAGLE", "eagle3": "EAGLE3", "p_eagle": "EAGLE3", "mtp": "NEXTN",
                    "draft_model": "STANDALONE", "ngram": "NGRAM", "ngram_gpu": "NGRAM", "dflash": "DFLASH",
                    "dspark": "DSPARK", "medusa": None, "suffix": None}
SGLANG_VERSION = "0.5.23"  # the SGLang whose server-args parser checks these flags (requirements-sglang-args.txt)


def engine_deployment(engine: str, dep: dict[str, Any], method: Method, model: ModelSpec, k: int, *, tp: int = 1,
                      attention_dp: bool = False, max_num_seqs: int | None = None, tree_shape=None,
                      engine_version: str | None = None) -> dict[str, Any]:
    """The deployment for the plan's serving engine: vLLM's (vllm_deployment) as it is; SGLang's launch_server
    command with its speculative flags (the chain as num_steps = K, topk 1, K + 1 draft tokens, or the tree's flags);
    TensorRT-LLM: the settings only (the planner writes no TensorRT-LLM command: say what is given)."""
    out = {**dep, "engine": engine, "engine_version": engine_version}
    if engine == "vllm":
        return out
    target = model.hf_id or model.name
    cfg = dep["speculative_config"]
    if engine == "sglang":
        algo = SGLANG_ALGORITHM.get(method.name)
        if algo is None:
            notes = [f"SGLang {SGLANG_VERSION} has no {method.label} algorithm: deploy it with vLLM (the vLLM command "
                     "is kept under vllm_command)"] + list(dep["notes"])
            return {**out, "command": None, "vllm_command": dep["command"], "notes": notes}
        flags = dep.get("sglang_flags") or [f"--speculative-num-steps={int(k)}", "--speculative-eagle-topk=1",
                                             f"--speculative-num-draft-tokens={int(k) + 1}"]
        parts = ["python", "-m", "sglang.launch_server", "--model-path", target, "--tp", str(int(tp)),
                 "--speculative-algorithm", algo]
        if cfg.get("model"):
            parts += ["--speculative-draft-model-path", str(cfg["model"])]
        if attention_dp and tp > 1:
            parts += ["--enable-dp-attention", "--dp", str(int(tp)), "--enable-ep-moe"]
        if max_num_seqs:
            parts += ["--max-running-requests", str(int(max_num_seqs))]
        parts += [str(f) for f in flags]
        notes = [f"SGLang {engine_version or '(version not stated)'}: the same K and batch as the plan; the vLLM "
                 "command is kept under vllm_command"] + list(dep["notes"])
        if method.name == "p_eagle":
            notes.insert(1, "P-EAGLE's parallel drafting is a vLLM feature (parallel_drafting): SGLang drafts the "
                            "same head sequentially, at EAGLE-3's cost per draft token")
        return {**out, "command": " ".join(shlex.quote(p) for p in parts), "vllm_command": dep["command"],
                "notes": notes}
    notes = [f"TensorRT-LLM {engine_version or '(version not stated)'}: the planner gives the speculative settings, "
             f"not a command: decoding with {method.label}, max_draft_len={int(k)}"
             + (f", draft {cfg['model']}" if cfg.get("model") else "")
             + (f", max_batch_size={int(max_num_seqs)}" if max_num_seqs else "")
             + f", tensor_parallel_size={int(tp)}; put them in the LLM API's speculative_config (trtllm-serve "
             "--extra_llm_api_options); the vLLM command is kept under vllm_command"] + list(dep["notes"])
    return {**out, "command": None, "vllm_command": dep["command"], "notes": notes,
            "trtllm_settings": {"max_draft_len": int(k), "method": method.name, "draft": cfg.get("model"),
                                "max_batch_size": int(max_num_seqs) if max_num_seqs else None, "tp": int(tp)}}
