from __future__ import annotations

import json

import pytest

from calibration.measure.microbench import LayerShape, run_microbench
from calibration.targets import model_assets


def test_converted_target_and_truncated_drafts(model_cache: dict) -> None:
    from safetensors import safe_open

    target = model_cache[model_assets.TARGET_NAME]
    cfg = json.loads((target.path / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 30 and cfg["hidden_size"] == 576
    assert "quantization_config" not in cfg
    assert (target.path / "tokenizer.json").exists() or (target.path / "tokenizer_config.json").exists()
    name = "model.layers.1.mlp.down_proj.weight"
    with safe_open(str(target.path / "model.safetensors"), "pt") as t:
        ref = t.get_tensor(name)
    for draft, layers in model_assets.DRAFT_LAYERS.items():
        asset = model_cache[draft]
        assert json.loads((asset.path / "config.json").read_text())["num_hidden_layers"] == layers
        with safe_open(str(asset.path / "model.safetensors"), "pt") as d:
            keys = set(d.keys())
            assert f"model.layers.{layers - 1}.mlp.down_proj.weight" in keys
            assert f"model.layers.{layers}.mlp.down_proj.weight" not in keys
            assert (d.get_tensor(name) == ref).all()  # the draft IS the target's first layers
    assert str(ref.dtype) == "torch.bfloat16"


def test_allowlist_rejects_other_names_and_paths() -> None:
    for bad in ("../../etc", "/root/model", "smollm2-135m-30l"):
        with pytest.raises(ValueError, match="not allowed"):
            model_assets.resolve(bad)


def test_cache_dir_override(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPLAN_MODEL_CACHE", str(tmp_path))
    assert model_assets.cache_dir() == tmp_path


def test_microbench_times_grow_with_work() -> None:
    tiny = LayerShape(layers=2, hidden_size=256, heads=4, kv_heads=2, head_dim=64, intermediate_size=512,
                      vocab_size=4096)
    samples = run_microbench(tiny, batches=(1, 64), tokens_per_seq=(1, 8), contexts=(64, 2048), repeats=3,
                             dtype="float32")
    assert len(samples) == 8
    by = {(s.batch, s.tokens_per_seq, s.context_tokens): s.step_time_s for s in samples}
    assert all(t > 0 for t in by.values())
    # 64 x 8 tokens over a 2048-token context is ~500x the FLOPs of one token over 64: it must be slower
    assert by[(64, 8, 2048)] > 2 * by[(1, 1, 64)]


def test_layer_shape_validation() -> None:
    with pytest.raises(ValueError, match="heads=9 not allowed"):
        LayerShape(layers=1, hidden_size=576, heads=9, kv_heads=2, head_dim=64, intermediate_size=1536,
                   vocab_size=10)
    with pytest.raises(ValueError, match="layers=0"):
        LayerShape(layers=0, hidden_size=576, heads=9, kv_heads=3, head_dim=64, intermediate_size=1536,
                   vocab_size=10)
