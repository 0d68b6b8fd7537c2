"""The serving engine as an input (planner/physics/engines.py): validation, CLI, per-engine terms fitted from each
engine's rows (held at the pooled fit where its rows do not identify them), the assumption line, the deploy command,
the Monte Carlo's speedup error, and the MoE verify step costed from the kernel-fitted MoE terms."""

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from calibration.fitting import engines as fe
from calibration.fitting import speculation as sp
from cli.main import main as cli_main
from planner.context import efficiency_for, make_context
from planner.decision.assumptions import engine_assumptions
from planner.physics.engines import ENGINES, speedup_error, speedup_error_factors
from planner.physics.roofline import hw_params, step_time_terms, target_net
from planner.request import PlanError, PlanRequest, validate

OPS_CSV = Path(__file__).resolve().parents[3] / "profiles" / "data" / "fitted" / "aiconfigurator_ops.csv"


def req(**kw):
    return PlanRequest(**{"model": "llama-3.1-8b", "hardware": "h100-sxm", **kw})


def test_an_unknown_engine_is_refused_naming_field_value_and_allowed(catalog):
    with pytest.raises(PlanError) as e:
        validate(req(engine="tgi"), catalog)
    assert e.value.field == "engine" and "'tgi'" in str(e.value)
    assert all(name in str(e.value) for name in ENGINES)
    with pytest.raises(PlanError, match="engine_version"):
        validate(req(engine="sglang", engine_version=""), catalog)


