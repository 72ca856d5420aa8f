"""raise_repair: any positive matrix becomes exactly eps-mDP and row-stochastic; a matrix the LP already made
private at the reduced budget is returned as it is; the uniform mix it falls back on is the least one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdp_core.errors import DataError
from mdp_core.mechanisms import VIOLATION_TOL, mdp_violation, raise_repair
from mdp_core.mechanisms.verify import _breaks_after_raise, _least_uniform_mix, _upper_extension


def points_and_matrix(seed: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    points = rng.uniform(0, 3, size=(n, 2))
    dist = np.linalg.norm(points[:, None] - points[None], axis=2)
    return dist, rng.lognormal(0.0, 2.0, size=(n, m))  # ratios far beyond any eps below


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 25),
    m=st.integers(1, 8),
    eps=st.floats(0.2, 4.0),
    rounds=st.sampled_from([1, 2, 40]),
)
def test_any_positive_matrix_becomes_private_and_stochastic(
    seed: int, n: int, m: int, eps: float, rounds: int
) -> None:
    dist, z = points_and_matrix(seed, n, m)
    P, violation, used = raise_repair(z, dist, eps, max_rounds=rounds)
    assert violation <= VIOLATION_TOL
    assert violation == mdp_violation(P, dist, eps)  # the reported value is the exact check
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert used >= 1


def test_a_matrix_private_at_the_reduced_budget_is_kept() -> None:
    dist, _ = points_and_matrix(3, 12, 2)
    eps, slack = 1.0, 0.01
    # v = e^{-eps' d(x, c)} / 2 and 1 - v are both eps'-log-Lipschitz (1 - v >= 1/2 moves at most 2|dv|)
    v = 0.5 * np.exp(-(1 - slack) * eps * dist[0])
    z = np.column_stack([v, 1 - v])
    assert mdp_violation(z, dist, (1 - slack) * eps) <= 1e-12
    P, violation, used = raise_repair(z, dist, eps, slack=slack)
    assert used == 1 and violation <= 1e-12
    np.testing.assert_allclose(P, z, rtol=1e-12)


def test_the_uniform_mix_is_the_least_that_is_private() -> None:
    dist, z = points_and_matrix(5, 10, 3)
    eps = 1.5
    P = z / z.sum(axis=1, keepdims=True)
    beta = _least_uniform_mix(P, dist, eps)
    assert 0 < beta < 1
    mix = lambda b: (1 - b) * P + b / P.shape[1]  # noqa: E731
    assert mdp_violation(mix(beta * (1 + 1e-9)), dist, eps) <= 1e-12
    assert mdp_violation(mix(beta * (1 - 1e-3)), dist, eps) > 0  # any less is not private
    private = P.copy()
    private[:] = 1.0 / 3
    assert _least_uniform_mix(private, dist, eps) == 0.0


def test_the_uniform_mix_makes_private_what_the_other_repairs_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    import mdp_core.mechanisms.verify as verify

    dist, z = points_and_matrix(9, 15, 4)
    failing = lambda P, d, eps: (P, 1.0, 3)  # noqa: E731  (the lowering repair gives up)
    monkeypatch.setattr(verify, "repair_mechanism", failing)
    P, violation, used = raise_repair(z, dist, 1.0, max_rounds=1)
    assert violation <= VIOLATION_TOL and used == 1 + 3 + 1
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert P.min() > 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"slack": 0.0}, "slack must be in"),
        ({"slack": 0.5}, "slack must be in"),
        ({"max_rounds": 0}, "max_rounds must be a positive integer"),
    ],
)
def test_bad_input_raises(kwargs: dict[str, float], match: str) -> None:
    dist, z = points_and_matrix(1, 4, 2)
    with pytest.raises(DataError, match=match):
        raise_repair(z, dist, 1.0, **kwargs)


def test_bad_shapes_and_empty_rows_raise() -> None:
    dist, z = points_and_matrix(1, 4, 2)
    with pytest.raises(DataError, match="dist_in must be 4 x 4"):
        raise_repair(z, dist[:3, :3], 1.0)
    z[2] = 0.0
    with pytest.raises(DataError, match="positive mass"):
        raise_repair(z, dist, 1.0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 30),
    m=st.integers(1, 6),
    eps=st.floats(0.2, 4.0),
    slack=st.sampled_from([1e-6, 0.003, 0.02, 0.3]),
    spread=st.sampled_from([0.0, 1e-4, 0.5]),
)
def test_the_normaliser_screen_decides_as_the_exact_check(
    seed: int, n: int, m: int, eps: float, slack: float, spread: float
) -> None:
    # after a raise only pairs whose row normalisers differ enough can break a ratio: the screen that
    # looks at those alone must say "breaks" exactly when the full check finds an excess above 1e-12
    dist, z = points_and_matrix(seed, n, m)
    raised = (1.0 - slack) * eps
    L = _upper_extension(np.log(z), dist, raised)
    norm = np.log(np.exp(L).sum(axis=1)) + np.random.default_rng(seed).uniform(0, spread, n)
    L -= norm[:, None]
    assert _breaks_after_raise(L, norm, dist, eps, raised) == (mdp_violation(np.exp(L), dist, eps) > 1e-12)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), m=st.integers(1, 6), part=st.integers(1, 30))
def test_the_loops_over_parts_of_the_rows_give_the_bits_of_one_pass(
    seed: int, n: int, m: int, part: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mdp_core.mechanisms.verify as verify

    dist, P = points_and_matrix(seed, n, m)
    skewed = dist.copy()
    skewed[0, -1] += 0.01  # the extension reads d(x, x') as given, even where it is not symmetric
    L = np.log(P)
    # independent: every pair (x, x') of an (n, n, m) block
    shifted = L[None, :, :] - 1.3 * skewed[:, :, None]
    upper = np.maximum(L, shifted.max(axis=1))
    gaps = L[:, None, :] - L[None, :, :]
    excess = gaps.max(axis=2) - 0.9 * dist
    np.fill_diagonal(excess, -np.inf)
    monkeypatch.setattr(verify, "_PART", part)  # parts of a few entries: many parts, on all cores
    assert np.array_equal(_upper_extension(L, skewed, 1.3), upper)
    assert mdp_violation(P, dist, 0.9) == excess.max()
