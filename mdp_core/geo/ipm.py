"""An interior-point solver for the geo LP that uses its block structure (one dense block per output).

The LP of :mod:`mdp_core.geo.bounds` on any set of privacy rows (a, b, y),

    min  c'P   s.t.  P[a, y] - r_ab P[b, y] <= 0  (the rows),   sum_y P[x, y] = 1,   P >= 0,

couples the variables of one output y only through its privacy rows, and the outputs only through the row
sums. So a Newton step factorises one n x n block per output and an n x n Schur complement
(:mod:`mdp_core.geo._newton`, early on the path in float32): 0.28 s per iteration in all at depth 1 of the
15 km city (117 blocks of 406, 0.5-1.6 M rows; 25-70 iterations per LP), where a general solver sees
0.5-1.9 M sparse rows (HiGHS IPX and simplex did not finish the 1.1-spanner relaxation of that problem in
3 min; PDLP stops at ~1e-3 relative accuracy). The element-wise work on the rows (5.8 M at depth 2 of the
city) is done chunk by chunk in cache on all cores (:func:`~mdp_core._cores.elementwise`).

Mehrotra predictor-corrector with separate primal and dual steps, its centring weight capped at
:data:`_SIGMA_MAX`, and Gondzio's multiple centrality correctors (up to three more solves with the same
factors, each kept only when it lengthens the step). On the city's depth-1 LPs the affine step is blocked
at 0.1-0.2 by a few dozen of a million rows (well centred rows the step drives to their bound: the active
set being decided, not inaccurate directions), so Mehrotra's weight stays at 0.4-0.8 and mu fell by only
~0.8 an iteration: the correctors cut the iterations by about a third (the round-2 LP of 1.04 M rows: 65-71
against 97-102), the cap by another quarter to a third (:data:`_SIGMA_MAX`). The predictor and the trial
correctors skip iterative refinement; the step taken is refined.
Each row is scaled to unit norm (``(P[a] - r P[b]) / sqrt(1 + r^2)``: ``r`` reaches e^20 across a city)
and the Newton systems are refined while that helps (:meth:`~mdp_core.geo._newton.Newton.solve`).
``row_sums`` below 1 solve for some outputs with the others held fixed. A warm start (row generation)
mixes the last solution with 2 % of the uniform mechanism and pushes every complementarity pair off the
boundary (measured: 10 % fewer iterations). The result is data: the solution, the multipliers of the
unscaled rows (any ``nu >= 0`` certifies a bound through :func:`~mdp_core.geo.bounds.certified_bound`,
so their accuracy only costs tightness, never validity) and the convergence record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from mdp_core._cores import chunk_min, chunk_sum, elementwise
from mdp_core._validation import Progress, report
from mdp_core.errors import DataError
from mdp_core.geo._newton import Newton, Structure, factorise

__all__ = ["GeoLPSolution", "solve_geo_lp"]

#: Weight of the uniform mechanism in a warm start, and its complementarity relative to the objective:
#: a tenth, well centred, not 1e-4 (whole LPs after the first round on the 15 km city: 121 against 142
#: iterations at eps 0.5, 138 against 152 at 1.0, 95 against 108 at 1.5).
_WARM_MIX, _WARM_MU = 0.02, 0.1
#: Fraction of the step to the boundary taken (keeps iterates interior).
_STEP = 0.995
#: Gondzio's centrality correctors: at most this many a step, each kept while it lengthens the step by a
#: factor ``_CORRECTOR_GAIN``; products pulled into ``[_CENTRE_LOW, _CENTRE_HIGH] * sigma mu`` at a trial
#: step ``_ASPIRATION`` longer.
_CORRECTORS, _CORRECTOR_GAIN, _ASPIRATION = 3, 1.01, 0.3
_CENTRE_LOW, _CENTRE_HIGH = 0.1, 10.0
#: Largest centring weight: Mehrotra's ``(mu_aff / mu)^3`` stays at 0.4-0.8 on the city's LPs (the affine
#: step is blocked at 0.1-0.2 by a few dozen of a million rows), so mu fell by only ~0.8 an iteration.
#: Capped, the correctors keep the iterates central: city depth 1, whole LPs of both rounds at eps 0.5 /
#: 1 / 1.5: 27+61, 32+70, 30+49 iterations against 32+87, 37+99, 38+74 (``bench geo_optimal``). At 0.1
#: the last iterates are less central and their multipliers certify less: eps 1.0 stopped 1.4e-5 short
#: of the bracket.
_SIGMA_MAX = 0.2
#: The Newton blocks are inverted in float32 until the refined step's relative residual is above this (the
#: float32 factors have then lost too many digits for refinement to recover float64's accuracy) ...
_SINGLE_RESIDUAL = 1e-8
#: ... on blocks of at least this many targets, where the inversion is most of an iteration (1,251 targets:
#: 2.4 against 3.8 s an iteration; ``bench geo_depth2``: the exact optimum at depth 2 of the city in 419 s,
#: 459 s with every block in float64). Smaller problems keep float64's path, and the coset bounds their
#: tightness (in float32 early, two coset tests' bounds fell 1.04e-4 below their relaxations' optima).
_SINGLE_FROM = 700
#: Once the blocks need a shift (:mod:`~mdp_core.geo._newton`), the solve stops when the gap rises above
#: ``_SHIFTED_RISE`` times the least seen, or has not halved in ``_SHIFTED_PATIENCE`` iterations, and returns
#: the iterate of the least gap. The 200 targets at the city's centre, eps 1.5: the steps had lost their
#: digits before any block failed (refined residuals 0.7, 84, 406 at iterations 42-44, gap 3.2e-7), and
#: shifted steps then stalled at a gap of 5e-8 (uncapped centring: rose to 3e-5); the city at depth 2, eps
#: 3.47, converged with them from a gap of 5.5e-7 in 28 iterations.
_SHIFTED_RISE, _SHIFTED_PATIENCE = 10.0, 6


@dataclass(frozen=True)
class GeoLPSolution:
    """Outcome of :func:`solve_geo_lp`.

    Attributes
    ----------
    p : ndarray, shape (n, m)
        Primal solution (meets the rows and row sums; not private by itself for left-out pairs).
    nu : ndarray, shape (r,)
        Multipliers of the (unscaled) privacy rows, ``>= 0``.
    objective : float
        ``c'p``, the expected loss.
    dual_objective : float
        ``sum_x row_sums[x] y[x]`` (a bound only when dual-feasible: see ``certified_bound``).
    iterations : int
    converged : bool
        Duality gap and residuals below ``tol`` at return (or the certificate within ``certify``).
    gap : float
        Relative duality gap ``|c'p - sum y| / (1 + |c'p|)`` at return.
    y : ndarray, shape (n,)
        Multipliers of the row sums (with ``p`` and ``nu``, what a warm start needs).
    """

    p: np.ndarray
    nu: np.ndarray
    objective: float
    dual_objective: float
    iterations: int
    converged: bool
    gap: float
    y: np.ndarray


def _warm_point(
    st: Structure, c: np.ndarray, budget: np.ndarray, start: GeoLPSolution
) -> tuple[np.ndarray, ...]:
    """An interior point near ``start``: its mechanism mixed with a little of the uniform one, its multipliers
    (the new rows' from the complementarity target), all pushed off the boundary to one complementarity."""
    m = st.m
    x = (1.0 - _WARM_MIX) * start.p.ravel() + _WARM_MIX * np.repeat(budget / m, m)
    s_raw = -st.g(x)
    kept = len(start.nu)
    mu = _WARM_MU * float(c @ x) / (len(s_raw) + len(x))
    s = np.maximum(s_raw, np.sqrt(mu))
    lam = np.empty(len(s))
    lam[:kept] = start.nu / st.ra[:kept]  # the scaled rows' multipliers
    lam[kept:] = mu / s[kept:]
    lam = np.maximum(lam, mu / s)
    w = np.maximum(c - np.repeat(start.y, m) + st.gt(lam), mu / x)
    return x, s, lam, w, start.y.copy()


def _direction(
    newton: Newton,
    point: tuple[np.ndarray, ...],
    residuals: tuple[np.ndarray, ...],
    rc_s: np.ndarray,
    rc_x: np.ndarray,
    refine: bool = True,
    unrefined: tuple[np.ndarray, ...] | None = None,
) -> tuple[np.ndarray, ...]:
    """The Newton step (dx, dy, ds, dlam, dw) for complementarity right-hand sides ``rc_s``, ``rc_x``
    (``unrefined``: the same step's unrefined (dx, dy), when refining one computed before)."""
    x, s, lam, w = point
    rp, rg, rd = residuals
    st, d = newton.st, newton.d
    f = -rd + st.gt(elementwise(lambda rc, s, d, rg: rc / s - d * rg, rc_s, s, d, rg)) - rc_x / x
    dx, dy = newton.solve(f, -rp, refine, unrefined)
    ds = elementwise(lambda rg, g: -rg - g, rg, st.g(dx))
    dlam = elementwise(lambda rc, lam, ds, s: (-rc - lam * ds) / s, rc_s, lam, ds, s)
    return dx, dy, ds, dlam, (-rc_x - w * dx) / x


def _max_step(v: np.ndarray, dv: np.ndarray) -> float:
    """Longest ``t <= 1`` with ``v + t dv >= 0`` for ``v > 0`` (one pass: 20x faster than masking)."""
    fastest = chunk_min(np.divide, dv, v)
    return 1.0 if fastest >= -1.0 else -1.0 / fastest


def _step_lengths(point: tuple[np.ndarray, ...], step: tuple[np.ndarray, ...]) -> tuple[float, float]:
    """Longest primal (x, s) and dual (lam, w) steps ``(dx, dy, ds, dlam, dw)`` to the boundary, at most 1."""
    (x, s, lam, w), (dx, _, ds, dlam, dw) = point, step
    return min(_max_step(x, dx), _max_step(s, ds)), min(_max_step(lam, dlam), _max_step(w, dw))


def _centrality_correctors(
    newton: Newton,
    point: tuple[np.ndarray, ...],
    residuals: tuple[np.ndarray, ...],
    step: tuple[np.ndarray, ...],
    rc_s: np.ndarray,
    rc_x: np.ndarray,
    target: float,
) -> tuple[tuple[np.ndarray, ...], tuple[float, float]]:
    """Gondzio's correctors (1996): aim a step ``_ASPIRATION`` longer than the current one, pull the
    complementarity products it would give into ``[_CENTRE_LOW, _CENTRE_HIGH] * target`` and solve for that
    change with the same factors; keep each corrected step while it is longer by ``_CORRECTOR_GAIN``."""
    x, s, lam, w = point
    ap, ad = _step_lengths(point, step)
    for _ in range(_CORRECTORS):
        dx, _, ds, dlam, dw = step
        tp, td = min(1.0, ap + _ASPIRATION), min(1.0, ad + _ASPIRATION)
        trial_s = elementwise(_pulled, rc_s, s, ds, lam, dlam, tp, td, target)
        trial_x = elementwise(_pulled, rc_x, x, dx, w, dw, tp, td, target)
        trial = _direction(newton, point, residuals, trial_s, trial_x, refine=False)
        tap, tad = _step_lengths(point, trial)
        if min(tap, tad) < _CORRECTOR_GAIN * min(ap, ad) and tap + tad < _CORRECTOR_GAIN * (ap + ad):
            break
        step, (ap, ad), rc_s, rc_x = trial, (tap, tad), trial_s, trial_x
    # the trials skip refinement (so does the first step, which a corrector usually replaces): refine
    # the one taken, from its own solve
    step = _direction(newton, point, residuals, rc_s, rc_x, unrefined=step[:2])
    return step, _step_lengths(point, step)


def _pulled(
    rc: np.ndarray,
    v: np.ndarray,
    dv: np.ndarray,
    u: np.ndarray,
    du: np.ndarray,
    tp: float,
    td: float,
    target: float,
) -> np.ndarray:
    """``rc`` less the pull of the products ``(v + tp dv) (u + td du)`` into ``[low, high] * target``."""
    product = _product_at(v, dv, u, du, tp, td)
    high = _CENTRE_HIGH * target
    return rc - np.maximum(np.clip(product, _CENTRE_LOW * target, high) - product, -high)


def _product_at(
    v: np.ndarray, dv: np.ndarray, u: np.ndarray, du: np.ndarray, tp: float, td: float
) -> np.ndarray:
    return (v + tp * dv) * (u + td * du)


def _centred(v: np.ndarray, dv: np.ndarray, u: np.ndarray, du: np.ndarray, shift: float) -> np.ndarray:
    """Mehrotra's corrector right-hand side: the products and the affine step's second-order term, centred."""
    return v * u + dv * du - shift


def _moved(v: np.ndarray, dv: np.ndarray, t: float) -> np.ndarray:
    return v + t * dv


def _lost_ground(gaps: list[float], gap: float, least: float) -> bool:
    """Shifted steps that no longer pay: the gap well above the least seen, or not halved in a while."""
    stalled = len(gaps) > _SHIFTED_PATIENCE and gap > 0.5 * gaps[-1 - _SHIFTED_PATIENCE]
    return gap > _SHIFTED_RISE * least or stalled


def solve_geo_lp(
    cost: np.ndarray,
    rows: np.ndarray,
    ratios: np.ndarray,
    *,
    tol: float = 1e-8,
    max_iter: int = 200,
    deadline: float | None = None,
    start: GeoLPSolution | None = None,
    row_sums: np.ndarray | None = None,
    certify: float | None = None,
    progress: Progress = None,
) -> GeoLPSolution:
    """Solve the geo LP on the privacy rows ``rows`` by the block interior-point method (module docstring).

    Parameters
    ----------
    cost : ndarray, shape (n, m)
        ``c[x, y] = pi(x) L(x, y)``.
    rows : ndarray of int, shape (r, 3)
        Privacy rows (a, b, y): ``P[a, y] <= ratio * P[b, y]``, ``a != b``.
    ratios : ndarray, shape (r,)
        ``exp(eps d(a, b)) > 1`` per row.
    tol : float
        Relative duality gap and residuals at which to stop.
    max_iter : int
    deadline : float, optional
        ``perf_counter()`` time to return by (``converged=False``): no step starts that would overrun it.
    start : GeoLPSolution, optional
        A solution of the same LP on the first ``len(start.nu)`` of ``rows`` (row generation): the solve
        starts near it instead of at the uniform mechanism.
    row_sums : ndarray, shape (n,), optional
        ``sum_y P[x, y]`` (default 1): below 1 when some outputs' columns are held fixed and only the
        others are solved for (:func:`~mdp_core.geo.optimal.optimal_geo_mechanism`'s column passes).
    certify : float, optional
        Also stop once the rows are met to this accuracy and the certificate of ``nu``
        (:func:`~mdp_core.geo.bounds.certified_bound`) is this close to the objective, relative: what a
        bracket needs (round 2 of the exact optimum, city depth 1, eps 1.5: at iteration 38 of 44).

    Returns
    -------
    GeoLPSolution
    """
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    rows = np.asarray(rows, dtype=np.int64)
    ratios = np.asarray(ratios, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != 3 or len(rows) != len(ratios):
        raise DataError("rows must be (r, 3) with one ratio per row")
    if np.any(rows[:, 0] == rows[:, 1]) or np.any(ratios <= 1.0):
        raise DataError("every privacy row needs two distinct targets at positive distance")
    budget = np.ones(n) if row_sums is None else np.asarray(row_sums, dtype=np.float64)
    if budget.shape != (n,) or not np.all(budget > 0.0):
        raise DataError(f"row_sums must be {n} positive numbers")
    st = Structure.build(n, m, rows, ratios)
    with threadpool_limits(limits=1):  # threads go over the blocks instead (BLAS threads on them were slower)
        return _interior_point(st, cost.ravel(), budget, tol, max_iter, deadline, start, certify, progress)


def _interior_point(
    st: Structure,
    c: np.ndarray,
    budget: np.ndarray,
    tol: float,
    max_iter: int,
    deadline: float | None,
    start: GeoLPSolution | None,
    certify: float | None,
    progress: Progress,
) -> GeoLPSolution:
    """Mehrotra predictor-corrector from the uniform mechanism or near ``start`` (module docstring)."""
    n, m = st.n, st.m
    if start is None:
        x = np.repeat(budget / m, m)  # the uniform mechanism: interior for every row when budget is 1
        s = np.maximum(-st.g(x), 0.1 / m)  # (otherwise the start is infeasible in the rows it breaks)
        mu0 = float(np.abs(c).mean()) + 1e-12
        lam, w, y = mu0 / s, np.full(n * m, mu0 * m), np.zeros(n)
    else:
        x, s, lam, w, y = _warm_point(st, c, budget, start)
    count = len(s) + len(x)
    buffer = np.empty((m, n, n))  # the Hessian blocks, then their inverses, every iteration
    single = buffer.reshape(-1).view(np.float32)[: m * n * n].reshape(m, n, n)  # its first half
    precise = n < _SINGLE_FROM  # else from the first iteration that needs it on: float64 blocks
    shift = 0.0  # of the blocks' diagonals, once float64 ones are not definite (kept from then on)
    least = (np.inf, x, s, lam, w, y)  # the last unshifted iterate, then the least gap's of the shifted ones
    shifted_gaps: list[float] = []
    gap, converged, iterations, tick = 1.0, False, 0, time.perf_counter()
    scale = 1.0 + float(np.abs(c).max())  # of the dual residual
    best_estimate, best_lam = -np.inf, lam
    for iterations in range(1, max_iter + 1):  # noqa: B007 (the count is returned)
        rp = st.row_sums(x) - budget
        rg = elementwise(np.add, st.g(x), s)
        reduced = c + st.gt(lam)
        rd = reduced - np.repeat(y, m) - w
        objective, dual = float(c @ x), float(y @ budget)
        # any lam >= 0 certifies sum_x budget_x min_y (c + G'lam)[x, y]; keep the best multipliers seen
        estimate = float(reduced.reshape(n, m).min(axis=1) @ budget)
        if estimate > best_estimate:
            best_estimate, best_lam = estimate, lam
        gap = abs(objective - dual) / (1.0 + abs(objective))
        if not shift or gap < least[0]:  # (new arrays each step: holding the iterates copies nothing)
            least = (gap, x, s, lam, w, y)
        if shift:
            shifted_gaps.append(gap)
        feasible = np.abs(rp).max() <= tol
        certified = (  # and the rows met as closely: an infeasible x's objective proves nothing
            certify is not None
            and objective - best_estimate <= certify * abs(objective)
            and np.abs(rg).max() <= certify
        )
        if feasible and (certified or (gap <= tol and np.abs(rd).max() <= tol * scale)):
            converged = True
            break
        now = time.perf_counter()
        if deadline is not None and 2.0 * now - tick > deadline:  # the next step would end past it
            break
        if shift and _lost_ground(shifted_gaps, gap, least[0]):
            break
        tick = now
        done = min(0.99, np.log10(max(gap, 1e-12)) / np.log10(tol))
        report(progress, done, f"interior point: gap {gap:.1e}")
        mu = (float(lam @ s) + float(w @ x)) / count
        d = elementwise(np.divide, lam, s)
        newton = factorise(st, d, w / x, buffer if precise else single, shift)
        if newton is None and not precise:  # float32 lost definiteness: float64 from here on
            precise, newton = True, factorise(st, d, w / x, buffer)
        if newton is None:
            break  # no shift made the blocks definite at the end of the path: keep the last iterate
        shift = newton.shift
        point, residuals = (x, s, lam, w), (rp, rg, rd)
        dx, dy, ds, dlam, dw = _direction(newton, point, residuals, lam * s, w * x, refine=False)
        ap, ad = _step_lengths(point, (dx, dy, ds, dlam, dw))
        mu_aff = chunk_sum(_product_at, s, ds, lam, dlam, ap, ad) + chunk_sum(
            _product_at, x, dx, w, dw, ap, ad
        )
        sigma = min(_SIGMA_MAX, (mu_aff / count / mu) ** 3)
        rc_s = elementwise(_centred, s, ds, lam, dlam, sigma * mu)
        rc_x = elementwise(_centred, x, dx, w, dw, sigma * mu)
        step = _direction(newton, point, residuals, rc_s, rc_x, refine=False)
        step, (ap, ad) = _centrality_correctors(newton, point, residuals, step, rc_s, rc_x, sigma * mu)
        dx, dy, ds, dlam, dw = step
        # float32 factors that no longer refine the step to float64's accuracy: float64 from here on
        precise = precise or newton.residual > _SINGLE_RESIDUAL
        ap, ad = _STEP * ap, _STEP * ad
        x, s = x + ap * dx, elementwise(_moved, s, ds, ap)
        lam, w, y = elementwise(_moved, lam, dlam, ad), w + ad * dw, y + ad * dy
    if shift and not converged and least[0] < gap:  # shifted steps lost ground: back to the best iterate
        gap, x, s, lam, w, y = least
    nu = np.maximum(best_lam, 0.0) * st.ra  # multipliers of the unscaled rows
    return GeoLPSolution(
        p=x.reshape(n, m),
        nu=nu,
        objective=float(c @ x),
        dual_objective=float(y @ budget),
        iterations=iterations,
        converged=converged,
        gap=gap,
        y=y,
    )
