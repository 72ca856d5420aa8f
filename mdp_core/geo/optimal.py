"""The exact optimal geo mechanism on the full target domain: row generation over the block interior point.

The problem is the LP of :mod:`mdp_core.geo.bounds` with ALL n (n - 1) m privacy rows (19.2 M at depth 1 of
the 15 km city: 406 targets x 117 outputs). A generic solver does not finish it (HiGHS on the full LP: not
in 800 s at 413 targets; 004's LP not in 1,800 s at 483). But at the optimum only a few rows bind, so:

1. solve the relaxation on the rows of a 1.1-spanner of the targets
   (:func:`~mdp_core.geo.pairs.spanner_pairs`) with :func:`~mdp_core.geo.ipm.solve_geo_lp`, the interior
   point that factorises one n x n block per output, only to a 1e-3 gap: it just has to show which rows
   are missing;
2. add every row of the full problem (checked on all pairs) that the solution breaks or comes within
   :data:`NEAR_MARGIN` of breaking, and solve the whole LP again (the next solution breaks many of the
   near rows: without them the city took 5-6 rounds). Pairs with a target on the segment between them
   are never checked (:func:`~mdp_core.mechanisms.lp.chain_implied`): their rows are products of shorter
   ones, and on the grid that is 38 % of the pairs (11.9 M rows left of 19.2 M on the city), so the LPs
   carry 27 % fewer rows for the same optimum. The spanner rows that the first solution meets with more
   than :data:`SPARE_SHARE` of their ratio to spare leave this LP (those it breaks come back; none leave
   when most are spare, :data:`SPARE_MOST`), and so do the outputs it gives less than
   :data:`LEAVE_OUT_BELOW` anywhere (most are unused, and each costs a block inversion an iteration):
   their rows only price them (:mod:`~mdp_core.geo.pricing`: the certificate covers every output), and
   those that price below zero come back into the next whole LP;
3. if that LP is tight (its objective within :data:`EXACT_GAP` of its certificate) and only rows it never
   saw are broken, re-solve just the outputs of those rows (at most half of them) and their
   :data:`PASS_NEIGHBOURS` nearest, the others held fixed (k blocks instead of m, started near the last
   solution); otherwise the whole LP again;
4. stop when the bracket closes: the last solution, made exactly eps-mDP on all pairs (by lowering the
   entries that break a ratio, :func:`~mdp_core.mechanisms.repair_mechanism`, or while rows are still
   broken also by raising, :func:`~mdp_core.mechanisms.raise_repair`, keeping :data:`_RAISE_SLACKS` of the
   budget back; the best, checked by :func:`~mdp_core.mechanisms.mdp_violation`), is within
   :data:`EXACT_GAP` (1e-5) of the best certificate; or when a whole LP breaks no row beyond :data:`ROW_TOL`.

Every whole LP's multipliers certify a lower bound by weak duality
(:func:`~mdp_core.geo.bounds.certified_bound`: its rows are a subset of the full problem's). So the result
brackets the optimum from both sides, and ``exact=True`` means the bracket is narrower than 1e-5 relative
(1 cm at 1 km).

Measured (2 cores, 60 task points). Depth 1 of the 15 km city (406 targets x 117 outputs, 19.2 M rows, 11.9 M
without the implied pairs; ``bench geo_optimal``): HiGHS does not finish round 1's LP alone (0.54 M rows) in
180 s; exact at eps 0.5 / 1.0 / 1.5 in 31.2 / 45.3 / 37.9 s (brackets 1-4e-6). Depth 2 (1,251 targets,
``bench geo_depth2``, through ``auto_lower_bound``, 600 s): the district at the Medium level (eps ln 2 / 0.5
km) in 276 s; the city at the High / Medium / Low levels (ln 2 / 2, 0.5, 0.2 km) in 307 / 503 / 396 s (Low:
every spanner row kept, :data:`SPARE_MOST`; blocks shifted at the end of the path; raised at 3e-7). What
pays is fewer whole LPs, and cheaper iterations (float32 blocks early).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from scipy.spatial import cKDTree

from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo.bounds import GeoBound, _privacy_rows, _violated_rows
from mdp_core.geo.extension import GeoMechanism
from mdp_core.geo.ipm import GeoLPSolution, solve_geo_lp
from mdp_core.geo.pairs import spanner_pairs
from mdp_core.geo.pricing import OutputSet, column_of
from mdp_core.geo.utility import GeoProblem, check_lp_inputs, check_same_outputs, check_target_count
from mdp_core.mechanisms.lp import chain_implied
from mdp_core.mechanisms.verify import VIOLATION_TOL, raise_repair, repair_mechanism

__all__ = ["OPTIMAL_MAX_TARGETS", "START_MASS", "coarser_start", "optimal_geo_mechanism"]

#: Largest target count :func:`optimal_geo_mechanism` accepts by default: an iteration factorises m n x n
#: blocks (0.45 s at 406 targets, 3.4 s at 1,251 with 106 outputs, gemm at ~115 GF/s).
OPTIMAL_MAX_TARGETS = 600
#: What to do instead, when a grid has more targets than that.
OPTIMAL_ADVICE = (
    "use depth 1 (depth 2 started by coarser_start), or the spanner LP (near-optimal, with a certified bound)"
)
#: A row of the full problem counts as broken above this absolute excess ``P[a, y] - r P[b, y]``.
ROW_TOL = 1e-10
#: Relative width of the certified bracket (verified mechanism against certified bound) under which the
#: optimum counts as exact: 1e-5 of 1 km is 1 cm, and HiGHS's own feasibility tolerance is 1e-7 absolute.
EXACT_GAP = 1e-5
#: Duality gap of the first round (it only has to reveal the missing rows).
_FIRST_ROUND_TOL = 1e-3
#: Later whole LPs stop at this certificate gap (the rest of the bracket is the privacy repair's: 2.6e-6).
_CERTIFY = EXACT_GAP / 3
#: Rows within this fraction of breaking are added too (``P[a] > (1 - margin) r P[b]``; without them the city
#: took 5-6 whole LPs). City depth 1, eps 1.5: margin 0.5 took 130 s, 0.25 104 s, 0.1 190 s.
NEAR_MARGIN = 0.25
#: At most this many near rows a round, the largest excess first (2.4 M near at eps 0.5). 1 M: city depth 1
#: eps 0.5 / 1.0 76.0 / 78.8 s against 66.6 / 83.0 (two rounds each); 0.25 M: eps 1.0 took three (109.5 s).
NEAR_ROWS = 500_000
#: ... or this many per pair of targets, when more (above ~440 targets): city depth 2, eps 1.5: 4.0 M near
#: rows closed the bracket in round 2 (506.6 s); 2.0 M needed a third LP (694 s).
NEAR_ROWS_PER_PAIR = 2.56
#: Spanner rows that round 1 meets with more than this share of their ratio to spare leave round 2's LP (any
#: it breaks come back). City depth 1, eps 1.5: 0.29 M of 0.54 M out, 68.5 -> 59.7 s; at 0.25: five rounds.
SPARE_SHARE = 0.5
#: ... unless more than this share are: at large eps x spacing the optimum's tails fall at the full rate
#: (most spanner rows bind) while round 1's iterate is smooth. City, dropping / keeping: depth 1, eps 1.5
#: (0.55 spare) 28 / 34 s, eps 2.0 (0.65) 99 / 44 s, eps 3.47 (0.89) 277 / 43 s; depth 2, eps 1.39 (0.19)
#: 419 / 540 s, eps 3.47 (0.66) not exact in 600 s / exact in 509 s.
SPARE_MOST = 0.6
#: Budget fractions a raising repair keeps back (:func:`_private_versions`). City, round 2's solution: eps
#: 1.5, breaks rows by up to 1e-4, raised at 1e-6 3.6e-6 above the certificate; depth 2, eps 3.47, 1.09 M rows
#: by up to 0.32, raised at 1e-6 / 3e-7 6.7e-6 / 6.2e-6 above the LP's optimum (the bracket closes at 3e-7).
_RAISE_SLACKS = (1e-6, 3e-7, 0.003)
#: An outputs-only pass also re-solves this many nearest outputs of each output with broken rows (they share
#: its targets' mass). City depth 1, eps 1.0: the 4 alone stopped 9e-6 short (135 s); with 8 each, 87 s.
PASS_NEIGHBOURS = 8
#: Outputs that round 1 gives less than this anywhere leave the later LPs (a block inversion an iteration
#: each), certified by pricing (:mod:`~mdp_core.geo.pricing`). City depth 1, eps 1.0: 61 of 117 (all < 8e-5).
LEAVE_OUT_BELOW = 1e-2
#: A left-out output whose pricing LP is below ``-_ENTER`` times the objective comes back into the LP.
_ENTER = 1e-7
#: Mass above which the coarser optimum's outputs start the finer one (:func:`coarser_start`; 1e-2: short).
START_MASS = 1e-6


def coarser_start(
    coarse: GeoProblem, fine: GeoProblem, eps: float, *, time_limit: float = 900.0
) -> np.ndarray:
    """Start set ``outputs`` for the exact optimum of ``fine`` (module docstring): the outputs to which the
    optimum of ``coarse`` (a level coarser, same outputs, ``leave_out=False``) gives > :data:`START_MASS`."""
    check_same_outputs(coarse, fine, "it cannot start its optimum")
    first = optimal_geo_mechanism(coarse, eps, time_limit=time_limit, leave_out=False)
    return np.flatnonzero(first.matrix.max(axis=0) > START_MASS)


def optimal_geo_mechanism(
    problem: GeoProblem,
    eps: float,
    *,
    time_limit: float = 900.0,
    dilation: float = 1.1,
    max_rounds: int = 12,
    max_targets: int = OPTIMAL_MAX_TARGETS,
    outputs: np.ndarray | None = None,
    leave_out: bool = True,
    progress: Progress = None,
) -> GeoMechanism:
    """The eps-mDP mechanism of least expected travel error over ALL pairs of targets (module docstring).

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    time_limit : float
        Seconds for the rounds; past it the last solution is raised to eps-mDP instead
        (:func:`~mdp_core.mechanisms.raise_repair`) and the bound is the best certificate so far.
    dilation : float
        Of the spanner whose rows start the row generation.
    max_rounds : int
        Row-generation rounds at most.
    max_targets : int
        Refuse larger problems (DataError).
    outputs : ndarray of int, optional
        Outputs to start from (those a coarser grid's optimum uses, say); the others are priced from the
        first round on and come into the LP when they pay. Default: all.
    leave_out : bool
        Leave the outputs round 1 gives less than :data:`LEAVE_OUT_BELOW` out of the later LPs (pricing
        certifies them). Never done to a start set ``outputs``; False keeps every output in every LP, so
        the result also shows which outputs carry small masses (a start set for the next finer grid: the
        city's depth-1 optimum gives 106 outputs more than 1e-6 so, against 84 with them left out, from
        which depth 2 brought 13 more in at round 3: a whole LP of 132 iterations).

    Returns
    -------
    GeoMechanism
        ``method="optimal"``, verified eps-mDP on all pairs (``info["violation"] <= 1e-9``). ``info``:
        ``lower_bound`` (a ``GeoBound``, ``exact=True`` when the mechanism's utility is within
        :data:`EXACT_GAP` of it), ``rounds``, ``rows`` (privacy rows of the last LP), ``broken_rows`` (rows
        of the full problem the last solution broke: 0 at the optimum), ``iterations`` and ``outputs_solved``
        per LP solved (its outputs: fewer than m once unused ones are left out, or in an outputs-only pass).
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    if not (isinstance(max_rounds, int) and max_rounds >= 1):
        raise DataError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    targets, cost = problem.targets_km, problem.cost
    n, m = cost.shape
    check_target_count(n, max_targets, "the exact optimum", OPTIMAL_ADVICE)
    if n == 1:  # no pair to protect (and no privacy row for the interior point)
        return _one_target(problem, eps)
    start = time.perf_counter()
    deadline = start + time_limit
    dist = problem.target_distances_km()
    rows = _privacy_rows(spanner_pairs(targets, dilation)[0], m)
    state = _Rounds(cost, dist, eps, deadline, progress)
    if outputs is not None:
        rows = state.outputs.start_with(rows, outputs)
    implied = chain_implied(dist)  # targets on a grid: 38 % of the city's pairs have one between them
    sol = state.full(rows, _FIRST_ROUND_TOL, None)
    p = state.outputs.expand(sol.p)
    broken = None  # the first solution's broken rows: scanned with the near ones below
    state.tell(0.3, f"exact optimum: round 1 done, {len(rows):,} rows")
    round_, whole = 1, True
    tried: set[tuple[int, ...]] = set()  # output sets already re-solved alone
    while round_ < max_rounds and time.perf_counter() <= deadline:
        round_ += 1
        if round_ == 2:
            spare = _spare_rows(p, rows, state.ratios(rows))
            rows, sol = rows[~spare], replace(sol, nu=sol.nu[~spare])
        rows = np.concatenate([rows, _new_rows(p, targets, eps, rows, broken, implied)])
        if round_ == 2 and leave_out and outputs is None:  # a start set is the caller's: kept whole
            rows, sol = state.outputs.leave_out(rows, sol, LEAVE_OUT_BELOW)
        entered = len(state.outputs.entering) > 0  # outputs whose pricing says they lower the objective
        rows, sol = state.outputs.enter(rows, sol)
        # the last solution is tight (its objective at the certificate) and only rows the LP never saw are
        # broken: re-solve just their outputs and neighbours (at least two: one alone has its row sums
        # fixed; never the same outputs twice); otherwise the whole LP again, warm
        columns = _pass_outputs(problem.outputs_km, broken, state.outputs.active)
        tight = float(np.sum(cost * p)) <= state.best * (1.0 + EXACT_GAP)
        polished = None
        if tight and not entered and len(columns) >= 2 and tuple(columns) not in tried:
            tried.add(tuple(columns))
            polished = state.columns(replace(sol, p=p[:, state.outputs.active]), rows, columns)
        whole = polished is None
        if whole:
            sol = state.full(rows, 1e-9, sol, certify=_CERTIFY)
        p = state.outputs.expand(sol.p if polished is None else polished)
        broken = _violated_rows(p, targets, eps, ROW_TOL, limit=len(rows) + 2 * n * m, skip=implied)
        state.keep_private(p, lower_only=len(broken) == 0)
        state.tell(min(0.9, 0.3 + 0.15 * round_), f"exact optimum: round {round_}, {len(rows):,} rows")
        # a whole LP's solution that breaks no row of the full problem is its optimum; a partial one
        # only shows it through the bracket
        if state.utility <= state.best * (1.0 + EXACT_GAP) or (
            whole and not len(broken) and not len(state.outputs.entering)
        ):
            break
    if state.matrix is None:  # out of time (or rounds) before any solution was made private
        state.keep_private(p, lower_only=False)
    if state.matrix is None:  # float rounding beyond the repairs' margins: never unproven
        raise DataError("the optimal LP solution could not be made eps-mDP")
    end = time.perf_counter()
    exact = bool(state.utility <= state.best * (1.0 + EXACT_GAP))
    note = _method_note(round_, len(rows), state.utility, state.best, exact)
    lower = GeoBound(max(state.best, 0.0), exact, note, end - start, len(rows), sol.objective)
    report(progress, 1.0, "exact optimum: done")
    return GeoMechanism(
        targets,
        problem.outputs_km,
        state.matrix,
        eps,
        end - start,
        method="optimal",
        stages={"rounds": end - start},
        info={
            "lower_bound": lower,
            "rounds": round_,
            "rows": len(rows),
            "broken_rows": 0 if broken is None else len(broken),
            "iterations": state.iterations,
            "outputs_solved": state.outputs_solved,
            "violation": state.violation,
        },
    )


def _one_target(problem: GeoProblem, eps: float) -> GeoMechanism:
    """The optimum of a one-target grid: its cheapest output, always (exact, no rows)."""
    matrix = np.zeros_like(problem.cost)
    matrix[0, int(np.argmin(problem.cost[0]))] = 1.0
    bound = GeoBound(float(problem.cost.min()), exact=True, method="exact optimum (one target)", seconds=0.0)
    info = {"lower_bound": bound, "rounds": 0, "rows": 0, "broken_rows": 0, "violation": 0.0}
    info |= {"iterations": [], "outputs_solved": []}
    return GeoMechanism(problem.targets_km, problem.outputs_km, matrix, eps, 0.0, method="optimal", info=info)


class _Rounds:
    """What the rounds share: the problem, the outputs in the LP, the best certificate, the best verified
    mechanism so far. Solutions of the LPs (``GeoLPSolution.p``) have one column per output in the LP, in
    the order of ``outputs.active``; ``outputs.expand`` gives the mechanism over all outputs."""

    def __init__(
        self, cost: np.ndarray, dist: np.ndarray, eps: float, deadline: float, progress: Progress
    ) -> None:
        self.cost, self.dist, self.eps, self.deadline = cost, dist, eps, deadline
        self.progress, self.last, self.start = progress, (0.0, "exact optimum: round 1"), time.perf_counter()
        self.best = -np.inf
        self.matrix: np.ndarray | None = None
        self.violation, self.utility = np.inf, np.inf
        self.iterations: list[int] = []  # per LP solved
        self.outputs_solved: list[int] = []  # outputs in the LP, fewer for the outputs of broken rows
        self.outputs = OutputSet.every(cost.shape[1])  # in the LP, and the rows of those left out

    def tell(self, fraction: float, message: str) -> None:
        self.last = (max(fraction, self.last[0]), message)  # never back: the ticks may have gone further
        report(self.progress, *self.last)

    def _tick(self, *_: object) -> None:
        """Each solver iteration (a stop reaches the solve here): the last report, moved on with the time."""
        spent = time.perf_counter() - self.start
        share = min(0.9, 0.9 * spent / max(self.deadline - self.start, 1e-9))
        self.last = (max(self.last[0], share), self.last[1])
        report(self.progress, self.last[0], f"{self.last[1]}, {spent:.0f} s")

    def _solve(
        self,
        columns: np.ndarray,
        rows: np.ndarray,
        ratios: np.ndarray,
        tol: float,
        start: GeoLPSolution | None,
        certify: float | None = None,
        row_sums: np.ndarray | None = None,
    ) -> GeoLPSolution:
        """The LP over the outputs ``columns`` until the deadline; a caller's stop reaches every iteration."""
        sol = solve_geo_lp(
            self.cost[:, columns],
            rows,
            ratios,
            tol=tol,
            deadline=self.deadline,
            start=start,
            row_sums=row_sums,
            certify=certify,
            progress=self._tick,
        )
        self.iterations.append(sol.iterations)
        self.outputs_solved.append(len(columns))
        return sol

    def ratios(self, rows: np.ndarray) -> np.ndarray:
        return np.exp(self.eps * self.dist[rows[:, 0], rows[:, 1]])

    def full(
        self, rows: np.ndarray, tol: float, start: GeoLPSolution | None, certify: float | None = None
    ) -> GeoLPSolution:
        """The LP on ``rows`` over the outputs in it; its multipliers, with those that price the left-out
        outputs, certify a bound (its rows are a subset)."""
        ratios = self.ratios(rows)
        sol = self._solve(
            self.outputs.active, self.outputs.positions(rows), ratios, tol, start, certify=certify
        )
        self.best = max(self.best, self._certificate(rows, ratios, sol))
        return sol

    def _certificate(self, rows: np.ndarray, ratios: np.ndarray, sol: GeoLPSolution) -> float:
        left_ratios = self.ratios(self.outputs.left_rows)
        return self.outputs.certificate(self.cost, rows, ratios, left_ratios, sol, enter_below=_ENTER)

    def columns(self, last: GeoLPSolution, rows: np.ndarray, columns: np.ndarray) -> np.ndarray | None:
        """The last solution ``last.p`` with the outputs ``columns`` (all in the LP) re-solved on
        ``rows``, the other outputs held fixed (their mass leaves each target ``1 - sum`` for these): an LP
        of len(columns) blocks, started near ``last`` (its multipliers of the rows it had and of the row
        sums). The city at eps 1.5 (margin 0.5): the 27 outputs that 3,617 rows broke, re-solved, gave the
        whole LP's objective to 1e-7 (warm 82 iterations, cold 130). None when the fixed outputs leave a
        target (next to) no mass, or no private columns."""
        p = last.p
        mine = self.outputs.position()[columns]  # their columns in the LP
        budget = 1.0 - np.delete(p, mine, axis=1).sum(axis=1)
        if budget.min() <= 1e-9:
            return None
        position = column_of(columns, self.cost.shape[1])
        chosen = np.isin(rows[:, 2], columns)
        sub = rows[chosen]
        ratios = self.ratios(sub)
        sub = np.column_stack([sub[:, :2], position[sub[:, 2]]])
        kept = chosen[: len(last.nu)]  # the rows ``last`` was solved on come first, in the same order
        start = replace(last, p=p[:, mine], nu=last.nu[kept])
        sol = self._solve(columns, sub, ratios, 1e-9, start, row_sums=budget)
        # what the held outputs leave need not admit private columns (it is not log-Lipschitz in general):
        # then the solve cannot meet its row sums, and the whole LP is solved again instead
        if np.abs(sol.p.sum(axis=1) - budget).max() > 1e-9:
            return None
        out = p.copy()
        out[:, mine] = sol.p
        return out

    def keep_private(self, p: np.ndarray, *, lower_only: bool) -> None:
        """Keep ``p`` made exactly eps-mDP when it beats the best verified mechanism so far (its all-zero
        columns, the left-out outputs', stay zero and are skipped: no pair has anything to protect there)."""
        used = p.max(axis=0) > 0.0
        for private, violation in _private_versions(p[:, used], self.dist, self.eps, lower_only=lower_only):
            candidate = np.zeros_like(p)
            candidate[:, used] = private
            utility = float(np.sum(self.cost * candidate))
            if violation <= VIOLATION_TOL and utility < self.utility:
                self.matrix, self.violation, self.utility = candidate, violation, utility


def _new_rows(
    p: np.ndarray,
    targets: np.ndarray,
    eps: float,
    rows: np.ndarray,
    broken: np.ndarray | None,
    implied: np.ndarray,
) -> np.ndarray:
    """Rows of the full problem not in ``rows`` that ``p`` breaks (``broken``, when already scanned), and
    up to :data:`NEAR_ROWS` (:data:`NEAR_ROWS_PER_PAIR` per pair, when more) more that it comes within
    :data:`NEAR_MARGIN` of breaking (largest excess first); never those of the ``implied`` pairs."""
    n, m = p.shape
    if broken is None:
        broken = _violated_rows(p, targets, eps, ROW_TOL, limit=n * n * m, skip=implied)
    cap = max(NEAR_ROWS, round(NEAR_ROWS_PER_PAIR * n * n))
    limit = len(broken) + cap
    near = _violated_rows(p, targets, eps, ROW_TOL, limit=limit, relative=NEAR_MARGIN, skip=implied)
    both = np.concatenate([broken, near])
    keys, first = np.unique(_row_keys(both, n, m), return_index=True)
    return both[first[~np.isin(keys, _row_keys(rows, n, m))]]


def _spare_rows(p: np.ndarray, rows: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """Mask of the rows that ``p`` meets with more than :data:`SPARE_SHARE` of their ratio to spare; none
    when more than :data:`SPARE_MOST` of them are."""
    spare = p[rows[:, 0], rows[:, 2]] < (1.0 - SPARE_SHARE) * ratios * p[rows[:, 1], rows[:, 2]]
    return spare if spare.mean() <= SPARE_MOST else np.zeros_like(spare)


def _pass_outputs(outputs_km: np.ndarray, broken: np.ndarray | None, active: np.ndarray) -> np.ndarray:
    """The outputs (of ``active``) a pass re-solves: those of the ``broken`` rows and their
    :data:`PASS_NEIGHBOURS` nearest each while the union stays within half of all outputs; none when they
    alone are over half of ``active`` (a whole LP then certifies too: city depth 2, eps 3.47, a pass over
    105 of 112 outputs took 364 s, and the whole LP after it was still needed)."""
    own = np.empty(0, dtype=np.int64) if broken is None else np.unique(broken[:, 2])
    if len(own) == 0 or len(np.intersect1d(own, active)) > len(active) // 2:
        return np.empty(0, dtype=np.int64)
    _, near = cKDTree(outputs_km).query(outputs_km[own], k=min(PASS_NEIGHBOURS + 1, len(outputs_km)))
    union = np.union1d(own, np.ravel(near))
    return np.intersect1d(union if len(union) <= len(outputs_km) // 2 else own, active)


def _method_note(rounds: int, rows: int, utility: float, best: float, exact: bool) -> str:
    """The bound in words: row generation's size and, short of the optimum, how wide its bracket is."""
    note = f"row generation ({rounds} rounds, {rows:,} rows"
    if exact:
        return f"exact optimum by {note})"
    if best <= 0.0:
        return f"{note}; stopped before any certificate)"
    bracket = utility / best - 1.0
    return f"certificate of {note}; stopped short: the optimum is at most {bracket:.2%} below its mechanism)"


def _row_keys(rows: np.ndarray, n: int, m: int) -> np.ndarray:
    return (rows[:, 0] * n + rows[:, 1]) * m + rows[:, 2]


def _private_versions(
    p: np.ndarray, dist: np.ndarray, eps: float, *, lower_only: bool
) -> list[tuple[np.ndarray, float]]:
    """``p`` made exactly eps-mDP, with its exact violation: by lowering the entries that break a ratio
    (what an optimal solution needs: it breaks none beyond ROW_TOL) and, while rows are still broken or
    when lowering does not settle (seen on a 26-target grid: 2e-6 left after 50 rounds), also by raising
    (:func:`~mdp_core.mechanisms.raise_repair` at each of :data:`_RAISE_SLACKS`, only the first when no
    row is broken; its last resort, a mix with the uniform mechanism, always ends private): keep the best."""
    versions = [repair_mechanism(p, dist, eps)[:2]]
    if not lower_only or versions[0][1] > VIOLATION_TOL:
        # an optimum needs next to no budget kept back; a solution far from it, a little more
        slacks = _RAISE_SLACKS if not lower_only else _RAISE_SLACKS[:1]
        versions += [raise_repair(p, dist, eps, slack=slack)[:2] for slack in slacks]
    return versions
