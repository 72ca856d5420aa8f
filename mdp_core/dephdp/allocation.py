"""Cross-group privacy-budget allocation with convex envelopes and a sandwich bound (000 Sec. III-F, App. B).

Problem (000 Eq. 34, generalised to any l_p record metric through the dual exponent q, 000 App. C)::

    minimise  beta0 + sum_k beta_k L_k(eps_k)   s.t.  ||eps||_q <= eps_total,  eps_k in [g_0, g_N]

where ``L_k`` is the piecewise-linear (PL) interpolation of row k of ``losses`` on the ascending grid ``g``.

Method
------
1. Envelopes per group (000 Eq. 35-37): the greatest convex minorant (GCM, the lower convex hull of the
   sampled points, which is the optimum of LP 36) and the least convex majorant (LCM, LP 37 solved with
   HiGHS). The horizontal shift of 000 App. B-B moves the lower envelope one grid step left and the upper
   one step right (boundary points extrapolated), after which the lower sequence is re-convexified with
   its GCM and the upper with its LCM, so both stay convex on non-uniform grids too.
2. Allocations by Lagrangian bisection (000 App. B-A): for a multiplier lambda each group solves
   ``min_e beta_k L_k(e) + lambda e^q`` exactly on its PL curve (segment end points and the stationary
   point ``e = (-s / (lambda q))^(1/(q-1))``); ``s(lambda) = sum eps_k(lambda)^q`` is non-increasing and
   is bisected to ``eps_total^q``. For q = 1 (p = inf) convex curves are filled greedily by slope (exact);
   for q = inf (p = 1) the groups decouple.
3. Candidates: the lower-envelope, upper-envelope and raw-curve Lagrangian allocations, the uniform split,
   and any caller-supplied feasible allocations; the best on the raw curves is returned (``value``).
4. ``lower_bound`` is the Lagrangian dual of the problem on the shifted lower envelope,
   ``beta0 + sum_k min_e [beta_k Lbar_k(e) + lambda e^q] - lambda eps_total^q``, which by weak duality
   never exceeds the true optimum on the raw curves (Proposition 2). ``rel_err = (value - lb) / lb``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from mdp_core._validation import as_float_array, check_positive
from mdp_core.errors import DataError
from mdp_core.metrics import budget_norm, dual_exponent

__all__ = [
    "BudgetAllocation",
    "allocate_budget",
    "greatest_convex_minorant",
    "least_convex_majorant",
    "pl_value",
    "shifted_envelopes",
]


@dataclass(frozen=True, eq=False)
class BudgetAllocation:
    """Result of :func:`allocate_budget`.

    Attributes
    ----------
    eps : ndarray (K,)
        Budget per group; ``||eps||_q <= eps_total``.
    value : float
        ``beta0 + sum_k beta_k L_k(eps_k)`` on the raw PL curves.
    lower_bound : float
        Convex-envelope (dual) lower bound on the optimum (Proposition 2); ``lower_bound <= value``.
    rel_err : float
        ``(value - lower_bound) / lower_bound`` (0 when both are 0, inf when only the bound is 0).
    method : str
        Which candidate won (``"lower"``, ``"upper"``, ``"raw"``, ``"uniform"`` or ``"given<i>"``).
    candidates : dict
        Raw-curve value of every candidate.
    lower_envelope, upper_envelope : ndarray (K, N)
        The shifted convex envelopes on the grid (values, not beta-weighted).
    """

    eps: np.ndarray
    value: float
    lower_bound: float
    rel_err: float
    p: float
    q: float
    eps_total: float
    method: str
    candidates: dict[str, float] = field(default_factory=dict)
    lower_envelope: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    upper_envelope: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def pl_value(eps_grid: np.ndarray, values: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """PL interpolation of each row of ``values`` (K x N) at ``eps[k]``; returns (K,)."""
    grid, rows = _check_curves(eps_grid, values, "values")
    e = as_float_array(eps, "eps", ndim=1)
    if e.size != rows.shape[0]:
        raise DataError(f"eps must have one budget per row of values ({rows.shape[0]}), got {e.size}")
    return np.array([np.interp(ek, grid, row) for ek, row in zip(e, rows, strict=True)])


def _check_points(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = as_float_array(x, "x", ndim=1), as_float_array(y, "y", ndim=1)
    if ys.size != xs.size:
        raise DataError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if np.any(np.diff(xs) <= 0):
        raise DataError("x must be strictly ascending")
    return xs, ys


def greatest_convex_minorant(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Lower convex hull of the points ``(x_i, y_i)`` evaluated at ``x`` (the optimum of 000 Eq. 36)."""
    x, y = _check_points(x, y)
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b lies on or above the chord a -> i: drop it.
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.minimum(np.interp(x, x[hull], y[hull]), y)


