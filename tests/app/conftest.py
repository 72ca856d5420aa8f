"""AppTest helpers: a fresh app run per test with caches cleared."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture
def app() -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(APP), default_timeout=90)
    return at.run()
