"""posterior_bound against a direct Bayes computation, and the plain-words helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mdp_core as core
from mdp_core.release import budget_sentence, odds_factor, posterior_bound, posterior_table


def bayes_posterior(prior: float, P: np.ndarray, x: int, x2: int, y: int) -> float:
    """P(x | y) for an attacker choosing between x (prior p) and x2 (1 - p), straight from Bayes' rule."""
    num = prior * P[x, y]
    return num / (num + (1 - prior) * P[x2, y])


@pytest.mark.parametrize("prior", [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize(("eps", "d"), [(0.1, 1.0), (1.0, 1.0), (2.0, 0.5), (5.0, 0.3)])
def test_attained_by_randomised_response(prior: float, eps: float, d: float) -> None:
    t = math.exp(eps * d)
    P = np.array([[t, 1.0], [1.0, t]]) / (1.0 + t)  # ratio exactly e^(eps d) on both outputs
    assert posterior_bound(prior, eps, d) == pytest.approx(bayes_posterior(prior, P, 0, 1, 0), rel=1e-13)


def test_known_numbers() -> None:
    assert posterior_bound(0.5, math.log(3)) == pytest.approx(0.75, rel=1e-14)
    assert posterior_bound(0.01, 1.0) == pytest.approx(0.01 * math.e / (0.01 * math.e + 0.99), rel=1e-14)
    assert posterior_bound(0.0, 3.0) == 0.0 and posterior_bound(1.0, 3.0) == 1.0
    assert posterior_bound(0.5, 800.0) == 1.0  # no overflow
    assert odds_factor(2.0, 0.5) == pytest.approx(math.e)


@given(
    seed=st.integers(0, 10_000),
    eps=st.floats(0.05, 6.0),
    prior=st.floats(0.001, 0.999),
)
def test_no_output_of_an_mdp_mechanism_beats_the_bound(seed: int, eps: float, prior: float) -> None:
    rng = np.random.default_rng(seed)
    dist = core.ordinal_distance(int(rng.integers(2, 7)))
    P = core.exponential_mechanism(dist, eps)
    assert core.mdp_violation(P, dist, eps) <= 1e-9
    n = dist.shape[0]
    for x in range(n):
        for x2 in range(n):
            if x == x2:
                continue
            worst = max(bayes_posterior(prior, P, x, x2, y) for y in range(n))
            assert worst <= posterior_bound(prior, eps, dist[x, x2]) + 1e-12


def test_table_and_sentence() -> None:
    rows = posterior_table(1.0)
    assert [r["prior"] for r in rows] == [0.01, 0.1, 0.5]
    assert rows[2]["posterior"] == pytest.approx(math.e / (math.e + 1))
    s = budget_sentence(1.0)
    assert "odds" in s and "a factor of 2.72 " in s and "e^(1 × 1)" in s
    # audit: "a factor 1.63e+05" in the plain-words answer; e^12 = 162,754.8
    assert "a factor of about 163,000 (e^(ε·d) = e^(12 × 1))" in budget_sentence(12.0)
    assert "a factor of about 1.1 × 10^13 " in budget_sentence(30.0)  # e^30 = 1.07e13


def test_bad_input_is_named() -> None:
    with pytest.raises(core.DataError, match="prior must be a probability"):
        posterior_bound(1.5, 1.0)
    with pytest.raises(core.DataError, match="eps"):
        posterior_bound(0.5, -1.0)
    with pytest.raises(core.DataError, match="distance must be a finite number"):
        posterior_bound(0.5, 1.0, -2.0)
    with pytest.raises(TypeError, match="prior must be a number"):
        posterior_bound("x", 1.0)  # type: ignore[arg-type]
