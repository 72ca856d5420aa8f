"""verify_geo: the check on every pair is exact (a triple-by-triple loop agrees), picked where affordable,
and says which pairs it covered; the page's note and the CLI say it too."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdp_core.geo.verify as gverify
from mdp_core.geo import GeoMechanism, compare_methods, run_bench, tree_extension, verify_geo
from mdp_core.geo.calibrate import actual_eps


def brute_force(matrix: np.ndarray, pts: np.ndarray, eps: float, tol: float = 1e-9) -> tuple[float, float]:
    """Largest excess and violation ratio over every pair a < b and output, one triple at a time."""
    n, m = matrix.shape
    worst, bad = -np.inf, 0
    for a in range(n):
        for b in range(a + 1, n):
            d = float(np.hypot(*(pts[a] - pts[b])))
            for y in range(m):
                p, q = matrix[a, y], matrix[b, y]
                diff = 0.0 if p == q == 0 else (np.inf if p == 0 or q == 0 else abs(np.log(p) - np.log(q)))
                worst, bad = max(worst, diff - eps * d), bad + (diff - eps * d > tol)
    return worst, bad / (n * (n - 1) // 2 * m)


def mechanism(draw: st.DrawFn, n: int, m: int, eps: float) -> GeoMechanism:
    """A random row-stochastic mechanism: some entries zero, one output unused, some targets coincident."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pts = rng.uniform(0, 2, size=(n, 2))
    if draw(st.booleans()):
        pts[1] = pts[0]
    logits = np.exp(rng.normal(0, draw(st.floats(0.01, 3.0)), size=(n, m)))
    logits[:, 0] = 0.0  # an output nobody reports
    if draw(st.booleans()):
        logits[rng.random((n, m)) < 0.1] = 0.0
        logits[:, 1] = np.maximum(logits[:, 1], 1e-3)  # every row keeps some mass
    matrix = logits / logits.sum(axis=1, keepdims=True)
    return GeoMechanism(pts, pts[:m] if m <= n else np.zeros((m, 2)), matrix, eps, 0.0)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(2, 14), st.integers(2, 5), st.floats(0.05, 5.0))
def test_every_pair_equals_a_triple_by_triple_loop(data: st.DataObject, n: int, m: int, eps: float) -> None:
    mech = mechanism(data.draw, n, m, eps)
    check = verify_geo(mech, exhaustive=True)
    worst, ratio = brute_force(mech.matrix, mech.targets_km, eps)
    assert check.exhaustive and check.pairs == n * (n - 1) // 2
    assert check.neighbour_pairs == check.sampled_pairs == 0
    assert (
        check.max_excess == pytest.approx(worst, rel=1e-12, abs=1e-12) or check.max_excess == worst == np.inf
    )
    assert check.violation_ratio == pytest.approx(ratio, rel=1e-12, abs=0)


def test_every_pair_over_many_blocks_on_every_core() -> None:
    """700 targets: three blocks of rows shared among the threads; a planted violation is found and counted
    exactly, and actual_eps (the same scan) is the least private budget."""
    rng = np.random.default_rng(5)
    pts = rng.uniform(0, 3, size=(700, 2))
    outputs = rng.uniform(0, 3, size=(4, 2))
    logits = -1.0 * np.linalg.norm(pts[:, None] - outputs[None], axis=2)  # 1-Lipschitz in each output
    matrix = np.exp(logits)
    matrix /= matrix.sum(axis=1, keepdims=True)  # normalising at most doubles it: 2-mDP
    private = GeoMechanism(pts, outputs, matrix, 2.0, 0.0)
    assert verify_geo(private).holds and verify_geo(private).exhaustive
    planted = matrix.copy()
    planted[650] = np.roll(planted[650], 1)  # a late target's row, against its near neighbours
    bad = GeoMechanism(pts, outputs, planted, 2.0, 0.0)
    check = verify_geo(bad)
    a, b = np.triu_indices(700, 1)
    with np.errstate(divide="ignore"):
        logs = np.log(planted)
    excess = np.abs(logs[a] - logs[b]) - 2.0 * np.linalg.norm(pts[a] - pts[b], axis=1)[:, None]
    assert check.max_excess == pytest.approx(excess.max(), rel=1e-12)
    assert check.violation_ratio == np.count_nonzero(excess > 1e-9) / excess.size > 0
    steepest = np.max(np.abs(logs[a] - logs[b]) / np.linalg.norm(pts[a] - pts[b], axis=1)[:, None])
    assert actual_eps(planted, pts) == pytest.approx(steepest, rel=1e-12)


