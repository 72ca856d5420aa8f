"""Certified bounds of independent parts of a relaxation (cosets, groups of cells), one per core at a time.

A part is a callable ``part(deadline, stop) -> GeoBound``: it bounds its own LP until ``deadline``
(``time.perf_counter()`` seconds) or until ``stop`` is set, and certifies whatever it reached
(:func:`~mdp_core.geo.bounds.certified_bound`), so the time a part gets only costs tightness.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np
from threadpoolctl import threadpool_limits

from mdp_core._cores import on_this_thread, worker_count
from mdp_core._validation import Progress, report
from mdp_core.geo.bounds import GeoBound, certified_bound
from mdp_core.geo.ipm import solve_geo_lp

__all__ = [
    "COSET_GAP",
    "DILATION",
    "REPORT_SECONDS",
    "Part",
    "StoppedError",
    "bound_parts",
    "check_stop",
    "rows_bound",
]

#: Dilation of the spanner whose rows a part's relaxation keeps (a coset's, a group of cells'): tighter, more
#: rows (slower iterations) but less cheating. The city at depth 3, eps 1.5, 16 cosets, 60 s: 1.03 0.9517 km
#: against 1.1 0.9469 (1.02 0.9530, but 0.9444 in 35 s); the district and the page's 20 s at depth 2 agree.
DILATION = 1.03
#: Relative duality gap at which a part's solve stops unless its time runs out first: against 1e-6 it costs
#: ~0.005 % of the bound and saves a fifth of the iterations (205 targets: 43 iterations against 53).
COSET_GAP = 1e-4
#: Seconds between progress reports while parts are solved (a caller stops the bound from its progress).
REPORT_SECONDS = 1.0

#: ``part(deadline, stop)``: a part's certified bound by ``deadline`` (perf_counter s), stopping on ``stop``.
Part = Callable[[float, threading.Event], GeoBound]


class StoppedError(Exception):
    """The caller stopped the bound (:func:`bound_parts`)."""


def check_stop(stop: threading.Event) -> None:
    """Raise :class:`StoppedError` once ``stop`` is set (a part calls it between its steps)."""
    if stop.is_set():
        raise StoppedError("the bound was stopped")


def bound_parts(parts: Sequence[Part], time_limit: float, progress: Progress, what: str) -> list[GeoBound]:
    """Every part's bound within ``time_limit`` seconds in all, one part per core at a time.

    A part starts when a thread is free, with its share of the thread time left to the parts not yet
    started (a part that finishes early leaves its time to the others). ``progress(fraction, message)`` is
    called from the calling thread at least every :data:`REPORT_SECONDS`, its message counting the parts
    done as ``what`` ("cosets"); an exception raised from it stops the bound and propagates: parts not
    started never run, those in progress stop at their next step.
    """
    start = time.perf_counter()
    deadline = start + float(time_limit)
    workers = min(worker_count(), len(parts))
    stop = threading.Event()  # set when the caller stops the bound: the parts in progress stop too

    def solve(k: int) -> GeoBound:
        check_stop(stop)
        left = len(parts) - k
        share = max(deadline - time.perf_counter(), 0.0) * min(workers, left) / left
        with on_this_thread() if workers > 1 else contextlib.nullcontext():  # a part per core already
            return parts[k](time.perf_counter() + share, stop)

    def tell(done: int) -> None:
        seconds = time.perf_counter() - start
        fraction = max(done / len(parts), min(seconds / float(time_limit), 0.99))  # moves while a part runs
        message = f"{done} of {len(parts)} {what} done" if len(parts) > 1 else "block interior point"
        report(progress, fraction, f"lower bound: {message}, {seconds:.0f} s")

    bounds: list[GeoBound] = []
    # one BLAS limit around all threads (nested limits would each restore what another one set)
    with threadpool_limits(limits=1), ThreadPoolExecutor(workers) as pool:
        futures: list[Future[GeoBound]] = [pool.submit(solve, k) for k in range(len(parts))]
        try:
            for k, future in enumerate(futures):  # progress from this thread only (a UI callback needs it)
                while wait([future], timeout=REPORT_SECONDS).not_done:  # meanwhile a caller can stop it
                    tell(k)
                bounds.append(future.result())
                tell(k + 1)
        except BaseException:  # e.g. a caller that stops the bound from its progress
            stop.set()
            for future in futures:
                future.cancel()
            raise
    return bounds


def rows_bound(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, tol: float, deadline: float, stop: threading.Event
) -> float:
    """Certified bound (km, >= 0) of the LP ``min sum(cost * P)`` over row-stochastic P with the privacy
    rows ``P[a, y] <= ratio P[b, y]``, by the block interior point until ``tol``, ``deadline`` or ``stop``
    (no rows: every row at its least cost, the optimum)."""
    nu = np.empty(0)
    if len(rows):
        progress = lambda *_: check_stop(stop)  # noqa: E731 (the solver calls it every iteration)
        nu = solve_geo_lp(cost, rows, ratios, tol=tol, deadline=deadline, progress=progress).nu
    return max(certified_bound(cost, rows, ratios, nu), 0.0)  # travel errors are never negative
