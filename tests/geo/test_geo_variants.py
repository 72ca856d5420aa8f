"""MLaEt-A / -M / -O: every variant verified exactly, O never worse than A, M keeps the seed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdp_core import mdp_violation
from mdp_core.errors import DataError
from mdp_core.geo import build_problem, grid_road_network, tree_extension, tree_seed
from mdp_core.geo.extension import _box_argmin, _lattice_mcshane_whitney, lattice_excess
from mdp_core.geo.utility import GeoProblem


def euclid(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None] - points[None], axis=2)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nx_=st.integers(3, 6),
    ny=st.integers(2, 5),
    seed=st.integers(0, 10_000),
    eps=st.sampled_from([0.5, 2.0, 6.0]),
    depth=st.integers(1, 2),
)
def test_every_variant_is_exactly_mdp_and_o_never_worse(
    nx_: int, ny: int, seed: int, eps: float, depth: int
) -> None:
    net = grid_road_network(nx_, ny, spacing_km=0.25, rng=np.random.default_rng(seed))
    problem = build_problem(net, seed_n=3, depth=depth, n_tasks=8, rng=np.random.default_rng(seed + 1))
    dist = euclid(problem.targets_km)
    utility = {}
    for variant in ("A", "M", "O"):
        mech = tree_extension(problem, eps, variant=variant)
        assert mech.info["variant"] == variant
        assert np.allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)
        assert mdp_violation(mech.matrix, dist, eps) <= 1e-9
        utility[variant] = mech.utility_km(problem)
    assert utility["O"] <= utility["A"] + 1e-12


def test_box_argmin_matches_brute_force() -> None:
    rng = np.random.default_rng(4)
    m = 5
    lo = rng.normal(size=(30, m))
    hi = lo + rng.uniform(0, 2, size=(30, m))
    loss = rng.uniform(0, 3, size=(30, m))
    got = _box_argmin(lo, hi, loss, np.argsort(loss, axis=1))
    corners = np.array(np.meshgrid(*[[0, 1]] * m, indexing="ij")).reshape(m, -1).T  # 2^m vertices
    for r in range(30):
        values = []
        for c in corners:
            g = np.where(c == 1, hi[r], lo[r])
            p = np.exp(g - g.max())
            values.append(float(p @ loss[r] / p.sum()))
        p = np.exp(got[r] - got[r].max())
        assert float(p @ loss[r] / p.sum()) == pytest.approx(min(values), rel=1e-12)
        assert np.all((got[r] >= lo[r]) & (got[r] <= hi[r]))


def test_mcshane_whitney_keeps_seeds_and_steps(small_problem: GeoProblem) -> None:
    grid = small_problem.grid
    sx, sy = grid.seed_shape
    rng = np.random.default_rng(0)
    step = 0.3
    # a seed function with axis steps <= step * scale (feasible, as after the seed LP)
    walk = np.cumsum(rng.uniform(-1, 1, size=(sx, 1, 3)), axis=0) + np.cumsum(
        rng.uniform(-1, 1, size=(1, sy, 3)), axis=1
    )
    log_seed = (0.5 * step * grid.scale * walk).reshape(sx * sy, 3)
    lattice = _lattice_mcshane_whitney(log_seed, grid, step)
    assert np.allclose(lattice[:: grid.scale, :: grid.scale].reshape(sx * sy, 3), log_seed, atol=1e-12)
    assert lattice_excess(lattice, step) <= 1e-12


def test_variant_arguments(small_problem: GeoProblem) -> None:
    with pytest.raises(DataError, match="variant"):
        tree_extension(small_problem, 1.0, variant="B")
    with pytest.raises(DataError, match="sweeps"):
        tree_extension(small_problem, 1.0, variant="O", sweeps=0)
    assert tree_extension(small_problem, 1.0, variant="M").method == "tree_m"


def test_variants_share_one_seed_lp(small_problem: GeoProblem) -> None:
    """A seed solved once gives every variant what its own solve gives; one of another eps is refused."""
    seed = tree_seed(small_problem, 1.0)
    for variant in ("A", "M", "O"):
        own = tree_extension(small_problem, 1.0, variant=variant)
        shared = tree_extension(small_problem, 1.0, variant=variant, seed=seed)
        assert np.array_equal(own.matrix, shared.matrix)
    with pytest.raises(DataError, match="solved for another eps"):
        tree_extension(small_problem, 0.5, seed=tree_seed(small_problem, 2.0))
    with pytest.raises(TypeError, match="seed must be a SeedLPResult"):
        tree_extension(small_problem, 1.0, seed=seed.z)  # type: ignore[arg-type]


def test_tree_extension_refuses_a_lattice_that_breaks_the_axis_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(mutation audit, stop 67) with the lattice's privacy guard disabled every test passed."""
    import mdp_core.geo.extension as extension

    city = grid_road_network(7, 5, spacing_km=0.2, rng=np.random.default_rng(3))
    problem = build_problem(city, seed_n=5, depth=2, n_tasks=12, rng=np.random.default_rng(1))

    def broken(log_seed: np.ndarray, grid: object, step: float) -> np.ndarray:  # one vertex 10 steps up
        lattice = _lattice_mcshane_whitney(log_seed, grid, step).copy()  # type: ignore[arg-type]
        lattice[1, 1, :] += 10 * step
        return lattice

    monkeypatch.setattr(extension, "_lattice_mcshane_whitney", broken)
    with pytest.raises(DataError, match="exceeds the axis budget"):
        tree_extension(problem, 1.0, variant="M")
