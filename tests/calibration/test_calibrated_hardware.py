"""A GPU calibration refines the catalogue entry it ran on (issue 9 / issue 11): the device is recognised from
what torch reports, the saved profile keeps that entry's peaks, memory, prices and kernel-fitted terms, and the
planner uses the calibrated terms as measured (the published speculation fit does not overwrite them)."""

from __future__ import annotations

import dataclasses

import pytest

from calibration.profiles_store import CalibratedProfile
from planner import plan as P
from planner.scenario import efficiency_for
from profiles import hardware_for_device, load_catalog


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


# (torch.cuda.get_device_name(0), total memory in GiB) as torch reports them on each card
@pytest.mark.parametrize(("name", "gib", "key"), [
    ("NVIDIA H100 80GB HBM3", 79.2, "h100-sxm"),
    ("NVIDIA H200", 139.8, "h200"),
    ("NVIDIA B200", 178.4, "b200"),
    ("NVIDIA A100-SXM4-80GB", 79.2, "a100-80gb-sxm"),
    ("NVIDIA L40S", 44.4, "l40s"),
    ("AMD Instinct MI300X", 191.5, "mi300x"),
    ("NVIDIA H100 PCIe", 79.2, None),  # other clocks and bandwidth than the SXM entry
    ("NVIDIA A100-SXM4-40GB", 39.4, None),  # half the memory of the 80GB entry
    ("NVIDIA GeForce RTX 4090", 23.6, None),
])
def test_the_device_maps_to_its_catalogue_entry_or_to_none(cat, name, gib, key):
    assert hardware_for_device(cat, name, gib) == key


def _profile(cat, **values) -> CalibratedProfile:
    base = efficiency_for(cat, "h200", "bf16")
    fitted = {k: getattr(base, k) for k in ("eta_bw", "eta_flops", "t_fixed_s", "t_fixed_draft_s", "t_spec_s")}
    fitted.update(values)
    return CalibratedProfile(name="h200-node", hardware="h200", stderr={}, holdout_mape_pct=4.0, created="2026-12-03",
                             source="calibration run r1 (vLLM 0.11.0)", base_hardware="h200", device_count=8,
                             engine_version="vllm 0.11.0", **fitted)


def test_a_gpu_profile_keeps_the_entry_and_replaces_only_the_calibrated_terms(cat):
    prof = _profile(cat, eta_bw=0.61, t_fixed_s=0.004)
    hw = prof.hardware_spec(cat)
    h200 = cat.hardware["h200"]
    assert (hw.hbm_gb, hw.hbm_bandwidth_gb_s, hw.bf16_tflops, hw.usd_per_gpu_hour_mid, hw.max_tp) == (
        h200.hbm_gb, h200.hbm_bandwidth_gb_s, h200.bf16_tflops, h200.usd_per_gpu_hour_mid, h200.max_tp)
    assert "calibrated 2026-12-03" in hw.label and "8 GPUs" in hw.label
    fitted = efficiency_for(cat, "h200", "bf16")
    eff = hw.efficiency
    assert (eff.eta_bw, eff.t_fixed_s) == (0.61, 0.004)
    for term in ("t_layer_s", "t_layer_token_s", "eta_bw_tokens_scale", "flops_tokens_half", "t_spec_token_s",
                 "allreduce_latency_s", "eta_allreduce"):
        assert getattr(eff, term) == getattr(fitted, term), term
    assert eff.calibrated


def test_the_planner_uses_the_calibrated_terms_as_measured(cat):
    prof = _profile(cat, t_spec_s=0.0042, t_fixed_draft_s=0.0007)
    cat2 = cat.with_hardware({"calibrated-h200-node": prof.hardware_spec(cat)})
    eff = efficiency_for(cat2, "calibrated-h200-node", "bf16")
    assert (eff.t_spec_s, eff.t_fixed_draft_s) == (0.0042, 0.0007)  # not the published fit's


def test_a_profile_with_the_entrys_own_values_plans_exactly_like_the_entry(cat):
    cat2 = cat.with_hardware({"calibrated-h200-node": _profile(cat).hardware_spec(cat)})
    req = P.PlanRequest(model="llama-3.3-70b", hardware="h200", tp=4)
    a = P.plan(req, cat2)
    b = P.plan(dataclasses.replace(req, hardware="calibrated-h200-node"), cat2)
    assert [(m.method, m.k, m.batch, m.usd_per_mtok) for m in a.methods] == [
        (m.method, m.k, m.batch, m.usd_per_mtok) for m in b.methods]
    slower = _profile(cat, eta_flops=0.5 * efficiency_for(cat, "h200", "bf16").eta_flops)
    c = P.plan(dataclasses.replace(req, hardware="calibrated-h200-node"),
               cat.with_hardware({"calibrated-h200-node": slower.hardware_spec(cat)}))
    assert c.baseline.usd_per_mtok > 1.2 * a.baseline.usd_per_mtok
