"""Calibrated mechanisms: the exact actual eps; families built at the largest budget that still meets eps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

from mdp_core import mdp_violation
from mdp_core.errors import DataError
from mdp_core.geo import (
    CALIBRATE_MAX_TARGETS,
    CALIBRATED_METHODS,
    GeoMechanism,
    actual_eps,
    build_problem,
    calibrated_mechanism,
    calibrated_method,
    compare_methods,
    exponential_geo,
    grid_road_network,
    mechanism_metadata,
    tree_extension,
    tree_seed,
)
from mdp_core.geo import calibrate as calibrate_module
from mdp_core.geo import compare as compare_module
from mdp_core.geo import extension as extension_module
from mdp_core.geo.utility import GeoProblem


def brute_actual_eps(matrix: np.ndarray, points: np.ndarray) -> float:
    """Every ordered pair and output, one at a time (the definition, independently of the module)."""
    worst = 0.0
    for a in range(len(points)):
        for b in range(len(points)):
            d = float(np.hypot(*(points[a] - points[b])))
            for y in range(matrix.shape[1]):
                pa, pb = matrix[a, y], matrix[b, y]
                if pa == pb:
                    continue
                if pa == 0 or pb == 0 or d == 0:
                    return float("inf")
                worst = max(worst, abs(np.log(pa) - np.log(pb)) / d)
    return worst


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 9),
    m=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    zero_column=st.booleans(),
)
def test_actual_eps_is_the_definition_and_the_least_private_budget(
    n: int, m: int, seed: int, zero_column: bool
) -> None:
    rng = np.random.default_rng(seed)
    points = rng.uniform(0, 2, size=(n, 2))
    matrix = rng.uniform(0.05, 1.0, size=(n, m))
    if zero_column:  # an output nobody reports is skipped, as the check skips it
        matrix = np.column_stack([matrix, np.zeros(n)])
    matrix /= matrix.sum(axis=1, keepdims=True)
    got = actual_eps(matrix, points)
    assert got == pytest.approx(brute_actual_eps(matrix, points), rel=1e-12)
    if got == 0:  # one used output: every row the same, nothing revealed
        assert np.allclose(matrix, matrix[0])
        return
    dist = np.linalg.norm(points[:, None] - points[None], axis=2)
    assert mdp_violation(matrix, dist, got) <= 1e-9  # private at its actual eps ...
    assert mdp_violation(matrix, dist, got * (1 - 1e-6)) > 0  # ... and at no smaller one


def test_actual_eps_of_one_sided_zeros_and_coincident_targets_is_infinite() -> None:
    points = np.array([[0.0, 0.0], [1.0, 0.0]])
    assert actual_eps(np.array([[0.5, 0.5], [1.0, 0.0]]), points) == np.inf
    same_place = np.array([[0.0, 0.0], [0.0, 0.0]])
    assert actual_eps(np.array([[0.5, 0.5], [0.4, 0.6]]), same_place) == np.inf
    assert actual_eps(np.array([[0.5, 0.5], [0.5, 0.5]]), same_place) == 0.0
    with pytest.raises(DataError, match=r"must be \(n, m\) and \(n, 2\)"):
        actual_eps(np.ones((3, 2)), np.zeros((2, 2)))


@pytest.fixture(scope="module")
def problem() -> GeoProblem:
    net = grid_road_network(7, 5, spacing_km=0.25, rng=np.random.default_rng(3))
    return build_problem(net, seed_n=5, depth=2, n_tasks=12, rng=np.random.default_rng(1))


@pytest.mark.parametrize("eps", [1.0, 4.0])
@pytest.mark.parametrize("name", list(CALIBRATED_METHODS))
def test_calibrated_methods_are_exactly_private_and_err_less(
    problem: GeoProblem, name: str, eps: float
) -> None:
    """Private at eps over every pair (an independent all-pairs check), built at a larger nominal budget
    than eps, and never worse than the family's own mechanism at eps."""
    mech = calibrated_method(problem, eps, name)
    dist = np.linalg.norm(problem.targets_km[:, None] - problem.targets_km[None], axis=2)
    assert mech.method == name and mech.eps == eps
    assert mdp_violation(mech.matrix, dist, eps) <= 1e-9
    assert mech.info["nominal_eps"] >= eps and mech.info["actual_eps"] <= eps
    # the exact eps of what is released (audit: EM + remap's was its EM build's, before the remap)
    assert mech.info["actual_eps"] == pytest.approx(
        brute_actual_eps(mech.matrix, problem.targets_km), rel=1e-9
    )
    if name == "tree_cal":  # the released matrix is the build at the nominal budget itself
        np.testing.assert_array_equal(mech.matrix, tree_extension(problem, mech.info["nominal_eps"]).matrix)
    family = compare_methods(problem, eps, methods=(CALIBRATED_METHODS[name],), verify_samples=100)
    assert mech.utility_km(problem) <= family.utility_km[CALIBRATED_METHODS[name]] * (1 + 1e-12)
    assert np.allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-12)


