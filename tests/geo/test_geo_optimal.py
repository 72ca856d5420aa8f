"""The exact optimum by row generation over the block interior point.

solve_geo_lp equals scipy's HiGHS on the same rows and its multipliers certify that value;
optimal_geo_mechanism equals an independent full LP (every ordered pair), is eps-mDP on all pairs
(exhaustive mdp_violation), brackets the optimum from both sides, and no verified mechanism is better.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.sparse import csr_matrix
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)

from mdp_core.errors import DataError
from mdp_core.geo import (
    GeoProblem,
    _newton,
    build_problem,
    coarser_start,
    compare,
    compare_methods,
    em_remap_geo,
    exponential_geo,
    grid_road_network,
    ipm,
    load_road_network,
    optimal,
    optimal_geo_mechanism,
    run_bench,
    solve_geo_lp,
    spanner_mechanism,
    spanner_pairs,
    tree_extension,
    verify_geo,
)
from mdp_core.geo.bounds import _privacy_rows, _violated_rows, certified_bound
from mdp_core.geo.ipm import GeoLPSolution
from mdp_core.mechanisms import mdp_violation
from mdp_core.mechanisms.lp import chain_implied


def distances(problem) -> np.ndarray:
    """Independent reference metric: Euclidean km between all targets."""
    pts = problem.targets_km
    return np.linalg.norm(pts[:, None] - pts[None], axis=2)


def lp_rows(problem, eps: float, dilation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cost = problem.prior[:, None] * problem.loss
    pts = problem.targets_km
    rows = _privacy_rows(spanner_pairs(pts, dilation)[0], cost.shape[1])
    ratios = np.exp(eps * np.linalg.norm(pts[rows[:, 0]] - pts[rows[:, 1]], axis=1))
    return cost, rows, ratios


def linprog_on_rows(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, row_sums: np.ndarray | None = None
) -> float:
    """Independent reference: the same LP with scipy's HiGHS (rows built here, not by the module)."""
    n, m = cost.shape
    r = len(rows)
    cols = np.concatenate([rows[:, 0] * m + rows[:, 2], rows[:, 1] * m + rows[:, 2]])
    a_ub = csr_matrix((np.concatenate([np.ones(r), -ratios]), (np.tile(np.arange(r), 2), cols)), (r, n * m))
    a_eq = csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), np.arange(n * m))), (n, n * m))
    b_eq = np.ones(n) if row_sums is None else row_sums
    res = linprog(cost.ravel(), A_ub=a_ub, b_ub=np.zeros(r), A_eq=a_eq, b_eq=b_eq, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


@pytest.mark.parametrize(("eps", "dilation"), [(0.5, 1.1), (2.0, 1.1), (1.0, 1.5)])
def test_interior_point_equals_highs_on_the_same_rows(eps: float, dilation: float) -> None:
    problem = tiny_problem(5, 4, seed=2, seed_n=3)
    cost, rows, ratios = lp_rows(problem, eps, dilation)
    reference = linprog_on_rows(cost, rows, ratios)
    sol = solve_geo_lp(cost, rows, ratios, tol=1e-10)
    assert sol.objective == pytest.approx(reference, rel=1e-6)  # HiGHS's own tolerances are 1e-7
    certificate = certified_bound(cost, rows, ratios, sol.nu)
    assert reference * (1 - 1e-6) <= certificate <= reference * (1 + 1e-7) <= sol.objective * (1 + 2e-7)
    np.testing.assert_allclose(sol.p.sum(axis=1), 1.0, atol=1e-10)
    assert np.all(sol.p > 0) and np.all(sol.nu >= 0)
    excess = sol.p[rows[:, 0], rows[:, 2]] - ratios * sol.p[rows[:, 1], rows[:, 2]]
    assert excess.max() <= 1e-9  # the kept rows hold


@pytest.mark.parametrize("fail_single_at", [None, 3])
def test_early_float32_blocks_reach_float64s_optimum_and_certificate(
    monkeypatch: pytest.MonkeyPatch, fail_single_at: int | None
) -> None:
    """Blocks inverted in float32 while the refined step keeps float64's accuracy, then float64 for good;
    a float32 block that is not definite (``fail_single_at``) hands that very iteration to float64."""
    problem = tiny_problem(10, 8, seed=3, seed_n=5)  # 99 targets x 30 outputs
    cost, rows, ratios = lp_rows(problem, 1.5, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    plain = solve_geo_lp(cost, rows, ratios, tol=1e-6)
    precisions: list[str] = []
    invert = _newton.invert_spd_blocks

    def spy(blocks: np.ndarray) -> int | None:
        precisions.append(blocks.dtype.name)
        if blocks.dtype == np.float32 and len(precisions) == fail_single_at:
            return 0  # as LAPACK reports a block that is not positive definite
        return invert(blocks)

    monkeypatch.setattr(_newton, "invert_spd_blocks", spy)
    monkeypatch.setattr(ipm, "_SINGLE_FROM", 0)
    mixed = solve_geo_lp(cost, rows, ratios, tol=1e-6)
    single = precisions.count("float32")
    assert single >= 2 and precisions[:single] == ["float32"] * single  # float32 first, never after float64
    assert "float64" in precisions[single:] and set(precisions[single:]) == {"float64"}
    if fail_single_at is not None:
        # a factorisation a step (the last iteration only finds convergence), the failed one twice
        assert single == fail_single_at and len(precisions) == mixed.iterations
    assert plain.converged and mixed.converged  # measured: 17 iterations in float64, 10 + 9 mixed
    for sol in (plain, mixed):
        assert sol.objective == pytest.approx(reference, rel=2e-6)
        certificate = certified_bound(cost, rows, ratios, sol.nu)
        assert reference * (1 - 2e-6) <= certificate <= reference * (1 + 1e-7)
        excess = sol.p[rows[:, 0], rows[:, 2]] - ratios * sol.p[rows[:, 1], rows[:, 2]]
        assert excess.max() <= 1e-6


def test_a_shifted_factorisation_is_refined_to_the_unshifted_systems_step() -> None:
    """Blocks factorised with their diagonals x (1 + shift): the unrefined step is off by about the shift,
    the refined one solves the unshifted Newton system (as the factorisation without a shift does)."""
    problem = tiny_problem(6, 5, seed=1, seed_n=4)
    cost, rows, ratios = lp_rows(problem, 1.0, 1.1)
    n, m = cost.shape
    rng = np.random.default_rng(7)
    st = _newton.Structure.build(n, m, rows, ratios)
    d, diag = rng.uniform(0.1, 10.0, len(rows)), rng.uniform(0.1, 10.0, n * m)
    f, g = rng.normal(size=n * m), rng.normal(size=n)
    exact = _newton.Newton(st, d, diag, np.empty((m, n, n))).solve(f, g)
    shifted = _newton.Newton(st, d, diag, np.empty((m, n, n)), shift=1e-3)
    rough = shifted.solve(f, g, refine=False)
    refined = shifted.solve(f, g)
    assert np.abs(rough[0] - exact[0]).max() > 1e-6  # the shift is really there
    for got, want in zip(refined, exact, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.abs(want).max())


def test_a_float64_block_not_definite_is_shifted_and_the_solve_still_converges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Late on the path a float64 block can fail its Cholesky in floating point: the factorisation is
    retried with the diagonals shifted, and later iterations start at that shift (before, the solve gave
    up: the city at depth 2, eps 3.47, stopped 7.6e-6 above its certificate). No shift left: it stops."""
    problem = tiny_problem(10, 8, seed=3, seed_n=5)  # 99 targets x 30 outputs
    cost, rows, ratios = lp_rows(problem, 1.5, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    shifts: list[float] = []
    newton = _newton.Newton.__init__

    def failing_unshifted_from_the_6th(
        self: _newton.Newton, st: _newton.Structure, *arrays: np.ndarray, shift: float = 0.0
    ) -> None:
        shifts.append(shift)
        if shift == 0.0 and len(shifts) >= 6:
            raise np.linalg.LinAlgError("block 0 is not positive definite")
        newton(self, st, *arrays, shift=shift)

    monkeypatch.setattr(_newton.Newton, "__init__", failing_unshifted_from_the_6th)
    sol = solve_geo_lp(cost, rows, ratios, tol=1e-9)
    # from then on the iterations start at the shift that worked
    assert sol.converged and shifts[5:] == [0.0] + [_newton._SHIFTS[0]] * (len(shifts) - 6)
    assert sol.objective == pytest.approx(reference, rel=2e-6)
    certificate = certified_bound(cost, rows, ratios, sol.nu)
    assert reference * (1 - 2e-6) <= certificate <= reference * (1 + 1e-7)
    shifts.clear()
    monkeypatch.setattr(_newton, "_SHIFTS", ())  # no shift to try: the 6th iteration keeps the 5th's point
    stopped = solve_geo_lp(cost, rows, ratios, tol=1e-9)
    assert not stopped.converged and stopped.iterations == 6


def test_a_certify_stop_returns_once_the_certificate_is_that_close() -> None:
    problem = tiny_problem(10, 8, seed=3, seed_n=5)  # 99 targets x 30 outputs
    cost, rows, ratios = lp_rows(problem, 1.5, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    full = solve_geo_lp(cost, rows, ratios, tol=1e-11)
    early = solve_geo_lp(cost, rows, ratios, tol=1e-11, certify=1e-4)
    assert early.converged and early.iterations < full.iterations  # measured: 16 against 18
    certificate = certified_bound(cost, rows, ratios, early.nu)
    assert certificate <= reference * (1 + 1e-7) <= early.objective * (1 + 2e-7)
    assert early.objective <= certificate * (1 + 1e-4)
    excess = early.p[rows[:, 0], rows[:, 2]] - ratios * early.p[rows[:, 1], rows[:, 2]]
    assert excess.max() <= 1e-4  # the rows met to the same accuracy


def test_a_deadline_stops_before_a_step_that_would_overrun_it(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(10, 8, seed=3, seed_n=5)
    cost, rows, ratios = lp_rows(problem, 1.5, 1.1)
    clock = iter(np.arange(100.0))  # every reading of the clock one second later: every step takes 1 s
    monkeypatch.setattr(ipm, "time", SimpleNamespace(perf_counter=lambda: float(next(clock))))
    sol = solve_geo_lp(cost, rows, ratios, tol=1e-11, deadline=5.5)
    # start at 0; the check of step k reads k; the step after the 5th would end at 6 > 5.5
    assert sol.iterations == 5 and not sol.converged
    full = solve_geo_lp(cost, rows, ratios, tol=1e-11)
    assert full.iterations > 5 and sol.objective > full.objective


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_centrality_correctors_reach_the_same_optimum_in_fewer_iterations(
    eps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = tiny_problem(10, 8, seed=3, seed_n=5)  # 99 targets x 30 outputs
    cost, rows, ratios = lp_rows(problem, eps, 1.1)
    reference = linprog_on_rows(cost, rows, ratios)
    corrected = solve_geo_lp(cost, rows, ratios, tol=1e-6)
    monkeypatch.setattr(ipm, "_CORRECTORS", 0)  # Mehrotra's predictor-corrector alone
    plain = solve_geo_lp(cost, rows, ratios, tol=1e-6)
    assert corrected.converged and plain.converged
    for sol in (corrected, plain):
        assert sol.objective == pytest.approx(reference, rel=2e-6)
    assert corrected.iterations <= 0.8 * plain.iterations  # measured: 22 against 29, 26 against 39


def test_capped_centring_weight_cuts_iterations_on_a_sub_city(
    baltimore: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 250 targets nearest the centre of the 15 km city (117 outputs), eps 1.5: Mehrotra's centring
    weight alone stays high there (the effect needs a city: on grids of 99-143 targets both take about as
    many iterations). Measured: a gap of 1e-6 at iteration 41 against 49 (200 targets: 43 / 49, 300: 50 /
    59). Before the map reader kept loop roads (15 loops, 4,458 instead of 4,473 nodes), the 200 targets
    took 42 against 59."""
    problem = build_problem(
        load_road_network(baltimore), seed_n=12, depth=1, n_tasks=60, rng=np.random.default_rng(0)
    )
    pts = problem.targets_km
    sub = problem.restricted(np.argsort(np.linalg.norm(pts - pts.mean(axis=0), axis=1))[:250])
    cost, rows, ratios = lp_rows(sub, 1.5, 1.1)

    def solve_to_a_small_gap() -> tuple[GeoLPSolution, int]:
        gaps: list[float] = []  # each iteration's, as reported ("interior point: gap 1.2e-03")
        tell = lambda _, message: gaps.append(float(message.split()[-1]))  # noqa: E731
        sol = solve_geo_lp(cost, rows, ratios, tol=1e-7, progress=tell)
        return sol, next(k for k, gap in enumerate(gaps, 1) if gap <= 1e-6)

    capped, capped_iterations = solve_to_a_small_gap()
    monkeypatch.setattr(ipm, "_SIGMA_MAX", 1.0)  # Mehrotra's (mu_aff / mu)^3 as it is
    plain, plain_iterations = solve_to_a_small_gap()
    assert capped.objective == pytest.approx(plain.objective, rel=2e-6)
    assert certified_bound(cost, rows, ratios, capped.nu) == pytest.approx(capped.objective, rel=2e-6)
    assert capped_iterations <= 0.9 * plain_iterations


@given(
    v=st.lists(st.floats(1e-9, 1e3), min_size=1, max_size=30),
    seed=st.integers(0, 2**16),
)
def test_max_step_is_the_longest_step_that_stays_nonnegative(v: list[float], seed: int) -> None:
    values = np.array(v)
    dv = np.random.default_rng(seed).normal(scale=values.max(), size=len(values))
    step = ipm._max_step(values, dv)
    assert 0.0 < step <= 1.0
    assert np.all(values + step * dv >= -1e-12 * values.max())
    blocking = dv < 0  # independent: the first component to reach zero, or the whole step
    expected = min(1.0, float((-values[blocking] / dv[blocking]).min())) if blocking.any() else 1.0
    assert step == pytest.approx(expected, rel=1e-12)


def test_row_sums_below_one_solve_the_lp_of_some_outputs_with_the_rest_held_fixed() -> None:
    problem = tiny_problem(5, 4, seed=5, seed_n=3)
    cost, rows, ratios = lp_rows(problem, 1.0, 1.1)
    held = exponential_geo(problem, 1.0).matrix[:, ::2]  # a private mechanism's even outputs, held fixed
    budget = 1.0 - held.sum(axis=1)  # what they leave: feasible (the EM's odd outputs meet every row)
    odd = np.arange(1, cost.shape[1], 2)
    position = np.full(cost.shape[1], -1)
    position[odd] = np.arange(len(odd))
    keep = np.isin(rows[:, 2], odd)
    sub = np.column_stack([rows[keep, :2], position[rows[keep, 2]]])
    sol = solve_geo_lp(cost[:, odd], sub, ratios[keep], tol=1e-10, row_sums=budget)
    assert sol.objective == pytest.approx(linprog_on_rows(cost[:, odd], sub, ratios[keep], budget), rel=1e-6)
    np.testing.assert_allclose(sol.p.sum(axis=1), budget, atol=1e-10)
    excess = sol.p[sub[:, 0], sub[:, 2]] - ratios[keep] * sol.p[sub[:, 1], sub[:, 2]]
    assert excess.max() <= 1e-9
    n = cost.shape[0]
    with pytest.raises(DataError, match=f"row_sums must be {n} positive numbers"):
        solve_geo_lp(cost, rows, ratios, row_sums=np.zeros(n))


def test_near_rows_are_those_within_the_margin_of_breaking() -> None:
    problem = tiny_problem(4, 3, seed=2, seed_n=3)
    p = np.random.default_rng(1).dirichlet(np.ones(problem.loss.shape[1]), size=problem.loss.shape[0])
    pts, eps = problem.targets_km, 1.0
    ratio = np.exp(eps * distances(problem))
    for margin in (0.0, 0.3):
        got = _violated_rows(p, pts, eps, 1e-10, limit=10**6, relative=margin)
        excess = p[:, None, :] - (1 - margin) * ratio[:, :, None] * p[None, :, :]
        excess[np.arange(len(p)), np.arange(len(p))] = 0.0
        expected = {tuple(r) for r in np.argwhere(excess > 1e-10)}
        assert {tuple(r) for r in got} == expected and expected


def test_rows_of_pairs_with_a_target_between_them_are_skipped() -> None:
    problem = tiny_problem(4, 3, seed=2, seed_n=3)
    pts, eps = problem.targets_km, 1.0
    n = len(pts)
    between = np.zeros((n, n), dtype=bool)  # independent: a target strictly inside the segment a-b
    for a in range(n):
        for b in range(n):
            for z in range(n):
                u, v = pts[z] - pts[a], pts[b] - pts[a]
                inside = 0 < u @ v < v @ v
                between[a, b] |= z not in (a, b) and inside and abs(u[0] * v[1] - u[1] * v[0]) < 1e-9
    implied = chain_implied(distances(problem))
    np.testing.assert_array_equal(implied, between)
    assert implied.any() and not implied.all()
    p = np.random.default_rng(3).dirichlet(np.ones(problem.loss.shape[1]), size=n)
    got = _violated_rows(p, pts, eps, 1e-10, limit=10**6, relative=0.3, skip=implied)
    every = _violated_rows(p, pts, eps, 1e-10, limit=10**6, relative=0.3)
    assert {tuple(r) for r in got} == {tuple(r) for r in every if not implied[r[0], r[1]]}
    assert len(got) < len(every)


def test_a_warm_start_reaches_the_same_optimum_with_added_rows() -> None:
    problem = tiny_problem(5, 4, seed=4, seed_n=3)
    cost, rows, ratios = lp_rows(problem, 1.0, 1.5)
    first = solve_geo_lp(cost, rows, ratios, tol=1e-3)
    pts = problem.targets_km
    extra = _privacy_rows(spanner_pairs(pts, 1.05)[0], cost.shape[1])
    more = np.concatenate([rows, extra])
    more_ratios = np.exp(1.0 * np.linalg.norm(pts[more[:, 0]] - pts[more[:, 1]], axis=1))
    warm = solve_geo_lp(cost, more, more_ratios, tol=1e-9, start=first)
    assert warm.objective == pytest.approx(linprog_on_rows(cost, more, more_ratios), rel=1e-6)
    assert warm.objective >= first.objective * (1 - 1e-3)  # more rows: never a lower optimum


@pytest.mark.parametrize(("eps", "seed_n"), [(0.5, 2), (2.0, 3), (1.0, 3)])
def test_optimal_mechanism_is_the_full_lp_optimum_and_private(eps: float, seed_n: int) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=seed_n)
    mech = optimal_geo_mechanism(problem, eps, dilation=1.5)  # a loose spanner: rows must be generated
    optimum = full_lp(problem, eps)
    utility = mech.utility_km(problem)
    bound = mech.info["lower_bound"]
    assert bound.exact and utility <= bound.value * (1 + 1e-5)
    assert bound.value <= optimum + 1e-12
    assert utility == pytest.approx(optimum, rel=1e-5)
    dist = distances(problem)
    assert mdp_violation(mech.matrix, dist, eps) <= 1e-9
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert mech.method == "optimal" and mech.info["rounds"] >= 2


@pytest.mark.parametrize("share", [0.5, 0.01])
def test_spanner_rows_left_out_of_round_two_come_back_when_broken(
    share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 2 leaves out the spanner rows round 1's solution meets with ``share`` of their ratio to spare
    (at 0.01 nearly all of them): the rows it then breaks are generated again and the optimum is the same."""
    monkeypatch.setattr(optimal, "SPARE_SHARE", share)
    monkeypatch.setattr(optimal, "SPARE_MOST", 1.0)  # however many are spare
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    cost, rows, ratios = lp_rows(problem, 2.0, 1.1)
    p = solve_geo_lp(cost, rows, ratios, tol=1e-3).p  # round 1's solution
    spare = optimal._spare_rows(p, rows, ratios)
    excess = p[rows[:, 0], rows[:, 2]] / (ratios * p[rows[:, 1], rows[:, 2]])  # independent: the ratio used
    np.testing.assert_array_equal(spare, excess < 1.0 - share)
    assert 0 < spare.sum() < len(rows)
    mech = optimal_geo_mechanism(problem, 2.0)
    assert mech.info["lower_bound"].exact
    assert mech.utility_km(problem) == pytest.approx(full_lp(problem, 2.0), rel=1e-5)
    assert mdp_violation(mech.matrix, distances(problem), 2.0) <= 1e-9


def test_no_spanner_row_leaves_round_two_when_most_are_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 1's iterate meets most rows with slack where the optimum binds most of them (large eps): then
    every row stays (the city at depth 2, eps 3.47, was not exact in 600 s with 2/3 of them left out)."""
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    cost, rows, ratios = lp_rows(problem, 2.0, 1.1)
    p = solve_geo_lp(cost, rows, ratios, tol=1e-3).p
    share = np.mean(p[rows[:, 0], rows[:, 2]] < 0.5 * ratios * p[rows[:, 1], rows[:, 2]])  # independent
    assert 0.0 < share < 1.0
    monkeypatch.setattr(optimal, "SPARE_MOST", share)  # as many as it allows: still dropped
    assert optimal._spare_rows(p, rows, ratios).mean() == share
    monkeypatch.setattr(optimal, "SPARE_MOST", share * 0.99)  # more than it allows: none
    assert not optimal._spare_rows(p, rows, ratios).any()


@pytest.mark.parametrize(("seed", "eps"), [(1, 1.0), (1, 2.0), (3, 1.0), (3, 2.0)])
def test_a_solution_breaking_left_out_rows_is_raised_with_next_to_no_slack_too(seed: int, eps: float) -> None:
    problem = tiny_problem(4, 3, seed=seed, seed_n=3)
    cost, rows, ratios = lp_rows(problem, eps, 1.2)  # a relaxation: its optimum breaks left-out rows
    p = solve_geo_lp(cost, rows, ratios, tol=1e-10).p
    dist = distances(problem)
    assert mdp_violation(p, dist, eps) > 1e-3
    versions = optimal._private_versions(p, dist, eps, lower_only=False)
    assert len(versions) == 1 + len(optimal._RAISE_SLACKS) and optimal._RAISE_SLACKS == (1e-6, 3e-7, 0.003)
    optimum = full_lp(problem, eps)
    for matrix, violation in versions[1:]:
        assert violation <= 1e-9 and violation == pytest.approx(mdp_violation(matrix, dist, eps), abs=1e-15)
        assert float(np.sum(cost * matrix)) >= optimum * (1 - 1e-9)  # private: never below the optimum
    # measured 0.03-0.14 % above the optimum against 0.05-0.18 % with 0.003 kept back
    tiny, tinier, loose = (float(np.sum(cost * matrix)) for matrix, _ in versions[1:])
    assert max(tiny, tinier) < loose


#: Maps and budgets on which a whole LP leaves rows of at most half of the outputs broken with the settings
#: below (searched over seeds 0-699 with neighbours 0 and 2; passes over more than half are whole LPs now).
#: Which ones do depends on the machine's float rounding and on how often the lowering repair alone makes
#: a solution private (more often since it keeps its best round), so the test asks for at least one pass
#: among them. (Without the 1e-6 raise a case that takes no pass may stop a little above the optimum: only
#: privacy and the bound's validity are asked of those.)
PASS_CASES = [(45, 3.0), (103, 3.0), (140, 1.0), (189, 3.0), (209, 3.0), (361, 1.0), (680, 2.0)]


@pytest.mark.parametrize("neighbours", [0, 2])
def test_re_solving_only_the_outputs_of_broken_rows_still_reaches_the_optimum(
    neighbours: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(optimal, "NEAR_MARGIN", 0.5)
    monkeypatch.setattr(ipm, "_WARM_MU", 1e-4)
    monkeypatch.setattr(optimal, "PASS_NEIGHBOURS", neighbours)
    monkeypatch.setattr(optimal, "_RAISE_SLACKS", (0.003,))  # with the 1e-6 raise round 2 closes: no pass
    monkeypatch.setattr(optimal, "_CERTIFY", None)  # stopped at the certificate, round 2 closes too
    monkeypatch.setattr(optimal, "LEAVE_OUT_BELOW", 0.0)  # every output in every whole LP
    passes = 0
    for seed, eps in PASS_CASES:
        problem = tiny_problem(4, 3, seed=seed, seed_n=3)
        m = problem.loss.shape[1]
        mech = optimal_geo_mechanism(problem, eps, dilation=1.5)
        solved = mech.info["outputs_solved"]
        assert solved[:2] == [m, m] and len(mech.info["iterations"]) == len(solved)
        optimum, bound = full_lp(problem, eps), mech.info["lower_bound"]
        assert bound.value <= optimum + 1e-12 <= mech.utility_km(problem) + 2e-12
        assert mdp_violation(mech.matrix, distances(problem), eps) <= 1e-9
        if 2 <= solved[-1] < m:  # the last LP held most outputs fixed, and still closed the bracket
            passes += 1
            assert bound.exact and mech.utility_km(problem) == pytest.approx(optimum, rel=1e-5)
    assert passes >= 1


def test_a_pass_takes_the_nearest_outputs_of_the_broken_ones_up_to_half_of_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outputs = np.array([[0, 0], [1, 0], [3, 0], [7, 0], [7.5, 0], [20, 0], [30, 0], [40, 0]], dtype=float)
    broken = np.array([[0, 1, 0], [2, 0, 0], [1, 3, 3]])  # rows (a, b, y) of outputs 0 and 3
    every = np.arange(8)
    monkeypatch.setattr(optimal, "PASS_NEIGHBOURS", 1)
    np.testing.assert_array_equal(optimal._pass_outputs(outputs, broken, every), [0, 1, 3, 4])
    np.testing.assert_array_equal(optimal._pass_outputs(outputs, broken, np.array([0, 3, 4, 6])), [0, 3, 4])
    monkeypatch.setattr(optimal, "PASS_NEIGHBOURS", 2)  # 0, 1, 2, 3, 4 are more than half of the 8
    np.testing.assert_array_equal(optimal._pass_outputs(outputs, broken, every), [0, 3])
    assert len(optimal._pass_outputs(outputs, None, every)) == 0
    # outputs 0 and 3 are more than half of the 3 in the LP: no pass (a whole LP instead)
    assert len(optimal._pass_outputs(outputs, broken, np.array([0, 3, 5]))) == 0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]), nx_=st.integers(3, 5))
