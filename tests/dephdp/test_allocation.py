"""Budget allocation (000 Eq. 34-37, Prop. 2, App. B) against brute force on two groups."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_core import DataError, allocate_budget, budget_norm, dual_exponent, shifted_envelopes
from mdp_core.dephdp.allocation import greatest_convex_minorant, least_convex_majorant

GRID = np.geomspace(0.05, 10.0, 20)


def brute_force(grid: np.ndarray, L: np.ndarray, eps: float, p: float, betas: np.ndarray) -> float:
    """min over a fine grid of eps_1, with eps_2 on a fine grid too, of the PL objective (||.||_q <= eps)."""
    q = dual_exponent(p)
    hi = min(grid[-1], eps)
    e1 = np.union1d(np.linspace(grid[0], hi, 801), grid[grid <= hi])
    best = np.inf
    for a in e1:
        if np.isinf(q):
            cap = min(grid[-1], eps)
        else:
            rest = eps**q - a**q
            if rest < grid[0] ** q - 1e-15:
                continue
            cap = min(grid[-1], max(rest, 0.0) ** (1 / q))
        e2 = np.union1d(np.linspace(grid[0], cap, 401), grid[grid <= cap])
        v = betas[0] * np.interp(a, grid, L[0]) + betas[1] * np.interp(e2, grid, L[1])
        best = min(best, float(v.min()))
    return best


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0, np.inf])
def test_convex_curves_are_solved_optimally(p: float) -> None:
    L = np.vstack([np.exp(-GRID), 2.0 * np.exp(-0.5 * GRID)])
    betas = np.array([1.0, 0.7])
    a = allocate_budget(GRID, L, 3.0, p=p, betas=betas)
    brute = brute_force(GRID, L, 3.0, p, betas)
    assert budget_norm(a.eps, a.q) <= 3.0 * (1 + 1e-12)
    assert a.value <= brute + 2e-4  # brute force is itself on a finite grid
    assert a.lower_bound <= brute + 1e-12


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([1.0, 2.0, 3.0, np.inf]), st.floats(0.5, 12.0))
def test_nonconvex_curves_sandwich_and_composition(seed: int, p: float, eps: float) -> None:
    rng = np.random.default_rng(seed)
    # non-increasing, non-convex curves: cumulative random drops
    L = np.vstack(
        [
            np.cumsum(rng.random(GRID.size) * rng.random(GRID.size) < 0.3)[::-1] * rng.random() + 0.1
            for _ in range(2)
        ]
    ).astype(float)
    betas = rng.random(2) + 0.1
    a = allocate_budget(GRID, L, eps, p=p, betas=betas, beta0=0.3)
    brute = 0.3 + brute_force(GRID, L, eps, p, betas)
    assert budget_norm(a.eps, a.q) <= eps * (1 + 1e-12)
    assert np.all(a.eps >= GRID[0] - 1e-12) and np.all(a.eps <= GRID[-1] + 1e-12)
    assert a.lower_bound <= brute + 1e-9
    assert brute <= a.value * (1 + 2e-3)  # brute force is itself approximate (finite search grid)
    assert a.value == pytest.approx(
        0.3 + float(betas @ [np.interp(e, GRID, row) for e, row in zip(a.eps, L, strict=True)])
    )


def test_envelopes_bound_the_points() -> None:
    rng = np.random.default_rng(3)
    y = np.sort(rng.random(GRID.size))[::-1] + 0.05 * rng.random(GRID.size)
    g = greatest_convex_minorant(GRID, y)
    u = least_convex_majorant(GRID, y)
    assert np.all(g <= y + 1e-12) and np.all(u >= y - 1e-12)
    for v in (g, u):  # discrete convexity
        s = np.diff(v) / np.diff(GRID)
        assert np.all(np.diff(s) >= -1e-7)
    lo, up = shifted_envelopes(GRID, y[None, :])
    assert np.all(lo[0] <= g + 1e-12) and np.all(up[0] >= u - 1e-9)


def test_bad_input_is_named() -> None:
    L = np.ones((2, GRID.size))
    with pytest.raises(DataError, match="too small"):
        allocate_budget(GRID, L, 0.01)
    with pytest.raises(DataError, match="ascending"):
        allocate_budget(GRID[::-1], L, 1.0)
    with pytest.raises(DataError, match="betas"):
        allocate_budget(GRID, L, 1.0, betas=[1.0, -1.0])
    with pytest.raises(DataError, match="columns"):
        allocate_budget(GRID, L[:, :5], 1.0)


def test_a_steep_last_step_keeps_the_bound_of_a_non_negative_loss_at_or_above_zero() -> None:
    """Audit: the shifted lower envelope's last point extrapolated the last slope, so a curve still falling
    at the grid's top bounded its (non-negative) loss by -0.0006 and the page showed a gap of "inf%"."""
    grid = np.array([1.0, 2.0, 3.0, 4.0])
    curve = np.array([3.0, 1.0, 0.2, 0.01])
    lo, _ = shifted_envelopes(grid, curve[None, :])
    assert lo[0, -1] == pytest.approx(0.01) and np.all(lo[0] >= 0.0)
    a = allocate_budget(grid, curve[None, :], 20.0)  # one group at the grid's top: the bound is exact
    assert a.value == pytest.approx(0.01) and a.lower_bound == pytest.approx(0.01) and a.rel_err == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=2, max_size=12))
def test_lower_envelope_of_a_falling_non_negative_curve_is_between_zero_and_the_curve(
    drops: list[float],
) -> None:
    curve = np.cumsum(drops)[::-1].copy()  # non-increasing, >= 0
    grid = np.arange(1.0, curve.size + 1.0)
    lo, _ = shifted_envelopes(grid, curve[None, :])
    assert np.all(lo[0] >= -1e-12) and np.all(lo[0] <= curve + 1e-12)
