"""Seed LP, repair, tree extension (A1-A3, recursion == vectorised), baselines, verification, export."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdp_core.errors import DataError
from mdp_core.geo import (
    GeoMechanism,
    axis_budget,
    bilinear_weights,
    build_grid,
    em_remap_geo,
    expected_travel_error,
    exponential_geo,
    extend_log,
    extend_log_recursive,
    load_mechanism,
    lp_coarse,
    normalise_log,
    planar_laplace_utility,
    repair_seed,
    save_mechanism,
    solve_seed_lp,
    tree_extension,
    verify_geo,
)
from mdp_core.geo.seed_lp import _axis_excess
from mdp_core.mechanisms import mdp_violation


def euclid(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None] - points[None], axis=2)


def random_feasible_seed(
    shape: tuple[int, int], m: int, bound: float, rng: np.random.Generator
) -> np.ndarray:
    """Rows-normalised seed matrix whose log is a sum of random axis walks with steps in [-bound, bound]/2."""
    sx, sy = shape
    steps_x = rng.uniform(-bound / 2, bound / 2, size=(sx - 1, 1, m))
    steps_y = rng.uniform(-bound / 2, bound / 2, size=(1, sy - 1, m))
    logz = np.zeros((sx, sy, m))
    logz[1:] += np.cumsum(steps_x, axis=0)
    logz[:, 1:] += np.cumsum(steps_y, axis=1)
    z = np.exp(logz).reshape(sx * sy, m)
    return z / z.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- extension equals recursion


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_recursion_equals_vectorised_path(city, depth: int) -> None:  # type: ignore[no-untyped-def]
    grid = build_grid(city, seed_n=4, depth=depth)
    rng = np.random.default_rng(depth)
    log_seed = rng.normal(size=(grid.seed_shape[0] * grid.seed_shape[1], 7))
    fast = extend_log(log_seed, grid)
    slow = extend_log_recursive(log_seed, grid)
    assert fast.shape == (grid.n_targets, 7)
    assert np.allclose(fast, slow, rtol=0, atol=1e-12)


def test_extension_preserves_seeds_and_is_bilinear(city) -> None:  # type: ignore[no-untyped-def]
    grid = build_grid(city, seed_n=4, depth=2, keep_km=10.0)  # keep every fine vertex
    rng = np.random.default_rng(0)
    log_seed = rng.normal(size=(grid.seed_shape[0] * grid.seed_shape[1], 3))
    out = extend_log(log_seed, grid)
    on_seed = np.all(grid.fine_ij % grid.scale == 0, axis=1)
    s = (grid.fine_ij[on_seed] // grid.scale) @ np.array([grid.seed_shape[1], 1])
    assert np.array_equal(out[on_seed], log_seed[s])  # seed preservation (exact)
    weights = bilinear_weights(grid)  # independent route: sparse bilinear weights
    assert np.allclose(weights @ log_seed, out, atol=1e-12)
    assert np.allclose(weights.sum(axis=1), 1.0)


# --------------------------------------------------------------------------- repair and seed LP


@given(st.integers(0, 10_000), st.floats(0.05, 3.0))
def test_repair_makes_axis_constraints_exact(seed: int, bound: float) -> None:
    rng = np.random.default_rng(seed)
    shape = (4, 3)
    # a near-feasible LP-like output: feasible for a slightly smaller bound, plus tolerance-sized noise
    z = random_feasible_seed(shape, 5, bound * (1 - 1e-5), rng)
    z = np.maximum(z + rng.uniform(-1e-11, 1e-11, size=z.shape), 0)
    fixed = repair_seed(z, shape, 1.0, bound)
    assert _axis_excess(fixed, shape, bound) <= 1e-12
    assert np.allclose(fixed.sum(axis=1), 1.0, atol=1e-12, rtol=0)
    assert np.allclose(fixed, z, atol=1e-8)  # only tolerance-sized changes


def test_repair_refuses_a_grossly_infeasible_matrix() -> None:
    z = np.array([[1.0, 0.0], [0.0, 1.0]])  # adjacent seeds with disjoint supports: no repair possible
    with pytest.raises(DataError, match="all-zero row"):
        repair_seed(z, (2, 1), 1.0, 0.5)


def test_axis_budget_composition() -> None:
    assert axis_budget(1.0) == pytest.approx(0.5 / np.sqrt(2))
    assert axis_budget(1.0, 1.0) == pytest.approx(0.5)
    assert axis_budget(1.0, 2.0, halve=False) == pytest.approx(1 / np.sqrt(2))
    with pytest.raises(DataError, match="p must be"):
        axis_budget(1.0, 0.5)


# --------------------------------------------------------------------------- privacy (A1-A3)


@pytest.mark.parametrize("eps", [0.3, 2.0, 12.0])
def test_tree_extension_is_private_exhaustively(small_problem, eps: float) -> None:  # type: ignore[no-untyped-def]
    mech = tree_extension(small_problem, eps)
    assert mech.matrix.shape == (small_problem.grid.n_targets, len(small_problem.grid.outputs))
    assert np.allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12, rtol=0)
    check = verify_geo(mech, exhaustive=True)
    assert check.max_excess <= 1e-9 and check.violation_ratio == 0.0
    # independent check with the core's mdp_violation on the Euclidean distance matrix
    assert mdp_violation(mech.matrix, euclid(mech.targets_km), eps) <= 1e-9


@given(st.integers(0, 10_000), st.floats(0.2, 20.0))
def test_extension_of_any_feasible_seed_is_private(seed: int, eps: float) -> None:
    from mdp_core.geo import grid_road_network

    city = grid_road_network(4, 4, spacing_km=0.25, rng=np.random.default_rng(seed % 7))
    grid = build_grid(city, seed_n=3, depth=2, keep_km=10.0)
    rng = np.random.default_rng(seed)
    z = random_feasible_seed(grid.seed_shape, 4, 2 * axis_budget(eps) * grid.h0, rng)  # step <= eps_t h0
    mech = GeoMechanism(
        grid.targets_km, grid.outputs_km, normalise_log(extend_log(np.log(z), grid)), eps, 0.0
    )
    assert verify_geo(mech, exhaustive=True).max_excess <= 1e-9


def test_lp_coarse_violates_on_a_fine_grid(city) -> None:  # type: ignore[no-untyped-def]
    from mdp_core.geo import build_problem

    problem = build_problem(city, seed_n=5, depth=3, n_tasks=12, rng=np.random.default_rng(1))
    mech = lp_coarse(problem, 3.0)
    check = verify_geo(mech, samples=20_000)
    assert check.violation_ratio > 0 and check.max_excess > 1e-3
    assert np.allclose(mech.matrix.sum(axis=1), 1.0)


# --------------------------------------------------------------------------- baselines and utility


def test_exponential_mechanism_formula_and_privacy(small_problem) -> None:  # type: ignore[no-untyped-def]
    eps = 1.7
    mech = exponential_geo(small_problem, eps)
    d = np.linalg.norm(small_problem.targets_km[:, None] - small_problem.outputs_km[None], axis=2)
    ref = np.exp(-eps * d / 2)
    assert np.allclose(mech.matrix, ref / ref.sum(axis=1, keepdims=True), atol=1e-14)
    assert verify_geo(mech, exhaustive=True).max_excess <= 1e-9


def test_em_remap_is_private_and_not_worse(small_problem) -> None:  # type: ignore[no-untyped-def]
    em = exponential_geo(small_problem, 1.0)
    remapped = em_remap_geo(small_problem, 1.0, em=em)
    assert remapped.utility_km(small_problem) <= em.utility_km(small_problem) + 1e-12
    assert np.allclose(remapped.matrix.sum(axis=1), 1.0)
    assert verify_geo(remapped, exhaustive=True).max_excess <= 1e-9


def test_tree_beats_em_and_utility_is_the_definition(small_problem) -> None:  # type: ignore[no-untyped-def]
    tree = tree_extension(small_problem, 1.0)
    em = exponential_geo(small_problem, 1.0)
    assert tree.utility_km(small_problem) < em.utility_km(small_problem)
    # utility = sum_x pi(x) sum_y M(y|x) mean_q |d(x, q) - d(y, q)|, recomputed from travel distances
    net = small_problem.network
    dist = net.travel_km(small_problem.task_nodes)
    dx = dist[:, small_problem.target_nodes]
    dy = dist[:, small_problem.output_nodes]
    loss = np.abs(dx[:, :, None] - dy[:, None, :]).mean(axis=0)
    assert tree.utility_km(small_problem) == pytest.approx(
        float(np.sum(small_problem.prior[:, None] * tree.matrix * loss)), rel=1e-12
    )
    with pytest.raises(DataError, match="do not match"):
        expected_travel_error(tree.matrix[:, :2], small_problem.prior, small_problem.loss)


def test_planar_laplace_utility_tends_to_zero_error(small_problem) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    strong = planar_laplace_utility(small_problem, 200.0, rng, samples=4)
    weak = planar_laplace_utility(small_problem, 0.5, rng, samples=4)
    exact_nodes = small_problem.network.travel_km(small_problem.task_nodes)  # error 0 when y = x's node
    assert exact_nodes.shape[0] == len(small_problem.task_nodes)
    assert strong < 0.02 < weak


def test_bad_inputs(small_problem) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="eps"):
        tree_extension(small_problem, -1.0)
    with pytest.raises(DataError, match="p must be 1 or 2"):
        tree_extension(small_problem, 1.0, p=3)
    with pytest.raises(DataError, match="method"):
        solve_seed_lp(np.ones((4, 2)), (2, 2), 1.0, 0.5, method="magic")
    with pytest.raises(DataError, match="seed grid"):
        solve_seed_lp(np.ones((5, 2)), (2, 2), 1.0, 0.5)
    with pytest.raises(TypeError, match="mech"):
        verify_geo("not a mechanism")  # type: ignore[arg-type]


def test_save_and_load_mechanism(small_problem, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mech = tree_extension(small_problem, 1.0)
    path = save_mechanism(mech, tmp_path / "tree")
    assert path.name == "tree.npz"
    with np.load(path) as data:
        assert set(data.files) == {"targets_km", "outputs_km", "matrix", "eps"}
        assert np.array_equal(data["matrix"], mech.matrix) and float(data["eps"]) == 1.0
    back = load_mechanism(path)
    assert np.array_equal(back.targets_km, mech.targets_km)
    with pytest.raises(DataError, match="folder does not exist"):
        save_mechanism(mech, tmp_path / "nope" / "x.npz")


def test_error_by_target_is_each_users_expected_travel_error(small_problem) -> None:  # type: ignore[no-untyped-def]
    mech = tree_extension(small_problem, 1.0)
    per_target = mech.error_by_target_km(small_problem)
    rows = zip(mech.matrix.tolist(), small_problem.loss.tolist(), strict=True)
    loop = [sum(p * loss for p, loss in zip(row, lrow, strict=True)) for row, lrow in rows]
    np.testing.assert_allclose(per_target, loop, rtol=1e-12)
    assert float(small_problem.prior @ per_target) == pytest.approx(mech.utility_km(small_problem), rel=1e-12)
    with pytest.raises(DataError, match="do not match"):
        dataclasses.replace(mech, matrix=mech.matrix[:-1]).error_by_target_km(small_problem)
