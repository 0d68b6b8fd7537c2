"""A per-request acceptance file (`accepted_tokens,steps[,num_spec_tokens]`: vLLM's per-request spec-decode metrics)
read by profiles/measured_acceptance.py: its pooled acceptance length and the spread of a request's TPOT come back
from requests drawn with known acceptance (a round trip); it reaches the plan through the sandboxed reader; broken
rows are refused naming the line, the field and the value."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner import plan as P
from planner.acceptance import rates as acc
from profiles import load_catalog
from profiles.measured_acceptance import MAX_REQUESTS, MeasuredAcceptanceError, read_measured_acceptance
from profiles.uploads import read_acceptance_file


def _requests(seed: int = 3, n: int = 2000, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(accepted drafts, steps) per request: each request's own alpha drawn around 0.7 (prompts differ), 20 to 400
    steps, each step accepting an i.i.d. chain of K drafts."""
    rng = np.random.default_rng(seed)
    alpha = np.clip(rng.normal(0.7, 0.1, n), 0.05, 0.98)
    steps = rng.integers(20, 400, n)
    accepted = np.zeros(n, int)
    for i in range(n):
        u = rng.random((steps[i], k)) < alpha[i]
        accepted[i] = np.cumprod(u, axis=1).sum()  # a draft counts when it and every earlier one are accepted
    return accepted, steps


def _csv(accepted, steps, k: int | None = None) -> bytes:
    head = "accepted_tokens,steps" + (",num_spec_tokens" if k else "")
    rows = [f"{a},{s}" + (f",{k}" if k else "") for a, s in zip(accepted.tolist(), steps.tolist(), strict=True)]
    return ("\n".join([head, *rows]) + "\n").encode()


def test_the_pooled_tau_and_the_tpot_spread_round_trip():
    accepted, steps = _requests()
    m = read_measured_acceptance("per_request.csv", _csv(accepted, steps))
    tau = (accepted + steps).sum() / steps.sum()
    assert m.acceptance_length == pytest.approx(tau, rel=1e-12)
    assert m.k == 0 and m.requests == 2000 and m.drafts == steps.sum()
    rel = tau * steps / (accepted + steps)  # a request's TPOT over the mean TPOT (step time / tau)
    assert np.asarray(m.tpot_spread) == pytest.approx(np.percentile(rel, np.arange(101)), rel=1e-12)
    assert m.tpot_spread[99] > m.tpot_spread[90] > m.tpot_spread[50]
    assert "K not in the file" in m.describe() and "p99" in m.describe()
    # without K in the file the plan takes it where the file is used; a K too small for tau is refused
    a, k = m.for_plan(4)
    assert (a.convention, a.value, k) == ("acceptance_length", pytest.approx(tau), 4)
    with pytest.raises(MeasuredAcceptanceError, match="measured at K >= 2"):
        m.for_plan(1)


def test_with_num_spec_tokens_the_rates_are_the_iid_chain_at_that_k():
    accepted, steps = _requests()
    m = read_measured_acceptance("per_request.csv", _csv(accepted, steps, k=3))
    assert m.k == 3 and len(set(m.per_position)) == 1
    assert float(acc.acceptance_length(m.per_position)) == pytest.approx(m.acceptance_length, rel=1e-9)
    a, k = m.for_plan(7)
    assert k == 3 and a.per_position == m.per_position and a.tpot_spread == m.tpot_spread
    # vLLM's own field names are read too
    vllm = read_measured_acceptance("r.csv", _csv(accepted, steps, k=3).replace(
        b"accepted_tokens,steps,num_spec_tokens", b"num_accepted_draft_tokens,num_spec_steps,num_spec_tokens"))
    assert vllm.tpot_spread == m.tpot_spread


def test_the_sandboxed_reader_hands_the_spread_to_the_plan():
    catalog = load_catalog()
    accepted, steps = _requests(n=400)
    m = read_acceptance_file("per_request.csv", _csv(accepted, steps, k=3))  # in the bounded worker
    a, k = m.for_plan(catalog.methods["eagle3"].default_k)
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", methods=("eagle3",), acceptance=a,
                        acceptance_method="eagle3", acceptance_k=k, tpot_percentile="p90")
    e3 = next(x for x in P.plan(req, catalog).methods if x.method == "eagle3")
    assert e3.tpot_at_slo_ms == pytest.approx(e3.tpot_ms * np.interp(90, np.arange(101), m.tpot_spread), rel=1e-9)
    mean = P.plan(dataclasses.replace(req, tpot_percentile="mean"), catalog)
    assert next(x for x in mean.methods if x.method == "eagle3").batch >= e3.batch


@pytest.mark.parametrize("body,says", [
    (b"accepted_tokens,steps\n10,5\n3,0\n", "line 3: steps='0'; expected a whole number >= 1"),
    (b"accepted_tokens,steps\n-1,5\n", "line 2: accepted_tokens='-1'; expected a whole number >= 0"),
    (b"accepted_tokens,steps\n2.5,5\n", "line 2: accepted_tokens='2.5'; expected a whole number >= 0"),
    (b"accepted_tokens,steps\nnan,5\n", "line 2: accepted_tokens='nan'"),
    (b"accepted_tokens,steps\n1e400,5\n", "line 2: accepted_tokens='1e400'"),
    (b"accepted_tokens,steps\n7,\n", "line 2: steps=''"),
    (b"accepted_tokens,steps,num_spec_tokens\n10,5,3\n16,5,3\n", "line 3: accepted_tokens=16 with steps=5; a step "
                                                                 "accepts at most K = 3 drafts, so at most 15"),
    (b"accepted_tokens,steps,num_spec_tokens\n10,5,3\n10,5,4\n", "line 3: num_spec_tokens='4'; expected one K"),
    (b"accepted_tokens,steps,num_spec_tokens\n10,5,33\n", "line 2: num_spec_tokens='33'"),
    (b"accepted_tokens,steps\n", "a CSV needs a header and at least one row"),
])
def test_broken_rows_are_refused_naming_line_field_and_value(body, says):
    with pytest.raises(MeasuredAcceptanceError) as e:
        read_measured_acceptance("per_request.csv", body)
    assert str(e.value).startswith("per_request.csv: ") and says in str(e.value)


def test_more_requests_than_allowed_are_refused():
    body = b"accepted_tokens,steps\n" + b"1,1\n" * (MAX_REQUESTS + 1)
    with pytest.raises(MeasuredAcceptanceError, match=f"{MAX_REQUESTS + 1:,} request rows; at most"):
        read_measured_acceptance("big.csv", body)
