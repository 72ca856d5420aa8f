"""AppTest helpers: a fresh app run per test with caches cleared."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture(autouse=True)
def _navigation_not_pages_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest resets PagesManager.uses_pages_directory before every run, so with a ``pages/`` folder beside
    app.py each rerun would execute the page file alone (Streamlit's v1 multipage mode) instead of app.py."""
    from streamlit.runtime import pages_manager

    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", init)


@pytest.fixture
def app() -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=90)
    return at.run()
