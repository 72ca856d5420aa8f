"""Generalized Gaussian mechanism (GGM), scalar query: privacy-feasible scale, moments, density, sampling.


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
``p = inf`` gives ``b = Delta / (2 delta)`` (independent of ``eps``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.special as sc

from mdp_core._validation import (
    check_delta,
    check_eps,
    check_positive,
    check_rng,
    check_shape,
)
from mdp_core.errors import DataError

__all__ = [
    "ggm_delta",
    "ggm_logpdf",
    "ggm_moment",
    "ggm_pdf",
    "ggm_sample",
    "ggm_scale",
    "ggm_scale_curve",
    "ggm_second_moment",
    "ggm_tolerance",
]


_TAIL_CAP = 2000.0  # |u|^p beyond which the GG tail mass (< e^-2000) is treated as zero
_SMALL_LOG_X = -600.0  # ln |u|^p below which P(1/p, |u|^p) takes its closed form (_log_cdf)


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
    """``ln F(t)`` for the standard GG law with shape ``p`` (scale 1), finite ``p >= 1``.

    Near the centre of a large shape ``x = |t|^p`` underflows (|t| = 0.2, p = 500) although the mass within
    ``|t|`` is not small: there ``P(1/p, x) = x^(1/p) / Gamma(1 + 1/p) (1 - O(x))`` is taken in closed form,
    ``|t| / Gamma(1 + 1/p)``, instead of ``Q(1/p, 0) = 1`` (which made F = 1/2 on the whole centre).
    """
    with np.errstate(divide="ignore", over="ignore"):
        log_t = np.log(np.abs(t))
        log_x = p * log_t
        x = np.exp(log_x)
        small = log_x < _SMALL_LOG_X
        lower = np.exp(np.where(small, log_t, -np.inf) - sc.gammaln(1.0 + 1.0 / p))  # P(1/p, x), small x
        log_q = np.where(small, np.log1p(-np.minimum(lower, 1.0)), _log_q(1.0 / p, x))
    log_half_q = np.log(0.5) + log_q
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
        guess = None if h0 is None else np.broadcast_to(np.asarray(h0, dtype=np.float64), p.shape)[gen]
        out[gen] = _solve_h_general(p[gen], eps[gen], delta[gen], guess)
    return out


def _solve_h_general(p: np.ndarray, eps: np.ndarray, delta: np.ndarray, h0: np.ndarray | None) -> np.ndarray:
    target = np.log(delta) - 1e-10  # aim a relative 1e-10 below delta: evaluation noise stays private

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
    delta = check_delta(delta)
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
    try:
        ps = np.asarray(p_values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"p_values must be numbers (shapes in [1, inf]), got {p_values!r:.80}") from exc
    if ps.size == 0 or np.any(np.isnan(ps)) or np.any(ps < 1.0):
        raise DataError("p_values must be non-empty shapes in [1, inf]")
    eps = check_eps(eps)
    delta = check_delta(delta)
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
    return _log_pdf_std(z / b, np.asarray(p, dtype=np.float64)) - np.log(b)


def ggm_pdf(z: object, p: float, scale: float) -> np.ndarray:
    """Density of ``GG(0, b, p)`` at ``z`` (see :func:`ggm_logpdf`)."""
    return np.exp(ggm_logpdf(z, p, scale))


def ggm_sample(p: float, scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Draw ``GG(0, b, p)`` noise: ``b * sign * G^(1/p)`` with ``G ~ Gamma(1/p)``; uniform for ``p = inf``."""
    p = check_shape(p)
    b = check_positive(scale, "scale")
    check_rng(rng)
    dims = tuple(size) if isinstance(size, (tuple, list)) else (size,)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in dims):
        raise DataError(f"size must be a count >= 0 or a tuple of counts, got {size!r}")
    if np.isinf(p):
        return rng.uniform(-b, b, size=size)
    magnitude = rng.gamma(1.0 / p, size=size) ** (1.0 / p)
    return b * np.where(rng.random(size=size) < 0.5, -magnitude, magnitude)
