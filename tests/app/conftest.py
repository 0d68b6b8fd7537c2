from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from profiles import load_catalog

APP = str(Path(__file__).resolve().parents[2] / "app.py")
SAMPLES = Path(__file__).resolve().parents[2] / "profiles" / "samples"


@pytest.fixture(scope="session")
def cat():
    return load_catalog()


@pytest.fixture
def app():
    def make(query: dict | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        if query:
            at.query_params.update(query)
        at.run()
        assert not at.exception, at.exception
        return at
    return make
