"""Every profile file loads and validates; bad entries raise errors naming file, entry, field, value."""

import shutil
from pathlib import Path

import pytest
import yaml

from profiles import ProfileError, cpu_hardware, load_catalog
from profiles.catalog import DATA_DIR


def test_every_profile_file_loads():
    cat = load_catalog()
    assert {"a100-80gb-sxm", "h100-sxm", "h200", "b200", "l40s", "mi300x"} <= set(cat.hardware)
    assert {"llama-3.1-8b", "llama-3.3-70b", "qwen3-32b", "deepseek-v3", "gpt-oss-120b", "vicuna-7b",
            "vicuna-13b", "smollm2-135m"} <= set(cat.models)
    assert {"eagle3", "eagle", "medusa", "mtp", "p_eagle", "draft_model", "ngram", "dflash", "dspark", "suffix",
            "ngram_gpu"} == set(cat.methods)
    assert {"chat", "code", "agent", "reasoning", "rag_summarization", "translation"} <= set(cat.workloads)
    assert [lv.number for lv in sorted(cat.levers.values(), key=lambda x: x.number)] == list(range(1, 8))


def test_every_number_carries_a_source_and_date():
    cat = load_catalog()
    for table in (cat.hardware, cat.models, cat.methods, cat.workloads, cat.languages, cat.levers):
        for rec in table.values():
            src = rec.price if hasattr(rec, "price") else rec.source
            assert src.source and len(src.date) == 10
    for hw in cat.hardware.values():
        assert hw.usd_per_gpu_hour_low <= hw.usd_per_gpu_hour_high
        assert hw.efficiency.source.date


def test_moe_models_are_consistent_with_their_active_counts():
    cat = load_catalog()
    for name in ("deepseek-v3", "gpt-oss-120b"):
        m = cat.models[name]
        assert m.dense_params_b + m.experts_per_token * m.expert_params_b == pytest.approx(m.active_params_b,
                                                                                           rel=0.02)
    assert "mtp" in cat.models["deepseek-v3"].native_methods


def test_method_availability_explains_why():
    cat = load_catalog()
    ok, why = cat.method_available("mtp", "llama-3.1-8b")
    assert not ok and "MTP" in why
    assert cat.method_available("mtp", "deepseek-v3") == (True, "")
    ok, why = cat.method_available("draft_model", "deepseek-v3")
    assert not ok and "tokenizer" in why


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    shutil.copytree(DATA_DIR, d)
    return d


def _edit(d: Path, file: str, entry: str, field: str, value) -> None:
    doc = yaml.safe_load((d / file).read_text())
    if value is _DELETE:
        del doc["entries"][entry][field]
    else:
        doc["entries"][entry][field] = value
    (d / file).write_text(yaml.safe_dump(doc))


_DELETE = object()


@pytest.mark.parametrize("file, entry, field, value, allowed", [
    ("hardware.yaml", "h100-sxm", "hbm_bandwidth_gb_s", -5, "a number > 0"),
    ("hardware.yaml", "h100-sxm", "hbm_gb", "lots", "a number"),
    ("hardware.yaml", "h100-sxm", "usd_per_gpu_hour", {"low": 5, "high": 2}, "low <= high"),
    ("models.yaml", "llama-3.1-8b", "layers", 0, "a number > 0"),
    ("models.yaml", "llama-3.1-8b", "layers", 3.5, "an integer"),
    ("models.yaml", "llama-3.1-8b", "hidden_size", _DELETE, "required field"),
    ("models.yaml", "llama-3.1-8b", "source", {"source": "x", "date": "last year"}, "ISO date"),
    ("methods.yaml", "eagle3", "drafting", "telepathy", "one of sequential_head"),
    ("methods.yaml", "eagle3", "alpha_default", {"low": 0.6, "high": 1.4}, "a probability"),
    ("methods.yaml", "eagle3", "colour", "blue", "one of the fields"),
    ("workloads.yaml", "code", "ngram_alpha", 2.0, "a probability"),
    ("levers.yaml", "vsd", "kind", "magic", "one of alpha"),
])
def test_bad_entries_name_file_entry_field_value_and_what_is_allowed(data_copy, file, entry, field, value,
                                                                     allowed):
    _edit(data_copy, file, entry, field, value)
    with pytest.raises(ProfileError) as err:
        load_catalog(data_copy)
    msg = str(err.value)
    # nested fields are named with a dot: 'alpha_default.high'
    assert file in msg and f"'{entry}'" in msg and f"'{field}" in msg and allowed in msg
    if not isinstance(value, dict) and value is not _DELETE:
        assert repr(value) in msg


def test_cross_references_are_checked(data_copy):
    _edit(data_copy, "models.yaml", "llama-3.3-70b", "draft_model", "llama-9b")
    with pytest.raises(ProfileError, match="'draft_model' = 'llama-9b'"):
        load_catalog(data_copy)


def test_invalid_yaml_names_the_file(data_copy):
    (data_copy / "workloads.yaml").write_text("entries: [unclosed")
    with pytest.raises(ProfileError, match="workloads.yaml: not valid YAML"):
        load_catalog(data_copy)


def test_cpu_hardware_describes_this_machine():
    hw = cpu_hardware(memory_bandwidth_gb_s=12.0)
    assert hw.kind == "cpu" and hw.hbm_bandwidth_gb_s == 12.0 and hw.hbm_gb > 1
    assert hw.max_tp == 1
