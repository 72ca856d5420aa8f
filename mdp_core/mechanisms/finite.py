"""Finite-domain mechanisms: exponential mechanism, Bayesian remapping, expected loss, sampling.

A mechanism on finite domains is a row-stochastic matrix ``P`` with rows = true input ``x`` and columns =
output ``y``. It satisfies eps-mDP for the input metric ``d`` iff ``P[x, y] <= exp(eps d(x, x')) P[x', y]``
for all ``x, x', y`` (000 Definition 1 / the constraint of Eq. 3);
:func:`~mdp_core.mechanisms.verify.mdp_violation` checks exactly that.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mdp_core._validation import (
    as_float_array,
    check_eps,
    check_log_ratio,
    check_loss_matrix,
    check_prior,
    check_rng,
    check_stochastic_matrix,
)
from mdp_core.errors import DataError

__all__ = ["bayesian_remap", "expected_loss", "exponential_mechanism", "remap_outputs", "sample"]


# Elements per temporary block in the chunked O(n^2 m) / O(n m^2) loops (~64 MB of float64).
_BLOCK = 8_000_000


def exponential_mechanism(dist: ArrayLike, eps: float) -> NDArray[np.float64]:
    """Metric exponential mechanism (000 Definition 2, Eq. 2).

    ``P[x, y] = exp(-eps d(x, y) / 2) / sum_y' exp(-eps d(x, y') / 2)``, computed with the row minimum of
    ``d`` subtracted before ``exp`` (no underflow of whole rows). It is eps-mDP for ``d`` whenever ``d`` is a
    metric on inputs and outputs (triangle inequality on both the exponent and the normaliser).

    Parameters
    ----------
    dist : array (|X|, |Y|)
        Non-negative distances between inputs and outputs (same unit as ``1/eps``).
    eps : float
        Privacy budget > 0.

    Returns
    -------
    ndarray (|X|, |Y|)
        Row-stochastic float64 matrix.

    Raises
    ------
    DataError
        When ``eps d / 2`` spans more than :data:`~mdp_core._validation.MAX_LOG_RATIO` within a row: float64
        would round the smallest probabilities to 0, which no eps-mDP matrix has.
    """
    d = as_float_array(dist, "dist", ndim=2)
    if np.any(d < 0):
        raise DataError("dist must be non-negative")
    eps = check_eps(eps)
    logits = -0.5 * eps * (d - d.min(axis=1, keepdims=True))
    check_log_ratio(float(-logits.min(initial=0.0)), "exponential mechanism")
    P = np.exp(logits)
    P /= P.sum(axis=1, keepdims=True)
    return P


def _check_mechanism(
    P: ArrayLike, prior: ArrayLike, loss: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P_arr = check_stochastic_matrix(P, "P", atol=1e-6)
    p = check_prior(prior, P_arr.shape[0])
    c = check_loss_matrix(loss, name="loss")
    if c.shape[0] != P_arr.shape[0]:
        raise DataError(f"loss must have {P_arr.shape[0]} rows (one per input), got shape {c.shape}")
    return P_arr, p, c


def remap_outputs(P: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> NDArray[np.float64]:
    """Bayes-optimal relabelling of outputs: ``f(y) = argmin_y' sum_x prior[x] P[x, y] loss[x, y']``.

    Parameters
    ----------
    P : array (|X|, |Y|)
        Mechanism.
    prior : array (|X|,)
        Prior over inputs.
    loss : array (|X|, |Y'|)
        ``loss[x, y']`` is the cost of reporting ``y'`` when the truth is ``x``.

    Returns
    -------
    ndarray of int (|Y|,)
        For each output ``y`` the index of the remapped output in ``0..|Y'|-1`` (first index on ties).
    """
    P_arr, p, c = _check_mechanism(P, prior, loss)
    joint = p[:, None] * P_arr  # unnormalised posterior: post(x | y) is proportional to joint[x, y]
    m = joint.shape[1]
    step = max(1, _BLOCK // max(c.shape[1], 1))
    target = np.empty(m, dtype=np.int64)
    for start in range(0, m, step):
        block = joint[:, start : start + step].T @ c  # (block, |Y'|) posterior risk, times P(y)
        target[start : start + step] = np.argmin(block, axis=1)
    return target


def bayesian_remap(P: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> NDArray[np.float64]:
    """Bayesian remapping (post-processing) of a mechanism's outputs (000 baseline RMP, ref. [19]).

    Each output ``y`` is replaced by ``argmin_y' sum_x post(x | y) loss[x, y']`` with
    ``post(x | y)`` proportional to ``prior[x] P[x, y]``, i.e. ``P'[x, y'] = sum_{y: f(y) = y'} P[x, y]``.
    Post-processing never weakens mDP: each column of ``P'`` is a sum of columns of ``P``, so every ratio
    ``P'[x, y'] / P'[x', y']`` is at most the largest ratio of its summands.

    Parameters
    ----------
    P : array (|X|, |Y|)
        Mechanism (rows sum to 1).
    prior : array (|X|,)
        Prior over inputs.
    loss : array (|X|, |Y'|)
        Task loss; the remapped mechanism has ``|Y'|`` columns.

    Returns
    -------
    ndarray (|X|, |Y'|)
        The remapped mechanism; its expected loss is never above that of ``P`` when ``Y' = Y``.
    """
    P_arr = check_stochastic_matrix(P, "P", atol=1e-6)
    target = remap_outputs(P_arr, prior, loss)
    n_out = np.asarray(loss).shape[1]
    out = np.zeros((P_arr.shape[0], n_out))
    for y_new in np.unique(target):
        out[:, y_new] = P_arr[:, target == y_new].sum(axis=1)
    return out


def expected_loss(P: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> float:
    """Expected task loss ``sum_x prior[x] sum_y P[x, y] loss[x, y]`` (000 Eq. 3 objective).

    ``loss`` must have the shape of ``P``.
    """
    P_arr, p, c = _check_mechanism(P, prior, loss)
    if c.shape != P_arr.shape:
        raise DataError(f"loss must have the shape of P {P_arr.shape}, got {c.shape}")
    return float(p @ np.einsum("xy,xy->x", P_arr, c))


def sample(P: ArrayLike, codes: ArrayLike, rng: np.random.Generator) -> NDArray[np.int64]:
    """Draw one output per record: ``out[i] ~ P[codes[i], :]`` by inverse-CDF sampling.

    Parameters
    ----------
    P : array (|X|, |Y|)
        Mechanism (rows sum to 1).
    codes : int array (N,)
        True input index of each record, in ``0..|X|-1``.
    rng : numpy.random.Generator
        The only source of randomness.

    Returns
    -------
    ndarray of int64 (N,)
        Output indices in ``0..|Y|-1``.
    """
    check_rng(rng)
    P_arr = check_stochastic_matrix(P, "P", atol=1e-6)
    x = np.asarray(codes)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
        raise DataError(f"codes must be a 1-D integer array, got dtype {x.dtype} and shape {x.shape}")
    if x.size and (x.min() < 0 or x.max() >= P_arr.shape[0]):
        raise DataError(f"codes must lie in 0..{P_arr.shape[0] - 1}")
    cdf = np.cumsum(P_arr, axis=1)
    cdf /= cdf[:, -1:]
    u = rng.random(x.size)
    out = np.empty(x.size, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    values, starts = np.unique(x[order], return_index=True)
    bounds = [*starts[1:], x.size][: len(starts)]  # no records: no groups
    for value, lo, hi in zip(values, starts, bounds, strict=True):
        idx = order[lo:hi]
        out[idx] = np.searchsorted(cdf[value], u[idx], side="right")
    return np.minimum(out, P_arr.shape[1] - 1)
