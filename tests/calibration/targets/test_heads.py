"""Cost-only heads and the tiny MTP target (calibration/targets/heads.py, calibration/targets/head_formats.py): the
layouts vLLM's own model classes load, determinism by seed, the cache, the errors, and the registry's build:/trained:
drafts. One engine-marked test runs EAGLE-3, MEDUSA and MTP on the real CPU engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.measure.spec import EngineConfig
from calibration.targets import head_formats, heads, model_assets, registry
from calibration.targets.registry import RegistryError, parse_registry
from tests.calibration.conftest import E2E_CONFIGS

# A SmolLM2-135M-shaped target (its config.json fields), and a small one that builds in milliseconds.
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
           "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
           "vocab_size": 49152, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192, "pad_token_id": 2,
           "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "tie_word_embeddings": True}
SMALL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "max_position_embeddings": 512}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECPLAN_MODEL_CACHE", str(tmp_path / "models"))
    return tmp_path / "models"


def _target(tmp_path: Path, cfg: dict, name: str = "target") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "tokenizer.json").write_text("{}")
    return d


def _load(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


# ---- the layouts vLLM loads ------------------------------------------------------------------------------
def test_eagle3_head_has_the_layout_llama_eagle3_loads(cache: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    folder = heads.ensure_head("eagle3", _target(tmp_path, SMOLLM2))
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["model_type"] == "llama"
    assert (cfg["num_hidden_layers"], cfg["draft_vocab_size"], cfg["vocab_size"]) == (1, 32000, 49152)
    assert cfg["rope_parameters"] == SMOLLM2["rope_parameters"] and cfg["ptd_token_id"] == 2
    w = _load(folder)
    # q/k/v read [embedding, hidden] = 2 x 576; 9 heads x 64, 3 KV heads x 64; fc over 3 hidden states
    assert w["midlayer.self_attn.q_proj.weight"].shape == (576, 1152)
    assert w["midlayer.self_attn.k_proj.weight"].shape == (192, 1152)
    assert w["midlayer.self_attn.o_proj.weight"].shape == (576, 576)
    assert w["midlayer.mlp.down_proj.weight"].shape == (576, 1536)
    assert w["fc.weight"].shape == (576, 1728) and w["lm_head.weight"].shape == (32000, 576)
    assert w["mask_hidden"].numel() == 1728 and w["fc.weight"].dtype == torch.bfloat16
    assert w["d2t"].dtype == torch.int64 and w["d2t"].shape == (32000,)
    assert w["t2d"].dtype == torch.bool and int(w["t2d"].sum()) == 32000 and w["t2d"].shape == (49152,)
    assert (folder / "tokenizer.json").is_file()
    # vLLM's own checkpoint mapping (llama_eagle3.LlamaModel.hf_to_vllm_mapper) lands every layer weight on
    # a parameter of its decoder layer (stacked q/k/v -> qkv_proj, gate/up -> gate_up_proj)
    eagle3 = pytest.importorskip("vllm.model_executor.models.llama_eagle3")
    mapped = {eagle3.LlamaModel.hf_to_vllm_mapper._map_name(n) for n in w if n.startswith("midlayer.")}
    assert mapped == {f"layers.0.{p}" for p in (
        "self_attn.qkv_proj.weight", "self_attn.o_proj.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
        "input_layernorm.weight", "post_attention_layernorm.weight", "hidden_norm.weight")}


def test_vllm_reads_the_head_configs_as_their_models(cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from transformers import AutoConfig
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.transformers_utils.configs.eagle import EAGLEConfig
    from vllm.transformers_utils.configs.medusa import MedusaConfig

    target = _target(tmp_path, SMOLLM2)
    for kind, arch in (("eagle3", "LlamaForCausalLMEagle3"), ("eagle", "EagleLlamaForCausalLM")):
        hf = AutoConfig.from_pretrained(str(heads.ensure_head(kind, target)))
        eagle = EAGLEConfig(hf, method=kind, model_type="eagle")  # as vllm/config/speculative.py wraps it
        assert eagle.architectures == [arch] and arch in ModelRegistry.get_supported_archs()
        assert (eagle.hidden_size, eagle.num_key_value_heads, eagle.head_dim) == (576, 3, 64)
    medusa = MedusaConfig.from_pretrained(str(heads.ensure_head("medusa", target)))
    assert (medusa.architectures, medusa.num_heads, medusa.vocab_size, medusa.hidden_size) == (
        ["MedusaModel"], 5, 49152, 576)


def test_eagle1_and_medusa_weights_are_named_as_vllm_loads_them(cache: Path, tmp_path: Path) -> None:
    target = _target(tmp_path, SMALL)
    eagle = _load(heads.ensure_head("eagle", target))
    assert eagle["fc.weight"].shape == (64, 128)  # fc over [embedding, hidden], no bias
    assert eagle["layers.0.self_attn.q_proj.weight"].shape == (64, 64)  # 4 heads x head_dim 16
    assert eagle["layers.0.self_attn.k_proj.weight"].shape == (32, 64)
    # layer 0 has no input_layernorm in vllm/model_executor/models/llama_eagle.py; embeddings and LM head
    # are the target's
    assert not any("input_layernorm" in n or "embed_tokens" in n or "lm_head" in n for n in eagle)
    medusa = _load(heads.ensure_head("medusa", target, num_heads=3))
    assert sorted(medusa) == sorted([f"blocks.{i}.layers.0.weight" for i in range(3)]
                                    + [f"lm_heads.{i}.weight" for i in range(3)])
    assert medusa["blocks.2.layers.0.weight"].shape == (64, 64) and medusa["lm_heads.0.weight"].shape == (1000, 64)


def test_the_mtp_target_is_a_mimo_model_with_one_mtp_layer(cache: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm")
    from transformers import AutoConfig
    from vllm.config.speculative import SpeculativeConfig

    base = _target(tmp_path, SMOLLM2, "smollm2")
    monkeypatch.setattr(model_assets, "ensure_target",
                        lambda: model_assets.ModelAsset("smollm2-135m", base, 30, is_draft=False))
    folder = model_assets.resolve("mimo-tiny-mtp").path
    assert folder == heads.ensure_mtp_target() and (folder / "tokenizer.json").is_file()
    hf = AutoConfig.from_pretrained(str(folder))
    assert hf.architectures == ["MiMoForCausalLM"] and hf.num_nextn_predict_layers == 1
    assert (hf.vocab_size, hf.hidden_size, hf.num_hidden_layers) == (49152, 576, 4)
    draft = SpeculativeConfig.hf_config_override(hf)  # what vLLM does for method "mtp"
    assert (draft.model_type, draft.architectures, draft.n_predict) == ("mimo_mtp", ["MiMoMTPModel"], 1)
    w = _load(folder)
    # vllm/model_executor/models/mimo_mtp.py keeps model.mtp_layers.*, embed_tokens and lm_head
    mtp = {n.removeprefix("model.mtp_layers.0.") for n in w if n.startswith("model.mtp_layers.0.")}
    assert {"token_layernorm.weight", "hidden_layernorm.weight", "input_proj.weight", "final_layernorm.weight",
            "self_attn.q_proj.weight", "self_attn.q_proj.bias", "mlp.gate_proj.weight"} <= mtp
    assert w["model.mtp_layers.0.input_proj.weight"].shape == (576, 1152)
    assert {"model.embed_tokens.weight", "lm_head.weight", "model.layers.3.self_attn.v_proj.bias"} <= set(w)
    assert "model.layers.4.self_attn.v_proj.bias" not in w


# ---- determinism, cache, errors --------------------------------------------------------------------------
def test_heads_are_a_pure_function_of_kind_config_and_seed() -> None:
    torch = pytest.importorskip("torch")
    a = head_formats.head_weights(kind="eagle3", target_config=SMALL, seed=7)
    b = head_formats.head_weights(kind="eagle3", target_config=SMALL, seed=7)
    c = head_formats.head_weights(kind="eagle3", target_config=SMALL, seed=8)
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert not torch.equal(a["fc.weight"], c["fc.weight"])
    assert 0.015 < float(a["fc.weight"].float().std()) < 0.025  # small init: N(0, 0.02^2)
    key = head_formats.cache_key
    assert key(kind="eagle3", target_config=SMALL) == key(kind="eagle3", target_config=dict(reversed(SMALL.items())))
    assert key(kind="eagle3", target_config=SMALL) != key(kind="eagle3", target_config={**SMALL, "vocab_size": 999})
    assert key(kind="eagle3", target_config=SMALL) != key(kind="eagle", target_config=SMALL)


def test_a_second_call_reuses_the_cached_head(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target(tmp_path, SMALL)
    first = heads.ensure_head("eagle3", target)
    assert first.parent == cache / "heads" and first.name.startswith("eagle3-") and len(first.name) == 19
    stamp = (first / "model.safetensors").stat().st_mtime_ns

    def no_build(**_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(head_formats, "head_weights", no_build)
    assert heads.ensure_head("eagle3", target) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (cache / "heads").iterdir()] == [first.name]  # no temporary folder left


@pytest.mark.parametrize(("kind", "cfg", "message"), [
    ("eagle4", SMALL, r"kind='eagle4' not allowed; head kinds: \('eagle3', 'eagle', 'medusa'\)"),
    ("eagle3", {k: v for k, v in SMALL.items() if k != "hidden_size"}, r"field='hidden_size' value=None"),
    ("eagle3", {**SMALL, "vocab_size": "big"}, r"field='vocab_size' value='big' not allowed"),
    ("eagle", {**SMALL, "num_attention_heads": 5}, r"field='num_attention_heads' value=5 not allowed"),
    ("medusa", {**SMALL, "num_key_value_heads": 3}, r"field='num_key_value_heads' value=3 not allowed"),
    ("eagle3", {**SMALL, "rms_norm_eps": 0}, r"field='rms_norm_eps' value=0 not allowed"),
])
def test_a_bad_kind_or_target_config_names_field_and_value(cache: Path, tmp_path: Path, kind: str, cfg: dict,
                                                           message: str) -> None:
    with pytest.raises(ValueError, match=message):
        heads.ensure_head(kind, _target(tmp_path, cfg))
    assert not (cache / "heads").exists() or not any((cache / "heads").iterdir())


def test_a_target_without_config_json_is_refused(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no readable config.json"):
        heads.ensure_head("eagle3", tmp_path)


# ---- the registry: build: and trained: drafts -------------------------------------------------------------
def _registry(target: str, methods: str) -> registry.Registry:
    import yaml

    text = f"targets:\n  t1:\n    model: {target}\n    methods:\n{methods}"
    return parse_registry(yaml.safe_load(text), "test")


def test_build_drafts_are_built_for_the_entry_target(cache: Path, tmp_path: Path) -> None:
    target = _target(tmp_path, SMALL)
    reg = _registry(str(target), "      eagle3: {drafts: {cost-only: build:eagle3}}\n"
                                 "      p_eagle: {drafts: {cost-only: build:eagle3}}\n"
                                 "      eagle: {drafts: {cost-only: build:eagle}}\n"
                                 "      medusa: {drafts: {cost-only: build:medusa}, k_max: 5}\n")
    cfg = reg.speculative_config("t1", "p_eagle", 3, "cost-only")
    assert cfg == {"method": "eagle3", "num_speculative_tokens": 3, "parallel_drafting": True,
                   "model": str(heads.head_path("eagle3", target))}
    assert json.loads((Path(cfg["model"]) / "config.json").read_text())["hidden_size"] == 64
    assert reg.speculative_config("t1", "eagle", 2, "cost-only")["method"] == "eagle"
    assert Path(reg.speculative_config("t1", "medusa", 5, "cost-only")["model"]).name.startswith("medusa-")
    assert registry.planner_method("eagle") == "eagle"


def test_a_hub_target_fetches_only_config_and_tokenizer(cache: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    hub = pytest.importorskip("huggingface_hub")
    calls = []

    def fake_download(repo_id: str, local_dir: str, allow_patterns: list[str]) -> str:
        calls.append((repo_id, allow_patterns))
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "config.json").write_text(json.dumps(SMALL))
        return local_dir

    monkeypatch.setattr(hub, "snapshot_download", fake_download)
    head = registry.ModelRef("build:eagle3").resolve(target=registry.ModelRef("org/model-7b"))
    assert calls[0][0] == "org/model-7b" and "config.json" in calls[0][1]
    assert not any("safetensors" in p or "bin" in p for p in calls[0][1])
    assert json.loads((Path(head) / "config.json").read_text())["hidden_size"] == 64

    def offline(**_: object) -> None:
        raise OSError("no network")

    monkeypatch.setattr(hub, "snapshot_download", lambda *a, **k: offline())
    with pytest.raises(FileNotFoundError, match=r"target='org/other': cannot fetch its config.json .*OSError"):
        registry.ModelRef("build:medusa").resolve(target=registry.ModelRef("org/other"))
    with pytest.raises(ValueError, match="needs a target model"):
        registry.ModelRef("build:medusa").resolve()


def test_trained_drafts_come_from_calibration_trained_heads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from calibration.targets import trained_heads

    monkeypatch.setattr(trained_heads, "trained_dir", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match=r"trained head 'chat-v1' not found in .*; train it with: "
                                                r"python -m calibration train-head"):
        registry.ModelRef("trained:chat-v1").resolve()
    head = tmp_path / "chat-v1"
    head.mkdir()
    (head / "config.json").write_text("{}")
    (head / trained_heads.DONE_MARKER).write_text("")
    assert registry.ModelRef("trained:chat-v1").resolve() == str(head)


@pytest.mark.parametrize(("target", "methods", "message"), [
    ("org/m", "      eagle3: {drafts: {h: build:eagle9}}\n",
     r"t1.methods.eagle3.drafts.h: value='build:eagle9' not allowed: cost-only head kinds"),
    ("org/m", "      eagle3: {drafts: {h: build:medusa}}\n",
     r"drafts.h: value='build:medusa' not allowed: method 'eagle3' builds 'build:eagle3'"),
    ("org/m", "      eagle: {drafts: {h: build:eagle3}}\n", r"method 'eagle' builds 'build:eagle'"),
    ("org/m", "      draft_model: {drafts: {h: build:eagle3}}\n",
     r"method 'draft_model' takes a draft model, not a head"),
    ("org/m", "      eagle3: {drafts: {h: trained:Chat/V1}}\n", r"value='trained:Chat/V1' not allowed: trained:NAME"),
    ("build:eagle3", "      ngram: {}\n", r"t1.model: value='build:eagle3' not allowed: a head is a draft"),
    ("trained:x", "      ngram: {}\n", r"t1.model: value='trained:x' not allowed"),
    ("org/m", "      eagle: {}\n", r"method 'eagle' needs at least one draft"),
])
def test_bad_head_references_name_entry_field_and_value(target: str, methods: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        _registry(target, methods)


def test_the_shipped_registry_offers_every_method_on_cpu() -> None:
    reg = registry.load_registry(registry.SHIPPED)
    smol = reg.target("smollm2-135m").methods
    assert {m: {n: r.source for n, r in e.drafts.items()} for m, e in smol.items() if m in registry.HEAD_KIND} == {
        "eagle3": {"cost-only": "build:eagle3", "trained-chat": "trained:smollm2-135m-eagle3-chat",
                   "trained-code": "trained:smollm2-135m-eagle3-chat3-code"}, "p_eagle": {"cost-only": "build:eagle3"},
        "eagle": {"cost-only": "build:eagle"}, "medusa": {"cost-only": "build:medusa"}}
    assert smol["medusa"].k_max == head_formats.MEDUSA_HEADS
    mimo = reg.target("mimo-tiny")
    assert mimo.model.source == "asset:mimo-tiny-mtp" and set(mimo.methods) == {"mtp", "ngram"}
    assert mimo.methods["mtp"].k_max == 3


# ---- the real engine -------------------------------------------------------------------------------------
# Every (target, method, K, draft) in turn in ONE process: each engine is shut down before the next starts (its
# engine core is a process of its own), so vllm is imported once for all of them. Each result is the metrics
# delta around its own generate call.
ENGINE_SCRIPT = """
import json, sys
if __name__ == "__main__":
    from calibration.targets.registry import load_registry
    from calibration.harness.metrics import DRAFT_TOKENS, snapshot_from_get_metrics
    from calibration.measure.engine import shutdown_engine
    from vllm import LLM, SamplingParams
    reg = load_registry()
    for target, method, k, draft in json.loads(sys.argv[1]):
        spec = reg.speculative_config(target, method, k, draft or None)
        llm = LLM(model=reg.target(target).model.resolve(), enforce_eager=True, gpu_memory_utilization=0.3,
                  dtype="bfloat16", max_model_len=2048, disable_log_stats=False, speculative_config=spec)
        before = snapshot_from_get_metrics(llm.get_metrics())
        outs = llm.generate(["def add(a, b):", "The capital of France is"],
                            SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))
        snap = snapshot_from_get_metrics(llm.get_metrics()).minus(before)
        print("RESULT " + json.dumps({"method": method, "drafted": snap.counters.get(DRAFT_TOKENS, 0.0),
                                      "tokens": sum(len(o.outputs[0].token_ids) for o in outs)}), flush=True)
        shutdown_engine(llm)
        del llm
