"""Outputs left out of the geo LP and priced back in.

The LP on the outputs in use, with the left-out outputs priced, certifies the optimum of the LP over all
outputs (scipy's HiGHS as the reference); a left-out output that carries mass at the optimum prices below
zero; the exact optimum that leaves outputs out still equals the independent full LP, also when it left out
outputs it needs.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)
from test_geo_optimal import distances, linprog_on_rows, lp_rows

from mdp_core.errors import DataError
from mdp_core.geo import optimal, optimal_geo_mechanism, solve_geo_lp
from mdp_core.geo.bounds import certified_bound
from mdp_core.geo.pricing import price_outputs
from mdp_core.mechanisms import mdp_violation


def restricted_lp(cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, active: np.ndarray):
    """The LP on the ``active`` outputs only (their rows, columns renumbered): what the rounds solve."""
    position = np.full(cost.shape[1], -1)
    position[active] = np.arange(len(active))
    mine = np.isin(rows[:, 2], active)
    sub = np.column_stack([rows[mine, :2], position[rows[mine, 2]]])
    sol = solve_geo_lp(cost[:, active], sub, ratios[mine], tol=1e-10)
    nu = np.zeros(len(rows))
    nu[mine] = sol.nu
    return sol, nu


@pytest.mark.parametrize(("shape", "eps"), [((10, 8, 3, 5), 1.0), ((6, 5, 1, 4), 2.0)])
def test_priced_outputs_certify_the_lp_over_all_outputs(shape: tuple[int, ...], eps: float) -> None:
    nx_, ny, seed, seed_n = shape
    cost, rows, ratios = lp_rows(tiny_problem(nx_, ny, seed=seed, seed_n=seed_n), eps, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    unused = np.flatnonzero(solve_geo_lp(cost, rows, ratios, tol=1e-10).p.max(axis=0) < 1e-6)
    assert 5 <= len(unused) < cost.shape[1] // 2 + 10  # measured: 21 of 30, 11 of 25
    active = np.setdiff1d(np.arange(cost.shape[1]), unused)
    sol, nu = restricted_lp(cost, rows, ratios, active)
    assert sol.objective == pytest.approx(reference, rel=1e-6)  # the unused outputs were not needed
    priced, values = price_outputs(cost, rows, ratios, nu, unused)
    assert np.all(values <= 1e-12) and values.min() >= -1e-9 * reference
    in_lp = np.isin(rows[:, 2], active)
    np.testing.assert_array_equal(priced[in_lp], np.maximum(nu[in_lp], 0))  # untouched
    assert np.all(priced >= 0)
    certificate = certified_bound(cost, rows, ratios, priced)
    assert reference * (1 - 1e-6) <= certificate <= reference * (1 + 1e-9)
    assert certified_bound(cost, rows, ratios, nu) < 0.9 * reference  # the left-out rows' multipliers matter


def test_an_output_the_optimum_needs_prices_below_zero() -> None:
    cost, rows, ratios = lp_rows(tiny_problem(6, 5, seed=1, seed_n=4), 2.0, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    heaviest = int(np.argmax(solve_geo_lp(cost, rows, ratios, tol=1e-10).p.sum(axis=0)))
    active = np.setdiff1d(np.arange(cost.shape[1]), [heaviest])
    sol, nu = restricted_lp(cost, rows, ratios, active)
    assert sol.objective > reference * (1 + 1e-4)  # without it the LP is worse
    priced, values = price_outputs(cost, rows, ratios, nu, np.array([heaviest]))
    assert values[0] < -1e-4 * reference
    # independent: the pricing LP with scipy, min (c_z - floor)'k over the rows of z, sum k <= 1, k >= 0
    reduced = cost.copy()
    np.add.at(reduced, (rows[:, 0], rows[:, 2]), nu)
    np.add.at(reduced, (rows[:, 1], rows[:, 2]), -ratios * nu)
    floor = reduced[:, active].min(axis=1)
    own = rows[:, 2] == heaviest
    n, r = cost.shape[0], int(own.sum())
    a_ub = np.zeros((r + 1, n))
    a_ub[np.arange(r), rows[own, 0]] += 1.0
    a_ub[np.arange(r), rows[own, 1]] -= ratios[own]
    a_ub[r] = 1.0
    res = linprog(cost[:, heaviest] - floor, A_ub=a_ub, b_ub=np.r_[np.zeros(r), 1.0], method="highs")
    assert values[0] == pytest.approx(res.fun, rel=1e-6)
    assert certified_bound(cost, rows, ratios, priced) <= reference * (1 + 1e-9)  # still a bound


@pytest.mark.parametrize(("below", "eps"), [(1e-2, 1.0), (0.3, 2.0)])
def test_the_exact_optimum_leaves_outputs_out_and_brings_back_those_it_needs(
    below: float, eps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 0.3 round 1 leaves out outputs that carry mass at the optimum (measured: 12 of 16 out, 5 back)."""
    monkeypatch.setattr(optimal, "LEAVE_OUT_BELOW", below)
    problem = tiny_problem(5, 4, seed=2, seed_n=3)
    m = problem.loss.shape[1]
    mech = optimal_geo_mechanism(problem, eps, dilation=1.5)
    solved = mech.info["outputs_solved"]
    assert solved[0] == m and solved[1] < m  # round 2 without the outputs round 1 barely used
    if below == 0.2:
        assert max(solved[2:], default=0) > solved[1]  # some came back
    optimum = full_lp(problem, eps)
    bound = mech.info["lower_bound"]
    assert bound.exact and bound.value <= optimum + 1e-12
    assert mech.utility_km(problem) == pytest.approx(optimum, rel=1e-5)
    assert mdp_violation(mech.matrix, distances(problem), eps) <= 1e-9
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize(("outputs", "eps"), [([0, 1], 1.0), ([3, 7, 9], 2.0)])
def test_the_exact_optimum_started_from_a_few_outputs_brings_in_those_it_needs(
    outputs: list[int], eps: float
) -> None:
    """Two or three arbitrary outputs to start from (measured: 2 then 15, 3 then 12 outputs in the LP)."""
    problem = tiny_problem(5, 4, seed=2, seed_n=3)
    mech = optimal_geo_mechanism(problem, eps, dilation=1.5, outputs=np.array(outputs))
    solved = mech.info["outputs_solved"]
    assert solved[0] == len(outputs) and max(solved) > len(outputs)
    optimum = full_lp(problem, eps)
    bound = mech.info["lower_bound"]
    assert bound.exact and bound.value <= optimum + 1e-12
    assert mech.utility_km(problem) == pytest.approx(optimum, rel=1e-5)
    assert mdp_violation(mech.matrix, distances(problem), eps) <= 1e-9


