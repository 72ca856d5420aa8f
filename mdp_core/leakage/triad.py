"""The Dependency Triad (001 Def. V.1, Cor. IV.5-IV.6): CPL compressed into three numbers.

``alpha`` (log of the largest ratio, governs large eps), ``beta`` (lower ratio level calibrated so that the
slope at eps -> 0 equals phi, the largest total-variation distance between two rows, governs small eps) and
``delta`` (mass where the denominator row is zero, sparsity). :func:`dt_cpl` is O(1) per eps and
never below CPL*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mdp_core._validation import as_float_array
from mdp_core.errors import DataError
from mdp_core.leakage._checks import _BLOCK, _TINY, _check_cond, _check_eps_array

__all__ = ["DependencyTriad", "dependency_triad", "dt_cpl"]


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
    if np.ndim(np.asarray(uncertainty)) == 0:
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


def _pair_parameters_known(p: np.ndarray) -> tuple[float, float, float, float]:
    """:func:`_pair_parameters` for a known conditional (no uncertainty box): the same maxima in O(a b)
    plus two (a x a) products in compiled code instead of an (a x a x b) scan (many-level tables).

    alpha: per column, the largest ``p[x, i] / p[x', i]`` over x != x' with ``p[x', i] > tiny`` pairs the
    column's largest entry with its smallest positive one (or, when both sit in one row, the better of the
    runners-up); gamma equals alpha (the same ordered pairs read backwards). delta: ``P @ 1[P <= tiny]^T``.
    phi: ``sum_i (p_x - p_x')_+ = (|p_x - p_x'|_1 + sum p_x - sum p_x') / 2`` plus a rounding slack
    ``(b + 2) eps_mach`` on the safe side (never below the exact total variation).
    """
    from scipy.spatial.distance import cdist

    a, b = p.shape
    if a < 2:
        return 0.0, 0.0, 0.0, 0.0
    cols = np.arange(b)
    pos = p > _TINY
    order_hi = np.argsort(-p, axis=0, kind="stable")
    top1, top2 = p[order_hi[0], cols], p[order_hi[1], cols]
    masked = np.where(pos, p, np.inf)
    order_lo = np.argsort(masked, axis=0, kind="stable")
    low1, low2 = masked[order_lo[0], cols], masked[order_lo[1], cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        same = order_hi[0] == order_lo[0]
        best = np.where(same, np.maximum(top1 / low2, top2 / low1), top1 / low1)
    best = np.where(np.isfinite(low1), best, -np.inf)  # a column with no positive entry gives no ratio
    best = np.where(np.isnan(best), -np.inf, best)
    alpha = float(np.log(max(float(best.max(initial=-np.inf)), 1.0)))
    off = ~np.eye(a, dtype=bool)
    # delta multiplies e^eps in the DT bound, so it gets no additive slack (an eps_mach floor would dominate
    # the bound at large eps); it equals the box scan's up to the rounding of a b-term sum
    slack = (b + 2) * np.finfo(np.float64).eps  # rounding of a b-term sum, on the safe side (phi)
    sparse = p @ (~pos).T.astype(np.float64)  # [x, x'] = mass of p_x where p_x' vanishes
    sparse = np.minimum(sparse, 1.0 - p @ pos.T.astype(np.float64) + slack)
    rows = p.sum(axis=1)
    l1 = cdist(p, p, "cityblock")
    tv = 0.5 * (l1 + rows[:, None] - rows[None, :]) + slack
    tv = np.where(l1 == 0.0, 0.0, tv)  # identical rows: exactly no variation (independence gives 0)
    delta = float(np.clip(sparse[off], 0.0, 1.0).max())
    phi = float(np.clip(tv[off], 0.0, 1.0).max())
    return alpha, phi, delta, alpha


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
    box = _uncertainty(p, uncertainty)
    if not box.any():  # known conditional: the same maxima without the (a x a x b) scan
        alpha, phi, delta, gamma = _pair_parameters_known(p)
    else:
        lo, hi = _bounds(p, box)
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
    alpha, phi_a, delta = (np.asarray(v, dtype=np.float64) for v in (triad.alpha, phi, triad.delta))
    out = _dt_closed_form(alpha, phi_a, delta, e)
    out = np.minimum(out, e)
    return float(out) if out.ndim == 0 else out