"""
# EAGLE-3's cost-only head on SmolLM2 at K=3 is one of the session calibration's configurations
# (tests/calibration/conftest.py E2E_CONFIGS, started through the same registry): read there, not started again.
EAGLE3_IN_E2E = EngineConfig("eagle3", 3, "cost-only")


@pytest.mark.engine
def test_cost_only_heads_and_mtp_draft_on_the_cpu_engine(model_cache: dict, tmp_path: Path) -> None:
    """EAGLE-3, MEDUSA and MTP through the shipped registry on the real engine: each starts, drafts and verifies
    (random heads accept almost nothing: only drafting is asserted). MEDUSA and MTP: one engine start each in one
    process, ~1 min; EAGLE-3: the session calibration's engine, whose drafts and tokens
    tests/calibration/measure/test_engine_e2e.py checks."""
    pytest.importorskip("vllm")
    assert EAGLE3_IN_E2E in E2E_CONFIGS
    script = tmp_path / "run_all.py"
    script.write_text(ENGINE_SCRIPT)
    root = Path(__file__).resolve().parents[3]
    runs = [("smollm2-135m", "medusa", 3, "cost-only"), ("mimo-tiny", "mtp", 1, "")]
    out = subprocess.run([sys.executable, str(script), json.dumps(runs)], cwd=root, capture_output=True, text=True,
                         timeout=900, env={**os.environ, "PYTHONPATH": str(root)})
    results = [json.loads(ln.removeprefix("RESULT ")) for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0, out.stderr[-3000:]
    assert [r["method"] for r in results] == ["medusa", "mtp"], out.stderr[-3000:]
    for res in results:
        assert res["tokens"] == 16 and res["drafted"] > 0, res
