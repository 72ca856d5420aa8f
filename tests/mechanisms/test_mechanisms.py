"""Tests for mdp_core.mechanisms: EM, Bayesian remapping, expected loss, sampling, the exact verifier."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import mdp_core as core


def line_metric(n: int) -> np.ndarray:
    x = np.arange(n, dtype=float)
    return np.abs(x[:, None] - x[None, :]) / max(n - 1, 1)


def random_metric(rng: np.random.Generator, n: int) -> np.ndarray:
    """Shortest-path metric of a random complete graph (always a metric)."""
    from scipy.sparse.csgraph import shortest_path

    w = rng.uniform(0.1, 1.0, (n, n))
    w = (w + w.T) / 2
    np.fill_diagonal(w, 0)
    return shortest_path(w)


def test_exponential_mechanism_matches_definition() -> None:
    d = line_metric(5)
    P = core.exponential_mechanism(d, 2.0)
    ref = np.exp(-d) / np.exp(-d).sum(axis=1, keepdims=True)  # exp(-eps d / 2), eps = 2
    np.testing.assert_allclose(P, ref, rtol=1e-14)
    # large eps * d must not underflow whole rows (the row minimum is subtracted first) ...
    d = 1000 * (1 - np.eye(3))
    P = core.exponential_mechanism(d, 1.0)
    np.testing.assert_allclose(P, np.eye(3), atol=1e-200)
    assert P.min() > 0 and core.mdp_violation(P, d, 1.0) <= 0.0
    # ... and one that rounds entries to 0 is refused (it was the identity: not private at all)
    with pytest.raises(core.DataError, match="round to 0"):
        core.exponential_mechanism(d, 50.0)


def test_mdp_violation_exact_values() -> None:
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    P = np.array([[0.75, 0.25], [0.25, 0.75]])
    assert core.mdp_violation(P, d, np.log(3)) == pytest.approx(0.0, abs=1e-15)
    assert core.mdp_violation(P, d, 1.0) == pytest.approx(np.log(3) - 1.0, abs=1e-15)
    # both-zero columns contribute 0, one zero gives +inf
    assert core.mdp_violation(np.array([[1.0, 0.0], [1.0, 0.0]]), d, 0.5) == pytest.approx(-0.5)
    assert core.mdp_violation(np.array([[1.0, 0.0], [0.5, 0.5]]), d, 5.0) == np.inf
    # rows 1 and 2 (distance 0.5) give the worst excess ln 5 - 0.5; rows 0 and 2 give ln 5 - 1
    d3 = line_metric(3)
    P3 = np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]])
    assert core.mdp_violation(P3, d3, 1.0) == pytest.approx(np.log(5) - 0.5, abs=1e-15)


def test_a_matrix_with_a_row_without_mass_is_never_verified() -> None:
    """Privacy audit (stop 62): an all-zero matrix (every pair "both zero") scored 0.0, "verified"; and the
    LP returned one as "Optimal" where eps * d underflows every probability."""
    nominal = core.nominal_distance(3)
    assert core.mdp_violation(np.zeros((3, 3)), nominal, 1.0) == np.inf
    half = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    assert core.mdp_violation(half, nominal, 1.0) == np.inf
    assert core.mdp_violation(np.full((3, 3), 1 / 3), nominal, 1.0) == 0.0 - 1.0  # uniform: slack eps * 1
    d = core.ordinal_distance(5)
    with np.errstate(over="ignore", invalid="ignore"):
        lost = core.optimal_mechanism(np.full(5, 0.2), d**2, d, 2000.0)
    assert not lost.success and lost.status == "no distribution"
    assert "lost its probability mass" in lost.message
    kept = core.optimal_mechanism(np.full(5, 0.2), d**2, d, 20.0)
    assert kept.success and np.allclose(kept.matrix.sum(axis=1), 1.0, atol=core.ROW_SUM_TOL)


def test_mdp_violation_chunks_match_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    d = random_metric(rng, 12)
    P = rng.dirichlet(np.ones(7), size=12)
    L = np.log(P)
    direct = max(np.max(np.abs(L[i] - L[j])) - 0.7 * d[i, j] for i in range(12) for j in range(12) if i != j)
    monkeypatch.setattr(core.mechanisms.verify, "_BLOCK", 7 * 12 * 5)  # force 5-row chunks
    assert core.mdp_violation(P, d, 0.7) == pytest.approx(direct, abs=1e-14)


@settings(max_examples=25, deadline=None)
@given(n=hst.integers(2, 12), eps=hst.floats(0.01, 30), seed=hst.integers(0, 2**31))
def test_em_is_private_and_stochastic(n: int, eps: float, seed: int) -> None:
    d = random_metric(np.random.default_rng(seed), n)
    P = core.exponential_mechanism(d, eps)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert core.mdp_violation(P, d, eps) <= 1e-9


def test_bayesian_remap_against_bruteforce() -> None:
    rng = np.random.default_rng(3)
    n = 6
    d = random_metric(rng, n)
    prior = rng.dirichlet(np.ones(n))
    loss = rng.uniform(0, 1, (n, n))
    P = core.exponential_mechanism(d, 1.5)
    R = core.bayesian_remap(P, prior, loss)
    ref = np.zeros_like(P)
    for y in range(n):
        post = prior * P[:, y]
        best = min(range(n), key=lambda yy: float(post @ loss[:, yy]))
        ref[:, best] += P[:, y]
    np.testing.assert_allclose(R, ref, atol=1e-15)
    assert core.expected_loss(R, prior, loss) <= core.expected_loss(P, prior, loss) + 1e-15
    assert core.mdp_violation(R, d, 1.5) <= 1e-9


def test_expected_loss_value() -> None:
    P = np.array([[0.5, 0.5], [0.0, 1.0]])
    loss = np.array([[0.0, 2.0], [3.0, 0.0]])
    assert core.expected_loss(P, [0.25, 0.75], loss) == pytest.approx(0.25 * 1.0)


def test_sample_frequencies_and_reproducibility() -> None:
    P = np.array([[0.2, 0.8, 0.0], [0.0, 0.0, 1.0]])
    codes = np.array([0] * 20000 + [1] * 100)
    out = core.sample(P, codes, np.random.default_rng(7))
    assert np.all(out[20000:] == 2)
    assert set(np.unique(out[:20000])) == {0, 1}
    assert np.mean(out[:20000] == 0) == pytest.approx(0.2, abs=0.01)
    np.testing.assert_array_equal(out, core.sample(P, codes, np.random.default_rng(7)))


def test_loss_budget_curves_ordering() -> None:
    d = line_metric(6)
    prior = np.full(6, 1 / 6)
    loss = (np.arange(6)[:, None] >= 3) != (np.arange(6)[None, :] >= 3)
    grid = [0.5, 1.0, 2.0, 4.0]
    curves = core.loss_budget_curves(prior, loss.astype(float), d, grid)
    assert list(curves) == ["EM", "EM+remap", "OPT"]
    assert np.all(curves["OPT"] <= curves["EM+remap"] + 1e-9)
    assert np.all(curves["EM+remap"] <= curves["EM"] + 1e-12)
    assert np.all(np.diff(curves["OPT"]) <= 1e-9)
    only = core.loss_budget_curves(prior, loss.astype(float), d, grid, methods=("EM",))
    np.testing.assert_allclose(only["EM"], curves["EM"])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: core.exponential_mechanism([[0, -1], [-1, 0]], 1.0), "dist must be non-negative"),
        (lambda: core.exponential_mechanism(line_metric(3), 0.0), "eps"),
        (lambda: core.exponential_mechanism([[0, np.nan], [1, 0]], 1.0), "dist contains NaN"),
        (lambda: core.mdp_violation(np.ones((3, 2)) / 2, line_metric(2), 1.0), "dist_in must be 3 x 3"),
        (lambda: core.mdp_violation(np.ones((2, 2)) / 2, [[0, 1], [2, 0]], 1.0), "dist_in must be symmetric"),
        (lambda: core.expected_loss(np.eye(2), [0.5, 0.5], np.ones((3, 2))), "loss must have 2 rows"),
        (lambda: core.expected_loss(np.eye(2), [-0.5, 1.5], np.ones((2, 2))), "prior must be non-negative"),
        (lambda: core.bayesian_remap([[0.5, 0.6], [0, 1]], [0.5, 0.5], np.ones((2, 2))), "P rows must sum"),
        (lambda: core.sample(np.eye(2), np.array([0, 2]), np.random.default_rng()), "codes must lie"),
        (lambda: core.loss_budget_curves([0.5, 0.5], np.ones((2, 2)), line_metric(2), [2, 1]), "eps_grid"),
        (
            lambda: core.loss_budget_curves([0.5, 0.5], np.ones((2, 2)), line_metric(2), [1], methods=["X"]),
            "methods",
        ),
    ],
)
def test_bad_input_names_the_argument(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(core.DataError, match=match):
        call()


def test_sample_requires_generator() -> None:
    with pytest.raises(TypeError, match="rng"):
        core.sample(np.eye(2), np.array([0, 1]), 3)  # type: ignore[arg-type]


def test_em_refuses_probabilities_float64_rounds_to_zero() -> None:
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    P = core.exponential_mechanism(d, 1400.0)  # e^-700: still a positive float
    assert P[0, 1] > 0 and core.mdp_violation(P, d, 1400.0) <= 0.0
    with pytest.raises(core.DataError, match="round to 0"):
        core.exponential_mechanism(d, 1600.0)  # was [[1, 0], [0, 1]]: violation inf


def test_sample_of_no_records_is_empty() -> None:
    P = core.exponential_mechanism([[0.0, 1.0], [1.0, 0.0]], 1.0)
    out = core.sample(P, np.array([], dtype=np.int64), np.random.default_rng(0))
    assert out.shape == (0,) and out.dtype == np.int64
