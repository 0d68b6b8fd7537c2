"""The Methods page's chart: both axes start at 0 (a CPM axis starting at 0.858 made small differences look large)
and today's CPM is drawn for comparison."""

from __future__ import annotations

import json

from tests.app.pages import planned


def test_methods_chart_axes_start_at_zero_and_show_todays_cpm(app, cat):
    at = app()
    at.switch_page("views/methods.py").run()
    assert not at.exception
    [chart] = [c for c in at.get("plotly_chart")]
    fig = json.loads(chart.proto.spec)
    assert fig["layout"]["yaxis"]["rangemode"] == "tozero"
    assert fig["layout"]["yaxis2"]["rangemode"] == "tozero"
    ref = planned(cat).reference
    [today] = [t for t in fig["data"] if t.get("name", "").startswith("today's CPM")]
    assert today["yaxis"] == "y2" and set(today["y"]) == {ref.usd_per_mtok}
