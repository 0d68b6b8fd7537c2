"""Known exports, recognised by their columns (normalised names, all required) and named in the profile. Their
data is read by the reader of their file format (CSV, JSON lines, Parquet ...); what differs per product is
which column plays which role and whether token columns are totals over a time bucket."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFormat:
    """An export recognised by its columns (normalised names, all required)."""

    label: str
    columns: frozenset[str]
    roles: tuple[tuple[str, str], ...] = ()  # role -> normalised column, where SYNONYMS' order would differ
    totals: bool = False  # token columns are totals per row over `weight` requests (time-bucketed export)


# Azure LLM inference trace (Azure/AzurePublicDataset, 2023/2024): TIMESTAMP, ContextTokens, GeneratedTokens.
AZURE = KnownFormat("Azure LLM inference trace", frozenset({"timestamp", "contexttokens", "generatedtokens"}))
# BurstGPT (HPMLL/BurstGPT): Timestamp (s since the trace began), Model, Request/Response tokens, Log Type.
BURSTGPT = KnownFormat("BurstGPT", frozenset({"timestamp", "model", "request_tokens", "response_tokens"}),
                       roles=(("endpoint", "log_type"),))
# LiteLLM spend logs (LiteLLM_SpendLogs table): startTime, model, prompt_tokens, completion_tokens.
LITELLM = KnownFormat("LiteLLM spend log", frozenset({"starttime", "model", "prompt_tokens", "completion_tokens"}),
                      roles=(("timestamp", "starttime"),))
# OpenAI usage exports: the legacy dashboard CSV (n_context_tokens_total over n_requests per bucket) and the
# Usage API's completions buckets (input_tokens, output_tokens over num_model_requests from start_time).
OPENAI_LEGACY = KnownFormat("OpenAI usage export", frozenset({"n_context_tokens_total", "n_generated_tokens_total"}),
                            roles=(("weight", "n_requests"),), totals=True)
OPENAI_USAGE = KnownFormat("OpenAI usage export", frozenset({"input_tokens", "output_tokens", "num_model_requests"}),
                           roles=(("weight", "num_model_requests"), ("timestamp", "start_time")), totals=True)
TEMPLATE = KnownFormat("Per-request rows (this app's template)",
                       frozenset({"timestamp", "workload", "prompt_tokens", "output_tokens"}))

KNOWN_FORMATS = (AZURE, BURSTGPT, LITELLM, OPENAI_LEGACY, OPENAI_USAGE, TEMPLATE)
