"""Seed LP as the LP-optimal mDP mechanism on the seed grid: same optimum as the original formulation.

The reference is an independent scipy ``linprog`` solve of the seed LP exactly as DESIGN.md states it
(variables z[s, y], one row z[s, y] - exp(eps_t h0) z[s', y] <= 0 per directed axis pair and output, row sums
1), built here from scratch (no helper of :mod:`mdp_core.geo.seed_lp`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.spatial import cKDTree

from mdp_core.errors import DataError
from mdp_core.geo import axis_budget, lp_coarse, seed_cost, solve_seed_lp, tree_extension, verify_geo
from mdp_core.geo.seed_lp import REPAIR_MARGIN, _axis_excess, grid_l1_distance
from mdp_core.mechanisms import mdp_violation


def linprog_seed_lp(cost: np.ndarray, shape: tuple[int, int], h0: float, step: float) -> float:
    """Optimum of the seed LP with axis ratio ``exp(step * h0)``, variables ordered s * m + y."""
    sx, sy = shape
    n_seeds, m = cost.shape
    rows = []
    for i in range(sx):
        for j in range(sy):
            for di, dj in ((1, 0), (0, 1)):
                if i + di < sx and j + dj < sy:
                    a, b = i * sy + j, (i + di) * sy + j + dj
                    rows += [(a, b), (b, a)]
    ratio = np.exp(step * h0)
    a_ub = np.zeros((len(rows) * m, n_seeds * m))
    for k, (a, b) in enumerate(rows):
        for y in range(m):
            a_ub[k * m + y, a * m + y] = 1.0
            a_ub[k * m + y, b * m + y] = -ratio
    a_eq = np.kron(np.eye(n_seeds), np.ones((1, m)))
    res = linprog(
        cost.ravel(), A_ub=a_ub, b_ub=np.zeros(len(a_ub)), A_eq=a_eq, b_eq=np.ones(n_seeds), method="highs"
    )
    assert res.status == 0, res.message
    return float(res.fun)


def axis_log_steps(z: np.ndarray, shape: tuple[int, int]) -> float:
    """Largest |ln z[s, y] - ln z[s', y]| over axis neighbours s, s' (unused outputs, all zero, skipped)."""
    used = z.max(axis=0) > 0
    assert np.all(z[:, used] > 0), "a used output column has a zero entry: unbounded ratio"
    logz = np.log(z[:, used]).reshape(shape[0], shape[1], -1)
    return float(max(np.abs(np.diff(logz, axis=a)).max(initial=0.0) for a in (0, 1)))


def random_cost(rng: np.random.Generator, shape: tuple[int, int], m: int, zero_rows: int) -> np.ndarray:
    """Non-negative seed costs that grow with the distance to each output seed (like a travel loss)."""
    n_seeds = shape[0] * shape[1]
    outputs = rng.choice(n_seeds, size=m, replace=False)
    d = grid_l1_distance(shape, 1.0)[:, outputs]
    cost = rng.uniform(0.1, 1.0, size=(n_seeds, 1)) * (d + rng.uniform(0.0, 0.5, size=d.shape))
    cost[rng.choice(n_seeds, size=zero_rows, replace=False)] = 0.0  # seeds without any target weight
    return cost


@pytest.mark.parametrize("shape", [(3, 4), (4, 4), (5, 3)])
@pytest.mark.parametrize("eps_t", [0.2, 0.8, 2.5])
def test_colgen_equals_linprog_of_the_original_formulation(shape: tuple[int, int], eps_t: float) -> None:
    rng = np.random.default_rng(hash((shape, eps_t)) % 2**32)
    h0 = 0.7
    cost = random_cost(rng, shape, m=6, zero_rows=2)
    res = solve_seed_lp(cost, shape, h0, eps_t, method="colgen")
    # the solvers run at the tightened budget (1 - REPAIR_MARGIN) eps_t: same optimum as linprog there
    tight = linprog_seed_lp(cost, shape, h0, (1.0 - REPAIR_MARGIN) * eps_t)
    loose = linprog_seed_lp(cost, shape, h0, eps_t)
    assert res.objective == pytest.approx(tight, rel=1e-7, abs=1e-10)
    assert loose <= res.objective + 1e-10  # a feasible point of the untightened LP
    assert res.objective == pytest.approx(loose, rel=1e-4)
    assert res.gap <= 1e-6
    np.testing.assert_allclose(res.z.sum(axis=1), 1.0, atol=1e-12)
    assert axis_log_steps(res.z, shape) <= eps_t * h0 * (1 + 1e-12)
    # the same optimum by the block interior point and by one full HiGHS IPM solve
    for method in ("ipm", "full"):
        other = solve_seed_lp(cost, shape, h0, eps_t, method=method)
        assert other.objective == pytest.approx(tight, rel=1e-5)
        assert axis_log_steps(other.z, shape) <= eps_t * h0 * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(
    sx=st.integers(2, 4),
    sy=st.integers(1, 4),
    m=st.integers(1, 5),
    eps_t=st.floats(0.05, 6.0),
    seed=st.integers(0, 10_000),
    method=st.sampled_from(["colgen", "ipm"]),
)
def test_seed_lp_equals_linprog_random(
    sx: int, sy: int, m: int, eps_t: float, seed: int, method: str
) -> None:
    shape = (sx, sy)
    m = min(m, sx * sy)
    rng = np.random.default_rng(seed)
    cost = random_cost(rng, shape, m=m, zero_rows=int(rng.integers(0, 2)))
    res = solve_seed_lp(cost, shape, 0.3, eps_t, method=method)
    tight = linprog_seed_lp(cost, shape, 0.3, (1.0 - REPAIR_MARGIN) * eps_t)
    # exact for the simplex-based column generation; the interior point stops at a 1e-7 gap
    assert res.objective == pytest.approx(tight, rel=1e-7 if method == "colgen" else 1e-5, abs=1e-10)
    assert axis_log_steps(res.z, shape) <= eps_t * 0.3 * (1 + 1e-12)
    # the certified gap is a true bound: objective * (1 - gap) is at most the optimum of the solved LP
    assert res.objective * (1.0 - res.gap) <= tight * (1 + 1e-9) + 1e-10


def test_mdp_on_the_grid_metric_is_the_axis_constraint_set() -> None:
    """The equivalence behind the solver: the result is eps_t-mDP for h0 * l1 on every seed pair."""
    shape, h0, eps_t = (4, 5), 0.5, 0.9
    cost = random_cost(np.random.default_rng(7), shape, m=7, zero_rows=3)
    res = solve_seed_lp(cost, shape, h0, eps_t)
    assert mdp_violation(res.z, grid_l1_distance(shape, h0), eps_t) <= 1e-12
    # l1 on the lattice is h0 * (|di| + |dj|), checked against coordinates
    ij = np.argwhere(np.ones(shape, dtype=bool))
    np.testing.assert_allclose(grid_l1_distance(shape, h0), h0 * np.abs(ij[:, None] - ij[None]).sum(axis=2))


@pytest.mark.parametrize("eps", [0.3, 1.39, 5.0])
def test_tree_extension_is_private_on_a_small_map(small_problem, eps: float) -> None:  # type: ignore[no-untyped-def]
    grid = small_problem.grid
    mech = tree_extension(small_problem, eps)
    targets = grid.targets_km
    d2 = np.linalg.norm(targets[:, None] - targets[None], axis=2)
    assert mdp_violation(mech.matrix, d2, eps) <= 1e-9
    assert verify_geo(mech, exhaustive=True).holds
    # the seed LP inside it reached the linprog optimum
    cost = seed_cost(grid, small_problem.prior, small_problem.loss)
    eps_t = axis_budget(eps)
    res = solve_seed_lp(cost, grid.seed_shape, grid.h0, eps_t)
    tight = linprog_seed_lp(cost, grid.seed_shape, grid.h0, (1.0 - REPAIR_MARGIN) * eps_t)
    assert res.objective == pytest.approx(tight, rel=1e-7)
    assert mech.info["gap"] <= 1e-6


def test_lp_coarse_reaches_the_linprog_optimum(small_problem) -> None:  # type: ignore[no-untyped-def]
    """LP-A goes through the same solver: its expected loss is the seed LP optimum of its own cost."""
    eps = 1.0
    grid = small_problem.grid
    mech = lp_coarse(small_problem, eps)
    seeds = grid.seeds_km
    nearest = cKDTree(seeds).query(small_problem.targets_km)[1]  # LP-A's tie-breaking on the lattice
    cost = np.zeros((len(seeds), small_problem.loss.shape[1]))
    np.add.at(cost, nearest, small_problem.prior[:, None] * small_problem.loss)
    eps_t = axis_budget(eps, 2.0, halve=False)
    tight = linprog_seed_lp(cost, grid.seed_shape, grid.h0, (1.0 - REPAIR_MARGIN) * eps_t)
    achieved = float(small_problem.prior @ np.einsum("xy,xy->x", mech.matrix, small_problem.loss))
    assert achieved == pytest.approx(tight, rel=1e-7)
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_seed_lp_matches_linprog_and_full_solve(small_problem, eps: float) -> None:  # type: ignore[no-untyped-def]
    grid = small_problem.grid
    cost = seed_cost(grid, small_problem.prior, small_problem.loss)
    eps_t = axis_budget(eps)
    colgen = solve_seed_lp(cost, grid.seed_shape, grid.h0, eps_t, method="colgen")
    full = solve_seed_lp(cost, grid.seed_shape, grid.h0, eps_t, method="full")
    reference = linprog_seed_lp(cost, grid.seed_shape, grid.h0, eps_t)
    assert colgen.success and full.success
    assert full.objective == pytest.approx(reference, rel=1e-4)
    assert colgen.objective == pytest.approx(reference, rel=1e-4)
    assert _axis_excess(colgen.z, grid.seed_shape, eps_t * grid.h0) <= 1e-12
    assert colgen.columns <= cost.shape[1]


@pytest.mark.parametrize("method", ["colgen", "ipm"])
def test_a_seed_grid_without_cost_reports_no_gap(method: str) -> None:
    res = solve_seed_lp(np.zeros((6, 3)), (2, 3), 1.0, 2.0, method=method)
    assert res.objective == 0.0 and res.gap == 0.0 and "certified gap 0.000%" in res.message
    np.testing.assert_allclose(res.z.sum(axis=1), 1.0, atol=1e-12)


def test_unknown_method_is_refused() -> None:
    with pytest.raises(DataError, match="method must be one of"):
        solve_seed_lp(np.ones((4, 2)), (2, 2), 1.0, 0.5, method="simplex")


def test_falls_back_to_the_interior_point_when_the_core_solver_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import mdp_core
    import mdp_core.geo.seed_lp as seed_lp_module

    shape, h0, eps_t = (3, 4), 0.7, 0.8
    cost = random_cost(np.random.default_rng(11), shape, m=5, zero_rows=1)
    calls = []

    def failing(*args: object, **kwargs: object) -> object:
        calls.append(args)
        nan = np.full(cost.shape, np.nan)
        return mdp_core.MechanismResult(nan, np.nan, False, "repair failed", "no", 0.0)

    monkeypatch.setattr(seed_lp_module, "optimal_mechanism", failing)
    messages: list[str] = []
    res = solve_seed_lp(cost, shape, h0, eps_t, method="colgen", progress=lambda f, m: messages.append(m))
    assert len(calls) == 1 and "seed LP: solving again by interior point" in messages
    assert "interior point" in res.message and "certified gap" in res.message and res.iterations >= 1
    tight = linprog_seed_lp(cost, shape, h0, (1.0 - REPAIR_MARGIN) * eps_t)
    assert res.objective == pytest.approx(tight, rel=1e-6)
    assert axis_log_steps(res.z, shape) <= eps_t * h0 * (1 + 1e-12)


@pytest.mark.parametrize(("eps_t", "expected"), [(0.25, "outputs, certified gap"), (0.35, "interior point")])
def test_auto_takes_the_interior_point_from_ipm_from(eps_t: float, expected: str) -> None:
    from mdp_core.geo.seed_lp import IPM_FROM

    shape, h0 = (4, 4), 0.7
    assert (eps_t * h0 >= IPM_FROM) == (expected == "interior point")
    cost = random_cost(np.random.default_rng(5), shape, m=6, zero_rows=1)
    res = solve_seed_lp(cost, shape, h0, eps_t)
    assert expected in res.message
    assert res.objective == pytest.approx(
        linprog_seed_lp(cost, shape, h0, (1.0 - REPAIR_MARGIN) * eps_t), rel=1e-5
    )


class _StopError(Exception):
    pass


def test_a_stop_raised_by_progress_ends_the_column_generation_at_its_first_master() -> None:
    """The page's stop reaches the seed LP: its column generation reports after every master solve."""
    shape, h0, eps_t = (6, 5), 0.5, 1.5
    cost = random_cost(np.random.default_rng(3), shape, m=12, zero_rows=2)
    seen: list[str] = []

    def progress(fraction: float, message: str) -> None:
        seen.append(message)
        assert 0.0 <= fraction <= 1.0
        if message.startswith("seed LP: round"):
            raise _StopError

    with pytest.raises(_StopError):
        solve_seed_lp(cost, shape, h0, eps_t, method="colgen", progress=progress)
    assert [m for m in seen if m.startswith("seed LP: round")] == [seen[-1]] and "round 1" in seen[-1]
    # without a stop: one report per master round, fractions rising, then the result counts the rounds
    fractions: list[tuple[float, str]] = []
    res = solve_seed_lp(
        cost, shape, h0, eps_t, method="colgen", progress=lambda f, m: fractions.append((f, m))
    )
    rounds = [f for f, m in fractions if m.startswith("seed LP: round")]
    assert len(rounds) == res.iterations >= 1 and rounds == sorted(rounds) and rounds[-1] < 0.9


def test_a_stop_raised_by_progress_ends_the_interior_point() -> None:
    shape, h0, eps_t = (6, 5), 0.5, 1.5
    cost = random_cost(np.random.default_rng(3), shape, m=12, zero_rows=2)
    seen: list[str] = []

    def progress(fraction: float, message: str) -> None:
        seen.append(message)
        if message.startswith("seed LP: interior point: gap"):
            raise _StopError

    with pytest.raises(_StopError):
        solve_seed_lp(cost, shape, h0, eps_t, method="ipm", progress=progress)
    assert seen[-1].startswith("seed LP: interior point: gap") and len([m for m in seen if "gap" in m]) == 1
    # without a stop: the interior point's reports within the seed LP's share of the bar
    fractions: list[float] = []
    solve_seed_lp(cost, shape, h0, eps_t, method="ipm", progress=lambda f, m: fractions.append(f))
    assert len(fractions) > 3 and min(fractions) >= 0.2 and max(fractions) == fractions[-1] == 0.9


@pytest.mark.parametrize("eps", [0.3, 1.2, 3.0])
def test_an_ipm_first_master_reaches_the_simplex_optimum(eps: float) -> None:
    """``first_solver="ipm"`` (the seed LP's) ends at the optimum and bound of a simplex start."""
    from mdp_core.mechanisms import chain_free_pairs
    from mdp_core.mechanisms._colgen import ColumnGeneration

    shape = (7, 6)
    d = grid_l1_distance(shape, 0.4)
    cost = random_cost(np.random.default_rng(5), shape, m=20, zero_rows=3)
    prior = np.full(d.shape[0], 1.0 / d.shape[0])
    start = np.arange(3)
    out = {}
    for solver in ("choose", "ipm"):
        model = ColumnGeneration(prior, cost, d, *chain_free_pairs(d), start, first_solver=solver)
        raw = model.solve(eps, time_limit=60.0, max_rounds=500)
        assert raw.ok and raw.Z is not None
        out[solver] = (raw.lp_objective, raw.lower_bound)
        assert raw.lower_bound <= raw.lp_objective + 1e-9
    assert out["ipm"][0] == pytest.approx(out["choose"][0], rel=1e-8)
    assert out["ipm"][1] == pytest.approx(out["choose"][1], rel=1e-6, abs=1e-9)
