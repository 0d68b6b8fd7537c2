"""The sidebar's "Your measured acceptance" box: a vLLM /metrics text uploaded for EAGLE-3 becomes that method's
acceptance on every page (the customer tier, with the file named as its source); a file that is not a measurement
is refused with the reader's message; "Stop using it" goes back to the library."""

from __future__ import annotations

import pytest

from tests.profiles.test_measured_acceptance import METRICS


def _use(at, name: str, data: bytes):
    at.selectbox(key="acceptance_box_method").set_value("eagle3").run()
    at.file_uploader(key="acceptance_box_upload").set_value((name, data, "text/plain")).run()
    at.button(key="acceptance_box_use").click().run()
    assert not at.exception, at.exception
    return at


def test_an_uploaded_measurement_is_the_methods_acceptance(app):
    at = _use(app({"model": "llama-3.1-8b", "tp": "1"}), "metrics.txt", METRICS.encode())
    texts = " ".join(t.value for t in at.text)
    assert "Used for eagle3: metrics.txt" in texts and "tau 2.80" in texts
    req = at.session_state["_measured_acceptance"]
    assert req[0] == "eagle3" and req[1].k == 3
    df = at.dataframe[0].value if at.dataframe else None
    assert df is not None
    row = df[df["method"] == "EAGLE-3"].iloc[0]
    assert row["acceptance from"] == "customer"
    # at the plan's K (up to the measured 3) tau is 1 + the measured rates of the positions drafted (0.8, 0.6, 0.4)
    k = int(row["K"])
    assert 1 <= k <= 3 and row["tau (tokens/step)"] == pytest.approx(1 + sum((0.8, 0.6, 0.4)[:k]), abs=0.006)
    at.button(key="acceptance_box_clear").click().run()
    assert "_measured_acceptance" not in at.session_state
    df = at.dataframe[0].value
    assert df[df["method"] == "EAGLE-3"].iloc[0]["acceptance from"] != "customer"


def test_a_file_that_is_not_a_measurement_is_refused(app):
    at = _use(app(), "notes.csv", b"a,b\n1,2\n")
    assert "This file was not used:" in " ".join(e.value for e in at.error)
    assert "expected 'position,rate'" in " ".join(t.value for t in at.text)
    assert "_measured_acceptance" not in at.session_state
