"""coset_lower_bound: the prior-weighted sum of the cosets' spanner relaxations (checked against
independent LPs on the same rows), never above the whole problem's optimum nor a verified mechanism."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_geo_bounds import full_lp, tiny_problem  # tests/geo is on sys.path (rootdir conftest layout)
from threadpoolctl import threadpool_info

from mdp_core import _cores
from mdp_core._validation import Progress, part
from mdp_core.errors import DataError
from mdp_core.geo import _parts as parts_module
from mdp_core.geo import (
    auto_lower_bound,
    bounds,
    compare_methods,
    coset_lower_bound,
    geo_lower_bound,
    grid_road_network,
    run_bench,
    spanner_pairs,
    tree_extension,
)
from mdp_core.geo import cosets as cosets_module
from mdp_core.geo.aggregation import coarser_problem
from mdp_core.geo.bounds import GeoBound
from mdp_core.geo.cosets import DILATION, coset_step, cosets, fitting_step
from mdp_core.geo.utility import GeoProblem
from mdp_core.mechanisms import mdp_violation

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing model's choices as on a quiet machine, whatever else the test run does beside them."""
    monkeypatch.setattr(cosets_module, "machine_slowdown", lambda: 1.0)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_bound_is_the_weighted_sum_of_the_cosets_spanner_relaxations(eps: float) -> None:
    problem = tiny_problem(4, 4, seed=2, depth=2, seed_n=2)
    parts = cosets(problem, 2)
    assert len(parts) == 4
    assert sum(len(sub.prior) for _, sub in parts) == len(problem.prior)
    assert sum(mass for mass, _ in parts) == pytest.approx(1.0, abs=1e-12)
    # independent reference: scipy's HiGHS on each coset's spanner rows, both directions
    reference = sum(
        mass * full_lp(sub, eps, spanner_pairs(sub.targets_km, DILATION)[0]) for mass, sub in parts
    )
    bound = coset_lower_bound(problem, eps, step=2, time_limit=30)
    assert not bound.exact and f"4 cosets (2 x 2) of {DILATION}-spanner relaxation" in bound.method
    assert bound.value <= reference + 1e-12  # certified: never above the relaxations' optima
    # each small coset's solve stops within its duality gap of the optimum
    assert bound.value == pytest.approx(reference, rel=cosets_module.COSET_GAP)
    assert bound.value <= full_lp(problem, eps) + 1e-9  # never above the whole problem's optimum


