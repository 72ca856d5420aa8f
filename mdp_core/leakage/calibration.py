"""All-pairs correlation-induced leakage, total leakage and per-attribute budget calibration (seed 001).

For attributes released with per-attribute budgets eps_j, the total privacy leakage of attribute k is
(001 Eq. 5, Sec. VI-G)

    TPL_k(eps) = eps_k + sum_{j != k} CPL_{j -> k}(eps_j),

where CPL_{j -> k} is the leakage about k from releasing j (exact CPL* or its Dependency Triad estimate).
:func:`calibrate_budgets` maximises sum_k eps_k subject to TPL_k <= eps_bar for every k.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from mdp_core._validation import Progress, check_positive, report
from mdp_core.errors import DataError
from mdp_core.leakage._checks import _check_codes
from mdp_core.leakage.cpl import _conditional, _log_ratio, cpl_hull
from mdp_core.leakage.triad import DependencyTriad, _dt_eval, _dt_kink, dependency_triad

__all__ = [
    "BudgetCalibration",
    "PairwiseLeakage",
    "calibrate_budgets",
    "leakage_matrix",
    "pairwise_leakage",
    "total_leakage",
    "uniform_split",
]


@dataclass(frozen=True, eq=False)
class PairwiseLeakage:
    """CPL_{j -> k}(eps_j) for every ordered pair of attributes, ready to evaluate at any budgets.

    Attributes
    ----------
    columns : tuple of str
        Attribute names; index j = released attribute, k = target.
    method : {"exact", "dt"}
        Exact CPL* (hull points per pair) or the Dependency Triad estimate.
    alpha, phi, delta, beta : ndarray, shape (n, n)
        Triad of every pair ``[j, k]`` (zero diagonal); always computed (cheap).
    uncertainty : float
        Relative uncertainty e used for the triads (0 = none).
    seconds : float
        Time to build.
    """

    columns: tuple[str, ...]
    method: Literal["exact", "dt"]
    alpha: np.ndarray
    phi: np.ndarray
    delta: np.ndarray
    beta: np.ndarray
    uncertainty: float = 0.0
    seconds: float = 0.0
    _hull: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...] = field(default=(), repr=False)
    _u: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_u", _dt_kink(self.alpha, self.phi, self.delta))

    @property
    def n(self) -> int:
        return len(self.columns)

    def triad(self, other: str, target: str) -> DependencyTriad:
        """The Dependency Triad of CPL_{other -> target}."""
        j, k = self.columns.index(other), self.columns.index(target)
        return DependencyTriad(
            alpha=float(self.alpha[j, k]),
            beta=float(self.beta[j, k]),
            delta=float(self.delta[j, k]),
            phi=float(self.phi[j, k]),
        )

    def row(self, j: int, eps_j: float) -> np.ndarray:
        """CPL_{j -> k}(eps_j) for every k (0 at k = j), nats."""
        if self.method == "dt":
            out = np.minimum(_dt_eval(self.phi[j], self.delta[j], self._u[j], eps_j), eps_j)
        else:
            B, A, starts, targets = self._hull[j]
            out = np.zeros(self.n)
            if B.size:
                vals = _log_ratio(B, A, eps_j)
                out[targets] = np.minimum(np.maximum(np.maximum.reduceat(vals, starts), 0.0), eps_j)
        out = np.asarray(out, dtype=np.float64).copy()
        out[j] = 0.0
        return out

    def matrix(self, eps: object) -> np.ndarray:
        """``M[j, k] = CPL_{j -> k}(eps_j)``; eps a scalar (same for all) or one budget per attribute."""
        e = _eps_vector(eps, self.n)
        return np.vstack([self.row(j, float(e[j])) for j in range(self.n)]) if self.n else np.zeros((0, 0))


def _eps_vector(eps: object, n: int, *, allow_zero: bool = False) -> np.ndarray:
    e = (
        np.broadcast_to(np.asarray(eps, dtype=np.float64), (n,)).copy()
        if np.ndim(np.asarray(eps)) == 0
        else None
    )
    if e is None:
        e = np.asarray(eps, dtype=np.float64)
        if e.shape != (n,):
            raise DataError(f"eps must be a number or one budget per attribute ({n}), got shape {e.shape}")
    bad = ~np.isfinite(e) | ((e < 0) if allow_zero else (e <= 0))
    if bad.any():
        raise DataError(f"eps must be {'non-negative' if allow_zero else 'positive'} finite budget(s)")
    return e


def pairwise_leakage(
    codes: pd.DataFrame,
    *,
    method: Literal["exact", "dt"] = "dt",
    uncertainty: float | None = None,
    columns: list[str] | None = None,
    progress: Progress = None,
) -> PairwiseLeakage:
    """Build CPL_{j -> k} for every ordered pair of attributes of ``codes``.

    Parameters
    ----------
    codes : DataFrame
        Integer codes (``Encoded.codes``).
    method : {"exact", "dt"}
        ``exact``: CPL* hull points per pair (:func:`cpl_hull`); ``dt``: Dependency Triads.
    uncertainty : float, optional
        Relative uncertainty e of every conditional (DT only; 001 Sec. V-D1).
    columns : list of str, optional
        Subset of attributes (default: all).
    progress : callable, optional
        ``progress(fraction, message)``.
    """
    if method not in ("exact", "dt"):
        raise DataError(f"method must be 'exact' or 'dt', got {method!r}")
    cols = list(codes.columns) if columns is None and isinstance(codes, pd.DataFrame) else list(columns or [])
    _check_codes(codes, *cols)
    if len(cols) < 2:
        raise DataError("need at least 2 attributes for pairwise leakage")
    if method == "exact" and uncertainty:
        raise DataError("uncertainty applies to method='dt' (CPL* is for the known distribution)")
    start = time.perf_counter()
    n = len(cols)
    alpha, phi, delta, beta = (np.zeros((n, n)) for _ in range(4))
    hull_parts: list[list[tuple[int, np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    done = 0
    arrays = [codes[c].to_numpy(dtype=np.int64) for c in cols]  # once: per pair, pandas took 3/4 of the time
    for k, target in enumerate(cols):
        for j, other in enumerate(cols):
            if j == k:
                continue
            cond = _conditional(arrays[k], arrays[j], target)
            t = dependency_triad(cond, uncertainty=uncertainty)
            alpha[j, k], phi[j, k], delta[j, k], beta[j, k] = t.alpha, t.phi, t.delta, t.beta
            if method == "exact":
                B, A = cpl_hull(cond)
                hull_parts[j].append((k, B, A))
            done += 1
            report(progress, done / (n * (n - 1)), f"{other} → {target}")
    hulls = tuple(_pack(parts) for parts in hull_parts) if method == "exact" else ()
    return PairwiseLeakage(
        columns=tuple(str(c) for c in cols),
        method=method,
        alpha=alpha,
        phi=phi,
        delta=delta,
        beta=beta,
        uncertainty=float(uncertainty or 0.0),
        seconds=time.perf_counter() - start,
        _hull=hulls,
    )


def _pack(
    parts: list[tuple[int, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate one source's hull points; segment starts for ``np.maximum.reduceat``."""
    if not parts:
        return (np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp))
    sizes = [len(B) for _, B, _ in parts]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    return (
        np.concatenate([B for _, B, _ in parts]),
        np.concatenate([A for _, _, A in parts]),
        starts,
        np.array([k for k, _, _ in parts], dtype=np.intp),
    )


