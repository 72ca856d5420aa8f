"""mdp_core.metrics: component metrics, the l_p product metric, budget composition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mdp_core as core
from mdp_core import DataError


def _brute_product(components: list[np.ndarray], p: float, weights: list[float]) -> np.ndarray:
    sizes = [c.shape[0] for c in components]
    records = list(itertools.product(*(range(m) for m in sizes)))  # C order
    out = np.zeros((len(records), len(records)))
    for i, x in enumerate(records):
        for j, y in enumerate(records):
            parts = [
                w * c[a, b] ** (1 if np.isinf(p) else p)
                for w, c, a, b in zip(weights, components, x, y, strict=True)
            ]
            out[i, j] = max(parts) if np.isinf(p) else sum(parts) ** (1 / p)
    return out


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5, np.inf])
def test_product_distance_matches_brute_force(p: float) -> None:
    comps = [core.ordinal_distance(3), core.nominal_distance(2), core.numeric_distance([0.0, 1.0, 4.0])]
    weights = [1.0, 0.5, 2.0]
    np.testing.assert_allclose(
        core.product_distance(comps, p, weights), _brute_product(comps, p, weights), atol=1e-12
    )


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.sampled_from([1.0, 2.0, 3.0, np.inf]))
def test_product_distance_is_a_metric(sizes: list[int], p: float) -> None:
    d = core.product_distance([core.ordinal_distance(m) for m in sizes], p)
    n = int(np.prod(sizes))
    assert d.shape == (n, n)
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0) and np.all(d >= 0)
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-12)  # d(x,z) <= d(x,y) + d(y,z)


def test_component_metrics_values() -> None:
    np.testing.assert_allclose(core.ordinal_distance(3), [[0, 0.5, 1], [0.5, 0, 0.5], [1, 0.5, 0]])
    np.testing.assert_allclose(core.nominal_distance(2), [[0, 1], [1, 0]])
    np.testing.assert_allclose(core.numeric_distance([10.0, 12.0, 20.0])[0], [0, 0.2, 1.0])
    assert core.ordinal_distance(1).tolist() == [[0.0]]


def test_joint_codes_is_c_order() -> None:
    codes = np.array([[0, 0], [0, 2], [1, 0], [1, 2]])
    assert core.joint_codes(codes, [2, 3]).tolist() == [0, 2, 3, 5]


def test_dual_exponent_and_budget_norm() -> None:
    assert core.dual_exponent(2) == 2 and core.dual_exponent(1) == np.inf and core.dual_exponent(np.inf) == 1
    assert core.dual_exponent(3) == pytest.approx(1.5)
    assert core.budget_norm([3.0, 4.0], 2.0) == pytest.approx(5.0)
    assert core.budget_norm([3.0, 4.0], np.inf) == 4.0
    assert core.budget_norm([3.0, 4.0], 1.0) == 7.0


def test_bad_arguments() -> None:
    with pytest.raises(DataError, match="p must be >= 1"):
        core.product_distance([core.nominal_distance(2)], 0.5)
    with pytest.raises(DataError, match="weights must be 1 non-negative"):
        core.product_distance([core.nominal_distance(2)], 2, weights=[-1.0])
    with pytest.raises(DataError, match="at least one"):
        core.product_distance([], 2)
    with pytest.raises(DataError, match="positive integer"):
        core.nominal_distance(0)
    with pytest.raises(DataError, match="non-negative"):
        core.budget_norm([-1.0], 2)
    with pytest.raises(DataError, match=r"shape \(n, 2\)"):
        core.joint_codes(np.zeros((3, 3), dtype=int), [2, 2])
