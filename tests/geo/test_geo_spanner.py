"""spanner_mechanism: eps-mDP on all pairs (exhaustive check), never below the certified bound, within 1 %
of an independent full LP's optimum; its own certificate is the spanner relaxation's optimum (independent
linprog) and never above the full optimum; spanner_pairs: the dilation it reports is the true one."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)

import mdp_core.geo.spanner as spanner_module
from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.geo import (
    auto_lower_bound,
    compare_methods,
    geo_lower_bound,
    grid_road_network,
    optimal_geo_mechanism,
    relaxation_pairs,
    run_bench,
    spanner_mechanism,
    spanner_pairs,
    spanner_slacks,
    verify_geo,
    yao_pairs,
)
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.spanner import (
    EXTENSION_NEIGHBOURS,
    EXTENSION_SLACK,
    FINE_GRID_SLACK,
    FINE_GRID_TARGETS,
    LONG_LP_FINE_SLACKS,
    LONG_LP_SECONDS,
    SLACK,
    spanner_from_coarser,
)
from mdp_core.geo.utility import GeoProblem, expected_travel_error
from mdp_core.mechanisms import mdp_violation, raise_repair


def networkx_dilation(points: np.ndarray, pairs: np.ndarray) -> float:
    """Independent reference: Dijkstra on networkx, max over pairs of path length / distance."""
    graph = nx.Graph()
    graph.add_nodes_from(range(len(points)))
    for a, b in pairs.tolist():
        graph.add_edge(a, b, weight=float(np.linalg.norm(points[a] - points[b])))
    worst = 1.0
    for a, lengths in nx.all_pairs_dijkstra_path_length(graph):
        for b, length in lengths.items():
            if b != a:
                worst = max(worst, length / float(np.linalg.norm(points[a] - points[b])))
    assert nx.is_connected(graph)
    return worst


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), dilation=st.sampled_from([1.05, 1.2, 1.5]))
def test_spanner_dilation_is_the_true_one_and_within_the_request(seed: int, n: int, dilation: float) -> None:
    points = np.random.default_rng(seed).uniform(0, 5, size=(n, 2))
    pairs, reached = spanner_pairs(points, dilation)
    assert np.all(pairs[:, 0] < pairs[:, 1])
    assert reached <= dilation
    assert reached == pytest.approx(networkx_dilation(points, pairs), rel=1e-12)


def all_pairs_spanner(points: np.ndarray, dilation: float) -> np.ndarray:
    """Reference: the same greedy rounds with shortest paths from every point each round."""
    n = len(points)
    dist = np.linalg.norm(points[:, None] - points[None], axis=2)
    pairs = yao_pairs(points, 12)
    while True:
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_weighted_edges_from((a, b, dist[a, b]) for a, b in pairs.tolist())
        paths = dict(nx.all_pairs_dijkstra_path_length(graph))
        long = np.array(
            [(a, b) for a in range(n) for b in range(a + 1, n) if paths[a][b] > dilation * dist[a, b]],
            dtype=np.int64,
        ).reshape(-1, 2)
        if len(long) == 0:
            return pairs
        shortest = np.argsort(dist[long[:, 0], long[:, 1]])[: max(1, len(long) // 20)]
        pairs = np.unique(np.concatenate([pairs, long[shortest]]), axis=0)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 70))
def test_rechecking_only_the_long_pairs_endpoints_adds_the_same_edges(seed: int, n: int) -> None:
    # a pair within the dilation stays within it as edges join, so only the long pairs' ends are re-run
    points = np.random.default_rng(seed).uniform(0, 5, size=(n, 2))
    np.testing.assert_array_equal(spanner_pairs(points, 1.05)[0], all_pairs_spanner(points, 1.05))


def test_yao_graph_joins_each_point_to_its_nearest_in_every_sector() -> None:
    # a plus sign: with 4 sectors the centre's nearest point in each sector is the inner arm point
    points = np.array([[0, 0], [1, 0], [2, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)
    pairs = {tuple(p) for p in yao_pairs(points, 4).tolist()}
    assert {(0, 1), (0, 3), (0, 4), (0, 5), (1, 2)} <= pairs
    assert (0, 2) not in pairs  # farther than point 1 in the same sector


@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("dilation", [1.05, 1.5])
def test_spanner_mechanism_is_private_and_near_the_full_optimum(eps: float, dilation: float) -> None:
    # the LP runs at (1 - slack) eps and the raise fixes the pairs it left out, so even a loose spanner
    # lands within 1 % of the full optimum (dividing eps by t = 1.5 would not)
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    mech = spanner_mechanism(problem, eps, dilation=dilation)
    dist = np.linalg.norm(problem.targets_km[:, None] - problem.targets_km[None], axis=2)
    assert mdp_violation(mech.matrix, dist, eps) <= 1e-9
    assert verify_geo(mech, exhaustive=True).holds
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)
    optimum = full_lp(problem, eps)
    utility = mech.utility_km(problem)
    assert optimum - 1e-9 <= utility <= 1.01 * optimum
    assert mech.method == "spanner" and mech.info["dilation"] <= dilation


@pytest.mark.parametrize(("eps", "dilation", "gain"), [(0.5, 1.5, 0.0), (2.0, 1.5, 0.0), (1.0, 2.0, 1e-4)])
def test_the_raised_matrix_is_remapped_never_worse_and_still_private(
    eps: float, dilation: float, gain: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = tiny_problem(6, 5, seed=1, seed_n=4)  # 75 targets x 25 outputs
    raised: list[np.ndarray] = []

    def keep(*args: object, **kwargs: object) -> tuple[np.ndarray, float, int]:
        result = raise_repair(*args, **kwargs)
        raised.append(result[0])
        return result

    monkeypatch.setattr(spanner_module, "raise_repair", keep)
    mech = spanner_mechanism(problem, eps, dilation=dilation, slack=0.05)
    # independent remap: each output goes to the output of least posterior expected loss
    score = raised[0].T @ (problem.prior[:, None] * problem.loss)
    expected = np.zeros_like(raised[0])
    for y, target in enumerate(score.argmin(axis=1)):
        expected[:, target] += raised[0][:, y]
    np.testing.assert_allclose(mech.matrix, expected, rtol=1e-12, atol=1e-15)
    before = expected_travel_error(raised[0], problem.prior, problem.loss)
    assert mech.utility_km(problem) <= before - gain + 1e-12  # measured gain at eps 1: 1.6e-4 km
    assert mech.info["violation"] == mdp_violation(mech.matrix, problem.target_distances_km(), eps) <= 1e-9
    assert verify_geo(mech, exhaustive=True).holds


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]))
def test_spanner_mechanism_is_never_below_the_bound(seed: int, eps: float) -> None:
    problem = tiny_problem(3 + seed % 3, 3, seed=seed % 11)
    mech = spanner_mechanism(problem, eps)
    bound = geo_lower_bound(problem, eps, time_limit=30)
    assert bound.value <= mech.utility_km(problem) + 1e-12


@pytest.mark.parametrize(("eps", "dilation"), [(0.5, 1.05), (2.0, 1.05), (2.0, 1.5)])
def test_spanner_certificate_is_the_relaxation_optimum_and_below_the_full_optimum(
    eps: float, dilation: float
) -> None:
    problem = tiny_problem(4, 3, seed=3, seed_n=3)
    mech = spanner_mechanism(problem, eps, dilation=dilation)
    pairs, _ = spanner_pairs(problem.targets_km, dilation)
    certificate = mech.info["lower_bound"].value
    assert certificate == pytest.approx(full_lp(problem, eps, pairs), rel=1e-6)
    assert certificate <= full_lp(problem, eps) + 1e-12 <= mech.utility_km(problem) + 1e-12


def test_finer_grids_take_the_larger_default_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    assert spanner_slacks(FINE_GRID_TARGETS) == (SLACK,)
    assert spanner_slacks(FINE_GRID_TARGETS + 1) == (FINE_GRID_SLACK,)
    assert spanner_slacks(FINE_GRID_TARGETS + 1, LONG_LP_SECONDS) == LONG_LP_FINE_SLACKS
    assert max(LONG_LP_FINE_SLACKS) < FINE_GRID_SLACK
    assert spanner_slacks(FINE_GRID_TARGETS, LONG_LP_SECONDS) == (SLACK,)  # coarse grids: whatever the time
    small = spanner_mechanism(problem, 2.0)
    np.testing.assert_array_equal(small.matrix, spanner_mechanism(problem, 2.0, slack=SLACK).matrix)
    monkeypatch.setattr(spanner_module, "FINE_GRID_TARGETS", problem.grid.n_targets - 1)
    fine = spanner_mechanism(problem, 2.0)
    np.testing.assert_array_equal(fine.matrix, spanner_mechanism(problem, 2.0, slack=FINE_GRID_SLACK).matrix)
    assert not np.array_equal(fine.matrix, small.matrix)  # the raise kept more back
    assert verify_geo(fine, exhaustive=True).holds


@pytest.mark.parametrize("slacks", [(0.3, 0.01), (0.01, 0.3)])
def test_after_a_long_lp_the_best_of_the_slacks_is_kept(
    slacks: tuple[float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    monkeypatch.setattr(spanner_module, "FINE_GRID_TARGETS", problem.grid.n_targets - 1)
    monkeypatch.setattr(spanner_module, "LONG_LP_FINE_SLACKS", slacks)
    candidates = [spanner_mechanism(problem, 2.0, slack=slack) for slack in slacks]
    errors = [mech.utility_km(problem) for mech in candidates]
    assert errors[0] != pytest.approx(errors[1], rel=1e-3)  # the choice matters
    best = candidates[int(np.argmin(errors))]
    chosen = spanner_mechanism(problem, 2.0, time_limit=LONG_LP_SECONDS)
    np.testing.assert_array_equal(chosen.matrix, best.matrix)
    assert chosen.info["slack"] == best.info["slack"] == 0.01  # the smaller slack raises less here
    assert verify_geo(chosen, exhaustive=True).holds


def test_spanner_refuses_bad_input() -> None:
    problem = tiny_problem(4, 3, seed=1)
    with pytest.raises(DataError, match=r"at most 5 targets.*through spanner_from_coarser"):
        spanner_mechanism(problem, 1.0, max_targets=5)
    with pytest.raises(DataError, match="dilation must be above 1"):
        spanner_pairs(problem.targets_km, 1.0)
    with pytest.raises(DataError, match="share a position"):
        spanner_pairs(np.zeros((3, 2)), 1.1)
    with pytest.raises(DataError, match="slack"):
        spanner_mechanism(problem, 1.0, slack=0.0)


def test_bench_record_carries_the_spanner_and_the_best_private_method() -> None:
    network = grid_road_network(5, 4, spacing_km=0.3, rng=np.random.default_rng(4))
    record, comp = run_bench(
        network,
        depth=1,
        eps=1.0,
        seed_n=3,
        n_tasks=6,
        verify_samples=2_000,
        bound_time_limit=20,
        reference=True,
    )
    assert comp.violation_ratio["spanner"] == 0.0
    utility = record["utility_km"]
    private = {k: u for k, u in utility.items() if k != "lp_coarse"}
    assert record["best_private"] == min(private, key=private.__getitem__)
    assert utility["spanner"] <= utility["em_remap"] + 1e-9  # near-optimal on the full domain
    assert record["lower_bound"] <= utility["spanner"] + 1e-12
    # the comparison's bound is the tighter of the automatic bound (here the exact optimum's) and the
    # spanner LP's own certificate
    auto = auto_lower_bound(comp.problem, 1.0, time_limit=20).value
    certificate = comp.mechanisms["spanner"].info["lower_bound"].value
    assert comp.bound is not None
    assert comp.bound.value == pytest.approx(max(auto, certificate), rel=1e-9)
    assert record["spanner_lower_bound"] == pytest.approx(certificate, abs=1e-6)
    with pytest.raises(DataError, match="unknown methods"):
        compare_methods(comp.problem, 1.0, methods=("nope",))


def test_relaxation_pairs_hold_the_yao_sectors_and_the_nearest_neighbours() -> None:
    points = np.random.default_rng(7).uniform(0, 3, size=(40, 2))
    plain = {tuple(p) for p in relaxation_pairs(points, 3, cones=0).tolist()}
    with_sectors = {tuple(p) for p in relaxation_pairs(points, 3).tolist()}
    yao = {tuple(p) for p in yao_pairs(points, 12).tolist()}
    assert with_sectors == plain | yao
    assert yao - plain  # the sectors add pairs the nearest neighbours miss


def test_a_spanner_that_cannot_be_built_is_reported_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    import mdp_core.geo.compare as compare

    problem = tiny_problem(4, 3, seed=1)
    small = lambda p, eps, **kw: spanner_mechanism(p, eps, max_targets=5, **kw)  # noqa: E731
    monkeypatch.setattr(compare, "spanner_mechanism", small)
    comp = compare_methods(problem, 1.0, methods=("em", "spanner"), verify_samples=500)
    assert set(comp.utility_km) == {"em"}
    assert comp.failed["spanner"].startswith("the spanner LP takes at most 5 targets")


def test_finer_grids_give_the_spanner_lp_more_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    import mdp_core.geo.compare as compare

    problem = tiny_problem(4, 3, seed=1)
    asked: list[float] = []

    def timed(p: GeoProblem, eps: float, *, time_limit: float, progress: Progress = None) -> GeoMechanism:
        asked.append(time_limit)
        return spanner_mechanism(p, eps, time_limit=5.0)

    monkeypatch.setattr(compare, "spanner_mechanism", timed)
    for fine_above in (problem.grid.n_targets, problem.grid.n_targets - 1):
        monkeypatch.setattr(compare, "FINE_GRID_TARGETS", fine_above)
        compare_methods(problem, 1.0, methods=("spanner",), verify_samples=100)
    assert asked == [compare.SPANNER_SECONDS, compare.FINE_GRID_SPANNER_SECONDS]
    assert compare.SPANNER_SECONDS < compare.FINE_GRID_SPANNER_SECONDS
    compare_methods(problem, 1.0, methods=("spanner",), verify_samples=100, reference_seconds=7.0)
    assert asked[-1] == 7.0  # the page's own time wins on any grid

    def extended(
        coarse: GeoProblem, p: GeoProblem, eps: float, *, time_limit: float, progress: Progress = None
    ) -> GeoMechanism:
        asked.append(time_limit)
        return spanner_mechanism(p, eps, time_limit=5.0)

    monkeypatch.setattr(compare, "spanner_from_coarser", extended)
    compare_methods(problem, 1.0, methods=("spanner",), verify_samples=100, spanner_coarse=problem)
    assert asked[-1] == compare.EXTENSION_SPANNER_SECONDS > compare.FINE_GRID_SPANNER_SECONDS


def test_short_bounds_aggregate_from_fewer_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    import mdp_core.geo.bounds as bounds

    problem = tiny_problem(4, 3, seed=1, seed_n=3)
    n = len(problem.targets_km)
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE", n)  # 45 s and more: not aggregated at n targets
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE_SHORT", n - 1)  # under 45 s: aggregated
    short = geo_lower_bound(problem, 1.0, time_limit=10, representatives_count=n // 2)
    long = geo_lower_bound(problem, 1.0, time_limit=50)
    assert short.method.startswith("aggregated") and not long.method.startswith("aggregated")
    assert short.value <= long.value + 1e-9 <= full_lp(problem, 1.0) + 2e-9


def test_a_finer_grid_takes_the_coarser_grids_spanner_lp_raised_to_exact_privacy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    coarse, fine = (tiny_problem(4, 3, seed=1, depth=depth, seed_n=3) for depth in (1, 2))
    started: list[tuple[np.ndarray, float]] = []
    solved: list[np.ndarray] = []

    def keep(Z: np.ndarray, dist: np.ndarray, eps: float, *, slack: float) -> tuple[np.ndarray, float, int]:
        started.append((np.array(Z), slack))
        return raise_repair(Z, dist, eps, slack=slack)

    def keep_lp(*args: Any) -> tuple[np.ndarray, np.ndarray, float, str]:
        result = solve_lp(*args)
        solved.append(np.array(result[0]))
        return result

    solve_lp = spanner_module._solve
    monkeypatch.setattr(spanner_module, "raise_repair", keep)
    monkeypatch.setattr(spanner_module, "_solve", keep_lp)
    steps: list[tuple[float, str]] = []
    mech = spanner_from_coarser(
        coarse, fine, 1.0, time_limit=10.0, progress=lambda f, s: steps.append((f, s))
    )
    fractions = [f for f, _ in steps]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and steps[0][1].startswith("coarser grid")
    [coarse_lp], [(extended, slack)] = solved, started  # the coarse LP's raw solution, raised once: on fine
    assert coarse_lp.shape[0] == coarse.grid.n_targets < fine.grid.n_targets == extended.shape[0]
    # independently: each fine target starts from the rows of its 4 nearest coarse targets, weighted by
    # inverse distance (a tie at the 4th distance: either target gives the same weight)
    between = np.linalg.norm(fine.targets_km[:, None] - coarse.targets_km[None], axis=2)
    for row, dists in zip(extended, between, strict=True):
        order = np.argsort(dists, kind="stable")[:EXTENSION_NEIGHBOURS]
        tied = np.flatnonzero(np.abs(dists - dists[order[-1]]) <= 1e-12)
        candidates = []
        for last in tied if len(tied) > 1 else [order[-1]]:
            near = np.append(order[:-1], last) if last not in order[:-1] else order
            inverse = 1.0 / np.maximum(dists[near], 1e-12)  # a target on a coarse one takes its row
            weights = inverse / inverse.sum()
            candidates.append(np.abs(weights @ coarse_lp[near] - row).max())
        assert min(candidates) <= 1e-9
    sums = coarse_lp.sum(axis=1)  # convex combinations of the LP's rows: their sums in the rows' range
    assert (
        sums.min() - 1e-12 <= extended.sum(axis=1).min() <= extended.sum(axis=1).max() <= sums.max() + 1e-12
    )
    assert slack == EXTENSION_SLACK
    dist = np.linalg.norm(fine.targets_km[:, None] - fine.targets_km[None], axis=2)
    assert mdp_violation(mech.matrix, dist, 1.0) <= 1e-9 and verify_geo(mech, exhaustive=True).holds
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)
    assert full_lp(fine, 1.0) - 1e-9 <= mech.utility_km(fine) <= 1.05 * full_lp(fine, 1.0)
    # the coarse LP's certificate bounds the coarse grid, not this one: none is carried
    assert "lower_bound" not in mech.info and mech.info["coarse"]["targets"] == coarse.grid.n_targets
    with pytest.raises(DataError, match="other outputs"):
        spanner_from_coarser(tiny_problem(4, 3, seed=1, seed_n=2), fine, 1.0)
    with pytest.raises(DataError, match="at most 20 targets"):
        spanner_from_coarser(coarse, fine, 1.0, max_targets=20)
    monkeypatch.setattr(spanner_module, "SPANNER_MAX_TARGETS", coarse.grid.n_targets - 1)
    with pytest.raises(DataError, match=r"the coarser grid's spanner LP takes at most .*smaller depth"):
        spanner_from_coarser(coarse, fine, 1.0)


def test_bench_extends_the_spanner_from_the_coarser_grid_above_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mdp_core.geo.compare as compare

    net = grid_road_network(4, 3, spacing_km=0.3, rng=np.random.default_rng(1))
    monkeypatch.setattr(compare, "SPANNER_MAX_TARGETS", 30)  # depth 2 has 34 targets, depth 1 28
    kw = {"depth": 2, "eps": 1.0, "seed_n": 3, "n_tasks": 6, "verify_samples": 2_000, "bound_time_limit": 20}
    record, comp = run_bench(net, reference=True, **kw)
    spanner = comp.mechanisms["spanner"]
    assert spanner.info["coarse"]["targets"] == 28 and record["targets"] == 34
    assert comp.violation_ratio["spanner"] == 0.0 and record["spanner_lower_bound"] is None
    assert comp.problem is not None and comp.bound is not None
    assert comp.bound.value <= full_lp(comp.problem, 1.0) + 1e-12 <= record["utility_km"]["spanner"] + 1e-12
    monkeypatch.setattr(compare, "SPANNER_FROM_COARSER_TARGETS", 33)
    record, _ = run_bench(net, reference=True, **kw)
    assert "spanner" not in record["utility_km"] and "bilinear" in record["utility_km"]


def test_target_distances_are_the_euclidean_ones_to_the_bit() -> None:
    problem = tiny_problem(6, 5, seed=2, seed_n=4, depth=2)
    pts = problem.targets_km
    dist = problem.target_distances_km()
    assert np.array_equal(dist, np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=2))
    assert np.array_equal(dist, dist.T) and dist.shape == (len(pts), len(pts))


def test_a_row_the_solver_left_without_mass_is_raised_from_its_neighbours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PDLP at ratios near e^40 (the district at eps 20 / km) left rows without mass, and the repair
    # refused them: "every row of Z needs positive mass"
    problem, eps = tiny_problem(4, 4, seed=2, depth=0, seed_n=3), 2.0
    solve = spanner_module._solve

    def massless_row(*args: Any) -> Any:
        p, *rest = solve(*args)
        p = p.copy()
        p[0] = 0.0
        return (p, *rest)

    monkeypatch.setattr(spanner_module, "_solve", massless_row)
    mech = spanner_mechanism(problem, eps)
    assert mech.matrix[0].sum() == pytest.approx(1.0)
    assert mdp_violation(mech.matrix, problem.target_distances_km(), eps) <= 1e-9


def test_an_lp_beyond_the_solvers_range_is_refused_in_words() -> None:
    problem = tiny_problem(4, 4, seed=2, depth=0, seed_n=3)
    reach = float(np.hypot(*np.ptp(problem.targets_km, axis=0)))
    with pytest.raises(DataError, match=r"the LP solver returned no solution .* try a smaller eps"):
        spanner_mechanism(problem, 300.0 / reach)  # coefficients above HiGHS's 1e15: it takes no model
    with pytest.raises(DataError, match="beyond what numbers can hold"):
        optimal_geo_mechanism(problem, 700.0 / reach)  # was a raw LAPACK error (NaN in cho_factor)
