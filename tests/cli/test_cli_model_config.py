"""`python -m planner ... --model-config FILE`: the CLI plans a model from its own config.json (real files,
tests/profiles/model_configs/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main

CONFIGS = Path(__file__).resolve().parents[1] / "profiles" / "model_configs"


def run(capsys, *argv: str) -> tuple[int, dict | str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else err)


@pytest.mark.parametrize("file,hardware,dtype,mtp", [
    ("meta-llama--Meta-Llama-3.1-405B", "h200", "bf16", False),  # dense
    ("moonshotai--Kimi-K2-Instruct", "b200", "fp8", False),  # MoE with MLA, FP8 checkpoint (1 TB: not on 8 x H200)
    ("deepseek-ai--DeepSeek-V3.2", "h200", "fp8", True),  # native MTP
])
def test_plan_runs_on_a_config(capsys, file, hardware, dtype, mtp):
    rc, out = run(capsys, "plan", "--model-config", str(CONFIGS / f"{file}.json"), "--hardware", hardware, "--tp",
                  "8", "--no-levers")
    assert rc == 0, out
    mc = out["model_config"]
    assert mc["name"].startswith("config:") and mc["weight_dtype"] == (None if dtype == "bf16" else dtype)
    methods = {m["method"]: m for m in out["methods"]}
    assert methods["mtp"]["available"] is mtp
    # the deploy command serves the model's path (these configs name none: the placeholder), never the digest name
    assert "vllm serve path/to/your-model " in out["deploy"]["command"]


def test_dtype_given_wins_and_other_subcommands_take_it(capsys):
    f = str(CONFIGS / "deepseek-ai--DeepSeek-V3.2.json")
    rc, out = run(capsys, "evaluate", "--model-config", f, "--hardware", "h200", "--tp", "8", "--method", "mtp",
                  "--dtype", "bf16", "--k", "2", "--batch", "8")
    assert rc == 0, out
    assert out["model_config"]["spec"]["native_methods"] == ["mtp"]
    rc, out = run(capsys, "compare", "--model-config", f, "--hardware", "h200", "--tp", "8")
    assert rc == 0, out
    assert out["model"].startswith("config:") and out["model_config"]["weight_dtype"] == "fp8"


def test_model_and_model_config_are_exclusive_and_errors_are_one_line(capsys, tmp_path):
    assert main(["plan", "--model", "llama-3.1-8b", "--model-config", "x.json", "--hardware", "h200"]) == 2
    err = capsys.readouterr().err  # argparse's refusal is one line too (cli.flags.Parser), not usage + exit
    assert err == "error: plan: argument --model-config: not allowed with argument --model\n"
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32}))
    rc, err = run(capsys, "plan", "--model-config", str(bad), "--hardware", "h200")
    assert rc == 2 and "field 'num_attention_heads' = '(missing)'" in err
    rc, err = run(capsys, "plan", "--model-config", str(tmp_path / "none.json"), "--hardware", "h200")
    assert rc == 2 and "cannot read the file" in err


@pytest.mark.parametrize("model,tp,dtype", [
    ("deepseek-v3.2", 8, "fp8"), ("kimi-k2", 8, "fp8"), ("qwen3-235b-a22b", 8, "bf16"),
    ("qwen3.5-397b-a17b", 8, "bf16"), ("qwen3.5-35b-a3b", 1, "bf16"), ("glm-5", 8, "fp8"),
    ("minimax-m2.5", 4, "fp8"), ("mixtral-8x7b", 2, "bf16"), ("gpt-oss-20b", 1, "mxfp4"),
])
def test_current_catalogue_models_plan_on_h200(capsys, model, tp, dtype):
    rc, out = run(capsys, "plan", "--model", model, "--hardware", "h200", "--tp", str(tp), "--dtype", dtype,
                  "--no-levers")
    assert rc == 0, out
    assert out["baseline"]["usd_per_mtok"] is not None and out["methods"]
    if model == "kimi-k2":  # 1,026 GB of FP8 weights: not on 8 x 141 GB with room for a KV cache
        assert not out["baseline"]["fits_memory"]
    else:
        assert out["baseline"]["feasible"], out["baseline"]["reason"]
