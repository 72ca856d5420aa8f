"""The cell relaxation: its cost and ratios against independent computations, its bound below every
eps-mDP mechanism and below the exact optimum."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)

from mdp_core.errors import DataError
from mdp_core.geo import auto_lower_bound, bounds, em_remap_geo, exponential_geo, tree_extension
from mdp_core.geo import cells as cells_module
from mdp_core.geo import cosets as cosets_module
from mdp_core.geo.cells import (
    average_ratios,
    cell_lower_bound,
    cell_parts,
    cell_plan,
    cell_relaxation,
    tilted_loss,
)
from mdp_core.geo.cosets import DILATION
from mdp_core.geo.pairs import spanner_pairs


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan as on a quiet machine, whatever else the test run does beside it."""
    monkeypatch.setattr(cells_module, "machine_slowdown", lambda: 1.0)
    monkeypatch.setattr(cosets_module, "machine_slowdown", lambda: 1.0)


def _tilted_lp(loss: np.ndarray, weights: np.ndarray, ratio: float) -> float:
    """Independent reference: min sum w L K subject to sum w K = 1, K_x <= ratio K_y for all x, y (HiGHS)."""
    s = len(loss)
    a, b = np.nonzero(~np.eye(s, dtype=bool))
    a_ub = np.zeros((len(a), s))
    a_ub[np.arange(len(a)), a] = 1.0
    a_ub[np.arange(len(a)), b] = -ratio
    res = linprog(weights * loss, A_ub=a_ub, b_ub=np.zeros(len(a)), A_eq=weights[None], b_eq=[1.0])
    assert res.status == 0, res.message
    return float(res.fun)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(1, 9),
    ratio=st.floats(1.0, 20.0),
    ties=st.booleans(),
)
def test_tilted_loss_is_the_least_mean_loss_of_a_column_within_the_ratio(
    seed: int, size: int, ratio: float, ties: bool
) -> None:
    rng = np.random.default_rng(seed)
    loss = rng.integers(0, 3, size).astype(float) if ties else rng.uniform(0.0, 5.0, size)
    weights = rng.dirichlet(np.ones(size))
    weights[rng.random(size) < 0.2] = 0.0  # targets without prior mass in the cell
    if weights.sum() == 0.0:
        weights[0] = 1.0
    weights /= weights.sum()
    got = tilted_loss(loss[None, :, None], weights[None], np.array([ratio]))[0, 0]
    support = weights > 0  # the LP on the targets with mass (the others weigh nothing in either sum)
    assert got == pytest.approx(_tilted_lp(loss[support], weights[support], ratio), rel=1e-9, abs=1e-12)
    assert (weights @ loss) >= got - 1e-12  # never above the plain mean (ratio 1 is a column too)


