"""Shared widgets: the log-scale budget grid."""

from __future__ import annotations

import numpy as np

from ui.widgets import log_grid


def test_log_grid_has_round_stops_and_bounded_ratio() -> None:
    grid = log_grid(0.05, 20.0)
    assert grid[0] == 0.05 and grid[-1] == 20.0
    assert {0.1, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0} <= set(grid)
    ratios = np.diff(np.log(grid))
    assert np.all(ratios > 0) and np.exp(ratios.max()) <= 1.34
