"""The geo comparison over a range of budgets on the sweep engine (issue 13: "offer the engine to the geo
comparison over eps").

:func:`compare_over_eps` maps :func:`mdp_core.geo.compare_methods` over (eps, method) pairs, one
independent task each: the problem (road network, grid, task points, loss matrix) is scattered to the
cluster once, every task builds, scores and verifies one method at one budget with its own
``numpy.random.default_rng(seed)`` (the same stream the geo page uses for one-method comparisons, so the
results equal the page's own), and returns its one-method :class:`~mdp_core.geo.GeoComparison` without the
problem (re-attached here: it is not shipped back with every result).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mdp_core._validation import Progress, check_eps, report
from mdp_core.errors import DataError

__all__ = ["compare_over_eps"]


def _one(
    problem: Any,
    eps: float,
    method: str,
    verify_samples: int,
    verify_max_work: float | None,
    seed: int,
    stop: str | None = None,
) -> Any:
    from mdp_core.geo import compare_methods

    from .cluster import _setup_if_on_worker, _stop_check

    _setup_if_on_worker()
    comp = compare_methods(
        problem,
        eps,
        methods=(method,),
        verify_samples=verify_samples,
        verify_max_work=verify_max_work,
        rng=np.random.default_rng(seed),
        progress=_stop_check(stop),
    )
    return replace(comp, problem=None)


def compare_over_eps(
    problem: Any,
    eps: Sequence[float],
    *,
    methods: Sequence[str] = ("tree", "em", "em_remap"),
    verify_samples: int = 200_000,
    verify_max_work: float | None = None,
    seed: int = 0,
    client: Any = None,
    progress: Progress = None,
) -> dict[tuple[float, str], Any]:
    """One-method geo comparisons for every (eps, method), as independent tasks on the sweep engine.

    Parameters
    ----------
    problem : GeoProblem
        :func:`mdp_core.geo.build_problem` output (sent to the cluster once).
    eps : sequence of float
        Budgets in 1/km.
    methods : sequence of str
        Keys of :data:`mdp_core.geo.METHODS`.
    verify_samples, verify_max_work
        Sampled pairs of each verification where not every pair is checked, and the largest check of
        every pair (see :func:`mdp_core.geo.compare_methods`).
    seed : int
        Every task verifies with ``numpy.random.default_rng(seed)``: results do not depend on the engine.
    client : distributed.Client, None or False
        ``None``: :func:`mdp_core.sweep.default_client`; ``False``: in-process, one pair after the other.
    progress : callable, optional
        ``progress(fraction, message)`` in the calling thread as pairs finish; an exception raised by it
        cancels the remaining tasks and propagates.

    Returns
    -------
    dict
        ``{(eps, method): GeoComparison}`` (one method each, ``problem`` set to ``problem``), in the order
        of ``eps`` then ``methods``.
    """
    from mdp_core.geo import METHODS

    budgets = [check_eps(float(e)) for e in eps]
    if not budgets:
        raise DataError("eps is empty: give at least one budget")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        raise DataError(f"unknown or no methods {unknown}; choose from {list(METHODS)}")
    pairs = [(e, m) for e in budgets for m in dict.fromkeys(methods)]
    n = len(pairs)
    out: dict[tuple[float, str], Any] = {}
    report(progress, 0.0, f"0/{n} comparisons")
    if client is False:
        for k, (e, m) in enumerate(pairs):
            out[(e, m)] = replace(_one(problem, e, m, verify_samples, verify_max_work, seed), problem=problem)
            report(progress, (k + 1) / n, f"{k + 1}/{n}: ε = {e:g}/km, {m}")
        return out
    from .cluster import _as_they_finish, _stop_tasks, default_client

    if client is None:
        client = default_client()
    shared = client.scatter(problem, hash=False)
    token = f"geo-eps-{time.time_ns()}"
    stop = f"{token}-stop"  # set when the sweep ends early: running tasks then end at their next check
    checks = (verify_samples, verify_max_work, seed, stop)
    futures = {
        client.submit(_one, shared, e, m, *checks, key=f"{token}-{k}", pure=False): (e, m)
        for k, (e, m) in enumerate(pairs)
    }
    done: dict[tuple[float, str], Any] = {}
    last = "comparisons"

    def idle() -> None:
        report(progress, len(done) / n, f"{len(done)}/{n}: {last}")

    try:
        for fut in _as_they_finish(list(futures), client, idle):
            e, m = futures[fut]
            done[(e, m)] = replace(fut.result(), problem=problem)
            last = f"ε = {e:g}/km, {m}"
            idle()
    finally:
        if len(done) < n:
            _stop_tasks(client, stop)
        client.cancel([shared, *futures])
    for pair in pairs:
        out[pair] = done[pair]
    return out
