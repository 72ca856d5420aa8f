"""How far from the best possible: a certified lower bound on the travel error of every eps-mDP mechanism.

The problem (DESIGN.md "Geo optimality"): over all mechanisms P (n targets x m outputs, rows on the simplex)
that are eps-mDP for the Euclidean metric on the targets,

    OPT = min  sum_x pi(x) sum_y P[x, y] L(x, y)
          s.t. P[a, y] <= exp(eps d(a, b)) P[b, y]     for all targets a != b and outputs y.

**Relaxation.** Keeping only the rows of some pairs E (each target with its ``neighbours`` nearest targets,
its axis neighbours on the fine grid and its nearest target in each of 12 sectors, both directions;
:func:`~mdp_core.geo.pairs.relaxation_pairs`) enlarges the feasible set, so its optimum is
<= OPT. Row generation adds every violated row of the full problem and re-solves; when the relaxation's
optimum breaks no row of the full problem (checked on all pairs, up to the solver's tolerance), it is the
exact optimum (``exact=True``).

**Certification (why the number is a bound, whatever the solver's accuracy).** An LP solver meets rows
only to ~1e-7 and its objective is not itself a bound. We never report it. For any multipliers nu >= 0 on
the kept privacy rows (a, b, y): row_ab,y(P) = P[a, y] - r_ab P[b, y] <= 0, weak Lagrangian duality gives,
for every feasible P,

    c'P >= c'P + sum nu * row(P) = sum_x sum_y P[x, y] (c + A'nu)[x, y] >= sum_x min_y (c + A'nu)[x, y],

with c[x, y] = pi(x) L(x, y), because each row of P is a probability vector. The right-hand side is a
valid lower bound for ANY nu >= 0; we take nu from HiGHS's row duals (clipped at 0) and evaluate the
formula in float64 ourselves. The float rounding of that evaluation is below 64 machine epsilons of the
absolute terms per entry; we subtract that margin (:data:`ROUNDING_MARGIN`) explicitly. So the bound holds
exactly, and it is tight to the degree the duals are accurate.

**Aggregation (city scale).** Above ``aggregate_above`` targets the bound is taken on representatives
(:mod:`mdp_core.geo.aggregation`): a certified bound of the representatives' problem with the aggregated
cost, plus its constant, for any thresholds; the best of a few threshold rounds. Never exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from mdp_core._highs import highs_model
from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo.aggregation import aggregate_cost, knapsack_thresholds, representatives
from mdp_core.geo.pairs import relaxation_pairs
from mdp_core.geo.utility import GeoProblem, check_lp_inputs

__all__ = [
    "AGGREGATE_ABOVE",
    "AGGREGATE_ABOVE_SHORT",
    "REPRESENTATIVES",
    "ROUNDING_MARGIN",
    "GeoBound",
    "aggregate_cost",
    "certified_bound",
    "geo_lower_bound",
    "knapsack_thresholds",
    "relaxation_pairs",
    "representatives",
]

#: Relaxations with at most this many privacy rows are solved by interior point (IPX), larger ones by PDLP.
IPM_ROWS = 100_000
#: Default target count above which the bound aggregates onto representatives (module docstring), for
#: time limits from 45 s on; below 45 s :data:`AGGREGATE_ABOVE_SHORT`. Measured at depth 2 (60 s): the
#: 15 km city (1,251 targets) 0.960 km without aggregation vs 0.867 with it at eps 1.5, 1.765 vs 1.738 at
#: eps 0.5; the district (1,334) 0.353 vs 0.355. In 20 s the district needs it (0.315 vs 0.353 at eps
#: ln 2 / 0.5 km); at depth 3 (3,469) PDLP does not converge in 60 s without it (0.819 vs 0.840).
AGGREGATE_ABOVE = 1_500
#: Target count above which a bound of less than 45 s aggregates (the map page's 20 s bound).
AGGREGATE_ABOVE_SHORT = 1_000
#: Default number of representatives of an aggregated bound.
REPRESENTATIVES = 150
#: Relative rounding margin (machine epsilons) subtracted from the evaluated Lagrangian bound.
ROUNDING_MARGIN = 64 * np.finfo(np.float64).eps


@dataclass(frozen=True)
class GeoBound:
    """A certified lower bound (km) on the expected travel error of every eps-mDP mechanism.

    Attributes
    ----------
    value : float
        The bound in km (never above the utility of any eps-mDP mechanism with these outputs).
    exact : bool
        True when row generation reached the optimum of the full problem: the certified bound is within a
        relative 1e-4 of the last LP's objective (measured against an independent full LP: within 1.4e-13).
    method : str
        How it was obtained, e.g. ``"relaxation k=8 + 3 rounds of row generation"``.
    seconds : float
        Wall time (s).
    rows : int
        Privacy rows in the last LP.
    lp_objective : float
        The solver's objective of the last LP (not a bound by itself; for comparison).
    """

    value: float
    exact: bool
    method: str
    seconds: float
    rows: int = 0
    lp_objective: float = float("nan")


def certified_bound(cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, nu: np.ndarray) -> float:
    """Weak-duality bound ``sum_x min_y (c + A'nu)[x, y]`` minus the rounding margin (module docstring).

    Parameters
    ----------
    cost : ndarray, shape (n, m)
        ``c[x, y] = pi(x) L(x, y)``.
    rows : ndarray of int, shape (r, 3)
        Privacy rows (a, b, y): ``P[a, y] - ratio * P[b, y] <= 0``.
    ratios : ndarray, shape (r,)
        ``exp(eps d(a, b))`` per row.
    nu : ndarray, shape (r,)
        Multipliers; negative entries are clipped to 0 (any nu >= 0 gives a valid bound).
    """
    cost = np.asarray(cost, dtype=np.float64)
    nu = np.maximum(np.asarray(nu, dtype=np.float64), 0.0)
    reduced = _reduced_costs(cost, rows, ratios, nu)
    scale = np.abs(cost).copy()
    np.add.at(scale, (rows[:, 0], rows[:, 2]), nu)
    np.add.at(scale, (rows[:, 1], rows[:, 2]), ratios * nu)
    per_row = reduced.min(axis=1)
    margin = ROUNDING_MARGIN * (scale.max(axis=1) + np.abs(per_row)).sum()
    return float(np.sum(per_row) - margin)


def _reduced_costs(cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """``c + A'nu``: every row (a, b, y) adds ``nu`` at (a, y) and ``-ratio nu`` at (b, y)."""
    reduced = cost.copy()
    np.add.at(reduced, (rows[:, 0], rows[:, 2]), nu)
    np.add.at(reduced, (rows[:, 1], rows[:, 2]), -ratios * nu)
    return reduced


def _privacy_rows(pairs: np.ndarray, m: int) -> np.ndarray:
    """Both directions of every pair, for every output: (a, b, y) rows, shape (2 |pairs| m, 3)."""
    directed = np.concatenate([pairs, pairs[:, ::-1]])
    k = len(directed)
    return np.column_stack([np.repeat(directed, m, axis=0), np.tile(np.arange(m), k)])


def _row_ratios(targets_km: np.ndarray, rows: np.ndarray, eps: float) -> np.ndarray:
    """``exp(eps d(a, b))`` of every privacy row (a, b, y), Euclidean distance in km."""
    return np.exp(eps * np.linalg.norm(targets_km[rows[:, 0]] - targets_km[rows[:, 1]], axis=1))


def _relaxation_lp(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray
) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray]:
    """The LP's constraint matrix and row bounds for HiGHS: privacy rows (<= 0), then row sums (= 1)."""
    n, m = cost.shape
    r = len(rows)
    var_a = rows[:, 0] * m + rows[:, 2]
    var_b = rows[:, 1] * m + rows[:, 2]
    priv = sp.csr_matrix(
        (np.concatenate([np.ones(r), -ratios]), (np.tile(np.arange(r), 2), np.concatenate([var_a, var_b]))),
        shape=(r, n * m),
    )
    sums = sp.csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), np.arange(n * m))), shape=(n, n * m))
    lower = np.concatenate([np.full(r, -highspy.kHighsInf), np.ones(n)])
    upper = np.concatenate([np.zeros(r), np.ones(n)])
    return sp.vstack([priv, sums], format="csc"), lower, upper


