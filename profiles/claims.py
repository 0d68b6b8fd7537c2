"""Load and validate profiles/data/claims.yaml into planner.checks.claims.Claim records.

Every error names the file, the entry, the field, the value and what is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from planner.checks.claims import KINDS, Band, Claim
from profiles.catalog import DATA_DIR, BuildContext, read_yaml, sourced

FIELDS = ("claim", "attributed_to", "source", "kind", "params")
# text parameters that name a catalogue entry: checked against the catalogue when one is given
CATALOG_NAMES = {"model": "models", "hardware": "hardware", "workload": "workloads", "lever": "levers"}


def _number(ctx: BuildContext, field: str, v: Any, integer: bool = False) -> float | int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ctx.error(field, v, "a number")
    if integer:
        if v != int(v):
            raise ctx.error(field, v, "an integer")
        return int(v)
    return float(v)


def _param(ctx: BuildContext, field: str, kind: str, v: Any) -> Any:
    if kind == "number":
        return _number(ctx, field, v)
    if kind == "integer":
        return _number(ctx, field, v, integer=True)
    if kind == "text":
        if not isinstance(v, str) or not v:
            raise ctx.error(field, v, "non-empty text")
        return v
    if kind == "numbers":
        if not isinstance(v, list) or not v:
            raise ctx.error(field, v, "a non-empty list of numbers")
        return tuple(_number(ctx, f"{field}[{i}]", x) for i, x in enumerate(v))
    if not isinstance(v, dict) or set(v) != {"low", "high"}:  # a band
        raise ctx.error(field, v, "a mapping {low: <number>, high: <number>}")
    low, high = _number(ctx, f"{field}.low", v["low"]), _number(ctx, f"{field}.high", v["high"])
    if low > high:
        raise ctx.error(field, v, "low <= high")
    return Band(low, high)


def _claim(name: str, raw: Any, ctx: BuildContext, catalog) -> Claim:
    if not isinstance(raw, dict):
        raise ctx.error("(entry)", raw, "a mapping of fields")
    extra = sorted(set(raw) - set(FIELDS))
    if extra:
        raise ctx.error(extra[0], raw[extra[0]], "one of the fields " + ", ".join(FIELDS))
    for f in FIELDS:
        if f not in raw:
            raise ctx.error(f, "(missing)", "this required field to be present")
    for f in ("claim", "attributed_to"):
        if not isinstance(raw[f], str) or not raw[f].strip():
            raise ctx.error(f, raw[f], "non-empty text")
    kind = raw["kind"]
    if kind not in KINDS:
        raise ctx.error("kind", kind, "one of " + ", ".join(sorted(KINDS)))
    spec = KINDS[kind][1]
    params = raw["params"]
    if not isinstance(params, dict):
        raise ctx.error("params", params, f"a mapping of {', '.join(spec)}")
    extra = sorted(set(params) - set(spec))
    if extra:
        raise ctx.error(f"params.{extra[0]}", params[extra[0]], f"one of the {kind} parameters " + ", ".join(spec))
    out = {}
    for p, pkind in spec.items():
        if p not in params:
            raise ctx.error(f"params.{p}", "(missing)", f"{pkind} (a {kind} claim needs it)")
        out[p] = _param(ctx, f"params.{p}", pkind, params[p])
        table = CATALOG_NAMES.get(p)
        if catalog is not None and table is not None and out[p] not in getattr(catalog, table):
            raise ctx.error(f"params.{p}", out[p], f"a name in the catalogue's {table}: "
                            + ", ".join(sorted(getattr(catalog, table))))
    if kind == "batch_sweet_spot" and out["sweet_spot_max_batch"] not in out["batches"]:
        raise ctx.error("params.sweet_spot_max_batch", out["sweet_spot_max_batch"], "one of params.batches")
    return Claim(name=name, kind=kind, claim=raw["claim"], attributed_to=raw["attributed_to"],
                 source=sourced(ctx, "source", raw["source"]), params=out)


def load_claims(path: str | os.PathLike | None = None, *, catalog=None) -> tuple[Claim, ...]:
    """The claims in file order. With a catalogue, the models, hardware, workloads and levers they name must be in
    it."""
    p = Path(path) if path is not None else DATA_DIR / "claims.yaml"
    doc = read_yaml(p)
    return tuple(_claim(str(name), raw, BuildContext(p.name, str(name)), catalog)
                 for name, raw in doc["entries"].items())
