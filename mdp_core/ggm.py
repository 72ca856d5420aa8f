"""Generalized Gaussian mechanism (GGM): privacy-feasible scale and noise-shape selection.

Seed: ``003_e2a49a093f1a0ae8.txt`` (Scale Analysis and Shape Selection for the Generalized Gaussian
Mechanism under Approximate Differential Privacy). A scalar query with sensitivity ``Delta`` is released as
``q(D) + Z`` with ``Z ~ GG(0, b, p)``, density ``f(z) = p / (2 b Gamma(1/p)) exp(-(|z| / b)^p)``; ``p = inf``
is the uniform law on ``[-b, b]``.

One-dimensional exact method (003 Sec. 3.1-3.2). Work in units of ``b``: ``u = z / b``, ``h = Delta / b``.
The privacy loss ``L(u) = ln f(u) / f(u - h) = |u - h|^p - |u|^p`` is strictly decreasing for ``p > 1`` and
non-increasing for ``p = 1``, so the region ``{L > eps}`` is the half-line ``u < x*`` and the hockey-stick
divergence is

    delta_p(h) = F(x*) - e^eps F(x* - h),    |x* - h|^p - |x*|^p = eps,

with ``F`` the standard GG cdf (``scipy.stats.gennorm``; evaluated here through ``scipy.special.gammaincc``
with an asymptotic continuation in the far tail). ``delta_p`` increases with ``h`` and
``d delta / dh = e^eps f(x* - h)`` (envelope theorem), so ``b(p) = Delta / h*`` with ``delta_p(h*) = delta``
is found by safeguarded Newton in ``log h``. Closed forms: ``p = 1`` gives
``b = Delta / (eps - 2 ln(1 - delta))``; ``p = 2`` the analytic Gaussian mechanism with
``sigma = b / sqrt 2``;
``p = inf`` gives ``b = Delta / (2 delta)`` (independent of ``eps``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.special as sc
from scipy.optimize import minimize_scalar

from mdp_core._ggm_vector import VectorScale, ggm_delta_vector_bounds, ggm_scale_vector
from mdp_core._validation import Progress, check_eps, check_positive, check_shape, report
from mdp_core.errors import DataError

__all__ = [
    "CRITERIA",
    "ShapeChoice",
    "ShapeHeatmap",
    "VectorScale",
    "ggm_delta",
    "ggm_delta_vector_bounds",
    "ggm_logpdf",
    "ggm_moment",
    "ggm_pdf",
    "ggm_sample",
    "ggm_scale",
    "ggm_scale_curve",
    "ggm_scale_vector",
    "ggm_second_moment",
    "ggm_tolerance",
    "select_shape",
    "shape_heatmap",
]

#: Utility criteria accepted by :func:`select_shape` (003 Sec. 2.4 and 6.8).
CRITERIA = ("second_moment", "moment", "tolerance")
_CLASSICAL = (1.0, 2.0, np.inf)
_TAIL_CAP = 2000.0  # |u|^p beyond which the GG tail mass (< e^-2000) is treated as zero


# --------------------------------------------------------------------------- validation
def _check_delta(delta: object, name: str = "delta") -> float:
    value = check_positive(delta, name)
    if value >= 1.0:
        raise DataError(f"{name} must be in (0, 1), got {delta!r}")
    return value


# --------------------------------------------------------------------------- standard GG law
def _log_q(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``ln Q(a, x)``, the log regularised upper incomplete gamma, stable for large ``x``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        direct = np.log(sc.gammaincc(a, np.minimum(x, 600.0)))
        xs = np.maximum(x, 600.0)
        a1 = a - 1.0
        series = 1.0 + a1 / xs * (1.0 + (a1 - 1.0) / xs * (1.0 + (a1 - 2.0) / xs))
        asym = -xs + a1 * np.log(xs) - sc.gammaln(a) + np.log(series)
        out = np.where(x <= 600.0, direct, asym)
    return np.where(np.isinf(x), -np.inf, out)


def _log_cdf(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``ln F(t)`` for the standard GG law with shape ``p`` (scale 1), finite ``p >= 1``."""
    with np.errstate(divide="ignore", over="ignore"):
        x = np.exp(p * np.log(np.abs(t)))
    log_half_q = np.log(0.5) + _log_q(1.0 / p, x)
    return np.where(t <= 0, log_half_q, np.log1p(-np.exp(log_half_q)))


