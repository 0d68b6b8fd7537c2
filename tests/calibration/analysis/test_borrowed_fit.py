"""The end-to-end fit of borrowed step-time terms (calibration/fitting/borrowed.py): round trip and bad input."""

import dataclasses

import numpy as np
import pytest

from calibration.fitting.borrowed import TpotRow, _efficiency, fit_hardware, read_rows, tpot_ms
from profiles import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _rows(catalog, scale, noise):
    rng = np.random.default_rng(7)
    donor = catalog.fitted_efficiency[("h200", "fp8")]
    eff = _efficiency(catalog, "mi300x", "fp8", ("h200", "fp8"), (scale, catalog.hardware["mi300x"].efficiency.eta_bw))
    rows = []
    for c in (1, 4, 16, 32, 64):
        base = TpotRow(f"R{c}", "test", "2026-12-02", "deepseek-v3", "fp8", "h200", 8, "vllm", c, 2000.0, 1.0,
                       "reference")
        rows.append(dataclasses.replace(base, tpot_ms=tpot_ms(catalog, base, donor)))  # donor measured = its model
        mi = dataclasses.replace(base, id=f"M{c}", hardware="mi300x", used="fit")
        rows.append(dataclasses.replace(mi, tpot_ms=tpot_ms(catalog, mi, eff) * float(np.exp(rng.normal(0, noise)))))
    return rows


def test_fit_recovers_the_overhead_scale(catalog):
    fit = fit_hardware(catalog, "mi300x", _rows(catalog, 1.7, 0.01))
    assert fit.donor == ("h200", "fp8")
    assert fit.result.value("overhead_scale") == pytest.approx(1.7, rel=0.03)
    assert "eta_bw" in fit.result.held  # held at the hardware's own assumption
    assert fit.tpot_error < 0.05


def test_reference_puts_measurements_on_the_donor_software(catalog):
    rows = _rows(catalog, 1.0, 0.0)
    slow = [dataclasses.replace(r, tpot_ms=2.0 * r.tpot_ms) for r in rows]  # both GPUs twice as slow: old software
    assert fit_hardware(catalog, "mi300x", slow).result.value("overhead_scale") == pytest.approx(1.0, rel=0.02)


def test_bad_input_names_field_and_value(catalog, tmp_path):
    with pytest.raises(ValueError, match="hardware 'b300'"):
        fit_hardware(catalog, "b300", _rows(catalog, 1.0, 0.0))
    src = (read_rows.__defaults__[0]).read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "t.csv"
    bad.write_text("\n".join([src[0], src[1].replace(",MI300X,", ",TPU,")]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="gpu 'TPU'"):
        read_rows(bad)


def test_shipped_table_rows_are_sourced():
    rows = read_rows()
    assert {r.used for r in rows} == {"fit", "check", "reference"}
    assert all(r.source.startswith("github:") and "@" in r.source for r in rows)
