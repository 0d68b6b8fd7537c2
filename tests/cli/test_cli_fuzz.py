"""The CLI never shows a traceback: a refused input is one `error: ...` line and exit code 2 (argparse's errors, the
planner's PlanError, the readers' TrafficError, ModelConfigError and MeasuredAcceptanceError); and ~60 seeded runs
of benchmarks/fuzz_cli.py (random but type-valid flags, a quarter of the numbers extreme) pass its checks: no
traceback, no NaN or negative money, no infeasible recommendation. In-process through cli.main.main."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from benchmarks.fuzz_cli import acceptance_files, cases, catalogue_names, run_one
from cli.main import main

FUZZ_SEED = 20261204
FUZZ_RUNS = 60


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


SCENARIO = ("--model", "llama-3.1-8b", "--hardware", "h100-sxm")


@pytest.mark.parametrize(("argv", "says"), [
    (("compare", *SCENARIO, "--k", "x"), "compare: argument --k: invalid int value: 'x'"),
    (("evaluate", *SCENARIO), "the following arguments are required: --method"),
    (("plan", "--hardware", "h100-sxm"), "one of the arguments --model --model-config is required"),
    (("plan", *SCENARIO, "--alpha", "0.7", "--alpha-per-position", "0.7"), "not allowed with argument"),
    (("plan", *SCENARIO, "--billing", "weekly"), "invalid choice: 'weekly'"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
    ((), "the following arguments are required: cmd"),
    (("evaluate", *SCENARIO, "--method", "eagle3", "--batch", "8", "--alpha", "1.5"), "alpha=1.5"),
    (("convert", "--k", "2147483648", "--acceptance-length", "4.7"), "k=2147483648 is not allowed: an integer from 1"),
    (("evaluate", "--model", "llama-3.1-8b", "--hardware", "h10", "--method", "eagle3"), "unknown hardware 'h10'"),
    # found by the fuzz: minutes of work or 16 GB before these bounds
    (("evaluate", *SCENARIO, "--method", "eagle3", "--batch", "4", "--tree-steps", "2147483648", "--tree-topk", "5",
      "--tree-draft-tokens", "9"), "num_steps=2147483648 is not allowed: an integer from 1 to 32"),
    (("levers", *SCENARIO, "--k", "1000000", "--acceptance-length", "2.5"),
     "acceptance_k=1000000 is not allowed: the K the acceptance was measured at: an integer from 1 to 32"),
    (("compare", *SCENARIO, "--monthly-output-tokens", "5e-324"),  # divided a bill by an underflowed 0
     "monthly_output_tokens=5e-324 is not allowed: a volume of 0, or from 1 to 1e19 tokens a month"),
])
def test_a_refused_flag_is_one_error_line_and_exit_code_2(argv, says):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert says in one_error_line(err)


def test_the_readers_errors_are_one_line_too(tmp_path: Path):
    rates = tmp_path / "r.csv"
    rates.write_bytes(b"position,rate\ninf,0.7\n")  # the repro: an OverflowError traceback before
    code, _, err = cli("compare", *SCENARIO, "--acceptance-file", str(rates))
    assert code == 2 and "--acceptance-file=" in one_error_line(err) and "position 'inf'" in err
    traffic = tmp_path / "t.csv"
    traffic.write_bytes(b"\x89PNG\r\n\x1a\n")
    code, _, err = cli("plan", *SCENARIO, "--traffic", str(traffic), "--no-levers")
    assert code == 2 and "PNG" in one_error_line(err)
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "hidden_size": -4096}')
    code, _, err = cli("plan", "--model-config", str(config), "--hardware", "h100-sxm", "--no-levers")
    assert code == 2 and one_error_line(err)


def test_evaluate_without_batch_refuses_a_k_beyond_the_positions_given():
    # best_batch used to search a K the positions do not reach and fail on an empty result (IndexError)
    code, _, err = cli("evaluate", *SCENARIO, "--method", "eagle3", "--k", "2", "--alpha-per-position", "0.9")
    line = one_error_line(err)
    assert code == 2 and "alpha_per_position=(0.9,)" in line and "K=2 needs 2, 1 given" in line
    code, out, _ = cli("evaluate", *SCENARIO, "--method", "eagle3", "--k", "2", "--alpha-per-position", "0.9,0.8")
    assert code == 0 and json.loads(out)["k"] == 2


def test_seeded_fuzz_runs_pass_every_check():
    names = catalogue_names()
    with acceptance_files() as files:
        outcomes = [run_one(argv) for argv in cases(FUZZ_SEED, FUZZ_RUNS, names, files)]
    failed = [(" ".join(o.argv), o.problems, o.detail) for o in outcomes if o.problems]
    assert not failed, failed
    # the runs reach both ends: answers and refusals, across the five commands
    assert {o.code for o in outcomes} == {0, 2}
    assert {o.argv[0] for o in outcomes} == {"plan", "compare", "evaluate", "levers", "convert"}
