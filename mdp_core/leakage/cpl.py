"""Exact correlation-induced privacy leakage CPL* between two attributes (001 Eq. 6).

Setting (001 Sec. II-B): attribute ``other`` (X^) is released through any eps-LDP mechanism; an adversary
who sees the output learns about the correlated ``target`` attribute X_k. With
``cond[x, i] = P(X^ = i | X_k = x)``, ``G = cond[x]``, ``G' = cond[x']`` and ``c = e^eps - 1``
the exact leakage is

    CPL*(eps) = ln max_{x != x'} max_{S} (1 + c G(S)) / (1 + c G'(S)),    G(S) = sum_{i in S} G_i.

For fixed (G, G') the objective is linear-fractional in the indicator of S, so the optimal S is a top-k set
by ratio G_i / G'_i: with A_k, B_k the cumulative sums of G and G' in that order, CPL* is the largest
(1 + c A) / (1 + c B) over the points (B_k, A_k) of all pairs. That ratio is quasi-linear in (B, A), so its
maximum over the points equals its maximum over the vertices of their convex hull: :func:`cpl_exact` sorts
once per pair, keeps the hull (a few dozen points), and then every eps is a scan over the hull.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.spatial import ConvexHull, QhullError

from mdp_core.errors import DataError
from mdp_core.leakage._checks import _BLOCK, _check_codes, _check_cond, _check_eps_array, _counts

__all__ = ["conditional", "cpl_exact", "cpl_from_hull", "cpl_hull"]

_HULL_KEEP_B = 1e-6  # hull pruning keeps every point with G'(S) below this (see cpl_hull)


def conditional(codes: pd.DataFrame, target: str, other: str) -> np.ndarray:
    """Empirical conditional distribution of ``other`` given ``target``.

    Parameters
    ----------
    codes : DataFrame
        Integer codes ``0..m-1`` per attribute (``Encoded.codes``).
    target, other : str
        Column names: the protected attribute X_k (rows) and the released attribute X^ (columns).

    Returns
    -------
    ndarray, shape (m_target, m_other)
        ``cond[x, i] = P(X^ = i | X_k = x)`` from frequencies (001 Sec. II-B4); rows sum to 1. The domain
        sizes are ``max code + 1``, less the target levels no record takes (e.g. empty bins of a declared
        public range): under the table's distribution they have no probability, so no inference about them.

    Raises
    ------
    DataError
        Zero rows, equal columns, or codes that are not non-negative integers.
    """
    _check_codes(codes, target, other)
    if target == other:
        raise DataError("target and other must be different attributes")
    return _conditional(codes[target].to_numpy(dtype=np.int64), codes[other].to_numpy(dtype=np.int64), target)


def _conditional(t: np.ndarray, o: np.ndarray, target: str) -> np.ndarray:
    """:func:`conditional` of checked code arrays (all pairs check the table once, not once a pair)."""
    counts = _counts(t, o, (int(t.max()) + 1, int(o.max()) + 1))
    totals = counts.sum(axis=1, keepdims=True)
    seen = totals[:, 0] > 0  # a level no record takes (a bin of a public range) has no probability
    return counts[seen] / totals[seen]


# ------------------------------------------------------------------------------------------------ CPL*
def _pareto(B: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points (B, A) with A > B not dominated by a point with smaller-or-equal B and larger A.

    ``(1 + c A) / (1 + c B)`` (``c > 0``) grows with A and falls with B, so a dominated point never attains
    the maximum: dropping it keeps CPL* exact at every eps. Sort by B, keep a point only when its A exceeds
    every A before it (ties in B may keep a dominated point: harmless). Points with A <= B give a ratio <= 1.
    """
    keep = A > B
    B, A = B[keep], A[keep]
    if B.size == 0:
        return B, A
    order = np.argsort(B, kind="stable")
    B, A = B[order], A[order]
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(A)[:-1]])
    front = np.greater(A, best_before)
    return B[front], A[front]