def test_cli_engine_flag_reaches_the_plan_and_its_deploy_command(capsys):
    assert cli_main(["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
                     "--engine-version", "0.5.6"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deploy"]["engine"] == "sglang"
    assert out["deploy"]["command"].startswith("python -m sglang.launch_server")
    assert "--speculative-algorithm" in out["deploy"]["command"]
    assert any(a["what"] == "serving engine SGLang 0.5.6" for a in out["assumptions"])
    assert cli_main(["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "tgi"]) != 0
    assert "engine='tgi' is not allowed" in capsys.readouterr().err


def _rows(engine: str, source: str, n: int) -> list[sp.SpecRow]:
    """EAGLE-3 on a dense 8B target at varied K and batch: rows whose draft passes and steps differ."""
    out = []
    for i, (k, b) in enumerate([(2, 1), (3, 1), (5, 1), (3, 8), (5, 16), (7, 4), (2, 32), (4, 2)][:n]):
        out.append(sp.SpecRow(id=f"{engine}{i}", source=f"{source}{i % 2}", engine=engine, model="llama-3.1-8b",
                              hardware="h100-sxm", dtype="bf16", tp=1, batch=b, method="eagle3", k=k,
                              tau=1.0 + 0.6 * k ** 0.7, context_tokens=1000, speedup=1.0))
    return out


def _with_measured(rows, catalog, params):
    pred = sp.predict_speedup(rows, catalog, params)
    return [dataclasses.replace(r, speedup=float(p)) for r, p in zip(rows, pred)]


def test_each_engine_gets_its_own_terms_from_its_own_rows_and_an_engine_without_enough_rows_is_held(catalog):
    truth = {**{n: v for n, (v, _) in sp.PRIORS.items()}, "sampler_vocab_passes": 40.0,
             fe.key("t_fixed_draft_s", "vllm"): 2e-4, fe.key("t_spec_s", "vllm"): 3e-4,
             fe.key("t_fixed_draft_s", "sglang"): 1.2e-3, fe.key("t_spec_s", "sglang"): 3e-4,
             fe.key("t_fixed_draft_s", "trtllm"): 2e-3, fe.key("t_spec_s", "trtllm"): 2e-3}
    rows = _with_measured(_rows("vllm", "v", 6) + _rows("sglang", "s", 6) + _rows("trtllm", "t", 1), catalog, truth)
    ef = fe.fit_engines(rows, catalog)
    v, s = ef.engines["vllm"], ef.engines["sglang"]
    draft_v, draft_s = v.value(fe.key("t_fixed_draft_s", "vllm")), s.value(fe.key("t_fixed_draft_s", "sglang"))
    assert fe.key("t_fixed_draft_s", "sglang") not in s.held
    assert draft_s > 2 * draft_v  # the data differ by 6x in the draft pass; the fits say so
    assert draft_s == pytest.approx(1.2e-3, rel=0.3)
    t = ef.engines["trtllm"]  # one row: both terms held at the pooled fit, stated, no standard error
    pooled = sp.fitted_params(ef.pooled)
    for name in ("t_spec_s", "t_fixed_draft_s"):
        assert fe.key(name, "trtllm") in t.held and "pooled fit" in t.held[fe.key(name, "trtllm")]
        assert t.value(fe.key(name, "trtllm")) == pytest.approx(pooled[name])
        assert math.isnan(t.error(fe.key(name, "trtllm")))


def test_row_engines_file_sets_each_rows_engine(tmp_path, catalog):
    p = tmp_path / "row_engines.csv"
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "engine", "engine_version", "evidence"])
        w.writerow(["vllm0", "sglang", "0.5.6", "test"])
        w.writerow(["vllm1", "other", "", "test"])
    rows = fe.with_row_engines(_rows("vllm", "v", 3), fe.read_row_engines(p))
    assert [r.engine for r in rows] == ["sglang", "other", "vllm"]


def test_the_plan_uses_and_names_its_engines_terms_and_speedup_error(catalog):
    engines = catalog.speculation_engines
    assert set(engines) >= {"vllm", "sglang", "trtllm"}
    for eng, terms in engines.items():
        ctx = make_context(req(engine=eng), catalog)
        assert ctx.eff.t_spec_s == terms.t_spec_s and ctx.eff.t_fixed_draft_s == terms.t_fixed_draft_s
        lines = engine_assumptions(ctx)
        assert lines[0].what.startswith(f"serving engine {ENGINES[eng]}")
        assert f"{terms.t_fixed_draft_s * 1e3:.2f} ms per draft pass" in lines[0].value
        err = [a for a in lines if a.what.startswith("speedup error")]
        assert err and "leave-one-source-out" in err[0].value and "%" in err[0].value


def test_a_calibrated_profile_keeps_its_measured_terms_whatever_the_engine(catalog):
    base = efficiency_for(catalog, "h100-sxm", "bf16")
    measured = dataclasses.replace(base, t_spec_s=7e-4, t_fixed_draft_s=9e-4, calibrated=True)
    for eng in ENGINES:
        eff = efficiency_for(catalog, "h100-sxm", "bf16", measured, engine=eng)
        assert (eff.t_spec_s, eff.t_fixed_draft_s) == (7e-4, 9e-4)


def test_class_error_falls_back_to_overall_and_flags_a_class_above_target():
    errs = {("sglang", "moe"): (0.35, 11), ("vllm", "dense"): (0.08, 2)}
    bad = speedup_error(errs, (0.12, 40), "sglang", "moe")
    assert not bad.overall and not bad.meets_target and "target" in bad.text()
    few = speedup_error(errs, (0.12, 40), "vllm", "dense")
    assert few.overall and few.mape == 0.12


def test_leave_one_target_out_holds_out_only_specbundle_targets_one_at_a_time(catalog):
    truth = {**{n: v for n, (v, _) in sp.PRIORS.items()}, "sampler_vocab_passes": 40.0}
    other = _rows("vllm", "v", 4)
    sbd = [dataclasses.replace(r, id=f"SBD_{t}_mtbench_sb_s{r.k}t1n{r.k + 1}", source="sbd")
           for t, rs in (("A", _rows("sglang", "s", 4)), ("B", _rows("sglang", "s", 4)[:3])) for r in rs]
    rows = _with_measured(other + sbd, catalog, truth)
    lto = fe.leave_one_target_out_sbd(rows, catalog)
    assert [r.id for r in lto.rows] == [r.id for r in sbd]  # the other sources' rows are trained on, never scored
    assert set(lto.fits) == {"A", "B"} and np.all(np.isfinite(lto.residuals))
    assert set(lto.mape_by(fe.sbd_target)) == {"A", "B"}


def test_shipped_class_table_has_the_specbundle_classes_with_their_verdict():
    import yaml  # noqa: PLC0415

    doc = yaml.safe_load((Path(sp.OUT_YAML)).read_text())["fit"]
    classes = doc["loso_mape_by_class"]
    for name in ("sglang/dense", "sglang/moe"):
        assert classes[name]["rows"] >= 3  # the SpecBundle rows: enough for a verdict
        assert classes[name]["meets_target"] == (classes[name]["mape"] <= 0.20)
    assert doc["per_engine"]["sglang"]["rows"] == sum(c["rows"] for k, c in classes.items() if k.startswith("sglang/"))


def test_speedup_error_draws_have_the_measured_mean_absolute_log_error():
    err = speedup_error({("vllm", "dense"): (0.15, 20)}, None, "vllm", "dense")
    f = speedup_error_factors(err, 20000)
    assert f[0] == 1.0
    assert np.mean(np.abs(np.log(f[1:]))) == pytest.approx(0.15, rel=0.05)


def _kernel_ms(hardware: str, m: int) -> float:
    with OPS_CSV.open() as fh:
        for r in csv.DictReader(fh):
            if (r["op"] == "moe:2048:768:128:8:1:power_law_1.2" and r["hardware"] == hardware
                    and r["dtype"] == "bfloat16" and int(r["m"]) == m):
                return float(r["latency_ms"])
    raise KeyError(m)


def test_moe_verify_step_grows_with_batch_times_k_plus_1_as_the_kernel_table(catalog):
    """Qwen3-30B-A3B (128 experts, top-8, hidden 2048) on H100: the verify step's extra time over a decode step at
    B (K + 1) tokens follows aiconfigurator's fused-MoE rows (2048:768:128:8) times the MoE layers."""
    model = catalog.models["qwen3-30b-a3b"]
    assert (model.experts, model.experts_per_token) == (128, 8)
    hw = hw_params(catalog.hardware["h100-sxm"], "bf16", efficiency_for(catalog, "h100-sxm", "bf16"))
    net = target_net(model, "bf16")
    t1 = float(step_time_terms(net, hw, batch=1, tokens_per_seq=1, context_tokens=1000).total_s)
    last = t1
    for n in (2, 4, 8):
        tn = float(step_time_terms(net, hw, batch=1, tokens_per_seq=n, context_tokens=1000).total_s)
        kernel = (_kernel_ms("h100-sxm", n) - _kernel_ms("h100-sxm", 1)) * 1e-3 * float(net.moe_layers)
        assert tn > last
        assert tn - t1 == pytest.approx(kernel, rel=0.35)  # the MoE kernels dominate a small-active target's growth
        last = tn


def test_small_active_moe_at_acceptance_length_about_2_can_lose_at_batch_1(catalog):
    """Qwen3-30B-A3B, EAGLE-3 chain at batch 1 on H100 with acceptance length 1.9 (bonus token included): each
    extra verify token pays the fused-MoE kernel's growth, so the speedup falls with K at a fixed acceptance, and on
    SGLang's fitted terms K=3 costs more than it saves (what the model says)."""
    out = {}
    for k in (1, 2, 3):
        row = sp.SpecRow(id="q", source="q", engine="sglang", model="qwen3-30b-a3b", hardware="h100-sxm",
                         dtype="bf16", tp=1, batch=1, method="eagle3", k=k, tau=1.9, context_tokens=1000, speedup=1.0)
        out[k] = float(sp.evaluate_row(row, catalog, efficiency_for(catalog, "h100-sxm", "bf16", engine="sglang"),
                                       method="eagle3", k=k, tau=1.9).speedup)
    assert out[1] > out[2] > out[3]
    assert out[3] < 1.0


def test_an_engines_own_terms_are_drawn_toward_the_pooled_fit_by_a_stated_prior(catalog, monkeypatch):
    truth = {**{n: v for n, (v, _) in sp.PRIORS.items()}, "sampler_vocab_passes": 40.0,
             fe.key("t_fixed_draft_s", "vllm"): 2e-4, fe.key("t_spec_s", "vllm"): 3e-4,
             fe.key("t_fixed_draft_s", "sglang"): 3.5e-4, fe.key("t_spec_s", "sglang"): 6e-4}
    vllm = _with_measured(_rows("vllm", "v", 8), catalog, truth)
    # SGLang's rows: other terms, measured with a scatter of a few per cent
    noise = np.array([1.02, 0.98, 1.03, 0.99, 1.02, 1.01, 0.98, 1.02])
    sgl = [dataclasses.replace(r, speedup=r.speedup * f)
           for r, f in zip(_with_measured(_rows("sglang", "s", 8), catalog, truth), noise)]
    rows = vllm + sgl
    pooled = sp.fitted_params(sp.fit_speculation(rows, catalog))

    def distance(width: float) -> float:
        monkeypatch.setattr(fe, "ENGINE_PRIOR_WIDTH", width)
        p = fe.fit_engines(rows, catalog).params()
        return max(abs(p[fe.key(n, "sglang")] / pooled[n] - 1) for n in ("t_spec_s", "t_fixed_draft_s"))

    width = fe.ENGINE_PRIOR_WIDTH
    free, shipped, narrow = distance(0.0), distance(width), distance(1e-3)
    assert 0 < shipped < free  # the prior pulls the engine's identified terms toward the pooled ones
    assert narrow < 0.01 < free  # a narrow prior holds them there; no prior leaves them where its rows put them


def test_a_shrinkage_prior_needs_the_datas_noise():
    from calibration.fitting.core import fit_relative

    with pytest.raises(ValueError, match="noise"):
        fit_relative(lambda p: p[0] * np.ones(3), [1.0, 1.1, 0.9], names=("a",), p0=[1.0], bounds=([0.0], [2.0]),
                     shrink={"a": (1.0, 0.5)})
    fit = fit_relative(lambda p: p[0] * np.ones(3), [2.0, 2.2, 1.8], names=("a",), p0=[1.0], bounds=([0.0], [5.0]),
                       shrink={"a": (1.0, 0.5)}, noise=0.1)
    assert 1.0 < fit.value("a") < 2.0 and len(fit.residuals) == 3  # between prior and data; data residuals only


def test_evaluate_takes_the_engine_and_uses_its_terms(catalog, capsys):
    out = {}
    for eng in ("vllm", "sglang"):
        assert cli_main(["evaluate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--method", "eagle3",
                         "--k", "5", "--batch", "1", "--acceptance-length", "2.8", "--engine", eng]) == 0
        out[eng] = json.loads(capsys.readouterr().out)
    for eng, d in out.items():
        terms = catalog.speculation_engines[eng]
        assert d["engine"] == eng
        assert d["assumptions"]["speculation"]["t_fixed_draft_s"] == pytest.approx(terms.t_fixed_draft_s)
        assert d["assumptions"]["speculation"]["t_spec_s"] == pytest.approx(terms.t_spec_s)
    v, s = catalog.speculation_engines["vllm"], catalog.speculation_engines["sglang"]
    if (v.t_spec_s, v.t_fixed_draft_s) != (s.t_spec_s, s.t_fixed_draft_s):  # different terms, different speedup
        assert out["vllm"]["speedup"] != pytest.approx(out["sglang"]["speedup"], rel=1e-6)
    assert out["vllm"]["baseline_tpot_ms"] == pytest.approx(out["sglang"]["baseline_tpot_ms"])  # only speculation
