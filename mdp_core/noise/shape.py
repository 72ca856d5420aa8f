"""Noise-shape selection for the generalized Gaussian mechanism (003 Sec. 2.4, 6.8).

The shape p with the smallest error at a feasible scale, and the (delta, eps) heatmap of the best shape."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.special as sc

from mdp_core._validation import Progress, check_delta, check_eps, check_positive, report
from mdp_core.errors import DataError
from mdp_core.noise.scalar import _solve_h, ggm_scale, ggm_second_moment

__all__ = ["CRITERIA", "ShapeChoice", "ShapeHeatmap", "select_shape", "shape_heatmap"]


#: Utility criteria accepted by :func:`select_shape` (003 Sec. 2.4 and 6.8).
CRITERIA = ("second_moment", "moment", "tolerance")


_CLASSICAL = (1.0, 2.0, np.inf)
_MAX_REFINED = 4  # local minima of the coarse samples refined at most (the lowest ones)


# --------------------------------------------------------------------------- shape selection
def _objective(p: np.ndarray, h: np.ndarray, sens: float, criterion: str, m: float, t: float) -> np.ndarray:
    """Loss to minimise at shapes ``p`` with scales ``b = sens / h`` (vectorised; ``p`` may hold inf)."""
    b = sens / h
    finite = np.isfinite(p)
    pf = np.where(finite, p, 2.0)
    if criterion == "tolerance":
        inside = np.where(finite, sc.gammainc(1.0 / pf, (t / b) ** pf), np.minimum(1.0, t / b))
        return 1.0 - inside
    order = 2.0 if criterion == "second_moment" else m
    factor = np.where(
        finite, np.exp(sc.gammaln((order + 1.0) / pf) - sc.gammaln(1.0 / pf)), 1.0 / (order + 1)
    )
    return b**order * factor


@dataclass(frozen=True)
class ShapeChoice:
    """Result of :func:`select_shape`.

    ``p``/``scale`` the selected shape and its feasible scale, ``second_moment`` its ``E|Z|^2``;
    ``classical_p`` the best of ``{1, 2, inf}`` under the same criterion with ``classical_second_moment``;
    ``improvement = 1 - objective / classical_objective`` (for the second moment the variance reduction);
    ``objective`` the minimised loss (``E|Z|^2``, ``E|Z|^m`` or ``P(|Z| > t)``); ``bracket`` the interval in
    ``p`` refined around the optimum (``(inf, inf)`` if uniform wins).
    """

    p: float
    scale: float
    second_moment: float
    classical_p: float
    classical_second_moment: float
    improvement: float
    criterion: str = "second_moment"
    objective: float = float("nan")
    classical_objective: float = float("nan")
    bracket: tuple[float, float] = (float("nan"), float("nan"))


def _check_criterion(criterion: str, m: float | None, t: float | None) -> tuple[float, float]:
    if criterion not in CRITERIA:
        raise DataError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if criterion == "moment" and m is None:
        raise DataError("criterion 'moment' needs the order m > 0")
    if criterion == "tolerance" and t is None:
        raise DataError("criterion 'tolerance' needs the tolerance t > 0")
    mm = check_positive(m, "m") if m is not None else 2.0
    tt = check_positive(t, "t") if t is not None else 1.0
    return mm, tt


#: Largest ``p_max`` and smallest ``coarse_step`` of a shape search (the page goes to p = 20 by 0.1): at
#: most ~10^5 exact solves, a few seconds; GG(p) for p in the hundreds is already the uniform's shape.
MAX_P = 1000.0
MIN_COARSE_STEP = 0.01


def _check_p_max(p_max: float) -> float:
    p_max = check_positive(p_max, "p_max")
    if not 1.0 < p_max <= MAX_P:
        raise DataError(f"p_max must lie in (1, {MAX_P:g}] (p = inf is always compared), got {p_max!r}")
    return p_max


def _coarse_grid(p_max: float, step: float) -> np.ndarray:
    count = int(np.floor((p_max - 1.0) / step + 1e-9))
    grid = np.round(1.0 + step * np.arange(count + 1), 10)
    return np.unique(np.append(grid, [p_max, 2.0]))


def select_shape(
    eps: float,
    delta: float,
    sensitivity: float = 1.0,
    *,
    p_max: float = 10.0,
    criterion: str = "second_moment",
    m: float | None = None,
    t: float | None = None,
    coarse_step: float = 0.1,
    p_tol: float = 1e-5,
) -> ShapeChoice:
    """Choose the GG shape minimising a scale-homogeneous loss at the feasible scale (003 Sec. 4, 6.1, 6.8).

    The loss ``J(p) = L(p, b(p))`` is ``E|Z|^2 = b^2 Gamma(3/p) / Gamma(1/p)`` by default, ``E|Z|^m``
    (``criterion="moment"``) or the miss probability ``P(|Z| > t)`` (``criterion="tolerance"``, i.e.
    maximise the tolerance accuracy ``H_t = P(|Z| <= t)``). Search: ``J`` on the grid
    ``1, 1 + coarse_step, ..., p_max`` (exact scales, one vectorised solve), then a vectorised zoom
    (33 exact solves per round, the bracket shrinking 16-fold, to ``p_tol``) of the lowest (at most four)
    local minima of the samples that are not flat on both sides, each within its two neighbouring grid
    cells (a bounded amount of work even when the loss is flat, e.g. ``P(|Z| > t) = 0`` for every p);
    ``p = inf`` is compared exactly. Classical = best of ``p in {1, 2, inf}``.

    Parameters
    ----------
    eps, delta, sensitivity : float
        ``eps > 0``, ``delta in (0, 1)``, ``Delta > 0``.
    p_max : float
        Largest finite shape searched, in ``(1, MAX_P = 1000]``.
    coarse_step : float
        Step of the first grid, at least ``MIN_COARSE_STEP = 0.01``; ``p_tol`` is the zoom's precision.
    criterion : {"second_moment", "moment", "tolerance"}
        Loss; ``m`` (order) or ``t`` (tolerance, query units) as needed.

    Returns
    -------
    ShapeChoice
    """
    eps = check_eps(eps)
    delta = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    p_max = _check_p_max(p_max)
    mm, tt = _check_criterion(criterion, m, t)
    step = check_positive(coarse_step, "coarse_step")
    if step < MIN_COARSE_STEP:
        raise DataError(f"coarse_step must be at least {MIN_COARSE_STEP:g} (the zoom refines), got {step!r}")
    p_tol = check_positive(p_tol, "p_tol")  # (a negative one never ended the zoom)

    def loss(ps: np.ndarray, h0: np.ndarray | None = None) -> np.ndarray:
        h = _solve_h(ps, np.full(ps.shape, eps), np.full(ps.shape, delta), h0)
        return _objective(ps, h, sens, criterion, mm, tt)

    grid = _coarse_grid(p_max, step)
    grid_h = _solve_h(grid, np.full(grid.shape, eps), np.full(grid.shape, delta))
    values = _objective(grid, grid_h, sens, criterion, mm, tt)

    log_h = np.log(grid_h)

    def zoom(lo: float, hi: float) -> tuple[float, float]:
        """Vectorised zoom: 33 exact solves per round (warm-started from the grid), bracket / 16 per round."""
        best = (np.inf, lo)
        while True:
            qs = np.linspace(lo, hi, 33)
            vals = loss(qs, np.exp(np.interp(qs, grid, log_h)))
            j = int(np.argmin(vals))
            if vals[j] < best[0]:
                best = (float(vals[j]), float(qs[j]))
            if hi - lo <= 2.0 * p_tol:
                return best
            lo, hi = float(qs[max(j - 1, 0)]), float(qs[min(j + 1, qs.size - 1)])

    candidates = [(float(values[i]), float(grid[i]), (float(grid[i]), float(grid[i]))) for i in (0, -1)]
    padded = np.concatenate([[np.inf], values, [np.inf]])
    local = np.flatnonzero((padded[1:-1] <= padded[:-2]) & (padded[1:-1] <= padded[2:]))
    # A flat stretch (e.g. P(|Z| > t) = 0 for every p when t is many scales wide) makes every sample a
    # "local minimum": refine only the few lowest ones that are not flat on both sides (time bound).
    flat = (padded[1:-1] == padded[:-2]) & (padded[1:-1] == padded[2:])
    refine = [int(i) for i in local[np.argsort(values[local], kind="stable")] if not flat[i]][:_MAX_REFINED]
    for i in refine:
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
        if hi > lo:
            fun, x = zoom(lo, hi)
            candidates.append((fun, x, (lo, hi)))
        candidates.append((float(values[i]), float(grid[i]), (lo, hi)))
    inf_value = float(loss(np.array([np.inf]))[0])
    candidates.append((inf_value, float("inf"), (float("inf"), float("inf"))))
    best_value, best_p, bracket = min(candidates, key=lambda c: c[0])
    classical = np.array(_CLASSICAL)
    classical_values = loss(classical)
    k = int(np.argmin(classical_values))
    if classical_values[k] <= best_value:  # a classical shape is optimal: report it exactly
        best_value, best_p = float(classical_values[k]), float(classical[k])
    scale = ggm_scale(best_p, eps, delta, sens)
    classical_scale = ggm_scale(float(classical[k]), eps, delta, sens)
    return ShapeChoice(
        p=best_p,
        scale=scale,
        second_moment=ggm_second_moment(best_p, scale),
        classical_p=float(classical[k]),
        classical_second_moment=ggm_second_moment(float(classical[k]), classical_scale),
        improvement=float(1.0 - best_value / classical_values[k]) if classical_values[k] > 0 else 0.0,
        criterion=criterion,
        objective=best_value,
        classical_objective=float(classical_values[k]),
        bracket=bracket,
    )


# --------------------------------------------------------------------------- (eps, delta) heatmap
@dataclass(frozen=True)
class ShapeHeatmap:
    """Selected shape over an ``(eps, delta)`` grid; arrays have shape ``(len(delta), len(eps))``."""

    eps: np.ndarray
    delta: np.ndarray
    p: np.ndarray
    improvement: np.ndarray
    classical_p: np.ndarray
    second_moment: np.ndarray


def _check_deadline(deadline: float | None, limit: float | None, cells: int, done: float) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DataError(
            f"the shape heatmap ({cells:,} (ε, δ) cells) did not finish within {limit:g} s "
            f"({100 * done:.0f} % done); use a smaller grid"
        )


def shape_heatmap(
    eps: object,
    delta: object,
    sensitivity: float = 1.0,
    *,
    p_max: float = 10.0,
    progress: Progress = None,
    time_limit: float | None = None,
) -> ShapeHeatmap:
    """Second-moment shape selection on a grid by the two-stage grid search of 003 Sec. 6 (method 3).

    Stage 1: ``p = 1, 1.1, ..., p_max`` (and ``inf``); stage 2: step 0.01 within +-0.1 of each point's stage-1
    optimum. Every evaluation is one exact vectorised 1-D solve over all grid points. With ``time_limit``
    (seconds) a :class:`~mdp_core.errors.DataError` says so as soon as the search would run past it (the
    time is checked after every shape; each shape costs about 1/113 of the whole at ``p_max = 10``).
    """
    deadline = None if time_limit is None else time.monotonic() + check_positive(time_limit, "time_limit")
    e = np.asarray(eps, dtype=np.float64).ravel()
    d = np.asarray(delta, dtype=np.float64).ravel()
    for value in e:
        check_eps(value)
    for value in d:
        check_delta(value)
    sens = check_positive(sensitivity, "sensitivity")
    p_max = _check_p_max(p_max)
    E, D = np.meshgrid(e, d)
    flat_e, flat_d = E.ravel(), D.ravel()

    def loss(ps: np.ndarray, h0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        h = _solve_h(ps, flat_e, flat_d, h0)
        return _objective(ps, h, sens, "second_moment", 2.0, 1.0), h

    coarse = _coarse_grid(p_max, 0.1)
    fine_offsets = np.round(np.arange(-10, 11) * 0.01, 10)
    total = coarse.size + fine_offsets.size + 1
    best_val, best_h = loss(np.full(flat_e.shape, np.inf), None)
    best_p = np.full(flat_e.shape, np.inf)
    classical: dict[float, np.ndarray] = {}
    h_prev = None
    for i, q in enumerate(coarse):  # stage 1, warm-started from the previous shape
        val, h_prev = loss(np.full(flat_e.shape, q), h_prev)
        if q in (1.0, 2.0):
            classical[float(q)] = val
        better = val < best_val
        best_val, best_p = np.where(better, val, best_val), np.where(better, q, best_p)
        best_h = np.where(better, h_prev, best_h)
        report(progress, (i + 1) / total, f"shape p = {q:.1f}")
        _check_deadline(deadline, time_limit, e.size * d.size, (i + 1) / total)
    centre, centre_h = best_p.copy(), np.where(np.isinf(best_p), 1.0, best_h)
    for j, off in enumerate(fine_offsets):  # stage 2: step 0.01 around each stage-1 optimum
        q = np.where(np.isinf(centre), np.inf, np.clip(centre + off, 1.0, p_max))
        val, _ = loss(q, centre_h)
        better = val < best_val
        best_val, best_p = np.where(better, val, best_val), np.where(better, q, best_p)
        report(progress, (coarse.size + j + 1) / total, "refining")
        _check_deadline(deadline, time_limit, e.size * d.size, (coarse.size + j + 1) / total)
    uniform, _ = loss(np.full(flat_e.shape, np.inf), None)
    stack = np.vstack([classical[1.0], classical[2.0], uniform])
    k = np.argmin(stack, axis=0)
    classical_val = stack[k, np.arange(k.size)]
    report(progress, 1.0, "done")
    shape = D.shape
    return ShapeHeatmap(
        eps=e,
        delta=d,
        p=best_p.reshape(shape),
        improvement=(1.0 - best_val / classical_val).reshape(shape),
        classical_p=np.array(_CLASSICAL)[k].reshape(shape),
        second_moment=best_val.reshape(shape),
    )