def test_no_verified_mechanism_beats_the_optimum(seed: int, eps: float, nx_: int) -> None:
    problem = tiny_problem(nx_, 3, seed=seed, seed_n=3)
    mech = optimal_geo_mechanism(problem, eps)
    bound = mech.info["lower_bound"].value
    assert verify_geo(mech, exhaustive=True).holds
    best = mech.utility_km(problem)
    assert bound <= best
    em = exponential_geo(problem, eps)
    others = [
        tree_extension(problem, eps),
        em,
        em_remap_geo(problem, eps, em=em),
        spanner_mechanism(problem, eps),
    ]
    for other in others:
        assert verify_geo(other, exhaustive=True).holds
        assert bound <= other.utility_km(problem) + 1e-12
        assert best <= other.utility_km(problem) * (1 + 1e-5)


def test_one_target_is_sent_to_its_cheapest_output_exactly() -> None:
    """No pair to protect: every mechanism is eps-mDP, so the optimum reports the cheapest output always."""
    problem = tiny_problem(4, 3, seed=2, seed_n=3)
    for k in range(problem.grid.n_targets):
        one = problem.restricted(np.array([k]))
        mech = optimal_geo_mechanism(one, 1.0)
        cheapest = int(np.argmin(one.cost[0]))
        np.testing.assert_array_equal(mech.matrix, np.eye(one.cost.shape[1])[[cheapest]])
        bound = mech.info["lower_bound"]
        assert bound.exact and bound.value == mech.utility_km(one) == pytest.approx(one.cost.min(), abs=1e-12)


