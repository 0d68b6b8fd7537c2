"""Kept profiles in the app: sessions opening one link share one parsed profile (read and parsed once per server),
another reading of a kept file adds no copy of its bytes, and a file larger than the store's quota is used but
not kept, and the page says its link will not reopen it."""

from __future__ import annotations

import os

from calibration.storage import kept_traffic as K
from calibration.storage.store import Store
from profiles.traffic.options import options_json, upload_digest

DATA = (b"timestamp,workload,language,prompt_tokens,output_tokens\n"
        + b"".join(f"2026-11-01T00:{i:02d}:00Z,code,english,{1500 + i},{250 + i}\n".encode() for i in range(50)))


def _upload(app, name: str = "mine.csv", data: bytes = DATA):
    at = app()
    at.switch_page("views/traffic.py").run()
    at.file_uploader(key="traffic_upload").set_value((name, data, "text/csv")).run()
    assert not at.exception and not at.error
    return at


def _store() -> Store:
    return Store(os.environ["SPECPLAN_STORE_URL"])


def test_sessions_opening_one_link_share_one_profile(app):
    digest = _upload(app).query_params["profile"]
    first, second = app({"profile": digest}), app({"profile": digest})
    prof = first.session_state["traffic_profile"]
    assert prof.name == "mine.csv"
    # one object for every session (a per-call cache would hand each session its own unpickled copy)
    assert second.session_state["traffic_profile"] is prof


def test_a_link_opened_after_its_file_was_kept_again_elsewhere_in_the_store(app):
    """A link names a profile the store does not hold: not cached as missing, so once the file is kept the same
    link opens."""
    digest = upload_digest(DATA, None)
    gone = app({"profile": digest})
    assert "not in this server's store" in " ".join(w.value for w in gone.warning)
    K.put(_store(), digest, "mine.csv", DATA, options_json(None))
    assert app({"profile": digest}).session_state["traffic_profile"].name == "mine.csv"


def test_another_reading_option_adds_a_link_not_a_copy(app):
    at = _upload(app)
    first = at.query_params["profile"]
    at.selectbox(key="traffic_ts_unit").set_value("s").run()
    assert not at.exception
    second = at.query_params["profile"]
    assert second != first
    s = _store()
    assert K.stored_bytes(s) == len(DATA)
    assert K.get(s, first)[1] == K.get(s, second)[1] == DATA


def test_a_file_larger_than_the_quota_is_used_but_not_kept(app, monkeypatch):
    monkeypatch.setenv(K.MAX_BYTES_ENV, str(len(DATA) - 1))
    at = _upload(app)
    assert at.session_state["traffic_profile"].name == "mine.csv"  # in use on this page
    assert "profile" not in at.query_params  # but the link carries no profile
    text = " ".join(s.value for s in at.success)
    assert "Not kept for shared links" in text and "a link will not reopen this profile" in text
    assert K.stored_bytes(_store()) == 0
