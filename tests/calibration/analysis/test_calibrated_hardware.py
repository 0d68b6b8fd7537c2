"""A GPU calibration refines the catalogue entry it ran on: the device is recognised from
what torch reports, the saved profile keeps that entry's peaks, memory, prices and kernel-fitted terms, and the
planner uses the calibrated terms as measured (the published speculation fit does not overwrite them)."""

from __future__ import annotations

import dataclasses

import pytest

from calibration.storage.profiles_store import CalibratedProfile
from planner import plan as P
from planner.search.scenario import efficiency_for
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
    for term in ("t_layer_s", "t_layer_token_s", "eta_bw_tokens_scale", "flops_tokens_half", "sampler_vocab_passes",
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


H200_NODE = {"device": "cuda", "device_name": "NVIDIA H200", "device_count": 8, "device_memory_gib": 139.8}


def _gpu_records(true_params, hw, extra=H200_NODE) -> list:
    """Groups as a GPU run stores them (calibration.measure.engine), their wall times from the planner's step time with
    known parameters: baseline and n-gram at K = 2 and 4, three batch sizes, two workloads."""
    from calibration.analysis.predict import predict_wall_time_s
    from tests.calibration.conftest import make_record

    out = []
    for workload in ("code", "chat"):
        for b in (1, 4, 8):
            for method, k in (("none", 0), ("ngram", 2), ("ngram", 4)):
                rec = make_record(method=method, k=k or 3, workload=workload, num_prompts=b, output_tokens=64 * b,
                                  prompt_tokens=300 * b, per_pos=(6, 3, 1, 1)[:k] if k else (0,), drafts=10,
                                  config_label=f"{method}-k{k}" if k else "baseline")
                rec = dataclasses.replace(rec, engine_version="0.11.0", extra=dict(extra))
                out.append(dataclasses.replace(rec, wall_time_s=predict_wall_time_s(rec, true_params, hw=hw)))
    return out


def test_a_gpu_run_refines_its_catalogue_entry_end_to_end(cat, tmp_path):
    """Records of an H200 node -> calibrate() starts from the h200 entry's kernel fit, recovers the engine's
    per-step times, and the saved profile is the h200 entry with them (the planner then uses it)."""
    from calibration.analysis.predict import EngineParams, machine_for
    from calibration.analysis.report import calibrate
    from calibration.storage.store import Store

    hw = machine_for([dataclasses.replace(_gpu_records(EngineParams(0.8, 0.6, 0.01, 0.001, 0.001),
                                                       cat.hardware["h200"])[0])])
    assert hw.name == "h200" and hw.efficiency == efficiency_for(cat, "h200", "bf16")
    eff = hw.efficiency
    true = EngineParams(eta_bw=eff.eta_bw, eta_flops=eff.eta_flops, t_fixed_s=0.0042, t_fixed_draft_s=0.005,
                        t_spec_s=0.0011)
    store = Store(f"sqlite:///{tmp_path / 'gpu.db'}")
    run_id = store.create_run("engine", {"note": "synthetic H200 groups"}, status="succeeded")
    for rec in _gpu_records(true, hw):
        store.add_group(dataclasses.replace(rec, run_id=run_id))
    rep = calibrate(store, [run_id], microbench_run_id=None)
    assert (rep.base_hardware, rep.device_count, rep.engine_version) == ("h200", 8, "vllm 0.11.0")
    assert rep.params.t_fixed_s == pytest.approx(0.0042, rel=1e-2)
    assert rep.params.t_spec_s == pytest.approx(0.0011, rel=1e-2)
    assert rep.mape_holdout_pct < 0.5
    prof = rep.profile("h200-node")
    spec = prof.hardware_spec(cat)
    assert spec.bf16_tflops == cat.hardware["h200"].bf16_tflops and "calibrated" in spec.label
    assert spec.efficiency.t_fixed_s == pytest.approx(0.0042, rel=1e-2)
    assert spec.efficiency.t_layer_s == eff.t_layer_s  # kernel-fitted terms kept


def test_records_from_an_unknown_gpu_or_two_devices_are_refused(cat):
    from calibration.analysis.predict import EngineParams, machine_for

    p = EngineParams(0.8, 0.6, 0.01, 0.001, 0.001)
    rtx = _gpu_records(p, cat.hardware["h200"], extra={**H200_NODE, "device_name": "NVIDIA GeForce RTX 4090",
                                                       "device_memory_gib": 23.6})
    with pytest.raises(ValueError, match="RTX 4090.*matches no catalogue hardware entry"):
        machine_for(rtx)
    h200 = _gpu_records(p, cat.hardware["h200"])
    with pytest.raises(ValueError, match="2 devices"):
        machine_for([h200[0], rtx[0]])
    cpu = [dataclasses.replace(h200[0], extra={"device": "cpu"})]
    assert machine_for(cpu).kind == "cpu"


def test_a_method_the_run_measured_is_planned_with_its_own_draft_cost_and_named_beside_the_plan(cat):
    """A calibrated per-method draft pass replaces the shared one for that method only: EAGLE-3 at 40 ms a pass
    on the calibrated entry costs more than on the same entry without it, the other methods are untouched, and
    the plan's assumptions say what the run measured (draft pass, per-step overhead, acceptance)."""
    from planner.decision.assumptions import CALIBRATED_PREFIX

    base = _profile(cat)
    slow = dataclasses.replace(base, method_terms={"eagle3": {"t_fixed_draft_s": 0.04, "t_spec_s": 0.002}},
                               acceptance={"eagle3": {"code": {"k": 3, "acceptance_length": 2.4,
                                                               "acceptance_length_95": [2.3, 2.5]}}})
    req = P.PlanRequest(model="llama-3.3-70b", hardware="calibrated-h200-node", tp=4)
    a = P.plan(req, cat.with_hardware({"calibrated-h200-node": base.hardware_spec(cat)}))
    b = P.plan(req, cat.with_hardware({"calibrated-h200-node": slow.hardware_spec(cat)}))
    pa, pb = ({m.method: m for m in x.methods} for x in (a, b))
    # each step at least one 40 ms pass longer: under the same TPOT SLO a much smaller batch, a dearer token
    assert pb["eagle3"].batch < pa["eagle3"].batch
    assert pb["eagle3"].usd_per_mtok > 1.5 * pa["eagle3"].usd_per_mtok
    for m in ("none", "p_eagle", "medusa"):
        if m in pa:
            assert (pb[m].tpot_ms, pb[m].usd_per_mtok) == (pa[m].tpot_ms, pa[m].usd_per_mtok), m
    lines = [x for x in b.assumptions if x.what.startswith(CALIBRATED_PREFIX)]
    assert len(lines) == 1 and "40.00 ms" in lines[0].value and "2.40 [2.30, 2.50] at K=3 on code" in lines[0].value
    assert not [x for x in a.assumptions if x.what.startswith(CALIBRATED_PREFIX)]