def leakage_matrix(model: PairwiseLeakage, eps: object) -> pd.DataFrame:
    """CPL_{j -> k}(eps_j) as a labelled frame: rows = released attribute j, columns = target k (nats)."""
    _check_model(model)
    return pd.DataFrame(model.matrix(eps), index=list(model.columns), columns=list(model.columns))


def total_leakage(model: PairwiseLeakage, eps: object) -> np.ndarray:
    """TPL_k = eps_k + sum_{j != k} CPL_{j -> k}(eps_j) for every attribute k (001 Eq. 5), nats.

    ``eps`` is one budget for all or one per attribute; a zero budget means the attribute is not released.
    """
    _check_model(model)
    e = _eps_vector(eps, model.n, allow_zero=True)
    return e + sum((model.row(j, float(e[j])) for j in range(model.n) if e[j] > 0), np.zeros(model.n))


def _check_model(model: object) -> None:
    if not isinstance(model, PairwiseLeakage):
        raise TypeError(f"model must be a PairwiseLeakage (see pairwise_leakage), got {type(model).__name__}")


def uniform_split(model: PairwiseLeakage, eps_bar: float, *, min_dependence: float = 1e-9) -> float:
    """Correlation-agnostic budget eps_bar / (1 + m), m the most correlated attributes any target has.

    A pair counts as correlated when its total-variation slope phi exceeds ``min_dependence``. Feasible for
    any dependence, since CPL_{j -> k}(eps) <= eps.
    """
    _check_model(model)
    eb = check_positive(eps_bar, "eps_bar")
    correlated = (model.phi > min_dependence) & ~np.eye(model.n, dtype=bool)
    m = int(correlated.sum(axis=0).max()) if model.n else 0
    return eb / (1 + m)


@dataclass(frozen=True)
class BudgetCalibration:
    """Result of :func:`calibrate_budgets` (budgets in nats, one per attribute of ``columns``)."""

    columns: tuple[str, ...]
    eps: np.ndarray
    tpl: np.ndarray
    eps_bar: float
    uniform_eps: float
    uniform_tpl: np.ndarray
    rounds: int
    success: bool
    status: str
    message: str
    seconds: float

    @property
    def total(self) -> float:
        return float(self.eps.sum())

    def table(self) -> pd.DataFrame:
        """One row per attribute: calibrated and uniform budgets with the leakage each then suffers."""
        return pd.DataFrame(
            {
                "attribute": list(self.columns),
                "eps": self.eps,
                "TPL": self.tpl,
                "uniform eps": self.uniform_eps,
                "uniform TPL": self.uniform_tpl,
            }
        )


