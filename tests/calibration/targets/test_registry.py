"""The calibration registry: the shipped CPU default, validation that names entry, field and value, vLLM
speculative configs built from it (checked against vLLM's own SpeculativeConfig), the mapping onto the
planner's methods and models, and every method offered on CPU and GPU alike (the installed engine refuses what it
cannot run: tests/calibration/harness/test_engine_check.py)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from calibration.measure.spec import EngineConfig, JobSpec
from calibration.targets import registry
from calibration.targets.registry import METHODS, RegistryError, load_registry, parse_registry

REPO = Path(__file__).resolve().parents[3]

FULL = {"targets": {
    "my-8b": {"model": "org/My-8B-Instruct", "planner_model": "llama-3.1-8b", "methods": {
        "ngram": {"prompt_lookup_min": 1, "prompt_lookup_max": 3},
        "draft_model": {"drafts": {"my-1b": "/models/my-1b"}},
        "eagle3": {"drafts": {"head": "org/my-eagle3-head"}},
        "p_eagle": {"drafts": {"phead": "org/my-p-eagle-head"}, "k_max": 6},
        "medusa": {"drafts": {"heads": "org/my-medusa-heads"}, "k_max": 5},
        "mtp": {"k_max": 2},
    }},
}}


def _registry(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "registry.yaml"
    path.write_text(text)
    return path


def test_the_shipped_registry_keeps_the_cpu_default() -> None:
    reg = load_registry(registry.SHIPPED)
    t = reg.target("smollm2-135m")
    assert t.model.source == "asset:smollm2-135m"
    assert {"ngram", "draft_model"} <= set(t.methods)
    assert list(t.methods["draft_model"].drafts) == ["smollm2-135m-2l", "smollm2-135m-8l"]
    assert reg.speculative_config("smollm2-135m", "ngram", 4, None) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def test_each_method_builds_its_vllm_speculative_config() -> None:
    reg = parse_registry(FULL, "test")
    cfg = {m: reg.speculative_config("my-8b", m, 2, d) for m, d in (
        ("ngram", None), ("draft_model", "my-1b"), ("eagle3", "head"), ("p_eagle", "phead"),
        ("medusa", "heads"), ("mtp", None))}
    assert cfg["ngram"] == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1,
                            "prompt_lookup_max": 3}
    assert cfg["draft_model"] == {"method": "draft_model", "num_speculative_tokens": 2, "model": "/models/my-1b"}
    assert cfg["eagle3"] == {"method": "eagle3", "num_speculative_tokens": 2, "model": "org/my-eagle3-head"}
    # P-EAGLE is EAGLE-3 with all K drafts from one head pass
    assert cfg["p_eagle"] == {"method": "eagle3", "num_speculative_tokens": 2, "model": "org/my-p-eagle-head",
                              "parallel_drafting": True}
    assert cfg["medusa"] == {"method": "medusa", "num_speculative_tokens": 2, "model": "org/my-medusa-heads"}
    assert cfg["mtp"] == {"method": "mtp", "num_speculative_tokens": 2}
    with pytest.raises(ValueError, match="k=3 not allowed for model='my-8b' method='mtp': 1..2"):
        reg.speculative_config("my-8b", "mtp", 3, None)
    with pytest.raises(ValueError, match="draft='other' not allowed for model='my-8b' method='eagle3'"):
        reg.speculative_config("my-8b", "eagle3", 2, "other")


def test_speculative_configs_fit_vllms_own_config_class() -> None:
    spec_mod = pytest.importorskip("vllm.config.speculative")

    def literal_names(t: typing.Any) -> set[str]:
        return {a for a in typing.get_args(t) if isinstance(a, str)} | {
            n for a in typing.get_args(t) if not isinstance(a, str) for n in literal_names(a)}

    fields = {f.name for f in dataclasses.fields(spec_mod.SpeculativeConfig)}
    vllm_methods = literal_names(spec_mod.SpeculativeMethod)
    reg = parse_registry(FULL, "test")
    for m, d in (("ngram", None), ("draft_model", "my-1b"), ("eagle3", "head"), ("p_eagle", "phead"),
                 ("medusa", "heads"), ("mtp", None)):
        cfg = reg.speculative_config("my-8b", m, 2, d)
        assert set(cfg) <= fields, (m, set(cfg) - fields)
        assert cfg["method"] in vllm_methods, m
    # n-gram needs no model files: vLLM itself validates the whole config
    built = spec_mod.SpeculativeConfig(**reg.speculative_config("my-8b", "ngram", 3, None))
    assert (built.method, built.num_speculative_tokens, built.prompt_lookup_max) == ("ngram", 3, 3)


def test_calibrated_methods_and_models_map_onto_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    from calibration.targets.catalog import model_spec
    from planner.physics.deploy import speculative_config as planner_config
    from profiles import load_catalog

    cat = load_catalog()
    for m in METHODS:
        assert registry.planner_method(m) in cat.methods
    # an EAGLE-1/2 head is the planner's own `eagle` (it reads the target's full LM head each pass), not eagle3
    assert registry.planner_method("eagle") == "eagle"
    assert cat.methods[registry.planner_method("eagle")].draft_vocab is None
    # assets convert and heads build on first use: not here
    monkeypatch.setattr(registry.ModelRef, "resolve", lambda self, target=None: "/models/x")
    reg = load_registry(registry.SHIPPED)
    for t in reg.targets.values():
        spec = model_spec(t.planner_model)  # a profiles entry or one calibration/targets/catalog.py derives
        for m in t.methods.values():
            d = next(iter(m.drafts), None)
            ours = reg.speculative_config(t.name, m.method, 1, d)
            theirs = planner_config(cat.methods[registry.planner_method(m.method)], spec, 1,
                                    draft_model=cat.models["llama-3.2-1b"], head_path="x")
            # the planner's deployment command and the calibration run use the same vLLM method (an EAGLE-1/2
            # head runs as vLLM's "eagle" in both)
            assert ours["method"] == theirs["method"], m.method
            assert ours.get("parallel_drafting") == theirs.get("parallel_drafting"), m.method
    with pytest.raises(ValueError, match="method='vsd' not allowed"):
        registry.planner_method("vsd")


@pytest.mark.parametrize(("text", "message"), [
    ("targets:\n  m1:\n    model: ../../etc/passwd\n    methods: {ngram: {}}\n",
     r"targets.m1.model: value='../../etc/passwd' not allowed"),
    ("targets:\n  m1:\n    model: /models/../../etc\n    methods: {ngram: {}}\n",
     r"targets.m1.model: value='/models/../../etc' not allowed"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {eagle9: {}}\n", r"targets.m1.methods.eagle9: method='eagle9'"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {eagle3: {}}\n",
     r"targets.m1.methods.eagle3.drafts: value=None not allowed: method 'eagle3' needs at least one draft"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {ngram: {drafts: {d: org/d}}}\n",
     r"targets.m1.methods.ngram.drafts: .* takes no draft"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {mtp: {k_max: 0}}\n", r"targets.m1.methods.mtp.k_max: value=0"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {mtp: {speed: 3}}\n", r"targets.m1.methods.mtp: field='speed'"),
    ("targets:\n  M 1:\n    model: org/m\n    methods: {ngram: {}}\n", r"targets: name='M 1' not allowed"),
    ("targets:\n  m1:\n    model: asset:gpt-5\n    methods: {ngram: {}}\n", r"targets.m1.model: value='asset:gpt-5'"),
    ("targets:\n  m1:\n    model: org/m\n    methods: {ngram: {prompt_lookup_min: 5, prompt_lookup_max: 2}}\n",
     r"targets.m1.methods.ngram.prompt_lookup_min: value=5 not allowed"),
    ("targets: [\n", r"not valid YAML"),
])
def test_a_bad_registry_names_entry_field_and_value(tmp_path: Path, text: str, message: str) -> None:
    path = _registry(tmp_path, text)
    with pytest.raises(RegistryError, match=message) as e:
        load_registry(path)
    assert str(path) in str(e.value)


def test_jobs_take_models_methods_and_drafts_from_the_registry(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = _registry(tmp_path, "targets:\n  my-8b:\n    model: org/My-8B\n    planner_model: llama-3.1-8b\n"
                               "    methods:\n      eagle3: {drafts: {head: org/head}}\n")
    monkeypatch.setenv(registry.REGISTRY_ENV, str(path))
    spec = JobSpec(model="my-8b", configs=(EngineConfig("none"), EngineConfig("eagle3", 4, "head")))
    assert spec.configs[1].label == "eagle3-head-k4"
    with pytest.raises(ValueError, match=r"model='smollm2-135m' not allowed; the calibration registry"):
        JobSpec(model="smollm2-135m")
    with pytest.raises(ValueError, match="method='ngram' not allowed for model='my-8b'"):
        JobSpec(model="my-8b", configs=(EngineConfig("ngram", 2),))
    with pytest.raises(ValueError, match="draft='/etc/passwd' not allowed"):
        EngineConfig("eagle3", 2, "/etc/passwd")


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calibration", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, cwd=REPO, timeout=120)


def test_cli_lists_every_method_without_a_device_requirement() -> None:
    listed = _cli("list", "registry", env={})
    assert "model=llama-3.1-8b" in listed.stdout and "method=eagle3" in listed.stdout, listed.stderr
    assert "needs=" not in listed.stdout


def test_calibrate_page_offers_every_method_without_a_device_refusal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    monkeypatch.setenv("SPECPLAN_STORE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert at.selectbox(key="cal_model").options == list(load_registry(registry.SHIPPED).targets)
    at.selectbox(key="cal_model").set_value("llama-3.1-8b").run()
    assert at.multiselect(key="cal_methods").options == ["ngram", "eagle3", "draft_model"]
    assert at.multiselect(key="cal_methods").value == ["ngram", "draft_model"]  # the heads-free default
    assert at.selectbox(key="cal_draft_eagle3").options == ["eagle3-head"]
    at.multiselect(key="cal_methods").set_value(["eagle3"]).run()
    assert not at.exception
    # no refusal of the method by device; an 8B target is refused on this CPU host for its memory only
    method_refusals = [w.value for w in at.warning if "GPU" in w.value or "Refused" in w.value]
    assert all("does not fit this host's memory" in w for w in method_refusals), method_refusals
    st.cache_resource.clear()
