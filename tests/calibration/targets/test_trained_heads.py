"""Trained heads without an engine or a training run: manifest, resolve, publishing, prompts, CLI checks."""

from __future__ import annotations

import json

import pytest

from calibration.__main__ import main
from calibration.measure.spec import load_prompts
from calibration.targets import trained_heads
from calibration.targets.speculators_train import aux_layer_ids, read_samples


def _manifest(**kw) -> trained_heads.Manifest:
    base = dict(name="smollm2-135m-eagle3-chat", target="smollm2-135m", workloads=("chat",), samples=320, epochs=3,
                train_seconds=567.0, generate_seconds=120.5, peak_memory_bytes=2_400_000_000,
                library="speculators", library_version="0.9.0", created_at="2026-12-02T05:00:00Z")
    base.update(kw)
    return trained_heads.Manifest(**base)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPLAN_MODEL_CACHE", str(tmp_path))
    return tmp_path


def test_manifest_round_trip(tmp_path):
    m = _manifest(init_from="smollm2-135m-eagle3-chat", workloads=("code",), final_loss=1.25, max_output_tokens=128)
    trained_heads.write_manifest(tmp_path, m)
    assert trained_heads.read_manifest(tmp_path) == m
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["workloads"] == ["code"] and on_disk["library"] == "speculators"


@pytest.mark.parametrize("field,value,needle", [
    ("samples", 0, "samples=0"), ("epochs", 0, "epochs=0"), ("workloads", ("rag",), "workloads="),
    ("workloads", (), "workloads="), ("name", "../escape", "name="), ("train_seconds", -1.0, "train_seconds=-1.0"),
])
def test_manifest_refuses_bad_fields(field, value, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        _manifest(**{field: value})


def test_resolve_missing_names_the_training_command(cache):
    with pytest.raises(FileNotFoundError) as e:
        trained_heads.resolve("smollm2-135m-eagle3-code")
    msg = str(e.value)
    assert "python -m calibration train-head" in msg and "--name smollm2-135m-eagle3-code" in msg
    assert "--workload code" in msg


def test_resolve_needs_the_done_marker(cache):
    d = cache / "trained" / "half"
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="train-head"):
        trained_heads.resolve("half")
    (d / ".done").write_text("x")
    assert trained_heads.resolve("half") == d


def test_resolve_refuses_paths():
    with pytest.raises(ValueError, match="name="):
        trained_heads.resolve("../models")


def test_finish_publishes_and_lists(cache):
    staging = cache / "trained" / ".h.staging"
    (staging / "_checkpoints" / "0").mkdir(parents=True)
    (staging / "config.json").write_text("{}")
    m = _manifest(name="h")
    dest = trained_heads.finish(staging=staging, name="h", manifest=m)
    assert dest == cache / "trained" / "h" and not staging.exists()
    assert not (dest / "_checkpoints").exists()
    assert trained_heads.resolve("h") == dest
    assert trained_heads.list_heads() == [m]


def test_parse_result_takes_the_last_result_line():
    out = "[train] epoch 1/3\n" + json.dumps({"result": {"seconds": 1}}) + "\n" + json.dumps({"result": {"seconds": 2}})
    assert trained_heads.parse_result(out) == {"seconds": 2}
    with pytest.raises(RuntimeError, match="no result line"):
        trained_heads.parse_result("[train] epoch 1/3\n")


@pytest.mark.parametrize("workload", ["chat", "code"])
def test_training_prompts_leave_the_measured_ones_out(workload):
    measured = set(load_prompts(workload, trained_heads.HELD_OUT_PROMPTS))
    got = trained_heads.training_prompts(workload=workload, n=40)
    assert len(got) == 40 and len(set(got)) == 40
    assert not measured & set(got)


def test_aux_layers_are_eagle3s():
    # vllm/model_executor/models/llama.py get_eagle3_default_aux_hidden_state_layers: (2, L // 2, L - 3)
    assert aux_layer_ids(30) == [2, 15, 27]


def test_read_samples(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"input_ids": [1, 2, 3], "prompt_len": 2}) + "\n\n")
    assert read_samples([str(p)]) == [{"input_ids": [1, 2, 3], "prompt_len": 2}]


@pytest.mark.parametrize("args,needle", [
    (["--samples", "0"], "samples=0"),
    (["--epochs", "100"], "epochs=100"),
    (["--workload", "rag"], "workloads=('rag',)"),
    (["--target", "llama-3.1-8b"], "target='llama-3.1-8b'"),
    (["--max-tokens", "4096"], "max_tokens=4096"),
    (["--init-from", "not-trained-yet"], "train-head"),
])
def test_cli_refuses_before_any_work(cache, capsys, args, needle):
    rc = main(["train-head", "--name", "smollm2-135m-eagle3-x", *args])
    assert rc == 2
    assert needle in capsys.readouterr().err
    assert not (cache / "trained").exists() or not any((cache / "trained").iterdir())


def test_cli_names_the_training_venv_when_missing(cache, capsys, monkeypatch):
    monkeypatch.setenv(trained_heads.TRAIN_VENV_ENV, str(cache / "no-venv"))
    rc = main(["train-head", "--name", "h", "--samples", "8"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "no training environment" in err and "requirements-train.txt" in err
