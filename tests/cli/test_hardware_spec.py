"""The GPUs users buy now (profiles/data/hardware.yaml) and a user's own GPU (--hardware-spec, profiles.hardware_spec):
each plans on step-time terms borrowed from a kernel-fitted GPU with a stated band (planner.physics.borrowed)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner import plan as P
from planner.context import efficiency_for
from planner.formatting import plan_dict
from planner.physics.borrowed import ASSUMED_TPOT_ERROR, SAME_ARCH_TPOT_ERROR
from planner.uncertainty.sensitivity import fit_sigma
from profiles.catalog import DATA_DIR
from profiles.hardware_spec import (
    MAX_SPEC_BYTES,
    HardwareSpecError,
    parse_hardware_spec,
    read_hardware_spec,
    with_hardware_spec,
)

ROOT = Path(__file__).resolve().parents[2]
NEW_GPUS = {"b300": "b200", "gb300": "b200", "gb200": "b200", "h20": "h100-sxm", "mi325x": "h200", "mi350x": "h200",
            "mi355x": "h200", "rtx-pro-6000": "l40s"}  # GPU -> the kernel-fitted GPU its BF16 terms come from
SAME_ARCH = {"b300", "gb300", "gb200", "h20", "mi325x"}  # a donor (or an end-to-end fit) of the same architecture


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def entry_text(name: str, **changes) -> str:
    """hardware.yaml's entry `name` as a spec file (its efficiencies are hardware.yaml's defaults: left out)."""
    doc = yaml.safe_load((DATA_DIR / "hardware.yaml").read_text(encoding="utf-8"))["entries"][name]
    doc = {k: v for k, v in doc.items() if k != "efficiency"}
    doc.update(changes)
    return yaml.safe_dump({k: v for k, v in doc.items() if v is not None}, sort_keys=False)


def numbers(obj) -> list[float]:
    """Every number in a JSON-like tree, in order (names and source texts left out)."""
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in numbers(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in numbers(v)]
    return [obj] if isinstance(obj, (int, float)) and not isinstance(obj, bool) else []


def test_list_hardware_lists_the_new_gpus():
    out = cli("list", "hardware")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert set(NEW_GPUS) <= set(listed) and len(listed) == 14
    assert listed["rtx-pro-6000"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition 96GB"


@pytest.mark.parametrize("gpu", sorted(NEW_GPUS))
def test_each_new_gpu_is_sourced_and_borrows_with_a_band(catalog, gpu):
    hw = catalog.hardware[gpu]
    assert hw.specs.date and hw.price.date == "2026-12-04" and hw.architecture and hw.scale_up_gpus >= 1
    assert hw.usd_per_gpu_hour_low < hw.usd_per_gpu_hour_high
    eff = efficiency_for(catalog, gpu, "bf16")
    band = SAME_ARCH_TPOT_ERROR if gpu in SAME_ARCH else ASSUMED_TPOT_ERROR
    assert f"borrowed from the {NEW_GPUS[gpu]} / bf16 kernel fit" in eff.source.source
    assert f"TPOT band +-{100 * band:.0f} %" in eff.source.source
    assert catalog.fitted_tpot_error[(gpu, "bf16")] == band
    assert fit_sigma(catalog, gpu, "bf16") is not None  # the Monte Carlo and the tornado draw from the band


@pytest.mark.parametrize("gpu", sorted(NEW_GPUS))
def test_a_plan_on_each_new_gpu_is_feasible_and_names_its_borrowed_terms(catalog, gpu):
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware=gpu, tp=1), catalog)
    assert p.baseline.feasible and p.best is not None and p.best.feasible
    step = next(a for a in p.assumptions if a.what == "step-time parameters")
    assert "borrowed from the" in step.source and "TPOT band +-" in step.source


def test_a_sibling_runs_on_its_donors_shares_of_peak_another_architecture_on_its_own(catalog):
    b200, b300 = efficiency_for(catalog, "b200", "bf16"), efficiency_for(catalog, "b300", "bf16")
    assert (b300.eta_bw, b300.eta_flops) == (b200.eta_bw, b200.eta_flops) != (0.75, 0.6)
    assert "of the donor (same architecture; assumption)" in b300.source.source
    # same peaks and bandwidth, more memory: a B300 replica serves at least a B200's tokens at the same SLO
    req = P.PlanRequest(model="llama-3.1-8b", hardware="b200", tp=1)
    on = {g: P.plan(dataclasses.replace(req, hardware=g), catalog).baseline for g in ("b200", "b300")}
    assert on["b300"].output_tokens_per_s >= on["b200"].output_tokens_per_s
    rtx = efficiency_for(catalog, "rtx-pro-6000", "bf16")  # GB202 from L40S: its own assumed shares
    assert (rtx.eta_bw, rtx.eta_flops) == (0.75, 0.6)


def test_gb300_peaks_are_the_racks_over_72_and_fp4_is_faster_than_b200(catalog):
    gb300, b200 = catalog.hardware["gb300"], catalog.hardware["b200"]
    assert gb300.fp4_tflops == pytest.approx(1_080_000 / 72) and gb300.scale_up_gpus == 72
    assert gb300.peak_tflops("nvfp4") > b200.peak_tflops("nvfp4")
    assert catalog.hardware["h20"].peak_tflops("nvfp4") == catalog.hardware["h20"].bf16_tflops  # no FP4 cores


def test_a_spec_copying_h100_plans_the_same_as_h100(catalog):
    hw = parse_hardware_spec(entry_text("h100-sxm"))
    assert hw.name.startswith("spec:") and hw.efficiency == catalog.hardware["h100-sxm"].efficiency
    cat = with_hardware_spec(catalog, hw)
    req = P.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tp=1)
    ours = plan_dict(P.plan(dataclasses.replace(req, hardware=hw.name), cat))
    theirs = plan_dict(P.plan(req, catalog))
    assert numbers(ours) == numbers(theirs) and len(numbers(ours)) > 100
    assert (ours["recommendation"] or {}).get("method") == (theirs["recommendation"] or {}).get("method")
    assert cat.fitted_tpot_error[(hw.name, "bf16")] == catalog.fitted_tpot_error[("h100-sxm", "bf16")]


def test_a_spec_of_another_gpu_borrows_the_nearest_of_its_architecture(catalog):
    hw = parse_hardware_spec(entry_text("h100-sxm", label="H100 at 3 TB/s", hbm_bandwidth_gb_s=3000))
    cat = with_hardware_spec(catalog, hw)
    eff = efficiency_for(cat, hw.name, "fp8")
    assert "borrowed from the h100-sxm / fp8 kernel fit" in eff.source.source and "+-25 %" in eff.source.source
    amd = parse_hardware_spec(entry_text("mi300x", label="An AMD part", hbm_bandwidth_gb_s=5000, architecture="amd"))
    cat = with_hardware_spec(catalog, amd)
    # an AMD GPU of no listed architecture: no AMD kernel fit, the nearest by bandwidths, the wide band
    assert cat.fitted_tpot_error[(amd.name, "bf16")] == ASSUMED_TPOT_ERROR
    assert cat.borrowed_donors[(amd.name, "fp8")][0] == ("h200", "fp8")


@pytest.mark.parametrize("changes, field, value", [
    ({"hbm_gb": None}, "hbm_gb", "(missing)"),
    ({"hbm_bandwidth_gb_s": -3350}, "hbm_bandwidth_gb_s", "-3350"),
    ({"fp6_tflops": 3000}, "fp6_tflops", "3000"),
    ({"architecture": "rubin"}, "architecture", "rubin"),
    ({"usd_per_gpu_hour": {"low": 5, "high": 2}}, "usd_per_gpu_hour", "'low': 5"),
])
def test_a_bad_spec_is_refused_naming_field_value_and_what_is_allowed(changes, field, value):
    with pytest.raises(HardwareSpecError) as err:
        parse_hardware_spec(entry_text("h100-sxm", **changes))
    msg = str(err.value)
    assert f"field '{field}'" in msg and value in msg and "expected" in msg
    if field == "fp6_tflops":
        assert "unknown dtype 'fp6'" in msg and "fp8_tflops" in msg


def test_a_spec_over_the_cap_or_not_a_mapping_is_refused():
    with pytest.raises(HardwareSpecError, match="at most 65,536 bytes"):
        parse_hardware_spec("#" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(HardwareSpecError, match="expected a mapping"):
        parse_hardware_spec("- 1\n- 2\n")
    with pytest.raises(HardwareSpecError, match="not valid YAML or JSON"):
        parse_hardware_spec("{not json")
    # safe_load: a Python object tag is refused, never built
    with pytest.raises(HardwareSpecError, match="not valid YAML"):
        parse_hardware_spec("label: !!python/object/apply:os.system ['true']\n")


def test_the_sample_spec_reads_and_plans(catalog):
    hw = read_hardware_spec(ROOT / "profiles" / "samples" / "my_gpu.yaml")
    p = P.plan(P.PlanRequest(model="llama-3.1-8b", hardware=hw.name, tp=1),
               with_hardware_spec(catalog, hw))
    assert p.baseline.feasible


def test_cli_plans_compares_and_evaluates_on_a_spec_and_refuses_a_bad_one(tmp_path):
    good = tmp_path / "gpu.yaml"
    good.write_text(entry_text("h100-sxm"))
    out = cli("evaluate", "--model", "llama-3.1-8b", "--hardware-spec", str(good), "--method", "eagle3",
              "--batch", "8", "--alpha", "0.7")
    ref = cli("evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3",
              "--batch", "8", "--alpha", "0.7")
    assert out.returncode == 0 == ref.returncode, out.stderr
    assert numbers(json.loads(out.stdout)) == numbers(json.loads(ref.stdout))
    out = cli("compare", "--model", "llama-3.1-8b", "--hardware-spec", str(good))
    assert out.returncode == 0, out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(entry_text("h100-sxm", hbm_bandwidth_gb_s=-1))
    out = cli("plan", "--model", "llama-3.1-8b", "--hardware-spec", str(bad))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "field 'hbm_bandwidth_gb_s' = -1: expected a number > 0" in out.stderr
    out = cli("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--hardware-spec", str(good))
    assert out.returncode == 2 and "not allowed with argument" in out.stderr
