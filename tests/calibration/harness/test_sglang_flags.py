"""The SGLang flags the deploy output gives for token trees and chains, parsed by SGLang's own server-args parser
(`ServerArgs.add_cli_args` + argparse) of the pinned sglang (requirements-sglang-args.txt), and the algorithm names
checked against SGLang's own registry. SGLang is installed --no-deps into its own folder (./dev setup_engine does
it; this module's fixture does it when the folder is missing) and imported beside the engine venv, whose torch its
import needs: hence the engine mark."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.acceptance.trees import TreeShape
from planner.physics.deploy import SGLANG_ALGORITHM as DEPLOY_ALGORITHM
from planner.physics.deploy import engine_deployment, vllm_deployment
from profiles import load_catalog

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ROOT / "requirements-sglang-args.txt"
# What SGLang calls each planner method that has SGLang tree flags (SGLang's --speculative-algorithm builtins
# "EAGLE, EAGLE3, NEXTN, ..."; NEXTN: a model's own MTP / next-n layers).
SGLANG_ALGORITHM = {"eagle3": "EAGLE3", "p_eagle": "EAGLE3", "eagle": "EAGLE", "mtp": "NEXTN"}


def _stamp() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]


@pytest.fixture(scope="module")
def server_args_parser() -> argparse.ArgumentParser:
    pytest.importorskip("torch")  # sglang's server_args import needs torch: the engine venv has it
    folder = Path(os.environ.get("SPECPLAN_SGLANG_ARGS", Path.home() / ".cache" / "specplan" / "sglang-args"))
    stamp = folder / ".stamp"
    if not stamp.exists() or stamp.read_text().strip() != _stamp():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target",
                        str(folder), "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(_stamp() + "\n")
    sys.path.insert(0, str(folder))
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return parser


def _emitted_flag_sets() -> list[tuple[str, str, list[str]]]:
    """(method, shape, flags) for every SGLang flag set the deploy output can give: chains, SGLang dynamic trees
    and explicit trees (given as their nearest SGLang tree) for EAGLE-3, EAGLE-1/2 (EAGLE-2's dynamic trees) and MTP."""
    cat = load_catalog()
    shapes = {"chain": TreeShape.chain(4), "sglang tree": TreeShape.from_sglang(3, 4, 21),
              "explicit tree": TreeShape.from_trtllm_choices([[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]])}
    out = []
    for method, model, tp in (("eagle3", "llama-3.3-70b", 8), ("eagle", "llama-3.1-8b", 1), ("mtp", "deepseek-v3", 8)):
        for label, shape in shapes.items():
            d = vllm_deployment(cat.methods[method], cat.models[model], shape.depth, tp=tp, tree_shape=shape)
            assert d["sglang_flags"], f"{method} {label}: no SGLang flags"
            out.append((method, label, list(d["sglang_flags"])))
    return out


def _command(method: str, flags: list[str]) -> list[str]:
    """The planner's tree flags in the command an operator runs: the model, the algorithm and (for heads) the
    draft path, which SGLang needs beside them."""
    head = ["--speculative-draft-model-path", "org/head"] if method != "mtp" else []
    return ["--model-path", "org/target", "--speculative-algorithm", SGLANG_ALGORITHM[method], *head, *flags]


@pytest.mark.parametrize(("method", "shape", "flags"), _emitted_flag_sets(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_every_emitted_sglang_flag_set_parses_with_sglangs_server_args(server_args_parser, method: str,
                                                                        shape: str, flags: list[str]) -> None:
    ns = server_args_parser.parse_args(_command(method, flags))
    values = dict(zip(flags[::2], flags[1::2], strict=True))
    assert ns.speculative_num_steps == int(values["--speculative-num-steps"])
    assert ns.speculative_eagle_topk == int(values["--speculative-eagle-topk"])
    assert ns.speculative_num_draft_tokens == int(values["--speculative-num-draft-tokens"])
    assert ns.speculative_algorithm == SGLANG_ALGORITHM[method]


def test_the_algorithm_names_are_sglangs_own(server_args_parser) -> None:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    for name in set(SGLANG_ALGORITHM.values()):
        assert SpeculativeAlgorithm.from_string(name) is not None


# argparse takes unambiguous prefixes (SGLang's parser keeps allow_abbrev), so the wrong names are not prefixes
@pytest.mark.parametrize("bad", [["--speculative-eagle-top-k", "4"], ["--speculative-tree-depth", "3"],
                                 ["--speculative-eagle-topk", "four"]])
def test_a_wrong_flag_or_value_is_refused(server_args_parser, bad: list[str]) -> None:
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        server_args_parser.parse_args(["--model-path", "org/target", *bad])


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.mark.parametrize("method", sorted(load_catalog().methods))
def test_every_sglang_deploy_command_parses_with_sglangs_server_args(server_args_parser, cat, method: str) -> None:
    """engine_deployment's SGLang command for every method of the catalogue (what `--engine sglang` prints): its
    arguments parse with SGLang's own parser and its algorithm is one SGLang knows; a method SGLang does not ship
    gets no command and a note that says so."""
    import shlex

    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    m = cat.methods[method]
    model = cat.models["deepseek-v3" if m.requires_native == "mtp" else "llama-3.3-70b"]
    k = min(3, m.max_k)
    draft = cat.models[model.draft_model] if m.drafting == "draft_model" else None  # llama-3.3-70b: llama-3.1-8b
    dep = engine_deployment("sglang", vllm_deployment(m, model, k, tp=8, draft_model=draft), m, model, k, tp=8,
                            max_num_seqs=64)
    if DEPLOY_ALGORITHM[method] is None:
        assert dep["command"] is None and "has no" in dep["notes"][0] and dep["vllm_command"]
        return
    parts = shlex.split(dep["command"])
    assert parts[:3] == ["python", "-m", "sglang.launch_server"]
    ns = server_args_parser.parse_args(parts[3:])
    assert ns.speculative_algorithm == DEPLOY_ALGORITHM[method]
    assert SpeculativeAlgorithm.from_string(ns.speculative_algorithm) is not None
    assert ns.tp_size == 8 and ns.max_running_requests == 64
