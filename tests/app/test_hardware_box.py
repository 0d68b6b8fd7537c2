"""The sidebar's "Your GPU" box: a pasted GPU spec (profiles/samples/my_gpu.yaml) becomes the GPU every page plans,
is kept by content hash and the page's link (`hardware=spec:<digest>`) reopens it; a bad one is refused in plain text
and the scenario keeps its GPU."""

from __future__ import annotations

import hashlib
from pathlib import Path

from streamlit.testing.v1 import AppTest

from calibration.storage import kept_hardware

SAMPLE = (Path(__file__).resolve().parents[2] / "profiles" / "samples" / "my_gpu.yaml").read_text()


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="hw_box_paste").input(text)
    at.button(key="hw_box_use").click()
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_pasted_spec_is_planned_and_its_link_reopens_it(app):
    at = paste(app(), SAMPLE)
    name = "spec:" + hashlib.sha256(SAMPLE.encode()).hexdigest()[:12]
    assert at.session_state["hardware"] == name and at.selectbox(key="hardware").value == name
    assert at.session_state["price"] == 4.0  # the spec's list midpoint
    shown = "\n".join(t.value for t in at.text)
    assert "Using NVIDIA H200 NVL 141GB (sample spec)." in shown and "link reopens it" in shown
    assert any("H200 NVL" in c.value for c in at.caption)  # the Plan page plans on it
    assert at.query_params["hardware"] in (name, [name])
    kept_hardware._cache.clear()  # as on another server process: the link's GPU comes from the store
    again = app({"hardware": name})
    assert again.session_state["hardware"] == name and not again.warning


def test_a_bad_spec_is_refused_in_plain_text_and_keeps_the_gpu(app):
    at = paste(app(), SAMPLE.replace("hbm_bandwidth_gb_s: 4800", "hbm_bandwidth_gb_s: -4800"))
    assert at.session_state["hardware"] == "h100-sxm"
    assert at.error and "not used" in at.error[0].value
    shown = "\n".join(t.value for t in at.text)
    assert "field 'hbm_bandwidth_gb_s' = -4800: expected a number > 0" in shown


def test_a_link_to_a_spec_this_store_does_not_hold_warns(app):
    at = app({"hardware": "spec:0123456789ab"})
    assert at.session_state["hardware"] == "h100-sxm"
    assert any("hardware=" in w.value and "unknown" in w.value for w in at.warning)
