"""Copy the SpecBundle rows of the published speedup table (profiles/data/published/published_specdec.csv, ids SBD_*:
SGLang EAGLE-3 on H200, accept_length stated) into the acceptance library (profiles/data/acceptance/acceptance.csv),
one library row per published row (and each head in heads.csv), marked "from published_specdec.csv row ID".
Idempotent: rows already copied are left as they are.

    python tools/acceptance_from_published.py
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "profiles" / "data" / "published" / "published_specdec.csv"
LIBRARY = ROOT / "profiles" / "data" / "acceptance" / "acceptance.csv"
HEADS = ROOT / "profiles" / "data" / "acceptance" / "heads.csv"
# Same weights only (the library's rule: a head trained for one checkpoint is not measured on another); the
# Instruct-2507 and Coder checkpoints are not the catalogue's Qwen3 entries.
MODEL_KEYS = {"Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.3-70B-Instruct": "llama-3.3-70b",
              "Llama-4-Scout-17B-16E-Instruct": "llama-4-scout", "Kimi-K2-Instruct": "kimi-k2"}
WORKLOADS = {"MT-Bench": "chat", "GSM8K": "reasoning", "HumanEval": "code", "LiveCodeBench": "code"}


def library_row(r: dict[str, str]) -> dict[str, str]:
    steps, topk, n = map(int, re.search(r"_s(\d+)t(\d+)n(\d+)$", r["id"]).groups())
    dataset = r["dataset"].split(" (")[0]
    return {
        "id": "SBD-" + r["id"].removeprefix("SBD_"), "source": r["source"], "title": r["title"], "date": "2025-12-23",
        "model": r["model"], "model_key": MODEL_KEYS.get(r["model"], ""),
        "head": re.search(r"\(([^,]+),", r["method"]).group(1), "method": "eagle3", "engine": "sglang",
        "engine_version": "not stated", "gpu": "H200", "dataset": dataset, "workload": WORKLOADS[dataset],
        "k": str(steps), "tree": "chain" if topk == 1 else f"steps={steps},topk={topk},draft_tokens={n}",
        "temperature": "0", "acceptance_length": r["tau"], "draft_acceptance_rate": "", "per_position": "",
        "per_position_convention": "",
        "notes": f"from published_specdec.csv row {r['id']}; batch {r['batch'].split(' ')[0]}; SGLang accept_length "
                 "(bonus token included); max_new_tokens 2048",
        "quote": r["quote"], "verified": "yes",
    }


def main() -> int:
    with PUBLISHED.open(newline="") as f:
        published = [r for r in csv.DictReader(f) if r["id"].startswith("SBD_")]
    with LIBRARY.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, have = reader.fieldnames, {r["id"] for r in reader}
    new = [row for row in map(library_row, published) if row["id"] not in have]
    with LIBRARY.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=fields, lineterminator="\r\n").writerows(new)
    print(f"{len(new)} rows added to {LIBRARY.relative_to(ROOT)} ({len(published) - len(new)} already there)")
    with HEADS.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, have = reader.fieldnames, {(r["model"], r["head"]) for r in reader}
    heads = {}
    for row in map(library_row, published):
        heads.setdefault((row["model"], row["head"]), {
            "model": row["model"], "model_key": row["model_key"], "method": "eagle3", "head": row["head"],
            "source": row["source"], "date": row["date"],
            "notes": "measured in SpecForge's SpecBundle dashboard data (SGLang, H200); "
                     "the acceptance library's SBD-* rows"})
    new_heads = [h for key, h in heads.items() if key not in have]
    with HEADS.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=fields, lineterminator="\r\n").writerows(new_heads)
    print(f"{len(new_heads)} heads added to {HEADS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
