"""Typed reads of a config.json's fields, and the error every refusal raises (profiles/model_config.py and
profiles/model_layers.py read through these)."""

from __future__ import annotations

import math
from typing import Any

SUPPORTED = ("decoder-only transformers: dense or MoE (routed and shared experts, first dense layers, per-layer MoE "
             "lists), GQA or MLA attention, sliding-window and linear-attention layers, Mamba-2 hybrids "
             "(hybrid_override_pattern), per-layer block_configs (Nemotron-NAS), native MTP layers")


class ModelConfigError(ValueError):
    """A config.json the planner cannot model: the message names the field, its value and what is supported."""


def err(field: str, value: Any, allowed: str) -> ModelConfigError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ModelConfigError(f"config.json field '{field}' = {shown}: expected {allowed}")


class Cfg:
    """Typed reads of one config level; a multimodal wrapper's text_config wins over its top level."""

    def __init__(self, doc: dict[str, Any]):
        text = doc.get("text_config")
        self.prefix = ""
        if text is not None:
            if not isinstance(text, dict):
                raise err("text_config", text, "a JSON object (the language model's config)")
            self.prefix = "text_config."
        self.top = doc
        self.c = {**{k: v for k, v in doc.items() if k != "text_config"}, **(text or {})}

    def where(self, key: str) -> str:
        text = self.top.get("text_config")
        return f"{self.prefix}{key}" if isinstance(text, dict) and key in text else key

    def has(self, key: str) -> bool:
        return self.c.get(key) is not None

    def int(self, key: str, default: Any = ..., *, lo: int = 1, hi: int = 10_000_000) -> int:
        v = self.c.get(key)
        if v is None:
            if default is ...:
                raise err(key, "(missing)", f"an integer: this field is required ({SUPPORTED})")
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) \
                or not lo <= v <= hi:
            raise err(self.where(key), v, f"an integer in [{lo}, {hi:,}]")
        return int(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.c.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise err(self.where(key), v, "true or false")
        return v

    def str(self, key: str) -> str:
        v = self.c.get(key)
        return v if isinstance(v, str) else ""


def number(value: Any, field: str, *, lo: float, hi: float, integer: bool = True) -> Any:
    """A nested field's number (an entry of block_configs, a list item), checked as Cfg.int checks top-level ones."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (integer and value != int(value)) or not lo <= value <= hi:
        raise err(field, value, f"{'an integer' if integer else 'a number'} in [{lo:,}, {hi:,}]")
    return int(value) if integer else float(value)