def _solve(
    cost: np.ndarray, rows: np.ndarray, ratios: np.ndarray, deadline: float
) -> tuple[np.ndarray, np.ndarray, float, str]:
    """The relaxation LP with HiGHS (IPX up to ``IPM_ROWS`` rows, else PDLP): (P, nu, objective, status).

    Measured on the district at depth 1 (385 targets, 365k rows): IPM (IPX) and HiPO did not converge in
    60-120 s; PDLP's multipliers certified 0.395 / 0.400 / 0.404 km after 15 / 30 / 60 s (tree 0.414).
    PDLP stops at ``deadline`` wherever it is: its multipliers still certify a bound (module docstring).
    """
    (n, m), r = cost.shape, len(rows)
    solver = "ipm" if r <= IPM_ROWS else "pdlp"
    h = highs_model(*_relaxation_lp(cost, rows, ratios), cost.ravel(), solver=solver)
    h.setOptionValue("time_limit", max(deadline - time.perf_counter(), 1.0))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    if len(sol.col_value) != n * m:  # no solution at all (ratios e^(eps d) beyond the solver's range)
        raise DataError(
            f"the LP solver returned no solution (HiGHS status {status!r}): the privacy ratios reach "
            f"e^{np.log(ratios.max(initial=1.0)):.0f}; try a smaller eps"
        )
    p = np.asarray(sol.col_value).reshape(n, m)
    nu = -np.asarray(sol.row_dual)[:r]  # HiGHS: duals of binding <= rows are <= 0 in a minimisation
    return p, nu, float(h.getInfo().objective_function_value), status


