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

Exact cases need no Monte Carlo: one non-zero coordinate (the 1-D solve), ``p = 2`` (the divergence depends
on ``||Delta||_2`` only, 003 Prop. 3.4: the analytic Gaussian mechanism at that sensitivity) and ``p = inf``
(``delta = 1 - prod_i (1 - Delta_i / (2 b))_+``, independent of ``eps``).

Termination. The certificate can only pass when its floor ``7 ln(2/alpha) / (3 (n - 1))`` (the bound at
zero variance) is below ``delta``, so the sample size is chosen from ``delta`` (about ``1 / delta``
samples), capped by ``max_samples`` and by what fits in ``time_limit`` seconds; when even that cannot
certify, or the deadline passes, or ``max_attempts`` certifications fail, a
:class:`~mdp_core.errors.DataError` says so and what to change. No scale is ever returned without a passed
certificate (or an exact solve).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from mdp_core._validation import (
    Progress,
    as_float_array,
    check_delta,
    check_eps,
    check_positive,
    check_rng,
    check_shape,
    report,
)
from mdp_core.errors import DataError
from mdp_core.noise.scalar import ggm_scale

__all__ = ["VectorScale", "ggm_delta_vector_bounds", "ggm_scale_vector"]

_CHUNK_VALUES = 1_000_000  # coordinates drawn per chunk (memory ~ 3 x 8 MB)
_TARGET = 0.93  # the pilot aims the certification bound at this fraction of delta
_METHODS = ("auto", "monte_carlo")


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


