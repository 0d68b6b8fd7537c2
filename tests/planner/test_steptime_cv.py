"""Held-out error of the step-time fit beyond its models and GPUs (calibration/fitting/steptime_cv.py): the held-out
model is out of every refit (its cells and its fused-MoE kernel shape; the measured MLA module stays), and the
leave-one-model-out and leave-one-GPU-out figures benchmarks/accuracy.py prints do not regress past what they measure
today (2026-12-05)."""

import pytest

from calibration.fitting import steptime_cv as cv
from calibration.fitting.steptime import OPS_CSV, TPOT_CSV, read_csv, tpot_cells

# Measured 2026-12-05 (python benchmarks/accuracy.py): leave-one-model-out 8.2 % over 341 cells, leave-one-GPU-out
# 9.0 % (2026-12-04, before the MLA module and the MoE shapes beyond the catalogue's entered the kernel fit: 11.1 %,
# DeepSeek-V3 41.1 %, Qwen3-30B-A3B 22.5 %; 10.1 %). Pinned at the measured value plus 0.2 percentage point (the fit
# reproduces its YAML within its standard errors on any x86 CPU).
LOMO_MEASURED = {"deepseek-v3": 0.085, "llama-3.1-8b": 0.082, "llama-3.3-70b": 0.054, "qwen3-30b-a3b": 0.179,
                 "qwen3-32b": 0.043}
LOMO_MAPE, LOGO_MAPE, SLACK = 0.082, 0.090, 0.002


@pytest.fixture(scope="module")
def lomo():
    return cv.leave_one_model_out()


def test_a_held_out_models_moe_shape_leaves_the_kernel_rows(catalog):
    ops = read_csv(OPS_CSV)
    shape = cv.moe_shape(catalog.models["qwen3-30b-a3b"])
    assert shape == "2048:768:128:8"
    assert cv.moe_shape(catalog.models["deepseek-v3"]) == "7168:2048:256:8"
    assert cv.moe_shape(catalog.models["llama-3.1-8b"]) is None
    kept = cv.without_moe_shape(ops, shape)
    assert not [r for r in kept if r["op"].startswith(f"moe:{shape}:")]
    assert [r for r in kept if r["op"].startswith("moe:7168:2048:256:8:")]  # the other shape stays
    assert len(kept) < len(ops) and len(cv.without_moe_shape(ops, None)) == len(ops)


def test_leave_one_model_out_covers_every_model_and_does_not_regress(lomo):
    assert set(lomo.by_group) == set(LOMO_MEASURED)
    assert lomo.cells == 341
    assert lomo.mape <= LOMO_MAPE + SLACK
    for model, mape in lomo.by_group.items():
        assert mape <= LOMO_MEASURED[model] + SLACK, model


def test_leave_one_model_out_meets_the_issue_targets(lomo):
    assert lomo.mape <= 0.10
    assert lomo.worst[1] <= 0.20


def test_a_held_out_mla_model_keeps_the_measured_mla_kernels_but_not_its_cells(catalog):
    ops = read_csv(OPS_CSV)
    kept = cv.without_moe_shape(ops, cv.moe_shape(catalog.models["deepseek-v3"]))
    assert [r for r in kept if r["op"] == "mla:fp8_block" and r["hardware"] == "h200"]
    bf16_cells = [c for c in tpot_cells(read_csv(TPOT_CSV)) if c.hardware == "h200" and c.dtype == "bf16"]
    fits = cv.refit(kept, bf16_cells, catalog, {"h200": "0.24.0"}, hardware=("h200",), need={("h200", "fp8")})
    fp8 = next(f for f in fits if f.dtype == "fp8")
    # no TPOT cells: its per-layer terms are the BF16 fit's, its MLA block the kernel table's
    assert fp8.end_to_end is None and fp8.mla is not None
    assert fp8.efficiency.t_mla_layer_s > 5e-5


def test_leave_one_gpu_out_meets_its_target_and_does_not_regress():
    logo = cv.leave_one_gpu_out()
    assert set(logo.by_group) == {"h100-sxm", "h200", "b200", "a100-80gb-sxm", "l40s"}
    assert logo.mape <= min(0.20, LOGO_MAPE + SLACK)
    assert max(logo.by_group.values()) <= 0.20
