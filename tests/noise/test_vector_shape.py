"""Shape selection for a vector query (003 Sec. 3.5-3.6, Table 5): least certified error per coordinate."""

from __future__ import annotations

import numpy as np
import pytest

from mdp_core import DataError, ggm_scale, ggm_scale_vector, ggm_second_moment, select_shape_vector
from mdp_core.noise import vector_shape_grid


def test_two_coordinates_select_the_papers_shape_and_beat_laplace() -> None:
    """Delta = (1, 2) at eps 1, delta 0.01: 003 Table 5 selects p = 1.2947."""
    choice = select_shape_vector(1.0, 0.01, [1.0, 2.0], p_max=4.0)
    assert 1.15 <= choice.p <= 1.45
    moments = {p: ggm_second_moment(p, v.scale) for p, v in choice.scales}
    assert choice.second_moment == min(moments.values()) == moments[choice.p]
    assert choice.classical_p == 1.0 and choice.classical_second_moment == moments[1.0]
    assert choice.improvement == pytest.approx(1 - moments[choice.p] / moments[1.0])
    assert choice.improvement > 0.1
    # the exact shapes agree with their closed forms: p = 2 on the l2 sensitivity, p = inf the uniform
    assert dict(choice.scales)[2.0].scale == pytest.approx(ggm_scale(2.0, 1.0, 0.01, np.sqrt(5.0)), rel=1e-9)
    assert dict(choice.scales)[2.0].exact and dict(choice.scales)[np.inf].exact
    assert choice.total_delta == pytest.approx(0.01 + 1e-3)  # a Monte Carlo certificate: delta + alpha


def test_many_equal_coordinates_keep_the_gaussian_and_every_shape_is_certified_once() -> None:
    choice = select_shape_vector(1.0, 0.01, [1.0] * 6, p_max=3.0)
    assert choice.p == choice.classical_p == 2.0 and choice.improvement == 0.0
    assert sorted(p for p, _ in choice.scales) == sorted(vector_shape_grid(3.0).tolist())
    rng = np.random.default_rng(0)
    one = ggm_scale_vector(1.3, 1.0, 0.01, [1.0] * 6, rng=rng, alpha=1e-3, n_samples=100_000)
    assert choice.scale_of(1.3).scale == pytest.approx(one.scale, rel=1e-12)  # the same certificate


def test_shapes_out_of_reach_are_skipped_with_why_and_bad_input_is_refused() -> None:
    choice = select_shape_vector(1.0, 1e-12, [1.0, 2.0], p_max=2.0)
    assert choice.p == 2.0 and {p for p, _ in choice.scales} == {2.0, np.inf}
    assert "too small to certify by Monte Carlo" in str(choice.scale_of(1.0))
    with pytest.raises(DataError, match="p_max must be at least 2"):
        select_shape_vector(1.0, 0.01, [1.0, 2.0], p_max=1.5)
    with pytest.raises(DataError, match="eps"):
        select_shape_vector(-1.0, 0.01, [1.0, 2.0])
    grid = vector_shape_grid(10.0)
    assert grid[0] == 1.0 and grid[20] == 2.0 and grid[-2] == 10.0 and np.isinf(grid[-1])
    assert np.all(np.diff(grid[:-1]) > 0)