def test_default_step_keeps_every_coset_within_the_target_cap() -> None:
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    n = problem.grid.n_targets
    assert coset_step(problem, max_targets=n) == 1
    for cap in (n // 2, n // 5, 3):
        step = coset_step(problem, max_targets=cap)
        assert max(len(sub.prior) for _, sub in cosets(problem, step)) <= cap
        assert max(len(sub.prior) for _, sub in cosets(problem, step - 1)) > cap  # the smallest such step
    with pytest.raises(DataError, match="max_targets must be a positive integer"):
        coset_step(problem, max_targets=0)


def _seconds_for(problem: GeoProblem, step: int) -> float:
    """Wall seconds that ``step``'s cosets need on this process's cores (the documented model)."""
    sizes = np.bincount(np.ravel_multi_index((problem.grid.fine_ij % step).T, (step, step)))
    size = sizes.max() / 1000.0
    per_coset = cosets_module.COSET_SECONDS * problem.cost.shape[1] * size * (size + 0.02)
    return per_coset * np.count_nonzero(sizes) / cosets_module.worker_count()


def _converging(problem: GeoProblem, step: int, coefficients: tuple[float, float]) -> float:
    """Wall seconds in which step's cosets converge (the documented model, from the cosets' sizes)."""
    a, b = coefficients
    sizes = np.array([len(sub.prior) for _, sub in cosets(problem, step)]) / 1000.0
    thread_seconds = problem.cost.shape[1] * float(np.sum(a * sizes * (sizes + 0.02) + b * sizes**3))
    return thread_seconds / cosets_module.worker_count()


def _scaled_model(monkeypatch: pytest.MonkeyPatch, problem: GeoProblem, step: int) -> tuple[float, float]:
    """The converge model scaled so that step's cosets need 20 s: every solve then converges long before
    its deadline."""
    scale = 20.0 / _converging(problem, step, cosets_module.CONVERGED_SECONDS)
    model = (cosets_module.CONVERGED_SECONDS[0] * scale, cosets_module.CONVERGED_SECONDS[1] * scale)
    monkeypatch.setattr(cosets_module, "CONVERGED_SECONDS", model)
    return model


def _mid_size(monkeypatch: pytest.MonkeyPatch, problem: GeoProblem) -> int:
    """Make ``problem`` a grid never aggregated but larger than one block; the step of its densest cosets."""
    n = problem.grid.n_targets
    for threshold in ("AGGREGATE_ABOVE", "AGGREGATE_ABOVE_SHORT"):
        monkeypatch.setattr(bounds, threshold, n)
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", n // 2)
    monkeypatch.setattr(cosets_module, "COSET_TARGETS", n // 9)
    return coset_step(problem, max_targets=n // 2)


def test_a_grid_too_small_to_aggregate_takes_cosets_that_converge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the aggregation threshold but above one block, cosets that converge in the time are taken
    (geo_lower_bound's PDLP on all targets would not converge); otherwise geo_lower_bound, as on one block."""
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    n = problem.grid.n_targets
    dense = _mid_size(monkeypatch, problem)
    model = _scaled_model(monkeypatch, problem, dense)
    limit = 1.01 * _converging(problem, dense, model)
    chosen = auto_lower_bound(problem, 1.0, time_limit=limit)
    expected = coset_lower_bound(problem, 1.0, step=dense, time_limit=limit)
    assert f"({dense} x {dense})" in chosen.method
    assert chosen.value == pytest.approx(expected.value, rel=1e-9)
    assert chosen.value <= tree_extension(problem, 1.0).utility_km(problem) + 1e-12  # a verified mechanism
    last = coset_step(problem)
    short = 0.99 * min(_converging(problem, step, model) for step in range(dense, last + 1))
    assert cosets_module.converging_step(problem, short) is None
    assert "cosets" not in auto_lower_bound(problem, 1.0, time_limit=short).method
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", n)  # one block: geo_lower_bound (can be exact)
    assert "cosets" not in auto_lower_bound(problem, 1.0, time_limit=limit).method


def test_one_block_takes_the_exact_optimum_and_a_stop_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """On one block the bound is the exact optimum's (row generation over the block interior point): exact
    when its bracket closes in the time, its certificate otherwise; a stop reaches its solves."""
    problem = tiny_problem(4, 4, seed=5, depth=2, seed_n=2)
    assert problem.grid.n_targets <= cosets_module.BLOCK_TARGETS  # one block, never aggregated
    optimum = full_lp(problem, 1.0)
    bound = auto_lower_bound(problem, 1.0, time_limit=30)
    assert bound.exact and bound.method.startswith("exact optimum by row generation")
    assert bound.value == pytest.approx(optimum, rel=1e-5) and bound.value <= optimum + 1e-12
    assert bound.value >= (1 - 1e-5) * geo_lower_bound(problem, 1.0, time_limit=30).value  # exact both
    for k in range(problem.grid.n_targets):  # one target: no pair to protect, its cheapest output
        one = problem.restricted(np.array([k]))
        assert auto_lower_bound(one, 1.0, time_limit=5).value == pytest.approx(one.cost.min(), abs=1e-9)
    reports: list[tuple[float, str]] = []
    auto_lower_bound(problem, 1.0, time_limit=30, progress=lambda f, m: reports.append((f, m)))
    fractions = [fraction for fraction, _ in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0  # the bar never goes back
    assert any(m.startswith("exact optimum: round 1, ") and m.endswith(" s") for _, m in reports)  # ticks
    calls: list[str] = []

    def stop_in_a_solve(fraction: float, message: str) -> None:
        calls.append(message)
        if len(calls) == 3:  # neither of the round reports: an interior-point iteration's
            raise StopError(message)

    with pytest.raises(StopError, match="exact optimum: round 1"):
        auto_lower_bound(problem, 1.0, time_limit=30, progress=stop_in_a_solve)
    assert len(calls) == 3


def test_minutes_above_one_block_try_the_exact_optimum_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """From OPTIMUM_SECONDS on, a grid above one block (not aggregated) tries the exact optimum in the time
    the converging cosets leave: its bound when exact, else the tighter of its certificate and the cosets'."""
    problem = tiny_problem(4, 4, seed=5, depth=2, seed_n=2)
    dense = _mid_size(monkeypatch, problem)
    _scaled_model(monkeypatch, problem, dense)  # the dense cosets converge in 20 s
    monkeypatch.setattr(cosets_module, "OPTIMUM_SECONDS", 30.0)
    found: list = []
    exact = auto_lower_bound(problem, 1.0, time_limit=30, on_optimum=found.append)
    assert exact.exact and exact.method.startswith("exact optimum by row generation")
    assert exact.value == pytest.approx(full_lp(problem, 1.0), rel=1e-5)
    assert len(found) == 1 and found[0].method == "optimal"  # the optimum that the bound ran, for a caller
    assert found[0].utility_km(problem) == pytest.approx(exact.value, rel=1e-5)
    assert mdp_violation(found[0].matrix, problem.target_distances_km(), 1.0) <= 1e-9
    alone = auto_lower_bound(problem, 1.0, time_limit=29, on_optimum=found.append)  # the cosets alone
    assert len(found) == 1  # no optimum ran
    assert cosets_module.tries_optimum(problem, 30) and not cosets_module.tries_optimum(problem, 29)
    assert f"({dense} x {dense})" in alone.method and alone.value <= exact.value + 1e-12
    blocks = 8.0 * problem.cost.shape[1] * problem.grid.n_targets**2  # bytes of the optimum's blocks
    monkeypatch.setattr(cosets_module, "OPTIMUM_BLOCK_BYTES", blocks - 1)  # too large for the memory cap
    assert auto_lower_bound(problem, 1.0, time_limit=30).method == alone.method
    assert not cosets_module.tries_optimum(problem, 30)
    monkeypatch.setattr(cosets_module, "OPTIMUM_BLOCK_BYTES", blocks)
    assert cosets_module.tries_optimum(problem, 30)
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", problem.grid.n_targets)  # one block: at any time
    assert cosets_module.tries_optimum(problem, 1.0)
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", problem.grid.n_targets // 2)
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE_SHORT", problem.grid.n_targets - 1)  # aggregated: never
    assert not cosets_module.tries_optimum(problem, 30)
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE_SHORT", problem.grid.n_targets)
    for certificate in (0.5 * alone.value, 2.0 * alone.value):  # an optimum out of time: the tighter
        out_of_time = GeoBound(value=certificate, exact=False, method="stand-in", seconds=1.0, rows=1)
        stand_in = type("StandIn", (), {"info": {"lower_bound": out_of_time}})
        monkeypatch.setattr(cosets_module, "optimal_geo_mechanism", lambda *args, s=stand_in, **options: s)
        chosen = auto_lower_bound(problem, 1.0, time_limit=30)
        assert chosen.value == pytest.approx(max(certificate, alone.value), rel=1e-6)

    def unrepairable(*args: object, **options: object) -> None:
        raise DataError("the optimal LP solution could not be made eps-mDP")

    monkeypatch.setattr(cosets_module, "optimal_geo_mechanism", unrepairable)
    assert auto_lower_bound(problem, 1.0, time_limit=30).value == pytest.approx(alone.value, rel=1e-6)


def test_more_time_takes_the_largest_cosets_that_converge_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    n = problem.grid.n_targets
    for threshold in ("AGGREGATE_ABOVE", "AGGREGATE_ABOVE_SHORT"):  # this grid counts as city scale
        monkeypatch.setattr(bounds, threshold, n - 1)
    monkeypatch.setattr(cosets_module, "COSET_TARGETS", n // 9)
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", n // 2)
    first, dense = coset_step(problem), coset_step(problem, max_targets=n // 2)
    monkeypatch.setattr(cosets_module, "cell_plan", lambda *_: None)  # no cells fit: the cosets, as before
    assert 1 < dense < first - 1

    model = _scaled_model(monkeypatch, problem, dense)
    needs = {step: _converging(problem, step, model) for step in range(dense, first)}
    for step, seconds in needs.items():  # the smallest step whose cosets converge in the time
        expected_step = min(k for k, need in needs.items() if need <= 1.01 * seconds)
        assert fitting_step(problem, 1.0, 1.01 * seconds) == expected_step <= step
    assert needs[dense] > 1.01 * needs[dense + 1]  # larger cosets need more time
    # too little time for any of them: the cosets of coset_step's cap, as before
    assert fitting_step(problem, 1.0, 0.99 * min(needs.values())) == first
    limit = 1.01 * _converging(problem, dense, model)
    chosen = auto_lower_bound(problem, 1.0, time_limit=limit)
    expected = coset_lower_bound(problem, 1.0, step=dense, time_limit=limit)
    assert chosen.method == expected.method and f"({dense} x {dense})" in chosen.method
    assert chosen.value == pytest.approx(expected.value, rel=1e-9)
    assert chosen.value <= tree_extension(problem, 1.0).utility_km(problem) + 1e-12  # a verified mechanism


def test_auto_bound_takes_the_cosets_where_they_get_enough_time(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    n = problem.grid.n_targets
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE", n - 1)  # this grid counts as city scale
    monkeypatch.setattr(cosets_module, "COSET_TARGETS", n // 4)
    monkeypatch.setattr(cosets_module, "COSET_MIN_TARGETS", 1)
    monkeypatch.setattr(cosets_module, "CONVERGED_SECONDS", (np.inf, np.inf))  # no larger coset converges
    monkeypatch.setattr(cosets_module, "cell_plan", lambda *_: None)  # no cells fit: the cosets, as before
    step = fitting_step(problem, 1.0, 60.0)
    assert step == coset_step(problem) > 1
    assert fitting_step(problem, 1.0, 1.01 * _seconds_for(problem, step)) == step  # just enough time
    # just too little: the next steps (smaller cosets) are searched while they are close enough ...
    short = 0.99 * _seconds_for(problem, step)
    wider = next(k for k in range(step + 1, 100) if _seconds_for(problem, k) <= short)
    close = cosets_module.COSET_SPACING / (wider * problem.grid.h_fine)  # the largest eps that allows it
    assert fitting_step(problem, 0.99 * close, short) == wider
    assert fitting_step(problem, 1.01 * close, short) is None  # the steps before it do not fit
    # ... and never beyond that spacing, while the first step is taken at any eps
    far = cosets_module.COSET_SPACING / ((step + 1) * problem.grid.h_fine)
    assert fitting_step(problem, 1.01 * far, short) is None
    assert fitting_step(problem, 100 * far, 1.01 * _seconds_for(problem, step)) == step
    largest = max(len(sub.prior) for _, sub in cosets(problem, wider))
    monkeypatch.setattr(cosets_module, "COSET_MIN_TARGETS", largest + 1)  # nor to cosets too small
    assert fitting_step(problem, 0.99 * close, short) is None
    expected = coset_lower_bound(problem, 1.0, step=step, time_limit=60)
    chosen = auto_lower_bound(problem, 1.0, time_limit=60)
    assert chosen.method == expected.method and "cosets" in chosen.method
    assert chosen.value == pytest.approx(expected.value, rel=1e-9)
    assert geo_lower_bound(problem, 1.0, time_limit=60).method.startswith("aggregated")  # it stays as it was
    monkeypatch.setattr(cosets_module, "COSET_SECONDS", float("inf"))  # no time share is enough
    assert fitting_step(problem, 1.0, 60.0) is None
    assert auto_lower_bound(problem, 1.0, time_limit=60).method.startswith("aggregated")
    monkeypatch.setattr(bounds, "AGGREGATE_ABOVE", n)  # not city scale, and one block: the exact optimum
    small = auto_lower_bound(problem, 1.0, time_limit=60)
    assert small.exact and small.method.startswith("exact optimum by row generation")


def test_a_spent_time_share_still_certifies_a_bound() -> None:
    problem = tiny_problem(4, 4, seed=5, depth=2, seed_n=2)
    rushed = coset_lower_bound(problem, 1.0, step=2, time_limit=1e-9)  # every solve stops at once
    full = coset_lower_bound(problem, 1.0, step=2, time_limit=30)
    assert 0.0 <= rushed.value <= full.value <= full_lp(problem, 1.0) + 1e-9


class StopError(Exception):
    """What a caller raises from its progress to stop a bound (the map page's stop button)."""


def _stop(fraction: float, message: str) -> None:
    raise StopError(message)


def test_a_progress_that_raises_stops_before_the_other_cosets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cosets not started when the caller stops the bound never run."""
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    solved: list[int] = []
    spanner_bound = cosets_module._spanner_bound

    def counted(sub: GeoProblem, *args: object) -> object:
        solved.append(len(sub.prior))
        return spanner_bound(sub, *args)

    monkeypatch.setattr(cosets_module, "_spanner_bound", counted)
    monkeypatch.setattr(parts_module, "worker_count", lambda: 1)
    with pytest.raises(StopError, match="lower bound: "):
        coset_lower_bound(problem, 1.0, step=3, time_limit=30, progress=_stop)
    assert 1 <= len(solved) <= 2  # the first, and perhaps the one the free thread had already taken


def test_a_stop_reaches_the_cosets_in_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coset whose solve would go on (here a stand-in that only reports progress) stops at its next
    report once the caller stops the bound, so a stop does not wait for the cosets' time shares."""
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    outcomes: list[str] = []

    def endless(*args: object, progress: Progress = None, **options: object) -> None:
        try:
            for _ in range(1000):
                assert progress is not None
                progress(0.5, "iterating")
                time.sleep(0.01)
        except BaseException as exc:
            outcomes.append(type(exc).__name__)
            raise
        outcomes.append("ran out")

    monkeypatch.setattr(parts_module, "solve_geo_lp", endless)
    monkeypatch.setattr(parts_module, "REPORT_SECONDS", 0.05)
    start = time.perf_counter()
    with pytest.raises(StopError, match="lower bound: 0 of 9 cosets done"):
        coset_lower_bound(problem, 1.0, step=3, time_limit=30, progress=_stop)
    assert time.perf_counter() - start < 5.0  # the stand-in alone runs 10 s
    assert outcomes and set(outcomes) == {"StoppedError"}  # every coset started was stopped, none ran out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]), step=st.sampled_from([1, 2, 3]))
def test_never_above_a_verified_mechanism(seed: int, eps: float, step: int) -> None:
    problem = tiny_problem(3 + seed % 3, 3, seed=seed % 11, depth=2, seed_n=2)
    bound = coset_lower_bound(problem, eps, step=step, time_limit=20)
    assert 0.0 < bound.value <= tree_extension(problem, eps).utility_km(problem) + 1e-12


def test_cosets_on_threads_report_progress_from_the_caller_and_restore_blas_threads() -> None:
    """The cosets run on a thread per core; a UI progress callback needs the caller's thread, and the BLAS
    limit set for them must not outlive the bound (nested limits in threads would each restore another's)."""
    problem = tiny_problem(4, 4, seed=5, depth=2, seed_n=2)
    blas_before = [pool["num_threads"] for pool in threadpool_info()]
    calls: list[tuple[float, bool]] = []
    bound = coset_lower_bound(
        problem,
        1.0,
        step=2,
        time_limit=30,
        progress=lambda done, _: calls.append((done, threading.current_thread() is threading.main_thread())),
    )
    assert [pool["num_threads"] for pool in threadpool_info()] == blas_before
    assert calls[-1][0] == 1.0 and all(main for _, main in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert 0.0 < bound.value <= full_lp(problem, 1.0) + 1e-9


@pytest.mark.parametrize("cores", [1, 2])
def test_cosets_on_several_threads_keep_their_block_work_each_on_its_own(
    monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    """With a coset per core, a coset's inversions and element-wise work stay on its thread (split over the
    shared pool, they only queued behind each other); alone, a coset takes every core."""
    seen: list[bool] = []
    spanner_bound = cosets_module._spanner_bound

    def spy(*args: object) -> GeoBound:
        seen.append(_cores._INLINE.get())
        return spanner_bound(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(cosets_module, "_spanner_bound", spy)
    monkeypatch.setattr(parts_module, "worker_count", lambda: cores)
    coset_lower_bound(tiny_problem(4, 4, seed=5, depth=2, seed_n=2), 1.0, step=2, time_limit=30)
    assert seen == [cores > 1] * 4
    assert not _cores._INLINE.get()  # the caller's own work is split as before


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
    assert all(gap >= -1e-9 for gap in record["gap"].values())
    # a gap only for the methods the check found private: the bound says nothing of LP-A
    assert set(record["gap"]) == {k for k in record["utility_km"] if comp.private(k)}
    assert not comp.private("lp_coarse") and "lp_coarse" not in record["gap"]


def test_bench_picks_the_coset_step_on_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mdp_core.geo.cosets.COSET_TARGETS", 20)  # 75 targets: 3 x 3 cosets
    net = grid_road_network(5, 5, spacing_km=0.3, rng=np.random.default_rng(4))
    record, comp = run_bench(
        net,
        depth=3,
        eps=1.0,
        seed_n=2,
        n_tasks=6,
        verify_samples=2_000,
        bound_cosets="auto",
        bound_time_limit=30,
    )
    problem = comp.problem
    assert comp.bound is not None and problem is not None
    step = coset_step(problem)
    assert step > 1 and step == coset_step(problem, max_targets=20)
    expected = coset_lower_bound(problem, 1.0, step=step, time_limit=30)
    assert f"({step} x {step})" in record["bound_method"]
    assert record["lower_bound"] == pytest.approx(expected.value, rel=1e-6)  # small cosets: converged
    assert all(gap >= -1e-9 for gap in record["gap"].values())


@pytest.mark.parametrize("bad", ["four", -1, 1.5])
def test_bad_coset_choice_is_refused(bad: object) -> None:
    problem = tiny_problem(3, 3, seed=0)
    with pytest.raises(DataError, match="bound_cosets must be 'auto', 'coarser' or a non-negative integer"):
        compare_methods(problem, 1.0, methods=("em",), bound=True, bound_cosets=bad)  # type: ignore[arg-type]


def test_cli_refuses_a_bad_coset_choice() -> None:
    cmd = [sys.executable, "-m", "mdp_core.geo", "bench", "--bound-cosets", "some", "--json"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "expected 'auto', 'coarser' or a non-negative integer" in run.stderr


def test_auto_bound_refuses_bad_input_before_choosing() -> None:
    problem = tiny_problem(3, 3, seed=0)
    with pytest.raises(DataError, match="time_limit must be positive"):
        auto_lower_bound(problem, 1.0, time_limit=0)
    with pytest.raises(DataError, match="eps"):
        auto_lower_bound(problem, -1.0)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_coarser_problem_bounds_every_private_mechanism_from_below(eps: float) -> None:
    """The aggregation inequality itself, on verified mechanisms: their cost on the fine targets is at
    least the coarser problem's cost of their rows at the coarser targets, plus the constant."""
    problem = tiny_problem(5, 4, seed=6, depth=2, seed_n=2)
    coarse, constant, margin = coarser_problem(problem, eps)
    fine = problem.grid.fine_ij
    reps = np.flatnonzero((fine % 2 == 0).all(axis=1))
    assert len(coarse.prior) == len(reps) < len(problem.prior) and coarse.grid.depth == 1
    np.testing.assert_allclose(coarse.targets_km, problem.targets_km[reps], atol=1e-12)
    assert coarse.prior.sum() == pytest.approx(1.0, abs=1e-12) and coarse.cost.min() >= 0.0
    assert 0.0 < margin < 1e-9
    uniform = np.full(problem.cost.shape, 1.0 / problem.cost.shape[1])
    for mechanism in (tree_extension(problem, eps).matrix, uniform):
        fine_cost = float(np.sum(problem.cost * mechanism))
        assert float(np.sum(coarse.cost * mechanism[reps])) + constant <= fine_cost + 1e-12
    assert coarser_problem(tiny_problem(4, 4, seed=6, depth=0, seed_n=2), eps) is None  # no coarser grid


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_aggregated_coset_bound_is_the_coarser_problems_plus_its_constant(eps: float) -> None:
    problem = tiny_problem(5, 4, seed=6, depth=2, seed_n=2)
    coarse, constant, margin = coarser_problem(problem, eps)
    parts = cosets(coarse, 2)
    # independent reference: scipy's HiGHS on each coset's spanner rows of the coarser problem
    reference = (
        constant
        - margin
        + sum(mass * full_lp(sub, eps, spanner_pairs(sub.targets_km, DILATION)[0]) for mass, sub in parts)
    )
    bound = coset_lower_bound(problem, eps, step=2, time_limit=30, aggregate=True)
    assert f"aggregated onto the {len(coarse.prior)} targets of the coarser grid" in bound.method
    assert bound.value <= reference + 1e-12
    assert bound.value == pytest.approx(reference, rel=cosets_module.COSET_GAP)
    assert bound.value <= full_lp(problem, eps) + 1e-9  # never above the fine problem's optimum
    with pytest.raises(DataError, match="aggregate needs a grid of depth >= 1"):
        coset_lower_bound(tiny_problem(4, 4, seed=6, depth=0, seed_n=2), eps, aggregate=True)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.3, 1.0, 3.0]))
def test_aggregated_coset_bound_never_above_a_verified_mechanism(seed: int, eps: float) -> None:
    problem = tiny_problem(3 + seed % 3, 4, seed=seed % 11, depth=2, seed_n=2)
    bound = coset_lower_bound(problem, eps, step=1 + seed % 2, time_limit=20, aggregate=True)
    assert 0.0 <= bound.value <= tree_extension(problem, eps).utility_km(problem) + 1e-12


def test_comparison_and_cli_take_the_coarser_cosets_on_request() -> None:
    net = grid_road_network(5, 4, spacing_km=0.3, rng=np.random.default_rng(6))
    record, comp = run_bench(
        net, depth=2, eps=1.0, seed_n=2, n_tasks=6, verify_samples=2_000, bound_cosets="coarser"
    )
    problem = comp.problem
    assert comp.bound is not None and problem is not None
    expected = coset_lower_bound(problem, 1.0, time_limit=60, aggregate=True)
    assert (
        "targets of the coarser grid" in record["bound_method"] and record["bound_method"] == expected.method
    )
    assert record["lower_bound"] == pytest.approx(expected.value, abs=1e-6)  # the record rounds to 1e-6
    assert all(gap >= -1e-9 for gap in record["gap"].values())
    assert "coarser" not in auto_lower_bound(problem, 1.0).method  # never the default


def test_a_sub_task_fills_its_share_of_the_bar_and_a_stop_reaches_it() -> None:
    calls: list[tuple[float, str]] = []
    share = part(lambda f, m: calls.append((f, m)), 0.25, 0.75)
    assert share is not None and part(None, 0.0, 1.0) is None
    for fraction in (0.0, 0.5, 1.0, 2.0):
        share(fraction, f"at {fraction}")
    assert calls == [(0.25, "at 0.0"), (0.5, "at 0.5"), (0.75, "at 1.0"), (1.0, "at 2.0")]  # clipped to 1

    def stop(fraction: float, message: str) -> None:
        raise KeyboardInterrupt("stop")

    stopping = part(stop, 0.0, 0.5)
    assert stopping is not None
    with pytest.raises(KeyboardInterrupt, match="stop"):
        stopping(0.1, "x")


def test_a_busy_machine_gets_the_cosets_that_fit_its_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Privacy-audit load (stop 62): on a machine 3.4x slower than quiet the model still chose the quiet
    machine's cosets, and their certificates collapsed (0.3354 km against 0.3614 for the next step)."""
    problem = tiny_problem(5, 5, seed=3, depth=3, seed_n=2)
    n = problem.grid.n_targets
    for threshold in ("AGGREGATE_ABOVE", "AGGREGATE_ABOVE_SHORT"):  # this grid counts as city scale
        monkeypatch.setattr(bounds, threshold, n - 1)
    monkeypatch.setattr(cosets_module, "COSET_TARGETS", n // 4)
    monkeypatch.setattr(cosets_module, "COSET_MIN_TARGETS", 1)
    monkeypatch.setattr(cosets_module, "CONVERGED_SECONDS", (np.inf, np.inf))
    monkeypatch.setattr(cosets_module, "COSET_SECONDS", 300 * cosets_module.COSET_SECONDS)  # seconds, not ms
    monkeypatch.setattr(cosets_module, "cell_plan", lambda *_: None)  # no cells fit: the cosets, as before
    step = coset_step(problem)
    limit = 1.01 * _seconds_for(problem, step)  # just enough for these cosets on a quiet machine
    needs = {k: _seconds_for(problem, k) for k in range(step + 1, step + 8)}
    slowdown = 0.999 * limit / min(needs.values())  # the machine is this much slower: ...
    wider = min(k for k, need in needs.items() if need <= limit / slowdown)  # ... only these cosets fit
    assert slowdown > 1.1
    eps = 0.99 * cosets_module.COSET_SPACING / (wider * problem.grid.h_fine)
    assert fitting_step(problem, eps, limit) == step
    assert fitting_step(problem, eps, limit, slowdown=slowdown) == wider
    # nothing fits: a quiet machine aggregates, a busy one takes the smallest cosets allowed (wider + 1
    # would be too sparse at this eps), which beat aggregating there (0.3600 against 0.337 km)
    assert fitting_step(problem, eps, limit / 1e6) is None
    assert fitting_step(problem, eps, limit, slowdown=1e6) == wider
    monkeypatch.setattr(cosets_module, "machine_slowdown", lambda: slowdown)
    busy = auto_lower_bound(problem, eps, time_limit=limit)
    assert f"({wider} x {wider})" in busy.method
    assert f"sized for a machine {slowdown:.1f}x slower" in busy.method
    assert busy.value <= tree_extension(problem, eps).utility_km(problem) + 1e-12


def test_a_busy_machine_is_named_beside_a_bound_without_cosets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit: a bound on a busy machine was 8 % looser under the same label as a quiet machine's (the
    relaxation; only the cosets' label named the machine's slowdown)."""
    problem = tiny_problem(4, 4, seed=2, depth=2, seed_n=2)
    monkeypatch.setattr(cosets_module, "BLOCK_TARGETS", 5)  # not one block: no exact optimum
    monkeypatch.setattr(cosets_module, "CONVERGED_SECONDS", (np.inf, np.inf))  # no cosets converge
    quiet = auto_lower_bound(problem, 1.0, time_limit=10)
    monkeypatch.setattr(cosets_module, "machine_slowdown", lambda: 3.0)
    busy = auto_lower_bound(problem, 1.0, time_limit=10)
    assert "cosets" not in quiet.method and "slower" not in quiet.method
    assert (
        busy.method == f"{quiet.method}; on a machine 3.0x slower than quiet (a quiet one may bound tighter)"
    )


def test_the_machine_slowdown_is_the_probes_time_against_a_quiet_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _cores.machine_slowdown() >= 1.0
    monkeypatch.setattr(_cores, "QUIET_PROBE_SECONDS", 1e-6)  # every machine is slower than this one
    start = time.perf_counter()
    slowdown = _cores.machine_slowdown()
    assert 0.5 * slowdown * 1e-6 <= time.perf_counter() - start <= 2.0 * slowdown * 1e-6
    monkeypatch.setattr(_cores, "QUIET_PROBE_SECONDS", 1e6)  # faster than quiet reads as quiet
    assert _cores.machine_slowdown() == 1.0
