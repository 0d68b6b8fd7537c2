"""Cost-only speculative heads for any target, and the tiny MTP target: built once from the target's
config.json with random (seeded) weights in the layout the pinned vLLM loads (calibration/targets/head_formats.py
documents each format and the vLLM model file it follows), cached under
`model_assets.cache_dir() / "heads" / f"{kind}-{hash12}"`.

Random heads accept almost nothing: they measure what drafting costs (draft passes, verification, the
engine's per-step overhead), not acceptance. A node builds the same head for a customer's own model from its
config.json and tokenizer alone ("what would EAGLE-3 cost on my hardware before I train one?").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from calibration.targets import head_formats, model_assets

# Tokenizer files copied next to a head, so the folder is a complete model directory for vLLM.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "chat_template.jinja")


def heads_dir() -> Path:
    return model_assets.cache_dir() / "heads"


def read_target_config(target_dir: Path) -> dict:
    path = Path(target_dir) / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except OSError as e:
        raise FileNotFoundError(f"target_dir={str(target_dir)!r} not allowed: no readable config.json "
                                f"({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"target config.json at {path}: not valid JSON ({e.msg})") from None
    head_formats.target_shapes(cfg)  # validate early: the error names the field and the value
    return cfg


def copy_tokenizer(src: Path, dest: Path) -> list[str]:
    copied = []
    for name in TOKENIZER_FILES:
        if (Path(src) / name).is_file():
            shutil.copyfile(Path(src) / name, dest / name)
            copied.append(name)
    return copied


def write_checkpoint(dest: Path, config: dict, tensors: dict) -> None:
    from safetensors.torch import save_file

    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})


def head_path(kind: str, target_dir: Path, *, seed: int = head_formats.DEFAULT_SEED,
              num_heads: int = head_formats.MEDUSA_HEADS) -> Path:
    """Where `ensure_head` keeps the head (built or not)."""
    cfg = read_target_config(target_dir)
    key = head_formats.cache_key(kind=kind, target_config=cfg, seed=seed, num_heads=num_heads)
    return heads_dir() / f"{kind}-{key}"


def ensure_head(kind: str, target_dir: Path, *, seed: int = head_formats.DEFAULT_SEED,
                num_heads: int = head_formats.MEDUSA_HEADS) -> Path:
    """The folder of a random `kind` head for the target at `target_dir` (only its config.json and tokenizer
    files are read), built on first use; kind in head_formats.KINDS."""
    head_formats.check_head_kind(kind)
    target_dir = Path(target_dir)
    cfg = read_target_config(target_dir)
    dest = head_path(kind, target_dir, seed=seed, num_heads=num_heads)
    if model_assets.is_complete(dest):
        return dest

    def build(tmp: Path) -> None:
        config = head_formats.head_config(kind=kind, target_config=cfg, num_heads=num_heads)
        tensors = head_formats.head_weights(kind=kind, target_config=cfg, seed=seed, num_heads=num_heads)
        write_checkpoint(tmp, config, tensors)
        copy_tokenizer(target_dir, tmp)

    model_assets.build_model_folder(dest, build, source=f"heads:{kind} seed={seed} target={target_dir}")
    return dest


def fetch_target_config(repo_id: str) -> Path:
    """A Hugging Face id's config.json and tokenizer files (never its weights), via huggingface_hub into
    `heads_dir() / "targets"`; a clear error on a node without the hub."""
    dest = heads_dir() / "targets" / repo_id.replace("/", "--")
    if (dest / "config.json").is_file():
        return dest
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(f"target={repo_id!r}: huggingface_hub is not installed, so its config.json cannot "
                                "be fetched; point the registry entry's model at a local folder instead") from None
    try:
        snapshot_download(repo_id, local_dir=str(dest), allow_patterns=["config.json", *TOKENIZER_FILES])
    except Exception as e:  # noqa: BLE001 - offline node, gated repo, unknown id: one clear message
        raise FileNotFoundError(f"target={repo_id!r}: cannot fetch its config.json from the Hugging Face hub "
                                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); on a node "
                                "without the hub, point the registry entry's model at a local folder") from None
    if not (dest / "config.json").is_file():
        raise FileNotFoundError(f"target={repo_id!r}: the Hugging Face repository has no config.json")
    return dest


def ensure_mtp_target() -> Path:
    """The tiny MiMo-architecture target with one MTP layer (asset `mimo-tiny-mtp`)."""
    return model_assets.ensure_mtp_target().path