def least_convex_majorant(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least convex majorant on the grid: ``min sum u`` s.t. discrete convexity and ``u >= y`` (000 Eq. 37).

    Solved with HiGHS; the result is raised to ``max(u, y)`` to remove solver tolerance.
    """
    x, y = _check_points(x, y)
    n = x.size
    if n <= 2:
        return y.copy()
    h = np.diff(x)
    rows = n - 2
    # slope_i - slope_{i+1} <= 0 with slope_i = (u_{i+1} - u_i) / h_i
    idx = np.arange(rows)
    cols = np.stack([idx, idx + 1, idx + 2], axis=1)
    vals = np.stack([-1.0 / h[:-1], 1.0 / h[:-1] + 1.0 / h[1:], -1.0 / h[1:]], axis=1)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, rows
    lp.col_cost_ = np.ones(n)
    lp.col_lower_ = y.astype(float)
    lp.col_upper_ = np.full(n, highspy.kHighsInf)
    lp.row_lower_ = np.full(rows, -highspy.kHighsInf)
    lp.row_upper_ = np.zeros(rows)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, 3 * rows + 1, 3, dtype=np.int32)
    lp.a_matrix_.index_ = cols.ravel().astype(np.int32)
    lp.a_matrix_.value_ = vals.ravel()
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return np.full(n, float(np.max(y)))  # a constant is always a convex majorant
    return np.maximum(np.asarray(solver.getSolution().col_value), y)


def shifted_envelopes(eps_grid: object, losses: object) -> tuple[np.ndarray, np.ndarray]:
    """Horizontally shifted convex envelopes of every row (000 App. B-B, Proposition 4).

    Lower: ``l'_i = min(gcm_i, gcm_{i+1})``, ``l'_N = gcm_N`` (Prop. 4 needs only ``l'_N <= L(eps_N)``:
    budgets never exceed the grid; extrapolating the last slope took a non-negative loss's bound below 0),
    then its GCM. Upper: ``u'_i = lcm_{i-1}`` (first point extrapolated), then its LCM. For
    non-increasing curves these bound the continuous loss between grid points as well; both are convex.

    Returns
    -------
    (lower, upper) : two (K, N) arrays
    """
    grid, L = _check_curves(eps_grid, losses)
    lower = np.empty_like(L)
    upper = np.empty_like(L)
    for k, row in enumerate(L):
        g = greatest_convex_minorant(grid, row)
        nxt = np.append(g[1:], g[-1])
        lower[k] = greatest_convex_minorant(grid, np.minimum(g, nxt))
        u = least_convex_majorant(grid, row)
        prev = np.insert(u[:-1], 0, u[0] + (u[0] - u[1]) if u.size > 1 else u[0])
        upper[k] = least_convex_majorant(grid, np.maximum(np.maximum(u, prev), row))
    return lower, upper


def _check_curves(eps_grid: object, losses: object, name: str = "losses") -> tuple[np.ndarray, np.ndarray]:
    grid = as_float_array(eps_grid, "eps_grid", ndim=1)
    L = as_float_array(losses, name, ndim=2)
    if grid[0] <= 0 or np.any(np.diff(grid) <= 0):
        raise DataError("eps_grid must be strictly ascending with eps_grid[0] > 0")
    if L.shape[1] != grid.size:
        raise DataError(f"{name} must have {grid.size} columns (one per grid point), got shape {L.shape}")
    return grid, L


@dataclass(frozen=True, eq=False)
class _Segments:
    """The parts of :func:`_segment_min` that do not depend on lambda (computed once per bisection)."""

    grid: np.ndarray
    vals: np.ndarray
    a: np.ndarray
    b: np.ndarray
    slope: np.ndarray
    steep: np.ndarray  # max(-slope, 0)
    descending: np.ndarray  # slope < 0
    at_grid: np.ndarray  # the grid broadcast to the rows
    rows: np.ndarray

    @classmethod
    def of(cls, grid: np.ndarray, vals: np.ndarray) -> _Segments:
        a, b = grid[:-1], grid[1:]
        slope = np.diff(vals, axis=1) / (b - a)
        return cls(
            grid,
            vals,
            a,
            b,
            slope,
            np.maximum(-slope, 0),
            slope < 0,
            np.broadcast_to(grid, vals.shape),
            np.arange(vals.shape[0]),
        )


def _segment_min(
    grid: np.ndarray, vals: np.ndarray, lam: float, q: float, seg: _Segments | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: argmin and min of ``vals_k(e) + lam e^q`` over the PL curve on ``grid`` (exact).

    ``seg`` (from :meth:`_Segments.of` on the same grid and values) skips the lambda-free set-up."""
    s = _Segments.of(grid, vals) if seg is None else seg
    es, fv = s.at_grid, s.vals  # the PL curve at the grid points, then at the stationary points inside
    if lam > 0 and np.isfinite(q) and q > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = np.where(s.descending, (s.steep / (lam * q)) ** (1.0 / (q - 1.0)), s.a)
        inside = np.clip(stat, s.a, s.b)
        # same arithmetic as np.interp on segment i (vals_i + slope_i (e - a_i)); at e = b_i interp takes the
        # next grid value itself, so that is used there: bitwise equal to the per-row interp, without a loop
        inner = np.where(inside >= s.b, s.vals[:, 1:], s.slope * (inside - s.a) + s.vals[:, :-1])
        es = np.concatenate([es, inside], axis=1)
        fv = np.concatenate([s.vals, inner], axis=1)
    pen = 0.0 if lam == 0 else lam * (es if q == 1 else es**q)
    obj = fv + pen
    j = np.argmin(obj, axis=1)
    return es[s.rows, j], obj[s.rows, j]


def _truncate(grid: np.ndarray, W: np.ndarray, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Restrict the PL curves to [grid[0], hi]."""
    keep = grid < hi
    g = np.append(grid[keep], hi)
    vals = np.column_stack([W[:, keep], [np.interp(hi, grid, w) for w in W]])
    return g, vals


def _lagrangian(grid: np.ndarray, W: np.ndarray, eps_total: float, q: float) -> tuple[np.ndarray, float]:
    """Bisection on lambda (000 App. B-A). ``W`` is beta-weighted. Returns (feasible eps, lambda)."""
    target = eps_total**q
    seg = _Segments.of(grid, W)
    eps0, _ = _segment_min(grid, W, 0.0, q, seg)
    if np.sum(eps0**q) <= target:
        return eps0, 0.0
    scale = float(np.max(np.abs(np.diff(W, axis=1)) / np.diff(grid))) + 1e-300
    lam_lo, lam_hi = 0.0, scale / max(q * grid[0] ** (q - 1), 1e-300)
    for _ in range(200):
        if np.sum(_segment_min(grid, W, lam_hi, q, seg)[0] ** q) <= target:
            break
        lam_hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lam_lo + lam_hi)
        if np.sum(_segment_min(grid, W, mid, q, seg)[0] ** q) <= target:
            lam_hi = mid
        else:
            lam_lo = mid
        if lam_hi - lam_lo <= 1e-13 * lam_hi:
            break
    return _segment_min(grid, W, lam_hi, q, seg)[0], lam_hi


def _greedy_linear(grid: np.ndarray, W: np.ndarray, eps_total: float) -> np.ndarray:
    """Exact optimum for convex PL rows under ``sum eps_k <= eps_total`` (q = 1): fill by slope."""
    K = W.shape[0]
    eps = np.full(K, grid[0])
    budget = eps_total - eps.sum()
    slopes = np.diff(W, axis=1) / np.diff(grid)
    order = np.argsort(slopes, axis=None, kind="stable")
    for flat in order:
        k, i = divmod(int(flat), slopes.shape[1])
        if slopes[k, i] >= 0 or budget <= 0:
            break
        step = min(grid[i + 1] - grid[i], budget)
        eps[k] += step
        budget -= step
    return np.minimum(eps, grid[-1])


def _allocate_on(grid: np.ndarray, W: np.ndarray, eps_total: float, q: float, convex: bool) -> np.ndarray:
    if np.isinf(q):
        return _segment_min(grid, W, 0.0, q)[0]
    if q == 1 and convex:
        return _greedy_linear(grid, W, eps_total)
    return _lagrangian(grid, W, eps_total, q)[0]


def _dual_bound(grid: np.ndarray, W: np.ndarray, eps_total: float, q: float) -> float:
    """max over a few lambdas of the Lagrangian dual on the (truncated) curves ``W``: a valid lower bound."""
    if np.isinf(q):
        return float(np.sum(_segment_min(grid, W, 0.0, q)[1]))
    seg = _Segments.of(grid, W)
    best = float(np.sum(_segment_min(grid, W, 0.0, q, seg)[1])) - 0.0
    _, lam = _lagrangian(grid, W, eps_total, q)
    slopes = np.abs(np.diff(W, axis=1) / np.diff(grid)).ravel()
    lams = {lam, *(lam * f for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0))}
    if q == 1:
        lams |= set(slopes.tolist())
    for lm in lams:
        best = max(best, float(np.sum(_segment_min(grid, W, lm, q, seg)[1])) - lm * eps_total**q)
    return best


def allocate_budget(
    eps_grid: object,
    losses: object,
    eps_total: float,
    *,
    p: float = 2.0,
    betas: object = None,
    beta0: float = 0.0,
    candidates: Sequence[object] | Mapping[str, object] | None = None,
    envelopes: tuple[np.ndarray, np.ndarray] | None = None,
) -> BudgetAllocation:
    """Allocate ``eps_total`` across K groups with loss-budget curves (000 Eq. 34-37, Prop. 2, App. B).

    Parameters
    ----------
    eps_grid : array (N,)
        Strictly ascending budgets, ``eps_grid[0] > 0`` (unit: 1 / metric unit).
    losses : array (K, N)
        ``L_k(eps_grid[i])``; ``L_k`` between grid points is the PL interpolation.
    eps_total : float
        Global budget eps; the constraint is ``||eps||_q <= eps_total`` with ``1/p + 1/q = 1`` (Theorem 1).
    p : float
        Record metric exponent, ``p >= 1`` or ``inf``.
    betas : array (K,), optional
        Non-negative surrogate weights (default 1). ``beta0``: the surrogate intercept.
    candidates : optional
        Extra allocations (K,) to consider; infeasible ones raise DataError.
    envelopes : optional
        Precomputed :func:`shifted_envelopes` ``(lower, upper)`` for these curves (speed).

    Returns
    -------
    BudgetAllocation
    """
    grid, L = _check_curves(eps_grid, losses)
    K = L.shape[0]
    eps_total = check_positive(eps_total, "eps_total")
    q = dual_exponent(p)
    b = np.ones(K) if betas is None else as_float_array(betas, "betas", ndim=1)
    if b.size != K or np.any(b < 0):
        raise DataError(f"betas must be {K} non-negative numbers")
    if not np.isfinite(beta0):
        raise DataError("beta0 must be finite")
    if budget_norm(np.full(K, grid[0]), q) > eps_total * (1 + 1e-12):
        raise DataError(
            f"eps_total={eps_total:g} is too small: every group needs at least eps_grid[0]={grid[0]:g} "
            f"and ||eps||_q of that is {budget_norm(np.full(K, grid[0]), q):.4g}"
        )
    lower, upper = shifted_envelopes(grid, L) if envelopes is None else envelopes
    hi = min(grid[-1], eps_total)
    raw = lambda e: float(beta0 + np.dot(b, pl_value(grid, L, e)))  # noqa: E731
    found: dict[str, np.ndarray] = {}
    for name, curves, convex in (("lower", lower, True), ("upper", upper, True), ("raw", L, False)):
        g, W = _truncate(grid, b[:, None] * curves, hi)
        found[name] = _allocate_on(g, W, eps_total, q, convex)
    found["uniform"] = np.full(K, min(eps_total / (K ** (1 / q) if np.isfinite(q) else 1.0), grid[-1]))
    items = candidates.items() if isinstance(candidates, Mapping) else enumerate(candidates or [])
    for label, cand in items:
        e = as_float_array(cand, "candidates", ndim=1)
        if e.size != K or budget_norm(e, q) > eps_total * (1 + 1e-9) or e.min() < grid[0] * (1 - 1e-12):
            raise DataError(f"candidate {label!r} is not a feasible allocation")
        found[f"given{label}" if isinstance(label, int) else str(label)] = e
    values = {}
    for name, e in found.items():
        e = np.clip(e, grid[0], grid[-1])
        norm = budget_norm(e, q)
        if norm > eps_total:  # float round-off only: shrink onto the constraint
            e = np.maximum(e * (eps_total / norm) * (1 - 1e-15), grid[0])
        found[name] = e
        values[name] = raw(e)
    best = min(values, key=values.__getitem__)
    g, W = _truncate(grid, b[:, None] * lower, hi)
    lb = min(beta0 + _dual_bound(g, W, eps_total, q), values[best])
    value = values[best]
    rel = 0.0 if value == lb else (np.inf if lb <= 0 else (value - lb) / lb)
    return BudgetAllocation(
        eps=found[best],
        value=value,
        lower_bound=float(lb),
        rel_err=float(rel),
        p=float(p),
        q=float(q),
        eps_total=eps_total,
        method=best,
        candidates=values,
        lower_envelope=lower,
        upper_envelope=upper,
    )
