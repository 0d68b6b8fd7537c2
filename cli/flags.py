"""The command line's flags: the scenario, acceptance and plan flags every command shares, parsed into
typed values; a bad flag is a UsageError (one `error:` line, exit code 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

from planner.request import BILLINGS, DEFAULT_MONTHLY_OUTPUT_TOKENS, PlanRequest
from planner.types import KV_CACHE_DTYPES, WEIGHT_DTYPES


def acceptance_file(path: str):
    """--acceptance-file: the customer's own measurement (profiles.measured_acceptance: vLLM /metrics text, a vllm
    bench result, per-position rates or a per-step histogram) -> its MeasuredAcceptance."""
    from profiles.measured_acceptance import MAX_BYTES, MeasuredAcceptanceError
    from profiles.uploads import read_acceptance_file  # in a child process, under the OS limits

    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)  # one byte over is enough for the reader to refuse the size
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"--acceptance-file={path!r}: {exc.strerror}") from None
    try:
        return read_acceptance_file(Path(path).name, data)
    except MeasuredAcceptanceError as exc:
        raise argparse.ArgumentTypeError(f"--acceptance-file={path!r}: {exc}") from None


def floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--alpha-per-position={text!r}: expected comma-separated numbers like 0.8,0.7,0.6"
        ) from None


def add_acceptance(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--acceptance-file", type=acceptance_file, metavar="FILE",
                   help="your measured acceptance for --method: a vLLM /metrics text, a `vllm bench serve "
                        "--save-result` JSON, or a CSV of per-position rates (position,rate) or of verifier steps by "
                        "accepted drafts (accepted,count); K is the file's")
    g.add_argument("--alpha", type=float, help="per-token acceptance alpha (i.i.d. over positions)")
    g.add_argument("--alpha-per-position", type=floats, help="conditional per-token alpha per position")
    g.add_argument("--draft-acceptance-rate", type=float, help="vLLM's accepted / drafted, in [0, 1]")
    g.add_argument("--acceptance-length", type=float, help="tokens per verifier step, bonus included")


def add_scenario(p: argparse.ArgumentParser, *, method_required: bool) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--model", help="a catalogue model name (python -m planner list models)")
    g.add_argument("--model-config", metavar="FILE",
                   help="your own model: its Hugging Face config.json (dense or MoE, GQA or MLA, sliding-window and "
                        "linear-attention layers, native MTP); its quantization_config sets --dtype unless given")
    hw = p.add_mutually_exclusive_group(required=True)
    hw.add_argument("--hardware", help="a catalogue GPU name (python -m planner list hardware)")
    hw.add_argument("--hardware-spec", metavar="FILE", help="your own GPU: a YAML or JSON file with the fields of a "
                    "hardware.yaml entry (profiles/samples/my_gpu.yaml); it borrows a fitted GPU's step-time terms")
    p.add_argument("--method", required=method_required, default="eagle3")
    p.add_argument("--k", type=int, default=None, help="draft tokens per step (default: the method's)")
    p.add_argument("--batch", type=int, default=None, help="concurrent sequences (default: best under SLO)")
    p.add_argument("--workload", default="chat")
    p.add_argument("--language", default="english")
    p.add_argument("--context-tokens", type=int)
    p.add_argument("--prompt-tokens", type=int)
    p.add_argument("--output-tokens", type=int)
    p.add_argument("--tp", type=int, default=PlanRequest.tp)
    p.add_argument("--attention-dp", action="store_true",
                   help="MoE models: attention data parallel over the --tp GPUs with expert-parallel MoE (vLLM "
                        "--data-parallel-size N --enable-expert-parallel) instead of tensor parallel")
    p.add_argument("--dtype", choices=WEIGHT_DTYPES, default=None,
                   help="weight format (default: a --model-config checkpoint's own, else bf16)")
    p.add_argument("--kv-dtype", choices=KV_CACHE_DTYPES, default=None,
                   help="KV-cache format (default: fp8 with fp8 weights, else bf16)")
    p.add_argument("--usd-per-gpu-hour", type=float)
    p.add_argument("--engine", default=PlanRequest.engine,
                   help="serving engine: vllm (default, the version the calibration pins), sglang or trtllm; its "
                        "own per-step and per-draft-pass speculation overheads (planner.physics.engines)")
    p.add_argument("--engine-version", default=None, help="the engine's version, shown with the plan")
    p.add_argument("--tpot-slo-ms", type=float, default=PlanRequest.tpot_slo_ms)
    p.add_argument("--draft-cost-ratio", type=float, help="override c = draft pass time / target step time")
    p.add_argument("--tuned", action="store_true", help="use the method's tuned alpha range")
    p.add_argument("--temperature", type=float, default=PlanRequest.temperature,
                   help="sampling temperature of the requests, 0 (greedy, default) to 2: library rows measured at it "
                        "where there are any, else acceptance scaled down as stated in the assumptions")
    p.add_argument("--tree", nargs="?", const="default", default=None, metavar="FILE",
                   help="tree verification (methods that support it): alone, the planner's default tree; with a "
                        "FILE, the tree in it (JSON: a list of node paths as vLLM's speculative_token_tree or "
                        "TensorRT-LLM's eagle_choices take, or {\"sglang\": [num_steps, topk, num_draft_tokens]})")
    p.add_argument("--tree-steps", type=int, help="SGLang --speculative-num-steps (with --tree-topk, "
                                                   "--tree-draft-tokens)")
    p.add_argument("--tree-topk", type=int, help="SGLang --speculative-eagle-topk")
    p.add_argument("--tree-draft-tokens", type=int, help="SGLang --speculative-num-draft-tokens (root included)")
    p.add_argument("--monthly-output-tokens", type=float, default=None,
                   help="output tokens a month (default: the traffic profile's, else "
                        f"{DEFAULT_MONTHLY_OUTPUT_TOKENS:g})")
    add_acceptance(p)


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engineering-usd-per-week", type=float, help="engineering cost (default: prices.yaml)")
    p.add_argument("--discount-rate", type=float, help="annual discount rate for NPV, e.g. 0.10")
    p.add_argument("--horizon-months", type=int, help="NPV / payback horizon in months")
    p.add_argument("--billing", choices=BILLINGS, default=PlanRequest.billing,
                   help="the bill every saving comes from: each hour's replicas (autoscaled, default) or a fleet "
                        "sized for the peak hour all month (fixed)")
    p.add_argument("--confidence", type=float, default=PlanRequest.confidence,
                   help="the P(saving > 0) a recommendation to deploy requires (default 0.8)")
    p.add_argument("--price-range", action="store_true",
                   help="let the uncertainty draw $/GPU-hour from the hardware's list range (never over a "
                        "--usd-per-gpu-hour you entered)")
    p.add_argument("--prefix-cache-share", type=float, default=None, metavar="SHARE",
                   help="the share of prompt tokens served from the prefix cache, 0 to 1: those tokens are not "
                        "prefilled again (default: a --traffic trace's own, from Mooncake hash_ids, else 0)")
    p.add_argument("--ttft-slo-ms", type=float, default=None, metavar="MS",
                   help="mean time to first token a user may wait, ms (default: none stated; TTFT is reported, "
                        "not a constraint): the search and the fleet honour it beside --tpot-slo-ms")
    p.add_argument("--serving", default=PlanRequest.serving, metavar="HOW",
                   help="colocated (default: prefill and decode on the same replicas), disaggregated (a prefill pool "
                        "sized for the TTFT SLO and a decode pool for the TPOT SLO, each at its own TP, the KV cache "
                        "sent between them) or best (the cheaper of the two that meets both SLOs)")
    p.set_defaults(traffic=None, current_method="none")


def gpu_price(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gpu-price={text!r}: expected GPU=USD_PER_GPU_HOUR, e.g. h200=3.10") from None


class UsageError(Exception):
    """A flag argparse refused (a missing or unknown flag, a value of the wrong type, a --*-file it could not read)."""


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing its usage and exiting, so that main() reports it as one
    `error: ...` line like every other refusal."""

    def error(self, message: str):
        raise UsageError(f"{self.prog.removeprefix('python -m planner').strip() or 'planner'}: {message}")