def test_out_of_time_still_returns_a_private_mechanism_and_a_bound() -> None:
    problem = tiny_problem(5, 4, seed=3, seed_n=3)
    mech = optimal_geo_mechanism(problem, 1.0, time_limit=1e-3)
    dist = distances(problem)
    assert mdp_violation(mech.matrix, dist, 1.0) <= 1e-9
    bound = mech.info["lower_bound"]
    assert bound.value <= full_lp(problem, 1.0) + 1e-12
    assert mech.info["rounds"] == 1
    assert not bound.exact and "exact" not in bound.method  # the page must not call it the optimum
    assert bound.value > 0.0 or "stopped before any certificate" in bound.method


def test_a_bound_short_of_the_optimum_says_how_wide_its_bracket_is() -> None:
    assert optimal._method_note(2, 1234, 1.0, 1.0, exact=True) == (
        "exact optimum by row generation (2 rounds, 1,234 rows)"
    )
    note = optimal._method_note(3, 5, 1.02, 1.0, exact=False)
    assert note.startswith("certificate of row generation (3 rounds, 5 rows")
    assert "the optimum is at most 2.00% below its mechanism" in note


def test_bad_inputs_are_refused_with_a_reason() -> None:
    problem = tiny_problem(4, 3, seed=1)
    with pytest.raises(DataError, match="at most 5 targets"):
        optimal_geo_mechanism(problem, 1.0, max_targets=5)
    with pytest.raises(DataError, match="max_rounds"):
        optimal_geo_mechanism(problem, 1.0, max_rounds=0)
    with pytest.raises(DataError, match="time_limit"):
        optimal_geo_mechanism(problem, 1.0, time_limit=0)
    cost, rows, ratios = lp_rows(problem, 1.0, 1.1)
    with pytest.raises(DataError, match="distinct targets"):
        solve_geo_lp(cost, np.array([[0, 0, 0]]), np.array([2.0]))
    with pytest.raises(DataError, match="one ratio per row"):
        solve_geo_lp(cost, rows, ratios[:-1])


