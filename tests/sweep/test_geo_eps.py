"""compare_over_eps: the geo comparison over budgets on the sweep engine equals the direct one-method
comparisons, in-process and on a (threaded) LocalCluster; bad input is refused with a message."""

from __future__ import annotations

import time

import numpy as np
import pytest
from distributed import Client

import mdp_core.geo
from mdp_core._validation import report
from mdp_core.errors import DataError
from mdp_core.geo import build_problem, compare_methods, grid_road_network
from mdp_core.sweep.cluster import STOP_CHECK_SECONDS, local_cluster
from mdp_core.sweep.geo import compare_over_eps

EPS = [0.5, 2.0]
METHODS = ("em", "em_remap")
SAMPLES = 2000


@pytest.fixture(scope="module")
def problem():  # type: ignore[no-untyped-def]
    city = grid_road_network(7, 5, spacing_km=0.2, rng=np.random.default_rng(3))
    return build_problem(city, seed_n=5, depth=2, n_tasks=12, rng=np.random.default_rng(1))


def _direct(problem, eps: float, method: str):  # type: ignore[no-untyped-def]
    return compare_methods(
        problem, eps, methods=(method,), verify_samples=SAMPLES, rng=np.random.default_rng(7)
    )


def _check(problem, got: dict) -> None:  # type: ignore[no-untyped-def]
    assert list(got) == [(e, m) for e in EPS for m in METHODS]
    for (e, m), comp in got.items():
        want = _direct(problem, e, m)
        assert comp.problem is problem
        assert set(comp.utility_km) == {m}
        assert comp.utility_km[m] == want.utility_km[m]
        assert comp.violation_ratio[m] == want.violation_ratio[m]
        np.testing.assert_array_equal(comp.mechanisms[m].matrix, want.mechanisms[m].matrix)
    # EM's expected error falls as the budget grows
    assert got[(2.0, "em")].utility_km["em"] < got[(0.5, "em")].utility_km["em"]


def test_in_process_equals_the_direct_comparisons(problem) -> None:  # type: ignore[no-untyped-def]
    seen: list[float] = []
    got = compare_over_eps(
        problem,
        EPS,
        methods=METHODS,
        verify_samples=SAMPLES,
        seed=7,
        client=False,
        progress=lambda f, m: seen.append(f),
    )
    _check(problem, got)
    assert seen == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_on_a_cluster_equals_the_direct_comparisons(problem) -> None:  # type: ignore[no-untyped-def]
    with (
        local_cluster(2, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        got = compare_over_eps(problem, EPS, methods=METHODS, verify_samples=SAMPLES, seed=7, client=client)
        assert len(client.who_has()) == 0  # the scattered problem and the results are released
    _check(problem, got)


def test_bad_input_is_refused(problem) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="eps is empty"):
        compare_over_eps(problem, [], client=False)
    with pytest.raises(DataError, match="unknown or no methods \\['nope'\\]"):
        compare_over_eps(problem, [1.0], methods=("em", "nope"), client=False)
    with pytest.raises(DataError):
        compare_over_eps(problem, [-1.0], client=False)


_STEPS: list[float] = []


def _long_comparison(*args: object, progress: object = None, **kwargs: object) -> object:
    """A comparison that takes 10 s unless its progress raises (module level: Dask pickles tasks)."""
    for k in range(100):
        _STEPS.append(time.monotonic())
        report(progress, k / 100, "building")  # type: ignore[arg-type]
        time.sleep(0.1)
    raise AssertionError("never stopped")


def test_a_stop_is_seen_at_once_and_ends_the_running_comparisons(
    problem, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Audit: the curve over eps reported only when a comparison finished, and a stopped comparison ran on
    in its worker. Now the caller's progress is called every POLL_SECONDS and the tasks end at a stop."""

    class StopCurveError(Exception):
        pass

    said: list[str] = []

    def stop(fraction: float, message: str) -> None:
        said.append(message)
        if _STEPS:
            raise StopCurveError(message)

    _STEPS.clear()
    monkeypatch.setattr(mdp_core.geo, "compare_methods", _long_comparison)
    with (
        local_cluster(2, processes=False) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        t0 = time.monotonic()
        with pytest.raises(StopCurveError, match=r"^0/4"):
            compare_over_eps(problem, EPS, methods=METHODS, client=client, progress=stop)
        assert time.monotonic() - t0 < 5.0
        stopped = time.monotonic()
        time.sleep(STOP_CHECK_SECONDS + 1.0)
        steps = len(_STEPS)
        time.sleep(1.0)
        assert len(_STEPS) == steps < 60  # nothing ran on after the stop took effect
        assert _STEPS[-1] - stopped < STOP_CHECK_SECONDS + 0.3
