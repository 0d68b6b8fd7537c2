"""Each serving engine's speculation overheads and the per-class speedup error, read from the speculation fit's
shipped YAML (profiles/data/fitted/speculation_vllm.yaml: `per_engine`, `loso_mape_by_class`; written by
tools/fit_speculation.py, calibration/fitting/engines.py) into planner.physics.engines records."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from planner.physics.engines import ENGINE_TERMS, ENGINES, EngineTerms, SwitchingOverhead

ClassErrors = dict[tuple[str, str], tuple[float, int]]


def load_engine_terms(path: str | os.PathLike) -> tuple[dict[str, EngineTerms], ClassErrors, tuple[float, int] | None]:
    """({engine: EngineTerms}, {(engine, dense|moe): (leave-one-source-out MAPE, rows)}, (overall MAPE, rows));
    empty / None where the YAML has no per-engine sections (an older fit)."""
    doc = (yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}).get("fit") or {}
    engines = {}
    for eng, e in (doc.get("per_engine") or {}).items():
        params = e["params"]
        missing = [n for n in ENGINE_TERMS if n not in params]
        if missing:
            raise ValueError(f"{Path(path).name}: per_engine.{eng}.params lacks {missing} (needs {ENGINE_TERMS})")
        engines[eng] = EngineTerms(
            engine=eng, rows=int(e["rows"]), sources=int(e["sources"]), versions=tuple(e.get("versions") or ()),
            held={n: p["prior"] for n, p in params.items() if p.get("prior")},
            stderr={n: float(p["stderr"]) for n, p in params.items() if p.get("stderr") is not None},
            **{n: float(params[n]["value"]) for n in ENGINE_TERMS})
    classes = {tuple(k.split("/", 1)): (float(v["mape"]), int(v["rows"]))
               for k, v in (doc.get("loso_mape_by_class") or {}).items()}
    overall = (float(doc["loso_mape"]), int(doc["rows"])) if "loso_mape" in doc and "rows" in doc else None
    return engines, classes, overall


def load_switching_overheads(path: str | os.PathLike) -> dict[str, SwitchingOverhead]:
    """{engine: SwitchingOverhead} from profiles/data/engine_switching.yaml: what an engine's own per-batch speculation
    switch costs where it drafts nothing, each with its source and date."""
    name = Path(path).name
    doc = (yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}).get("entries") or {}
    out = {}
    for eng, e in doc.items():
        if eng not in ENGINES:
            raise ValueError(f"{name}: entry {eng!r} is not an engine: one of {', '.join(ENGINES)}")
        xs, ys = tuple(float(x) for x in e["concurrency"]), tuple(float(y) for y in e["tpot_fraction"])
        if len(xs) != len(ys) or not xs or any(b <= a for a, b in zip(xs, xs[1:])):
            raise ValueError(f"{name}: entry {eng!r}: field 'concurrency' = {list(xs)} with 'tpot_fraction' = "
                             f"{list(ys)}: expected as many fractions as concurrencies, concurrencies increasing")
        if any(y < 0 for y in ys):
            raise ValueError(f"{name}: entry {eng!r}: field 'tpot_fraction' = {list(ys)}: expected fractions >= 0")
        if not e.get("source") or not e.get("date"):
            raise ValueError(f"{name}: entry {eng!r}: fields 'source' and 'date' are required (got "
                             f"{e.get('source')!r}, {e.get('date')!r})")
        out[eng] = SwitchingOverhead(eng, xs, ys, bool(e.get("measured", False)), str(e["source"]), str(e["date"]))
    return out