def test_comparison_takes_the_exact_optimum_as_its_bound() -> None:
    problem = tiny_problem(4, 3, seed=5, seed_n=3)
    methods = ("tree", "tree_o", "em", "em_remap", "optimal")
    comp = compare_methods(problem, 1.0, methods=methods, bound=True)
    optimum = comp.mechanisms["optimal"]
    assert comp.bound is optimum.info["lower_bound"] and comp.bound.exact
    assert comp.timed_bound is None and "bound" not in comp.seconds  # nothing tighter to look for
    assert comp.bound.method.startswith("exact optimum")
    assert comp.violation_ratio["optimal"] == 0.0
    assert 0.0 <= comp.gap["optimal"] <= 1e-5
    assert all(comp.gap[k] >= comp.gap["optimal"] - 1e-9 for k in methods)
    assert comp.utility_km["optimal"] == pytest.approx(full_lp(problem, 1.0), rel=1e-5)


def test_a_prebuilt_optimum_is_scored_and_verified_not_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prebuilt`` (the optimum a bound ran): the comparison checks it like a built one and refuses a
    mechanism built for another problem or eps."""
    problem = tiny_problem(4, 3, seed=5, seed_n=3)
    optimum = optimal_geo_mechanism(problem, 1.0)

    def never(*args: object, **options: object) -> None:
        raise AssertionError("a prebuilt mechanism was built again")

    monkeypatch.setattr("mdp_core.geo.compare.optimal_geo_mechanism", never)
    comp = compare_methods(problem, 1.0, methods=("em", "optimal"), prebuilt={"optimal": optimum}, bound=True)
    assert comp.mechanisms["optimal"] is optimum and comp.violation_ratio["optimal"] == 0.0
    assert comp.utility_km["optimal"] == pytest.approx(full_lp(problem, 1.0), rel=1e-5)
    assert comp.bound is optimum.info["lower_bound"] and comp.bound.exact
    with pytest.raises(DataError, match="not built for this problem at eps 2"):
        compare_methods(problem, 2.0, methods=("optimal",), prebuilt={"optimal": optimum})
    other = tiny_problem(4, 3, seed=6, seed_n=2)
    moved = dataclasses.replace(optimum, outputs_km=optimum.outputs_km + 1.0)  # same targets, other outputs
    for problem_, mech in ((other, optimum), (problem, moved)):
        with pytest.raises(DataError, match="prebuilt 'optimal' mechanism was not built for this problem"):
            compare_methods(problem_, 1.0, methods=("optimal",), prebuilt={"optimal": mech})


def test_bench_record_carries_the_optimum_and_refuses_large_grids(monkeypatch: pytest.MonkeyPatch) -> None:
    net = grid_road_network(4, 3, spacing_km=0.3, rng=np.random.default_rng(1))
    record, comp = run_bench(net, depth=1, eps=1.0, seed_n=3, n_tasks=6, verify_samples=2_000, optimal=True)
    certificate = comp.mechanisms["optimal"].info["lower_bound"].value
    assert record["lower_bound"] == pytest.approx(certificate, abs=1e-6)
    assert record["bound_exact"] is True and record["best_private"] == "optimal"
    assert record["timed_lower_bound"] is None  # with the exact optimum no other bound is computed
    # docs audit: with --no-bound the optimum's own certificate was dropped (lower_bound null, gap {})
    unbounded, _ = run_bench(
        net, depth=1, eps=1.0, seed_n=3, n_tasks=6, verify_samples=2_000, optimal=True, bound=False
    )
    assert unbounded["lower_bound"] == pytest.approx(certificate, abs=1e-6) and unbounded["bound_exact"]
    assert unbounded["gap"]["optimal"] == pytest.approx(record["gap"]["optimal"], abs=1e-9)
    monkeypatch.setattr(compare, "OPTIMAL_MAX_TARGETS", 3)
    with pytest.raises(DataError, match="at most 3 targets"):
        run_bench(net, depth=1, eps=1.0, seed_n=3, n_tasks=6, optimal=True)


def test_bench_starts_a_finer_grids_optimum_from_the_coarser_one(monkeypatch: pytest.MonkeyPatch) -> None:
    net = grid_road_network(4, 3, spacing_km=0.3, rng=np.random.default_rng(1))
    monkeypatch.setattr(compare, "OPTIMAL_MAX_TARGETS", 30)  # depth 2 has 34 targets, depth 1 28
    calls: list[tuple[int, int]] = []

    def spy(coarse: GeoProblem, fine: GeoProblem, eps: float, **kw: float) -> np.ndarray:
        start = coarser_start(coarse, fine, eps, **kw)
        calls.append((coarse.grid.n_targets, len(start)))
        return start

    monkeypatch.setattr(compare, "coarser_start", spy)
    record, comp = run_bench(net, depth=2, eps=1.0, seed_n=3, n_tasks=6, verify_samples=2_000, optimal=True)
    assert calls and calls[0][0] == 28 and 1 <= calls[0][1] <= 16
    assert record["seconds"]["optimal_start"] > 0.0 and record["targets"] == 34
    assert record["bound_exact"] is True and comp.violation_ratio["optimal"] == 0.0
    assert comp.problem is not None
    assert comp.utility_km["optimal"] == pytest.approx(full_lp(comp.problem, 1.0), rel=1e-5)
    monkeypatch.setattr(compare, "OPTIMAL_FROM_COARSER_TARGETS", 33)
    with pytest.raises(DataError, match="at most 33 targets"):
        run_bench(net, depth=2, eps=1.0, seed_n=3, n_tasks=6, optimal=True)


def test_a_coarser_grid_with_other_outputs_cannot_start_the_optimum() -> None:
    fine = tiny_problem(4, 3, seed=5, seed_n=3)
    with pytest.raises(DataError, match="other outputs"):
        coarser_start(tiny_problem(4, 3, seed=5, seed_n=2), fine, 1.0)