def _violated_rows(
    p: np.ndarray,
    targets: np.ndarray,
    eps: float,
    tol: float,
    limit: int,
    relative: float = 0.0,
    skip: np.ndarray | None = None,
) -> np.ndarray:
    """Rows (a, b, y) of the full problem with ``P[a, y] - (1 - relative) r P[b, y] > tol``, worst first:
    the rows ``p`` breaks by more than ``tol`` (absolute) and, with ``relative > 0``, also those within that
    fraction of breaking (the rows a nearby solution is likely to break). Pairs with ``skip[a, b]`` (n x n
    boolean: rows implied by others, :func:`~mdp_core.mechanisms.lp.chain_implied`) are left out."""
    n, m = p.shape
    chunk = max(1, 4_000_000 // (n * m))
    found, worst = [], []
    for lo in range(0, n, chunk):
        d = np.linalg.norm(targets[lo : lo + chunk, None, :] - targets[None, :, :], axis=2)  # (c, n)
        ratio = (1.0 - relative) * np.exp(eps * d)
        ratio[np.arange(len(d)), np.arange(lo, lo + len(d))] = 1e300  # a == b is no row
        if skip is not None:
            ratio[skip[lo : lo + chunk]] = 1e300
        excess = p[lo : lo + chunk, None, :] - ratio[:, :, None] * p[None, :, :]  # (c, n, m)
        ia, ib, iy = np.nonzero(excess > tol)
        if len(ia):
            found.append(np.column_stack([ia + lo, ib, iy]))
            worst.append(excess[ia, ib, iy])
    if not found:
        return np.empty((0, 3), dtype=np.int64)
    rows, worst_v = np.concatenate(found), np.concatenate(worst)
    return rows[np.argsort(-worst_v)[:limit]]


def aggregate_threshold(time_limit: float) -> int:
    """Targets above which :func:`geo_lower_bound` aggregates by default, for a bound of ``time_limit`` s."""
    return AGGREGATE_ABOVE if time_limit >= 45 else AGGREGATE_ABOVE_SHORT


def geo_lower_bound(
    problem: GeoProblem,
    eps: float,
    *,
    neighbours: int = 8,
    time_limit: float = 60.0,
    row_generation: bool | None = None,
    max_rows: int = 6_000_000,
    aggregate_above: int | None = None,
    representatives_count: int | None = None,
    progress: Progress = None,
) -> GeoBound:
    """Certified lower bound (km) on the expected travel error of every eps-mDP mechanism on these outputs.

    Parameters
    ----------
    problem : GeoProblem
        Targets (Euclidean metric, km), outputs, prior and travel loss.
    eps : float
        Privacy budget in 1/km.
    neighbours : int
        Nearest targets whose privacy rows the relaxation keeps (plus the axis neighbours on the grid).
    time_limit : float
        Seconds for the whole computation (LP solves; row generation stops when it runs out).
    row_generation : bool, optional
        Add violated rows of the full problem and re-solve until none is left (the exact optimum).
        Default: only when the full pair check is cheap (n^2 m <= 2e8).
    max_rows : int
        Largest relaxation (privacy rows, memory): beyond it only the axis neighbours are kept
        (``method`` then says ``k=0``); if even that is larger, DataError.
    aggregate_above : int, optional
        Above this many targets (default :data:`AGGREGATE_ABOVE`, :data:`AGGREGATE_ABOVE_SHORT` below 45 s)
        the bound is taken on
        ``representatives_count`` representatives (module docstring, "Aggregation"); never exact then.
    representatives_count : int, optional
        Representatives of an aggregated bound. Default :data:`REPRESENTATIVES` below 45 s, twice that from
        45 s on (measured: in 20 s 150 gave the better bound on the district at depth 3, 7 % vs 8 % below
        MLaEt-O; in 60 s 300 did on the 15 km city, 16 % vs 17 % at depth 2 and eps 0.5).

    Returns
    -------
    GeoBound
        ``value`` is certified by weak duality (module docstring), never by the solver's objective.
    """
    eps = check_lp_inputs(problem, eps, time_limit)
    if not isinstance(neighbours, int | np.integer) or neighbours < 0:
        raise DataError(f"neighbours must be a non-negative integer, got {neighbours!r}")
    if representatives_count is None:
        representatives_count = REPRESENTATIVES if time_limit < 45 else 2 * REPRESENTATIVES
    if not isinstance(representatives_count, int | np.integer) or representatives_count < 2:
        raise DataError(f"representatives_count must be an integer >= 2, got {representatives_count!r}")
    start = time.perf_counter()
    deadline = start + float(time_limit)
    targets = problem.targets_km
    cost = problem.cost
    n = len(targets)
    if aggregate_above is None:
        aggregate_above = aggregate_threshold(time_limit)
    fine_ij = problem.grid.fine_ij if len(problem.grid.fine_ij) == n else None
    if n > aggregate_above:
        return _aggregated_bound(
            problem,
            eps,
            neighbours,
            representatives_count,
            start,
            deadline,
            row_generation,
            max_rows,
            progress,
        )
    relax = _relaxation_bound(
        targets, fine_ij, cost, eps, neighbours, deadline, row_generation, max_rows, progress
    )
    kind = f"relaxation k={relax.neighbours}"
    if relax.row_generation and relax.rounds > 1:
        kind += f" + {relax.rounds - 1} round(s) of row generation"
    if relax.exact:
        kind = "exact optimum (" + kind + ")"
    report(progress, 1.0, "lower bound: done")
    return GeoBound(
        value=max(relax.value, 0.0),
        exact=relax.exact,
        method=kind,
        seconds=time.perf_counter() - start,
        rows=len(relax.rows),
        lp_objective=relax.objective,
    )


#: Threshold rounds of an aggregated bound (module docstring): the plain aggregation, then knapsack ones.
AGGREGATION_ROUNDS = 3


def _aggregated_bound(
    problem: GeoProblem,
    eps: float,
    neighbours: int,
    count: int,
    start: float,
    deadline: float,
    row_generation: bool | None,
    max_rows: int,
    progress: Progress,
) -> GeoBound:
    """The bound on representatives (module docstring, "Aggregation"), best of the threshold rounds."""
    report(progress, 0.02, "lower bound: aggregating targets onto representatives")
    targets, cost = problem.targets_km, problem.cost
    n = len(targets)
    reps = representatives(targets, count)
    best, thresholds, rows, relax = -np.inf, None, None, None
    for k in range(AGGREGATION_ROUNDS):
        agg, constant, _, magnitude = aggregate_cost(targets, cost, reps, eps, thresholds)
        # float rounding of the aggregation and of the constant (sums of <= n terms of either sign)
        margin = (n + 64) * np.finfo(np.float64).eps * magnitude
        # the first round may take half the time (it builds the rows the next rounds start from)
        left = deadline - time.perf_counter()
        round_deadline = time.perf_counter() + (left / 2 if k == 0 else left / (AGGREGATION_ROUNDS - k))
        relax = _relaxation_bound(
            targets[reps],
            None,
            agg,
            eps,
            neighbours,
            round_deadline,
            row_generation,
            max_rows,
            progress,
            rows,
        )
        best = max(best, relax.value + constant - margin)
        if time.perf_counter() >= deadline - 1.0:
            break
        rows = relax.rows
        thresholds = knapsack_thresholds(targets, cost, reps, eps, relax.p)
    assert relax is not None
    report(progress, 1.0, "lower bound: done")
    return GeoBound(
        value=max(best, 0.0),
        exact=False,
        method=f"aggregated onto {len(reps)} of {n} targets, relaxation k={relax.neighbours}, "
        f"{k + 1} threshold round(s)",
        seconds=time.perf_counter() - start,
        rows=len(relax.rows),
        lp_objective=relax.objective + constant,
    )


@dataclass(frozen=True, eq=False)
class _Relaxation:
    value: float  # certified
    exact: bool
    rounds: int
    rows: np.ndarray  # the last LP's privacy rows
    p: np.ndarray  # the last LP's solution (not private by itself)
    objective: float
    neighbours: int
    row_generation: bool


def _relaxation_bound(
    targets: np.ndarray,
    fine_ij: np.ndarray | None,
    cost: np.ndarray,
    eps: float,
    neighbours: int,
    deadline: float,
    row_generation: bool | None,
    max_rows: int,
    progress: Progress,
    rows: np.ndarray | None = None,
) -> _Relaxation:
    """Relaxation + row generation on (targets, cost), starting from ``rows`` when given."""
    n, m = cost.shape
    if row_generation is None:
        row_generation = n * n * m <= 2e8
    if rows is None:
        report(progress, 0.05, "lower bound: choosing privacy rows")
        pairs = relaxation_pairs(targets, neighbours, fine_ij)
        rows = _privacy_rows(pairs, m)
        if len(rows) > max_rows and neighbours > 0:  # too large: the axis neighbours alone (weaker)
            neighbours = 0
            pairs = relaxation_pairs(targets, 0, fine_ij)
            rows = _privacy_rows(pairs, m)
    if len(rows) > max_rows:
        raise DataError(
            f"the relaxation has {len(rows):,} privacy rows (more than {max_rows:,}); use fewer neighbours "
            "or a smaller depth"
        )
    best, exact, rounds, objective, status = -np.inf, False, 0, float("nan"), "not run"
    best_p = np.full(cost.shape, 1.0 / m)
    while True:
        rounds += 1
        d = np.linalg.norm(targets[rows[:, 0]] - targets[rows[:, 1]], axis=1)
        ratios = np.exp(eps * d)
        report(progress, min(0.9, 0.1 + 0.2 * rounds), f"lower bound: LP round {rounds} ({len(rows):,} rows)")
        p, nu, objective, status = _solve(cost, rows, ratios, deadline)
        if status not in {"Optimal", "Time limit reached"}:
            break
        value = certified_bound(cost, rows, ratios, nu)
        if value > best:
            best, best_p = value, p
        if status != "Optimal" or not row_generation:
            break
        new = _violated_rows(np.maximum(p, 0.0), targets, eps, 1e-7, limit=max(len(rows) // 2, 50_000))
        merged = np.unique(np.concatenate([rows, new]), axis=0) if len(new) else rows
        if len(merged) == len(rows):  # no row of the full problem is missing: this is its optimum
            exact = value >= (1.0 - 1e-4) * objective
            break
        if time.perf_counter() >= deadline or len(merged) > max_rows:
            break
        rows = merged
    if not np.isfinite(best):
        raise DataError(f"the relaxation LP failed: HiGHS status {status!r}")
    return _Relaxation(best, exact, rounds, rows, best_p, objective, neighbours, bool(row_generation))
