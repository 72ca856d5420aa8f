"""geo_lower_bound: certified by weak duality, equal to an independent full LP, below every mechanism."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from mdp_core.errors import DataError
from mdp_core.geo import (
    build_problem,
    em_remap_geo,
    exponential_geo,
    geo_lower_bound,
    grid_road_network,
    tree_extension,
    verify_geo,
)
from mdp_core.geo.bounds import (
    _privacy_rows,
    aggregate_cost,
    certified_bound,
    knapsack_thresholds,
    relaxation_pairs,
    representatives,
)
from mdp_core.geo.utility import GeoProblem


def full_lp(problem: GeoProblem, eps: float, pairs: np.ndarray | None = None) -> float:
    """Independent reference: every ordered pair (or both directions of ``pairs`` only: a relaxation),
    every output, scipy's HiGHS; its optimum (km)."""
    cost = problem.prior[:, None] * problem.loss
    n, m = cost.shape
    pts = problem.targets_km
    a, b = np.nonzero(~np.eye(n, dtype=bool)) if pairs is None else np.concatenate([pairs, pairs[:, ::-1]]).T
    ratio = np.exp(eps * np.linalg.norm(pts[a] - pts[b], axis=1))
    k = len(a)
    rows = np.repeat(np.arange(k * m), 2)
    cols = np.column_stack([(a[:, None] * m + np.arange(m)).ravel(), (b[:, None] * m + np.arange(m)).ravel()])
    vals = np.column_stack([np.ones(k * m), -np.repeat(ratio, m)])
    a_ub = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(k * m, n * m))
    a_eq = sp.csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), np.arange(n * m))), shape=(n, n * m))
    res = linprog(cost.ravel(), A_ub=a_ub, b_ub=np.zeros(k * m), A_eq=a_eq, b_eq=np.ones(n), method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def tiny_problem(nx_: int, ny: int, seed: int, depth: int = 1, seed_n: int = 2) -> GeoProblem:
    net = grid_road_network(nx_, ny, spacing_km=0.3, rng=np.random.default_rng(seed))
    return build_problem(net, seed_n=seed_n, depth=depth, n_tasks=6, rng=np.random.default_rng(seed + 1))


@pytest.mark.parametrize(("eps", "seed_n"), [(0.5, 2), (2.0, 2), (1.0, 3)])
def test_bound_equals_full_lp_on_small_grids(eps: float, seed_n: int) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=seed_n)
    reference = full_lp(problem, eps)
    bound = geo_lower_bound(problem, eps, time_limit=60)
    assert bound.exact and "exact optimum" in bound.method
    assert bound.value <= reference + 1e-12  # certified: never above the true optimum
    assert bound.value == pytest.approx(reference, rel=1e-6)


def test_relaxation_without_row_generation_is_below_the_optimum() -> None:
    problem = tiny_problem(4, 3, seed=2, seed_n=3)
    reference = full_lp(problem, 1.0)
    relaxed = geo_lower_bound(problem, 1.0, neighbours=2, row_generation=False)
    assert not relaxed.exact
    assert relaxed.value <= reference + 1e-12
    assert relaxed.value > 0.5 * reference  # a useful bound, not a trivial 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scale=st.floats(0.0, 3.0), seed=st.integers(0, 10_000))
def test_any_nonnegative_multipliers_certify(scale: float, seed: int) -> None:
    """Weak duality: certified_bound(nu) <= OPT for ANY nu >= 0 (no solver involved)."""
    problem = tiny_problem(3, 3, seed=seed % 7)
    eps = 1.0
    cost = problem.prior[:, None] * problem.loss
    rows = _privacy_rows(relaxation_pairs(problem.targets_km, 4), cost.shape[1])
    pts = problem.targets_km
    ratios = np.exp(eps * np.linalg.norm(pts[rows[:, 0]] - pts[rows[:, 1]], axis=1))
    nu = np.random.default_rng(seed).exponential(scale * cost.mean() + 1e-300, size=len(rows))
    assert certified_bound(cost, rows, ratios, nu) <= full_lp(problem, eps) + 1e-12


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nx_=st.integers(3, 5),
    ny=st.integers(2, 4),
    seed=st.integers(0, 10_000),
    eps=st.sampled_from([0.3, 1.0, 3.0]),
    depth=st.integers(0, 1),
)
def test_bound_never_above_a_verified_mechanism(nx_: int, ny: int, seed: int, eps: float, depth: int) -> None:
    problem = tiny_problem(nx_, ny, seed=seed, depth=depth, seed_n=3)
    bound = geo_lower_bound(problem, eps, time_limit=30)
    em = exponential_geo(problem, eps)
    for mech in (tree_extension(problem, eps), em, em_remap_geo(problem, eps, em=em)):
        assert verify_geo(mech, exhaustive=True).holds
        assert bound.value <= mech.utility_km(problem) + 1e-12


