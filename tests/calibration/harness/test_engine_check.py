"""The installed engine decides which speculative configs run: every registry method's `speculative_config` built
with the pinned vLLM's own `SpeculativeConfig` (as its EngineArgs builds it, no engine start), with and without
synthetic acceptance; refusals in the engine's words; and the conversion of our acceptance conventions into vLLM's
unconditional, non-increasing `synthetic_acceptance_rates`."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from calibration.harness.engine_check import synthetic_rates, with_synthetic_acceptance
from calibration.targets import registry
from calibration.targets.registry import parse_registry

# Method -> the head kind calibration.targets.heads builds for it (P-EAGLE runs an EAGLE-3 head with parallel drafting).
HEAD_KIND = {"eagle3": "eagle3", "p_eagle": "eagle3", "eagle": "eagle", "medusa": "medusa"}


# ---- conversion (pure, no vLLM) ------------------------------------------------------------------------
def test_iid_alpha_gives_powers() -> None:
    # by hand: 0.8, 0.8^2, 0.8^3
    assert synthetic_rates(alpha=0.8, k=3) == pytest.approx((0.8, 0.64, 0.512), rel=1e-12)
    assert synthetic_rates(alpha=1.0, k=2) == (1.0, 1.0)
    assert synthetic_rates(alpha=0.0, k=2) == (0.0, 0.0)


def test_per_position_alpha_gives_running_products() -> None:
    # by hand: 0.9; 0.9 * 0.5 = 0.45; 0.45 * 0.2 = 0.09; 0.09 * 1.0 = 0.09
    assert synthetic_rates(alpha_per_pos=(0.9, 0.5, 0.2, 1.0), k=4) == pytest.approx((0.9, 0.45, 0.09, 0.09),
                                                                                     rel=1e-12)


def test_acceptance_length_round_trips_through_the_iid_alpha() -> None:
    # tau = 1 + sum_i p_i with the bonus token: alpha 0.8 at K=3 -> 1 + 0.8 + 0.64 + 0.512 = 2.952
    assert synthetic_rates(acceptance_length=2.952, k=3) == pytest.approx((0.8, 0.64, 0.512), rel=1e-9)
    # alpha 0.5 at K=2 -> tau = 1 + 0.5 + 0.25 = 1.75
    assert synthetic_rates(acceptance_length=1.75, k=2) == pytest.approx((0.5, 0.25), rel=1e-9)
    assert synthetic_rates(acceptance_length=1.0, k=3) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert synthetic_rates(acceptance_length=4.0, k=3) == pytest.approx((1.0, 1.0, 1.0), rel=1e-12)


@pytest.mark.parametrize("alphas", [(0.99, 0.1, 0.7, 0.7, 0.3), (1.0, 1.0, 0.0, 1.0, 1.0), (0.3,) * 5,
                                    (0.6, 0.9, 1.0, 0.95, 0.2)])
def test_rates_are_probabilities_non_increasing_and_keep_tau(alphas: tuple[float, ...]) -> None:
    rates = synthetic_rates(alpha_per_pos=alphas, k=len(alphas))
    assert all(0.0 <= r <= 1.0 for r in rates)
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)), rates
    tau = 1.0 + sum(math.prod(alphas[: i + 1]) for i in range(len(alphas)))  # by hand, not from the code
    assert 1.0 + sum(rates) == pytest.approx(tau, rel=1e-12)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"alpha": 1.2, "k": 3}, "alpha=1.2 not allowed: a probability in [0, 1]"),
    ({"alpha": -0.1, "k": 3}, "alpha=-0.1 not allowed"),
    ({"alpha": float("nan"), "k": 3}, "alpha=nan not allowed"),
    ({"alpha_per_pos": (0.5, 0.5), "k": 3}, "alpha_per_pos=[0.5, 0.5] not allowed: length 2, k=3"),
    ({"alpha_per_pos": (0.5, 1.5, 0.5), "k": 3}, "alpha_per_pos[1]=1.5 not allowed"),
    ({"alpha_per_pos": "0.5", "k": 1}, "alpha_per_pos='0.5' not allowed"),
    ({"acceptance_length": 4.5, "k": 3}, "acceptance_length=4.5 not allowed: a mean acceptance length in [1, k+1]"),
    ({"acceptance_length": 0.9, "k": 3}, "acceptance_length=0.9 not allowed"),
    ({"alpha": 0.5, "k": 0}, "k=0 not allowed: an integer >= 1"),
    ({"alpha": 0.5, "k": 2.0}, "k=2.0 not allowed"),
    ({"alpha": 0.5, "acceptance_length": 2.0, "k": 3}, "exactly one of .* got \\['alpha', 'acceptance_length'\\]"),
    ({"k": 3}, "exactly one of .* got none"),
])
def test_conversion_errors_name_the_bad_value(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message) if "*" not in message else message):
        synthetic_rates(**kwargs)


def test_with_synthetic_acceptance_sets_vllms_fields_on_a_copy() -> None:
    base = {"method": "eagle3", "model": "/heads/h", "num_speculative_tokens": 3}
    cfg = with_synthetic_acceptance(base, (0.8, 0.64, 0.512))
    assert cfg == {**base, "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.8, 0.64, 0.512]}
    assert "rejection_sample_method" not in base
    with pytest.raises(ValueError, match=re.escape("rates[1]=0.9 not allowed: above rates[0]=0.8")):
        with_synthetic_acceptance(base, (0.8, 0.9, 0.5))
    with pytest.raises(ValueError, match=re.escape("length 2, num_speculative_tokens=3")):
        with_synthetic_acceptance(base, (0.8, 0.6))
    with pytest.raises(ValueError, match=re.escape("rates[2]=1.1 not allowed")):
        with_synthetic_acceptance(base, (1.0, 1.0, 1.1))
    with pytest.raises(ValueError, match="synthetic_acceptance_length=2.0 not allowed"):
        with_synthetic_acceptance({**base, "synthetic_acceptance_length": 2.0}, (0.8, 0.6, 0.4))


def test_the_registry_builds_a_synthetic_config() -> None:
    reg = parse_registry({"targets": {"m": {"model": "/models/m", "planner_model": "llama-3.1-8b", "methods": {
        "eagle3": {"drafts": {"h": "/heads/h"}}}}}}, "test")
    cfg = reg.speculative_config("m", "eagle3", 2, "h", synthetic=(0.7, 0.49))
    assert cfg == {"method": "eagle3", "num_speculative_tokens": 2, "model": "/heads/h",
                   "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.7, 0.49]}
    with pytest.raises(ValueError, match="length 3, num_speculative_tokens=2"):
        reg.speculative_config("m", "eagle3", 2, "h", synthetic=(0.7, 0.49, 0.3))


def test_the_registry_no_longer_refuses_methods_by_device() -> None:
    assert not hasattr(registry, "GPU_ONLY") and not hasattr(registry, "refuse_without_gpu")


# ---- the pinned vLLM's SpeculativeConfig ------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol(model_cache: dict) -> Path:
    pytest.importorskip("vllm")
    from calibration.targets import model_assets

    return Path(model_cache[model_assets.TARGET_NAME].path)


def _head(kind: str, target: Path) -> Path:
    from calibration.targets import heads  # noqa: PLC0415

    return Path(heads.ensure_head(kind, target))


def _mtp_target() -> Path:
    from calibration.targets import model_assets

    return Path(model_assets.resolve("mimo-tiny-mtp").path)


def _method_case(method: str, smol: Path, model_cache: dict) -> tuple[Path, dict[str, Any]]:
    """(target, speculative_config) for `method` as the registry builds it, on this machine's CPU targets."""
    assert method in registry.METHODS, f"method {method!r} is not in the registry"
    if method == "mtp":
        target = _mtp_target()
        entry: dict[str, Any] = {}
    elif method == "ngram":
        target, entry = smol, {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
    elif method == "draft_model":
        target, entry = smol, {"drafts": {"d": str(model_cache["smollm2-135m-2l"].path)}}
    else:
        target, entry = smol, {"drafts": {"d": str(_head(HEAD_KIND[method], smol))}}
    reg = parse_registry({"targets": {"t": {"model": str(target), "planner_model": "smollm2-135m",
                                            "methods": {method: entry}}}}, "test")
    return target, reg.speculative_config("t", method, 3 if method != "mtp" else 1, "d" if entry.get("drafts")
                                          else None)


# vLLM's method name and parallel drafting for each registry method (vllm/config/speculative.py)
EXPECTED = {"ngram": ("ngram", False), "draft_model": ("draft_model", False), "eagle3": ("eagle3", False),
            "p_eagle": ("eagle3", True), "eagle": ("eagle", False), "medusa": ("medusa", False), "mtp": ("mtp", False)}


@pytest.mark.parametrize("method", list(EXPECTED))
def test_every_method_builds_with_the_pinned_speculative_config(method: str, smol: Path, model_cache: dict) -> None:
    from calibration.harness.engine_check import build_speculative_config, check_speculative_config, engine_refusal

    target, cfg = _method_case(method, smol, model_cache)
    built = build_speculative_config(str(target), cfg)
    assert type(built).__name__ == "SpeculativeConfig"
    assert (built.method, bool(built.parallel_drafting)) == EXPECTED[method]
    assert built.num_speculative_tokens == cfg["num_speculative_tokens"]
    assert built.rejection_sample_method == "standard"
    check_speculative_config(str(target), cfg)  # accepted: no error
    assert engine_refusal(str(target), cfg) is None

    # the same with synthetic acceptance: vLLM's config takes the rates as given ...
    rates = synthetic_rates(alpha=0.8, k=cfg["num_speculative_tokens"])
    synth = with_synthetic_acceptance(cfg, rates)
    built = build_speculative_config(str(target), synth)
    assert built.rejection_sample_method == "synthetic"
    assert built.synthetic_acceptance_rates == pytest.approx([0.8, 0.64, 0.512][: len(rates)], rel=1e-12)
    assert (built.method, bool(built.parallel_drafting)) == EXPECTED[method]
    # ... and on a CPU without Triton's CPU backend its sampler refuses it at the first verification step
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    refusal = engine_refusal(str(target), synth)
    if current_platform.is_cpu() and not HAS_TRITON:
        assert refusal is not None and "Synthetic acceptance not supported with CPU sampling" in refusal
        assert "vllm/utils/cpu_triton_utils.py" in refusal
    else:
        assert refusal is None


def test_the_engine_accepts_every_local_entry_of_the_shipped_registry(smol: Path) -> None:
    """Every method and draft of the shipped registry's local targets (shipped assets, cost-only heads built for
    them), as the registry builds them, with and without synthetic acceptance; Hugging Face targets need their
    node and trained heads their training run, so they are left to those."""
    from calibration.harness.engine_check import build_speculative_config, check_speculative_config

    reg = registry.load_registry(registry.SHIPPED)
    checked = []
    for t in reg.targets.values():
        if not t.model.source.startswith(registry.ASSET_PREFIX):
            continue
        target = t.model.resolve()
        for m in t.methods.values():
            k = min(3, m.k_max)
            for d in [d for d, ref in m.drafts.items() if not ref.source.startswith("trained:")] or [None]:
                cfg = reg.speculative_config(t.name, m.method, k, d)
                check_speculative_config(target, cfg)
                synth = reg.speculative_config(t.name, m.method, k, d, synthetic=synthetic_rates(alpha=0.6, k=k))
                assert build_speculative_config(target, synth).synthetic_acceptance_rates == pytest.approx(
                    [0.6, 0.36, 0.216][:k], rel=1e-12)
                checked.append((t.name, m.method, d))
    assert ("smollm2-135m", "ngram", None) in checked and ("smollm2-135m", "draft_model", "smollm2-135m-2l") in checked


@pytest.mark.parametrize(("cfg", "engine_words"), [
    ({"method": "ngram", "num_speculative_tokens": 0}, "num_speculative_tokens: Input should be greater than 0"),
    ({"method": "eagle9", "num_speculative_tokens": 2}, "method: Input should be 'ngram', 'medusa'"),
    ({"method": "draft_model", "model": "/nonexistent/draft-head", "num_speculative_tokens": 2},
     "Invalid repository ID or local directory specified: '/nonexistent/draft-head'"),
    ({"method": "mtp", "num_speculative_tokens": 1}, "NotImplementedError: Unsupported speculative method: 'mtp'"),
    ({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
     "prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
    ({"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
      "synthetic_acceptance_rates": [0.5, 0.6, 0.1]},
     "synthetic_acceptance_rates must be non-increasing, got [0.5, 0.6, 0.1]"),
    ({"method": "ngram", "num_speculative_tokens": 2, "synthetic_acceptance_rates": [0.5, 0.2]},
     "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
     "rejection_sample_method='synthetic'"),
])
def test_refusals_carry_the_engines_reason(cfg: dict[str, Any], engine_words: str, smol: Path) -> None:
    from calibration.harness.engine_check import check_speculative_config, engine_refusal, engine_version

    with pytest.raises(ValueError) as e:
        check_speculative_config(str(smol), cfg)
    msg = str(e.value)
    assert msg.startswith(f"the installed engine (vllm {engine_version()}) refuses speculative_config={cfg!r}: ")
    assert engine_words in msg, msg
    assert "\n" not in msg and "errors.pydantic.dev" not in msg
    assert engine_refusal(str(smol), cfg) == msg


def test_synthetic_on_a_cpu_platform_is_refused_up_front(smol: Path) -> None:
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    from calibration.harness.engine_check import engine_refusal

    if not (current_platform.is_cpu() and not HAS_TRITON):
        pytest.skip("this platform's sampler supports synthetic acceptance")
    cfg = with_synthetic_acceptance({"method": "ngram", "num_speculative_tokens": 3}, synthetic_rates(alpha=0.5, k=3))
    refusal = engine_refusal(str(smol), cfg)
    assert refusal is not None and refusal.endswith(
        "Synthetic acceptance not supported with CPU sampling (vllm/utils/cpu_triton_utils.py, "
        "_rejection_greedy_sample_kernel_impl)")
    # the engine's own words are in the source file cited
    import vllm

    source = Path(vllm.__file__).parent / "utils" / "cpu_triton_utils.py"
    assert 'assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"' in source.read_text()


def test_a_child_process_answers_for_the_cli_serve_and_the_page(smol: Path) -> None:
    """engine_refusals_in_child: one answer per config, in order, with the engine's words; the caller keeps
    neither vllm's memory nor the environment its import changes."""
    from calibration.harness.engine_check import engine_refusals_in_child

    answers = engine_refusals_in_child(str(smol), [{"method": "ngram", "num_speculative_tokens": 2},
                                                   {"method": "mtp", "num_speculative_tokens": 1}])
    assert len(answers) == 2 and answers[0] is None
    assert answers[1] is not None and "Unsupported speculative method: 'mtp'" in answers[1]


def test_an_unloadable_target_says_so(smol: Path, tmp_path: Path) -> None:
    from calibration.harness.engine_check import check_speculative_config

    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(ValueError, match=re.escape(f"cannot load the target model='{empty}'")):
        check_speculative_config(str(empty), {"method": "ngram", "num_speculative_tokens": 2})


def test_the_cli_refuses_what_the_engine_refuses_before_recording_anything(
        smol: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from calibration.__main__ import main

    path = tmp_path / "registry.yaml"
    # mtp on a target without MTP modules: the registry offers it, the engine refuses it
    path.write_text(f"targets:\n  smol:\n    model: {smol}\n    planner_model: smollm2-135m\n"
                    "    methods:\n      ngram: {}\n      mtp: {}\n")
    monkeypatch.setenv(registry.REGISTRY_ENV, str(path))
    db = tmp_path / "cal.db"
    # `serve` goes through the same check (calibration.__main__._refuse_what_the_engine_refuses)
    rc = main(["--store", f"sqlite:///{db}", "run", "--model", "smol", "--configs", "baseline,ngram:2,mtp:1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "mtp-k1: the installed engine (vllm " in err and "Unsupported speculative method: 'mtp'" in err, err
    assert err.count("the installed engine") == 1, err  # ngram is accepted: only mtp is refused
    assert not db.exists()


def test_an_engine_child_records_the_engines_refusal_as_the_configurations_error(
        smol: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """calibration.measure.engine.run_config asks the engine before it starts one: the refusal is the child's error and
    its log line (the job keeps both in the run's message), and nothing is recorded."""
    pytest.importorskip("torch")
    from calibration.measure.engine import run_config
    from calibration.measure.spec import EngineConfig, JobSpec
    from calibration.storage.store import Store

    path = tmp_path / "registry.yaml"
    path.write_text(f"targets:\n  smol:\n    model: {smol}\n    planner_model: smollm2-135m\n"
                    "    methods:\n      mtp: {}\n")  # mtp on a target without MTP modules
    monkeypatch.setenv(registry.REGISTRY_ENV, str(path))
    url = f"sqlite:///{tmp_path / 'cal.db'}"
    config = EngineConfig("mtp", 1)
    lines: list[str] = []
    with pytest.raises(ValueError, match=re.escape("Unsupported speculative method: 'mtp'")):
        run_config(JobSpec(model="smol", configs=(config,)), config, "r1", url, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("[mtp-k1] the installed engine (vllm "), lines
    assert Store(url).groups(["r1"]) == []
    # interleaved (every configuration's engine in one process): refused before the baseline's engine starts
    from calibration.measure.engine import run_interleaved

    lines.clear()
    spec = JobSpec(model="smol", configs=(EngineConfig("none"), config))
    with pytest.raises(ValueError, match=re.escape("Unsupported speculative method: 'mtp'")):
        run_interleaved(spec, "r2", url, log=lines.append)
    assert not any("engine started" in line for line in lines) and lines[-1].startswith("[mtp-k1] "), lines


def test_a_synthetic_configuration_carries_the_plans_acceptance_and_round_trips() -> None:
    from calibration.measure.spec import EngineConfig, JobSpec

    cfg = EngineConfig("eagle3", 3, "cost-only", synthetic_alpha=(0.8, 0.7, 0.6))
    assert cfg.label == "eagle3-cost-only-k3-synthetic-0.8_0.7_0.6"
    # vLLM's rates are unconditional: running products of the per-position alphas
    assert cfg.synthetic_rates() == pytest.approx((0.8, 0.56, 0.336))
    spec = JobSpec(configs=(EngineConfig("none"), cfg), workloads=("code",))
    assert JobSpec.from_dict(spec.to_dict()).configs[1] == cfg  # through JSON lists and back
    for bad in ({"synthetic_alpha": (0.8, 0.7)}, {"synthetic_alpha": (0.8, 1.2, 0.5)}):
        with pytest.raises(ValueError, match="synthetic_alpha="):
            EngineConfig("eagle3", 3, "cost-only", **bad)
    with pytest.raises(ValueError, match="synthetic_alpha="):
        EngineConfig("none", synthetic_alpha=())


def test_the_cli_runs_synthetic_acceptance_only_where_the_engine_can(
        smol: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--synthetic-alpha builds every speculative configuration with vLLM's synthetic acceptance; on a CPU sampler
    the engine check refuses it in the engine's words before anything is recorded (a GPU node runs it)."""
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    from calibration.__main__ import main

    db = tmp_path / "cal.db"
    rc = main(["--store", f"sqlite:///{db}", "run", "--configs", "baseline,eagle3:cost-only:2",
               "--synthetic-alpha", "0.7"])
    err = capsys.readouterr().err
    if current_platform.is_cpu() and not HAS_TRITON:
        assert rc == 2
        assert "eagle3-cost-only-k2-synthetic-0.7_0.7" in err
        assert "Synthetic acceptance not supported with CPU sampling" in err, err
        assert not db.exists()
    else:  # pragma: no cover - a GPU node: the configuration is accepted and runs
        assert "Synthetic acceptance not supported" not in err