def test_every_pair_where_affordable_else_neighbours_and_samples(
    small_problem, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    mech = tree_extension(small_problem, 1.0)
    n = len(mech.targets_km)
    check = verify_geo(mech, samples=5_000)
    assert check.exhaustive and check.pairs == n * (n - 1) // 2 and check.holds
    work = n * (n - 1) // 2 * int(mech.matrix.any(axis=0).sum())  # pairs x outputs in use
    monkeypatch.setattr(gverify, "EXHAUSTIVE_WORK", work)
    assert verify_geo(mech, samples=5_000).exhaustive
    monkeypatch.setattr(gverify, "EXHAUSTIVE_WORK", work - 1)
    sampled = verify_geo(mech, samples=5_000)
    assert not sampled.exhaustive and sampled.sampled_pairs == 5_000 and sampled.neighbour_pairs > 0
    assert sampled.max_excess <= check.max_excess  # a subset of the pairs
    assert verify_geo(mech, samples=5_000, exhaustive=True).exhaustive  # asked for: every pair regardless


def test_comparison_and_cli_say_which_pairs_were_checked(
    small_problem, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    comp = compare_methods(small_problem, 1.0, methods=("tree", "em"), bound=False, verify_samples=2_000)
    assert comp.all_pairs == {"tree": True, "em": True}
    record, _ = run_bench("default", depth=0, eps=1.0, bound=False, verify_samples=2_000, methods=("tree",))
    assert record["verified_all_pairs"] == {"tree": True}
    kw = {"methods": ("tree",), "bound": False, "verify_samples": 2_000}
    assert compare_methods(small_problem, 1.0, verify_max_work=0, **kw).all_pairs == {"tree": False}
    kw["methods"] = ("tree", "tree_cal")  # calibrated: checked on every pair by the calibration itself
    assert compare_methods(small_problem, 1.0, verify_max_work=0, **kw).all_pairs == {
        "tree": False,
        "tree_cal": True,
    }
    monkeypatch.setattr(gverify, "EXHAUSTIVE_WORK", 0)
    comp = compare_methods(small_problem, 1.0, methods=("tree",), bound=False, verify_samples=2_000)
    assert comp.all_pairs == {"tree": False}
    from mdp_core.geo.__main__ import main

    assert (
        main(
            ["bench", "--depth", "0", "--eps", "1", "--samples", "1000", "--no-bound", "--methods", "tree,em"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("(sampled pairs)") == 2 and "(every pair)" not in out
    assert json.loads(json.dumps(record)) == record  # the record stays JSON


def test_the_check_of_every_pair_reports_and_can_be_stopped() -> None:
    """Progress after every block (from whichever core scanned it); a raise from it stops the check."""
    rng = np.random.default_rng(2)
    pts = rng.uniform(0, 3, size=(900, 2))
    matrix = rng.dirichlet(np.ones(4), size=900)
    mech = GeoMechanism(pts, pts[:4], matrix, 1.0, 0.0)
    seen: list[float] = []
    verify_geo(mech, exhaustive=True, progress=lambda fraction, message: seen.append(fraction))
    assert len(seen) == 4 and max(seen) == 1.0 and all(0 < f <= 1 for f in seen)  # 900 targets: 4 blocks

    def stop(fraction: float, message: str) -> None:
        raise RuntimeError(f"stopped at {message}")

    with pytest.raises(RuntimeError, match="stopped at checking every pair: block 1 of"):
        verify_geo(mech, exhaustive=True, progress=stop)


def _randomised_response(log_ratio: float) -> GeoMechanism:
    """Two targets 1 km apart reporting their own place with odds e^log_ratio."""
    a = np.exp(log_ratio) / (1 + np.exp(log_ratio))
    points = np.array([[0.0, 0.0], [1.0, 0.0]])
    return GeoMechanism(points, points.copy(), np.array([[a, 1 - a], [1 - a, a]]), 1.0, 0.0)


@pytest.mark.parametrize("exhaustive", [True, False])
def test_both_checks_see_a_planted_excess(exhaustive: bool) -> None:
    """(mutation audit, stop 67) the sampled check at 2 eps, or a verdict threshold of 1e-3, passed every
    test: none handed the checker a mechanism that is not private."""
    check = verify_geo(_randomised_response(1.5), exhaustive=exhaustive, samples=50)  # eps 1/km, 1 km
    assert check.max_excess == pytest.approx(0.5, rel=1e-12) and not check.holds
    tiny = verify_geo(_randomised_response(1.0 + 1e-6), exhaustive=exhaustive, samples=50)
    assert tiny.max_excess == pytest.approx(1e-6, rel=1e-6) and not tiny.holds