class _Budgets:
    """Budgets with cached per-source rows so one coordinate change costs one row evaluation."""

    def __init__(self, model: PairwiseLeakage, eps: np.ndarray) -> None:
        self.model, self.eps = model, eps.copy()
        self.rows = np.vstack([self._row(j, eps[j]) for j in range(model.n)])

    def _row(self, j: int, e: float) -> np.ndarray:
        return self.model.row(j, e) if e > 0 else np.zeros(self.model.n)

    def tpl(self) -> np.ndarray:
        return self.eps + self.rows.sum(axis=0)

    def tpl_if(self, j: int, e: float) -> np.ndarray:
        t = self.tpl() - self.rows[j] + self._row(j, e)
        t[j] += e - self.eps[j]
        return t

    def set(self, j: int, e: float) -> None:
        self.eps[j], self.rows[j] = e, self._row(j, e)


def _max_coordinate(b: _Budgets, j: int, eps_bar: float, tol: float) -> float:
    """Largest eps_j (others fixed) with every TPL <= eps_bar, to within ``tol`` in eps_j or in TPL.

    h(e) = max_k TPL_k - eps_bar is non-decreasing in e (every CPL grows with its budget): keep a bracket
    [lo feasible, hi infeasible], alternating false-position and bisection steps (the bracket at least
    halves every two steps); the feasible end is returned.
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


def _ascend(b: _Budgets, eps_bar: float, tol: float, *, frozen: int = -1, max_sweeps: int = 200) -> int:
    """Coordinate ascent: raise each budget (except ``frozen``) to its largest feasible value until stable."""
    for sweep in range(1, max_sweeps + 1):
        moved = 0.0
        for j in np.argsort(b.eps, kind="stable"):
            if j == frozen:
                continue
            new = _max_coordinate(b, int(j), eps_bar, tol)
            if new > b.eps[j]:
                moved += new - b.eps[j]
                b.set(int(j), new)
        if moved <= tol * max(1, b.model.n):
            return sweep
    return max_sweeps


def calibrate_budgets(
    model: PairwiseLeakage,
    eps_bar: float,
    *,
    tol: float = 1e-9,
    max_rounds: int = 10,
    progress: Progress = None,
) -> BudgetCalibration:
    """Per-attribute budgets maximising sum_k eps_k subject to TPL_k(eps) <= eps_bar for all k (001 VI-G).

    Method (robust, derivative-free; every iterate is feasible): every TPL_k is non-decreasing in every
    eps_j, so the feasible set is a down-set. (1) Common scale: bisection on t for the largest t with
    TPL(t, ..., t) <= eps_bar. (2) Coordinate ascent: raise each eps_j by bisection to its largest feasible
    value, until a sweep moves less than ``tol``. (3) Exchange polish: lower one budget by 50 % or 10 %
    re-run (2), keep the move only if sum_k eps_k grows. The result is feasible (checked at the end) and
    coordinate-wise maximal; the problem is not convex, so global optimality is not claimed.

    Parameters
    ----------
    model : PairwiseLeakage
        Pairwise leakage (exact or DT) from :func:`pairwise_leakage`.
    eps_bar : float
        Target total leakage per attribute (nats).
    tol : float
        Bisection tolerance on budgets.
    max_rounds : int
        Exchange-polish rounds.
    """
    _check_model(model)
    eb_user = check_positive(eps_bar, "eps_bar")
    eb = eb_user * (1.0 - 1e-12)  # a hair of margin so that re-summing in another order stays <= eps_bar
    start = time.perf_counter()
    n = model.n
    # (1) common scale
    lo, hi = 0.0, eb
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if np.all(total_leakage(model, np.full(n, mid)) <= eb):
            lo = mid
        else:
            hi = mid
    b = _Budgets(model, np.full(n, lo))
    report(progress, 0.1, "common scale")
    # (2) coordinate ascent
    _ascend(b, eb, tol)
    # (3) exchange polish
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        improved = False
        for frac in (0.5, 0.1):
            for j in range(n):
                if b.eps[j] <= tol:
                    continue
                trial = _Budgets(model, b.eps)
                trial.set(j, b.eps[j] * (1.0 - frac))
                _ascend(trial, eb, tol, frozen=j)  # let the others use the freed leakage first
                _ascend(trial, eb, tol)
                if trial.eps.sum() > b.eps.sum() + 10 * tol * n:
                    b, improved = trial, True
        report(progress, 0.1 + 0.9 * rounds / max_rounds, f"polish round {rounds}")
        if not improved:
            break
    eps = b.eps.copy()
    tpl = total_leakage(model, eps)
    ok = bool(np.all(tpl <= eb_user))
    uni = uniform_split(model, eb_user)
    report(progress, 1.0, "done")
    return BudgetCalibration(
        columns=model.columns,
        eps=eps,
        tpl=tpl,
        eps_bar=eb_user,
        uniform_eps=uni,
        uniform_tpl=total_leakage(model, np.full(n, uni)),
        rounds=rounds,
        success=ok,
        status="optimal-coordinatewise" if ok else "infeasible",
        message="every TPL_k <= eps_bar" if ok else "a TPL constraint is violated (numerical issue)",
        seconds=time.perf_counter() - start,
    )
