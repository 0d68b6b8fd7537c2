"""Regenerate the shipped sample traffic profiles and templates (seeded, reproducible).

    python profiles/samples/make_samples.py

Samples are synthetic: sampled request logs (1 row in `weight` requests) over one day with a diurnal
arrival pattern. Their mixes and lengths are illustrations, not measurements.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DAY_START = pd.Timestamp("2026-11-02T00:00:00Z")


def _arrivals(rng: np.random.Generator, n: int) -> pd.Series:
    # diurnal: more traffic in the (UTC) working day; a sine on the hour of day
    hours = rng.uniform(0, 24, size=n * 3)
    keep = rng.uniform(0, 1, size=hours.size) < 0.55 + 0.45 * np.sin((hours - 8) / 24 * 2 * np.pi)
    h = np.sort(hours[keep][:n])
    return pd.Series(DAY_START + pd.to_timedelta(h * 3600, unit="s")).dt.strftime("%Y-%m-%dT%H:%M:%SZ").to_numpy()


def _requests(rng, n, mix, weight):
    """mix: list of (workload, language, share of requests, prompt mean, output mean)."""
    shares = np.array([m[2] for m in mix])
    idx = rng.choice(len(mix), size=n, p=shares / shares.sum())
    prompt = np.array([m[3] for m in mix])[idx]
    output = np.array([m[4] for m in mix])[idx]
    return pd.DataFrame({
        "timestamp": _arrivals(rng, n),
        "workload": [mix[i][0] for i in idx],
        "language": [mix[i][1] for i in idx],
        "prompt_tokens": np.maximum(1, rng.lognormal(np.log(prompt), 0.5)).round().astype(int),
        "output_tokens": np.maximum(1, rng.lognormal(np.log(output), 0.6)).round().astype(int),
        "weight": weight,
    })


def main() -> None:
    rng = np.random.default_rng(20261129)
    # 1. A bilingual SaaS assistant: English, Mandarin and Cantonese chat plus some translation.
    saas = _requests(rng, 4000, [
        ("chat", "english", 0.30, 700, 350),
        ("chat", "mandarin", 0.32, 600, 380),
        ("chat", "cantonese", 0.26, 600, 360),
        ("translation", "mandarin", 0.12, 500, 520),
    ], weight=400)
    saas.to_csv(HERE / "bilingual_saas.csv", index=False)
    # 2. A code-completion product: short completions, some agentic tool calls.
    code = _requests(rng, 5000, [
        ("code", "english", 0.80, 1500, 220),
        ("agent", "english", 0.15, 4000, 260),
        ("chat", "english", 0.05, 800, 400),
    ], weight=600)
    code.to_json(HERE / "code_completion.jsonl", orient="records", lines=True)
    # 3. A RAG summarization service: long prompts.
    rag = _requests(rng, 3000, [
        ("rag_summarization", "english", 0.70, 11000, 480),
        ("chat", "english", 0.20, 900, 350),
        ("translation", "english", 0.10, 700, 600),
    ], weight=250)
    rag["prompt_tokens"] = rag["prompt_tokens"].clip(upper=100_000)
    rag.to_parquet(HERE / "rag_summarization.parquet", index=False)
    # Templates
    saas.head(5).to_csv(HERE / "template_requests.csv", index=False)
    pd.DataFrame({
        "workload": ["chat", "code", "rag_summarization"],
        "language": ["english", "english", "english"],
        "monthly_output_tokens": [6e9, 3e9, 1e9],
        "prompt_tokens": [800, 1500, 12000],
        "output_tokens": [400, 250, 500],
    }).to_csv(HERE / "template_mix.csv", index=False)


if __name__ == "__main__":
    main()
