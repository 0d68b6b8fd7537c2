"""The sidebar's measured-acceptance box refuses hostile files with the reader's message (no "This app has
encountered an error"): an infinite position, a 5,000-digit count, 4 MB of '[' and a 200,000-character cell used to
raise OverflowError, ValueError, RecursionError and csv.Error past the box."""

from __future__ import annotations

from profiles.measured_acceptance import MAX_BYTES
from tests.app.test_acceptance_box import _use

HOSTILE = [
    ("rates.csv", b"position,rate\ninf,0.7\n", "position 'inf'; expected a whole number"),
    ("hist.csv", b"accepted,count\n0,1\n1," + b"9" * 5000 + b"\n", "a run of 5,000 digits"),
    ("bench.json", b"[" * MAX_BYTES, "JSON nested deeper than"),
    ("rates.csv", b"position,rate\n1," + b"x" * 200_000 + b"\n", "line 2 has 200,002 characters"),
]


def test_hostile_files_are_refused_in_the_box(app):
    at = app()
    for name, data, says in HOSTILE:
        at = _use(at, name, data)  # _use asserts no exception reached the page
        assert "This file was not used:" in " ".join(e.value for e in at.error)
        assert says in " ".join(t.value for t in at.text), name
        assert "_measured_acceptance" not in at.session_state
