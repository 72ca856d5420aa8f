"""Local search for per-attribute budgets: SLSQP on the smooth pieces, then coordinate ascent.

Every TPL_k(eps) = eps_k + sum_{j != k} CPL_{j -> k}(eps_j) is non-decreasing in every budget, so the
feasible set {TPL <= eps_bar} is a down-set, but not convex in general (a CPL curve need be neither
convex nor concave in its budget). Every budget :func:`ascend` keeps is feasible: a raise is kept only
after its TPL was evaluated.
"""

from __future__ import annotations

from collections.abc import Callable

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from mdp_core._highs import highs_model

#: Relative forward-difference step of the Jacobian of TPL.
_DIFF_STEP = 1e-7


class Budgets:
    """Budgets with cached per-source rows, so one coordinate change costs one row evaluation."""

    def __init__(self, model: object, eps: np.ndarray) -> None:
        self.model, self.eps = model, np.asarray(eps, dtype=np.float64).copy()
        self.rows = np.vstack([self._row(j, self.eps[j]) for j in range(len(self.eps))])

    def _row(self, j: int, e: float) -> np.ndarray:
        return self.model.row(j, e) if e > 0 else np.zeros(len(self.eps))  # type: ignore[attr-defined]

    def tpl(self) -> np.ndarray:
        return self.eps + self.rows.sum(axis=0)

    def tpl_if(self, j: int, e: float) -> np.ndarray:
        t = self.tpl() - self.rows[j] + self._row(j, e)
        t[j] += e - self.eps[j]
        return t

    def set(self, j: int, e: float) -> None:
        self.eps[j], self.rows[j] = e, self._row(j, e)

    def jacobian(self) -> np.ndarray:
        """``J[j, k]`` = d TPL_k / d eps_j by a forward difference."""
        n = len(self.eps)
        jac = np.eye(n)
        for j in range(n):
            h = _DIFF_STEP * max(1.0, self.eps[j])
            jac[j] += (self._row(j, self.eps[j] + h) - self.rows[j]) / h
        return jac


def max_coordinate(b: Budgets, j: int, eps_bar: float, tol: float) -> float:
    """Largest eps_j (others fixed) with every TPL <= eps_bar, to within ``tol`` in eps_j or in TPL.

    h(e) = max_k TPL_k - eps_bar is non-decreasing in e: keep a bracket [lo feasible, hi infeasible],
    alternating false-position and bisection steps (the bracket at least halves every two steps); the
    feasible end is returned.
    """
    lo = b.eps[j]
    # the own constraint alone caps eps_j at eps_bar - (leakage about j from the others)
    hi = max(lo, eps_bar - (b.rows[:, j].sum() - b.rows[j, j]))
    h_hi = float(np.max(b.tpl_if(j, hi))) - eps_bar
    if h_hi <= 0:
        return hi
    h_lo = float(np.max(b.tpl_if(j, lo))) - eps_bar
    for step in range(200):
        if hi - lo <= tol or h_lo >= -tol:
            break
        mid = lo - h_lo * (hi - lo) / (h_hi - h_lo) if step % 2 == 0 else 0.5 * (lo + hi)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        h_mid = float(np.max(b.tpl_if(j, mid))) - eps_bar
        if h_mid <= 0:
            lo, h_lo = mid, h_mid
        else:
            hi, h_hi = mid, h_mid
    return lo


def ascend(b: Budgets, eps_bar: float, tol: float, *, max_sweeps: int = 200) -> None:
    """Coordinate ascent: raise each budget to its largest feasible value until a sweep moves < ``tol``."""
    for _ in range(max_sweeps):
        moved = 0.0
        for j in np.argsort(b.eps, kind="stable"):
            new = max_coordinate(b, int(j), eps_bar, tol)
            if new > b.eps[j]:
                moved += new - b.eps[j]
                b.set(int(j), new)
        if moved <= tol * max(1, len(b.eps)):
            return


def local_optimum(
    b: Budgets,
    eps_bar: float,
    floor: float,
    *,
    max_steps: int = 300,
    callback: Callable[[np.ndarray], None] | None = None,
) -> np.ndarray:
    """SLSQP (scipy) from ``b``'s budgets on max sum(eps) s.t. TPL <= eps_bar, floor <= eps <= eps_bar, with
    :meth:`Budgets.jacobian`. Its end point may break a constraint by the solver's tolerance: the caller
    restores feasibility."""
    n = len(b.eps)

    def room(e: np.ndarray) -> np.ndarray:
        return eps_bar - Budgets(b.model, np.maximum(e, 0.0)).tpl()

    def room_jac(e: np.ndarray) -> np.ndarray:
        return -Budgets(b.model, np.maximum(e, 0.0)).jacobian().T

    res = minimize(
        lambda e: -float(np.sum(e)),
        b.eps,
        jac=lambda e: -np.ones(n),
        method="SLSQP",
        bounds=[(floor, eps_bar)] * n,
        constraints=[{"type": "ineq", "fun": room, "jac": room_jac}],
        options={"maxiter": max_steps, "ftol": 1e-12},
        callback=callback,
    )
    return np.clip(res.x, floor, eps_bar)


def linear_start(slopes: np.ndarray, eps_bar: float, floor: float) -> np.ndarray:
    """The best budgets of the first-order model TPL ~ (I + slopes') eps (exact as eps_bar -> 0), from
    ``floor`` up (HiGHS): where a small target's optimum lies (feasibility is restored by the caller)."""
    n = len(slopes)
    jac = sp.csc_matrix((np.eye(n) + np.asarray(slopes, dtype=np.float64)).T)
    room = eps_bar - jac @ np.full(n, floor)  # the model's TPL at the floor, then d = eps - floor >= 0
    h = highs_model(jac, np.full(n, -highspy.kHighsInf), room, -np.ones(n))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.full(n, floor)
    return floor + np.asarray(h.getSolution().col_value)