def test_pairs_include_axis_neighbours_and_bad_arguments(small_problem: GeoProblem) -> None:
    grid = small_problem.grid
    pairs = {tuple(p) for p in relaxation_pairs(small_problem.targets_km, 0, grid.fine_ij).tolist()}
    key = {tuple(v): i for i, v in enumerate(grid.fine_ij.tolist())}
    expected = {
        tuple(sorted((i, key[(a + 1, b)])))
        for i, (a, b) in enumerate(grid.fine_ij.tolist())
        if (a + 1, b) in key
    }
    assert expected and expected <= pairs
    with pytest.raises(DataError, match="neighbours"):
        geo_lower_bound(small_problem, 1.0, neighbours=-1)
    with pytest.raises(DataError, match="time_limit"):
        geo_lower_bound(small_problem, 1.0, time_limit=0)
    with pytest.raises(TypeError, match="problem"):
        geo_lower_bound("x", 1.0)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="privacy rows"):
        geo_lower_bound(small_problem, 1.0, max_rows=10)


@pytest.mark.parametrize("thresholds", ["min", "random", "knapsack"])
def test_aggregate_cost_matches_a_direct_sum_and_bounds_a_mechanism(thresholds: str) -> None:
    """C, the constant and the key inequality c'P >= constant + C'P[reps] for any thresholds t_x
    (bounds.py "Aggregation"), computed here loop by loop from the formula."""
    problem = tiny_problem(4, 3, seed=5, seed_n=3)
    eps = 1.0
    cost = problem.prior[:, None] * problem.loss
    pts = problem.targets_km
    reps = representatives(pts, 5)
    rng = np.random.default_rng(1)
    t = {
        "min": cost.min(axis=1),
        "random": rng.uniform(cost.min(), cost.max(), len(pts)),
        "knapsack": knapsack_thresholds(
            pts, cost, reps, eps, rng.dirichlet(np.ones(cost.shape[1]), len(reps))
        ),
    }[thresholds]
    agg, constant, owner, magnitude = aggregate_cost(pts, cost, reps, eps, None if thresholds == "min" else t)
    expected, expected_constant = np.zeros_like(agg), 0.0
    for x in range(len(pts)):
        dist = np.linalg.norm(pts[reps] - pts[x], axis=1)
        r = int(np.argmin(dist))
        assert owner[x] == r
        w, k = np.exp(-eps * dist[r]), 1.0 + np.exp(eps * dist[r])
        expected[r] += w * cost[x] - (1 - w) * k * np.maximum(t[x] - cost[x], 0.0)
        expected_constant += (1 - w) * t[x]
    np.testing.assert_allclose(agg, expected, rtol=1e-12, atol=1e-15)
    assert constant == pytest.approx(expected_constant, rel=1e-12)
    assert magnitude >= np.abs(agg).sum() + abs(constant) - 1e-12
    for mech in (tree_extension(problem, eps), exponential_geo(problem, eps)):
        assert verify_geo(mech, exhaustive=True).holds
        p = mech.matrix
        assert mech.utility_km(problem) >= constant + float(np.sum(agg * p[reps])) - 1e-12


def test_knapsack_thresholds_fill_the_cheapest_outputs() -> None:
    """t_x is the cost at which x's cheapest outputs, each filled up to k_x p[r(x), y], reach mass 1."""
    pts = np.array([[0.0, 0.0], [0.5, 0.0]])
    cost = np.array([[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0]])
    p = np.array([[0.1, 0.2, 0.3, 0.4]])
    t = knapsack_thresholds(pts, cost, np.array([0]), 1.0, p)
    assert t[0] == 2.0  # k = 2 at the representative: 0.2 + 0.4 < 1 <= 0.2 + 0.4 + 0.6
    k = 1.0 + np.exp(0.5)  # target 1: cheapest outputs 3, 2, ... with mass k * 0.4 = 1.06 >= 1 at once
    assert k * 0.4 >= 1.0 and t[1] == 0.0