def add_plan_command_flags(pl: argparse.ArgumentParser) -> None:
    """The flags of `plan` (and `report`, which takes the same)."""
    add_scenario(pl, method_required=False)
    add_plan_flags(pl)
    pl.add_argument("--traffic", help="a traffic profile (CSV, JSONL, Parquet): workload mix, volume, concurrency")
    pl.add_argument("--current-method", default="none", help="today's method ('none': no speculation)")
    pl.add_argument("--no-levers", action="store_true", help="skip the levers waterfall")
    pl.add_argument("--daily-shape", choices=["flat", "business_hours", "consumer_evening"],
                    help="the fleet by hour from the monthly volume and this daily shape (a --traffic file that "
                         "spans a day brings its own hours)")
    pl.add_argument("--spend-usd-per-month", type=float,
                    help="plan for what this monthly spend buys on --hardware x --tp (instead of a volume): the "
                         "output tokens that fleet serves under the SLO")
    pl.add_argument("--gpus", type=int, help="with --spend-usd-per-month: the fleet's GPUs (at the peak); with "
                                             "--billing fixed and no --usd-per-gpu-hour the spend implies the price")
    pl.add_argument("--compare-hardware", action="store_true",
                    help="the cheapest fleet on every GPU type of the catalogue (its TPs, with and without "
                         "speculation) for the same traffic and SLO, at your --dtype weights (like for like)")
    pl.add_argument("--compare-other-formats", action="store_true",
                    help="with --compare-hardware: let each GPU type pick any weight format (fp8, 4-bit) too; the "
                         "answer says where a cheaper format, not only a cheaper GPU, made the saving")
    pl.add_argument("--gpu-price", type=gpu_price, action="append", metavar="GPU=USD",
                    help="with --compare-hardware: a GPU type's $/GPU-hour (repeat it; default: list midpoints)")
