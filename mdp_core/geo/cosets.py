"""A lower bound for fine grids from bounds on their cosets (no aggregation).

Split the targets by their fine coordinates modulo ``step``: ``C_ab = {x : i % step = a, j % step = b}``.
Every eps-mDP mechanism K on all targets restricts to an eps-mDP mechanism on each coset (fewer pairs to
protect, rows unchanged), and its expected travel error is the prior-weighted sum of the cosets' errors
under the prior conditioned on the coset:

    U(K) = sum_ab pi(C_ab) U_ab(K|C_ab) >= sum_ab pi(C_ab) B_ab,

with B_ab any certified bound of coset ab's problem. So the weighted sum is a certified bound of the whole
problem. Its point: a coset of a fine grid is a coarse grid over the whole map (the long-range privacy rows,
which cost the most, are kept at the coarse spacing), small enough for a solver that sees every row.

**Per coset.** Cosets of at most :data:`BLOCK_TARGETS` targets are bounded by the LP on the rows of a
:data:`DILATION`-spanner of their targets (a relaxation) solved by the block interior point
(:func:`~mdp_core.geo.ipm.solve_geo_lp`, one n x n block per output); its multipliers certify the bound
by weak duality (:func:`~mdp_core.geo.bounds.certified_bound`) wherever the solve stops, so the time
share of a coset only costs tightness. Larger cosets (a small explicit ``step``) take
:func:`~mdp_core.geo.bounds.geo_lower_bound`. ``step=None`` picks the smallest step whose cosets have at
most :data:`COSET_TARGETS` targets (depth 3 of the 15 km city: 4, 16 cosets of ~215 targets).

**On every core.** The cosets are independent, so one thread per core solves them, each on its own thread
(:func:`~mdp_core._cores.on_this_thread`): the first four cosets of the city at depth 3, eps 1.5, to a 1e-6
gap, took 36.9 s on two threads against 50.6 s one after the other (the same bounds to 1e-8). A busy
machine gets smaller cosets (:func:`auto_lower_bound`).

Measured at eps 1.5 / km, 60 task points, 60 s for the whole bound, 2 cores (``step=None``):

* the 15 km city at depth 3 (3,469 targets, 117 outputs), 16 cosets of ~215 targets (``bench geo_cosets``):
  0.9434 km against 0.8539 from geo_lower_bound's aggregated relaxation; the district at depth 3 (5,311
  targets), 25 cosets: 0.3598 km, the bilinear mechanism within 1.9 %;
* depth 4: :func:`coset_step`'s cosets (49 of the city, 100 of the district) do not fit 60 s, so
  :func:`fitting_step` goes on to smaller ones that do (:data:`COSET_SECONDS`): the city's 49 cosets of
  7 x 7 (up to 205 targets) certify 1.6502 / 1.2394 / 0.9098 km at eps 0.5 / 1 / 1.5 in 60 s, against
  1.626 / 1.1775 / 0.853 from the representatives (1.2496 at eps 1.0 when left to converge, 142 s);
* more time, larger cosets: where ``time_limit`` lets cosets of more than :data:`COSET_TARGETS` (up to
  :data:`BLOCK_TARGETS`) converge (:func:`converged_seconds`), :func:`fitting_step` takes the largest of them.
  At depth 4 of the city, eps 1.5, the 7 x 7 cosets stop at 0.9191 km when converged (113 s), where 6 x 6
  / 5 x 5 / 4 x 4 converge to 0.9285 / 0.9403 / 0.9507 (163 / 247 / 495 s; at eps 1.0 1.2496 / 1.2551 /
  1.2612 / 1.2668 km): ``time_limit`` 210 / 310 / 510 s takes 6 x 6 / 5 x 5 / 4 x 4;
* ``aggregate=True`` (on request: ``--bound-cosets coarser``) takes the cosets of the grid one level coarser
  (:func:`~mdp_core.geo.aggregation.coarser_problem`): the city at depth 4, 60 s, eps 0.5 / 1 / 1.5, 1.615 /
  1.187 / 0.852 km; looser on the district.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import numpy as np

from mdp_core._cores import machine_slowdown, worker_count
from mdp_core._validation import Progress
from mdp_core.errors import DataError
from mdp_core.geo._parts import COSET_GAP, DILATION, REPORT_SECONDS, Part, bound_parts, check_stop, rows_bound
from mdp_core.geo.aggregation import coarser_problem
from mdp_core.geo.bounds import (
    GeoBound,
    _privacy_rows,
    _row_ratios,
    aggregate_threshold,
    geo_lower_bound,
)
from mdp_core.geo.cells import cell_lower_bound, cell_plan
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.optimal import optimal_geo_mechanism
from mdp_core.geo.pairs import spanner_pairs
from mdp_core.geo.utility import GeoProblem, check_lp_inputs

__all__ = [
    "BLOCK_TARGETS",
    "CONVERGED_SECONDS",
    "COSET_MIN_TARGETS",
    "COSET_SECONDS",
    "COSET_SPACING",
    "COSET_TARGETS",
    "OPTIMUM_BLOCK_BYTES",
    "OPTIMUM_SECONDS",
    "REPORT_SECONDS",
    "auto_lower_bound",
    "converged_seconds",
    "converging_step",
    "coset_lower_bound",
    "coset_seconds",
    "coset_step",
    "cosets",
    "fitting_step",
    "tries_optimum",
]

#: A callback that receives the exact optimum's mechanism when :func:`auto_lower_bound` ran it.
OnOptimum = Callable[[GeoMechanism], None] | None
#: ``step=None`` takes the smallest step whose cosets have at most this many targets.
COSET_TARGETS = 250
#: Cosets up to this size are bounded by the block interior point on a spanner (O(m n^3) an iteration).
BLOCK_TARGETS = 600
#: Seconds of one core that a coset's bound needs, per output and per s (s + 0.02), s = the coset's targets /
#: 1000 (:func:`coset_seconds`). Measured alone on one core (the city, eps 1.0, 117 outputs): to a 1e-6 gap,
#: cosets of 19 / 101 / 158 / 205 / 267 / 371 targets took 0.06 / 1.0 / 2.4 / 3.9 / 6.8 / 12.4 s, 0.73 s per
#: output and s (s + 0.02) within 10 % (sparse products over the spanner's rows lead at these sizes); to
#: :data:`COSET_GAP` 0.6. Two threads at once run ~1.45x slower each, and with far too little time a
#: certificate collapses. 0.42, 70 % of the time alone, takes at depth 4 of the city in 60 s the 7 x 7 cosets
#: (up to 205 targets; the module's numbers). The district's 38 x 38 cosets (up to 19 targets) in 20 s, ~45 %,
#: collapsed to 0.26 / 0.10 km at eps 0.35 / 1.39 against 0.40 / 0.36 (hence :data:`COSET_MIN_TARGETS`).
#: :func:`coset_step`'s cosets are taken in 60 s at depth 3 (the city at eps 1: 1.241 km against 1.133
#: aggregated) and in the page's 20 s at depth 2 (9 cosets of up to 156 targets: the city at eps 1.39 0.987
#: km against 0.827); smaller ones in 20 s at depth 3 and in 60 s at depth 4 (the district 17 x 17).
COSET_SECONDS = 0.42
#: Steps above :func:`coset_step`'s keep the cosets' targets at most this many 1 / eps km apart: sparser
#: cosets drop the short privacy rows that bind (the city at depth 4, eps 1.5, 60 s: 8 x 8 cosets, 0.53 /
#: eps apart, 0.903 km; 12 x 12, 0.79 / eps, 0.848, below the representatives' 0.854).
COSET_SPACING = 0.7
#: Steps above :func:`coset_step`'s keep a largest coset of at least this many targets (smaller ones spend
#: their time share on each solve's fixed cost: :data:`COSET_SECONDS`).
COSET_MIN_TARGETS = 50
#: ``(a, b)`` of :func:`converged_seconds`: seconds per output that a coset of s = targets / 1000 takes to
#: converge to :data:`COSET_GAP` on one core while the others bound cosets too, ``a s (s + 0.02) + b s^3``
#: (the n^3 block inversions weigh from ~400 targets on). The city at depth 4, 2 cores, eps 0.5 / 1.0 / 1.5:
#: 7 x 7 cosets (182 targets on average) converged in - / 142 / 113 s, 6 x 6 (248) in - / 207 / 163 s, 5 x 5
#: (358) in 213 / 288 / 247 s, 4 x 4 (559) in - / 454 / 495 s; (a, b) fitted to the slowest within 4 %
#: (1.26, 0.67) and rounded up: 149 / 205 / 304 / 508 s predicted.
CONVERGED_SECONDS = (1.3, 0.7)
#: From this time limit on, :func:`auto_lower_bound` tries the exact optimum (:func:`_optimum_or_cosets`) on
#: grids above one block, in the time the converging cosets leave. Depth 2, 2 cores, exact in two LPs: the
#: district (1,334 targets) in 284 s (2.5 GB), the 15 km city (1,251) in 378 / 549 s at eps 0.5 / 1.5.
OPTIMUM_SECONDS = 300.0
#: Most memory of the exact optimum's m n x n blocks there (8 m n^2 bytes; above: 1.46 / 1.59 GB).
OPTIMUM_BLOCK_BYTES = 2e9


def cosets(problem: GeoProblem, step: int) -> list[tuple[float, GeoProblem]]:
    """(prior mass, problem on the coset with the prior conditioned on it) per non-empty coset."""
    fine = problem.grid.fine_ij
    parts = []
    for a in range(step):
        for b in range(step):
            rows = np.flatnonzero((fine[:, 0] % step == a) & (fine[:, 1] % step == b))
            mass = float(problem.prior[rows].sum())
            if len(rows) == 0 or mass <= 0.0:
                continue
            parts.append((mass, problem.restricted(rows)))
    return parts


def coset_step(problem: GeoProblem, max_targets: int | None = None) -> int:
    """The smallest step whose cosets (of the fine grid's coordinates modulo step) all have at most
    ``max_targets`` targets (default :data:`COSET_TARGETS`)."""
    max_targets = COSET_TARGETS if max_targets is None else max_targets
    if not (isinstance(max_targets, int | np.integer) and max_targets >= 1):
        raise DataError(f"max_targets must be a positive integer, got {max_targets!r}")
    fine = problem.grid.fine_ij
    step = 1
    while _coset_sizes(fine, step).max() > max_targets:
        step += 1
    return step


def _coset_sizes(fine: np.ndarray, step: int) -> np.ndarray:
    """Targets per non-empty coset of the fine grid coordinates ``fine`` modulo ``step``."""
    sizes = np.bincount((fine[:, 0] % step) * step + fine[:, 1] % step)
    return sizes[sizes > 0]


def fitting_step(problem: GeoProblem, eps: float, time_limit: float, slowdown: float = 1.0) -> int | None:
    """The step of the cosets that ``time_limit`` seconds, shared over this process's cores, bound best.

    First the smallest step whose cosets (of at most :data:`BLOCK_TARGETS` targets) all converge within
    it (:func:`converged_seconds`): more time, larger cosets, a tighter bound. Else the smallest step from
    :func:`coset_step`'s on whose cosets the time gives every coset the time its bound needs
    (:func:`coset_seconds`); a step above :func:`coset_step`'s only while its largest coset has at least
    :data:`COSET_MIN_TARGETS` targets, at most :data:`COSET_SPACING` / eps km apart. None when no step
    qualifies (aggregating is then the better bound), except on a machine ``slowdown`` > 1 times slower
    than quiet (:func:`~mdp_core._cores.machine_slowdown`), which takes the last step allowed (the district
    at depth 2, 20 s, 7x slower: 5 x 5 cosets 0.3600 km, aggregated 0.337)."""
    fine, outputs = problem.grid.fine_ij, problem.cost.shape[1]
    first = coset_step(problem)
    step = converging_step(problem, time_limit, last=first - 1, slowdown=slowdown)
    if step is not None:
        return step
    thread_seconds = float(time_limit) * worker_count() / slowdown
    step = first
    while True:
        sizes = _coset_sizes(fine, step)
        close = eps * step * problem.grid.h_fine <= COSET_SPACING and sizes.max() >= COSET_MIN_TARGETS
        if step > first and not close:  # busy: the smallest cosets allowed still beat aggregating
            return step - 1 if slowdown > 1.0 else None
        if thread_seconds / len(sizes) >= coset_seconds(int(sizes.max()), outputs):
            return step
        step += 1


def converging_step(
    problem: GeoProblem, time_limit: float, last: int | None = None, slowdown: float = 1.0
) -> int | None:
    """The smallest step up to ``last`` (default :func:`coset_step`'s) whose cosets, of at most
    :data:`BLOCK_TARGETS` targets, all converge within ``time_limit`` seconds shared over this process's
    cores, ``slowdown`` times slower than quiet (:func:`converged_seconds`); None when none does."""
    fine, outputs = problem.grid.fine_ij, problem.cost.shape[1]
    thread_seconds = float(time_limit) * worker_count() / slowdown
    last = coset_step(problem) if last is None else last
    for step in range(coset_step(problem, BLOCK_TARGETS), last + 1):
        if sum(converged_seconds(int(size), outputs) for size in _coset_sizes(fine, step)) <= thread_seconds:
            return step
    return None


def coset_seconds(targets: int, outputs: int) -> float:
    """Seconds of one core that the bound of a coset with this many targets and outputs needs
    (:data:`COSET_SECONDS`)."""
    size = targets / 1000.0
    return COSET_SECONDS * outputs * size * (size + 0.02)


def converged_seconds(targets: int, outputs: int) -> float:
    """Seconds of one core, the others bounding cosets too, in which the bound of a coset with this many
    targets and outputs converges to :data:`COSET_GAP` (:data:`CONVERGED_SECONDS`)."""
    size = targets / 1000.0
    quadratic, cubic = CONVERGED_SECONDS
    return outputs * (quadratic * size * (size + 0.02) + cubic * size**3)


def auto_lower_bound(
    problem: GeoProblem,
    eps: float,
    *,
    time_limit: float = 60.0,
    progress: Progress = None,
    on_optimum: OnOptimum = None,
) -> GeoBound:
    """The bound the comparison and the map page use (certified by weak duality; ``method`` says which).

    * One block (at most :data:`BLOCK_TARGETS` targets): the exact optimum's row generation, its certificate
      when out of time (exact in 20 s at depth 0 and on the district at depth 1; the city at depth 1 in
      29-35 s). ``on_optimum`` is called with the optimum's mechanism (verified eps-mDP) whenever it ran.
    * A grid :func:`geo_lower_bound` would aggregate (city scale): the cell relaxation
      (:func:`~mdp_core.geo.cells.cell_lower_bound`) with the cells :func:`~mdp_core.geo.cells.cell_plan`
      fits in the time; where none fits, the cosets that get the time they need (:func:`fitting_step`),
      else geo_lower_bound itself. The cells against those cosets in the same 60 s (2 cores, ``bench
      geo_cells``), eps 0.5 / 1 / 1.5: the city at depth 4 1.673 / 1.276 / 0.9529 km against 1.647 / 1.232
      / 0.897, at depth 3 1.746 / 1.295 / 0.9808 against 1.741 / 1.286 / 0.9583; the district at depth 4
      0.4-1.2 % tighter, at depth 3 within 0.03 %. In the page's 20 s the city at depth 4 0.9267 against
      0.4048, the district at depth 2 0.3651 against 0.3654.
    * Otherwise the cosets that converge in the time (:func:`converging_step`; the city at depth 2, 60 s,
      eps 1: 1.3239 km against geo_lower_bound's 1.2961), from :data:`OPTIMUM_SECONDS` on beside the exact
      optimum (:func:`_optimum_or_cosets`).

    Cosets are sized for the machine as it is now (:func:`~mdp_core._cores.machine_slowdown`, ~0.1 s): with
    five busy processes beside it (probe 7.3-7.9x), the district at depth 2 in 20 s got 5 x 5 cosets, 0.3620
    km, where the quiet machine's 3 x 3 gave 0.3559-0.3597 (0.3656 when quiet)."""
    eps = check_lp_inputs(problem, eps, time_limit)  # before the size rule reads the time limit
    n = len(problem.targets_km)
    if n <= BLOCK_TARGETS and n <= aggregate_threshold(float(time_limit)):  # one block: the exact optimum's
        return _optimum_bound(problem, eps, time_limit, progress, on_optimum)  # row generation
    start, slowdown = time.perf_counter(), machine_slowdown()  # a busy machine: smaller cosets
    left = max(float(time_limit) - (time.perf_counter() - start), 1.0)
    city_scale = n > aggregate_threshold(float(time_limit))
    plan, step = (cell_plan(problem, left, slowdown) if city_scale else None), None
    if plan is None and city_scale:  # no cells fit: the cosets that get their time
        step = fitting_step(problem, eps, left, slowdown)
    elif plan is None:  # geo_lower_bound's PDLP on all targets would not converge: cosets that do
        step = converging_step(problem, left, slowdown=slowdown)
        if step is not None and tries_optimum(problem, time_limit):
            return _optimum_or_cosets(problem, eps, step, left, progress, on_optimum)
    if plan is not None:  # every target's cost on cells: the tightest at city scale (module docstring)
        bound = cell_lower_bound(
            problem, eps, size=plan[0], parts=plan[1], time_limit=left, progress=progress
        )
        busy = f"cells sized for a machine {slowdown:.1f}x slower"
    elif step is None:
        bound = geo_lower_bound(problem, eps, time_limit=left, progress=progress)
        busy = f"on a machine {slowdown:.1f}x slower than quiet (a quiet one may bound tighter)"
    else:
        bound = coset_lower_bound(problem, eps, step=step, time_limit=left, progress=progress)
        busy = f"cosets sized for a machine {slowdown:.1f}x slower"
    return replace(bound, method=f"{bound.method}; {busy}") if slowdown > 1.0 else bound


def tries_optimum(problem: GeoProblem, time_limit: float) -> bool:
    """Whether :func:`auto_lower_bound` runs the exact optimum within ``time_limit`` s: on one block; from
    :data:`OPTIMUM_SECONDS` on where cosets converge beside it and its 8 m n^2 bytes fit the memory cap."""
    n = len(problem.targets_km)
    if n > aggregate_threshold(time_limit):
        return False
    fits = 8.0 * problem.cost.shape[1] * n * n <= OPTIMUM_BLOCK_BYTES and time_limit >= OPTIMUM_SECONDS
    return n <= BLOCK_TARGETS or (fits and converging_step(problem, time_limit) is not None)


def _optimum_bound(
    problem: GeoProblem, eps: float, time_limit: float, progress: Progress, on_optimum: OnOptimum
) -> GeoBound:
    """The lower bound of :func:`~mdp_core.geo.optimal.optimal_geo_mechanism` within ``time_limit``."""
    n = len(problem.targets_km)
    optimum = optimal_geo_mechanism(problem, eps, time_limit=time_limit, max_targets=n, progress=progress)
    if on_optimum is not None:
        on_optimum(optimum)
    return cast("GeoBound", optimum.info["lower_bound"])


def _optimum_or_cosets(
    problem: GeoProblem, eps: float, step: int, time_limit: float, progress: Progress, on_optimum: OnOptimum
) -> GeoBound:
    """The exact optimum's bound in the time the cosets leave; unless exact, the tighter of it and theirs."""
    start = time.perf_counter()
    sizes, outputs = _coset_sizes(problem.grid.fine_ij, step), problem.cost.shape[1]
    reserve = sum(converged_seconds(int(size), outputs) for size in sizes) / min(worker_count(), len(sizes))
    bound: GeoBound | None = None
    with contextlib.suppress(DataError):  # its solution could not be made private: the cosets alone
        bound = _optimum_bound(problem, eps, max(time_limit - reserve, 1.0), progress, on_optimum)
    if bound is None or not bound.exact:
        left = max(time_limit - (time.perf_counter() - start), 1.0)
        cosets = coset_lower_bound(problem, eps, step=step, time_limit=left, progress=progress)
        bound = cosets if bound is None or cosets.value >= bound.value else bound
    return replace(bound, seconds=time.perf_counter() - start)  # the whole time, both solves'


def coset_lower_bound(
    problem: GeoProblem,
    eps: float,
    *,
    step: int | None = None,
    time_limit: float = 60.0,
    aggregate: bool = False,
    progress: Progress = None,
) -> GeoBound:
    """Certified lower bound (km) of every eps-mDP mechanism on these outputs, from bounds of the cosets.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    step : int, optional
        Cosets per axis (``step**2`` cosets); default :func:`coset_step` (cosets of at most
        :data:`COSET_TARGETS` targets).
    time_limit : float
        Seconds for the whole bound, shared among the cosets still to do (a coset that finishes early
        leaves its time to the others), on every core (module docstring).
    aggregate : bool
        Aggregate the targets onto those of the grid one level coarser first
        (:func:`~mdp_core.geo.aggregation.coarser_problem`) and take the cosets of that grid (``step`` is
        then that grid's): a quarter of the targets for a little of the bound (module docstring).
    progress : callable, optional
        ``progress(fraction, message)``, called from the calling thread at least every
        :data:`REPORT_SECONDS`. An exception raised from it stops the bound and propagates: the cosets not
        started never run, those in progress stop at their next interior-point iteration.

    Returns
    -------
    GeoBound
        ``value`` is the prior-weighted sum of the cosets' certified bounds (module docstring), plus the
        aggregation's constant when aggregated; never exact.
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    start = time.perf_counter()
    constant, note = 0.0, ""
    if aggregate:
        coarser = coarser_problem(problem, eps)
        if coarser is None:
            raise DataError("aggregate needs a grid of depth >= 1 with targets on the coarser grid")
        problem, constant, margin = coarser
        constant -= margin
        note = f", aggregated onto the {len(problem.prior):,} targets of the coarser grid"
    if step is None:
        step = coset_step(problem)
    if not (isinstance(step, int | np.integer) and step >= 1):
        raise DataError(f"step must be a positive integer, got {step!r}")
    parts = cosets(problem, int(step))

    def part(sub: GeoProblem) -> Part:
        def solve(deadline: float, stop: threading.Event) -> GeoBound:
            if sub.grid.n_targets <= BLOCK_TARGETS:
                return _spanner_bound(sub, eps, deadline, stop)
            share = max(deadline - time.perf_counter(), 1.0)
            return geo_lower_bound(sub, eps, time_limit=share, progress=lambda *_: check_stop(stop))

        return solve

    left = float(time_limit) - (time.perf_counter() - start)
    bounds = bound_parts([part(sub) for _, sub in parts], left, progress, "cosets")
    value = constant + sum(mass * bound.value for (mass, _), bound in zip(parts, bounds, strict=True))
    rows, methods = max(bound.rows for bound in bounds), {bound.method for bound in bounds}
    return GeoBound(
        value=max(value, 0.0),  # travel errors are never negative
        exact=False,
        method=(f"{len(parts)} cosets ({step} x {step}) of " if len(parts) > 1 else "")
        + " / ".join(sorted(methods))
        + note,
        seconds=time.perf_counter() - start,
        rows=rows,
    )


def _spanner_bound(problem: GeoProblem, eps: float, deadline: float, stop: threading.Event) -> GeoBound:
    """The certified bound of the LP on a spanner's rows, by the block interior point until ``deadline``
    or ``stop`` (a coset with one target has no rows: its bound, the least cost, is its optimum)."""
    start = time.perf_counter()
    targets, cost = problem.targets_km, problem.cost
    rows = _privacy_rows(spanner_pairs(targets, DILATION)[0], cost.shape[1])
    ratios = _row_ratios(targets, rows, eps)
    return GeoBound(
        value=rows_bound(cost, rows, ratios, COSET_GAP, deadline, stop),
        exact=False,
        method=f"{DILATION}-spanner relaxation (block interior point)",
        seconds=time.perf_counter() - start,
        rows=len(rows),
    )