def _log_pdf_std(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):
        return np.log(0.5 * p) - sc.gammaln(1.0 / p) - np.exp(p * np.log(np.abs(t)))


# --------------------------------------------------------------------------- 1-D hockey stick
def _loss_log(t: np.ndarray, h: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``G = ln g(s)`` and ``dG/d ln s`` for ``g(s) = (s + h/2)^p - |s - h/2|^p``, ``s = e^t``."""
    s = np.exp(t)
    a = s + 0.5 * h
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.minimum(0.5 * h / s, 2.0 * s / h)
        log_ratio = -2.0 * np.arctanh(np.minimum(r, 1.0))  # ln(|s - h/2| / (s + h/2))
        G = p * np.log(a) + np.log(-np.expm1(p * log_ratio))
        q = np.exp(log_ratio)
        sign = np.where(s > 0.5 * h, 1.0, -1.0)
        dG = s * p / a * (1.0 - sign * q ** (p - 1.0)) / (-np.expm1(p * log_ratio))
    return G, dG


def _newton_root(
    fun: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    tol: float,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised safeguarded Newton for increasing ``fun`` with finite brackets ``lo < root <= hi``.

    ``fun(x_active, index)`` returns the value and derivative on the still-active elements; an element stops
    when ``|value| <= tol`` or its step is below ``tol``. Steps leaving the bracket are replaced by bisection.
    """
    x, lo, hi = x.copy(), lo.copy(), hi.copy()
    active = np.arange(x.size)
    for _ in range(max_iter):
        if active.size == 0:
            break
        xa = x[active]
        val, der = fun(xa, active)
        pos = val > 0
        hi[active] = np.where(pos, xa, hi[active])
        lo[active] = np.where(pos, lo[active], xa)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            newton = xa - val / der
        ok = np.isfinite(newton) & (newton >= lo[active]) & (newton <= hi[active])
        new = np.where(ok, newton, 0.5 * (lo[active] + hi[active]))
        x[active] = new
        scale = np.maximum(1.0, np.abs(xa))
        done = (np.abs(val) <= tol) | (np.abs(new - xa) <= tol * scale)
        done |= hi[active] - lo[active] <= tol * scale
        active = active[~done]
    return x, lo, hi


def _boundary(h: np.ndarray, eps: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``g(s) = eps`` for ``s = h/2 - x*`` (safeguarded Newton in ``ln s``); flag capped roots."""
    target = np.log(eps)
    # g(s) <= s * max(g'(0), g'(h/2)) on [0, h/2] (g is concave there for p <= 2, convex for p >= 2).
    log_slope = np.log(p) + (p - 1.0) * np.maximum(np.log(2.0) / (p - 1.0) + np.log(0.5 * h), np.log(h))
    lo = np.minimum(np.log(0.5 * h), np.log(0.5 * eps) - log_slope)
    for _ in range(60):
        bad = _loss_log(lo, h, p)[0] >= target
        if not bad.any():
            break
        lo = np.where(bad, lo - 5.0, lo)
    hi = np.maximum(np.log(0.5 * h + _TAIL_CAP ** (1.0 / p)), lo + 1e-3)
    capped = _loss_log(hi, h, p)[0] < target
    # Start from the linearisation g(s) ~ g'(0) s, clipped into the bracket.
    t0 = np.clip(target - np.log(2.0 * p) - (p - 1.0) * np.log(0.5 * h), lo, hi)
    t = hi.copy()
    free = ~capped
    if free.any():
        hf, pf, tf = h[free], p[free], target[free]

        def fun(x: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            G, dG = _loss_log(x, hf[idx], pf[idx])
            return G - tf[idx], dG

        t[free] = _newton_root(fun, t0[free], lo[free], hi[free], tol=1e-14)[0]
    return np.exp(t), capped


def _log_delta_std(h: np.ndarray, eps: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ln delta_p(h)`` and ``d ln delta / d ln h`` for finite ``p > 1`` (all arrays, same shape)."""
    s, capped = _boundary(h, eps, p)
    x_star = 0.5 * h - s
    lf1 = _log_cdf(x_star, p)
    lf2 = _log_cdf(x_star - h, p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_delta = lf1 + np.log(-np.expm1(np.minimum(eps + lf2 - lf1, -1e-300)))
        log_delta = np.where(np.isfinite(lf1), log_delta, -np.inf)
        slope = np.exp(np.log(h) + eps + _log_pdf_std(x_star - h, p) - log_delta)
    log_delta = np.where(capped, lf1, log_delta)  # upper bound below e^-2000: negligible
    return log_delta, np.where(capped, np.nan, slope)


def _solve_h(p: object, eps: object, delta: object, h0: object = None) -> np.ndarray:
    """``h* = Delta / b(p)`` with ``delta_p(h*) <= delta`` (private side); ``h0``: warm start."""
    p, eps, delta = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (p, eps, delta)))
    out = np.empty(p.shape)
    lap = p == 1.0
    uni = np.isinf(p)
    gen = ~(lap | uni)
    safe = 1.0 - 1e-12  # closed forms rounded to the private side, like the numerical roots
    out[lap] = (eps[lap] - 2.0 * np.log1p(-delta[lap])) * safe
    out[uni] = 2.0 * delta[uni] * safe
    if gen.any():
        guess = None if h0 is None else np.broadcast_to(h0, p.shape)[gen]
        out[gen] = _solve_h_general(p[gen], eps[gen], delta[gen], guess)
    return out


def _solve_h_general(p: np.ndarray, eps: np.ndarray, delta: np.ndarray, h0: np.ndarray | None) -> np.ndarray:
    target = np.log(delta)

    def phi(y: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ld, slope = _log_delta_std(np.exp(y), eps[idx], p[idx])
        return ld - target[idx], slope

    everything = np.arange(p.size)
    if h0 is None:
        y, step = np.log(np.minimum(eps - 2.0 * np.log1p(-delta), 2.0 * delta)), 1.0
    else:
        y, step = np.log(h0), 0.05
    val, _ = phi(y, everything)
    lo = np.where(val <= 0, y, -np.inf)
    hi = np.where(val > 0, y, np.inf)
    for _ in range(80):  # expand the bracket geometrically in ln h
        need = np.flatnonzero(np.isinf(lo) | np.isinf(hi))
        if need.size == 0:
            break
        probe = np.where(np.isinf(lo[need]), y[need] - step, y[need] + step)
        val, _ = phi(probe, need)
        lo[need] = np.where(np.isinf(lo[need]) & (val <= 0), probe, lo[need])
        hi[need] = np.where(np.isinf(hi[need]) & (val > 0), probe, hi[need])
        step *= 2.0
    start = np.where(np.isinf(lo) | np.isinf(hi), y, np.where(hi - lo < 1.0, 0.5 * (lo + hi), y))
    start = np.clip(start, lo, hi)
    y, lo, _ = _newton_root(phi, start, lo, hi, tol=1e-13)
    # Step to the private side of the root: ln h - 1e-12 (b larger by a relative 1e-12), checked.
    safe = y - 1e-12
    val, _ = phi(safe, everything)
    return np.exp(np.where(val <= 0, safe, lo))


# --------------------------------------------------------------------------- public 1-D API
def ggm_delta(p: float, scale: float, eps: float, sensitivity: float = 1.0) -> float:
    """Exact hockey-stick divergence ``delta_{p,b}(Delta)`` of the 1-D GGM (003 Sec. 3.1).

    Parameters
    ----------
    p : float
        Shape in ``[1, inf]``.
    scale : float
        ``b > 0`` (same units as the query).
    eps : float
        Privacy budget ``> 0``.
    sensitivity : float
        ``Delta > 0``.

    Returns
    -------
    float
        ``F(x*) - e^eps F(x* - h)`` in units of ``b`` (``h = Delta / b``); ``min(1, h / 2)`` for ``p = inf``
        and ``max(0, 1 - exp((eps - h) / 2))`` for ``p = 1``.
    """
    p = check_shape(p)
    b = check_positive(scale, "scale")
    eps = check_eps(eps)
    h = check_positive(sensitivity, "sensitivity") / b
    if np.isinf(p):
        return min(1.0, h / 2.0)
    if p == 1.0:
        return max(0.0, float(-np.expm1((eps - h) / 2.0)))
    log_delta, _ = _log_delta_std(np.array([h]), np.array([eps]), np.array([p]))
    return float(np.exp(log_delta[0]))


def ggm_scale(p: float, eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest scale ``b`` with ``delta_{p,b}(Delta) <= delta``: the privacy-feasible scale (003 Sec. 3.1).

    Parameters
    ----------
    p : float
        Shape in ``[1, inf]`` (1 Laplace, 2 Gaussian, inf uniform).
    eps : float
        Privacy budget ``> 0``.
    delta : float
        In ``(0, 1)``.
    sensitivity : float
        ``Delta > 0``, same units as the query; ``b`` is linear in it.

    Returns
    -------
    float
        ``b(p)``, rounded up by a relative 1e-12 so that ``ggm_delta(p, b, eps, Delta) <= delta``.
        ``p = 1``: ``Delta / (eps - 2 ln(1 - delta))``; ``p = inf``: ``Delta / (2 delta)``.
    """
    p = check_shape(p)
    eps = check_eps(eps)
    delta = _check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    return float(sens / _solve_h(np.array([p]), np.array([eps]), np.array([delta]))[0])


def ggm_scale_curve(p_values: object, eps: float, delta: float, sensitivity: float = 1.0) -> np.ndarray:
    """The scale map ``p -> b(p)`` (003 Sec. 4.1) at many shapes in one vectorised exact solve.

    Parameters
    ----------
    p_values : array_like
        Shapes in ``[1, inf]``.
    eps, delta, sensitivity : float
        As in :func:`ggm_scale`.

    Returns
    -------
    ndarray
        ``b(p)`` for every shape (same shape as ``p_values``), each equal to ``ggm_scale(p, ...)``.
    """
    ps = np.asarray(p_values, dtype=np.float64)
    if ps.size == 0 or np.any(np.isnan(ps)) or np.any(ps < 1.0):
        raise DataError("p_values must be non-empty shapes in [1, inf]")
    eps = check_eps(eps)
    delta = _check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    return sens / _solve_h(ps, eps, delta)


def ggm_moment(p: float, scale: float, m: float = 2.0) -> float:
    """``E|Z|^m = b^m Gamma((m + 1) / p) / Gamma(1 / p)``; ``b^m / (m + 1)`` if ``p = inf`` (003 5.2)."""
    p = check_shape(p)
    b = check_positive(scale, "scale")
    m = check_positive(m, "m")
    if np.isinf(p):
        return b**m / (m + 1.0)
    return float(np.exp(m * np.log(b) + sc.gammaln((m + 1.0) / p) - sc.gammaln(1.0 / p)))


def ggm_second_moment(p: float, scale: float) -> float:
    """``E|Z|^2 = b^2 Gamma(3/p) / Gamma(1/p)`` (the variance); ``b^2 / 3`` for ``p = inf``."""
    return ggm_moment(p, scale, 2.0)


def ggm_tolerance(p: float, scale: float, t: float) -> float:
    """``P(|Z| <= t) = P(1/p, (t/b)^p)`` (regularised lower gamma); ``min(1, t/b)`` if ``p = inf``."""
    p = check_shape(p)
    b = check_positive(scale, "scale")
    t = check_positive(t, "t")
    if np.isinf(p):
        return min(1.0, t / b)
    return float(sc.gammainc(1.0 / p, (t / b) ** p))


def ggm_logpdf(z: object, p: float, scale: float) -> np.ndarray:
    """Log density ``ln(p / (2 b Gamma(1/p))) - (|z| / b)^p``; ``-ln 2b`` on ``[-b, b]`` if ``p = inf``."""
    p = check_shape(p)
    b = check_positive(scale, "scale")
    z = np.asarray(z, dtype=np.float64)
    if np.isinf(p):
        return np.where(np.abs(z) <= b, -np.log(2.0 * b), -np.inf)
    return _log_pdf_std(z / b, np.float64(p)) - np.log(b)


def ggm_pdf(z: object, p: float, scale: float) -> np.ndarray:
    """Density of ``GG(0, b, p)`` at ``z`` (see :func:`ggm_logpdf`)."""
    return np.exp(ggm_logpdf(z, p, scale))


def ggm_sample(p: float, scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Draw ``GG(0, b, p)`` noise: ``b * sign * G^(1/p)`` with ``G ~ Gamma(1/p)``; uniform for ``p = inf``."""
    p = check_shape(p)
    b = check_positive(scale, "scale")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if np.isinf(p):
        return rng.uniform(-b, b, size=size)
    magnitude = rng.gamma(1.0 / p, size=size) ** (1.0 / p)
    return b * np.where(rng.random(size=size) < 0.5, -magnitude, magnitude)


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
    ``1, 1 + coarse_step, ..., p_max`` (exact scales, one vectorised solve), then bounded Brent refinement
    (to ``p_tol``) of every local minimum of the samples within its two neighbouring grid cells, so every
    candidate minimum at grid resolution is bracketed; ``p = inf`` is compared exactly. Classical = best of
    ``p in {1, 2, inf}``.

    Parameters
    ----------
    eps, delta, sensitivity : float
        ``eps > 0``, ``delta in (0, 1)``, ``Delta > 0``.
    p_max : float
        Largest finite shape searched (``> 1``).
    criterion : {"second_moment", "moment", "tolerance"}
        Loss; ``m`` (order) or ``t`` (tolerance, query units) as needed.

    Returns
    -------
    ShapeChoice
    """
    eps = check_eps(eps)
    delta = _check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    p_max = check_positive(p_max, "p_max")
    if p_max <= 1.0:
        raise DataError(f"p_max must be > 1, got {p_max!r}")
    mm, tt = _check_criterion(criterion, m, t)
    step = check_positive(coarse_step, "coarse_step")

    def loss(ps: np.ndarray) -> np.ndarray:
        h = _solve_h(ps, np.full(ps.shape, eps), np.full(ps.shape, delta))
        return _objective(ps, h, sens, criterion, mm, tt)

    grid = _coarse_grid(p_max, step)
    values = loss(grid)
    candidates = [(float(values[i]), float(grid[i]), (float(grid[i]), float(grid[i]))) for i in (0, -1)]
    padded = np.concatenate([[np.inf], values, [np.inf]])
    local = np.flatnonzero((padded[1:-1] <= padded[:-2]) & (padded[1:-1] <= padded[2:]))
    for i in local:
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
        if hi > lo:
            res = minimize_scalar(
                lambda q: float(loss(np.array([q]))[0]),
                bounds=(lo, hi),
                method="bounded",
                options={"xatol": p_tol},
            )
            candidates.append((float(res.fun), float(res.x), (lo, hi)))
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


def shape_heatmap(
    eps: object,
    delta: object,
    sensitivity: float = 1.0,
    *,
    p_max: float = 10.0,
    progress: Progress = None,
) -> ShapeHeatmap:
    """Second-moment shape selection on a grid by the two-stage grid search of 003 Sec. 6 (method 3).

    Stage 1: ``p = 1, 1.1, ..., p_max`` (and ``inf``); stage 2: step 0.01 within +-0.1 of each point's stage-1
    optimum. Every evaluation is one exact vectorised 1-D solve over all grid points.
    """
    e = np.asarray(eps, dtype=np.float64).ravel()
    d = np.asarray(delta, dtype=np.float64).ravel()
    for value in e:
        check_eps(value)
    for value in d:
        _check_delta(value)
    sens = check_positive(sensitivity, "sensitivity")
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
    centre, centre_h = best_p.copy(), np.where(np.isinf(best_p), 1.0, best_h)
    for j, off in enumerate(fine_offsets):  # stage 2: step 0.01 around each stage-1 optimum
        q = np.where(np.isinf(centre), np.inf, np.clip(centre + off, 1.0, p_max))
        val, _ = loss(q, centre_h)
        better = val < best_val
        best_val, best_p = np.where(better, val, best_val), np.where(better, q, best_p)
        report(progress, (coarse.size + j + 1) / total, "refining")
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
