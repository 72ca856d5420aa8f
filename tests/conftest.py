"""Shared fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # AppTest and relative data paths resolve from the project root

settings.register_profile("ci", max_examples=40, deadline=None)
settings.load_profile("ci")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def small_table(rng: np.random.Generator) -> pd.DataFrame:
    """400 rows: two dependent ordinal columns, a numeric, a nominal and a binary column."""
    a = rng.integers(0, 5, 400)
    return pd.DataFrame(
        {
            "a": a,
            "a2": 2 * a + rng.integers(0, 2, 400),
            "x": rng.normal(50.0, 10.0, 400),
            "colour": rng.choice(["red", "green", "blue"], 400),
            "flag": rng.choice(["yes", "no"], 400),
        }
    )
