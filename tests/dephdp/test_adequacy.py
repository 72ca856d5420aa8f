"""DPN adequacy scores (000 Eq. 25-29) against hand computations, and the selection rule (Eq. 24)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdp_core import DataError, mse_likeness, radial_fit, select_mechanism


def test_exact_quadratic_and_monotone_losses_score_one() -> None:
    d = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])
    assert mse_likeness(3 * d**2 + 1, d) == pytest.approx(1.0)
    assert radial_fit(np.sqrt(d), d) == pytest.approx(1.0)


def test_hand_computed_scores() -> None:
    # pairs: d = (0, 1, 1, 0), c = (0, 1, 0, 1). Ties at d=1 pool to 0.5, at d=0 to 0.5: g = 0.5 everywhere,
    # residuals +-0.5, RMSE 0.5 = Std(c): score 0. MSE fit: slope of c on d^2 is 0 -> same.
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    c = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert radial_fit(c, d) == pytest.approx(0.0, abs=1e-9)
    assert mse_likeness(c, d) == pytest.approx(0.0, abs=1e-9)
    # decreasing loss in d: the best non-decreasing g is the constant mean; a >= 0 forces a = 0 as well.
    d2 = np.array([0.0, 1.0, 2.0, 3.0])
    c2 = np.array([3.0, 2.0, 1.0, 0.0])
    assert radial_fit(c2, d2) == pytest.approx(0.0, abs=1e-9)
    assert mse_likeness(c2, d2) == pytest.approx(0.0, abs=1e-9)
    # c = (0, 2, 1) at d = (0, 1, 2): isotonic fit (0, 1.5, 1.5), RMSE = sqrt(0.5/3), Std = sqrt(2/3)
    c3, d3 = np.array([0.0, 2.0, 1.0]), np.array([0.0, 1.0, 2.0])
    assert radial_fit(c3, d3) == pytest.approx(1 - np.sqrt(0.5 / 3) / (np.sqrt(2 / 3) + 1e-12))


@given(st.lists(st.floats(0, 10), min_size=4, max_size=30), st.integers(0, 2**31))
def test_scores_in_unit_interval_and_radial_dominates_constant(values: list[float], seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = np.array(values)
    d = rng.random(c.size)
    for f in (mse_likeness, radial_fit):
        assert 0.0 <= f(c, d) <= 1.0
    # isotonic regression on d is at least as good as any monotone function of d^2 with a >= 0
    assert radial_fit(c, d) >= mse_likeness(c, d) - 1e-9


def test_selection_rule_and_validation() -> None:
    assert select_mechanism(10, 0.1, tau_dim=300, tau_dpn=0.2) == "OPT"
    assert select_mechanism(10, 0.2, tau_dim=300, tau_dpn=0.2) == "OPT"  # <= on both
    assert select_mechanism(300, 0.05, tau_dim=300, tau_dpn=0.2) == "OPT"
    assert select_mechanism(301, 0.05, tau_dim=300, tau_dpn=0.2) == "DPN"
    assert select_mechanism(10, 0.21, tau_dim=300, tau_dpn=0.2) == "DPN"
    with pytest.raises(DataError, match="tau_dpn"):
        select_mechanism(10, 0.1, tau_dim=300, tau_dpn=1.5)
    with pytest.raises(DataError, match="same shape"):
        radial_fit(np.zeros((2, 2)), np.zeros(3))
    with pytest.raises(DataError, match="non-negative"):
        mse_likeness(np.zeros(2), np.array([0.0, -1.0]))


def test_constant_loss_scores_one_despite_rounding() -> None:
    # Regression: float noise in the isotonic fit of a constant loss once gave radial-fit 0.9998.
    c = np.full(4, 1.959713549502156)
    d = np.array([0.63696169, 0.26978671, 0.04097352, 0.01652764])
    assert radial_fit(c, d) == 1.0 and mse_likeness(c, d) == 1.0
