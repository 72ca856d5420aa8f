"""Component metrics, the l_p product metric on joint domains, and l_p budget composition (000 Sec. III-A).

Component distances lie in [0, 1]:

* nominal / binary: ``d(a, b) = 1[a != b]``;
* ordinal with m ranked levels: ``d(a, b) = |rank(a) - rank(b)| / (m - 1)``;
* numeric on bin centres u, v: ``d(u, v) = |u - v| / (hi - lo)``.

A group of attributes uses ``d_p(x, y) = (sum_l w_l d_l(x_l, y_l)^p)^(1/p)`` (``p = inf``: the weighted max).
Per-group budgets ``eps_k`` compose to eps-mDP for the l_p product metric when ``||eps||_q <= eps`` with
``1/p + 1/q = 1`` (000 Theorem 1, by Hoelder's inequality).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mdp_core._validation import as_float_array
from mdp_core.errors import DataError

__all__ = [
    "budget_norm",
    "dual_exponent",
    "joint_codes",
    "nominal_distance",
    "numeric_distance",
    "ordinal_distance",
    "product_distance",
]


def nominal_distance(m: int) -> np.ndarray:
    """``m x m`` discrete metric ``1[a != b]`` (nominal and binary attributes)."""
    _check_levels(m)
    return 1.0 - np.eye(m)


def ordinal_distance(m: int) -> np.ndarray:
    """``m x m`` rank metric ``|i - j| / (m - 1)`` (0 for a single level)."""
    _check_levels(m)
    idx = np.arange(m, dtype=float)
    return np.abs(idx[:, None] - idx[None, :]) / max(m - 1, 1)


def numeric_distance(centres: Sequence[float] | np.ndarray) -> np.ndarray:
    """Normalised absolute difference of bin centres, ``|u - v| / (max - min)``."""
    c = as_float_array(centres, "centres", ndim=1)
    span = float(c.max() - c.min())
    d = np.abs(c[:, None] - c[None, :])
    return d / span if span > 0 else d


def _check_levels(m: int) -> None:
    if not isinstance(m, (int, np.integer)) or m < 1:
        raise DataError(f"number of levels m must be a positive integer, got {m!r}")


def _check_p(p: float) -> float:
    p = float(p)
    if not p >= 1:  # also rejects NaN
        raise DataError(f"metric exponent p must be >= 1 (or inf), got {p!r}")
    return p


def product_distance(
    components: Sequence[np.ndarray], p: float = 2.0, weights: Sequence[float] | None = None
) -> np.ndarray:
    """Joint-domain distance matrix of an attribute group, joint records in C order.

    Parameters
    ----------
    components : sequence of (m_l, m_l) arrays
        Component distance matrices, one per attribute (see :mod:`mdp_core.data`).
    p : float
        Metric exponent, ``p >= 1``; ``inf`` gives the weighted max.
    weights : sequence of float, optional
        Non-negative attribute weights ``w_l`` (default 1).

    Returns
    -------
    ndarray, shape (prod m_l, prod m_l)
        ``d_p(x, y) = (sum_l w_l d_l(x_l, y_l)^p)^(1/p)``; joint index ``x = ravel_multi_index(x_l)``.
    """
    p = _check_p(p)
    mats = [as_float_array(c, f"components[{i}]", ndim=2) for i, c in enumerate(components)]
    if not mats:
        raise DataError("components must contain at least one distance matrix")
    for i, m in enumerate(mats):
        if m.shape[0] != m.shape[1]:
            raise DataError(f"components[{i}] must be a square distance matrix, got shape {m.shape}")
    w = np.ones(len(mats)) if weights is None else as_float_array(weights, "weights", ndim=1)
    if w.size != len(mats) or np.any(w < 0):
        raise DataError(f"weights must be {len(mats)} non-negative numbers")
    sizes = [m.shape[0] for m in mats]
    total: np.ndarray = np.zeros((1, 1))
    for wl, dl in zip(w, mats, strict=True):
        term = wl * dl if np.isinf(p) else wl * dl**p
        # Kronecker-style broadcast: joint index (x_1..x_l) in C order.
        a = total[:, None, :, None]
        b = term[None, :, None, :]
        combined = np.maximum(a, b) if np.isinf(p) else a + b
        n = combined.shape[0] * combined.shape[1]
        total = combined.reshape(n, n)
    assert total.shape == (int(np.prod(sizes)),) * 2
    return total if np.isinf(p) else total ** (1.0 / p)


def joint_codes(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Joint index (C order) of each row of per-attribute codes, shape (n, k) -> (n,)."""
    arr = np.asarray(codes, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != len(sizes):
        raise DataError(f"codes must have shape (n, {len(sizes)}), got {arr.shape}")
    for j, (col, m) in enumerate(zip(arr.T, sizes, strict=True)):
        if col.size and (col.min() < 0 or col.max() >= m):
            raise DataError(
                f"codes of attribute {j} must lie in 0..{m - 1} (sizes[{j}] = {m}), "
                f"got {col.min()}..{col.max()}"
            )
    return np.ravel_multi_index(tuple(arr.T), tuple(sizes))


def dual_exponent(p: float) -> float:
    """Hoelder conjugate q of p: ``1/p + 1/q = 1`` (p = 1 -> inf, p = inf -> 1)."""
    p = _check_p(p)
    if p == 1:
        return np.inf
    if np.isinf(p):
        return 1.0
    return p / (p - 1.0)


def budget_norm(eps: Sequence[float] | np.ndarray, q: float) -> float:
    """``||eps||_q``: the total budget consumed by per-group budgets under the l_p product metric."""
    e = as_float_array(eps, "eps", ndim=1)
    if np.any(e < 0):
        raise DataError("eps must be non-negative")
    q = _check_p(q)
    return float(np.max(e)) if np.isinf(q) else float(np.sum(e**q) ** (1.0 / q))
