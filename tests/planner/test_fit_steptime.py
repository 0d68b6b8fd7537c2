"""The step-time fit (tools/fit_steptime.py): round trips on synthetic data, bad input, the shipped YAML."""

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import fit_steptime as fs  # noqa: E402


def gemm_rows(params, hw, *, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for m in (1, 4, 16, 64, 256, 1024, 4096, 16384):
        for n, k in ((4096, 4096), (8192, 4096), (16384, 8192), (4096, 16384)):
            t = fs.gemm_time_s(np.array(params), np.float64(m), n, k, 2.0, hw.bf16_tflops * 1e12,
                               hw.hbm_bandwidth_gb_s * 1e9)
            t *= np.exp(noise * rng.standard_normal())
            rows.append({"m": m, "n": n, "k": k, "dtype": "bfloat16", "latency_ms": float(t) * 1e3})
    return rows


def test_gemm_fit_recovers_known_parameters(catalog):
    hw = catalog.hardware["h100-sxm"]
    truth = (0.85, 1e-3, 0.7, 40.0, 5e-6)
    res = fs.fit_gemm(gemm_rows(truth, hw, noise=0.0), hw)
    assert res.success
    for name, value in zip(res.names, truth):
        if name == "flops_tokens_half":
            # only felt where a GEMM is compute-bound at m ~ m_half (above the ridge): weakly identified,
            # so it must come back within three standard errors
            assert abs(res.value(name) - value) <= 3 * res.stderr[res.names.index(name)] + 1.0
        else:
            assert res.value(name) == pytest.approx(value, rel=0.05), name
    assert res.mape < 0.02 and np.all(np.isfinite(res.stderr))


def test_allreduce_fit_recovers_latency_and_bandwidth(catalog):
    hw = catalog.hardware["h200"]
    rows = [{"m": g, "n": e, "latency_ms": float(fs.allreduce_time_s(np.array([6e-6, 0.6]), g,
                                                                      e * 2.0, hw.interconnect_gb_s * 1e9)) * 1e3}
            for g in (2, 4, 8) for e in 2 ** np.arange(7, 24)]
    res = fs.fit_allreduce(rows, hw)
    assert res.value("allreduce_latency_s") == pytest.approx(6e-6, rel=1e-3)
    assert res.value("eta_allreduce") == pytest.approx(0.6, rel=1e-3)


def test_moe_fit_recovers_per_expert_per_layer_per_token_costs_and_skew(catalog):
    hw = catalog.hardware["h200"]
    gemm = fs.FitResult(("eta_bw", "eta_flops"), np.array([0.9, 0.8]), np.zeros(2), np.zeros(1), True, "")
    truth = np.array([4e-7, 3e-5, 3e-8, 0.5])  # t_expert_s, t_moe_layer_s, t_moe_token_s, moe_routing_skew
    tokens = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384], float)
    lat = fs.moe_time_s(truth, tokens, 7168.0, 2048.0, 256.0, 8.0, 8.0, 1.0, gemm, hw.fp8_tflops * 1e12,
                        hw.hbm_bandwidth_gb_s * 1e9)
    op = "moe:7168:2048:256:8:8:power_law_1.01"
    rows = [{"op": op, "m": m, "dtype": "fp8_block", "latency_ms": float(t) * 1e3} for m, t in zip(tokens, lat)]
    assert fs.moe_rows(rows + [dict(rows[0], op="moe:7168:2048:256:8:8:balanced")]) == rows  # its distribution only
    res = fs.fit_moe(rows, hw, gemm)
    assert res.mape < 1e-4
    for name, value in zip(res.names, truth):
        assert res.value(name) == pytest.approx(value, rel=0.02), name


def test_end_to_end_fit_recovers_layer_and_step_costs(catalog):
    from dataclasses import replace

    hw = catalog.hardware["h100-sxm"]
    eff = replace(hw.efficiency, per_op_roofline=1.0)
    # two depths (32 and 80 layers): with one, layers * t_layer and t_fixed are the same constant
    cells = [fs.TpotCell(m, "h100-sxm", "bf16", "bf16", tp, b, ctx, 16, 1.0)
             for m, tp in (("llama-3.1-8b", 1), ("llama-3.3-70b", 4)) for b in (1, 8, 64, 512)
             for ctx in (1000, 32000)]
    truth = replace(eff, t_layer_s=4e-5, t_fixed_s=6e-4, t_layer_token_s=2e-7)
    tpot = fs.predict_tpot_s(cells, catalog.models, hw, truth)
    cells = [replace(c, tpot_ms=float(t) * 1e3) for c, t in zip(cells, tpot)]
    res = fs.fit_end_to_end(cells, catalog.models, hw, eff)
    assert res.value("t_layer_s") == pytest.approx(4e-5, rel=1e-3)
    assert res.value("t_fixed_s") == pytest.approx(6e-4, rel=1e-3)
    assert res.value("t_layer_token_s") == pytest.approx(2e-7, rel=1e-3)


@pytest.mark.parametrize("measured, needle", [([], "no data"), ([1.0, np.nan, 2.0], "finite"),
                                               ([1.0, 2.0], "cannot identify")])
def test_bad_data_is_refused(measured, needle):
    with pytest.raises(ValueError, match=needle):
        fs.fit_relative(lambda p: np.ones(len(measured)), np.array(measured, float), names=("a", "b"),
                        p0=(1.0, 1.0), bounds=((0, 0), (2, 2)))


def test_shipped_parameters_are_reproduced_from_the_pinned_data():
    shipped = yaml.safe_load(fs.OUT_YAML.read_text())
    date = next(iter(shipped["entries"].values()))["date"]
    doc = fs.to_yaml_doc(fs.run_fit(date=date), date)
    assert set(doc["entries"]) == set(shipped["entries"])
    for key, entry in doc["entries"].items():
        for name, p in entry["params"].items():
            assert p["value"] == pytest.approx(shipped["entries"][key]["params"][name]["value"], rel=1e-3), (key, name)
        assert entry["tpot_mape_held_out"] == pytest.approx(shipped["entries"][key]["tpot_mape_held_out"], abs=1e-3)


def test_fitted_efficiencies_load_with_their_provenance(catalog):
    from profiles.catalog import load_fitted_efficiencies

    eff = load_fitted_efficiencies(catalog.hardware)
    e = eff[("h100-sxm", "bf16")]
    assert e.per_op_roofline == 1.0 and 0.5 < e.eta_bw <= 1.0 and e.t_layer_s > 0
    assert "aiconfigurator" in e.source.source and "held-out" in e.source.source