@pytest.mark.parametrize("start_set", [True, False])
def test_a_start_set_or_leave_out_false_keeps_the_outputs_whole_in_round_2(
    monkeypatch: pytest.MonkeyPatch, start_set: bool
) -> None:
    """The caller's start set (a coarser grid's optimum's outputs), or every output with ``leave_out=False``,
    is not trimmed after round 1, even where the threshold would leave most outputs out (0.3: 12 of 16 in
    the test above)."""
    monkeypatch.setattr(optimal, "LEAVE_OUT_BELOW", 0.3)
    problem = tiny_problem(5, 4, seed=2, seed_n=3)
    m = problem.loss.shape[1]
    start = np.arange(m - 2) if start_set else None
    mech = optimal_geo_mechanism(problem, 1.0, dilation=1.5, outputs=start, leave_out=start_set)
    solved = mech.info["outputs_solved"]
    first = m - 2 if start_set else m
    assert solved[0] == first and solved[1] >= first
    bound = mech.info["lower_bound"]
    assert bound.exact and mech.utility_km(problem) == pytest.approx(full_lp(problem, 1.0), rel=1e-5)
    assert mdp_violation(mech.matrix, distances(problem), 1.0) <= 1e-9


@pytest.mark.parametrize("outputs", [[3], [0, 99], [-1, 2]])
def test_outputs_to_start_from_must_be_two_valid_indices(outputs: list[int]) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    m = problem.loss.shape[1]
    with pytest.raises(DataError, match=f"at least two of the {m} output indices"):
        optimal_geo_mechanism(problem, 1.0, outputs=np.array(outputs))
