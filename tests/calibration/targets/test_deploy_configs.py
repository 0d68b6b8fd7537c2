"""The deploy output the pinned engine accepts: every method's `speculative_config` as the Plan, Report and CLI
show it (planner.physics.deploy via planner.plan), K per batch size included, built with the pinned vLLM's own
`SpeculativeConfig` (calibration.harness.engine_check, no engine start) and its dynamic-K schedule expanded by vLLM's
own lookup (vllm/v1/spec_decode/dynamic/utils.py). The head placeholders are replaced by heads built for the
CPU target (calibration.targets.heads), since the customer's own head cannot be fetched here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner import plan as P
from planner.acceptance.trees import TreeShape
from planner.physics.deploy import k_schedule, vllm_deployment
from profiles import load_catalog

HEAD_KIND = {"eagle3": "eagle3", "eagle": "eagle", "medusa": "medusa"}


# ---- pure: the schedule --------------------------------------------------------------------------------

def _check_schedule(cfg: dict, built) -> None:
    """The K-per-batch-size table, expanded by vLLM's own dynamic-K lookup: each range gives its K at both ends."""
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    sched = cfg.get("num_speculative_tokens_per_batch_size")
    if sched:
        dense = build_dynamic_sd_schedule_lookup(sched, vllm_max_batch_size=sched[-1][1],
                                                 vllm_num_speculative_tokens=built.num_speculative_tokens)
        for a, b, k in sched:
            assert dense[a] == dense[b] == k

def test_schedule_ranges_start_at_one_cover_every_batch_and_merge_equal_neighbours() -> None:
    # by hand: K=4 from 1, K=4 at 2 merges, K=3 from 4 to 7, K=0 from 8 to 15, K=2 from 16 to 40
    assert k_schedule([(1, 4), (2, 4), (4, 3), (8, 0), (16, 2)], max_batch=40) == [
        (1, 3, 4), (4, 7, 3), (8, 15, 0), (16, 40, 2)]
    # the first point's K holds from batch 1 even when the first point is later
    assert k_schedule([(4, 3), (32, 1)], max_batch=32) == [(1, 31, 3), (32, 32, 1)]


@pytest.mark.parametrize(("points", "message"), [
    ([], "needs a point with 1 <= batch <= 8"), ([(9, 2)], "needs a point with 1 <= batch <= 8"),
    ([(1, -1)], "every K must be >= 0")])
