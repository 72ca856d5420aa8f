"""Shared fixtures."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # AppTest and relative data paths resolve from the project root

settings.register_profile("ci", max_examples=40, deadline=None)
settings.load_profile("ci")


def _local_cluster(n_workers: int, *, processes: bool = False) -> Any:
    """A quiet LocalCluster for tests: one thread per worker, no dashboards (the scheduler's HTTP server on a
    free port, so no "port 8787 in use" warning when tests run in parallel)."""
    import logging

    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n_workers,
        processes=processes,
        threads_per_worker=1,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
        silence_logs=logging.ERROR,
    )


@pytest.fixture
def local_cluster() -> Callable[..., Any]:
    """``local_cluster(n_workers, processes=False)``: a quiet LocalCluster (a context manager)."""
    return _local_cluster


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
