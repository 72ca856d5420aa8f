"""DPN adequacy scores and the DPN / OPT selection rule (000 Sec. III-E, Eq. 24-29).

Both scores measure how well a group's loss matrix ``C_k`` is explained by the metric radius
``d(x, y)`` alone, as ``1 - RMSE / (Std(C_k) + delta)`` with ``delta = 1e-12``:

* :func:`mse_likeness` fits ``c ~ a d^2 + b`` with ``a >= 0`` (Eq. 25-26);
* :func:`radial_fit` fits ``c ~ g(d)`` with ``g`` non-decreasing, by weighted isotonic regression after
  pooling tied distances (Eq. 27-29).

Pairs are all ``(x, y)`` including ``x = y`` (or any sample of pairs, passed as equal-shaped arrays).
A score near 1 means distance-based noise fits the loss; low scores favour an optimised (LP) mechanism.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.optimize import isotonic_regression

from mdp_core._validation import as_float_array
from mdp_core.errors import DataError

__all__ = ["DELTA", "Mechanism", "mse_likeness", "radial_fit", "select_mechanism"]

#: The small constant ``delta`` of Eq. 26 and 29.
DELTA = 1e-12

Mechanism = Literal["OPT", "DPN"]


def _pairs(loss: object, dist: object) -> tuple[np.ndarray, np.ndarray]:
    c_full, d_full = as_float_array(loss, "loss"), as_float_array(dist, "dist")
    if c_full.shape != d_full.shape:
        raise DataError(f"loss and dist must have the same shape, got {c_full.shape} and {d_full.shape}")
    c, d = c_full.ravel(), d_full.ravel()
    if np.any(d < 0):
        raise DataError("dist must be non-negative")
    return c, d


def _score(c: np.ndarray, fitted: np.ndarray) -> float:
    if np.ptp(c) <= 1e-12 * max(1.0, float(np.abs(c).max())):
        return 1.0  # a constant loss is explained by any fit; avoids 1e-16 / 1e-12 rounding noise
    rmse = float(np.sqrt(np.mean((c - fitted) ** 2)))
    return float(np.clip(1.0 - rmse / (float(np.std(c)) + DELTA), 0.0, 1.0))


def mse_likeness(loss: object, dist: object) -> float:
    """MSE-likeness score ``S^mse`` of a group loss matrix (000 Eq. 25-26).

    ``(a*, b*) = argmin_{a >= 0, b} sum (c(y|x) - a d(x, y)^2 - b)^2`` over all pairs, then
    ``S = 1 - sqrt(mean residual^2) / (Std(C) + 1e-12)``, with Std the population standard deviation.

    Parameters
    ----------
    loss : array-like
        ``c_k(y|x)``, a ``|X| x |Y|`` matrix or any array of sampled pair losses.
    dist : array-like
        ``d(x, y)`` of the same shape (group metric, unitless).

    Returns
    -------
    float
        The score in [0, 1]; 1 when the loss is exactly affine in ``d^2`` (or constant).
    """
    c, d = _pairs(loss, dist)
    z = d**2
    zc = z - z.mean()
    var = float(np.dot(zc, zc))
    a = max(float(np.dot(zc, c - c.mean())) / var, 0.0) if var > 0 else 0.0
    b = float(c.mean() - a * z.mean())
    return _score(c, a * z + b)


def radial_fit(loss: object, dist: object) -> float:
    """Radial-fit score ``S^rad`` of a group loss matrix (000 Eq. 27-29).

    ``g*`` is the best non-decreasing function of the distance in least squares: distances equal after
    rounding to 12 decimals are pooled first (mean loss, weight = count), then weighted isotonic regression
    (``scipy.optimize.isotonic_regression``) gives ``g*`` on the sorted distinct distances.
    ``S = 1 - sqrt(mean residual^2) / (Std(C) + 1e-12)``.

    Parameters
    ----------
    loss, dist : array-like
        As in :func:`mse_likeness`.

    Returns
    -------
    float
        The score in [0, 1]; 1 when the loss is a non-decreasing function of the distance.
    """
    c, d = _pairs(loss, dist)
    keys, inverse, counts = np.unique(np.round(d, 12), return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=c, minlength=keys.size) / counts
    g = isotonic_regression(means, weights=counts.astype(float), increasing=True).x
    return _score(c, g[inverse])


def select_mechanism(domain_size: int, score: float, *, tau_dim: float, tau_dpn: float) -> Mechanism:
    """The selection rule of 000 Eq. 24: ``"OPT"`` iff ``domain_size <= tau_dim`` and ``score <= tau_dpn``.

    Parameters
    ----------
    domain_size : int
        ``|X_Gk|``, the joint domain size of the group.
    score : float
        Its DPN adequacy score (:func:`radial_fit` or :func:`mse_likeness`).
    tau_dim : float
        Largest domain for which an LP mechanism is affordable (default in the paper: 300).
    tau_dpn : float
        Adequacy threshold in [0, 1] (paper: 0.1 - 0.3 by task; default here 0.2).
    """
    if int(domain_size) < 1:
        raise DataError(f"domain_size must be a positive integer, got {domain_size!r}")
    if not np.isfinite(score):
        raise DataError(f"score must be a finite number, got {score!r}")
    if not tau_dim >= 1:
        raise DataError(f"tau_dim must be >= 1, got {tau_dim!r}")
    if not 0.0 <= tau_dpn <= 1.0:
        raise DataError(f"tau_dpn must lie in [0, 1], got {tau_dpn!r}")
    return "OPT" if int(domain_size) <= tau_dim and float(score) <= tau_dpn else "DPN"
