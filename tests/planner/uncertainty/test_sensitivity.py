"""How sure we are: the tornado and the Monte Carlo vary what decides the sign of the saving, and draw the step
time from the fit's own error where the hardware is fitted."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from planner import plan as P
from planner.uncertainty import sensitivity as S
from profiles.catalog import FITTED_STEPTIME_YAML

REQ = P.PlanRequest(model="llama-3.3-70b", hardware="h100-sxm", tp=4, monthly_output_tokens=2e10)


def test_fit_sigma_comes_from_the_fits_held_out_error(catalog):
    doc = yaml.safe_load(FITTED_STEPTIME_YAML.read_text())
    err = next(e["tpot_mape_held_out"] for e in doc["entries"].values()
               if (e["hardware"], e["dtype"]) == ("h100-sxm", "bf16"))
    assert S.fit_sigma(catalog, "h100-sxm", "bf16") == pytest.approx(err * np.sqrt(np.pi / 2), rel=1e-3)
    # MI300X (no kernel data) borrows a fitted GPU's terms: its sigma is the borrowed fit's leave-one-out TPOT error
    borrowed = yaml.safe_load((FITTED_STEPTIME_YAML.parent / "steptime_borrowed.yaml").read_text())
    band = borrowed["entries"]["mi300x"]["tpot_error"]
    assert S.fit_sigma(catalog, "mi300x", "bf16") == pytest.approx(band * np.sqrt(np.pi / 2), rel=1e-3)
    assert S.fit_sigma(catalog, "a100-80gb-sxm", "fp8") is None  # no fit of that format: assumed efficiencies


def test_tornado_moves_the_saving_with_the_step_time_and_names_its_ranges(catalog):
    bars = {b.driver: b for b in S.tornado(REQ, catalog, "eagle3")}
    bw = bars["Weight-streaming efficiency eta_bw"]
    assert "fit +-2 sigma" in bw.range
    assert bw.swing_pct > 0
    assert all(np.isfinite(b.mid_cpm_change_pct) for b in bars.values())
    # the price moves only when the request asks for the list range (and the user entered none)
    assert "$/GPU-hour (list range)" not in bars
    import dataclasses

    ranged = {b.driver: b for b in S.tornado(dataclasses.replace(REQ, price_range=True), catalog, "eagle3")}
    # the price scales every configuration alike: it cannot move the relative saving
    assert ranged["$/GPU-hour (list range)"].swing_pct == pytest.approx(0.0, abs=1e-9)
    entered = dataclasses.replace(REQ, price_range=True, usd_per_gpu_hour=2.5)
    assert "$/GPU-hour (list range)" not in {b.driver for b in S.tornado(entered, catalog, "eagle3")}


def test_monte_carlo_is_seeded_and_the_hardware_draws_widen_it(catalog):
    a = S.monte_carlo(REQ, catalog, "eagle3", k=2, samples=200, seed=3)
    b = S.monte_carlo(REQ, catalog, "eagle3", k=2, samples=200, seed=3)
    assert np.array_equal(a.monthly_saving_usd, b.monthly_saving_usd)
    flat = S.monte_carlo(REQ, catalog, "eagle3", k=2, samples=200, seed=3, sample_hardware=False, sample_price=False)
    wide = S.monte_carlo(REQ, catalog, "eagle3", k=2, samples=200, seed=3, sample_price=False)
    assert np.nanstd(wide.cpm_change_pct) > np.nanstd(flat.cpm_change_pct)
    with pytest.raises(P.PlanError, match="samples=5"):
        S.monte_carlo(REQ, catalog, "eagle3", k=2, samples=5)


def test_speculation_overheads_are_drawn_from_their_fit(catalog):
    import dataclasses

    import yaml

    from calibration.fitting.speculation import OUT_YAML

    se = catalog.fitted_speculation_stderr
    # a parameter the published rows identify is drawn from its standard error; one held at its prior has none
    shipped = yaml.safe_load(OUT_YAML.read_text())["fit"]["params"]
    for name in ("t_spec_s", "sampler_vocab_passes"):
        if shipped[name]["stderr"] is None:
            assert name not in se
        else:
            assert se[name] == pytest.approx(shipped[name]["stderr"]) and se[name] > 0
    assert se["sampler_vocab_passes"] > 0
    # the fit's held-out speedup error is drawn too (its own seeded stream): left out of both, so that the extra
    # spread measured here is the overheads' alone
    exact = dataclasses.replace(catalog, speculation_class_error={}, speculation_overall_error=None)
    without = dataclasses.replace(exact, fitted_speculation_stderr={})
    kw = dict(k=2, samples=300, seed=5, sample_price=False)
    drawn = S.monte_carlo(REQ, exact, "eagle3", **kw)
    fixed = S.monte_carlo(REQ, without, "eagle3", **kw)
    # same seeds for alpha and the step time: the extra spread is the speculation overheads' own
    assert np.nanstd(drawn.cpm_change_pct) > np.nanstd(fixed.cpm_change_pct)
    bars = {b.driver: b for b in S.tornado(REQ, catalog, "eagle3")}
    spec = bars["Speculation overheads (published fit +-2 sigma)"]
    assert "vocabulary passes" in spec.range
    assert spec.low_cpm_change_pct < spec.mid_cpm_change_pct < spec.high_cpm_change_pct  # lower overhead saves more
    assert spec.driver not in {b.driver for b in S.tornado(REQ, without, "eagle3")}
    # a calibrated set measured its own overheads: the published fit's errors do not apply to it
    calibrated = dataclasses.replace(catalog.hardware["h100-sxm"].efficiency, calibrated=True)
    assert S.spec_sigma(catalog, calibrated) == {}


def test_a_typed_price_equal_to_the_list_midpoint_is_never_drawn_over(catalog):
    """Drawing the price from the list range is asked for (price_range); a price the user typed stays fixed in every
    draw even when it equals the list midpoint, and only no price at all is drawn."""
    import dataclasses

    mid = catalog.hardware[REQ.hardware].usd_per_gpu_hour_mid
    asked = dataclasses.replace(REQ, price_range=True)
    listed = S.monte_carlo(asked, catalog, "eagle3", k=2, samples=60, seed=3, sample_hardware=False)
    typed = S.monte_carlo(dataclasses.replace(asked, usd_per_gpu_hour=mid), catalog, "eagle3", k=2, samples=60,
                          seed=3, sample_hardware=False)
    assert listed.price_drawn and not typed.price_drawn
    assert np.ptp(listed.reference_bill_usd_per_month) > 0  # the listed price moves the bill
    assert np.ptp(typed.reference_bill_usd_per_month) == 0  # the typed one does not (acceptance does not move today)
