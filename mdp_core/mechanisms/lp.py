"""The LP-optimal eps-mDP mechanism on finite domains (000 Definition 3, Eq. 3), exact and fast.

The LP: minimise ``sum_x prior[x] sum_y P[x, y] loss[x, y]`` subject to
``P[x, y] <= exp(eps d(x, x')) P[x', y]`` for all ``x != x', y`` and rows of ``P`` on the simplex.
The full model has ``|X|^2 |Y|`` privacy rows; it is solved exactly with far fewer by

1. dropping every pair ``(x, x')`` implied by a chain ``d(x, z) + d(z, x') = d(x, x')`` (the rows for
   ``(x, z)`` and ``(z, x')`` multiply to the row for ``(x, x')``);
2. dropping every output whose loss is at least another output's for every input (its mass can move
   there at no cost: the columns of ``P`` form a convex cone);
3. column generation over outputs (:mod:`mdp_core._colgen`): a master LP over an active set of outputs
   (first those EM + Bayesian remapping uses), with row generation of its privacy rows;
   the duals of the row sums price every other output exactly (an O(n) dynamic programme on tree
   metrics such as ordinal chains, a closed form on nominal metrics, tents then a pricing LP otherwise),
   and outputs enter until none prices out -- the master optimum is then the optimum of the full LP,
   certified by a Lagrangian lower bound; on tree metrics a Dantzig-Wolfe master over rays of the
   per-output cone (:mod:`mdp_core._rays`, no privacy rows at all) is tried first, and on discrete
   metrics (nominal attributes) the master has one floor per output instead of any privacy row
   (:mod:`mdp_core.mechanisms._floor`);
4. along an ascending eps grid each grid point gets a fresh master seeded with the previous optimum's
   outputs, binding rows and basis (one warm master accumulating rows was measured slower); the ray
   master restarts from the previous optimum's rays, rescaled to the new eps;
5. a repair step (log-Lipschitz lower envelope per column, then row normalisation) turns the solver's
   output into a matrix whose :func:`~mdp_core.mechanisms.mdp_violation` is ``<= 1e-9``, verified before
   it is returned (the ray master's columns lie in the cone: only its rows are normalised).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from mdp_core._validation import (
    Progress,
    as_float_array,
    check_distance_matrix,
    check_eps,
    check_loss_matrix,
    check_positive,
    check_prior,
    part,
    report,
)
from mdp_core.errors import DataError
from mdp_core.mechanisms._colgen import ColumnGeneration, MasterSolution, WarmStart
from mdp_core.mechanisms._floor import FloorMaster
from mdp_core.mechanisms._pricing import (
    RETRY_LOG_FACTOR,
    chain_free_pairs,
    chain_implied,
    discrete_step,
    precision_hint,
    tree_order,
    undominated_outputs,
)
from mdp_core.mechanisms._rays import RayMaster
from mdp_core.mechanisms.finite import bayesian_remap, exponential_mechanism
from mdp_core.mechanisms.verify import (
    ROW_SUM_TOL,
    VIOLATION_TOL,
    mdp_violation,
    raise_repair,
    repair_mechanism,
)

__all__ = [
    "MechanismResult",
    "chain_free_pairs",
    "chain_implied",
    "optimal_mechanism",
    "optimal_mechanisms",
]


@dataclass(frozen=True, eq=False)
class MechanismResult:
    """Outcome of an LP-optimal mechanism solve.

    Attributes
    ----------
    matrix : ndarray (|X|, |Y|)
        The repaired, verified mechanism (``mdp_violation <= 1e-9``); NaN-filled when ``success`` is False.
    objective : float
        Expected loss of ``matrix`` (the value the mechanism really achieves).
    success : bool
        True when the LP was solved to optimality and the repaired matrix passed verification.
    status : str
        HiGHS model status (or ``"size limit"``, ``"repair failed"``, ...).
    message : str
        A sentence a person can read (shown by the pages on failure).
    seconds : float
        Wall-clock time of this solve (for a path: this grid point only).
    lp_objective : float
        Objective the solver reported for the final LP (the optimum up to solver tolerances).
    violation : float
        ``mdp_violation(matrix, dist_in, eps)``.
    rows : int
        Privacy rows in the final master LP (after pair elimination, column and row generation).
    full_rows : int
        Privacy rows of the full LP, ``|X| (|X| - 1) |Y|``.
    rounds : int
        Master solves (row- and column-generation rounds).
    eps : float
        The budget.
    extra : dict
        Diagnostics: ``outputs`` (active outputs), ``lower_bound`` (certified bound on the LP optimum),
        ``pricing`` (the master: ``"tree rays"``, ``"nominal floor"``, or the block master's ``"tree"``,
        ``"nominal"`` or ``"general"``), ``repair_rounds``.
    """

    matrix: np.ndarray
    objective: float
    success: bool
    status: str
    message: str
    seconds: float
    lp_objective: float = float("nan")
    violation: float = float("nan")
    rows: int = 0
    full_rows: int = 0
    rounds: int = 0
    eps: float = float("nan")
    extra: dict = field(default_factory=dict)


def _validate(
    prior: ArrayLike, loss: ArrayLike, dist_in: ArrayLike, max_inputs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = check_loss_matrix(loss, name="loss")
    d = check_distance_matrix(dist_in, "dist_in")
    if d.shape[0] != c.shape[0]:
        raise DataError(f"dist_in must be {c.shape[0]} x {c.shape[0]} to match loss rows, got {d.shape}")
    p = check_prior(prior, c.shape[0])
    return p, c, d


def _failure(
    shape: tuple[int, int], status: str, message: str, seconds: float, eps: float
) -> MechanismResult:
    return MechanismResult(
        matrix=np.full(shape, np.nan),
        objective=float("nan"),
        success=False,
        status=status,
        message=message,
        seconds=seconds,
        eps=eps,
    )


#: The raise's budget kept back when the lowering repair cannot certify (:func:`raise_repair`): measured on
#: heart, three attributes, eps 10-20: private, 7e-6 to 2.2e-4 above the LP's certified lower bound.
_RAISE_SLACK = 1e-6
#: "Optimal" when the loss is at most this far (relative) above the certified lower bound.
_OPTIMAL_GAP = 1e-6

#: A single budget whose optimum is not proven (certified gap, or above EM + remap, a feasible point) is
#: solved again from this share of it, warm: at eps 20 on a nominal attribute HiGHS called a master 3.6e6
#: times above the optimum optimal, where the solve from eps 18 reaches it (audit).
_RETRY_BELOW = 0.9


def _finish(
    raw: MasterSolution,
    model: ColumnGeneration | RayMaster | FloorMaster,
    keep: np.ndarray,
    prior: np.ndarray,
    loss: np.ndarray,
    eps: float,
    started: float,
) -> MechanismResult:
    shape = loss.shape
    n, m = shape
    full_rows = n * (n - 1) * m
    if not raw.ok:
        return _failure(
            shape,
            raw.status,
            f"The LP solver stopped without an optimum at eps = {eps:.4g} ({raw.status})."
            + precision_hint(model.d, eps),
            time.perf_counter() - started,
            eps,
        )
    Z = np.zeros(shape)
    Z[:, keep] = raw.Z
    if model.rows == 0:  # ray / floor master: columns are in the cone (to 1e-10), the row sums approximate
        P, repair_rounds = Z / Z.sum(axis=1, keepdims=True), 0
        viol = mdp_violation(P, model.d, eps)
    if model.rows or not viol <= VIOLATION_TOL:
        P, viol, repair_rounds = repair_mechanism(Z, model.d, eps)
    if not viol <= VIOLATION_TOL:  # tails past the factor limit: raise them instead (always ends private)
        P, viol, more = raise_repair(Z, model.d, eps, slack=_RAISE_SLACK)
        repair_rounds += more
    seconds = time.perf_counter() - started
    lost = not np.all(np.abs(P.sum(axis=1) - 1.0) <= ROW_SUM_TOL)  # e.g. every entry underflowed to 0
    if lost or not viol <= VIOLATION_TOL:
        why = (
            f"The LP solution lost its probability mass (a row sums to {P.sum(axis=1).min():.3g})."
            if lost
            else f"Could not certify the LP solution (violation {viol:.3g})."
        )
        status = "no distribution" if lost else "repair failed"
        return _failure(shape, status, why + precision_hint(model.d, eps), seconds, eps)
    objective = float(prior @ np.einsum("xy,xy->x", P, loss))
    rows = (
        f"{model.rows:,} of {full_rows:,} privacy rows" if model.rows else _NO_ROWS.get(model.kind, _NO_ROW)
    )
    gap = objective - raw.lower_bound  # the lower bound is certified (Lagrangian, module docstring)
    verdict = "Optimal"
    if gap > _OPTIMAL_GAP * abs(objective) + 1e-9:  # losses may be negative (a gain)
        verdict = f"Near-optimal: at most {gap:.2g} above the optimum" + (
            f" ({100 * gap / abs(objective):.2g} %)" if objective else ""
        )
    return MechanismResult(
        matrix=P,
        objective=objective,
        success=True,
        status=raw.status,
        message=(
            f"{verdict} ({model.outputs.size} of {m} outputs active ({keep.size} undominated), {rows}, "
            f"{raw.rounds} rounds)."
        ),
        seconds=seconds,
        lp_objective=raw.lp_objective,
        violation=viol,
        rows=model.rows,
        full_rows=full_rows,
        rounds=raw.rounds,
        eps=eps,
        extra={
            "repair_rounds": repair_rounds,
            "outputs": int(model.outputs.size),
            "undominated": int(keep.size),
            "lower_bound": raw.lower_bound,
            "pricing": model.kind,
        },
    )


def optimal_mechanism(
    prior: ArrayLike,
    loss: ArrayLike,
    dist_in: ArrayLike,
    eps: float,
    *,
    max_inputs: int = 1000,
    max_variables: int = 2_000_000,
    time_limit: float = 600.0,
    max_rounds: int = 2000,
    progress: Progress = None,
    first_solver: str = "choose",
    max_enter: int = 0,
) -> MechanismResult:
    """Exact LP-optimal eps-mDP mechanism (000 Definition 3, Eq. 3), by column and row generation on HiGHS.

    Minimises ``sum_x prior[x] sum_y P[x, y] loss[x, y]`` subject to ``P[x, y] <= exp(eps d(x, x'))
    P[x', y]`` for all ``x, x', y`` and rows on the simplex. The returned matrix is repaired and verified
    (``mdp_violation <= 1e-9``), its objective within ~1e-9 (relative) of the LP optimum.

    Parameters
    ----------
    prior : array (|X|,)
        Prior over inputs.
    loss : array (|X|, |Y|)
        Task loss ``c(y | x)``.
    dist_in : array (|X|, |X|)
        Input metric (checked: square, symmetric, zero diagonal, triangle inequality).
    eps : float
        Budget > 0 (unit ``1 / dist``).
    max_inputs, max_variables, max_rounds : int
        Size limits (beyond them ``success=False`` with a message, no exception); master solves at most.
    time_limit : float
        Wall-clock seconds for column and row generation (solver calls and pricing).
    progress : callable, optional
        ``progress(fraction of time_limit used, message)`` after every master solve; an exception it
        raises (a stop asked by a user) ends the solve there and propagates.
    first_solver, max_enter
        The block master's first HiGHS solver ("ipm": 2x faster on the seed grid), outputs per round.

    Returns
    -------
    MechanismResult
        ``success=False`` with a readable ``message`` when a limit is hit or the solver fails.
    """
    started = time.perf_counter()
    p, c, d = _validate(prior, loss, dist_in, max_inputs)
    eps, time_limit = check_eps(eps), check_positive(time_limit, "time_limit")
    limit = _size_problem(c.shape, max_inputs, max_variables)
    if limit:
        return _failure(c.shape, "size limit", limit, time.perf_counter() - started, eps)
    problem = _Problem(p, c, d, first_solver, max_enter)
    return _solve_point(problem, eps, None, None, time_limit, max_rounds, started, progress)[0]


#: What replaces the privacy rows in a master without them.
_NO_ROWS = {"tree rays": "no privacy rows (ray master)", "nominal floor": "a floor per output, no rows"}
#: ... and in a block master whose rows are all past the solver's factor limit (eps 25 on a general metric).
_NO_ROW = "no privacy rows (all past the solver's factor limit; the repair enforces them)"

#: Solver statuses of a limit reached (no retry with fewer rows: it would hit the same limit).
_LIMITS = ("time limit", "round limit", "Time limit reached")

#: Dantzig-Wolfe rounds on a tree metric before falling back to the block master.
_RAY_ROUNDS = 40


@dataclass
class _Problem:
    """Validated data plus what every grid point shares: chain-free pairs, tree, undominated outputs."""

    prior: np.ndarray
    loss: np.ndarray
    d: np.ndarray
    first_solver: str = "choose"  # the block master's options (optimal_mechanism's)
    max_enter: int = 0

    def __post_init__(self) -> None:
        self.pairs = chain_free_pairs(self.d)
        self.tree = tree_order(self.d.shape[0], *self.pairs)
        self.step = discrete_step(self.d)  # a discrete metric's distance: the floor master solves it
        self.keep = undominated_outputs(self.loss)
        self.rays: RayMaster | None = None  # kept along an eps grid: it starts from its last optimum


def _solve_point(
    problem: _Problem,
    eps: float,
    previous: MechanismResult | None,
    warm: WarmStart | None,
    time_limit: float,
    max_rounds: int,
    started: float,
    progress: Progress = None,
    retries: int = 3,
) -> tuple[MechanismResult, WarmStart | None]:
    """One grid point: the ray master on trees, the floor master on discrete metrics, else (or if the ray
    master does not converge) the block master; an unproven optimum is solved again from ``_RETRY_BELOW``
    times the budget, at most ``retries`` budgets down (with negative losses it recursed without end).
    Returns the result and the block master's :meth:`~ColumnGeneration.warm_start` for the next grid point
    (None after the ray master or a failed solve)."""
    p, d, keep = problem.prior, problem.d, problem.keep
    c = problem.loss[:, keep]
    deadline = started + time_limit
    if problem.tree is not None:
        if problem.rays is None:
            problem.rays = RayMaster(p, c, d, problem.tree)
        rays = problem.rays
        rounds = min(_RAY_ROUNDS, max_rounds)
        raw = rays.solve(eps, time_limit=time_limit, max_rounds=rounds, progress=progress)
        if raw.ok:
            return _finish(raw, rays, keep, p, problem.loss, eps, started), None
    remap = bayesian_remap(exponential_mechanism(d, eps), p, c)
    baseline = float(p @ np.einsum("xy,xy->x", remap, c))  # EM + remap: no optimum is above it
    start = np.nonzero(remap.max(axis=0) > 0)[0]
    if previous is not None and previous.success:
        start = np.union1d(start, np.nonzero(previous.matrix[:, keep].max(axis=0) > 0)[0])
    if problem.step is not None and problem.tree is None:
        floor = FloorMaster(p, c, d, problem.step)
        left = max(deadline - time.perf_counter(), 1e-3)
        raw = floor.solve(eps, start, time_limit=left, max_rounds=max_rounds, progress=progress)
        return _finish(raw, floor, keep, p, problem.loss, eps, started), None
    model = ColumnGeneration(p, c, d, *problem.pairs, start, warm, first_solver=problem.first_solver)
    limits: dict[str, Any] = {"max_rounds": max_rounds, "max_enter": problem.max_enter, "progress": progress}
    raw = model.solve(eps, time_limit=max(deadline - time.perf_counter(), 1e-3), **limits)
    if not raw.ok and raw.status not in _LIMITS and eps * float(d.max()) > RETRY_LOG_FACTOR:
        # HiGHS failed numerically with factors up to 1e9: once more with the rows past 1e6 left out
        model = ColumnGeneration(p, c, d, *problem.pairs, start, None, RETRY_LOG_FACTOR, problem.first_solver)
        raw = model.solve(eps, time_limit=max(deadline - time.perf_counter(), 1e-3), **limits)
    result = _finish(raw, model, keep, p, problem.loss, eps, started)
    lower = result.extra.get("lower_bound", -np.inf)
    proven = result.objective <= min(baseline, lower + _OPTIMAL_GAP * abs(lower)) + 1e-12
    if previous is None and retries and result.success and not proven and time.perf_counter() < deadline:
        low, low_warm = _solve_point(
            problem, _RETRY_BELOW * eps, None, None, time_limit, max_rounds, started, retries=retries - 1
        )
        if low.success:  # from below, warm (the retry's own retry, if any, goes lower still)
            again = _solve_point(problem, eps, low, low_warm, time_limit, max_rounds, started, progress)[0]
            result = again if again.success and again.objective < result.objective else result
    return result, model.warm_start() if raw.ok else None


def _size_problem(shape: tuple[int, int], max_inputs: int, max_variables: int) -> str:
    n, m = shape
    if n > max_inputs:
        return f"The domain has {n:,} inputs; the LP is limited to {max_inputs:,}. Use distance-based noise."
    if n * m > max_variables:
        return f"The LP would have {n * m:,} variables (limit {max_variables:,}). Use distance-based noise."
    return ""


def optimal_mechanisms(
    prior: ArrayLike,
    loss: ArrayLike,
    dist_in: ArrayLike,
    eps_grid: Sequence[float] | np.ndarray,
    *,
    progress: Progress = None,
    max_inputs: int = 1000,
    max_variables: int = 2_000_000,
    time_limit: float = 600.0,
    max_rounds: int = 2000,
) -> list[MechanismResult]:
    """LP-optimal mechanisms along an ascending eps grid, each solve warm-started from the previous one.

    Each grid point gets a fresh master seeded with the outputs of the previous optimum and the privacy
    rows binding there (the previous optimum stays feasible, as constraints only loosen when eps grows).
    Same guarantees as :func:`optimal_mechanism` at every grid point.

    Parameters
    ----------
    prior, loss, dist_in, max_inputs, max_variables, max_rounds
        As for :func:`optimal_mechanism`.
    eps_grid : sequence of float
        Strictly ascending budgets > 0.
    progress : callable, optional
        ``progress(fraction, message)`` after every master solve (as :func:`optimal_mechanism`).
    time_limit : float
        Seconds per grid point; what one leaves unused goes on to the next (the large budgets' are slow).

    Returns
    -------
    list of MechanismResult
        One per grid point, in grid order.
    """
    p, c, d = _validate(prior, loss, dist_in, max_inputs)
    grid, time_limit = as_float_array(eps_grid, "eps_grid", ndim=1), check_positive(time_limit, "time_limit")
    if np.any(grid <= 0) or np.any(np.diff(grid) <= 0):
        raise DataError("eps_grid must be strictly ascending budgets > 0")
    limit = _size_problem(c.shape, max_inputs, max_variables)
    if limit:
        return [_failure(c.shape, "size limit", limit, 0.0, float(e)) for e in grid]
    problem = _Problem(p, c, d)
    results: list[MechanismResult] = []
    warm, begin = None, time.perf_counter()
    for k, eps in enumerate(grid):
        previous = results[-1] if results else None
        at_point = part(progress, k / grid.size, (k + 1) / grid.size, f"OPT at eps = {eps:.3g}, ")
        share = (k + 1) * time_limit - (time.perf_counter() - begin)  # the time unused so far rolls on
        result, warm = _solve_point(
            problem, float(eps), previous, warm, share, max_rounds, time.perf_counter(), at_point
        )
        results.append(result)
        report(progress, (k + 1) / grid.size, f"OPT at eps = {eps:.3g}")
    return results
