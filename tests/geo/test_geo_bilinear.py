"""bilinear_mechanism: the corner test is the exact supremum of |grad ln K| (checked by dense sampling),
the mechanism is eps-mDP on all target pairs (exhaustive check), never below the certified bound or an
independent full LP, its cone program lies between two independent polygon LPs (scipy) that enclose the
cone, and the levels refine coarse to fine without ever getting worse."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)

import mdp_core.geo.bilinear as bilinear_module
from mdp_core.errors import DataError
from mdp_core.geo import bilinear_mechanism, geo_lower_bound, grid_road_network, run_bench, verify_geo
from mdp_core.geo.bilinear import _lattice, _repair, corner_excess
from mdp_core.geo.utility import GeoProblem
from mdp_core.mechanisms import mdp_violation


def target_distances(problem: GeoProblem) -> np.ndarray:
    pts = problem.targets_km
    return np.linalg.norm(pts[:, None] - pts[None], axis=2)


def sampled_log_gradient(values: np.ndarray, spacing: float, samples: int = 41) -> float:
    """Largest |grad ln K| of the bilinear interpolant of a (nx, ny) grid of values, on a dense sample."""
    s, t = np.meshgrid(np.linspace(0, 1, samples), np.linspace(0, 1, samples), indexing="ij")
    worst = 0.0
    for i in range(values.shape[0] - 1):
        for j in range(values.shape[1] - 1):
            k00, k10, k01, k11 = values[i, j], values[i + 1, j], values[i, j + 1], values[i + 1, j + 1]
            k = (1 - s) * (1 - t) * k00 + s * (1 - t) * k10 + (1 - s) * t * k01 + s * t * k11
            dx = ((1 - t) * (k10 - k00) + t * (k11 - k01)) / spacing
            dy = ((1 - s) * (k01 - k00) + s * (k11 - k10)) / spacing
            worst = max(worst, float((np.hypot(dx, dy) / k).max()))
    return worst


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), nx=st.integers(2, 5), ny=st.integers(2, 5), spread=st.floats(0.1, 3.0))
def test_corner_test_is_the_supremum_over_the_cells(seed: int, nx: int, ny: int, spread: float) -> None:
    values = np.exp(spread * np.random.default_rng(seed).standard_normal((nx, ny)))
    ii, jj = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    p00 = (ii * ny + jj).ravel()
    p10, p01, p11 = p00 + ny, p00 + 1, p00 + ny + 1
    corners = np.concatenate(
        [np.column_stack(c) for c in ((p00, p10, p01), (p10, p00, p11), (p01, p11, p00), (p11, p01, p10))]
    )
    spacing = 0.7
    flat = values.reshape(-1, 1)
    at_corners = float(((corner_excess(flat, corners, spacing, 0.0)) / flat[corners[:, 0]]).max())
    sampled = sampled_log_gradient(values, spacing)
    assert sampled <= at_corners * (1 + 1e-12)  # no interior point is steeper than the worst corner
    assert sampled == pytest.approx(at_corners, rel=1e-9)  # and the corners are sampled points


def test_lattice_weights_interpolate_the_targets_exactly() -> None:
    problem = tiny_problem(5, 4, seed=3, depth=2, seed_n=3)
    for level in (0, 1, 2):
        lattice = _lattice(problem, level)
        step = 2 ** (problem.grid.depth - level)
        np.testing.assert_allclose(lattice.weights.sum(axis=1), 1.0, atol=1e-12)
        # lattice point positions from the weights: every target is the weighted mean of its corners
        fine = problem.grid.fine_ij
        i0, j0 = fine[:, 0].min() // step, fine[:, 1].min() // step
        ny = int(np.ceil((fine[:, 1].max() - j0 * step) / step)) + 1
        ny = max(ny, 2)
        idx = np.arange(lattice.points)
        xy = np.column_stack([idx // ny + i0, idx % ny + j0]) * step
        np.testing.assert_allclose(lattice.weights @ xy, fine, atol=1e-9)
        assert lattice.spacing == pytest.approx(problem.grid.h0 / 2**level)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]), level=st.sampled_from([0, 1]))
def test_mechanism_is_private_on_all_pairs(seed: int, eps: float, level: int) -> None:
    problem = tiny_problem(3 + seed % 3, 3, seed=seed % 13, depth=1, seed_n=2 + seed % 2)
    mech = bilinear_mechanism(problem, eps, level=level, time_limit=5)
    assert mdp_violation(mech.matrix, target_distances(problem), eps) <= 1e-9
    assert verify_geo(mech, exhaustive=True).holds
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert mech.info["corner_excess"] <= 0.0 and mech.method == "bilinear"
    assert mech.utility_km(problem) >= full_lp(problem, eps) - 1e-9  # no private mechanism beats it


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_never_below_the_certified_bound(eps: float) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    mech = bilinear_mechanism(problem, eps, time_limit=5)
    bound = geo_lower_bound(problem, eps, time_limit=30)
    assert bound.value <= mech.utility_km(problem) + 1e-12


def scipy_lattice_lp(problem: GeoProblem, eps_lp: float, level: int) -> float:
    """Independent reference: the lattice LP written per (cell corner, direction) with the 16-gon on
    the corner gradient's absolute components, solved exactly by scipy's HiGHS; its optimum (km)."""
    lattice = _lattice(problem, level)
    cost = np.asarray(lattice.weights.T @ (problem.prior[:, None] * problem.loss))
    p, m = cost.shape
    d = lattice.spacing
    n_corner = len(lattice.corners)
    # variables: K (p, m), then ax (n_corner, m) and ay (n_corner, m) per corner (not shared per edge)
    kx = lambda v, y: v * m + y  # noqa: E731
    ax = lambda c, y: p * m + c * m + y  # noqa: E731
    ay = lambda c, y: p * m + n_corner * m + c * m + y  # noqa: E731
    rows, cols, vals, r = [], [], [], 0
    for ci, (c, xn, yn) in enumerate(lattice.corners.tolist()):
        for y in range(m):
            for nb, aux in ((xn, ax(ci, y)), (yn, ay(ci, y))):
                for sign in (1.0, -1.0):  # sign (K_nb - K_c) / d <= a
                    rows += [r, r, r]
                    cols += [kx(nb, y), kx(c, y), aux]
                    vals += [sign / d, -sign / d, -1.0]
                    r += 1
            for deg in (0.0, 22.5, 45.0, 67.5, 90.0):
                th = math.radians(deg)
                rows += [r, r, r]
                cols += [ax(ci, y), ay(ci, y), kx(c, y)]
                vals += [math.cos(th), math.sin(th), -eps_lp]
                r += 1
    n_var = p * m + 2 * n_corner * m
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(r, n_var))
    a_eq = sp.hstack([sp.kron(sp.identity(p), np.ones((1, m))), sp.csr_matrix((p, 2 * n_corner * m))])
    c_vec = np.concatenate([cost.ravel(), np.zeros(2 * n_corner * m)])
    res = linprog(c_vec, A_ub=a_ub, b_ub=np.zeros(r), A_eq=a_eq, b_eq=np.ones(p), method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_cone_program_lies_between_the_polygon_lps_around_it(eps: float) -> None:
    """``|g| <= e K`` implies the 16-gon rows at e and follows from them at e cos(pi / 16): so the cone
    program's optimum lies between the two polygon LPs, each solved independently by scipy."""
    problem = tiny_problem(4, 3, seed=5, depth=1, seed_n=3)
    mech = bilinear_mechanism(problem, eps, level=0, time_limit=20)
    e = mech.info["socp_eps"]
    assert e == pytest.approx((1 - 0.003) * eps) and mech.info["socp_status"] == "Solved"
    outer, inner = scipy_lattice_lp(problem, e, 0), scipy_lattice_lp(problem, e * math.cos(math.pi / 16), 0)
    assert outer - 1e-7 <= mech.info["socp_objective"] <= inner + 1e-7
    assert outer < inner  # the sandwich is not trivially one number
    # the solution meets its cones to solver accuracy, so the repair moves (almost) nothing
    assert mech.info["repair_rounds"] == 1 and mech.info["uniform_mix"] == 0.0
    assert mech.utility_km(problem) == pytest.approx(mech.info["socp_objective"], rel=1e-6)


