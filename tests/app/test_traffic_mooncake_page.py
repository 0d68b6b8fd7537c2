"""A Mooncake trace uploaded through the Traffic page: named, with its prefix-reuse share (counted by hand in
tests/profiles/test_traffic_mooncake.py) shown on the page and taken by the sidebar's prefix-cache share unless
the user sets one."""

from __future__ import annotations

import pytest

from tests.app.test_traffic_page import page, upload
from tests.profiles.test_traffic_mooncake import FIXTURE, rows, share_by_hand


def test_mooncake_trace_loads_with_its_name_and_share(app):
    at = upload(page(app), FIXTURE.name, FIXTURE.read_bytes())
    assert not at.error, " ".join(e.value for e in at.error)
    prof = at.session_state["traffic_profile"]
    share, _, _ = share_by_hand(rows())
    assert prof.source_format == "Mooncake trace"
    assert prof.prefix_reuse.share == pytest.approx(share, rel=1e-12)
    captions = " ".join(c.value for c in at.caption)
    assert "Format: Mooncake trace" in captions
    shown = f"{share * 100:.1f} %"
    assert any(f"Prefix reuse: {shown} of prompt tokens" in i.value and "upper bound" in i.value for i in at.info)
    at.run()  # the sidebar is drawn before the page loads the upload: the next run shows what it takes
    captions = " ".join(c.value for c in at.caption)
    assert f"Using the trace's {shown}" in captions
    at.checkbox(key="prefix_set").check().run()
    at.number_input(key="prefix_pct").set_value(20.0).run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert f"Using 20 % (entered); it replaces the trace's {shown}." in captions


def test_an_entered_prefix_cache_share_round_trips_through_the_url(app):
    at = app({"prefix_set": "true", "prefix_pct": "30"})
    assert at.checkbox(key="prefix_set").value is True and at.number_input(key="prefix_pct").value == 30.0
    assert "Using 30 % (entered)." in " ".join(c.value for c in at.caption)
    bad = app({"prefix_set": "true", "prefix_pct": "150"})  # out of range: refused, the default kept
    assert bad.number_input(key="prefix_pct").value == 0.0