def _pair_points(cond: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, A) cumulative sums of G' and G along the ratio order over every ordered pair x != x', reduced to
    their Pareto front (:func:`_pareto`).

    Only the support of G = cond[x] matters: entries with G_i = 0 have ratio 0 and come last, where they
    raise B and leave A at its maximum, so those points are dominated by the end of the support. One
    vectorised sort per row x over all x' at once: cost O(a nnz log) instead of O(a^2 b log b), which is
    what makes sparse conditionals (many levels, few rows) fast. Exact.
    """
    a, _ = cond.shape
    bs, as_ = [], []
    pending = 0
    for x in range(a):
        support = np.flatnonzero(cond[x] > 0)
        if support.size == 0 or a < 2:
            continue
        g = cond[x, support]
        gp = np.delete(cond[:, support], x, axis=0)  # every x' != x, the same columns
        with np.errstate(divide="ignore"):
            key = np.where(gp > 0, g / np.where(gp > 0, gp, 1.0), np.inf)
        order = np.argsort(-key, axis=1, kind="stable")
        front_b, front_a = _pareto(
            np.cumsum(np.take_along_axis(gp, order, axis=1), axis=1).ravel(),
            np.cumsum(g[order], axis=1).ravel(),
        )
        bs.append(front_b)
        as_.append(front_a)
        pending += front_b.size
        if pending > _BLOCK:  # keep memory bounded: reduce what we have so far
            merged = _pareto(np.concatenate(bs), np.concatenate(as_))
            bs, as_, pending = [merged[0]], [merged[1]], merged[0].size
    if not bs:
        return np.zeros(0), np.zeros(0)
    return _pareto(np.concatenate(bs), np.concatenate(as_))


def cpl_hull(cond: object) -> tuple[np.ndarray, np.ndarray]:
    """The few points (B, A) on which CPL* is attained for every eps (precompute once, then scan).

    Returns the vertices of the convex hull of ``{(G'(S), G(S))}`` over all ordered pairs and top-k sets S,
    restricted to points with A > B (others give a ratio <= 1), plus (0, 0). See :func:`cpl_from_hull`.
    """
    p = _check_cond(cond)
    B, A = _pair_points(p)  # already the Pareto front of the points with A > B
    pts = np.unique(np.column_stack([B, A]), axis=0)
    pts = np.vstack([[0.0, 0.0], np.clip(pts, 0.0, 1.0)])
    if len(pts) >= 3:
        # (1, 0) lies below every point, so the upper hull (where the maximum sits) is unchanged, and the
        # point set becomes full-dimensional for qhull.
        aug = np.vstack([pts, [1.0, 0.0]])
        try:
            hull = ConvexHull(aug)
            keep = np.zeros(len(aug), dtype=bool)
            keep[hull.vertices] = True
            # Near B = 0 the ratio is so sensitive (d ln f / dB up to 1/B) that qhull's rounding tolerance
            # could drop a decisive point: keep every point with B < 1e-6 (few: sparse prefixes).
            keep[: len(pts)] |= pts[:, 0] < _HULL_KEEP_B
            pts = np.vstack([[0.0, 0.0], pts[keep[: len(pts)]]])
        except QhullError:  # degenerate (collinear) input: keep every point, still exact
            pass
    return pts[:, 0].copy(), pts[:, 1].copy()


def _log_ratio(B: np.ndarray, A: np.ndarray, eps: np.ndarray | float) -> np.ndarray:
    """ln (1 + c A) / (1 + c B), c = e^eps - 1, as ln(e^-eps + t A) - ln(e^-eps + t B), t = 1 - e^-eps.

    ``log1p`` for eps < 1; ``logaddexp(-eps, ln t + ln A)`` above (exact even when e^-eps underflows).
    """
    eps = np.asarray(eps, dtype=np.float64)
    t = -np.expm1(-eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.all(eps < 1.0):
            return np.log1p(-t * (1.0 - A)) - np.log1p(-t * (1.0 - B))
        log_t, log_a, log_b = np.log(t), np.log(A), np.log(B)
        large = np.logaddexp(-eps, log_t + log_a) - np.logaddexp(-eps, log_t + log_b)
        small = np.log1p(-t * (1.0 - A)) - np.log1p(-t * (1.0 - B))
    return np.where(eps < 1.0, small, large)


def cpl_from_hull(hull: tuple[np.ndarray, np.ndarray], eps: object) -> np.ndarray | float:
    """CPL* at ``eps`` (scalar or array) from :func:`cpl_hull` points, in nats.

    Uses ``(1 + c A) / (1 + c B) = (e^-eps + t A) / (e^-eps + t B)`` with ``t = 1 - e^-eps`` (no overflow at
    large eps; positive terms only) and ``log1p`` for eps < 1.
    """
    e = _check_eps_array(eps)
    B, A = (np.asarray(v, dtype=np.float64) for v in hull)
    flat = e.reshape(-1, 1)
    out = np.maximum(_log_ratio(B, A, flat).max(axis=1, initial=0.0), 0.0)
    out = np.minimum(out.reshape(e.shape), e)
    return float(out) if out.ndim == 0 else out


def cpl_exact(cond: object, eps: object) -> np.ndarray | float:
    """Exact correlation-induced privacy leakage CPL*(eps) of the target (rows) from releasing other.

    Parameters
    ----------
    cond : array_like, shape (a, b)
        ``cond[x, i] = P(X^ = i | X_k = x)`` (rows sum to 1), e.g. from :func:`conditional`.
    eps : float or array_like
        LDP budget(s) of the released attribute (nats, > 0).

    Returns
    -------
    float or ndarray
        ``ln max_{x != x'} max_S (1 + (e^eps - 1) G(S)) / (1 + (e^eps - 1) G'(S))`` (001 Eq. 6) in nats,
        shaped like ``eps``. 0 for a single target level or independent attributes; never above eps.

    Notes
    -----
    Cost O(a^2 b log b) once (sort every pair by ratio, convex hull of the cumulative sums), then O(h) per
    eps with h the hull size (001 Table II, HCC-2).
    """
    return cpl_from_hull(cpl_hull(cond), eps)