def test_representatives_spread_and_cover() -> None:
    pts = np.random.default_rng(0).uniform(0, 5, size=(300, 2))
    reps = representatives(pts, 20)
    assert len(np.unique(reps)) == 20 and np.all(np.diff(reps) > 0)
    radius = np.min(np.linalg.norm(pts[:, None] - pts[reps][None], axis=2), axis=1).max()
    # farthest-point sampling: the covering radius is at most the smallest distance between two picks
    gaps = np.linalg.norm(pts[reps][:, None] - pts[reps][None], axis=2)
    assert radius <= gaps[~np.eye(20, dtype=bool)].min() + 1e-12
    np.testing.assert_array_equal(representatives(pts[:7], 50), np.arange(7))


def test_aggregated_bound_is_below_the_optimum_and_useful() -> None:
    problem = tiny_problem(4, 3, seed=2, seed_n=3)
    n = problem.grid.n_targets
    reference = full_lp(problem, 0.5)
    agg = geo_lower_bound(problem, 0.5, aggregate_above=0, representatives_count=max(2, n // 2))
    assert not agg.exact and f"aggregated onto {max(2, n // 2)} of {n}" in agg.method
    assert agg.value <= reference + 1e-12
    assert agg.value > 0.7 * reference
    every = geo_lower_bound(problem, 0.5, aggregate_above=0, representatives_count=n)  # all targets
    assert every.value == pytest.approx(reference, rel=1e-5) and not every.exact
    with pytest.raises(DataError, match="representatives_count"):
        geo_lower_bound(problem, 0.5, representatives_count=1)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nx_=st.integers(3, 5),
    ny=st.integers(2, 4),
    seed=st.integers(0, 10_000),
    eps=st.sampled_from([0.3, 1.0, 3.0]),
    share=st.floats(0.1, 1.0),
)
def test_aggregated_bound_never_above_a_verified_mechanism(
    nx_: int, ny: int, seed: int, eps: float, share: float
) -> None:
    problem = tiny_problem(nx_, ny, seed=seed, depth=1, seed_n=3)
    count = max(2, int(share * problem.grid.n_targets))
    bound = geo_lower_bound(problem, eps, time_limit=30, aggregate_above=0, representatives_count=count)
    em = exponential_geo(problem, eps)
    for mech in (tree_extension(problem, eps), tree_extension(problem, eps, variant="O"), em):
        assert verify_geo(mech, exhaustive=True).holds
        assert bound.value <= mech.utility_km(problem) + 1e-12
    assert bound.value <= em_remap_geo(problem, eps, em=em).utility_km(problem) + 1e-12


def test_certified_bound_subtracts_its_rounding_margin() -> None:
    """(mutation audit, stop 67) adding the margin instead of subtracting it passed every test."""
    rows, none = np.empty((0, 3), dtype=np.int64), np.empty(0)
    # nu = 0, no rows: sum_x min_y c = 1, less 64 machine epsilons of (max |c| + |min|) = 3
    assert certified_bound(np.array([[1.0, 2.0]]), rows, none, none) == 1.0 - 192 * np.finfo(float).eps


def test_certified_bound_clips_negative_multipliers() -> None:
    """(mutation audit, stop 67) without the clip, nu = -0.5 "certified" 3.0, above the optimum 2 of the LP
    with that one row (target 0 reports output 1, target 1 output 0)."""
    cost, rows, ratios = np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([[0, 1, 0]]), np.array([2.0])
    rows_sum_to_one = {"A_eq": np.kron(np.eye(2), np.ones(2)), "b_eq": [1.0, 1.0]}
    reference = linprog(cost.ravel(), A_ub=[[1.0, 0.0, -2.0, 0.0]], b_ub=[0.0], **rows_sum_to_one).fun
    assert reference == pytest.approx(2.0)
    clipped = certified_bound(cost, rows, ratios, np.array([-0.5]))
    assert clipped <= reference and clipped == certified_bound(cost, rows, ratios, np.array([0.0]))
