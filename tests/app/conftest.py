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


@pytest.fixture
def media(monkeypatch) -> dict[str, bytes]:
    """The files the app hands to the browser (download buttons), by media file id."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files: dict[str, bytes] = {}
    real = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        file_id = real(self, path_or_data, mimetype, kind, filename)
        files[file_id] = path_or_data if isinstance(path_or_data, bytes) else path_or_data.encode()
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return files
