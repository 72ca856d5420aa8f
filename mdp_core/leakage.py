"""Correlation-induced privacy leakage (CPL) between two attributes and the Dependency Triad (seed 001).

Setting (001 Sec. II-B): attribute ``other`` (X^) is released through any eps-LDP mechanism; an adversary
who sees the output learns about the correlated ``target`` attribute X_k. With
``cond[x, i] = P(X^ = i | X_k = x)``,
``G = cond[x]``, ``G' = cond[x']`` and ``c = e^eps - 1`` the exact leakage is (001 Eq. 6, [14])

    CPL*(eps) = ln max_{x != x'} max_{S} (1 + c G(S)) / (1 + c G'(S)),    G(S) = sum_{i in S} G_i.

For fixed (G, G') the objective is linear-fractional in the indicator of S, so the optimal S is a top-k set
by ratio G_i / G'_i: with A_k, B_k the cumulative sums of G and G' in that order, CPL* is the largest
(1 + c A) / (1 + c B) over the points (B_k, A_k) of all pairs. That ratio is quasi-linear in (B, A), so its
maximum over the points equals its maximum over the vertices of their convex hull: :func:`cpl_exact` sorts
once per pair, keeps the hull (a few dozen points), and then every eps is a scan over the hull.

The Dependency Triad (001 Def. V.1, Cor. IV.5-IV.6) compresses all of this into three numbers: ``alpha`` (log
of the largest ratio, governs large eps), ``beta`` (lower ratio level calibrated so that the slope at eps -> 0
equals phi, the largest total-variation distance between two rows, governs small eps) and ``delta`` (mass
where the denominator row is zero, sparsity). :func:`dt_cpl` is O(1) per eps and never below CPL*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy.spatial import ConvexHull, QhullError

from mdp_core._validation import as_float_array
from mdp_core.errors import DataError

__all__ = [
    "DependencyTriad",
    "conditional",
    "cpl_exact",
    "cpl_from_hull",
    "cpl_hull",
    "dependency_triad",
    "dt_cpl",
    "source_conditionals",
    "uncertainty_from_sources",
]

_BLOCK = 2_000_000  # entries per (rows x rows x b) block when scanning all pairs
_HULL_KEEP_B = 1e-6  # hull pruning keeps every point with G'(S) below this (see cpl_hull)
_TINY = 1e-300  # denominators below this count as zero (their mass joins delta), so ratios stay finite


# ----------------------------------------------------------------------------------------------- input
def _check_codes(codes: object, *columns: str) -> pd.DataFrame:
    if not isinstance(codes, pd.DataFrame):
        raise TypeError(f"codes must be a pandas DataFrame of integer codes, got {type(codes).__name__}")
    if len(codes) == 0:
        raise DataError("codes has zero rows; load a table with data")
    for col in columns:
        if col not in codes.columns:
            raise DataError(f"column {col!r} is not in codes (columns: {list(codes.columns)})")
        values = codes[col]
        if not pd.api.types.is_integer_dtype(values) or (values < 0).any():
            raise DataError(f"codes[{col!r}] must hold non-negative integer codes (see discretize)")
    return codes


def _counts(target_codes: np.ndarray, other_codes: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    a, b = shape
    flat = np.bincount(target_codes * b + other_codes, minlength=a * b)
    return flat.reshape(a, b).astype(np.float64)


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
        sizes are ``max code + 1``.

    Raises
    ------
    DataError
        Zero rows, equal columns, codes that are not non-negative integers, or a target level with no rows.
    """
    _check_codes(codes, target, other)
    if target == other:
        raise DataError("target and other must be different attributes")
    t = codes[target].to_numpy(dtype=np.int64)
    o = codes[other].to_numpy(dtype=np.int64)
    counts = _counts(t, o, (int(t.max()) + 1, int(o.max()) + 1))
    totals = counts.sum(axis=1, keepdims=True)
    empty = np.flatnonzero(totals[:, 0] == 0)
    if empty.size:
        raise DataError(f"target {target!r} level(s) {empty.tolist()} have no rows; re-encode the table")
    return counts / totals


