"""The LP-optimal eps-mDP mechanism on finite domains (000 Definition 3, Eq. 3), exact and fast.

The LP: minimise ``sum_x prior[x] sum_y P[x, y] loss[x, y]`` subject to
``P[x, y] <= exp(eps d(x, x')) P[x', y]`` for all ``x != x', y`` and rows of ``P`` on the simplex.
The full model has ``|X|^2 |Y|`` privacy rows; it is solved exactly with far fewer by

1. dropping every pair ``(x, x')`` implied by a chain ``d(x, z) + d(z, x') = d(x, x')`` (the rows for
   ``(x, z)`` and ``(z, x')`` multiply to the row for ``(x, x')``);
2. row generation: start from each input's nearest partners, solve with HiGHS, add the violated rows
   (most violated first), re-solve warm (dual simplex keeps its basis), until no row is violated -- then
   the solution is optimal for the full LP;
3. along an ascending eps grid, one model is kept and its coefficients changed in place, so every solve
   after the first starts from the previous basis;
4. a repair step (log-Lipschitz lower envelope per output column, then row normalisation) turns the
   solver's output, which meets rows only to an absolute tolerance, into a matrix whose
   :func:`~mdp_core.mechanisms.mdp_violation` is ``<= 1e-9``, verified before it is returned.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from mdp_core._validation import (
    Progress,
    as_float_array,
    check_distance_matrix,
    check_eps,
    check_loss_matrix,
    check_prior,
    report,
)
from mdp_core.errors import DataError
from mdp_core.mechanisms import mdp_violation

__all__ = [
    "MechanismResult",
    "chain_free_pairs",
    "optimal_mechanism",
    "optimal_mechanisms",
    "repair_mechanism",
]

#: A mechanism is accepted when ``mdp_violation(P, dist_in, eps) <= VIOLATION_TOL``.
VIOLATION_TOL = 1e-9
_ROW_TOL = 1e-10  # a privacy row is "violated" when z[x,y] - e^(eps d) z[x',y] exceeds this
_BLOCK = 8_000_000


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
        Privacy rows in the final LP (after pair elimination and row generation).
    full_rows : int
        Privacy rows of the full LP, ``|X| (|X| - 1) |Y|``.
    rounds : int
        Row-generation rounds (solver calls).
    eps : float
        The budget.
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


def chain_free_pairs(dist_in: object, *, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """Unordered pairs ``(a, b)``, ``a < b``, whose privacy rows are not implied by a chain.

    A pair is implied when some ``z`` with ``d(a, z) > 0`` and ``d(z, b) > 0`` has
    ``d(a, z) + d(z, b) <= d(a, b) + tol`` (``tol = rtol * max d``): the rows for ``(a, z)`` and ``(z, b)``
    multiply to the row for ``(a, b)``; both parts are strictly shorter, so by induction on the distance
    every dropped row is implied by kept rows. On an l1 grid or an ordinal chain only neighbours remain; on
    an l2 grid only primitive directions; a nominal (discrete) metric keeps every pair.

    Returns
    -------
    (a, b) : two int arrays
        The kept pairs.
    """
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    n = d.shape[0]
    tol = rtol * max(float(d.max()), 1e-300)
    implied = np.zeros((n, n), dtype=bool)
    positive = d > tol
    for z in range(n):
        col = d[:, z]
        ok = positive[:, z]
        if not ok.any():
            continue
        via = (col[:, None] + col[None, :] <= d + tol) & ok[:, None] & ok[None, :]
        implied |= via
    a, b = np.nonzero(np.triu(~implied, k=1))
    return a.astype(np.int64), b.astype(np.int64)


def repair_mechanism(
    Z: object, dist_in: object, eps: float, *, max_rounds: int = 50
) -> tuple[np.ndarray, float, int]:
    """Make an (almost feasible) LP solution exactly eps-mDP.

    Per output column ``v`` the log-Lipschitz lower envelope ``v'_x = min_x' v_x' exp(eps d(x, x'))`` is
    the largest vector below ``v`` with ``v'_x <= exp(eps d(x, x')) v'_x'`` for every pair (exact for any
    metric, computed in log space). Normalising the rows then moves ``ln P[x, y] - ln P[x', y]`` by
    ``ln s_x' - ln s_x`` (row sums ``s``), which is of the order of the solver's row violations (~1e-9 or
    less); envelope and normalisation are repeated until :func:`~mdp_core.mechanisms.mdp_violation` is
    ``<= 1e-12`` (each round removes only the mass that breaks a ratio, so the objective moves by about
    the solver tolerance). A column with one exact zero becomes zero for every input.

    Parameters
    ----------
    Z : array (|X|, |Y|)
        Non-negative solver output (rows summing to about 1).
    dist_in : array (|X|, |X|)
        Input metric.
    eps : float
        Budget.
    max_rounds : int
        Envelope/normalise rounds before giving up.

    Returns
    -------
    (P, violation, rounds)
        Row-stochastic matrix, its exact :func:`mdp_violation`, and the rounds used.
    """
    V = np.clip(as_float_array(Z, "Z", ndim=2), 0.0, None)
    d = check_distance_matrix(dist_in, "dist_in", check_triangle=False)
    eps = check_eps(eps)
    n, m = V.shape
    with np.errstate(divide="ignore"):
        L = np.log(V)
    step = max(1, _BLOCK // (n * n))
    viol = float("inf")
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        for start in range(0, m, step):
            block = L[:, start : start + step]  # (n, k)
            L[:, start : start + step] = (block[None, :, :] + eps * d[:, :, None]).min(axis=1)
        top = L.max(axis=1, keepdims=True)
        if not np.all(np.isfinite(top)):
            break  # some row lost all its mass
        L -= top + np.log(np.exp(L - top).sum(axis=1, keepdims=True))  # normalise rows in log space
        viol = mdp_violation(np.exp(L), d, eps)
        if viol <= 1e-12:
            break
    return np.exp(L), viol, rounds


class _RowGenLP:
    """One HiGHS model of the privacy LP restricted to a growing set of rows."""

    def __init__(self, prior: np.ndarray, loss: np.ndarray, d: np.ndarray, *, threads: int = 0) -> None:
        self.n, self.m = loss.shape
        self.d = d
        a, b = chain_free_pairs(d)
        # ordered pairs (i -> j): row z[i, y] - exp(eps d_ij) z[j, y] <= 0
        self.pi = np.concatenate([a, b])
        self.pj = np.concatenate([b, a])
        self.pd = d[self.pi, self.pj]
        self.in_model = np.zeros((self.pi.size, self.m), dtype=bool)
        self.row_pair = np.empty(0, dtype=np.int64)
        self.row_y = np.empty(0, dtype=np.int64)
        self.eps = float("nan")
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("dual_feasibility_tolerance", 1e-9)
        if threads:
            h.setOptionValue("threads", threads)
        lp = highspy.HighsLp()
        nv = self.n * self.m
        lp.num_col_ = nv
        lp.num_row_ = self.n
        lp.col_cost_ = (prior[:, None] * loss).ravel()
        lp.col_lower_ = np.zeros(nv)
        lp.col_upper_ = np.ones(nv)
        lp.row_lower_ = np.ones(self.n)
        lp.row_upper_ = np.ones(self.n)
        # row sums, column-wise: variable x*m + y sits in row x
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.arange(nv + 1, dtype=np.int32)
        lp.a_matrix_.index_ = np.repeat(np.arange(self.n, dtype=np.int32), self.m)
        lp.a_matrix_.value_ = np.ones(nv)
        h.passModel(lp)
        self.h = h

    # -- rows -------------------------------------------------------------------------------------------
    def initial_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Each input's nearest kept partners (ties included), both directions, every output."""
        n = self.n
        near = np.full(n, np.inf)
        np.minimum.at(near, self.pi, self.pd)
        keep = np.nonzero(self.pd <= near[self.pi] * (1 + 1e-9))[0]
        keep = np.union1d(keep, self._reverse(keep))
        pairs = np.repeat(keep, self.m)
        ys = np.tile(np.arange(self.m), keep.size)
        return pairs, ys

    def _reverse(self, k: np.ndarray) -> np.ndarray:
        half = self.pi.size // 2
        return np.where(k < half, k + half, k - half)

    def add_rows(self, pairs: np.ndarray, ys: np.ndarray) -> None:
        if pairs.size == 0:
            return
        count = pairs.size
        cols_i = self.pi[pairs] * self.m + ys
        cols_j = self.pj[pairs] * self.m + ys
        index = np.empty(2 * count, dtype=np.int32)
        index[0::2] = cols_i
        index[1::2] = cols_j
        value = np.empty(2 * count)
        value[0::2] = 1.0
        value[1::2] = -np.exp(self.eps * self.pd[pairs])
        starts = np.arange(0, 2 * count, 2, dtype=np.int32)
        self.h.addRows(count, np.full(count, -np.inf), np.zeros(count), 2 * count, starts, index, value)
        self.in_model[pairs, ys] = True
        self.row_pair = np.concatenate([self.row_pair, pairs])
        self.row_y = np.concatenate([self.row_y, ys])

    def set_eps(self, eps: float) -> None:
        """Change the coefficient ``-exp(eps d)`` of every privacy row in place (keeps the basis)."""
        if eps == self.eps:
            return
        self.eps = eps
        if self.row_pair.size == 0:
            return
        cols = (self.pj[self.row_pair] * self.m + self.row_y).tolist()
        vals = (-np.exp(eps * self.pd[self.row_pair])).tolist()
        change = self.h.changeCoeff
        for r, c, v in zip(range(self.n, self.n + len(cols)), cols, vals, strict=True):
            change(r, c, v)

    def violated(self, Z: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``limit`` rows not in the model that ``Z`` violates, most violated first."""
        viol = Z[self.pi] - np.exp(self.eps * self.pd)[:, None] * Z[self.pj]
        viol[self.in_model] = 0.0
        pairs, ys = np.nonzero(viol > _ROW_TOL)
        if pairs.size > limit:
            top = np.argpartition(-viol[pairs, ys], limit)[:limit]
            pairs, ys = pairs[top], ys[top]
        return pairs, ys

    # -- solve ------------------------------------------------------------------------------------------
    def solve(self, eps: float, *, time_limit: float, max_rounds: int) -> dict:
        """Row generation at ``eps`` from the current model; returns raw solution info."""
        self.set_eps(eps)
        if self.row_pair.size == 0:
            self.add_rows(*self.initial_rows())
        rounds = 0
        start = time.perf_counter()
        status = "not solved"
        Z = np.full((self.n, self.m), np.nan)
        while True:
            remaining = time_limit - (time.perf_counter() - start)
            if remaining <= 0:
                return {"ok": False, "status": "time limit", "Z": Z, "rounds": rounds}
            self.h.setOptionValue("time_limit", float(remaining))
            self.h.run()
            rounds += 1
            model_status = self.h.getModelStatus()
            status = self.h.modelStatusToString(model_status)
            if model_status != highspy.HighsModelStatus.kOptimal:
                return {"ok": False, "status": status, "Z": Z, "rounds": rounds}
            Z = np.asarray(self.h.getSolution().col_value).reshape(self.n, self.m)
            limit = max(4 * self.n * self.m, self.row_pair.size // 2)
            pairs, ys = self.violated(Z, limit)
            if pairs.size == 0:
                break
            if rounds >= max_rounds:
                return {"ok": False, "status": "round limit", "Z": Z, "rounds": rounds}
            self.add_rows(pairs, ys)
        return {
            "ok": True,
            "status": status,
            "Z": Z,
            "rounds": rounds,
            "lp_objective": float(self.h.getInfo().objective_function_value),
        }


def _validate(
    prior: object, loss: object, dist_in: object, max_inputs: int
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


def _finish(
    raw: dict, model: _RowGenLP, prior: np.ndarray, loss: np.ndarray, eps: float, started: float
) -> MechanismResult:
    shape = (model.n, model.m)
    full_rows = model.n * (model.n - 1) * model.m
    if not raw["ok"]:
        return _failure(
            shape,
            raw["status"],
            f"The LP solver stopped without an optimum at eps = {eps:.4g} ({raw['status']}).",
            time.perf_counter() - started,
            eps,
        )
    P, viol, repair_rounds = repair_mechanism(raw["Z"], model.d, eps)
    seconds = time.perf_counter() - started
    if not viol <= VIOLATION_TOL:
        return _failure(
            shape, "repair failed", f"Could not certify the LP solution (violation {viol:.3g}).", seconds, eps
        )
    objective = float(prior @ np.einsum("xy,xy->x", P, loss))
    return MechanismResult(
        matrix=P,
        objective=objective,
        success=True,
        status=raw["status"],
        message=f"Optimal ({model.row_pair.size:,} of {full_rows:,} privacy rows, {raw['rounds']} rounds).",
        seconds=seconds,
        lp_objective=raw["lp_objective"],
        violation=viol,
        rows=int(model.row_pair.size),
        full_rows=full_rows,
        rounds=raw["rounds"],
        eps=eps,
        extra={"repair_rounds": repair_rounds},
    )


def optimal_mechanism(
    prior: object,
    loss: object,
    dist_in: object,
    eps: float,
    *,
    max_inputs: int = 1000,
    max_variables: int = 2_000_000,
    time_limit: float = 600.0,
    max_rounds: int = 200,
) -> MechanismResult:
    """Exact LP-optimal eps-mDP mechanism (000 Definition 3, Eq. 3), by row generation on HiGHS.

    Minimises ``sum_x prior[x] sum_y P[x, y] loss[x, y]`` subject to
    ``P[x, y] <= exp(eps d(x, x')) P[x', y]`` for all ``x, x', y`` and rows on the simplex. The returned
    matrix is repaired and verified (``mdp_violation <= 1e-9``); its objective is within solver tolerance
    (about 1e-9 relative) of the LP optimum.

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
    max_inputs, max_variables : int
        Size limits; beyond them ``success=False`` with a message (no exception).
    time_limit : float
        Seconds for the solver calls.
    max_rounds : int
        Row-generation rounds before giving up.

    Returns
    -------
    MechanismResult
        ``success=False`` with a readable ``message`` when a limit is hit or the solver fails.
    """
    started = time.perf_counter()
    p, c, d = _validate(prior, loss, dist_in, max_inputs)
    eps = check_eps(eps)
    limit = _size_problem(c.shape, max_inputs, max_variables)
    if limit:
        return _failure(c.shape, "size limit", limit, time.perf_counter() - started, eps)
    model = _RowGenLP(p, c, d)
    raw = model.solve(eps, time_limit=time_limit, max_rounds=max_rounds)
    return _finish(raw, model, p, c, eps, started)


def _size_problem(shape: tuple[int, int], max_inputs: int, max_variables: int) -> str:
    n, m = shape
    if n > max_inputs:
        return f"The domain has {n:,} inputs; the LP is limited to {max_inputs:,}. Use distance-based noise."
    if n * m > max_variables:
        return f"The LP would have {n * m:,} variables (limit {max_variables:,}). Use distance-based noise."
    return ""


def optimal_mechanisms(
    prior: object,
    loss: object,
    dist_in: object,
    eps_grid: Sequence[float] | np.ndarray,
    *,
    progress: Progress = None,
    max_inputs: int = 1000,
    max_variables: int = 2_000_000,
    time_limit: float = 600.0,
    max_rounds: int = 200,
) -> list[MechanismResult]:
    """LP-optimal mechanisms along an ascending eps grid, each solve warm-started from the previous one.

    One HiGHS model is kept: its privacy-row coefficients ``-exp(eps d)`` are changed in place and the
    rows generated so far stay, so each later solve starts from the previous optimal basis (which stays
    primal feasible, as constraints only loosen when eps grows). Same guarantees as
    :func:`optimal_mechanism` at every grid point.

    Parameters
    ----------
    prior, loss, dist_in
        As for :func:`optimal_mechanism`.
    eps_grid : sequence of float
        Strictly ascending budgets > 0.
    progress : callable, optional
        ``progress(fraction, message)`` after each grid point.

    Returns
    -------
    list of MechanismResult
        One per grid point, in grid order.
    """
    p, c, d = _validate(prior, loss, dist_in, max_inputs)
    grid = as_float_array(eps_grid, "eps_grid", ndim=1)
    if np.any(grid <= 0) or np.any(np.diff(grid) <= 0):
        raise DataError("eps_grid must be strictly ascending budgets > 0")
    limit = _size_problem(c.shape, max_inputs, max_variables)
    if limit:
        return [_failure(c.shape, "size limit", limit, 0.0, float(e)) for e in grid]
    model = _RowGenLP(p, c, d)
    results: list[MechanismResult] = []
    for k, eps in enumerate(grid):
        started = time.perf_counter()
        raw = model.solve(float(eps), time_limit=time_limit, max_rounds=max_rounds)
        results.append(_finish(raw, model, p, c, float(eps), started))
        report(progress, (k + 1) / grid.size, f"OPT at eps = {eps:.3g}")
    return results
