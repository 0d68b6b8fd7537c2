"""One replica under the TPOT SLO: the one model the CPM search and the fleet share.

A replica (tp GPUs) decodes a batch of b sequences at a decode TPOT t(b) per token (planner.physics.serving) and also
prefills every arriving request's prompt, t_p GPU-seconds each (compute-bound; chunked prefill shares the
replica's time with decode). With lambda requests/s arriving, each of O output tokens on average:
    prefill share of the replica's time   rho = lambda * t_p                       (< 1)
    TPOT a user sees                       t(b) / (1 - rho)                          (decode gets 1 - rho)
    Little's law (sequences in flight)     b = lambda * O * t(b) / (1 - rho)
At full load (the replica kept at batch b) Little's law fixes the arrival rate:
    lambda = b / (O t(b) + b t_p),  rho = b t_p / (O t(b) + b t_p),  TPOT seen = t(b) + b t_p / O,
    output tokens/s = lambda O = b / TPOT seen.
The CPM search (planner.search.grid) keeps the largest batch whose TPOT seen at full load meets the SLO and prices the
replica's output tokens/s there ("CPM at full load"); the fleet (planner.fleet) sizes the replicas of each hour
with the same prefill share and TPOT seen at that hour's load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReplicaLoad:
    """A replica at a decode batch and an arrival rate (arrays broadcast over the inputs)."""

    requests_per_s: np.ndarray
    prefill_share: np.ndarray  # rho: the share of the replica's time spent on prefill
    tpot_seen_s: np.ndarray  # decode TPOT / (1 - rho): what a user sees
    output_tokens_per_s: np.ndarray  # lambda x O


def full_load_requests_per_s(*, tpot_s, batch, prefill_s, output_tokens) -> np.ndarray:
    """The arrival rate that keeps a replica at `batch` (Little's law with prefill sharing):
    lambda = b / (O t(b) + b t_p)."""
    b = np.asarray(batch, float)
    return b / (np.asarray(output_tokens, float) * np.asarray(tpot_s, float) + b * np.asarray(prefill_s, float))


def replica_load(*, tpot_s, batch, prefill_s, output_tokens, requests_per_s=None) -> ReplicaLoad:
    """The replica at decode TPOT `tpot_s` (seconds per token at `batch`), with `prefill_s` GPU-seconds of prefill
    per request of `output_tokens` output tokens, serving `requests_per_s` (None: full load at `batch`)."""
    t = np.asarray(tpot_s, float)
    pre = np.asarray(prefill_s, float)
    out = np.asarray(output_tokens, float)
    lam = (full_load_requests_per_s(tpot_s=t, batch=batch, prefill_s=pre, output_tokens=out)
           if requests_per_s is None else np.asarray(requests_per_s, float))
    rho = lam * pre
    with np.errstate(divide="ignore", invalid="ignore"):
        seen = np.where(rho < 1, t / np.where(rho < 1, 1.0 - rho, 1.0), np.inf)
    return ReplicaLoad(requests_per_s=lam, prefill_share=rho, tpot_seen_s=seen, output_tokens_per_s=lam * out)
