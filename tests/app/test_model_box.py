"""The sidebar's "Your model" box: a pasted config.json (a real one, tests/profiles/model_configs/README.md) becomes
the model every page plans, is kept by content hash, and the page's link reopens it; a bad one is refused in plain
text and the scenario keeps its model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from calibration.storage import kept_models
from calibration.storage.store import Store
from profiles import load_catalog

CONFIGS = Path(__file__).resolve().parents[1] / "profiles" / "model_configs"
QWEN35 = (CONFIGS / "Qwen--Qwen3.5-35B-A3B.json").read_text()


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="model_box_paste").input(text)
    at.button(key="model_box_use").click()
    at.run()
    assert not at.exception, at.exception
    return at


def name_of(text: str) -> str:
    return "config:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_pasted_config_is_planned_and_its_link_reopens_it(app):
    at = paste(app(), QWEN35)
    name = name_of(QWEN35)
    assert at.session_state["model"] == name
    assert at.selectbox(key="model").value == name
    shown = "\n".join(t.value for t in at.text)
    assert "34.66B parameters, 3.45B active" in shown  # 40 layers of a 2048-wide MoE (test_model_config checks by hand)
    assert "window of 1,048 tokens" in shown and "link reopens it" in shown
    assert any("Qwen3_5MoeForConditionalGeneration (config" in c.value and "4 x NVIDIA H100" in c.value
               for c in at.caption)  # the Plan page plans it
    assert at.query_params["model"] in (name, [name])
    kept_models._cache.clear()  # as on another server process: the link's model comes from the store
    again = app({"model": name})  # a new session from the link
    assert again.session_state["model"] == name and not again.warning
    assert again.selectbox(key="model").value == name


def test_a_link_to_a_config_this_store_does_not_hold_warns_and_plans_the_default(app):
    at = app({"model": "config:0123456789abcdef"})
    assert at.session_state["model"] == "llama-3.3-70b"
    assert any("model=" in w.value and "unknown" in w.value for w in at.warning)


def test_a_bad_config_is_refused_in_plain_text(app):
    at = paste(app(), json.dumps({"hidden_size": 4096, "num_hidden_layers": "**32** [x](http://e.test)"}))
    assert at.session_state["model"] == "llama-3.3-70b"
    assert at.error and "not used" in at.error[0].value
    shown = "\n".join(t.value for t in at.text)
    assert "field 'num_hidden_layers' = '**32** [x](http://e.test)': expected an integer" in shown
    assert all("e.test" not in m.value for m in at.markdown)  # the visitor's value never reaches Markdown
    at = paste(at, "")
    assert "Upload or paste a config.json first." in "\n".join(t.value for t in at.text)


def test_a_visitor_name_is_plain_and_an_fp8_checkpoint_sets_the_weights(app):
    cfg = json.loads((CONFIGS / "MiniMaxAI--MiniMax-M2.5.json").read_text())
    cfg["_name_or_path"] = "evil/**bold**<img src=x onerror=alert(1)>[link](http://e.test)"
    at = paste(app(), json.dumps(cfg))
    model = at.session_state["model"]
    assert model.startswith("config:") and at.session_state["dtype"] == "fp8"  # quantization_config fp8
    label = at.selectbox(key="model").format_func(model)
    assert label.startswith("Your model: evil/boldimgsrcxonerroralert1linkhttp//e.test (config")
    assert not any("<img" in m.value or "e.test)" in m.value for m in at.markdown)


def test_kept_models_store_the_bytes_and_check_them():
    from views.sidebar.model_box import known, with_models  # noqa: PLC0415

    parsed, why = kept_models.keep(QWEN35.encode())
    assert why == "" and parsed.spec.name == name_of(QWEN35)
    kept_models._cache.clear()
    # a kept config enters a catalogue only when added (the session's names), never behind a membership test
    assert parsed.spec.name not in load_catalog().models and known(parsed.spec.name)
    assert with_models(load_catalog(), (parsed.spec.name,)).models[parsed.spec.name] == parsed.spec
    assert kept_models.get(Store(), parsed.digest[:16]) == QWEN35.encode()
    # bytes under a digest they do not hash to are not the model the name stands for
    kept_models.put(Store(), "00000000000000ab", QWEN35.encode())
    assert kept_models.resolve("config:00000000000000ab") is None
    assert kept_models.resolve("llama-3.1-8b") is None and kept_models.resolve("config:../../etc") is None


def test_a_full_store_keeps_the_new_config_and_evicts_the_oldest(monkeypatch):
    monkeypatch.setenv(kept_models.MAX_BYTES_ENV, str(len(QWEN35.encode()) + 100))  # room for one config
    first, _ = kept_models.keep(QWEN35.encode())
    other = (CONFIGS / "mistralai--Mixtral-8x7B-v0.1.json").read_bytes()
    parsed, why = kept_models.keep(other)
    assert why == ""  # kept: a full store never refuses a new config
    assert kept_models.get(Store(), parsed.digest[:16]) == other
    assert kept_models.get(Store(), first.digest[:16]) is None  # the least recently used one made room
    kept_models._cache.clear()
    assert kept_models.resolve(first.spec.name) is None  # its link no longer reopens it


def test_a_config_larger_than_a_real_one_is_used_but_not_kept():
    cfg = json.loads(QWEN35)
    cfg["padding"] = "x" * 200_000  # any key the parser does not read
    data = json.dumps(cfg).encode()
    parsed, why = kept_models.keep(data)
    assert why == (f"the config is {len(data):,} bytes, more than the 100,000 bytes this server keeps for a model's "
                   "link (a real config.json is under 100 kB)")
    assert kept_models.get(Store(), parsed.digest[:16]) is None
    assert kept_models.resolve(parsed.spec.name) == parsed.spec  # still usable on this server


def test_a_padded_config_is_planned_and_the_page_says_its_link_will_not_reopen_it(app):
    cfg = json.loads(QWEN35)
    cfg["notes"] = "x" * 150_000  # a key the parser does not read
    text = json.dumps(cfg)
    at = paste(app(), text)
    assert at.session_state["model"] == name_of(text)
    shown = "\n".join(t.value for t in at.text)
    assert (f"This link will not reopen it: the config is {len(text.encode()):,} bytes, more than the 100,000 bytes "
            "this server keeps for a model's link") in shown
