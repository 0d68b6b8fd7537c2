"""Hostile workbooks and over-long workload rules uploaded to the running Traffic page (AppTest): an error on the
page naming what is wrong, never an exception, and no profile."""

from __future__ import annotations

import pytest

from benchmarks.bench_xlsx_ingest import make_xlsx_bombs
from profiles.traffic.options import MAX_RULE_CHARS
from tests.profiles.test_xlsx_bombs import EXPECTED

LITELLM = (b"request_id,call_type,api_base,spend,startTime,endTime,model,user,prompt_tokens,completion_tokens\n"
           b"a1,acompletion,https://gw,0.01,2024-05-01T10:00:00.000Z,2024-05-01T10:00:03.000Z,gpt-4o,u1,1000,100\n"
           b"a2,acompletion,https://gw,0.01,2024-05-01T11:00:00.000Z,2024-05-01T11:00:03.000Z,gpt-4o-mini,u1,500,50\n")


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return make_xlsx_bombs(tmp_path_factory.mktemp("xlsx_page"))


def page(app):
    at = app()
    at.switch_page("views/traffic.py").run()
    assert not at.exception
    return at


@pytest.mark.parametrize("label", ["1 GB shared strings", "entity in a header"])
def test_a_hostile_workbook_is_an_error_on_the_page(app, bombs, label):
    at = page(app)
    at.file_uploader(key="traffic_upload").set_value((f"{label}.xlsx", bombs[label].read_bytes(),
                                                      "application/octet-stream")).run()
    assert not at.exception, at.exception
    shown = " ".join(e.value for e in at.error)
    assert EXPECTED[label] in shown, shown
    assert "traffic_profile" not in at.session_state or at.session_state["traffic_profile"] is None


def test_a_rule_over_the_limit_is_an_error_on_the_page(app):
    at = page(app)
    at.file_uploader(key="traffic_upload").set_value(("spend_logs.csv", LITELLM, "text/csv")).run()
    at.radio(key="traffic_wl_mode").set_value("rules").run()
    at.text_area(key="traffic_wl_rules").input("model: " + "m" * (MAX_RULE_CHARS + 1) + " => chat").run()
    assert not at.exception, at.exception
    shown = " ".join(e.value for e in at.error)
    assert f"at most {MAX_RULE_CHARS} characters" in shown and "rule 1" in shown, shown