def test_search_stops_within_tol_of_eps(problem: GeoProblem) -> None:
    """Enough builds reach the budget within ``tol``; the nominal budget grows with the builds allowed."""
    eps = 2.0
    close = calibrated_method(problem, eps, "tree_cal")
    assert close.info["actual_eps"] >= 0.99 * eps or close.info["builds"] == 5
    one = calibrated_mechanism(problem, eps, lambda e: tree_extension(problem, e), method="x", max_builds=1)
    assert one.info["nominal_eps"] == eps and one.info["builds"] == 1  # the family's own mechanism
    assert one.info["nominal_eps"] <= close.info["nominal_eps"]


@pytest.mark.parametrize(("first", "power", "builds"), [(0.5, 1.0, 2), (0.56, 1.15, 3), (0.9, 1.3, 3)])
def test_the_search_follows_a_power_law_in_few_builds(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch, first: float, power: float, builds: int
) -> None:
    """With actual/eps = first * scale^power (the shape measured: the tree's power 1.1-1.2), the search
    reaches [1 - tol, 1] in ``builds``: proportional from the first build, then the power law through the
    bracket (the search's logic alone: the scan and the final check are stubbed)."""
    eps, nominal = 1.0, []

    def build(e: float) -> object:
        nominal.append(e)
        return exponential_geo(problem, e)

    monkeypatch.setattr(calibrate_module, "actual_eps", lambda m, t: first * (nominal[-1] / eps) ** power)
    monkeypatch.setattr(calibrate_module, "mdp_violation", lambda *args: -1.0)
    mech = calibrated_mechanism(problem, eps, build, method="x", tol=0.01)  # type: ignore[arg-type]
    assert mech.info["builds"] == builds == len(nominal)
    assert 0.99 * eps <= mech.info["actual_eps"] <= eps
    assert mech.info["nominal_eps"] == pytest.approx((mech.info["actual_eps"] / first) ** (1 / power))


