"""Tests for mdp_core.lp: the exact LP-optimal mechanism, chain-free pairs, repair and the eps path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from scipy.optimize import linprog
from scipy.sparse import lil_matrix
from scipy.sparse.csgraph import shortest_path

import mdp_core as core


def random_metric(rng: np.random.Generator, n: int) -> np.ndarray:
    w = rng.uniform(0.1, 1.0, (n, n))
    w = (w + w.T) / 2
    np.fill_diagonal(w, 0)
    return shortest_path(w)


def grid_metric(k: int, p: float) -> np.ndarray:
    pts = np.array([(i, j) for i in range(k) for j in range(k)], dtype=float)
    diff = np.abs(pts[:, None, :] - pts[None, :, :])
    return (diff**p).sum(axis=2) ** (1 / p)


def loop_lp(prior: np.ndarray, loss: np.ndarray, d: np.ndarray, eps: float) -> float:
    """Independent reference: the full LP of 000 Eq. 3 built row by row in a loop, solved by linprog."""
    n, m = loss.shape
    A = lil_matrix((n * (n - 1) * m, n * m))
    r = 0
    for x in range(n):
        for x2 in range(n):
            if x != x2:
                for y in range(m):
                    A[r, x * m + y] = 1.0
                    A[r, x2 * m + y] = -np.exp(eps * d[x, x2])
                    r += 1
    A_eq = lil_matrix((n, n * m))
    for x in range(n):
        for y in range(m):
            A_eq[x, x * m + y] = 1.0
    cost = np.array([prior[x] * loss[x, y] for x in range(n) for y in range(m)])
    res = linprog(cost, A_ub=A.tocsr(), b_ub=np.zeros(r), A_eq=A_eq.tocsr(), b_eq=np.ones(n), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("seed", range(6))
def test_matches_independent_full_lp_on_random_metrics(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(3, 9)), int(rng.integers(2, 9))
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, m))
    eps = float(rng.uniform(0.2, 6))
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success, res.message
    assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
    assert res.matrix.shape == (n, m)
    np.testing.assert_allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert res.violation <= 1e-9
    assert core.mdp_violation(res.matrix, d, eps) == res.violation


@pytest.mark.parametrize(("k", "p", "eps"), [(3, 2.0, 1.0), (4, 2.0, 3.0), (4, 1.0, 2.0)])
def test_matches_independent_full_lp_on_grids(k: int, p: float, eps: float) -> None:
    d = grid_metric(k, p) / (k - 1)
    n = k * k
    prior = np.full(n, 1 / n)
    f = np.arange(n) % k + np.arange(n) // k
    loss = np.abs(f[:, None] - f[None, :]).astype(float)
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success
    assert res.objective == pytest.approx(loop_lp(prior, loss, d, eps), abs=1e-7)
    assert res.rows < res.full_rows


def test_matches_qif() -> None:
    qif = pytest.importorskip("qif")
    rng = np.random.default_rng(11)
    n = 8
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    eps = 1.3
    C = np.asarray(
        qif.mechanism.d_privacy.min_loss_given_d(
            prior, n, lambda a, b: eps * d[a, b], lambda a, b: loss[a, b]
        )
    )
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.objective == pytest.approx(float(prior @ (C * loss).sum(axis=1)), abs=1e-7)


def test_chain_free_pairs() -> None:
    # ordinal chain: only neighbours
    x = np.arange(6, dtype=float)
    a, b = core.chain_free_pairs(np.abs(x[:, None] - x[None, :]))
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(i, i + 1) for i in range(5)]
    # l1 grid: the 4-neighbours; l2 grid: primitive directions only (no (0, 2) step)
    a, b = core.chain_free_pairs(grid_metric(3, 1.0))
    assert a.size == 12
    a, b = core.chain_free_pairs(grid_metric(3, 2.0))
    steps = {
        (abs(int(j) // 3 - int(i) // 3), abs(int(j) % 3 - int(i) % 3)) for i, j in zip(a, b, strict=True)
    }
    assert steps == {(0, 1), (1, 0), (1, 1), (1, 2), (2, 1)}
    # nominal: every pair
    a, _ = core.chain_free_pairs(1 - np.eye(5))
    assert a.size == 10


def test_path_equals_cold_solves_and_is_monotone() -> None:
    d = grid_metric(4, 2.0) / 3
    n = 16
    rng = np.random.default_rng(5)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    grid = [0.3, 0.8, 1.5, 3.0, 6.0]
    ticks: list[float] = []
    path = core.optimal_mechanisms(prior, loss, d, grid, progress=lambda f, _m: ticks.append(f))
    assert ticks[-1] == 1.0
    for eps, res in zip(grid, path, strict=True):
        cold = core.optimal_mechanism(prior, loss, d, eps)
        assert res.success and res.eps == eps
        assert res.objective == pytest.approx(cold.objective, abs=1e-9)
        assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
    objs = [r.objective for r in path]
    assert np.all(np.diff(objs) <= 1e-9)


@settings(max_examples=15, deadline=None)
@given(n=hst.integers(2, 7), eps=hst.floats(0.05, 10), seed=hst.integers(0, 2**31))
def test_properties(n: int, eps: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    res = core.optimal_mechanism(prior, loss, d, eps)
    assert res.success
    assert np.all(res.matrix >= 0)
    np.testing.assert_allclose(res.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert core.mdp_violation(res.matrix, d, eps) <= 1e-9
    em = core.exponential_mechanism(d, eps)
    remap = core.bayesian_remap(em, prior, loss)
    assert res.objective <= core.expected_loss(remap, prior, loss) + 1e-9
    assert core.expected_loss(remap, prior, loss) <= core.expected_loss(em, prior, loss) + 1e-12
    assert core.optimal_mechanism(prior, loss, d, 1.5 * eps).objective <= res.objective + 1e-9


def test_repair_makes_a_perturbed_solution_private() -> None:
    d = grid_metric(3, 2.0) / 2
    n = 9
    prior = np.full(n, 1 / n)
    loss = 1 - np.eye(n)
    res = core.optimal_mechanism(prior, loss, d, 2.0)
    noisy = res.matrix + np.random.default_rng(0).uniform(0, 1e-8, res.matrix.shape)
    noisy[0, np.argmax(res.matrix[0])] += 1e-4  # a clear violation
    assert core.mdp_violation(noisy, d, 2.0) > 1e-9
    P, viol, rounds = core.repair_mechanism(noisy, d, 2.0)
    assert viol <= 1e-9 and rounds >= 1
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert core.expected_loss(P, prior, loss) == pytest.approx(res.objective, abs=1e-4)


def test_limits_fail_softly() -> None:
    d = 1 - np.eye(4)
    res = core.optimal_mechanism(np.full(4, 0.25), np.ones((4, 4)), d, 1.0, max_inputs=3)
    assert not res.success and res.status == "size limit"
    assert "limited to 3" in res.message and np.isnan(res.objective)
    path = core.optimal_mechanisms(np.full(4, 0.25), np.ones((4, 4)), d, [1, 2], max_variables=8)
    assert [r.success for r in path] == [False, False] and "variables" in path[0].message


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.5, 0.5], np.ones((2, 2)), np.ones((2, 3)), 1.0), "dist_in must be square"),
        (([0.5, 0.5], np.ones((2, 2)), [[0, 1], [0.5, 0]], 1.0), "dist_in must be symmetric"),
        (([1 / 3] * 3, np.ones((3, 3)), [[0, 1, 5], [1, 0, 1], [5, 1, 0]], 1.0), "triangle inequality"),
        (([1.5, -0.5], np.ones((2, 2)), 1 - np.eye(2), 1.0), "prior must be non-negative"),
        (([0.5, 0.5], [[0, np.nan], [1, 0]], 1 - np.eye(2), 1.0), "loss contains NaN"),
        (([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), 0.0), "eps must be a positive"),
        (([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), -1.0), "eps must be a positive"),
        (([0.5, 0.5], np.ones((3, 2)), 1 - np.eye(2), 1.0), "dist_in must be 3 x 3"),
    ],
)
def test_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(core.DataError, match=match):
        core.optimal_mechanism(*args)


def test_bad_grid() -> None:
    with pytest.raises(core.DataError, match="eps_grid"):
        core.optimal_mechanisms([0.5, 0.5], np.ones((2, 2)), 1 - np.eye(2), [1.0, 1.0])
