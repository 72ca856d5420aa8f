"""Vector queries for the GGM: Monte Carlo + empirical Bernstein (003 Sec. 3.4-3.6).

A ``d``-dimensional query with coordinate-wise sensitivity vector ``Delta`` gets i.i.d. ``GG(0, b, p)`` noise
in every coordinate. The worst shift over the sensitivity box is its corner ``Delta`` (003 Lemma 3.5), and

    delta_{p,b}(Delta) = E_W[(1 - exp(eps - L(W)))_+],   L(W) = sum_i |W_i - Delta_i / b|^p - |W_i|^p,

with ``W`` standard GG. The summand lies in ``[0, 1]``, so the empirical Bernstein inequality of Maurer and
Pontil (2009, Thm 4) bounds the mean from above with probability ``1 - alpha``:
``U = mean + sqrt(2 V ln(2/alpha) / n) + 7 ln(2/alpha) / (3 (n - 1))`` (``V`` the unbiased sample variance).
A scale is proposed from a pilot sample and certified on fresh samples (budgets ``alpha / 2^(k+1)`` for the
k-th attempt, so at most ``alpha`` in total); the released mechanism is ``(eps, delta + alpha)``-DP
(003 Theorem 3.7 and Corollary 3.8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from mdp_core._validation import (
    as_float_array,
    check_delta,
    check_eps,
    check_positive,
    check_rng,
    check_shape,
)
from mdp_core.errors import DataError
from mdp_core.noise.scalar import ggm_scale

__all__ = ["VectorScale", "ggm_delta_vector_bounds", "ggm_scale_vector"]


@dataclass(frozen=True)
class VectorScale:
    """A GGM scale for a vector query.

    ``scale`` is private for ``(eps, delta)`` with probability at least ``1 - alpha`` over the Monte Carlo
    draws, hence the mechanism is ``(eps, delta + alpha)``-DP (``total_delta``). ``delta_upper`` is the
    certifying empirical Bernstein bound, ``n_samples`` the certification sample size, ``attempts`` the number
    of certification rounds; ``exact`` is True when a closed form / exact 1-D solve was used (``alpha = 0``).
    """

    p: float
    scale: float
    eps: float
    delta: float
    alpha: float
    delta_upper: float
    n_samples: int
    attempts: int
    exact: bool

    @property
    def total_delta(self) -> float:
        """``delta + alpha``: the unconditional privacy parameter of the released mechanism."""
        return self.delta + self.alpha


def _standard_samples(p: float, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    magnitude = rng.gamma(1.0 / p, size=(n, d)) ** (1.0 / p)
    return np.where(rng.random(size=(n, d)) < 0.5, -magnitude, magnitude)


def _excess(w: np.ndarray, h: np.ndarray, eps: float, p: float) -> np.ndarray:
    """Per-sample ``(1 - exp(eps - L))_+`` with ``L = sum |w - h|^p - |w|^p`` (units of ``b``)."""
    loss = np.sum(np.abs(w - h) ** p - np.abs(w) ** p, axis=1)
    return -np.expm1(np.minimum(0.0, eps - loss))


def _bernstein(x: np.ndarray, alpha: float) -> tuple[float, float, float]:
    n = x.size
    mean = float(x.mean())
    var = float(x.var(ddof=1))
    log_term = np.log(2.0 / alpha)
    radius = np.sqrt(2.0 * var * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
    return mean, max(0.0, mean - radius), min(1.0, mean + radius)


def _check_inputs(p: object, eps: object, sensitivity: object) -> tuple[float, float, np.ndarray]:
    pf = check_shape(p)
    sens = np.abs(as_float_array(sensitivity, "sensitivity").ravel())
    if not np.any(sens > 0):
        raise DataError("sensitivity must have at least one non-zero coordinate")
    return pf, check_eps(eps), sens[sens > 0]


def ggm_delta_vector_bounds(
    p: float,
    scale: float,
    eps: float,
    sensitivity: object,
    *,
    rng: np.random.Generator,
    n_samples: int = 100_000,
    alpha: float = 1e-3,
) -> tuple[float, float, float]:
    """Monte Carlo estimate and empirical Bernstein bounds of ``delta_{p,b}(Delta)`` (003 Prop. 3.6).

    Returns ``(mean, lower, upper)``; each bound holds with probability ``>= 1 - alpha`` (finite ``p``).
    """
    pf, eps, sens = _check_inputs(p, eps, sensitivity)
    b = check_positive(scale, "scale")
    if np.isinf(pf):
        raise DataError("p = inf has the exact form 1 - prod(1 - Delta_i / (2 b)); no Monte Carlo needed")
    w = _standard_samples(pf, int(n_samples), sens.size, check_rng(rng))
    return _bernstein(_excess(w, sens / b, eps, pf), check_positive(alpha, "alpha"))


def ggm_scale_vector(
    p: float,
    eps: float,
    delta: float,
    sensitivity: object,
    *,
    rng: np.random.Generator,
    alpha: float = 1e-3,
    n_pilot: int = 50_000,
    n_samples: int = 200_000,
    max_attempts: int = 12,
) -> VectorScale:
    """GGM scale for a vector query with coordinate-wise sensitivity ``Delta`` (003 Sec. 3.5-3.6).

    Exact when only one coordinate is non-zero (the 1-D solve, 003 Prop. 5.1) or ``p = inf``
    (``1 - prod_i (1 - Delta_i / (2 b))_+ = delta``, solved by ``brentq``). Otherwise: a pilot proposes ``b``
    such that the predicted certification bound is ``0.97 delta``; fresh samples certify
    ``U_n(alpha_k; b) <= delta`` with ``alpha_k = alpha / 2^(k+1)``, enlarging ``b`` by 1 % on failure.

    Returns
    -------
    VectorScale
        With ``total_delta = delta + alpha``.
    """
    pf, eps, sens = _check_inputs(p, eps, sensitivity)
    delta = check_delta(delta)
    alpha = check_positive(alpha, "alpha")
    if alpha >= 1.0:
        raise DataError(f"alpha must be in (0, 1), got {alpha!r}")
    if sens.size == 1:
        b = ggm_scale(pf, eps, delta, float(sens[0]))
        return VectorScale(pf, b, eps, delta, 0.0, delta, 0, 0, True)
    if np.isinf(pf):
        lo = float(sens.max()) / 2.0
        f = lambda b: 1.0 - np.prod(1.0 - sens / (2.0 * b)) - delta  # noqa: E731
        b = brentq(f, lo, lo * 4.0 / delta, xtol=1e-14, rtol=1e-15) * (1.0 + 1e-12)
        return VectorScale(pf, b, eps, delta, 0.0, delta, 0, 0, True)
    rng = check_rng(rng)
    n, d = int(n_samples), sens.size
    if n < 1000 or int(n_pilot) < 100:
        raise DataError("n_samples must be >= 1000 and n_pilot >= 100")
    pilot = _standard_samples(pf, int(n_pilot), d, rng)
    log_term = np.log(2.0 / (alpha / 2.0))

    def predicted(log_b: float) -> float:
        x = _excess(pilot, sens / np.exp(log_b), eps, pf)
        radius = np.sqrt(2.0 * x.var(ddof=1) * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
        return float(x.mean() + radius - 0.97 * delta)

    start = np.log(ggm_scale(pf, eps, delta, float(np.linalg.norm(sens, 1))))
    lo, hi = start - np.log(2.0 * d), start + 1.0
    while predicted(hi) > 0:
        lo, hi = hi, hi + 1.0
    log_b = brentq(predicted, lo, hi, xtol=1e-6) if predicted(lo) > 0 else lo
    b = float(np.exp(log_b))
    for k in range(max_attempts):
        alpha_k = alpha / 2.0 ** (k + 1)
        w = _standard_samples(pf, n, d, rng)
        _, _, upper = _bernstein(_excess(w, sens / b, eps, pf), alpha_k)
        if upper <= delta:
            return VectorScale(pf, b, eps, delta, alpha, float(upper), n, k + 1, False)
        b *= 1.01
    raise DataError(f"could not certify a scale within {max_attempts} attempts; raise n_samples")