def test_a_seed_lp_solved_before_serves_the_first_build(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the tree's seed LP at eps, the calibrated tree solves one seed LP fewer, with the same result."""
    solved: list[float] = []
    real = extension_module.tree_seed

    def counted(problem: GeoProblem, eps: float, **kw: object) -> object:
        solved.append(eps)
        return real(problem, eps, **kw)  # type: ignore[arg-type]

    seed = tree_seed(problem, 2.0)
    monkeypatch.setattr(extension_module, "tree_seed", counted)
    alone = calibrated_method(problem, 2.0, "tree_cal")
    assert len(solved) == alone.info["builds"] and solved[0] == 2.0
    solved.clear()
    given = calibrated_method(problem, 2.0, "tree_cal", seed=seed)
    assert len(solved) == given.info["builds"] - 1 and 2.0 not in solved
    np.testing.assert_allclose(given.matrix, alone.matrix, rtol=0, atol=1e-9)


def test_a_family_whose_proof_fails_is_refused(problem: GeoProblem) -> None:
    """A 'family' that is not private at its own nominal budget: nothing is returned."""

    def too_sharp(nominal: float) -> object:
        return exponential_geo(problem, 3 * nominal)  # EM at 3 eps: about 2.4 eps-mDP here

    with pytest.raises(DataError, match="at ε itself is not ε-mDP"):
        calibrated_mechanism(problem, 1.0, too_sharp, method="bad")  # type: ignore[arg-type]


def test_a_result_that_fails_the_all_pairs_check_is_never_returned(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search's accepted build is checked again by mdp_violation: an excess there raises."""
    monkeypatch.setattr(calibrate_module, "mdp_violation", lambda *args: 1e-6)
    with pytest.raises(DataError, match="fails the all-pairs check"):
        calibrated_method(problem, 1.0, "em_remap_cal")


def test_large_maps_are_checked_on_every_pair_by_verify_geo(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the n x n distances' size the final check is verify_geo's on every pair: the same verdict as
    mdp_violation (an excess raises there too), without the n^2 matrix."""
    monkeypatch.setattr(calibrate_module, "_MDP_VIOLATION_TARGETS", 5)
    monkeypatch.setattr(calibrate_module, "mdp_violation", lambda *args: pytest.fail("not on large maps"))
    seen = []
    real = calibrate_module.verify_geo

    def spy(mech: GeoMechanism, **kw: object) -> object:
        seen.append(kw)
        return real(mech, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(calibrate_module, "verify_geo", spy)
    mech = calibrated_method(problem, 1.0, "tree_cal")
    assert seen == [{"exhaustive": True}]
    assert mdp_violation(mech.matrix, cdist(mech.targets_km, mech.targets_km), 1.0) <= 1e-9
    failing = lambda *a, **k: dataclasses.replace(real(*a, **k), max_excess=1e-6)  # noqa: E731
    monkeypatch.setattr(calibrate_module, "verify_geo", failing)
    with pytest.raises(DataError, match="fails the all-pairs check"):
        calibrated_method(problem, 1.0, "tree_cal")


def test_bad_arguments_are_named(problem: GeoProblem) -> None:
    build = lambda e: exponential_geo(problem, e)  # noqa: E731
    with pytest.raises(DataError, match="tol must be in"):
        calibrated_mechanism(problem, 1.0, build, method="x", tol=0.0)
    with pytest.raises(DataError, match="max_builds must be a positive integer"):
        calibrated_mechanism(problem, 1.0, build, method="x", max_builds=0)
    with pytest.raises(DataError, match="unknown calibrated method"):
        calibrated_method(problem, 1.0, "tree")
    too_many = CALIBRATE_MAX_TARGETS + 1
    big = dataclasses.replace(
        problem, grid=dataclasses.replace(problem.grid, fine_ij=np.zeros((too_many, 2), int))
    )
    with pytest.raises(DataError, match=f"checks every pair of targets: {too_many:,} targets"):
        calibrated_mechanism(big, 1.0, build, method="x")


def test_a_calibrated_tree_worse_than_the_calibrated_em_remap_is_listed(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``worse_than_em_remap`` holds the calibrated tree to the calibrated EM + remap, never hidden: a
    'calibrated tree' that is EM at a tenth of the budget (private, and worse) is listed."""
    real = calibrate_module.calibrated_method

    def weak_tree(problem: GeoProblem, eps: float, name: str, **kw: object) -> object:
        if name == "tree_cal":
            return dataclasses.replace(exponential_geo(problem, eps / 10), method=name)
        return real(problem, eps, name)

    methods = ("tree", "em_remap", *CALIBRATED_METHODS)
    honest = compare_methods(problem, 4.0, methods=methods, verify_samples=100)
    assert "tree_cal" not in honest.worse_than_em_remap  # the real one is better here
    monkeypatch.setattr(compare_module, "calibrated_method", weak_tree)
    comp = compare_methods(problem, 4.0, methods=methods, verify_samples=100)
    assert comp.utility_km["tree_cal"] > comp.utility_km["em_remap_cal"]
    assert "tree_cal" in comp.worse_than_em_remap
    assert ("tree" in comp.worse_than_em_remap) == (comp.utility_km["tree"] > comp.utility_km["em_remap"])


def test_compare_methods_reports_a_map_too_large_as_failed(
    problem: GeoProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibrate_module, "CALIBRATE_MAX_TARGETS", 10)
    comp = compare_methods(problem, 1.0, methods=("em_remap", "em_remap_cal"), verify_samples=100)
    assert "em_remap_cal" not in comp.mechanisms and "above 10" in comp.failed["em_remap_cal"]
    assert "em_remap" in comp.mechanisms


def test_exports_record_the_calibration(problem: GeoProblem) -> None:
    """The .npz / GeoJSON metadata say the nominal budget and the exact eps; other methods say None."""
    net = grid_road_network(7, 5, spacing_km=0.25, rng=np.random.default_rng(3))
    mech = calibrated_method(problem, 1.0, "em_remap_cal")
    said = mechanism_metadata(mech, net)["calibration"]
    assert said == {
        "nominal_eps_per_km": mech.info["nominal_eps"],
        "actual_eps_per_km": pytest.approx(actual_eps(mech.matrix, problem.targets_km)),  # after the remap
    }
    assert said["actual_eps_per_km"] <= 1.0 < said["nominal_eps_per_km"]
    assert mechanism_metadata(exponential_geo(problem, 1.0), net)["calibration"] is None