def test_schedule_errors_name_the_value(points: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        k_schedule(points, max_batch=8)


def test_a_tree_deploys_as_a_chain_on_vllm_and_says_so() -> None:
    cat = load_catalog()
    shape = TreeShape.from_sglang(3, 4, 21)
    d = vllm_deployment(cat.methods["eagle3"], cat.models["llama-3.3-70b"], 8, tp=8, tree_shape=shape)
    assert "speculative_token_tree" not in d["speculative_config"]
    assert d["speculative_config"]["num_speculative_tokens"] == shape.depth
    assert any("no token trees" in n and "SGLang" in n for n in d["notes"])
    assert d["sglang_flags"]


def test_the_plan_deploys_k_per_batch_that_falls_with_batch() -> None:
    cat = load_catalog()
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm"), cat)
    cfg = p.deploy["speculative_config"]
    sched = cfg["num_speculative_tokens_per_batch_size"]
    ks = [k for _a, _b, k in sched]
    assert sched[0][0] == 1
    assert ks == sorted(ks, reverse=True) and ks[0] > ks[-1]
    assert cfg["num_speculative_tokens"] == max(ks)
    assert any("K per batch size" in n for n in p.deploy["notes"])
    # each threshold sits where the best K changes (one batch below: the previous K) and costs <= 5 % throughput
    from planner.search.batch_sweeps import MAX_THRESHOLD_DROP, batch_sweep

    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm")
    for (_a, end, k_old), (start, _b, k_new) in zip(sched[:-2], sched[1:-1], strict=True):
        sw = batch_sweep(req, cat, p.best.method, batches=np.array([end, start], float))
        assert list(sw.best_k) == [k_old, k_new]
        thr = sw.batch / sw.tpot_ms
        assert thr[1] >= (1 - MAX_THRESHOLD_DROP) * thr[0]


# ---- the pinned vLLM -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol(model_cache: dict) -> Path:
    pytest.importorskip("vllm")
    from calibration.targets import model_assets

    return Path(model_cache[model_assets.TARGET_NAME].path)


def _local(cfg: dict[str, Any], method: str, target: Path, model_cache: dict) -> dict[str, Any]:
    """The deploy's config with its head / draft placeholder replaced by a head built for the CPU target."""
    from calibration.targets import heads

    out = dict(cfg)
    if method == "draft_model":
        out["model"] = str(model_cache["smollm2-135m-2l"].path)
    elif method in ("eagle3", "p_eagle", "eagle", "medusa"):
        out["model"] = str(heads.ensure_head(HEAD_KIND.get(method, "eagle3"), target))
    return out


@pytest.mark.parametrize("method", ["eagle3", "p_eagle", "eagle", "medusa", "draft_model", "ngram", "mtp"])
def test_every_deploy_config_builds_with_the_pinned_speculative_config(method: str, smol: Path,
                                                                         model_cache: dict) -> None:
    from calibration.harness.engine_check import build_speculative_config
    from calibration.targets import model_assets

    cat = load_catalog()
    # llama-3.1-8b has a draft model in the catalogue; deepseek-v3 has native MTP
    model = "deepseek-v3" if method == "mtp" else "llama-3.1-8b"
    if model not in cat.models:
        pytest.fail(f"catalogue model {model!r} is gone: pick another with {method}")
    pt_req = P.PlanRequest(model=model, hardware="h200" if "h200" in cat.hardware else "h100-sxm",
                           tp=8 if method == "mtp" else 1, methods=(method,))
    pt = P.plan(pt_req, cat).method(method)
    cfg = P.deployment(P.make_context(pt_req, cat), pt)["speculative_config"]
    assert "speculative_token_tree" not in cfg
    target = Path(model_assets.resolve("mimo-tiny-mtp").path) if method == "mtp" else smol
    built = build_speculative_config(str(target), _local(cfg, method, target, model_cache))
    assert built.num_speculative_tokens == cfg["num_speculative_tokens"]
    assert bool(built.parallel_drafting) == (method == "p_eagle")
    assert built.method == cfg["method"] == load_catalog().methods[method].vllm_method  # EAGLE-1/2: "eagle"
    _check_schedule(cfg, built)


# ---- the methods engines ship today: DFlash, DSpark, suffix decoding, ngram_gpu ----------------------------
def _block_drafter(kind: str, target: Path, dest: Path) -> Path:
    """A DFlash / DSpark drafter's config (no weights: SpeculativeConfig reads only the config) for the CPU target:
    one Qwen3-style layer over three of its hidden states, in the layout vllm/config/speculative.py detects
    (architectures DFlashDraftModel / Qwen3DSparkModel, dflash_config with mask_token_id and target_layer_ids)."""
    import json
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((target / "config.json").read_text())
    layers = int(cfg["num_hidden_layers"])
    cfg.update(architectures=["DFlashDraftModel" if kind == "dflash" else "Qwen3DSparkModel"], model_type="qwen3",
               num_hidden_layers=1, num_target_layers=layers, block_size=8,
               dflash_config={"mask_token_id": 0, "target_layer_ids": [1, layers // 2, layers - 3]})
    if kind == "dspark":
        cfg.update(dspark_block_size=8, use_aux_hidden_state=True)
    (dest / "config.json").write_text(json.dumps(cfg))
    for f in target.glob("tokenizer*"):
        shutil.copy(f, dest)
    return dest


def _plan_config(method: str) -> dict[str, Any]:
    cat = load_catalog()
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=(method,))
    cfg = P.deployment(P.make_context(req, cat), P.plan(req, cat).method(method))["speculative_config"]
    assert cfg["method"] == cat.methods[method].vllm_method
    return cfg


@pytest.mark.parametrize("method", ["dflash", "dspark", "ngram_gpu"])
def test_new_method_deploy_configs_build_with_the_pinned_speculative_config(method: str, smol: Path,
                                                                           tmp_path: Path) -> None:
    from calibration.harness.engine_check import build_speculative_config

    cfg = _plan_config(method)
    if method in ("dflash", "dspark"):
        cfg = {**cfg, "model": str(_block_drafter(method, smol, tmp_path / method))}
    built = build_speculative_config(str(smol), cfg)
    assert built.method == method
    assert built.num_speculative_tokens == cfg["num_speculative_tokens"]
    # the engine drafts DFlash / DSpark blocks in parallel: the planner's one-pass block mode
    assert bool(built.parallel_drafting) == (method in ("dflash", "dspark"))
    _check_schedule(cfg, built)


def test_suffix_deploy_config_builds_or_is_refused_for_arctic_inference_only(smol: Path) -> None:
    """vLLM's suffix decoding needs the optional arctic-inference package. Without it the pinned engine refuses the
    config with its own message, which the deploy notes repeat; with it the config builds."""
    import importlib.util

    from calibration.harness.engine_check import build_speculative_config

    cfg = _plan_config("suffix")
    if importlib.util.find_spec("arctic_inference") is None:
        with pytest.raises(ValueError, match=r"Arctic Inference is required for suffix decoding\. Install via "
                                             r"`pip install arctic-inference==0\.1\.1`"):
            build_speculative_config(str(smol), cfg)
    else:
        built = build_speculative_config(str(smol), cfg)
        assert built.method == "suffix" and built.num_speculative_tokens == cfg["num_speculative_tokens"]
    cat = load_catalog()
    notes = vllm_deployment(cat.methods["suffix"], cat.models["llama-3.1-8b"], cfg["num_speculative_tokens"])["notes"]
    assert any("pip install arctic-inference==0.1.1" in n for n in notes)
