"""An uploaded config.json without `_name_or_path` (GLM's hub configs have none) is named by its file's name, not
by its architecture class."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiles.model_config import name_from_file, parse_model_config

GLM5 = Path(__file__).resolve().parent / "model_configs" / "zai-org--GLM-5.json"


@pytest.mark.parametrize(("file_name", "name"), [
    ("zai-org--GLM-4.7-Flash.json", "zai-org/GLM-4.7-Flash"), ("GLM-4.7-Flash-config.json", "GLM-4.7-Flash"),
    ("GLM-4.7-Flash_config.JSON", "GLM-4.7-Flash"), ("config.json", ""), ("config-GLM-5.json", "GLM-5"),
    ("evil<img src=x>.json", "evilimgsrcx"), ("", "")])
def test_a_file_name_gives_the_models_name(file_name: str, name: str) -> None:
    assert name_from_file(file_name) == name


def test_a_config_without_name_is_labelled_by_its_file_then_its_class() -> None:
    doc = json.loads(GLM5.read_text())
    doc.pop("_name_or_path", None)
    by_class = parse_model_config(doc).spec.label
    assert by_class.startswith(doc["architectures"][0] + " (config")
    named = parse_model_config(doc, file_name="zai-org--GLM-5.json")
    assert named.spec.label.startswith("zai-org/GLM-5 (config")
    assert named.spec.name == parse_model_config(doc).spec.name  # the same config, the same digest
    assert parse_model_config(doc, file_name="config.json").spec.label == by_class
    with_id = parse_model_config({**doc, "_name_or_path": "zai-org/GLM-5"}, file_name="other.json")
    assert with_id.spec.label.startswith("zai-org/GLM-5 (config")  # the config's own name comes first