def _check_cond(cond: object, name: str = "cond") -> np.ndarray:
    p = as_float_array(cond, name, ndim=2)
    if np.any(p < 0):
        raise DataError(f"{name} must be non-negative")
    if not np.allclose(p.sum(axis=1), 1.0, atol=1e-9, rtol=0):
        raise DataError(f"{name} rows must sum to 1 (cond[x, i] = P(other = i | target = x))")
    return p / p.sum(axis=1, keepdims=True)


def _check_eps_array(eps: object) -> np.ndarray:
    e = np.asarray(eps, dtype=np.float64) if not isinstance(eps, str) else None
    if e is None or e.size == 0 or not np.all(np.isfinite(e)) or np.any(e <= 0):
        raise DataError(f"eps must be positive finite number(s), got {eps!r}")
    return e


# ------------------------------------------------------------------------------------------------ CPL*
def _pair_points(cond: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, A) cumulative sums of G' and G along the ratio order, for every ordered pair x != x'."""
    a, b = cond.shape
    xs, xps = np.nonzero(~np.eye(a, dtype=bool))
    bs, as_ = [], []
    step = max(1, _BLOCK // max(b, 1))
    for start in range(0, xs.size, step):
        g, gp = cond[xs[start : start + step]], cond[xps[start : start + step]]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            key = np.where(gp > 0, g / np.where(gp > 0, gp, 1.0), np.where(g > 0, np.inf, 0.0))
        order = np.argsort(-key, axis=1, kind="stable")
        as_.append(np.cumsum(np.take_along_axis(g, order, axis=1), axis=1).ravel())
        bs.append(np.cumsum(np.take_along_axis(gp, order, axis=1), axis=1).ravel())
    if not bs:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(bs), np.concatenate(as_)


def cpl_hull(cond: object) -> tuple[np.ndarray, np.ndarray]:
    """The few points (B, A) on which CPL* is attained for every eps (precompute once, then scan).

    Returns the vertices of the convex hull of ``{(G'(S), G(S))}`` over all ordered pairs and top-k sets S,
    restricted to points with A > B (others give a ratio <= 1), plus (0, 0). See :func:`cpl_from_hull`.
    """
    p = _check_cond(cond)
    B, A = _pair_points(p)
    keep = A > B
    pts = np.unique(np.column_stack([B[keep], A[keep]]), axis=0)
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


# ----------------------------------------------------------------------------------------------- triad
@dataclass(frozen=True)
class DependencyTriad:
    """(alpha, beta, delta)-Dependency Triad of an ordered attribute pair (001 Def. V.1).

    Attributes
    ----------
    alpha : float
        ln of the largest ratio P(i | x) / P(i | x') over x != x' with P(i | x') > 0 (governs large eps:
        DT -> alpha as eps -> inf).
    beta : float
        Calibrated lower level (001 Cor. IV.5 with eps0 -> 0), ``inf`` when the rows can be disjoint on the
        non-sparse part; governs small eps (slope phi at eps -> 0).
    delta : float
        Sparsity in [0, 1]: the largest mass of P(. | x) where P(. | x') is zero.
    gamma : float
        Uncalibrated lower level (001 Thm IV.3), for the (alpha, gamma, delta) comparison; ``inf`` unknown.
    phi : float
        Largest total-variation distance between two rows (the small-eps slope); derived from beta when
        not given (NaN).
    """

    alpha: float
    beta: float
    delta: float
    gamma: float = math.inf
    phi: float = math.nan

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            v = float(getattr(self, name))
            if math.isnan(v) or v < 0:
                raise DataError(f"{name} must be >= 0, got {v!r}")
        if not 0.0 <= float(self.delta) <= 1.0:
            raise DataError(f"delta must lie in [0, 1], got {self.delta!r}")
        if not math.isfinite(self.alpha):
            raise DataError("alpha must be finite (sparse entries belong in delta)")
        if math.isnan(self.phi):
            object.__setattr__(self, "phi", _phi_from_level(self.alpha, self.beta, self.delta))
        elif not 0.0 <= float(self.phi) <= 1.0:
            raise DataError(f"phi must lie in [0, 1], got {self.phi!r}")


def _phi_from_level(alpha: float, level: float, delta: float) -> float:
    """Invert 001 Cor. IV.5: the slope phi of the two-level model with levels e^alpha, e^-level."""
    if alpha <= 0.0 or level <= 0.0:
        return float(delta)
    ea = math.exp(alpha)
    if math.isinf(level):
        return min(1.0, 1.0 - (1.0 - delta) / ea)
    # phi = [e^b (e^a - 1 + d) - e^a (1 - d) + 1 - 2 d] / (e^(a+b) - 1), divided through by e^(a+b)
    w = math.exp(-alpha - level)
    phi = ((ea - 1.0 + delta) / ea - (ea * (1.0 - delta) - 1.0 + 2.0 * delta) * w) / (1.0 - w)
    return min(1.0, max(float(delta), phi))


def _beta_from_phi(alpha: float, phi: float, delta: float) -> float:
    """001 Def. V.1: beta = ln (1 + phi + e^a (d - 1) - 2 d) / (1 + (phi - 1) e^a - d)."""
    if alpha <= 0.0 or phi <= delta:
        return 0.0
    ea = math.exp(alpha)
    num = ea * (1.0 - delta) - 1.0 + 2.0 * delta - phi
    den = ea * (1.0 - phi) - 1.0 + delta
    if den <= 0.0 or num <= 0.0:
        return math.inf
    return max(0.0, math.log(num / den))


def _bounds(p: np.ndarray, delta_arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entry-wise [L, U] of the box |P_A - P| <= Delta intersected with the simplex (rows sum to 1)."""
    lo = np.clip(p - delta_arr, 0.0, 1.0)
    hi = np.clip(p + delta_arr, 0.0, 1.0)
    # a row sums to 1: G_i <= 1 - sum_{j != i} L_j and G_i >= 1 - sum_{j != i} U_j
    # (only where Delta > 0, with a 1e-12 slack on the safe side against rounding; Delta = 0 keeps P).
    free = delta_arr > 0
    hi = np.where(free, np.minimum(hi, 1.0 - (lo.sum(axis=1, keepdims=True) - lo) + 1e-12), hi)
    lo = np.where(free, np.maximum(lo, 1.0 - (hi.sum(axis=1, keepdims=True) - hi) - 1e-12), lo)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def _uncertainty(p: np.ndarray, uncertainty: object) -> np.ndarray:
    if uncertainty is None:
        return np.zeros_like(p)
    if np.ndim(uncertainty) == 0:
        try:
            e = float(uncertainty)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise TypeError(f"uncertainty must be a number or an array, got {uncertainty!r}") from exc
        if not math.isfinite(e) or e < 0:
            raise DataError(f"uncertainty (relative e) must be a finite number >= 0, got {uncertainty!r}")
        return e * p
    d = as_float_array(uncertainty, "uncertainty", ndim=2)
    if d.shape != p.shape:
        raise DataError(f"uncertainty must have the shape of cond {p.shape}, got {d.shape}")
    if np.any(d < 0):
        raise DataError("uncertainty (Delta) must be >= 0 entry-wise")
    return d


def _pair_parameters(lo: np.ndarray, hi: np.ndarray) -> tuple[float, float, float, float]:
    """Max over ordered pairs x != x' of (alpha, phi, delta, gamma) bounds for every G in the box."""
    a, b = lo.shape
    alpha = phi = delta = 0.0
    gamma = 0.0
    rows = max(1, _BLOCK // max(a * b, 1))
    for start in range(0, a, rows):
        X = slice(start, min(a, start + rows))
        U, L = hi[X, None, :], lo[X, None, :]  # rows x (the numerator G)
        Up, Lp = hi[None, :, :], lo[None, :, :]  # rows x' (the denominator G')
        off = np.ones((U.shape[0], a), dtype=bool)
        off[np.arange(U.shape[0]), np.arange(X.start, X.stop)] = False
        pos = Lp > _TINY  # smaller denominators go to the sparse mass delta (still a valid bound)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.where(pos, U / np.where(pos, Lp, 1.0), -np.inf)
            inv = np.where(L > _TINY, Up / np.where(L > _TINY, L, 1.0), -np.inf)
        best = ratio.max(axis=2)[off]
        if best.size:
            alpha = max(alpha, float(np.log(max(best.max(), 1.0))))
            inv_best = inv.max(axis=2)[off]
            gamma = max(gamma, float(np.log(max(inv_best.max(), 1.0))))
        # delta: mass of G where G' may vanish, tightened by the row-sum constraint
        sparse = np.where(~pos, U, 0.0).sum(axis=2)
        sparse = np.minimum(sparse, 1.0 - np.where(pos, L, 0.0).sum(axis=2) + (b + 2) * 2.3e-16)
        # phi: max over the box of TV(G, G') <= min of four relaxations (exact when Delta = 0)
        # (only the first is free of the identity sum G = sum G' = 1, which holds to rounding only: the
        # others get a rounding slack to stay on the safe side)
        slack = (b + 2) * np.finfo(np.float64).eps
        tv = np.minimum.reduce(
            [
                np.maximum(U - Lp, 0.0).sum(axis=2),
                np.maximum(U, Up).sum(axis=2) - 1.0 + slack,
                1.0 - np.minimum(L, Lp).sum(axis=2) + slack,
                np.maximum(Up - L, 0.0).sum(axis=2) + slack,
            ]
        )
        if off.any():
            delta = max(delta, float(np.clip(sparse[off], 0.0, 1.0).max()))
            phi = max(phi, float(np.clip(tv[off], 0.0, 1.0).max()))
    return alpha, phi, delta, gamma


def dependency_triad(cond: object, *, uncertainty: object = None) -> DependencyTriad:
    """Compute the (alpha, beta, delta)-Dependency Triad of ``cond`` (001 Def. V.1, Thm IV.8, Alg. 1).

    Parameters
    ----------
    cond : array_like, shape (a, b)
        Known conditional P_K, ``cond[x, i] = P(X^ = i | X_k = x)``.
    uncertainty : float or array_like, optional
        Relative error ``e`` (Delta = e * cond, 001 Sec. V-D1) or an entry-wise Delta >= 0 of cond's shape
        (e.g. from :func:`uncertainty_from_sources`). The actual conditional P_A may be any row-stochastic
        matrix with ``|P_A - P_K| <= Delta``.

    Returns
    -------
    DependencyTriad
        alpha = ln max U_i / L'_i (entries with L'_i > 0), delta = max sum_{L'_i = 0} U_i, phi = max total
        variation over the box, beta from phi by 001 Cor. IV.5 (eps0 -> 0); maxima over ordered pairs
        x != x', [L, U] the box intersected with the simplex. Independent attributes give all zeros.

    Notes
    -----
    Why :func:`dt_cpl` is never below CPL* (for P_K and for every P_A in the box). Fix a pair (x, x') and a
    set S; write B = G'(S), A = G(S), c = e^eps - 1, f = (1 + c A) / (1 + c B) = 1 + c (A - B) / (1 + c B).
    (i) A <= delta + e^alpha B: entries with L'_i = 0 add at most delta, the others G_i <= e^alpha G'_i.
    (ii) A - B <= phi (total variation). Let u = (phi - delta) / (e^alpha - 1) (0 if phi <= delta). For
    B >= u, (ii) gives f <= 1 + c phi / (1 + c u). For B < u, f grows with A, so by (i) f <= f(B, delta +
    e^alpha B), a linear-fractional function of B on [0, u], maximal at an end: 1 + c delta or (using
    delta + e^alpha u = u + phi) 1 + c phi / (1 + c u). Hence CPL* <= ln max(1 + c delta, 1 + c phi /
    (1 + c u)), which is exactly 001 Cor. IV.6 with beta from Def. V.1 (:func:`dt_cpl`). The bound grows in
    alpha, phi and delta, so maxima over pairs and over the box keep it valid; it matches CPL*'s slope at
    eps -> 0 (phi) and its limit at eps -> inf (alpha) when Delta = 0.
    """
    p = _check_cond(cond)
    lo, hi = _bounds(p, _uncertainty(p, uncertainty))
    alpha, phi, delta, gamma = _pair_parameters(lo, hi)
    phi = max(phi, delta)
    beta = _beta_from_phi(alpha, phi, delta)
    gamma = max(gamma, beta)
    return DependencyTriad(alpha=alpha, beta=beta, delta=delta, gamma=gamma, phi=phi)


def _dt_kink(alpha: np.ndarray, phi: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """u = min(1, (phi - delta)^+ / (e^alpha - 1)): where the two-level model's first segment ends."""
    k = np.expm1(alpha)
    gap = np.maximum(phi - delta, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, np.where(k > 0, np.minimum(1.0, gap / np.where(k > 0, k, 1.0)), 1.0), 0.0)


def _dt_eval(phi: np.ndarray, delta: np.ndarray, u: np.ndarray, eps: np.ndarray | float) -> np.ndarray:
    """ln max(1 + c delta, 1 + c phi / (1 + c u)) with c = e^eps - 1; broadcasts.

    In logs, without overflow or underflow at any eps: with ln c = eps + ln(1 - e^-eps),
    ``ln(1 + c delta) = logaddexp(0, ln c + ln delta)`` and ``ln(1 + c phi / (1 + c u)) =
    logaddexp(D, ln phi) - D`` with ``D = ln(1/c + u) = logaddexp(-ln c, ln u)``.
    """
    eps = np.asarray(eps, dtype=np.float64)
    log_c = eps + np.log(-np.expm1(-eps))
    with np.errstate(divide="ignore"):
        log_phi, log_delta, log_u = np.log(phi), np.log(delta), np.log(u)
    den = np.logaddexp(-log_c, log_u)
    kink = np.logaddexp(den, log_phi) - den
    sparse = np.logaddexp(0.0, log_c + log_delta)
    return np.maximum(np.maximum(kink, sparse), 0.0)


def _dt_closed_form(alpha: np.ndarray, phi: np.ndarray, delta: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """DT estimate for (alpha, phi, delta) at eps (see :func:`dt_cpl`); broadcasts."""
    return _dt_eval(phi, delta, _dt_kink(alpha, phi, delta), eps)


def dt_cpl(triad: DependencyTriad, eps: object, *, calibrated: bool = True) -> np.ndarray | float:
    """CPL estimate of a Dependency Triad at ``eps`` (001 Cor. IV.6, Alg. 2): O(1) per eps, vectorised.

    Parameters
    ----------
    triad : DependencyTriad
    eps : float or array_like
        LDP budget(s) of the released attribute (nats, > 0).
    calibrated : bool
        True: the (alpha, beta, delta) estimate. False: the uncalibrated (alpha, gamma, delta) estimate of
        001 Thm IV.3 (same formula with gamma for beta; never below the calibrated one).

    Returns
    -------
    float or ndarray
        ``ln max(1 + c delta, 1 + c phi / (1 + c u))`` with ``c = e^eps - 1``, ``u = (phi - delta) /
        (e^alpha - 1)``; algebraically identical to 001 Cor. IV.6 (its case split is the max) and stable for
        any eps. Never below :func:`cpl_exact` of the conditional the triad came from (see
        :func:`dependency_triad`), never above eps.
    """
    if not isinstance(triad, DependencyTriad):
        raise TypeError(f"triad must be a DependencyTriad, got {type(triad).__name__}")
    e = _check_eps_array(eps)
    phi = triad.phi
    if not calibrated:
        phi = max(phi, _phi_from_level(triad.alpha, triad.gamma, triad.delta))
    out = _dt_closed_form(np.float64(triad.alpha), np.float64(phi), np.float64(triad.delta), e)
    out = np.minimum(out, e)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------- statistical Delta
def source_conditionals(
    codes: pd.DataFrame,
    target: str,
    other: str,
    *,
    groups: str | None = None,
    n_boot: int = 20,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Several estimates of ``P(other | target)``: one per level of ``groups`` or per bootstrap resample.

    Parameters
    ----------
    codes : DataFrame
        Integer codes.
    target, other : str
        As in :func:`conditional`; the domain sizes are those of the whole table.
    groups : str, optional
        A grouping column (e.g. region): one source per level (001 Sec. V-D2, multiple sources).
    n_boot : int
        Bootstrap resamples when ``groups`` is None (>= 2).
    rng : numpy.random.Generator
        Required for the bootstrap.

    Returns
    -------
    ndarray, shape (N, a, b)
        Row-stochastic per source; a target level absent from a source has a NaN row.
    """
    _check_codes(codes, target, other, *([groups] if groups is not None else []))
    if target == other:
        raise DataError("target and other must be different attributes")
    t = codes[target].to_numpy(dtype=np.int64)
    o = codes[other].to_numpy(dtype=np.int64)
    shape = (int(t.max()) + 1, int(o.max()) + 1)
    if groups is not None:
        if groups in (target, other):
            raise DataError("groups must differ from target and other")
        g = codes[groups].to_numpy()
        parts = [np.flatnonzero(g == level) for level in np.unique(g)]
        if len(parts) < 2:
            raise DataError(f"groups column {groups!r} has a single level; need >= 2 sources")
    else:
        if not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
            raise DataError(f"n_boot must be an integer >= 2, got {n_boot!r}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator for bootstrap sources")
        parts = [rng.integers(0, len(t), len(t)) for _ in range(int(n_boot))]
    out = np.empty((len(parts), *shape))
    for s, idx in enumerate(parts):
        counts = _counts(t[idx], o[idx], shape)
        totals = counts.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[s] = np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), np.nan)
    return out


def uncertainty_from_sources(
    sources: object, *, method: Literal["range", "std"] = "range"
) -> tuple[np.ndarray, np.ndarray]:
    """Nominal conditional and entry-wise Delta from several sources (001 Sec. V-D2, Eqs. 17-18).

    Parameters
    ----------
    sources : array_like, shape (N, a, b)
        Row-stochastic estimates (NaN rows where a source lacks a target level), N >= 2.
    method : {"range", "std"}
        ``range``: Delta = max - min over sources (privacy-robust: every source lies in the box around the
        mean). ``std``: sample standard deviation (ddof 1; a utility-privacy balance, no such guarantee).

    Returns
    -------
    (nominal, Delta)
        nominal = mean over the sources that have the row (row-stochastic); rows seen in fewer than two
        sources get Delta = 1 (nothing is known about them).
    """
    s = np.asarray(sources, dtype=np.float64)
    if s.ndim != 3 or s.shape[0] < 2:
        raise DataError(f"sources must have shape (N >= 2, a, b), got {s.shape}")
    if method not in ("range", "std"):
        raise DataError(f"method must be 'range' or 'std', got {method!r}")
    seen = ~np.isnan(s).any(axis=2)  # (N, a)
    if not seen.any(axis=0).all():
        raise DataError("every target level must appear in at least one source")
    nominal = np.nanmean(s, axis=0)
    nominal = nominal / nominal.sum(axis=1, keepdims=True)
    few = seen.sum(axis=0) < 2
    with np.errstate(invalid="ignore"):
        if method == "range":
            delta = np.nanmax(s, axis=0) - np.nanmin(s, axis=0)
        else:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                delta = np.nanstd(s, axis=0, ddof=1)
    delta = np.where(few[:, None] | np.isnan(delta), 1.0, delta)
    return nominal, delta


# All-pairs matrices and budget calibration live in a sibling module (re-exported here).
from mdp_core._calibration import *  # noqa: E402, F403
from mdp_core._calibration import __all__ as _calibration_all  # noqa: E402

__all__ += _calibration_all
