"""The seed article's claims: the shipped YAML loads and is checked field by field; each claim is evaluated with the
thresholds the data gives; the rows say where a claim holds and where it does not."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from planner.checks.claims import KINDS, Band, ClaimRow, Status, evaluate_claims
from planner.plan import PlanRequest
from profiles.catalog import ProfileError
from profiles.claims import load_claims

DEFAULT = PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=50.0, monthly_output_tokens=2e10)


@pytest.fixture(scope="module")
def shipped(catalog):
    return load_claims(catalog=catalog)


@pytest.fixture(scope="module")
def rows(catalog, shipped):
    return {c.name: r for c, r in zip(shipped, evaluate_claims(DEFAULT, catalog, shipped), strict=True)}


def _one(catalog, claim, req=DEFAULT, **params) -> ClaimRow | None:
    c = dataclasses.replace(claim, params={**claim.params, **params})
    (row,) = evaluate_claims(req, catalog, (c,)) or (None,)
    return row


def _by_name(shipped, name):
    return next(c for c in shipped if c.name == name)


def test_the_shipped_claims_are_sourced_and_dated_and_cover_every_kind(shipped):
    assert len(shipped) == 16
    assert {c.kind for c in shipped} == set(KINDS)
    for c in shipped:
        assert c.claim and c.attributed_to and c.source.source
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", c.source.date)
    red_hat = _by_name(shipped, "code_cpm_cut")
    assert "19.4 %" in red_hat.claim and red_hat.attributed_to == "Red Hat (2026-04), via the seed"
    assert red_hat.params["cpm_change"] == Band(-0.30, -0.10)


def test_every_claim_is_evaluated_on_the_default_request_in_file_order(rows, shipped):
    assert list(rows) == [c.name for c in shipped]
    for r in rows.values():
        assert r.model_says and r.verdict and r.conditions
        assert r.as_dict()["claim"] == r.claim and set(r.as_dict()) == {
            "claim", "attributed to", "what the model says", "verdict", "conditions"}


def test_mtp_k1_cannot_beat_its_acceptance_length(rows):
    says = rows["mtp_deepseek"].model_says
    assert says.startswith("K=1, alpha 0.80 = draft acceptance rate 80 % = tau 1.80")  # tau = 1 + alpha at K=1
    speedup = float(re.search(r"Model: ([0-9.]+)x", says).group(1))
    assert 1.0 < speedup < 1.80
    assert "K=1," in says.split("Model:")[1]
    assert rows["mtp_deepseek"].status == Status.DIFFERS  # holds only as an upper bound


def test_the_alpha_cut_rises_with_alpha(rows):
    cuts = [float(v) for v in re.search(r"CPM cut (-?\d+) % vs (-?\d+) %", rows["alpha_decides_the_cut"].model_says)
            .groups()]
    assert cuts[1] > cuts[0]
    assert rows["alpha_decides_the_cut"].verdict == "direction holds; size depends on batch"


def test_finetune_compute_cost_is_gpus_times_hours_times_the_training_price(rows, catalog):
    train = catalog.hardware[catalog.prices["training_hardware"]]
    lo, hi = 2 * 6 * train.usd_per_gpu_hour_low, 4 * 12 * train.usd_per_gpu_hour_high
    r = rows["finetune_compute_cost"]
    assert r.model_says.endswith(f"= ${lo:,.0f}-${hi:,.0f}")
    assert r.verdict == ("in range" if lo <= 1800 and hi >= 400 else "differs")


def test_verdicts_follow_the_thresholds_in_the_data(catalog, shipped):
    e3 = _by_name(shipped, "eagle3_speedup")
    sp = float(re.match(r"([0-9.]+)x", _one(catalog, e3).model_says).group(1))
    assert _one(catalog, e3, speedup=Band(sp - 0.5, sp + 0.5)).verdict == "holds"
    assert _one(catalog, e3, speedup=Band(sp + 0.5, sp + 1.0)).verdict == "below the claim"
    assert _one(catalog, e3, speedup=Band(sp - 1.0, sp - 0.5)).verdict == "above the claim"
    lever4 = _by_name(shipped, "alpha_by_lever_4")
    assert _one(catalog, lever4, alpha=0.0).verdict == "holds"
    assert _one(catalog, lever4, alpha=1.0).verdict == "does not hold here"
    cost = _by_name(shipped, "finetune_compute_cost")
    assert _one(catalog, cost, usd=Band(1e6, 2e6)).verdict == "differs"


def test_a_claim_about_something_the_catalogue_lacks_is_left_out(catalog, shipped):
    mtp = _by_name(shipped, "mtp_deepseek")
    assert _one(catalog, mtp, model="no-such-model") is None
    assert _one(catalog, mtp) is not None


def test_a_tight_slo_leaves_out_the_claims_that_need_a_feasible_baseline(catalog, shipped):
    tight = dataclasses.replace(DEFAULT, tpot_slo_ms=8.0)
    names = [c.name for c in shipped]
    got = evaluate_claims(tight, catalog, shipped)
    assert len(got) == len(shipped) - 2
    claims = {r.claim for r in got}
    left_out = [n for n, c in zip(names, shipped) if c.claim not in claims]
    assert left_out == ["alpha_decides_the_cut", "code_cpm_cut"]


def test_each_row_carries_its_status_as_a_number_decided_with_its_verdict(catalog, shipped):
    """The status is data set where the verdict is decided (never parsed back from the words), and a number the
    Claims page orders and colours by: not modelled < differs < holds."""
    rows = evaluate_claims(DEFAULT, catalog, shipped)
    assert all(isinstance(r.status, Status) for r in rows)
    assert Status.OUTSIDE < Status.DIFFERS < Status.HOLDS
    by = {r.verdict: r.status for r in rows}
    assert by.get("outside the model", Status.OUTSIDE) == Status.OUTSIDE
    assert {r.status for r in rows} >= {Status.HOLDS, Status.DIFFERS}
    # a verdict that starts "holds" but carries a qualifier is decided as differing, not read from its first word
    assert all(r.status == Status.DIFFERS for r in rows if r.verdict.startswith("holds only"))


# --- the loader --------------------------------------------------------------------------------------------------


def _write(tmp_path, entry: dict, name="x"):
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump({"entries": {name: entry}}), encoding="utf-8")
    return p


GOOD = {"claim": "c", "attributed_to": "a", "source": {"source": "s", "date": "2026-04-15"}, "kind": "eagle3_speedup",
        "params": {"speedup": {"low": 3.0, "high": 6.5}}}


@pytest.mark.parametrize("change, message", [
    ({"kind": "magic"}, "field 'kind' = 'magic': expected one of "),
    ({"params": {}}, "field 'params.speedup' = '(missing)': expected band"),
    ({"params": {"speedup": {"low": 7, "high": 6.5}}},
     "field 'params.speedup' = {'high': 6.5, 'low': 7}: expected low <= high"),
    ({"params": {"speedup": {"low": 3, "high": 6.5}, "k": 4}},
     "field 'params.k' = 4: expected one of the eagle3_speedup"),
    ({"params": {"speedup": [3, 6.5]}}, "expected a mapping {low: <number>, high: <number>}"),
    ({"source": {"source": "s", "date": "April 2026"}}, "field 'source.date' = 'April 2026': expected an ISO date"),
    ({"claim": ""}, "field 'claim' = '': expected non-empty text"),
    ({"verdict": "holds"}, "field 'verdict' = 'holds': expected one of the fields"),
])
def test_the_loader_names_the_entry_field_value_and_what_is_allowed(tmp_path, change, message):
    with pytest.raises(ProfileError) as err:
        load_claims(_write(tmp_path, {**GOOD, **change}))
    assert str(err.value).startswith("claims.yaml: entry 'x': ") and message in str(err.value)


def test_the_loader_checks_names_against_the_catalogue(tmp_path, catalog):
    entry = {**GOOD, "kind": "p_eagle_over_eagle3", "params": {"hardware": "h900", "ratio": {"low": 1.5, "high": 1.9}}}
    assert load_claims(_write(tmp_path, entry))[0].params["hardware"] == "h900"  # without a catalogue: text
    with pytest.raises(ProfileError, match="field 'params.hardware' = 'h900': expected a name in the catalogue's"):
        load_claims(_write(tmp_path, entry), catalog=catalog)
    sweet = {**GOOD, "kind": "batch_sweet_spot", "params": {"batches": [1, 2, 4], "sweet_spot_max_batch": 16}}
    with pytest.raises(ProfileError, match="'params.sweet_spot_max_batch' = 16: expected one of params.batches"):
        load_claims(_write(tmp_path, sweet))