def test_levels_refine_coarse_to_fine_and_never_get_worse(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(4, 3, seed=1, depth=2, seed_n=2)
    mech = bilinear_mechanism(problem, 1.5, time_limit=60)
    levels = mech.info["levels"]
    assert [r["level"] for r in levels] == [0, 1, 2] and mech.info["level"] == 2
    assert all(r["status"] == "Solved" for r in levels)
    assert levels[0]["outputs"] == len(problem.outputs_km)  # level 0 sees every output
    objectives = [r["objective"] for r in levels]
    # the coarser optimum is bilinear on the finer lattice too, and its outputs are all kept
    assert all(b <= a + 1e-7 for a, b in itertools.pairwise(objectives))
    assert mech.info["spacing_km"] == pytest.approx(problem.grid.h0 / 4)
    unused = np.flatnonzero(mech.matrix.max(axis=0) == 0.0)  # outputs left out are never reported
    assert len(unused) == len(problem.outputs_km) - levels[-1]["outputs"]
    assert mdp_violation(mech.matrix, target_distances(problem), 1.5) <= 1e-9
    # a finer level whose predicted time does not fit is not tried; level 0 always is
    monkeypatch.setattr("mdp_core.geo.bilinear._TIME_EXPONENT", 60.0)
    capped = bilinear_mechanism(problem, 1.5, time_limit=60)
    assert [r["level"] for r in capped.info["levels"]] == [0] and capped.info["level"] == 0
    assert capped.utility_km(problem) >= mech.utility_km(problem) - 1e-7


@pytest.mark.parametrize("finer_is_better", [True, False])
def test_a_finer_level_out_of_time_is_kept_only_when_better(
    monkeypatch: pytest.MonkeyPatch, finer_is_better: bool
) -> None:
    """Level 1 stops at the time limit: its last iterate (here the true optimum, or the uniform
    mechanism), repaired, is taken only when it beats level 0's optimum; either way it is private."""
    problem = tiny_problem(4, 3, seed=1, depth=1, seed_n=2)
    calls: list[int] = []

    def out_of_time(lattice: Any, cost: np.ndarray, eps_socp: float, seconds: float) -> Any:
        k, status, objective = real(lattice, cost, eps_socp, seconds)
        calls.append(lattice.points)
        if len(calls) == 1:
            return k, status, objective
        return (k if finer_is_better else np.full_like(k, 1.0 / k.shape[1])), "MaxTime", objective

    real = bilinear_module._socp
    level0 = bilinear_mechanism(problem, 1.5, level=0, time_limit=20)
    monkeypatch.setattr(bilinear_module, "_socp", out_of_time)
    mech = bilinear_mechanism(problem, 1.5, time_limit=20)
    assert [r["status"] for r in mech.info["levels"]] == ["Solved", "MaxTime"]
    assert mech.info["level"] == (1 if finer_is_better else 0)
    if finer_is_better:
        assert mech.utility_km(problem) < level0.utility_km(problem)
    else:
        assert mech.utility_km(problem) == pytest.approx(level0.utility_km(problem), rel=1e-12)
    assert mdp_violation(mech.matrix, target_distances(problem), 1.5) <= 1e-9


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.floats(0.0, 0.5), eps=st.sampled_from([0.5, 2.0]))
def test_repair_makes_any_lattice_matrix_private(seed: int, noise: float, eps: float) -> None:
    problem = tiny_problem(4, 4, seed=seed % 7, depth=1, seed_n=3)
    lattice = _lattice(problem, 1)
    rng = np.random.default_rng(seed)
    raw = rng.uniform(0, 1, (lattice.points, 5)) * (rng.uniform(size=(lattice.points, 5)) > noise)
    raw[rng.integers(lattice.points)] = 0.0  # an empty row too
    k, rounds, beta, excess = _repair(raw, lattice, eps, 0.003)
    assert excess <= 0.0 and 0.0 <= beta <= 1.0 and rounds >= 1
    assert corner_excess(k, lattice.corners, lattice.spacing, eps).max() <= 0.0
    np.testing.assert_allclose(k.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(k > 0)


def test_bad_input_is_refused_with_a_reason() -> None:
    problem = tiny_problem(3, 3, seed=0)
    with pytest.raises(DataError, match="level must be an integer from 0"):
        bilinear_mechanism(problem, 1.0, level=2)
    with pytest.raises(DataError, match="time_limit must be positive"):
        bilinear_mechanism(problem, 1.0, time_limit=0)
    with pytest.raises(DataError, match="margin must be in"):
        bilinear_mechanism(problem, 1.0, margin=0.7)
    with pytest.raises(DataError, match="eps"):
        bilinear_mechanism(problem, -1.0)
    with pytest.raises(TypeError, match="GeoProblem"):
        bilinear_mechanism("map", 1.0)  # type: ignore[arg-type]


def test_bench_reference_builds_the_bilinear_mechanism_at_any_size() -> None:
    net = grid_road_network(4, 3, spacing_km=0.3, rng=np.random.default_rng(0))
    record, comp = run_bench(net, depth=1, eps=1.0, seed_n=2, n_tasks=6, verify_samples=2_000, reference=True)
    assert {"bilinear", "spanner"} <= set(record["utility_km"])
    assert comp.violation_ratio["bilinear"] == 0.0
    assert record["best_private"] in {"bilinear", "spanner", "tree", "tree_m", "tree_o", "em", "em_remap"}
    assert record["gap"]["bilinear"] >= -1e-12
    # the bound found in the time limit is kept apart from the spanner LP's certificate; the tighter is used
    timed, certificate = record["timed_lower_bound"], record["spanner_lower_bound"]
    assert comp.timed_bound is not None and timed == round(comp.timed_bound.value, 6)
    assert record["lower_bound"] == max(timed, certificate)
    assert record["seconds"]["bound"] == round(comp.timed_bound.seconds, 4)