def test_cell_cost_is_each_cells_least_tilted_loss_over_its_own_targets() -> None:
    problem = tiny_problem(5, 4, seed=4, depth=3, seed_n=2)
    eps, size = 2.0, 3
    cells = cell_relaxation(problem, eps, size)
    fine = problem.grid.fine_ij
    assert len(cells.mass) == len(np.unique(fine // size, axis=0))  # every cell has mass here
    partial = 0
    for k, ij in enumerate(cells.ij):
        inside = np.flatnonzero(np.all(fine // size == ij, axis=1))
        partial += len(inside) < size * size
        pts = problem.targets_km[inside]
        ratio = np.exp(eps * np.max(np.linalg.norm(pts[:, None] - pts[None], axis=2)))
        w = problem.prior[inside] / problem.prior[inside].sum()
        assert cells.mass[k] == pytest.approx(problem.prior[inside].sum(), rel=1e-12)
        for y in (0, problem.cost.shape[1] // 2, problem.cost.shape[1] - 1):
            least = (
                _tilted_lp(problem.loss[inside, y], w, ratio)
                if len(inside) > 1
                else problem.loss[inside[0], y]
            )
            assert cells.cost[k, y] == pytest.approx(cells.mass[k] * least, rel=1e-8)
    assert partial > 0  # cells at the edge of the network, some without their first place


def _private_columns(points: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """eps-mDP columns (log eps-Lipschitz in the Euclidean metric): peaks, ramps and their mixtures."""
    cols = []
    for _ in range(40):
        peak = rng.uniform(points.min(0) - 1.0, points.max(0) + 1.0)
        col = np.exp(-eps * np.linalg.norm(points - peak, axis=1))
        direction = rng.normal(size=2)
        ramp = np.exp(eps * points @ (direction / np.linalg.norm(direction)))
        cols += [col, ramp / ramp.max(), 0.5 * col + 0.5 * ramp / ramp.max()]
    return np.column_stack(cols)


@pytest.mark.parametrize(("size", "eps"), [(2, 1.0), (3, 3.0), (4, 0.4)])
def test_average_ratios_hold_for_private_columns_and_are_the_metric_between_translates(
    size: int, eps: float
) -> None:
    problem = tiny_problem(5, 4, seed=3, depth=3, seed_n=2)
    n = len(problem.prior)
    problem = replace(problem, prior=np.random.default_rng(0).choice([1.0, 1.0, 2.0, 0.0], n) / n)
    cells = cell_relaxation(problem, eps, size)
    k = len(cells.mass)
    pairs = np.array([(a, b) for a in range(k) for b in range(k) if a != b])
    lam = average_ratios(cells, problem.targets_km, eps, pairs)
    cols = _private_columns(problem.targets_km, eps, np.random.default_rng(size))
    padded = np.vstack([cols, np.zeros(cols.shape[1])])  # index -1: the cells' empty places
    averages = np.einsum("ks,ksc->kc", cells.weights, padded[cells.members])
    a, b = pairs.T
    assert np.all(averages[a] <= lam[:, None] * averages[b] * (1 + 1e-12))
    # cells with the same weights at the same places match place by place: e^(eps |t|) between their centres
    both = np.all(cells.weights[a] == cells.weights[b], axis=1)
    assert 0 < both.sum() < len(pairs)
    shift = np.linalg.norm(cells.centres_km[b] - cells.centres_km[a], axis=1)
    np.testing.assert_allclose(lam[both], np.exp(eps * shift[both]), rtol=1e-12)
    assert np.all(lam > 1.0)


def test_one_target_a_cell_is_the_spanner_relaxation_of_the_whole_problem() -> None:
    problem = tiny_problem(4, 4, seed=2, depth=2, seed_n=2)
    cells = cell_relaxation(problem, 1.0, 1)
    np.testing.assert_allclose(cells.cost, problem.cost, rtol=1e-12)  # no tilt within a point
    bound = cell_lower_bound(problem, 1.0, size=1, parts=1, time_limit=30)
    reference = full_lp(problem, 1.0, spanner_pairs(problem.targets_km, DILATION)[0])
    assert bound.value <= reference + 1e-12
    assert bound.value == pytest.approx(reference, rel=1e-4)
    assert "cell relaxation" in bound.method and not bound.exact


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_small_cells_in_one_lp_are_close_to_the_exact_optimum(seed: int) -> None:
    """Measured 0.992-0.9995 of the optimum on these grids: the cells keep every target's cost."""
    problem = tiny_problem(3 + seed, 3, seed=seed, depth=2, seed_n=2)
    exact = full_lp(problem, 1.0)
    assert 0.98 * exact <= cell_lower_bound(problem, 1.0, size=2, parts=1, time_limit=20).value <= exact


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    eps=st.sampled_from([0.3, 1.0, 3.0]),
    size=st.sampled_from([2, 3]),
    parts=st.sampled_from([1, 2, 4]),
)
def test_never_above_a_verified_mechanism_or_the_exact_optimum(
    seed: int, eps: float, size: int, parts: int
) -> None:
    problem = tiny_problem(3 + seed % 3, 3, seed=seed % 11, depth=2, seed_n=2)
    bound = cell_lower_bound(problem, eps, size=size, parts=parts, time_limit=20)
    assert 0.0 < bound.value <= full_lp(problem, eps) + 1e-9
    for mech in (tree_extension(problem, eps), exponential_geo(problem, eps), em_remap_geo(problem, eps)):
        assert bound.value <= mech.utility_km(problem) + 1e-12


def test_parts_split_the_cells_like_a_checkerboard_or_two_by_two() -> None:
    cells = cell_relaxation(tiny_problem(5, 5, seed=1, depth=3, seed_n=2), 1.0, 2)
    for parts in (1, 2, 4):
        groups = cell_parts(cells, parts)
        assert len(groups) == parts
        assert np.array_equal(np.sort(np.concatenate(groups)), np.arange(len(cells.mass)))
        for group in groups:  # no two cells of a part side by side (beyond one part)
            gap = np.abs(cells.ij[group][:, None] - cells.ij[group][None]).sum(axis=2)
            assert parts == 1 or np.all(gap[~np.eye(len(group), dtype=bool)] >= 2)


def test_more_time_plans_finer_cells() -> None:
    problem = tiny_problem(5, 5, seed=1, depth=3, seed_n=2)
    plans = [cell_plan(problem, seconds) for seconds in (1e-4, 0.05, 1.0, 600.0)]
    assert plans[0] is None  # nothing converges in no time
    sizes = [plan[0] for plan in plans[1:] if plan is not None]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 2
    assert plans[-1] == (2, 1)  # all the time in the world: the finest cells in one LP


def test_auto_bound_at_city_scale_takes_the_planned_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    monkeypatch.setattr(
        bounds, "AGGREGATE_ABOVE", problem.grid.n_targets - 1
    )  # this grid counts as city scale
    plan = cell_plan(problem, 60.0)
    assert plan is not None
    expected = cell_lower_bound(problem, 1.0, size=plan[0], parts=plan[1], time_limit=60)
    chosen = auto_lower_bound(problem, 1.0, time_limit=60)
    assert chosen.method == expected.method and f"of {plan[0]} x {plan[0]} targets" in chosen.method
    assert chosen.value == pytest.approx(expected.value, rel=1e-9)
    monkeypatch.setattr(cosets_module, "machine_slowdown", lambda: 3.0)  # a busy machine is named
    busy = auto_lower_bound(problem, 1.0, time_limit=60)
    assert busy.method.startswith("cell relaxation") and "sized for a machine 3.0x slower" in busy.method


def test_bad_cells_are_refused() -> None:
    problem = tiny_problem(3, 3, seed=0)
    with pytest.raises(DataError, match="cell size must be a positive integer"):
        cell_lower_bound(problem, 1.0, size=0)
    with pytest.raises(DataError, match="parts must be 1, 2 or 4"):
        cell_lower_bound(problem, 1.0, size=2, parts=3)
    with pytest.raises(DataError, match="eps"):
        cell_lower_bound(problem, -1.0, size=2)