# --------------------------------------------------------------------------- sampling and the summand
def _standard_samples(p: float, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n x d`` standard ``GG(0, 1, p)`` draws: ``sign * Gamma(1/p)^(1/p)`` (Laplace / normal fast paths)."""
    if p == 1.0:
        return rng.laplace(size=(n, d))
    if p == 2.0:
        return rng.standard_normal(size=(n, d)) * np.sqrt(0.5)
    magnitude = rng.gamma(1.0 / p, size=(n, d)) ** (1.0 / p)
    return np.where(rng.random(size=(n, d)) < 0.5, -magnitude, magnitude)


def _excess(w: np.ndarray, h: np.ndarray, eps: float, p: float) -> np.ndarray:
    """Per-sample ``(1 - exp(eps - L))_+`` with ``L = sum |w - h|^p - |w|^p`` (units of ``b``).

    A power that overflows is ``+inf`` and only where ``|w - h| > |w|`` (``|w|`` of a standard GG draw is far
    below ``1e15``), so ``L = +inf`` and the summand is exactly 1: no NaN, no warning.
    """
    with np.errstate(over="ignore"):
        loss = np.sum(np.abs(w - h) ** p - np.abs(w) ** p, axis=1)
    return -np.expm1(np.minimum(0.0, eps - loss))


def _radius(var: float, n: int, log_term: float) -> float:
    """Empirical Bernstein radius ``sqrt(2 V ln(2/a) / n) + 7 ln(2/a) / (3 (n - 1))`` (Maurer-Pontil)."""
    return float(np.sqrt(2.0 * max(var, 0.0) * log_term / n) + 7.0 * log_term / (3.0 * (n - 1)))


def _bernstein(x: np.ndarray, alpha: float) -> tuple[float, float, float]:
    n = x.size
    mean = float(x.mean())
    radius = _radius(float(x.var(ddof=1)), n, float(np.log(2.0 / alpha)))
    return mean, max(0.0, mean - radius), min(1.0, mean + radius)


def _stream_moments(
    p: float,
    h: np.ndarray,
    eps: float,
    n: int,
    rng: np.random.Generator,
    *,
    deadline: float,
    progress: Progress = None,
    span: tuple[float, float] = (0.0, 1.0),
    what: str = "certifying",
) -> tuple[float, float]:
    """Mean and unbiased variance of the summand over ``n`` fresh draws, in chunks (Chan's update)."""
    d = h.size
    chunk = max(1, _CHUNK_VALUES // d)
    count, mean, m2 = 0, 0.0, 0.0
    while count < n:
        if time.monotonic() > deadline:
            raise TimeoutError
        k = min(chunk, n - count)
        x = _excess(_standard_samples(p, k, d, rng), h, eps, p)
        xm = float(x.mean())
        xm2 = float(np.sum((x - xm) ** 2))
        total = count + k
        delta_mean = xm - mean
        mean += delta_mean * k / total
        m2 += xm2 + delta_mean**2 * count * k / total
        count = total
        report(progress, span[0] + (span[1] - span[0]) * count / n, f"{what}: {count:,} of {n:,} samples")
    return mean, m2 / (n - 1)


# --------------------------------------------------------------------------- sample sizes
def _required_n(delta: float, log_term: float) -> int:
    """Samples for which a summand mean of ``delta / 2`` (variance <= mean) certifies at ``0.9 delta``.

    Solves ``sqrt(delta L / n) + 7 L / (3 n) = 0.4 delta`` for ``n`` (``L = ln(2/alpha)``).
    """
    a, b, c = 7.0 * log_term / 3.0, np.sqrt(delta * log_term), -0.4 * delta
    s = (-b + np.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)  # s = 1 / sqrt(n)
    return int(np.ceil(1.0 / s**2)) + 1


def _smallest_delta(n: int, log_term: float) -> float:
    """The ``delta`` whose :func:`_required_n` is ``n`` (what ``n`` samples can comfortably certify)."""
    s = 1.0 / np.sqrt(n)
    root_l = np.sqrt(log_term)
    u = (root_l * s + np.sqrt(log_term * s * s + 4.0 * 0.4 * 7.0 * log_term * s * s / 3.0)) / 0.8
    return float(u * u)


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
    alpha = check_positive(alpha, "alpha")
    n = int(n_samples)
    if n < 2:
        raise DataError(f"n_samples must be >= 2, got {n_samples!r}")
    mean, var = _stream_moments(pf, sens / b, eps, n, check_rng(rng), deadline=float("inf"))
    radius = _radius(var, n, float(np.log(2.0 / alpha)))
    return mean, max(0.0, mean - radius), min(1.0, mean + radius)


# --------------------------------------------------------------------------- exact cases
def _uniform_scale(delta: float, sens: np.ndarray) -> float:
    """Smallest ``b`` with ``1 - prod_i (1 - Delta_i / (2 b))_+ <= delta`` (``p = inf``), on the safe side.

    ``b = max(Delta) / 2`` gives divergence 1; the union bound ``sum_i Delta_i / (2 b)`` shows that
    ``b = sum(Delta) / (2 delta)`` is feasible, so the root is bracketed for every dimension.
    """

    def excess(b: float) -> float:
        x = np.minimum(sens / (2.0 * b), 1.0)
        with np.errstate(divide="ignore"):
            return float(-np.expm1(np.sum(np.log1p(-x)))) - delta

    lo, hi = float(sens.max()) / 2.0, float(sens.sum()) / (2.0 * delta)
    if excess(hi) >= 0.0:  # only when the union bound is tight (one coordinate): hi is the exact answer
        return hi
    b = brentq(excess, lo, hi, xtol=1e-14 * hi, rtol=1e-15) * (1.0 + 1e-12)
    return b if excess(b) <= 0.0 else hi


def _exact_scale(pf: float, eps: float, delta: float, sens: np.ndarray) -> float | None:
    """The exact scale when one exists (1 coordinate, ``p = 2``, ``p = inf``), else ``None``."""
    if sens.size == 1:
        return ggm_scale(pf, eps, delta, float(sens[0]))
    if np.isinf(pf):
        return _uniform_scale(delta, sens)
    if pf == 2.0:  # rotation invariance: delta depends on ||Delta||_2 only (003 Prop. 3.4)
        return ggm_scale(2.0, eps, delta, float(np.linalg.norm(sens)))
    return None


# --------------------------------------------------------------------------- public
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
    max_samples: int = 20_000_000,
    max_attempts: int = 8,
    time_limit: float = 30.0,
    method: str = "auto",
    progress: Progress = None,
) -> VectorScale:
    """GGM scale for a vector query with coordinate-wise sensitivity ``Delta`` (003 Sec. 3.5-3.6).

    Exact (``alpha = 0``) when only one coordinate is non-zero (the 1-D solve), ``p = 2`` (003 Prop. 3.4)
    or ``p = inf``; ``method="monte_carlo"`` forces the Monte Carlo path for finite ``p`` (tests, benches).
    Otherwise: ``n = max(n_samples, ~ 1 / delta)`` certification samples (capped by ``max_samples`` and by
    the time the pilot's draw rate allows); a pilot proposes ``b`` whose predicted certification bound is
    ``0.93 delta``; fresh samples certify ``U_n(alpha_k; b) <= delta`` with ``alpha_k = alpha / 2^(k+1)``.
    After a failed certificate the next proposal aims lower by the observed ratio (and at least 2 % higher
    in ``b``, doubling each time), all within ``max_attempts`` rounds and ``time_limit`` seconds.

    Parameters
    ----------
    p, eps, delta : float
        Shape in ``[1, inf]``, budget ``> 0``, ``delta`` in ``(0, 1)``.
    sensitivity : array_like
        Non-negative coordinate-wise sensitivities (query units), at least one positive; zeros are dropped.
    rng : numpy.random.Generator
        Source of the Monte Carlo draws.
    alpha : float
        Monte Carlo failure probability in ``(0, 1)``: the mechanism is ``(eps, delta + alpha)``-DP.
    n_pilot, n_samples, max_samples : int
        Pilot size (raised to ~30 / delta, at most 2e6 values), smallest and largest certification sample.
    max_attempts : int
        Certification rounds at most.
    time_limit : float
        Seconds; the Monte Carlo path stops with a DataError when it would need more.
    progress : callable, optional
        ``progress(fraction, message)``.

    Returns
    -------
    VectorScale
        With ``total_delta = delta + alpha`` (``delta`` when exact).

    Raises
    ------
    DataError
        Bad input; or ``delta`` too small to certify by Monte Carlo within the sample cap / time limit; or no
        certificate within ``max_attempts`` rounds. The message names what to change.
    """
    pf, eps, sens = _check_inputs(p, eps, sensitivity)
    delta = check_delta(delta)
    alpha = check_positive(alpha, "alpha")
    if alpha >= 1.0:
        raise DataError(f"alpha must be in (0, 1), got {alpha!r}")
    if method not in _METHODS:
        raise DataError(f"method must be one of {_METHODS}, got {method!r}")
    time_limit = check_positive(time_limit, "time_limit", allow_inf=True)
    if method == "auto" or np.isinf(pf):
        exact = _exact_scale(pf, eps, delta, sens)
        if exact is not None:
            report(progress, 1.0, "exact scale")
            return VectorScale(pf, exact, eps, delta, 0.0, delta, 0, 0, True)
    rng = check_rng(rng)
    if int(n_samples) < 1000 or int(n_pilot) < 100 or int(max_samples) < int(n_samples):
        raise DataError("need n_samples >= 1000, n_pilot >= 100 and max_samples >= n_samples")
    if int(max_attempts) < 1:
        raise DataError(f"max_attempts must be >= 1, got {max_attempts!r}")
    try:
        return _monte_carlo_scale(
            pf, eps, delta, sens, rng, alpha, int(n_pilot), int(n_samples), int(max_samples),
            int(max_attempts), time.monotonic() + time_limit, time_limit, progress,
        )  # fmt: skip
    except TimeoutError:
        raise DataError(
            f"the Monte Carlo certificate for p = {pf:g} did not finish within {time_limit:g} s; "
            "raise δ or α, use fewer coordinates, or pick p = 2 or p = ∞ (exact, instant)"
        ) from None


def _monte_carlo_scale(
    pf: float,
    eps: float,
    delta: float,
    sens: np.ndarray,
    rng: np.random.Generator,
    alpha: float,
    n_pilot: int,
    n_min: int,
    n_max: int,
    max_attempts: int,
    deadline: float,
    time_limit: float,
    progress: Progress,
) -> VectorScale:
    d = sens.size
    log_first = float(np.log(4.0 / alpha))  # ln(2 / alpha_0), alpha_0 = alpha / 2
    n = min(max(n_min, _required_n(delta, log_first)), n_max)
    # Pilot: enough draws to see the rare event (~30 / delta), at most ~2e6 values.
    size = int(min(max(n_pilot, np.ceil(30.0 / delta)), max(n_pilot, 2_000_000 // d)))
    started = time.monotonic()
    report(progress, 0.0, f"pilot: {size:,} samples")
    pilot = _standard_samples(pf, size, d, rng)
    per_row = 1.6 * (time.monotonic() - started) / size  # draws + summand, seconds per sample
    remaining = deadline - time.monotonic()
    affordable = int(0.45 * remaining / max(per_row, 1e-12))  # at least two certification rounds
    if affordable < n:
        n = max(affordable, 1000)
    if n < _required_n(delta, log_first) and 7.0 * log_first / (3.0 * (n - 1)) > 0.5 * delta:
        limit = "time limit" if affordable < n_max else "sample cap"
        smallest = _smallest_delta(n, log_first)
        raise DataError(
            f"δ = {delta:.3g} is too small to certify by Monte Carlo for p = {pf:g} within the {limit} "
            f"({n:,} samples, {time_limit:g} s): about {_required_n(delta, log_first):,} samples are needed. "
            f"Raise δ to at least ~{smallest:.1e} or α, or pick p = 2 or p = ∞ (exact, instant)"
        )

    def predicted(log_b: float, log_term: float, target: float) -> float:
        if time.monotonic() > deadline:
            raise TimeoutError
        x = _excess(pilot, sens * np.exp(-log_b), eps, pf)
        return float(x.mean()) + _radius(float(x.var(ddof=1)), n, log_term) - target

    def propose(floor: float, log_term: float, target: float) -> float:
        """Smallest pilot root of ``predicted = 0`` above ``floor`` (ln b), bracket grown geometrically."""
        if predicted(floor, log_term, target) <= 0.0:
            return floor
        step, hi = 0.25, max(floor, np.log(ggm_scale(pf, eps, delta, float(sens.sum())))) + 0.25
        for _ in range(80):
            if predicted(hi, log_term, target) <= 0.0:
                return float(brentq(predicted, floor, hi, args=(log_term, target), xtol=1e-4))
            floor, hi, step = hi, hi + step, 2.0 * step
        raise DataError("the pilot found no scale with a small enough predicted bound")  # pragma: no cover

    # b is at least the 1-D scale of the largest coordinate (003 Lemma 3.5 (ii)).
    log_b = propose(float(np.log(ggm_scale(pf, eps, delta, float(sens.max())))), log_first, _TARGET * delta)
    target, bump = _TARGET * delta, 0.02
    for k in range(max_attempts):
        alpha_k = alpha / 2.0 ** (k + 1)
        log_term = float(np.log(2.0 / alpha_k))
        b = float(np.exp(log_b))
        span = (0.1 + 0.9 * k / max_attempts, 0.1 + 0.9 * (k + 1) / max_attempts)
        mean, var = _stream_moments(
            pf, sens / b, eps, n, rng, deadline=deadline, progress=progress, span=span,
            what=f"p = {pf:g}: certifying b = {b:.4g}",
        )  # fmt: skip
        upper = mean + _radius(var, n, log_term)
        if upper <= delta:
            report(progress, 1.0, "certified")
            return VectorScale(pf, b, eps, delta, alpha, float(upper), n, k + 1, False)
        # Aim lower by the observed ratio, and step up in b at least by a growing factor.
        target = target * min(0.9, delta / upper)
        floor = 7.0 * np.log(2.0 / (alpha_k / 2.0)) / (3.0 * (n - 1))
        next_log = log_b + np.log1p(bump)
        if target > 1.05 * floor:
            next_log = max(next_log, propose(log_b, float(np.log(2.0 / (alpha_k / 2.0))), target))
        log_b, bump = next_log, 2.0 * bump
    raise DataError(
        f"could not certify a scale for p = {pf:g} in {max_attempts} Monte Carlo rounds of {n:,} samples; "
        "raise δ or α, or pick p = 2 or p = ∞ (exact)"
    )
