import json
import shlex

import pytest

from planner.physics.deploy import speculative_config, vllm_serve_command


def _cfg_from(cmd: str) -> dict:
    argv = shlex.split(cmd)
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_commands_parse_back_to_vllm_keys(catalog):
    m = catalog.models
    cmd = vllm_serve_command(catalog.methods["eagle3"], m["llama-3.3-70b"], 4, tp=4, head_path="org/head")
    argv = shlex.split(cmd)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert _cfg_from(cmd) == {"method": "eagle3", "num_speculative_tokens": 4, "model": "org/head"}


def test_each_method_gets_its_own_keys(catalog):
    m, meth = catalog.models, catalog.methods
    assert speculative_config(meth["p_eagle"], m["llama-3.1-8b"], 6)["parallel_drafting"] is True
    assert "parallel_drafting" not in speculative_config(meth["medusa"], m["vicuna-7b"], 4)
    ng = speculative_config(meth["ngram"], m["llama-3.1-8b"], 4)
    assert ng["method"] == "ngram" and ng["prompt_lookup_max"] >= ng["prompt_lookup_min"]
    dm = speculative_config(meth["draft_model"], m["llama-3.3-70b"], 4, draft_model=m["llama-3.1-8b"])
    assert dm["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "model" not in speculative_config(meth["mtp"], m["deepseek-v3"], 1)
    with pytest.raises(ValueError, match="no draft model"):
        speculative_config(meth["draft_model"], m["deepseek-v3"], 4)
