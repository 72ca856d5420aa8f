"""coset_lower_bound: the prior-weighted sum of the cosets' optima (checked against independent full LPs),
never above the optimum of the whole problem nor the utility of a verified mechanism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)

from mdp_core.errors import DataError
from mdp_core.geo import coset_lower_bound, grid_road_network, run_bench, tree_extension
from mdp_core.geo.cosets import cosets


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_bound_is_the_weighted_sum_of_the_cosets_optima(eps: float) -> None:
    problem = tiny_problem(4, 4, seed=2, depth=2, seed_n=2)
    parts = cosets(problem, 2)
    assert len(parts) == 4
    assert sum(len(sub.prior) for _, sub in parts) == len(problem.prior)
    assert sum(mass for mass, _ in parts) == pytest.approx(1.0, abs=1e-12)
    reference = sum(mass * full_lp(sub, eps) for mass, sub in parts)
    bound = coset_lower_bound(problem, eps, time_limit=30)
    assert not bound.exact and "4 cosets" in bound.method
    assert bound.value == pytest.approx(reference, rel=1e-6)  # each small coset is solved exactly
    assert bound.value <= full_lp(problem, eps) + 1e-9  # never above the whole problem's optimum


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]), step=st.sampled_from([1, 2, 3]))
def test_never_above_a_verified_mechanism(seed: int, eps: float, step: int) -> None:
    problem = tiny_problem(3 + seed % 3, 3, seed=seed % 11, depth=2, seed_n=2)
    bound = coset_lower_bound(problem, eps, step=step, time_limit=20)
    assert 0.0 < bound.value <= tree_extension(problem, eps).utility_km(problem) + 1e-12


def test_bad_step_is_refused() -> None:
    problem = tiny_problem(3, 3, seed=0)
    with pytest.raises(DataError, match="step must be a positive integer"):
        coset_lower_bound(problem, 1.0, step=0)
    with pytest.raises(DataError, match="time_limit must be positive"):
        coset_lower_bound(problem, 1.0, time_limit=-1)


def test_bench_takes_the_coset_bound_on_request() -> None:
    net = grid_road_network(4, 4, spacing_km=0.3, rng=np.random.default_rng(1))
    record, comp = run_bench(net, depth=2, eps=1.0, seed_n=2, n_tasks=6, verify_samples=2_000, bound_cosets=2)
    assert comp.bound is not None and "4 cosets (2 x 2)" in record["bound_method"]
    assert record["lower_bound"] == pytest.approx(comp.bound.value, abs=1e-6)
    assert all(gap >= -1e-9 for key, gap in record["gap"].items() if key != "lp_coarse")
